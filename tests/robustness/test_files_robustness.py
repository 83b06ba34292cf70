"""Issue 21: the files fragola_nb writes and reads back (batch resume files, recordings,
sessions, exports) take any text a model sends, are never cut or written before they are known
to be ours, repair a line a crash cut, and refuse what they cannot hold (nesting too deep,
impossible token counts, an informational status) with one ``BadUsage`` naming file and line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.helpers import make_fragola

from fragola_nb import (
    BadUsage,
    Fragola,
    SessionError,
    export_html,
    export_markdown,
    export_tree_html,
    export_tree_markdown,
    load_session,
    save_session,
)
from fragola_nb.models.recording.recordfile import Appender, read_recording
from fragola_nb.models.scripted import ScriptedModel, raw, reply
from fragola_nb.sessions import session_from_json

HALF = "half \ud83d of an emoji"
"""A reply holding a lone surrogate: legal in JSON ("\\ud83d"), not encodable as UTF-8."""
MENDED = "half \ufffd of an emoji"
"""How it is stored: U+FFFD in its place (``fragola_nb.base.surrogates``)."""
DEEP = 100_000


def completion(content_json: str) -> str:
    """A chat completion body whose message content is ``content_json`` (JSON text)."""
    return ('{"id":"c1","object":"chat.completion","created":0,"model":"gpt-test",'
            '"choices":[{"index":0,"message":{"role":"assistant","content":' + content_json
            + '},"finish_reason":"stop"}],'
            '"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}')


HALF_BODY = completion(json.dumps(HALF))  # ensure_ascii: the server sends "\ud83d"


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().decode("utf-8").splitlines()]


# -- 1. a file is never cut or written before it is known to be the batch's ------------------


@pytest.mark.parametrize("text", [
    b"my notes, with no newline at the end",
    b'{"note": "mine"}',
    b'{"index": 0, "mine": true}',  # JSON, and starts like a row: still not one
    b'{"ind',  # could be a cut row, but the line before is not a row
])
async def test_a_foreign_file_without_a_final_newline_is_refused_untouched(
        model: ScriptedModel, tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "notes.jsonl"
    content = (b"first line of mine\n" + text) if text == b'{"ind' else text
    path.write_bytes(content)
    agent = make_fragola(model).agent("calc")

    with pytest.raises(BadUsage, match=rf"{path}, line \d, is not a row of a batch resume"):
        await agent.batch(["a"], resume=path, progress=False)

    assert path.read_bytes() == content and model.requests == []


async def test_a_cut_row_in_a_file_of_other_inputs_is_not_cut(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.brain = lambda request: reply("ok")
    agent = make_fragola(model).agent("calc")
    path = tmp_path / "rows.jsonl"
    await agent.batch(["a", "b"], resume=path, progress=False)
    content = path.read_bytes()[:-30]  # the second row cut short
    path.write_bytes(content)

    with pytest.raises(BadUsage, match="rows of other inputs"):
        await agent.batch(["x", "y"], resume=path, progress=False)

    assert path.read_bytes() == content


async def test_a_whole_row_without_its_newline_is_kept_and_the_next_starts_a_line(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.brain = lambda request: reply("ok " + request["messages"][-1]["content"])
    agent = make_fragola(model).agent("calc")
    path = tmp_path / "rows.jsonl"
    await agent.batch(["a"], resume=path, progress=False)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # an editor dropped the last newline

    result = await agent.batch(["a", "b"], resume=path, progress=False)

    assert result[0].resumed and result.answers == ["ok a", "ok b"]
    assert len(model.requests) == 2
    assert [row["index"] for row in rows(path)] == [0, 1]


# -- 2. any text a model sends is written, and reads back the same ----------------------------


async def test_half_an_emoji_is_a_row_and_reads_back_from_the_resume_file(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.brain = lambda request: raw(HALF_BODY)
    agent = make_fragola(model).agent("calc")
    path = tmp_path / "rows.jsonl"
    # An input holding half an emoji cannot be sent: the batch is refused before anything.
    with pytest.raises(BadUsage, match=r"input 1: content holds half an emoji"):
        await agent.batch(["first", "\ud83d a half in the input"], resume=path,
                          progress=False)
    assert not path.exists() and model.requests == []
    inputs = ["first", "second", "third"]

    result = await agent.batch(inputs, concurrency=1, resume=path, progress=False)

    # The reply's half emoji was stored as U+FFFD (a history stays a request that can be
    # sent), and that is the row's answer.
    assert [row.status for row in result] == ["done"] * 3
    assert result.answers == [MENDED] * 3
    written = rows(path)  # valid UTF-8, the same text
    assert [(row["input"], row["answer"]) for row in written] == [(i, MENDED) for i in inputs]
    again = await agent.batch(inputs, resume=path, progress=False)
    assert len(model.requests) == 3  # the done rows read back, not sent again
    assert all(row.resumed for row in again) and again.answers == [MENDED] * 3


async def test_half_an_emoji_is_recorded_read_back_and_replayed(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.brain = lambda request: raw(HALF_BODY)
    path = tmp_path / "half.jsonl"
    fragola = Fragola.record(path, model="gpt-test", base_url=model.base_url, api_key="k",
                             max_retries=0)
    recorded = await fragola.agent("tutor").user_message("hi")
    await fragola.aclose()

    path.read_bytes().decode("utf-8")  # the file is UTF-8
    [exchange] = read_recording(path)
    assert exchange.body["choices"][0]["message"]["content"] == HALF  # as the server sent it
    replay = Fragola.replay(path)
    try:
        replayed = await replay.agent("tutor").user_message("hi")
    finally:
        await replay.aclose()
    assert replayed.messages == recorded.messages
    assert replayed.messages[-1]["content"] == MENDED  # stored sendable


async def test_half_an_emoji_survives_a_session_and_every_export(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.brain = lambda request: raw(HALF_BODY)
    fragola = make_fragola(model)
    agent = fragola.agent("tutor")
    await agent.user_message("hi")
    assert agent.state.messages[-1]["content"] == MENDED

    save_session(tmp_path / "s.json", agent)
    loaded = load_session(tmp_path / "s.json", fragola)
    assert loaded["tutor"].state.messages == agent.state.messages

    for export in (export_markdown, export_html, export_tree_markdown, export_tree_html):
        path = tmp_path / f"{export.__name__}.out"
        text = export(agent, path)
        assert path.read_bytes().decode("utf-8") == text  # written whole, as returned
        assert MENDED in text or MENDED.replace("\ufffd", "\\ufffd") in text


# -- 3. what cannot be read back is one BadUsage naming the file and the line -----------------


def deep_row() -> bytes:
    return b'{"index": 0, "input": ' + b"[" * DEEP + b"]" * DEEP + b"}\n"


async def test_a_resume_file_nested_too_deep_is_bad_usage_naming_the_line(
        model: ScriptedModel, tmp_path: Path) -> None:
    agent = make_fragola(model).agent("calc")
    path = tmp_path / "rows.jsonl"
    for content in (deep_row(), deep_row().rstrip(b"\n")):  # a last line without newline too
        path.write_bytes(content)
        with pytest.raises(BadUsage, match=rf"{path}, line 1, is not a row.*nested too deeply"):
            await agent.batch(["a"], resume=path, progress=False)
        assert path.read_bytes() == content
    assert model.requests == []


@pytest.mark.parametrize(("name", "value"), [
    ("prompt_tokens", -1000), ("total_tokens", -5), ("completion_tokens", 2**60),
    ("cached_tokens", 1.5)])
async def test_impossible_token_counts_in_a_resume_file_are_refused_not_summed(
        model: ScriptedModel, tmp_path: Path, name: str, value: Any) -> None:
    model.brain = lambda request: reply("ok")
    agent = make_fragola(model).agent("calc")
    path = tmp_path / "rows.jsonl"
    await agent.batch(["a", "b"], resume=path, progress=False)
    edited = rows(path)
    edited[1]["usage"][0][name] = value
    content = "".join(json.dumps(row) + "\n" for row in edited).encode()
    path.write_bytes(content)

    with pytest.raises(BadUsage, match=rf"{path}, line 2, is not a row.*'{name}' must be a "
                                       r"whole number from 0"):
        await agent.batch(["a", "b"], resume=path, progress=False)

    assert path.read_bytes() == content and len(model.requests) == 2


def test_a_recording_nested_too_deep_is_bad_usage_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    header = b'{"fragola_nb_recording": 1}\n'
    nested = b"[" * DEEP + b"]" * DEEP
    path.write_bytes(header + b'{"request": {}, "status": 200, "body": ' + nested + b"}\n")
    with pytest.raises(BadUsage, match=rf"recording {path}, line 2: .*nested too deeply"):
        Fragola.replay(path)
    path.write_bytes(b'{"fragola_nb_recording": ' + nested + b"}\n")
    for start in (Fragola.replay, lambda where: Fragola.record(where, api_key="k")):
        with pytest.raises(BadUsage, match=rf"recording {path}, line 1: .*nested too deeply"):
            start(path)
    # JSON reads this one, but replaying (scrubbing, comparing requests) would overflow.
    messages = "[" * 600 + "]" * 600
    path.write_text('{"fragola_nb_recording": 1}\n{"request": {"messages": ' + messages
                    + '}, "status": 200, "body": {}}\n')
    with pytest.raises(BadUsage, match=rf"recording {path}, line 2: is nested too deeply"):
        Fragola.replay(path)


def test_an_exchange_too_deep_to_read_back_is_not_written(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "lesson.jsonl"
    appender = Appender(path)
    deep: Any = {}
    for _ in range(600):
        deep = [deep]
    appender.append({"agent": "a", "status": 200, "request": {"model": "m"}, "body": deep})
    appender.append({"agent": "a", "status": 200, "request": {"model": "m"}, "body": {}})
    assert [e.body for e in read_recording(path)] == [{}]
    assert "was not recorded" in caplog.text


def test_a_session_nested_too_deep_or_with_negative_counts_is_a_session_error() -> None:
    fragola = Fragola(api_key="k", base_url="http://127.0.0.1:9")
    nested = '{"format": "fragola_nb.session", "version": 1, "stores": ' + "[" * DEEP
    with pytest.raises(SessionError, match="nested too deeply"):
        session_from_json(nested + "]" * DEEP + "}", fragola)
    document = {"format": "fragola_nb.session", "version": 1, "stores": [],
                "histories": [{"base": None, "base_length": 0, "messages": []}],
                "agents": [{"id": "a1", "fork_of": None, "fork_point": 0, "history": 0,
                            "step_count": 0, "status": "idle", "outcome": None,
                            "options": {"name": "t", "description": "", "instructions": None,
                                        "use_developer_role": False, "model_settings": {},
                                        "max_step": 10,
                                        "reset_step_count_after_user_message": True,
                                        "tools": []},
                            "stores": [], "pending": [], "listeners": {},
                            "usage": [{"model": "m", "prompt_tokens": -5,
                                       "completion_tokens": 1, "total_tokens": -4}]}]}
    with pytest.raises(SessionError, match="agents/0/usage/0"):
        session_from_json(json.dumps(document), fragola)
    document["agents"][0]["usage"][0].update(prompt_tokens=5, total_tokens=6)  # type: ignore
    assert repr(session_from_json(json.dumps(document), fragola)["t"].usage).startswith(
        "Usage(prompt_tokens=5, completion_tokens=1, total_tokens=6")


# -- 4. recording onto a file whose last line a crash cut ------------------------------------


async def record_turn(path: Path, model: ScriptedModel, agent: str, text: str) -> None:
    fragola = Fragola.record(path, model="gpt-test", base_url=model.base_url, api_key="k",
                             max_retries=0)
    await fragola.agent(agent).user_message(text)
    await fragola.aclose()


async def test_recording_onto_a_cut_last_line_starts_the_new_exchange_whole(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.brain = lambda request: reply("answer to " + request["messages"][-1]["content"])
    path = tmp_path / "lesson.jsonl"
    await record_turn(path, model, "first", "one")
    await record_turn(path, model, "second", "two")
    path.write_bytes(path.read_bytes()[:-40])  # a crash in the middle of the last write
    with pytest.raises(BadUsage, match=rf"{path}, line 3: is not JSON.*no newline at its end"):
        read_recording(path)

    await record_turn(path, model, "third", "three")

    assert [e.agent for e in read_recording(path)] == ["first", "third"]
    replay = Fragola.replay(path)
    try:
        state = await replay.agent("third").user_message("three")
    finally:
        await replay.aclose()
    assert state.messages[-1]["content"] == "answer to three"


async def test_a_whole_last_exchange_without_its_newline_is_kept(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.brain = lambda request: reply("ok")
    path = tmp_path / "lesson.jsonl"
    await record_turn(path, model, "first", "one")
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # an editor dropped it

    await record_turn(path, model, "second", "two")

    assert [e.agent for e in read_recording(path)] == ["first", "second"]


def test_a_foreign_file_without_a_final_newline_is_not_recorded_onto(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"my notes")
    with pytest.raises(BadUsage, match="line 1: is not JSON"):
        Fragola.record(path, api_key="k")
    assert path.read_bytes() == b"my notes"


# -- 5. a recording holds final answers only --------------------------------------------------


@pytest.mark.parametrize("status", [100, 103, 199])
def test_an_informational_status_in_a_recording_is_refused_naming_the_line(
        tmp_path: Path, status: int) -> None:
    path = tmp_path / "early.jsonl"
    path.write_text('{"fragola_nb_recording": 1}\n'
                    f'{{"request": {{}}, "status": {status}, "body": {{}}}}\n')
    with pytest.raises(BadUsage, match=rf"recording {path}, line 2: has the informational "
                                       rf"status {status}, not an answer"):
        Fragola.replay(path)


def test_an_informational_status_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "lesson.jsonl"
    appender = Appender(path)
    appender.append({"agent": "a", "status": 103, "request": {"model": "m"}, "body": {}})
    appender.append({"agent": "a", "status": 200, "request": {"model": "m"}, "body": {}})
    assert [e.status for e in read_recording(path)] == [200]


def test_a_broken_session_file_is_named_in_its_error(tmp_path: Path) -> None:
    fragola = Fragola(api_key="k", base_url="http://127.0.0.1:9")
    broken = tmp_path / "lesson.json"
    broken.write_text('{"format": "fragola_nb.session", "version": 1, "stores": '
                      + "[" * DEEP, encoding="utf-8")
    with pytest.raises(SessionError, match=r"^.*lesson\.json: .*nested too deeply") as raised:
        load_session(broken, fragola)
    assert str(broken) in str(raised.value)
    assert broken.read_text(encoding="utf-8").endswith("[")  # the file is left as it was
