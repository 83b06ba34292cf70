"""Issue 26: the event stream is read by hand (fragola_nb.models.client.reply._events), by
the rules openai's SSEDecoder follows, and a model_chunk listener's partial reply is built
from what came since, not re-joined."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from fragola_nb.models.client import reply as reply_module
from fragola_nb.models.client.reply import _events, _Text


def _response(*reads: bytes) -> httpx2.Response:
    async def body() -> AsyncIterator[bytes]:
        for read in reads:
            yield read

    request = httpx2.Request("POST", "http://test/v1/chat/completions")
    return httpx2.Response(200, headers={"content-type": "text/event-stream"},
                           content=body(), request=request)


def _read(*reads: bytes) -> list[str]:
    async def go() -> list[str]:
        return [data async for data in _events(_response(*reads))]

    return asyncio.run(go())


def test_lines_end_in_lf_crlf_or_cr_even_split_between_reads() -> None:
    assert _read(b'data: {"a":1}\n\ndata: {"a":2}\r\n\r\ndata: {"a":3}\r\r') == [
        '{"a":1}', '{"a":2}', '{"a":3}']
    # A CR ending one read and its LF starting the next: one line break, not two.
    assert _read(b'data: {"a":1}\r', b'\n\r', b'\ndata: x\r', b'\r') == ['{"a":1}', "x"]
    # Split anywhere, byte by byte.
    whole = b'data: {"a": "\xc3\xa9"}\r\n\r\n: comment\n\ndata: [DONE]\n\n'
    assert _read(*(whole[i:i + 1] for i in range(len(whole)))) == ['{"a": "\u00e9"}']


def test_comments_fields_multi_line_data_and_done() -> None:
    stream = (b": keep-alive\n\nevent: message\nid: 7\nretry: 10\ndata: one\ndata:two\n\n"
              b"data:  spaced\n\nfoo: bar\n\ndata: [DONE]\n\ndata: after\n\n")
    # One space after the colon is dropped, not two; an unknown field makes no event.
    assert _read(stream) == ["one\ntwo", " spaced"]


def test_an_event_not_ended_when_the_body_ends_is_dropped() -> None:
    assert _read(b"data: first\n\ndata: cut") == ["first"]
    assert _read(b"data: first\n\ndata: cut\n") == ["first"]


def test_an_event_with_no_data_reads_as_empty_data() -> None:
    # as openai's decoder: then not JSON, which the reader turns into a ModelResponseError
    assert _read(b"event: ping\n\n") == [""]


def test_a_transport_error_is_openai_s() -> None:
    import openai

    async def failing() -> AsyncIterator[bytes]:
        yield b"data: x\n\n"
        raise httpx2.ReadTimeout("slow")

    response = httpx2.Response(200, content=failing(),
                               request=httpx2.Request("POST", "http://test/"))

    async def go() -> None:
        async for _ in _events(response):
            pass

    with pytest.raises(openai.APITimeoutError):
        asyncio.run(go())


def test_partial_text_is_extended_not_rejoined() -> None:
    text = _Text()
    for i in range(2_000):
        text.add(f" w{i}")
        before = text.value()
        text.add("")  # an empty piece changes nothing
        assert text.value() is before  # nothing new: the same string, nothing rebuilt
        assert not text._pieces  # what came was folded into the string read
    assert text.value() == "".join(f" w{i}" for i in range(2_000))


def test_chunk_and_message_are_built_only_when_read() -> None:
    from fragola_nb.core.events import ModelChunkEvent

    built: list[str] = []

    def chunk() -> str:
        built.append("chunk")
        return "C"

    def message() -> dict[str, Any]:
        built.append("message")
        return {"role": "assistant", "content": "so far"}

    event = ModelChunkEvent(None, chunk, "far", message)  # type: ignore[arg-type]
    assert event.content == "far" and built == []
    assert event.message["content"] == "so far" and event.message is event.message
    assert built == ["message"]
    assert event.chunk == "C" and event.chunk == "C"
    assert built == ["message", "chunk"]
    assert reply_module._partial  # the builder the reader hands out
