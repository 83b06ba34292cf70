"""Issue 32, class 9: the cache is keyed by the request as it was sent, not by the scrubbed
form its file holds. Two requests that differ only by a key-shaped string are two keys; the
file holds no credential (a keyed hash, ``"request_hash"``, stands for the real request); an old
file whose lines hold no key answers what it can tell apart and sends the rest again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fragola_nb import Fragola
from fragola_nb.models.recording.recordfile import read_recording
from fragola_nb.models.scripted import ScriptedModel, reply

KEY = "sk-secret-abcdefghijklmnop123456"
FIRST = "sk-live-AAAAAAAAAAAAAAAAAAAAAAAA"
SECOND = "sk-live-BBBBBBBBBBBBBBBBBBBBBBBB"


def cached(path: Path, api: ScriptedModel) -> Fragola:
    return Fragola.cached(path, "gpt-test", base_url=api.base_url, api_key=KEY, max_retries=0)


async def answer(fragola: Fragola, question: str) -> tuple[str, bool]:
    agent = fragola.agent(name="tutor")
    state = await agent.user_message(question)
    return str(state.messages[-1]["content"]), agent.usage.calls[0].cached


async def test_requests_differing_only_by_a_key_are_two_keys_and_the_file_holds_neither(
        model: ScriptedModel, tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    model.push(reply("first"), reply("second"))
    fragola = cached(path, model)
    assert await answer(fragola, f"is {FIRST} valid?") == ("first", False)
    assert await answer(fragola, f"is {SECOND} valid?") == ("second", False)
    assert await answer(fragola, f"is {FIRST} valid?") == ("first", True)
    await fragola.aclose()
    text = path.read_text()
    assert FIRST not in text and SECOND not in text and KEY not in text
    lines = [json.loads(line) for line in text.splitlines()[1:]]
    assert [line["request"]["messages"][-1]["content"] for line in lines] == [
        "is [redacted] valid?"] * 2  # one scrubbed form, two keys
    assert len({line["request_hash"] for line in lines}) == 2
    assert len({line["request_hash"].split(".")[0] for line in lines}) == 1  # one secret per file

    again = cached(path, model)  # a new cache reads the keys back
    try:
        assert await answer(again, f"is {SECOND} valid?") == ("second", True)
        assert await answer(again, f"is {FIRST} valid?") == ("first", True)
    finally:
        await again.aclose()
    assert len(model.requests) == 2


def old_line(content: str, answer: str) -> dict[str, Any]:
    """A line as an older fragola_nb's cache wrote it: no ``request_hash``."""
    return {"agent": "tutor", "status": 200, "base_url": "http://loopback/v1", "repeat": 0,
            "request": {"model": "gpt-test", "messages": [{"role": "user", "content": content}]},
            "body": {"id": "x", "object": "chat.completion", "created": 0, "model": "gpt-test",
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": answer}}]}}


async def test_an_old_cache_answers_a_request_it_can_tell_and_sends_a_scrubbed_one_again(
        model: ScriptedModel, tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    header = {"fragola_nb_recording": 1, "fragola_nb": "0.1.0", "about": "old"}
    lines = [header, old_line("plain question", "old plain answer"),
             old_line("is [redacted] valid?", "old answer for some key")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    model.push(reply("fresh"))
    fragola = cached(path, model)
    try:
        assert await answer(fragola, "plain question") == ("old plain answer", True)
        assert await answer(fragola, f"is {SECOND} valid?") == ("fresh", False)
        assert await answer(fragola, f"is {SECOND} valid?") == ("fresh", True)
    finally:
        await fragola.aclose()
    assert len(model.requests) == 1
    exchanges = read_recording(path)  # still a recording: Fragola.replay reads it
    assert len(exchanges) == 3 and exchanges[-1].request_hash is not None
    assert SECOND not in path.read_text()
