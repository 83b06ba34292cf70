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
    choices = getattr(response, "choices", None)
    if not choices:
        raise ModelResponseError("the model API answered with no choices")
    message = choices[0].message
    if message is None:
        raise ModelResponseError("the model API answered a choice with no message")
    tool_calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.function.name, "arguments": call.function.arguments},
        }
        for call in (message.tool_calls or ())
        if getattr(call, "function", None) is not None
    ]
    return assistant_message(message.content, tool_calls, getattr(message, "refusal", None))


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
    stream = await client.chat.completions.create(**request)
    try:
        async for chunk in stream:
            if not chunk.choices:
                continue  # the usage chunk
            choice = chunk.choices[0]
            delta = choice.delta
            piece = ""
            if delta is not None:
                if delta.content:
                    piece = delta.content
                    text.append(piece)
                if getattr(delta, "refusal", None):
                    refusal.append(delta.refusal)
                for part in delta.tool_calls or ():
                    _merge_tool_call(calls, part)
            if choice.finish_reason is not None:
                finished = True
            if on_chunk is not None:
                partial = assistant_message("".join(text), _ordered(calls), "".join(refusal))
                await on_chunk(chunk, piece, partial)
    finally:
        await stream.close()
    if not finished:
        raise ModelConnectionError("the model API's stream ended before the reply was complete")
    for call in calls.values():
        if not call["id"] or not call["function"]["name"]:
            raise ModelResponseError("a streamed tool call came without its id or name")
    return assistant_message("".join(text), _ordered(calls), "".join(refusal) or None)


def _merge_tool_call(calls: dict[int, dict[str, Any]], part: Any) -> None:
    call = calls.get(part.index)
    if call is None:
        call = calls[part.index] = {
            "id": "",
            "type": "function",
            "function": {"name": "", "arguments": ""},
        }
    if part.id:
        call["id"] = part.id
    function = part.function
    if function is not None:
        if function.name:
            call["function"]["name"] += function.name
        if function.arguments:
            call["function"]["arguments"] += function.arguments


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
