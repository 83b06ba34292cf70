"""The one module that talks to the ``openai`` client and the Chat Completions wire format.

It turns a request dict into an assistant message dict, streamed or not, and every failure of
the API into a ``ModelError`` subclass that keeps the ``openai`` exception as its cause.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import openai
import pydantic

from .errors import (
    BadUsage,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
)

__all__ = ["ModelClient", "json_schema_response_format"]

ChunkCallback = Callable[[Any, str, dict[str, Any]], Awaitable[None]]


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
        """Send one request; return the assistant message as a Chat Completions dict."""
        client = self.client()
        try:
            if request.get("stream"):
                return await _stream(client, request, on_chunk)
            response = await client.chat.completions.create(**request)
            return _message_from_response(response)
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
        except (openai.OpenAIError, ValueError, pydantic.ValidationError) as exc:
            # A body that is not JSON surfaces as a ValueError from the client's parser.
            raise ModelResponseError(f"the model API's answer was not usable: {exc}") from exc


def _error_text(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)
    return exc.message


def _message_from_response(response: Any) -> dict[str, Any]:
    # The client builds its objects without validating them, so any field of a hostile or
    # broken body may be missing or of any type: check what is read, never trust it.
    choices = getattr(response, "choices", None)
    if not choices:
        raise ModelResponseError("the model API answered with no choices")
    if not isinstance(choices, list):
        raise ModelResponseError(f"the model API's choices are a {type(choices).__name__}")
    message = getattr(choices[0], "message", None)
    if not isinstance(message, pydantic.BaseModel):
        raise ModelResponseError("the model API answered a choice with no message")
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise ModelResponseError("the model API's tool_calls are not a list")
    calls: list[dict[str, Any]] = []
    for call in tool_calls or ():
        function = getattr(call, "function", None)
        calls.append({
            "id": getattr(call, "id", None),
            "type": "function",
            "function": {"name": getattr(function, "name", None),
                         "arguments": getattr(function, "arguments", None)},
        })
    return _checked_message(getattr(message, "content", None), calls,
                           getattr(message, "refusal", None))


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


async def _stream(
    client: openai.AsyncOpenAI, request: dict[str, Any], on_chunk: ChunkCallback | None
) -> dict[str, Any]:
    text: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finished = False
    spoke = False  # a delta came: without any, the stream held a choice with no message
    stream = await client.chat.completions.create(**request)
    try:
        async for chunk in stream:
            choices = getattr(chunk, "choices", None)
            if not choices:
                continue  # the usage chunk
            if not isinstance(choices, list):
                raise ModelResponseError("a streamed chunk's choices are not a list")
            choice = choices[0]
            if not isinstance(choice, pydantic.BaseModel):
                raise ModelResponseError("a streamed chunk's choice is not an object")
            delta = getattr(choice, "delta", None)
            piece = ""
            if delta is not None:
                if not isinstance(delta, pydantic.BaseModel):
                    raise ModelResponseError("a streamed chunk's delta is not an object")
                spoke = True
                piece = _piece(getattr(delta, "content", None), "content")
                text.append(piece)
                refusal.append(_piece(getattr(delta, "refusal", None), "refusal"))
                parts = getattr(delta, "tool_calls", None)
                if parts is not None and not isinstance(parts, list):
                    raise ModelResponseError("a streamed chunk's tool_calls are not a list")
                for part in parts or ():
                    _merge_tool_call(calls, part)
            if getattr(choice, "finish_reason", None) is not None:
                finished = True
            if on_chunk is not None:
                partial = assistant_message("".join(text), _ordered(calls), "".join(refusal))
                await on_chunk(chunk, piece, partial)
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
    index = getattr(part, "index", None)
    if not isinstance(index, int):
        raise ModelResponseError("a streamed tool call delta came without its index")
    call = calls.get(index)
    if call is None:
        call = calls[index] = {
            "id": "",
            "type": "function",
            "function": {"name": "", "arguments": ""},
        }
    call_id = getattr(part, "id", None)
    if call_id:
        call["id"] = call_id
    function = getattr(part, "function", None)
    if function is not None:
        call["function"]["name"] += _piece(getattr(function, "name", None), "tool name")
        call["function"]["arguments"] += _piece(getattr(function, "arguments", None),
                                                "tool arguments")


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
