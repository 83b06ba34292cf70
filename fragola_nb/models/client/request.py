"""What is sent: model settings checked as ``chat.completions.create()`` checks them, the
JSON body and request options it would build, and keys, headers and base URLs that HTTP can
carry (a ``BadUsage`` otherwise, that never quotes the value: it is often a key)."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Mapping
from typing import Any

import httpx2
import openai
import pydantic

from fragola_nb.base.errors import BadUsage

__all__ = [
    "UNSENDABLE",
    "asking_usage",
    "body_and_options",
    "checked_base_url",
    "checked_key",
    "headers_problem",
    "json_schema_response_format",
    "sendable",
    "settings_problem",
]

RESERVED_SETTINGS = frozenset({"messages", "tools"})
"""Request fields an agent fills in itself; they are not model settings."""
REQUEST_OPTIONS = {  # keyword of create() -> key of the client's request options
    "extra_headers": "headers",
    "extra_query": "params",
    "extra_body": "extra_json",
    "timeout": "timeout",
}


@functools.cache
def request_fields() -> frozenset[str]:
    """The body fields ``chat.completions.create()`` of the installed ``openai`` takes.

    Read on first use: the module that defines ``create()`` is one fragola_nb never calls
    otherwise, and importing it costs ``import fragola_nb`` about 20 ms (bench/import_time.py).
    """
    from openai.resources.chat.completions import AsyncCompletions

    return frozenset(inspect.signature(AsyncCompletions.create).parameters) - {
        "self", *REQUEST_OPTIONS
    }


UNSENDABLE = ("holds a character HTTP cannot carry in a header (a line break, a tab, a control "
              "or a non-ASCII character)")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token


def settings_problem(settings: Mapping[str, Any]) -> str | None:
    """Why ``model_settings`` could not be sent (one sentence), or None when they can."""
    reserved = RESERVED_SETTINGS & settings.keys()
    if reserved:
        return (f"model_settings cannot hold {', '.join(sorted(reserved))}: "
                "use messages= and tools= on the agent")
    return request_problem(settings)


@functools.cache
def _known_keys() -> frozenset[str]:
    return request_fields() | REQUEST_OPTIONS.keys()


def request_problem(request: Mapping[str, Any]) -> str | None:
    unknown = request.keys() - _known_keys()
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
        if value != value.strip() or not sendable(value):
            return f"{where}[{name!r}] {UNSENDABLE}, or space around it"
    return None


def sendable(text: str) -> bool:
    return text.isascii() and text.isprintable()


def checked_key(key: Any, source: str) -> Any:
    """``key`` without the whitespace around it (a key read from a file ends with a newline),
    None when that leaves nothing; a ``BadUsage`` that does not quote it when HTTP cannot
    carry it. openai's key provider (an async callable) is returned as it is."""
    if key is None or callable(key):
        return key
    if not isinstance(key, str):
        raise BadUsage(f"{source} must be a string, not {type(key).__name__}")
    key = key.strip()
    if not sendable(key):
        raise BadUsage(f"{source} {UNSENDABLE}: was it copied whole, and only it?")
    return key or None


def checked_base_url(url: Any, source: str) -> str | None:
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


USAGE_OPTIONS = {"include_usage": True}


def asking_usage(request: Mapping[str, Any]) -> Mapping[str, Any]:
    """``request``, asking a stream for its usage (OpenAI streams report none unless asked)
    when it streams and the caller set no ``stream_options`` of their own;
    ``stream_options=None`` means "ask nothing" (a server that refuses the field). A request
    that does not stream sends none: OpenAI refuses ``stream_options`` without ``stream``,
    and settings that stream may be turned off for one turn (``{"stream": False}``)."""
    streams = request.get("stream") is True
    if "stream_options" in request:
        if request["stream_options"] is None or not streams:
            return {key: value for key, value in request.items() if key != "stream_options"}
        return request
    if streams:
        return {**request, "stream_options": dict(USAGE_OPTIONS)}
    return request


def body_and_options(request: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """The JSON body and the client's request options (its ``RequestOptions`` dict), as
    ``create()`` would build them."""
    problem = request_problem(request)
    if problem:
        raise BadUsage(problem)
    body = dict(request)
    options: dict[str, Any] = {"security": {"bearer_auth": True}}
    for key, value in request.items():
        if isinstance(value, _LEFT_OUT):
            del body[key]
    for key in REQUEST_OPTIONS.keys() & body.keys():  # most requests have none
        value = body.pop(key)
        if key == "timeout" or value is not None:
            options[REQUEST_OPTIONS[key]] = value
    return body, options


_LEFT_OUT = (openai.NotGiven, openai.Omit)


def json_schema_response_format(schema: Any, name: str) -> dict[str, Any]:
    """``response_format`` for structured outputs: strict for a pydantic model."""
    if isinstance(schema, type) and issubclass(schema, pydantic.BaseModel):
        from openai.lib._pydantic import to_strict_json_schema

        body = {"name": name, "schema": to_strict_json_schema(schema), "strict": True}
    else:
        body = {"name": name, "schema": schema, "strict": False}
    return {"type": "json_schema", "json_schema": body}
