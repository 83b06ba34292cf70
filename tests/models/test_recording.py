"""``Fragola.record`` and ``Fragola.replay``: a scripted model stands in for the real API while
recording (its traffic is schema-checked by the ``model`` fixture); the replay runs on the
package's scripted server with no key, and must give the same histories and chunks."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.helpers import assert_valid_history
from support.openai_schema import validate_chunk, validate_request, validate_response

from fragola_nb import Agent, BadUsage, Fragola, ModelConnectionError, ModelHTTPError, tool
from fragola_nb.models.scripted import ScriptedModel, call, fail, reply, tool_calls

KEY = "sk-secret-abcdefghijklmnop123456"
HEADER_KEY = "hdr-key-0123456789abcdefXYZ"
EXTRA_KEY = "extra-0123456789abcdefXYZ"
LESSON = Path(__file__).resolve().parents[2] / "notebooks" / "recordings"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


def recorder(path: Path, api: ScriptedModel, **options: Any) -> Fragola:
    options.setdefault("max_retries", 0)
    return Fragola.record(path, model="gpt-test", base_url=api.base_url, api_key=KEY, **options)


def adder(fragola: Fragola, name: str, *, stream: bool) -> Agent:
    settings = {"stream": True} if stream else {}
    return fragola.agent(name=name, instructions="Add with the tool.", tools=[add],
                         model_settings=settings)


async def two_turns(fragola: Fragola) -> tuple[list[Any], list[str], list[Any]]:
    """A streamed turn and a plain one, both calling a tool; the histories and the streamed
    text and chunks a ``model_chunk`` listener saw."""
    streamed, plain = adder(fragola, "streamer", stream=True), adder(fragola, "plain", stream=False)
    contents: list[str] = []
    chunks: list[Any] = []

    def seen(event: Any) -> None:
        contents.append(event.content)
        chunks.append(event.chunk.model_dump())

    streamed.on_model_chunk(seen)
    await streamed.user_message("What is 2 + 3?")
    await plain.user_message("What is 4 + 5?")
    await fragola.aclose()
    return [streamed.state.messages, plain.state.messages], contents, chunks


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().decode().splitlines()]


async def test_a_streamed_and_a_plain_turn_replay_offline_as_recorded(
    model: ScriptedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "lesson.jsonl"
    model.push(tool_calls(call("add", {"a": 2, "b": 3}), content="Let me add."),
               reply("2 + 3 = 5, a sum streamed in several chunks."),
               tool_calls(call("add", {"a": 4, "b": 5})), reply("4 + 5 = 9."))
    recorded = await two_turns(recorder(path, model))
    assert recorded[1].count("") < len(recorded[1]) and "".join(recorded[1]).startswith("Let")

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    replay = Fragola.replay(path)
    try:
        assert replay.model == "gpt-test" and replay.offline
        assert await two_turns(replay) == recorded
        server = replay.scripted_model
        assert server is not None
        assert server.chunks == model.chunks and server.responses == model.responses
        for request in server.requests:
            validate_request(request)
        for body in server.responses:
            validate_response(body)
        for chunk in server.chunks:
            validate_chunk(chunk)
    finally:
        await replay.aclose()
    for history in recorded[0]:
        assert_valid_history(history)


async def test_the_file_is_a_header_then_one_exchange_per_line(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    model.push(tool_calls(call("add", {"a": 2, "b": 3})), reply("5"),
               tool_calls(call("add", {"a": 4, "b": 5})), reply("9"))
    await two_turns(recorder(path, model))
    header, *exchanges = lines(path)
    import fragola_nb

    assert header["fragola_nb_recording"] == 1 and header["fragola_nb"] == fragola_nb.__version__
    assert [e["agent"] for e in exchanges] == ["streamer", "streamer", "plain", "plain"]
    assert [e["request"] for e in exchanges] == model.requests  # the bodies as sent
    assert [("chunks" in e, "body" in e, e["status"]) for e in exchanges] == [
        (True, False, 200), (True, False, 200), (False, True, 200), (False, True, 200)]
    assert [e["body"] for e in exchanges[2:]] == model.responses
    assert [c for e in exchanges[:2] for c in e["chunks"]] == model.chunks


async def test_a_recorded_http_error_is_replayed_as_the_same_error(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "errors.jsonl"
    model.push(fail(400, "This model does not support tools."))
    fragola = recorder(path, model)
    with pytest.raises(ModelHTTPError) as recorded:
        await adder(fragola, "broken", stream=True).user_message("What is 2 + 3?")
    await fragola.aclose()

    replay = Fragola.replay(path)
    try:
        agent = adder(replay, "broken", stream=True)
        with pytest.raises(ModelHTTPError) as replayed:
            await agent.user_message("What is 2 + 3?")
        assert str(replayed.value) == str(recorded.value)
        assert replayed.value.status_code == 400
        assert agent.state.status == "idle"
    finally:
        await replay.aclose()


async def test_retries_recorded_are_replayed_in_order(model: ScriptedModel, tmp_path: Path
                                                      ) -> None:
    path = tmp_path / "retried.jsonl"
    model.push(fail(503, "overloaded", headers={"retry-after-ms": "1"}), reply("at last"))
    fragola = recorder(path, model, max_retries=1)
    first = await fragola.agent(name="patient").user_message("hello")
    await fragola.aclose()
    assert [e["status"] for e in lines(path)[1:]] == [503, 200]

    replay = Fragola.replay(path)  # the client's own retries, as when it was recorded
    try:
        again = await replay.agent(name="patient").user_message("hello")
        assert again.messages == first.messages
    finally:
        await replay.aclose()


async def test_the_same_request_recorded_twice_gets_its_answers_in_order(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "twice.jsonl"
    model.push(reply("first answer"), reply("second answer"))
    fragola = recorder(path, model)
    for name in ("one", "two"):
        await fragola.agent(name=name).user_message("Tell me a fact.")
    await fragola.aclose()

    replay = Fragola.replay(path)
    try:
        answers = [(await replay.agent(name=n).user_message("Tell me a fact.")).messages[-1]
                   for n in ("a", "b", "c")]
        assert [m["content"] for m in answers] == ["first answer", "second answer",
                                                   "first answer"]  # then from the start
    finally:
        await replay.aclose()


async def recorded_greeting(model: ScriptedModel, path: Path) -> None:
    model.push(reply("Hello, class."))
    fragola = recorder(path, model)
    await fragola.agent(name="tutor", instructions="Be kind.").user_message("Hello!")
    await fragola.aclose()


async def test_a_request_not_in_the_recording_is_one_line_naming_agent_and_message(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "greeting.jsonl"
    await recorded_greeting(model, path)
    replay = Fragola.replay(path)
    try:
        tutor = replay.agent(name="tutor", instructions="Be kind.")
        with pytest.raises(ModelHTTPError) as caught:
            await tutor.user_message("Goodbye!\nSee you.")
        said = str(caught.value)
        assert "\n" not in said and caught.value.status_code == 409
        assert not said.startswith("the model API answered HTTP")  # not a real API's failure
        assert "agent 'tutor'" in said and "greeting.jsonl" in said
        assert "messages[1] (user) differs: sent 'Goodbye! See you.', recorded 'Hello!'" in said
        assert "fallback='demo'" in said
        assert_valid_history(tutor.state.messages)
        assert replay.scripted_model is not None and len(replay.scripted_model.requests) == 1

        strict = replay.agent(name="strict", instructions="Be strict.")
        with pytest.raises(ModelHTTPError, match=r"agent 'strict'.*messages\[0\] \(system\) "
                           r"differs: sent 'Be strict.', recorded 'Be kind.'"):
            await strict.user_message("Hello!")
        hot = replay.agent(name="hot", instructions="Be kind.",
                           model_settings={"temperature": 1.5})
        with pytest.raises(ModelHTTPError, match=re.escape(
                "the messages are the same, field 'temperature' differs: sent '1.5', "
                "recorded nothing (closest: line 2)")):
            await hot.user_message("Hello!")
        # Not a stream, and asking for usage: stream_options is not compared.
        same = replay.agent(name="same", instructions="Be kind.",
                            model_settings={"stream_options": {"include_usage": True}})
        assert (await same.user_message("Hello!")).messages[-1]["content"] == "Hello, class."
    finally:
        await replay.aclose()


async def test_the_demo_model_answers_what_was_not_recorded_when_asked(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "greeting.jsonl"
    await recorded_greeting(model, path)
    replay = Fragola.replay(path, fallback="demo")
    try:
        tutor = replay.agent(name="tutor", instructions="Be kind.", tools=[add])
        recorded = await replay.agent(name="tutor", instructions="Be kind.").user_message("Hello!")
        assert recorded.messages[-1]["content"] == "Hello, class."
        state = await tutor.user_message("Please use add with a=2 and b=3.")
        assert [m["role"] for m in state.messages] == ["user", "assistant", "tool", "assistant"]
        assert state.messages[2]["content"] == "5"
    finally:
        await replay.aclose()


async def test_credentials_never_reach_the_file(model: ScriptedModel, tmp_path: Path) -> None:
    path = tmp_path / "secret.jsonl"
    model.push(reply(f"Your key {KEY} is safe with me."), reply("Noted."), reply("Hi."))
    fragola = recorder(path, model, default_headers={"X-Api-Key": HEADER_KEY})
    agent = fragola.agent(name="careless", model_settings={
        "extra_headers": {"X-Custom-Token": EXTRA_KEY},
        "extra_body": {"api_key": "in-the-body-0123456789"}})
    await agent.user_message(f"My key is {KEY}, keep it.")
    await agent.user_message(f"And my header key is {HEADER_KEY}, my token {EXTRA_KEY}.")
    await fragola.aclose()
    assert model.headers[0]["x-api-key"] == "[redacted]"  # it was sent, under its name
    data = path.read_bytes()
    for secret in (KEY, HEADER_KEY, EXTRA_KEY, "abcdefghijklmnop", "in-the-body"):
        assert secret.encode() not in data
    exchange = lines(path)[1]
    assert exchange["request"]["messages"][0]["content"] == "My key is [redacted], keep it."

    plain = Fragola.record(path, base_url=model.base_url, api_key="plain-key-7f3a9c2e11")
    await plain.agent(name="plain").user_message("Is plain-key-7f3a9c2e11 a key?")
    await plain.aclose()  # a key of no known shape: known to be one, it is scrubbed as well
    assert b"7f3a9c2e11" not in path.read_bytes()

    replay = Fragola.replay(path)  # scrubbed alike, the request still matches
    try:
        again = replay.agent(name="careless", model_settings={"extra_body": {"api_key": "other"}})
        state = await again.user_message(f"My key is {KEY}, keep it.")
        assert state.messages[-1]["content"] == "Your key [redacted] is safe with me."
    finally:
        await replay.aclose()


async def test_agents_recording_at_once_to_one_file_write_whole_lines(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "busy.jsonl"
    model.chunk_size = 2  # long lines (50 kB): hundreds of chunks each
    long = "word " * 100
    model.brain = lambda request: reply(long + request["messages"][-1]["content"])
    fragolas = [recorder(path, model), recorder(path, model)]
    agents = [fragolas[i % 2].agent(name=f"agent{i}", model_settings={"stream": i % 3 == 0})
              for i in range(24)]
    await asyncio.gather(*(a.user_message(f"question {i}") for i, a in enumerate(agents)))
    for fragola in fragolas:
        await fragola.aclose()
    header, *exchanges = lines(path)  # every line whole JSON, the header once
    assert "fragola_nb_recording" in header
    assert sorted(e["agent"] for e in exchanges) == sorted(a.name for a in agents)
    assert all(("chunks" in e) == e["request"].get("stream", False) for e in exchanges)


@pytest.mark.parametrize(("text", "line", "problem"), [
    ("", 1, "is not the header of a Fragola.record recording"),
    ('{"model": "x"}\n', 1, "is not the header"),
    ('{"fragola_nb_recording": 9}\n', 1, "has format 9; this fragola_nb reads format 1"),
    ('{"fragola_nb_recording": 1}\n{"request": {}, "status": 200, "body": {}}\n{"requ\n', 3,
     "is not JSON"),
    ('{"fragola_nb_recording": 1}\n\n{"status": 200, "body": {}}\n', 3, "has no 'request'"),
    ('{"fragola_nb_recording": 1}\n{"request": {}, "status": "200", "body": 1}\n', 2,
     "has no HTTP 'status'"),
    ('{"fragola_nb_recording": 1}\n{"request": {}, "status": 200}\n', 2, "has no answer"),
])
def test_a_corrupt_recording_is_bad_usage_naming_path_and_line(
    tmp_path: Path, text: str, line: int, problem: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(BadUsage) as caught:
        Fragola.replay(path)
    assert str(caught.value).startswith(f"the recording {path}, line {line}: {problem}")


def test_a_missing_recording_or_a_file_that_is_not_one_is_bad_usage(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.jsonl"
    with pytest.raises(BadUsage, match=f"cannot read the recording {missing}: .*Fragola.record"):
        Fragola.replay(missing)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(BadUsage, match="line 1: is not JSON"):
        Fragola.record(notes, api_key=KEY)
    assert notes.read_text() == "my notes\n"  # nothing appended to it
    with pytest.raises(BadUsage, match="cannot write the recording"):
        Fragola.record(tmp_path / "no" / "dir.jsonl", api_key=KEY)
    for start in (Fragola.replay, lambda path: Fragola.record(path, api_key=KEY)):
        with pytest.raises(BadUsage, match=f"cannot read the recording {tmp_path}: Is a dir"):
            start(tmp_path)


def test_record_refuses_a_client_it_cannot_see_through(tmp_path: Path) -> None:
    import openai

    path = tmp_path / "never.jsonl"
    for option in ({"client": openai.AsyncOpenAI(api_key="x")},
                   {"api_key": "x", "http_client": openai.DefaultAsyncHttpxClient()}):
        with pytest.raises(BadUsage, match="cannot record through a"):
            Fragola.record(path, **option)
    assert not path.exists()


def test_replay_options_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text('{"fragola_nb_recording": 1}\n')
    for options, problem in (({"fallback": "smart"}, "fallback must be"),
                             ({"ignore": "model"}, "ignore must be a list"),
                             ({"chunk_delay": -1}, "chunk_delay must be"),
                             ({"temprature": 0}, "does not take 'temprature'")):
        with pytest.raises(BadUsage, match=problem):
            Fragola.replay(path, **options)


async def test_a_stream_cut_while_recording_is_cut_when_replayed(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "cut.jsonl"
    model.push(reply("a long answer that never ends", stream_cut_after=3))
    fragola = recorder(path, model)
    with pytest.raises(ModelConnectionError):
        await adder(fragola, "cut", stream=True).user_message("hi")
    await fragola.aclose()
    assert lines(path)[1]["cut"] is True and len(lines(path)[1]["chunks"]) == 3

    replay = Fragola.replay(path)
    try:
        agent = adder(replay, "cut", stream=True)
        with pytest.raises(ModelConnectionError):
            await agent.user_message("hi")
        assert_valid_history(agent.state.messages)
    finally:
        await replay.aclose()


def _lesson_module() -> Any:
    spec = importlib.util.spec_from_file_location("make_lesson", LESSON / "make_lesson.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_shipped_lesson_replays_with_an_answer_per_prompt(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lesson = _lesson_module()
    replay = Fragola.replay(LESSON / "lesson.jsonl")
    try:
        answers = await lesson.prompt_experiment(replay)
    finally:
        await replay.aclose()
    assert set(answers) == {"terse", "teacher", "pirate"}
    assert len(set(answers.values())) == 3 and "212" in answers["terse"]
