"""``Fragola.cached``: a scripted model stands in for the real API; a hit must not reach it
(its request count says so), must cost nothing and say it was cached."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from fragola_nb import Agent, BadUsage, Fragola, load_session, save_session
from fragola_nb.core.usage import Usage, call_read_back, check_prices
from fragola_nb.models.recording.cache import REPEAT_INDEX, base_url_of
from fragola_nb.models.recording.recordfile import read_recording
from fragola_nb.models.scripted import ScriptedModel, reply

KEY = "sk-secret-abcdefghijklmnop123456"
HEADER_KEY = "hdr-key-0123456789abcdefXYZ"
EXTRA_KEY = "extra-0123456789abcdefXYZ"
PRICES = {"gpt-test": {"input": 1.0, "output": 2.0}}


def cached(path: Path, api: ScriptedModel, **options: Any) -> Fragola:
    options.setdefault("max_retries", 0)
    return Fragola.cached(path, "gpt-test", base_url=api.base_url, api_key=KEY,
                          prices=PRICES, **options)


def tutor(fragola: Fragola, *, stream: bool = False, **settings: Any) -> Agent:
    return fragola.agent(name="tutor", instructions="Be brief.",
                         model_settings={"stream": stream, **settings} if stream else settings)


async def ask(fragola: Fragola, question: str = "What is 2 + 3?", **options: Any) -> Agent:
    agent = tutor(fragola, **options)
    await agent.user_message(question)
    return agent


async def test_a_miss_is_sent_and_appended_and_the_same_request_is_a_free_hit(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "cache.jsonl"
    model.push(reply("5"))
    fragola = cached(path, model)
    first = await ask(fragola)
    assert len(model.requests) == 1 and len(read_recording(path)) == 1
    assert first.usage.cost and first.usage.cost > 0 and not first.usage.calls[0].cached

    again = await ask(fragola)
    assert len(model.requests) == 1  # the server was not asked
    assert again.state.messages == first.state.messages
    call = again.usage.calls[0]
    assert call.cached and call.total_tokens == first.usage.total_tokens
    assert again.usage.cost == 0.0 and again.usage.cached_calls == 1
    assert again.usage.saved == first.usage.cost
    assert "cached" in again.usage.summary()
    assert (first.usage + again.usage).cost == first.usage.cost  # what was paid
    assert again.usage.cached_note == "cached" and first.usage.cached_note == ""
    assert (first.usage + again.usage).cached_note == "1 of 2 cached"
    await fragola.aclose()

    other = cached(path, model)  # a new Fragola reads the file
    try:
        assert (await ask(other)).usage.calls[0].cached and len(model.requests) == 1
    finally:
        await other.aclose()


async def test_other_settings_or_another_api_are_other_keys(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "cache.jsonl"
    model.push(reply("a"), reply("b"), reply("c"))
    fragola = cached(path, model)
    await ask(fragola)
    assert not (await ask(fragola, temperature=0.5)).usage.calls[0].cached
    assert not (await ask(fragola, "What is 3 + 4?")).usage.calls[0].cached
    assert len(model.requests) == 3
    await fragola.aclose()
    # A server on this machine is keyed without its port: a local model server started
    # again on another free port still hits.
    elsewhere = ScriptedModel([reply("d")]).start()
    try:
        moved = cached(path, elsewhere)
        assert (await ask(moved)).usage.calls[0].cached and elsewhere.requests == []
        await moved.aclose()
    finally:
        elsewhere.stop()


def test_the_key_s_base_url_keeps_the_host_and_path_and_drops_a_local_port() -> None:
    assert base_url_of(httpx2.URL("https://api.example.com:8443/v1/chat/completions")) == (
        "https://api.example.com:8443/v1")
    assert base_url_of(httpx2.URL("https://user:pw@api.example.com/v1/chat/completions?k=1")
                       ) == "https://api.example.com/v1"
    for host in ("127.0.0.1:8080", "localhost:11434", "[::1]:9"):
        assert base_url_of(httpx2.URL(f"http://{host}/v1/chat/completions")) == (
            "http://loopback/v1")
    assert base_url_of(httpx2.URL("http://127.0.0.1:1/other/chat/completions")) == (
        "http://loopback/other")


async def test_each_repeat_index_is_a_sample_of_its_own_then_all_replay(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "cache.jsonl"
    model.push(reply("one"), reply("two"), reply("three"))

    async def samples(fragola: Fragola) -> list[tuple[str, bool]]:
        seen = []
        for index in range(3):
            token = REPEAT_INDEX.set(index)
            try:
                agent = await ask(fragola)
            finally:
                REPEAT_INDEX.reset(token)
            seen.append((agent.state.messages[-1]["content"], agent.usage.calls[0].cached))
        await fragola.aclose()
        return seen

    assert await samples(cached(path, model)) == [
        ("one", False), ("two", False), ("three", False)]
    assert len(model.requests) == 3
    assert [e.repeat for e in read_recording(path)] == [0, 1, 2]
    assert await samples(cached(path, model)) == [("one", True), ("two", True), ("three", True)]
    assert len(model.requests) == 3


async def test_a_streamed_hit_streams_the_recorded_chunks(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "cache.jsonl"
    model.push(reply("Two and three make five, streamed in several chunks."))

    async def streamed(fragola: Fragola) -> tuple[list[str], Agent]:
        agent = tutor(fragola, stream=True)
        contents: list[str] = []
        agent.on_model_chunk(lambda event: contents.append(event.content))
        await agent.user_message("What is 2 + 3?")
        await fragola.aclose()
        return contents, agent

    contents, first = await streamed(cached(path, model))
    again, hit = await streamed(cached(path, model))
    assert len(model.requests) == 1 and len(contents) > 2
    assert again == contents and hit.state.messages == first.state.messages
    assert hit.usage.calls[0].cached and hit.usage.calls[0].reported
    plain = cached(path, model)  # a plain request is not the streamed one: another answer
    model.push(reply("5"))
    assert not (await ask(plain)).usage.calls[0].cached
    await plain.aclose()


async def test_two_identical_requests_at_once_make_one_call(
    model: ScriptedModel, tmp_path: Path
) -> None:
    release = threading.Event()

    def slow(request: dict[str, Any]) -> Any:
        release.wait(10)
        return reply("5")

    model.push(slow)
    fragola = cached(tmp_path / "cache.jsonl", model)
    both = asyncio.gather(ask(fragola), ask(fragola))
    assert await asyncio.to_thread(model.wait_for_requests, 1)
    release.set()
    agents = await both
    await fragola.aclose()
    assert len(model.requests) == 1
    assert sorted(agent.usage.calls[0].cached for agent in agents) == [False, True]
    assert agents[0].state.messages == agents[1].state.messages


async def test_credentials_never_reach_the_file_and_the_request_still_hits(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "cache.jsonl"
    model.push(reply("5"))
    fragola = cached(path, model, default_headers={"X-Api-Key": HEADER_KEY})
    settings = {"extra_body": {"access_token": EXTRA_KEY}}
    await ask(fragola, **settings)
    assert (await ask(fragola, **settings)).usage.calls[0].cached
    await fragola.aclose()
    text = path.read_text()
    assert len(model.requests) == 1 and "tutor" in text
    for secret in (KEY, HEADER_KEY, EXTRA_KEY):
        assert secret not in text


async def test_a_torn_last_line_is_left_out_then_dropped(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "cache.jsonl"
    model.push(reply("5"), reply("7"))
    fragola = cached(path, model)
    await ask(fragola)
    await fragola.aclose()
    with path.open("ab") as file:
        file.write(b'{"agent":"tutor","status":200,"requ')  # a kernel killed mid-write
    fragola = cached(path, model)
    assert (await ask(fragola)).usage.calls[0].cached
    assert not (await ask(fragola, "What is 3 + 4?")).usage.calls[0].cached
    await fragola.aclose()
    assert len(read_recording(path)) == 2 and b'"requ\n' not in path.read_bytes()


@pytest.mark.parametrize("content", [
    b'{"fragola_nb_recording": 1}\nnot json\n',
    b'{"fragola_nb_recording": 1}\n{"request": {}, "status": "ok", "body": {}}\n',
    b"some notes, not a recording\n",
])
def test_a_broken_file_is_one_clear_error_and_left_untouched(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_bytes(content)
    with pytest.raises(BadUsage, match=r"broken\.jsonl, line \d") as raised:
        Fragola.cached(path, "gpt-test", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    assert "\n" not in str(raised.value) and KEY not in str(raised.value)
    assert path.read_bytes() == content


@pytest.mark.parametrize("option", ["client", "http_client"])
def test_cached_refuses_a_client_of_your_own(tmp_path: Path, option: str) -> None:
    given = (openai.AsyncOpenAI(api_key=KEY) if option == "client"
             else httpx2.AsyncClient())
    with pytest.raises(BadUsage, match=f"Fragola.cached cannot record through a {option}="):
        Fragola.cached(tmp_path / "c.jsonl", **{option: given})
    assert not (tmp_path / "c.jsonl").exists()


async def test_a_recording_answers_as_a_cache_and_a_cache_replays(
    model: ScriptedModel, tmp_path: Path
) -> None:
    path = tmp_path / "lesson.jsonl"
    model.push(reply("5"))
    recorder = Fragola.record(path, model="gpt-test", base_url=model.base_url, api_key=KEY,
                              max_retries=0)
    recorded = await ask(recorder)
    await recorder.aclose()
    fragola = cached(path, model)
    hit = await ask(fragola)
    await fragola.aclose()
    assert hit.usage.calls[0].cached and len(model.requests) == 1
    assert hit.state.messages == recorded.state.messages

    model.push(reply("7"))
    filler = cached(path, model)
    await ask(filler, "What is 3 + 4?")
    await filler.aclose()
    replay = Fragola.replay(path)
    try:
        answered = await ask(replay, "What is 3 + 4?")
        assert answered.state.messages[-1]["content"] == "7"
    finally:
        await replay.aclose()
    entries = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert [("base_url" in e, e.get("repeat")) for e in entries] == [(False, None), (True, 0)]


def test_a_batch_resume_row_keeps_whether_a_call_was_cached() -> None:
    fields = {"model": "gpt-test", "prompt_tokens": 3, "completion_tokens": 1,
              "total_tokens": 4, "cached_tokens": 0, "reported": True}
    assert not call_read_back(fields).cached  # a row written before the field: paid for
    hit = call_read_back({**fields, "cached": True})
    assert hit.cached and Usage((hit,), check_prices(PRICES)).cost == 0.0
    with pytest.raises(ValueError, match="'cached' must be true or false"):
        call_read_back({**fields, "cached": "yes"})


async def test_batch_and_compare_tables_say_which_rows_were_cached(
    model: ScriptedModel, tmp_path: Path
) -> None:
    def answer(request: dict[str, Any]) -> Any:
        said = request["messages"][-1]["content"]
        return reply(f"{said} (short)" if "max_tokens" in request else f"{said} answered")

    model.push(*[answer] * 5)
    fragola = cached(tmp_path / "cache.jsonl", model)
    agent = tutor(fragola)
    first = await agent.batch(["2 + 3?", "3 + 4?"], concurrency=1, progress=False)
    assert "cached" not in first._repr_html_() and first.usage.cost
    again = await agent.batch(["2 + 3?", "3 + 4?", "4 + 5?"], concurrency=1, progress=False)
    assert again.answers == [f"{n} + {n + 1}? answered" for n in (2, 3, 4)]
    assert len(model.requests) == 3
    assert again.summary().count("2 of 3 calls cached") == 1
    cells = [row.split("</td>")[-3] for row in again._repr_html_().split("<tr>")[2:]]
    assert [cell.endswith("cached") for cell in cells] == [True, True, False]

    variants = {"short": {"model_settings": {"max_tokens": 5}}, "long": {}}
    await agent.compare("Say hi.", variants)
    shown = await agent.compare("Say hi.", variants)
    await fragola.aclose()
    assert len(model.requests) == 5
    assert shown["short"].state.messages[-1]["content"] == "Say hi. (short)"
    facts = [line for line in repr(shown).splitlines() if line.startswith("- ")]
    assert [(" tokens; cached; " in line) for line in facts] == [True, True]
    assert shown._repr_html_().count(" cached</td>") == 2


async def test_a_saved_session_keeps_which_calls_were_cached(
    model: ScriptedModel, tmp_path: Path
) -> None:
    model.push(reply("5"))
    fragola = cached(tmp_path / "cache.jsonl", model)
    await ask(fragola)
    hit = await ask(fragola)
    save_session(tmp_path / "lesson.fragola.json", hit)
    loaded = load_session(tmp_path / "lesson.fragola.json", fragola)
    await fragola.aclose()
    again = loaded[hit.name]
    assert again.usage.calls == hit.usage.calls and again.usage.calls[0].cached
    assert again.usage.cost == 0.0 and again.usage.saved == hit.usage.saved
