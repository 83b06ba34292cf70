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
"""

from __future__ import annotations

import asyncio
import inspect
import os
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

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

__all__ = ["ModelClient", "json_schema_response_format", "settings_problem"]

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
    return None


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


class ModelClient:
    """Owns the ``openai.AsyncOpenAI`` client(s) of one ``Fragola`` instance.

    A client made here is made per event loop: its connection pool belongs to the loop it was
    first used on, and notebooks and ``run_sync`` may use more than one loop. A client passed
    in by the user is used as it is.
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
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self._base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if client is None and not self._api_key:
            raise BadUsage(
                "no API key: pass api_key=, set OPENAI_API_KEY, or run offline with "
                "Fragola.scripted() / Fragola.from_env()"
            )
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI]
        self._per_loop = weakref.WeakKeyDictionary()

    @property
    def base_url(self) -> str:
        if self._given is not None:
            return str(self._given.base_url)
        return self._base_url or "https://api.openai.com/v1"

    def client(self) -> openai.AsyncOpenAI:
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        client = self._per_loop.get(loop)
        if client is None:
            client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self._base_url, **self._options
            )
            self._per_loop[loop] = client
        return client

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        client = self._per_loop.pop(loop, None)
        if client is not None:
            await client.close()

    async def complete(
        self, request: dict[str, Any], on_chunk: ChunkCallback | None = None
    ) -> dict[str, Any]:
        """Send one request; return the assistant message as a Chat Completions dict.

        ``on_chunk(chunk, content, partial)`` is awaited for each streamed chunk, with the
        chunk as an ``openai`` ``ChatCompletionChunk`` (built only when there is a callback).
        """
        body, options = _body_and_options(request)
        client = self.client()
        try:
            if body.get("stream"):
                stream = await client.post("/chat/completions", body=body, cast_to=object,
                                           options=options, stream=True, stream_cls=STREAM_CLASS)
                return await _collect(stream, on_chunk)
            data = await client.post("/chat/completions", body=body, cast_to=object,
                                     options=options)
            return _message_from_response(data)
        except openai.APITimeoutError as exc:
            raise ModelTimeout(f"the model API did not answer in time: {exc}") from exc
        except openai.APIConnectionError as exc:
            raise ModelConnectionError(f"connection to the model API failed: {exc}") from exc
        except openai.APIStatusError as exc:
            raise ModelHTTPError(
                f"the model API answered HTTP {exc.status_code}: {_error_text(exc)}",
                status_code=exc.status_code,
            ) from exc
        except openai.APIResponseValidationError as exc:
            raise ModelResponseError(f"the model API's answer was not valid: {exc}") from exc
        except (openai.OpenAIError, ValueError) as exc:
            # A body that is not JSON surfaces as a ValueError from the client's parser.
            raise ModelResponseError(f"the model API's answer was not usable: {exc}") from exc


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
    # Any field of a hostile or broken body may be missing or of any type: check what is
    # read, never trust it.
    if not isinstance(data, dict):
        raise ModelResponseError(f"the model API's answer is not a JSON object but {_kind(data)}")
    choices = data.get("choices")
    if not choices:
        raise ModelResponseError("the model API answered with no choices")
    if not isinstance(choices, list):
        raise ModelResponseError(f"the model API's choices are a {_kind(choices)}")
    choice = choices[0]
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
            choice = choices[0]
            if not isinstance(choice, dict):
                raise ModelResponseError("a streamed chunk's choice is not an object")
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
                await on_chunk(ChatCompletionChunk.construct(**chunk), piece, partial)
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
