"""``Fragola.record`` and ``Fragola.replay`` at their edges, as a user meets them: a key the
server quotes back, files that are not recordings, a recording saved with a BOM, a replay on
new event loops, fields left out of the comparison, recording without a model API.

Against the scripted model behind the real ``openai`` client. (The main cases:
tests/models/test_recording.py.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fragola_nb import BadUsage, Fragola, ModelHTTPError, save_session
from fragola_nb.models.scripted import ScriptedModel, fail, reply

QUERY_KEY = "AIzaQueryKey0123456789abcdef"


# -- credentials --------------------------------------------------------------------------------


async def test_a_query_key_the_server_quotes_back_is_shown_and_recorded_redacted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q.jsonl"
    api = ScriptedModel([fail(400, f"API key {QUERY_KEY} not valid"),
                         reply(f"(echo) key={QUERY_KEY}")]).start()
    try:
        fragola = Fragola.record(path, model="m", base_url=api.base_url, api_key="unused",
                                 default_query={"key": QUERY_KEY}, max_retries=0)
        agent = fragola.agent("a")
        with pytest.raises(ModelHTTPError) as caught:
            await agent.user_message("Hi.")
        assert QUERY_KEY not in str(caught.value) and "[redacted]" in str(caught.value)
        other = fragola.agent("b", model_settings={"extra_query": {"api_key": QUERY_KEY[::-1]}})
        await other.user_message("Hi.")
        await fragola.aclose()
    finally:
        api.stop()
    text = path.read_text()
    assert QUERY_KEY not in text and QUERY_KEY[::-1] not in text
    assert len(text.splitlines()) == 3  # the header, the error, the answer


# -- the recording file -------------------------------------------------------------------------


def test_files_that_are_not_recordings_say_what_they_are(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    fragola = Fragola.scripted()
    try:
        save_session(tmp_path / "work.json", fragola.agent("a"))
    finally:
        fragola.scripted_model.stop()  # type: ignore[union-attr]
    newer = tmp_path / "newer.jsonl"
    newer.write_text('{"fragola_nb_recording": 2, "fragola_nb": "9.0.0"}\n')
    cases = [
        (empty, "is not the header of a Fragola.record recording (the file is empty"),
        (tmp_path / "work.json", "is not the header of a Fragola.record recording (it is a "
                                 "saved session: load it with load_session)"),
        (newer, "has format 2; this fragola_nb reads format 1 (it was made by fragola_nb "
                "'9.0.0': upgrade fragola_nb to read it)"),
    ]
    for path, problem in cases:
        with pytest.raises(BadUsage) as caught:
            Fragola.replay(path)
        assert str(caught.value).startswith(f"the recording {path}, line 1: {problem}")
    # Recording onto a session is refused the same way; nothing of it is changed.
    session = (tmp_path / "work.json").read_bytes()
    with pytest.raises(BadUsage, match="it is a saved session"):
        Fragola.record(tmp_path / "work.json", api_key="sk-unused-0123456789")
    assert (tmp_path / "work.json").read_bytes() == session


async def test_a_recording_saved_with_a_bom_replays(model: ScriptedModel, tmp_path: Path
                                                    ) -> None:
    path = tmp_path / "lesson.jsonl"
    model.push(reply("Paris."))
    teacher = Fragola.record(path, model="gpt-test", base_url=model.base_url,
                             api_key="sk-teacher-0123456789", max_retries=0)
    await teacher.agent("geo").user_message("Capital of France?")
    await teacher.aclose()
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    students = Fragola.replay(path)
    try:
        state = await students.agent("geo").user_message("Capital of France?")
        assert state.messages[-1]["content"] == "Paris."
    finally:
        await students.aclose()


def test_a_replay_streams_slowly_on_new_loops_and_closes(model: ScriptedModel, tmp_path: Path
                                                          ) -> None:
    path = tmp_path / "lesson.jsonl"
    model.push(reply("one two three four five six"))
    teacher = Fragola.record(path, model="gpt-test", base_url=model.base_url,
                             api_key="sk-teacher-0123456789", max_retries=0)

    async def turn(fragola: Fragola) -> tuple[str, int]:
        agent = fragola.agent("geo", model_settings={"stream": True})
        pieces: list[str] = []
        agent.on_model_chunk(lambda event: pieces.append(event.content))
        state = await agent.user_message("Count.")
        return state.messages[-1]["content"], len(pieces)

    asyncio.run(turn(teacher))
    students = Fragola.replay(path, chunk_delay=0.01)
    first = asyncio.run(turn(students))    # a script that calls asyncio.run per cell
    second = asyncio.run(turn(students))   # a new loop: a new client, the same answers
    assert first == second and first[0] == "one two three four five six" and first[1] > 1
    asyncio.run(students.aclose())
    with pytest.raises(RuntimeError, match="stopped"):  # aclose stopped its server
        students.scripted_model.start()  # type: ignore[union-attr]


async def test_ignore_leaves_out_more_fields_never_stream_options(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "lesson.jsonl"
    model.push(reply("Hello, class."))
    teacher = Fragola.record(path, model="gpt-test", base_url=model.base_url,
                             api_key="sk-teacher-0123456789", max_retries=0)
    await teacher.agent("tutor", model_settings={"stream": True, "temperature": 0.2}
                        ).user_message("Hello!")
    await teacher.aclose()
    students = Fragola.replay(path, ignore=["temperature"])
    try:
        # Another temperature and no usage asked: both left out of the comparison.
        agent = students.agent("tutor", model_settings={
            "stream": True, "temperature": 0.9, "stream_options": None})
        state = await agent.user_message("Hello!")
        assert state.messages[-1]["content"] == "Hello, class."
    finally:
        await students.aclose()


def test_record_without_a_model_api_says_what_it_needs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(BadUsage, match=r"^Fragola.record needs a model API to record: pass "
                                       r"api_key= or set OPENAI_API_KEY"):
        Fragola.record(tmp_path / "lesson.jsonl", model="gpt-4o-mini")
    assert not (tmp_path / "lesson.jsonl").exists()
