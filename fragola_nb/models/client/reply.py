"""Reading the model's answer, a completion body or a stream of chunks, into the assistant
message that is stored: identical either way, and checked so that it can be sent back.

Odd servers: with ``n > 1`` only the choice with index 0 is read, told apart by its index; a
server that answers a streaming request with one plain completion is heard as if it had
streamed it in one chunk; a chunk is built as a ``ChatCompletionChunk`` (for ``model_chunk``
listeners only) whatever keys it holds.

The usage the server reports (the body's ``usage``, or a stream's usage chunk) comes back
beside the message, in a ``ModelReply`` (``reported``).
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import anyio
import anyio.lowlevel
import httpx2
import openai
from openai.types.chat import ChatCompletionChunk

from fragola_nb.base.errors import ModelConnectionError, ModelResponseError
from fragola_nb.models.client.reported import Exchange, ModelReply, usage_of

__all__ = ["ChunkCallback", "assistant_message", "message_from_response", "read_stream",
           "reply_from_response"]

ChunkCallback = Callable[[Callable[[], Any], str, Callable[[], dict[str, Any]]], Awaitable[None]]
"""``on_chunk(chunk, content, partial)``: ``chunk()`` builds the ``ChatCompletionChunk``,
``partial()`` the assistant message so far (a new dict each call); ``content`` is the text the
chunk adds. Neither is built unless called (``ModelChunkEvent`` calls them on first read)."""


def _kind(value: Any) -> str:
    return "text" if isinstance(value, str) else type(value).__name__


def message_from_response(data: Any) -> dict[str, Any]:
    return _message_of(_first_choice(data))


def reply_from_response(data: Any) -> ModelReply:
    return ModelReply(message_from_response(data), usage_of(data.get("usage")))


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


async def read_stream(
    stream: Any, on_chunk: ChunkCallback | None, exchange: Exchange
) -> ModelReply:
    """The reply to a streaming request (an ``openai.AsyncStream``): an event stream, or
    one plain completion from a server that does not stream. ``exchange`` keeps the usage
    reported so far, should the stream fail."""
    response = stream.response
    content_type = response.headers.get("content-type", "")
    if "text/event-stream" in content_type:
        return await _collect(stream, on_chunk, exchange)
    # Not said to be a stream: a server that does not stream answers with one body.
    try:
        body = await response.aread()
    except BaseException as exc:
        await stream.close()
        if isinstance(exc, httpx2.TimeoutException):
            raise openai.APITimeoutError(request=response.request) from exc
        # What the client counts as a failed connection when it reads a body itself: any
        # request error (a transport error, a body it cannot decode) and a TLS error.
        if isinstance(exc, (httpx2.RequestError, ssl.SSLError)):
            raise openai.APIConnectionError(request=response.request) from exc
        raise
    if body.lstrip().startswith((b"data:", b"event:", b":")):
        return await _collect(stream, on_chunk, exchange)  # a stream, only mislabelled
    # Read as the client reads a plain answer: JSON when said to be, else the text.
    data = json.loads(body) if content_type.split(";")[0].endswith("json") else body.decode(
        response.encoding or "utf-8", "replace")
    exchange.saw(data)
    choice = _first_choice(data)
    message = _message_of(choice)
    if on_chunk is not None:
        chunk = _whole_chunk(data, choice, message)
        await on_chunk(functools.partial(_chunk_model, chunk), message.get("content", ""),
                       functools.partial(_copy, message))
    return ModelReply(message, usage_of(data.get("usage")))


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


class _Text:
    """Text received piece by piece, read as one string at any time in O(new pieces): the
    string read last is extended by what came since, never re-joined from the start (a
    ``model_chunk`` listener reading the partial reply at every chunk costs O(N) in all)."""

    __slots__ = ("_pieces", "_text")

    def __init__(self) -> None:
        self._text = ""
        self._pieces: list[str] = []

    def add(self, piece: str) -> None:
        if piece:
            self._pieces.append(piece)

    def value(self) -> str:
        pieces = self._pieces
        if pieces:
            self._text += pieces[0] if len(pieces) == 1 else "".join(pieces)
            pieces.clear()
        return self._text


class _Call:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments = _Text()

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments.value()}}


# What openai's own stream reader turns into its exceptions (openai._httpx2): a timeout, and
# any request or TLS error, or a connection closed half-way.
_TIMEOUTS = (httpx2.TimeoutException,)
_REQUEST_ERRORS = (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream)


async def _events(response: httpx2.Response) -> AsyncIterator[str]:
    """The data of each server-sent event of ``response``, read from its decoded bytes by
    hand by the rules openai's ``SSEDecoder`` follows (WHATWG): lines end in CRLF, LF or CR;
    a blank line ends an event; ``:`` lines are comments; one space after the colon is
    dropped; ``data`` lines are joined with newlines; an event not ended when the body ends
    is dropped. Ends at ``[DONE]``, after which the rest of the body is drained (HTTP/1.1: the
    connection is then reused), as openai does."""
    rest = b""
    data: list[str] = []
    fields = False  # a field seen since the last event
    skip_lf = False  # the last read ended in CR: an LF starting the next one ends no line
    try:
        async for received in response.aiter_bytes():
            if skip_lf:
                skip_lf = False
                if received[:1] == b"\n":
                    received = received[1:]
            buffer = rest + received if rest else received
            if b"\r" in buffer:
                skip_lf = buffer.endswith(b"\r")
                buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            lines = buffer.split(b"\n")
            rest = lines.pop()
            for raw in lines:
                if not raw:
                    if fields:
                        joined = "\n".join(data)
                        if joined.startswith("[DONE]"):
                            await _drain(response)
                            return
                        yield joined
                        data, fields = [], False
                    continue
                line = raw.decode("utf-8")
                if line[0] == ":":
                    continue
                name, _, value = line.partition(":")
                if name == "data":
                    data.append(value[1:] if value[:1] == " " else value)
                    fields = True
                elif name in ("event", "id", "retry"):
                    fields = True
    except _TIMEOUTS as exc:
        raise openai.APITimeoutError(request=response.request) from exc
    except _REQUEST_ERRORS as exc:
        raise openai.APIConnectionError(request=response.request) from exc


_DRAIN_SECONDS = 0.1
"""How long what is left of a finished stream is read off before its response is closed (as
openai does for its own streams, whose cleanup helper is private to it)."""


async def _drain(response: httpx2.Response) -> None:
    """Read off what an HTTP/1.1 stream still holds after its last event, briefly, so its
    connection can go back to the pool; then close the response, shielded from a cancel."""
    if response.http_version != "HTTP/1.1" or response.is_closed:
        return
    try:
        with anyio.move_on_after(_DRAIN_SECONDS):
            async for _ in cast(AsyncIterator[bytes], response.stream):
                await anyio.lowlevel.checkpoint()
    except (httpx2.RequestError, httpx2.StreamConsumed, ssl.SSLError, anyio.EndOfStream):
        pass  # cleaning up never turns a complete reply into an error
    finally:
        with anyio.CancelScope(shield=True):
            await response.aclose()


async def _collect(stream: Any, on_chunk: ChunkCallback | None, exchange: Exchange) -> ModelReply:
    """The reply streamed on ``stream``'s response. Its events are read here rather than
    through openai's ``AsyncStream`` (the same rules, a third of the CPU per chunk); each
    chunk is still checked field by field, and an ``error`` object in one is openai's
    ``APIError`` as before."""
    response: httpx2.Response = stream.response
    text, refusal = _Text(), _Text()
    # The usage is the last one that reads as counts (``exchange.saw``): OpenAI sends it in
    # a chunk of its own at the end ("usage": null on the others); some servers send running
    # counts on every chunk, or a null or partial one after the real one.
    exchange.usage = None
    calls: dict[int, _Call] = {}
    finished = False
    spoke = False  # a delta came: without any, the stream held a choice with no message
    try:
        async for data in _events(response):
            chunk = json.loads(data)
            if isinstance(chunk, dict) and chunk.get("error"):
                error = chunk["error"]
                message = error.get("message") if isinstance(error, dict) else None
                if not message or not isinstance(message, str):
                    message = "An error occurred during streaming"
                raise openai.APIError(message=message, request=response.request, body=error)
            if not isinstance(chunk, dict):
                raise ModelResponseError(
                    f"a streamed chunk is not a JSON object but {_kind(chunk)}")
            exchange.saw(chunk)  # keeps the last usage that reads as counts
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
                text.add(piece)
                refusal.add(_piece(delta.get("refusal"), "refusal"))
                parts = delta.get("tool_calls")
                if parts is not None and not isinstance(parts, list):
                    raise ModelResponseError("a streamed chunk's tool_calls are not a list")
                for part in parts or ():
                    _merge_tool_call(calls, part)
            if choice.get("finish_reason") is not None:
                finished = True
            if on_chunk is not None:
                # Both built only if the listener reads them (ModelChunkEvent).
                await on_chunk(functools.partial(_chunk_model, chunk), piece,
                               functools.partial(_partial, text, calls, refusal))
    finally:
        await stream.close()
    if not finished:
        raise ModelConnectionError("the model API's stream ended before the reply was complete")
    if not spoke:
        raise ModelResponseError("the model API streamed a choice with no message")
    message = _checked_message(text.value(), _ordered(calls), refusal.value() or None)
    return ModelReply(message, exchange.usage)


def _partial(text: _Text, calls: dict[int, _Call], refusal: _Text) -> dict[str, Any]:
    return assistant_message(text.value(), _ordered(calls), refusal.value())


def _piece(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ModelResponseError(f"a streamed {what} delta is not text but {type(value).__name__}")
    return value


def _merge_tool_call(calls: dict[int, _Call], part: Any) -> None:
    if not isinstance(part, dict):
        raise ModelResponseError("a streamed tool call delta is not an object")
    index = part.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise ModelResponseError("a streamed tool call delta came without its index")
    call = calls.get(index)
    if call is None:
        call = calls[index] = _Call()
    call_id = part.get("id")
    if call_id:
        if not isinstance(call_id, str):
            raise ModelResponseError(f"a streamed tool call id is not text but {_kind(call_id)}")
        call.id = call_id
    function = part.get("function")
    if function is not None:
        if not isinstance(function, dict):
            raise ModelResponseError("a streamed tool call's function is not an object")
        name = _piece(function.get("name"), "tool name")
        # OpenAI sends the name once; llama-cpp-python's server sends the whole name again
        # in every delta of the call: a piece that repeats the name so far is not appended.
        if name != call.name:
            call.name += name
        call.arguments.add(_piece(function.get("arguments"), "tool arguments"))


def _ordered(calls: dict[int, _Call]) -> list[dict[str, Any]]:
    """The calls merged so far, by index, as new dicts: what is merged next does not change
    them."""
    return [calls[index].as_dict() for index in sorted(calls)]
