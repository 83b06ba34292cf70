"""The one module that talks to the ``openai`` client and the Chat Completions wire format.

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
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
import pydantic
from openai.resources.chat.completions import AsyncCompletions
from openai.types.chat import ChatCompletionChunk

from .errors import (
    BadUsage,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
)

__all__ = [
    "NO_KEY",
    "ModelClient",
    "assistant_message",
    "json_schema_response_format",
    "settings_problem",
]

ChunkCallback = Callable[[Any, str, dict[str, Any]], Awaitable[None]]

RESERVED_SETTINGS = frozenset({"messages", "tools"})
"""Request fields an agent fills in itself; they are not model settings."""
REQUEST_OPTIONS = {  # keyword of create() -> key of the client's request options
    "extra_headers": "headers",
    "extra_query": "params",
    "extra_body": "extra_json",
    "timeout": "timeout",
}
REQUEST_FIELDS = frozenset(inspect.signature(AsyncCompletions.create).parameters) - {
    "self", *REQUEST_OPTIONS
}
"""The body fields ``chat.completions.create()`` of the installed ``openai`` takes."""
STREAM_CLASS: Any = openai.AsyncStream[object]  # streamed chunks come back as plain dicts
NO_KEY = "no-key"
"""The API key sent to a base URL given without one: local servers (Ollama, vLLM, LM Studio,
llama.cpp) take any key."""
UNSENDABLE = ("holds a character HTTP cannot carry in a header (a line break, a tab, a control "
              "or a non-ASCII character)")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token


def settings_problem(settings: Mapping[str, Any]) -> str | None:
    """Why ``model_settings`` could not be sent (one sentence), or None when they can."""
    reserved = RESERVED_SETTINGS & settings.keys()
    if reserved:
        return (f"model_settings cannot hold {', '.join(sorted(reserved))}: "
                "use messages= and tools= on the agent")
    return _request_problem(settings)


def _request_problem(request: Mapping[str, Any]) -> str | None:
    unknown = request.keys() - REQUEST_FIELDS - REQUEST_OPTIONS.keys()
    if unknown:
        names = ", ".join(repr(name) for name in sorted(unknown, key=str))
        return (f"model_settings has {names}, which chat.completions.create() of openai "
                f"{openai.__version__} does not take; send other fields with extra_body={{...}}")
    response_format = request.get("response_format")
    if isinstance(response_format, type):
        return ("response_format is a class: use agent.json(prompt, schema=...) for structured "
                "output, or give response_format as a dict")
    headers = request.get("extra_headers")
    if headers is not None:
        return headers_problem(headers, "model_settings extra_headers")
    return None


def headers_problem(headers: Any, where: str) -> str | None:
    """Why ``headers`` could not be sent (naming the header, never quoting its value)."""
    if not isinstance(headers, Mapping):
        return f"{where} must be a dict of header names and values"
    for name, value in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
            return f"{where} has a header name HTTP cannot carry: {name!r}"
        if isinstance(value, (openai.Omit, openai.NotGiven)):
            continue  # openai's way to leave a default header out
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if not isinstance(value, str):
            return f"{where}[{name!r}] must be a string, not {type(value).__name__}"
        if value != value.strip() or not _sendable(value):
            return f"{where}[{name!r}] {UNSENDABLE}, or space around it"
    return None


def _sendable(text: str) -> bool:
    return text.isascii() and text.isprintable()


def _checked_key(key: Any, source: str) -> Any:
    """``key`` without the whitespace around it (a key read from a file ends with a newline),
    None when that leaves nothing; a ``BadUsage`` that does not quote it when HTTP cannot
    carry it. openai's key provider (an async callable) is returned as it is."""
    if key is None or callable(key):
        return key
    if not isinstance(key, str):
        raise BadUsage(f"{source} must be a string, not {type(key).__name__}")
    key = key.strip()
    if not _sendable(key):
        raise BadUsage(f"{source} {UNSENDABLE}: was it copied whole, and only it?")
    return key or None


def _checked_base_url(url: Any, source: str) -> str | None:
    """``url`` without the whitespace around it; a ``BadUsage`` (that does not quote it: it may
    hold a password) when it is not an http(s) URL."""
    if url is None:
        return None
    if not isinstance(url, (str, httpx2.URL)):
        raise BadUsage(f"{source} must be a string, not {type(url).__name__}")
    text = str(url).strip()
    if not text:
        return None
    try:  # the parser's message may quote a piece of the URL: a password, say
        scheme = httpx2.URL(text).scheme
    except httpx2.InvalidURL:
        problem = f"{source} is not a valid URL"
    else:
        if scheme in ("http", "https"):
            return text
        problem = f"{source} must start with http:// or https://"
    raise BadUsage(problem)


def _body_and_options(request: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """The JSON body and the client's request options (its ``RequestOptions`` dict), as
    ``create()`` would build them."""
    problem = _request_problem(request)
    if problem:
        raise BadUsage(problem)
    body: dict[str, Any] = {}
    options: dict[str, Any] = {"security": {"bearer_auth": True}}
    for key, value in request.items():
        if isinstance(value, (openai.NotGiven, openai.Omit)):
            continue
        option = REQUEST_OPTIONS.get(key)
        if option is None:
            body[key] = value
        elif option == "timeout" or value is not None:
            options[option] = value
    return body, options


_tls: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, made once per process and shared by every client made
    here: loading the certificate store costs 60-150 ms, and a script that calls
    ``asyncio.run`` per turn gets a new client (for its new event loop) every turn."""
    global _tls
    if _tls is None:
        _tls = httpx2.create_ssl_context()
    return _tls


@dataclass
class _LoopClient:
    client: openai.AsyncOpenAI
    closer: AsyncGenerator[None, None]  # closes it when the loop shuts down


class ModelClient:
    """Owns the ``openai.AsyncOpenAI`` client(s) of one ``Fragola`` instance.

    A client made here is made per event loop: its connection pool belongs to the loop it was
    first used on, and notebooks, ``run_sync`` and scripts that call ``asyncio.run`` per turn
    use more than one loop. It is closed when its loop shuts down (``asyncio.run`` and
    ``asyncio.Runner`` close async generators before they close the loop), so no socket
    outlives its loop. A client passed in by the user is used as it is, and never closed here.

    The key is ``api_key``, else ``OPENAI_API_KEY``; the base URL is ``base_url``, else
    ``OPENAI_BASE_URL``. A base URL without a key (a local server) is sent ``NO_KEY``.
    """

    def __init__(
        self,
        *,
        client: openai.AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self._given = client
        self._options = dict(options or {})
        problem = headers_problem(self._options.get("default_headers") or {}, "default_headers")
        if problem:
            raise BadUsage(problem)
        for option, variable in (("organization", "OPENAI_ORG_ID"),
                                 ("project", "OPENAI_PROJECT_ID")):  # sent as headers too
            value = self._options.get(option) or os.environ.get(variable)
            if isinstance(value, str) and (value != value.strip() or not _sendable(value)):
                raise BadUsage(f"{option} (or {variable}) {UNSENDABLE}, or space around it")
        self._base_url = (_checked_base_url(base_url, "base_url")
                          or _checked_base_url(os.environ.get("OPENAI_BASE_URL"),
                                               "OPENAI_BASE_URL"))
        self._api_key = (_checked_key(api_key or None, "api_key")
                         or _checked_key(os.environ.get("OPENAI_API_KEY"), "OPENAI_API_KEY"))
        if client is None and not self._api_key:
            if not self._base_url:
                raise BadUsage(
                    "no API key: pass api_key= or set OPENAI_API_KEY (a local server needs only "
                    "base_url= or OPENAI_BASE_URL), or run offline with Fragola.scripted() / "
                    "Fragola.from_env()"
                )
            self._api_key = NO_KEY
        if client is None and "http_client" not in self._options:
            _tls_context()  # now, not inside the first request's event loop step
        # Not weak: a loop's client refers to the loop (through its sockets), so a weak key
        # would never go. Entries leave when their loop shuts down (or is found closed).
        self._per_loop: dict[asyncio.AbstractEventLoop, _LoopClient] = {}

    @property
    def base_url(self) -> str:
        if self._given is not None:
            return str(self._given.base_url)
        return self._base_url or "https://api.openai.com/v1"

    def client(self) -> openai.AsyncOpenAI:
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        held = self._per_loop.get(loop)
        if held is None:
            held = self._per_loop[loop] = self._open(loop)
        return held.client

    def _open(self, loop: asyncio.AbstractEventLoop) -> _LoopClient:
        for old in [old for old in self._per_loop if old.is_closed()]:
            # Closed by hand (loop.close()) without shutting down its async generators: its
            # client cannot be closed any more; dropping it lets its sockets be collected.
            del self._per_loop[old]
        options = dict(self._options)
        ours = "http_client" not in options  # the user's own http_client is theirs to close
        if ours:
            options["http_client"] = openai.DefaultAsyncHttpxClient(verify=_tls_context())
        client = openai.AsyncOpenAI(api_key=self._api_key, base_url=self._base_url, **options)
        closer = self._close_with(loop, client, ours)
        # Run it to its yield now: that registers it with the running loop, whose shutdown
        # (asyncio.run, asyncio.Runner) then closes it. No task is left pending for that.
        try:
            closer.asend(None).send(None)
        except StopIteration:
            pass
        return _LoopClient(client, closer)

    async def _close_with(
        self, loop: asyncio.AbstractEventLoop, client: openai.AsyncOpenAI, ours: bool
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            held = self._per_loop.get(loop)
            if held is not None and held.client is client:
                del self._per_loop[loop]
            if ours:
                await client.close()

    async def aclose(self) -> None:
        """Close the client made for the running loop (with an ``http_client`` given in the
        options, that one too)."""
        held = self._per_loop.pop(asyncio.get_running_loop(), None)
        if held is not None:
            await held.closer.aclose()
            await held.client.close()

    async def complete(
        self, request: dict[str, Any], on_chunk: ChunkCallback | None = None
    ) -> dict[str, Any]:
        """Send one request; return the assistant message as a Chat Completions dict.

        ``on_chunk(chunk, content, partial)`` is awaited for each streamed chunk that carries
        choice 0, with the chunk as an ``openai`` ``ChatCompletionChunk`` (built only when
        there is a callback); a plain answer to a streaming request is one such chunk.
        """
        body, options = _body_and_options(request)
        client = self.client()
        try:
            if body.get("stream"):
                stream = await client.post("/chat/completions", body=body, cast_to=object,
                                           options=options, stream=True, stream_cls=STREAM_CLASS)
                return await _read_stream(stream, on_chunk)
            data = await client.post("/chat/completions", body=body, cast_to=object,
                                     options=options)
            return _message_from_response(data)
        except openai.APITimeoutError as exc:
            raise ModelTimeout(f"the model API did not answer in time: {exc}") from exc
        except openai.APIConnectionError as exc:
            if not isinstance(exc.__cause__, httpx2.LocalProtocolError):
                raise ModelConnectionError(f"connection to the model API failed: {exc}") from exc
            # A header the request could not be sent with: raised below, unchained.
        except openai.APIStatusError as exc:
            raise ModelHTTPError(
                f"the model API answered HTTP {exc.status_code}: {_error_text(exc)}",
                status_code=exc.status_code,
            ) from exc
        except openai.APIResponseValidationError as exc:
            raise ModelResponseError(f"the model API's answer was not valid: {exc}") from exc
        except UnicodeEncodeError as exc:
            if exc.encoding != "ascii":  # the JSON body, not a header
                raise BadUsage(
                    f"the request could not be encoded ({exc.reason}): does a message hold a "
                    "lone surrogate, such as '\\ud800'?") from exc
            # A header value that is not ASCII: raised below, unchained.
        except (openai.OpenAIError, ValueError) as exc:
            # A body that is not JSON surfaces as a ValueError from the client's parser.
            raise ModelResponseError(f"the model API's answer was not usable: {exc}") from exc
        except RecursionError as exc:
            raise ModelResponseError(
                "the model API's answer is nested too deeply to be read") from exc
        # Only a key from openai's key provider gets here; the exceptions of the HTTP library
        # quote the whole header, so none is chained (this is raised outside the except).
        raise BadUsage(f"a request header (the API key?) {UNSENDABLE}")


def _error_text(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)
    return exc.message


def _kind(value: Any) -> str:
    return "text" if isinstance(value, str) else type(value).__name__


def _message_from_response(data: Any) -> dict[str, Any]:
    return _message_of(_first_choice(data))


def _first_choice(data: Any) -> Any:
    """The choice with index 0 (or none given) of a completion body."""
    # Any field of a hostile or broken body may be missing or of any type: check what is
    # read, never trust it.
    if not isinstance(data, dict):
        raise ModelResponseError(f"the model API's answer is not a JSON object but {_kind(data)}")
    choices = data.get("choices")
    if not choices:
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            raise ModelResponseError(f"the model API answered an error: {error['message']}")
        raise ModelResponseError("the model API answered with no choices")
    if not isinstance(choices, list):
        raise ModelResponseError(f"the model API's choices are a {_kind(choices)}")
    for choice in choices:
        if not isinstance(choice, dict) or _is_first(choice, "the model API's"):
            return choice
    raise ModelResponseError("the model API's answer has no choice with index 0")


def _is_first(choice: dict[str, Any], whose: str) -> bool:
    # With n > 1 the choices are told apart by their index, never by their place in the list.
    index = choice.get("index")
    if index is None or (type(index) is int and index == 0):
        return True
    if not isinstance(index, int) or isinstance(index, bool):
        raise ModelResponseError(f"{whose} choice index is not a whole number but {_kind(index)}")
    return False


def _message_of(choice: Any) -> dict[str, Any]:
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise ModelResponseError("the model API answered a choice with no message")
    tool_calls = message.get("tool_calls")
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise ModelResponseError("the model API's tool_calls are not a list")
    calls: list[dict[str, Any]] = []
    for call in tool_calls or ():
        if not isinstance(call, dict):
            raise ModelResponseError("a tool call of the model API is not an object")
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        calls.append({
            "id": call.get("id"),
            "type": "function",
            "function": {"name": function.get("name"), "arguments": function.get("arguments")},
        })
    return _checked_message(message.get("content"), calls, message.get("refusal"))


def _checked_message(
    content: Any, tool_calls: list[dict[str, Any]], refusal: Any
) -> dict[str, Any]:
    """The assistant message, or ``ModelResponseError`` when it could not be sent back.

    Whatever is stored goes out again in every later request, so a value of the wrong type,
    a tool call without id or name, or two calls with one id would break the conversation
    for good; a missing arguments string means no arguments, as the run loop reads it.
    """
    for value, what in ((content, "content"), (refusal, "refusal")):
        if value is not None and not isinstance(value, str):
            raise ModelResponseError(
                f"the model API's message {what} is not text but {type(value).__name__}"
            )
    seen: set[str] = set()
    for call in tool_calls:
        call_id, function = call["id"], call["function"]
        if not isinstance(call_id, str) or not call_id or call_id in seen:
            raise ModelResponseError(f"a tool call came without a unique id ({call_id!r})")
        if not isinstance(function["name"], str) or not function["name"]:
            raise ModelResponseError(f"the tool call {call_id!r} came without a name")
        if function["arguments"] is None:
            function["arguments"] = ""
        elif not isinstance(function["arguments"], str):
            raise ModelResponseError(f"the arguments of the tool call {call_id!r} are not a string")
        seen.add(call_id)
    return assistant_message(content, tool_calls, refusal)


def assistant_message(
    content: str | None, tool_calls: list[dict[str, Any]], refusal: str | None
) -> dict[str, Any]:
    """The stored form of an assistant reply, identical whether it was streamed or not."""
    message: dict[str, Any] = {"role": "assistant"}
    if content or not tool_calls:
        message["content"] = content or ""
    if refusal:
        message["refusal"] = refusal
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


async def _read_stream(stream: Any, on_chunk: ChunkCallback | None) -> dict[str, Any]:
    response = stream.response
    content_type = response.headers.get("content-type", "")
    if "text/event-stream" in content_type:
        return await _collect(stream, on_chunk)
    # Not said to be a stream: a server that does not stream answers with one body.
    try:
        body = await response.aread()
    except BaseException as exc:
        await stream.close()
        if isinstance(exc, httpx2.TimeoutException):
            raise openai.APITimeoutError(request=response.request) from exc
        if isinstance(exc, httpx2.TransportError):
            raise openai.APIConnectionError(request=response.request) from exc
        raise
    if body.lstrip().startswith((b"data:", b"event:", b":")):
        return await _collect(stream, on_chunk)  # a stream after all, only mislabelled
    # Read as the client reads a plain answer: JSON when said to be, else the text.
    data = json.loads(body) if content_type.split(";")[0].endswith("json") else body.decode(
        response.encoding or "utf-8", "replace")
    choice = _first_choice(data)
    message = _message_of(choice)
    if on_chunk is not None:
        chunk = _whole_chunk(data, choice, message)
        await on_chunk(_chunk_model(chunk), message.get("content", ""), _copy(message))
    return message


def _whole_chunk(data: dict[str, Any], choice: Any, message: dict[str, Any]) -> dict[str, Any]:
    """The one chunk a streaming server would have sent for a whole ``message``."""
    calls = message.get("tool_calls") or []
    delta = {"role": "assistant", "content": message.get("content"),
             "refusal": message.get("refusal")}
    if calls:
        delta["tool_calls"] = [{"index": i, **_copy_call(c)} for i, c in enumerate(calls)]
    finish_reason = choice.get("finish_reason")
    if not isinstance(finish_reason, str):
        finish_reason = "tool_calls" if calls else "stop"
    head: dict[str, Any] = {key: data[key] for key in ("id", "created", "model", "usage")
                            if key in data}
    return {**head, "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def _copy(message: dict[str, Any]) -> dict[str, Any]:
    """A listener's copy of a stored message: what it changes is not stored."""
    calls = message.get("tool_calls")
    return {**message, "tool_calls": [_copy_call(c) for c in calls]} if calls else dict(message)


def _copy_call(call: dict[str, Any]) -> dict[str, Any]:
    return {**call, "function": dict(call["function"])}


def _chunk_model(chunk: dict[str, Any]) -> ChatCompletionChunk:
    """``chunk`` as the ``openai`` model, without validation (as the client builds them)."""
    try:
        return ChatCompletionChunk.construct(**chunk)
    except (TypeError, AttributeError):
        # construct() has keyword parameters of its own (``_fields_set``...), which a key of
        # the chunk, at any depth, can collide with; no field of a chunk starts with "_".
        return ChatCompletionChunk.construct(**_without_private_keys(chunk))


def _without_private_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_private_keys(item) for key, item in value.items()
                if not (isinstance(key, str) and key.startswith("_"))}
    if isinstance(value, list):
        return [_without_private_keys(item) for item in value]
    return value


async def _collect(stream: Any, on_chunk: ChunkCallback | None) -> dict[str, Any]:
    text: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finished = False
    spoke = False  # a delta came: without any, the stream held a choice with no message
    try:
        async for chunk in stream:
            if not isinstance(chunk, dict):
                raise ModelResponseError(
                    f"a streamed chunk is not a JSON object but {_kind(chunk)}")
            choices = chunk.get("choices")
            if not choices:
                continue  # the usage chunk
            if not isinstance(choices, list):
                raise ModelResponseError("a streamed chunk's choices are not a list")
            for choice in choices:
                if not isinstance(choice, dict):
                    raise ModelResponseError("a streamed chunk's choice is not an object")
                if _is_first(choice, "a streamed"):
                    break
            else:
                continue  # only other choices (n > 1): nothing of this reply
            delta = choice.get("delta")
            piece = ""
            if delta is not None:
                if not isinstance(delta, dict):
                    raise ModelResponseError("a streamed chunk's delta is not an object")
                spoke = True
                piece = _piece(delta.get("content"), "content")
                text.append(piece)
                refusal.append(_piece(delta.get("refusal"), "refusal"))
                parts = delta.get("tool_calls")
                if parts is not None and not isinstance(parts, list):
                    raise ModelResponseError("a streamed chunk's tool_calls are not a list")
                for part in parts or ():
                    _merge_tool_call(calls, part)
            if choice.get("finish_reason") is not None:
                finished = True
            if on_chunk is not None:
                partial = assistant_message("".join(text), _ordered(calls), "".join(refusal))
                await on_chunk(_chunk_model(chunk), piece, partial)
    finally:
        await stream.close()
    if not finished:
        raise ModelConnectionError("the model API's stream ended before the reply was complete")
    if not spoke:
        raise ModelResponseError("the model API streamed a choice with no message")
    return _checked_message("".join(text), _ordered(calls), "".join(refusal) or None)


def _piece(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ModelResponseError(f"a streamed {what} delta is not text but {type(value).__name__}")
    return value


def _merge_tool_call(calls: dict[int, dict[str, Any]], part: Any) -> None:
    if not isinstance(part, dict):
        raise ModelResponseError("a streamed tool call delta is not an object")
    index = part.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise ModelResponseError("a streamed tool call delta came without its index")
    call = calls.get(index)
    if call is None:
        call = calls[index] = {
            "id": "",
            "type": "function",
            "function": {"name": "", "arguments": ""},
        }
    call_id = part.get("id")
    if call_id:
        if not isinstance(call_id, str):
            raise ModelResponseError(f"a streamed tool call id is not text but {_kind(call_id)}")
        call["id"] = call_id
    function = part.get("function")
    if function is not None:
        if not isinstance(function, dict):
            raise ModelResponseError("a streamed tool call's function is not an object")
        call["function"]["name"] += _piece(function.get("name"), "tool name")
        call["function"]["arguments"] += _piece(function.get("arguments"), "tool arguments")


def _ordered(calls: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"id": c["id"], "type": "function", "function": dict(c["function"])}
        for _, c in sorted(calls.items())
    ]


def json_schema_response_format(schema: Any, name: str) -> dict[str, Any]:
    """``response_format`` for structured outputs: strict for a pydantic model."""
    if isinstance(schema, type) and issubclass(schema, pydantic.BaseModel):
        from openai.lib._pydantic import to_strict_json_schema

        body = {"name": name, "schema": to_strict_json_schema(schema), "strict": True}
    else:
        body = {"name": name, "schema": schema, "strict": False}
    return {"type": "json_schema", "json_schema": body}
