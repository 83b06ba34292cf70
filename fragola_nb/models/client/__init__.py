"""The one package that talks to the ``openai`` client and the Chat Completions wire format.

It turns a request dict into an assistant message dict, streamed or not, and every failure of
the API into a ``ModelError`` subclass that keeps the ``openai`` exception as its cause.

Requests go through the client's own ``post("/chat/completions", ...)``: the same client, auth,
retries, timeouts, connection pool and exception classes as ``chat.completions.create()``,
without its two costs that grow with the history. ``create()`` walks the whole request through
``maybe_transform`` (an identity for the plain dicts sent here: no Chat Completions parameter
has an alias or a format) and builds pydantic models of the answer; that walk re-reads every
message on every call, which dominated the CPU per call on long conversations (bench/).
What ``create()`` checks before sending is checked here too: unknown settings and a pydantic
class in ``response_format`` are a ``BadUsage``.

What HTTP cannot carry (an API key or a header value with a line break, a control or a
non-ASCII character) is refused with a ``BadUsage`` that never quotes the value, when it is
given: the key and headers of the ``Fragola`` when it is made, ``extra_headers`` when an agent
is made and before each request. Without that, the request failed inside the HTTP library as a
"Connection error." whose chained exception held the whole key.

Odd servers: with ``n > 1`` only the choice with index 0 is read, streamed or not; a server
that answers a streaming request with one plain completion is heard as if it had streamed it
in one chunk.

Usage: ``ModelClient.reply`` returns the reported usage beside the message (``ModelReply``);
a streaming request asks for it (``stream_options={"include_usage": True}``) unless the caller
set ``stream_options``.

Five modules: ``request`` (what is sent, and what cannot be), ``client`` (``ModelClient``:
the clients per event loop, one request, its errors), ``reply`` (reading the answer),
``reported`` (the usage reported beside it), ``ratelimit`` (``RateLimit``, the pacing of
requests, and the retries of a 429 and the other failures worth trying again).
"""

from __future__ import annotations

from openai import AsyncOpenAI  # the client a Fragola may be given (Fragola(client=...))

from fragola_nb.models.client.client import NO_KEY, ClientSettings, ModelClient, ThrottleCallback
from fragola_nb.models.client.ratelimit import RateLimit, check_rate_limit
from fragola_nb.models.client.reply import assistant_message
from fragola_nb.models.client.reported import ModelReply
from fragola_nb.models.client.request import json_schema_response_format, settings_problem

__all__ = [
    "NO_KEY",
    "AsyncOpenAI",
    "ClientSettings",
    "ModelClient",
    "ModelReply",
    "RateLimit",
    "ThrottleCallback",
    "assistant_message",
    "check_rate_limit",
    "json_schema_response_format",
    "settings_problem",
]
