"""Issue 24 item 3, "where the time went": each model call's start, time to first token,
duration and output rate, each tool call's duration, kept by sessions and batch resume rows,
and laid out as a turn's timeline (``fragola_nb.core.timing``).

The model is the scripted OpenAI-compatible server on loopback, reached by the real
``openai`` client; the delays are the server's own (``hang``, ``chunk_delay``) and the
tool's. Timing assertions are lower bounds and orderings that hold on a loaded machine.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from support.helpers import make_fragola

from fragola_nb import load_session, save_session, tool
from fragola_nb.core.timing import Timeline
from fragola_nb.core.usage import call_read_back
from fragola_nb.models.scripted import ScriptedModel, call, hang, reply, tool_calls
from fragola_nb.notebook.panel.timeline import timeline_shown


@tool(name="slow", description="Wait a little, then answer.")
async def slow(q: str) -> str:
    await asyncio.sleep(0.2)
    return f"slow {q}"


async def test_a_streamed_call_records_its_first_token_after_the_servers_delay() -> None:
    # The server holds the answer 0.3 s, then streams it in 10 chunks 0.02 s apart.
    before = time.time()
    with ScriptedModel([hang(0.3, then=reply("word " * 40))], chunk_size=20,
                       chunk_delay=0.02) as model:
        agent = make_fragola(model).agent("t", model_settings={"stream": True})
        await agent.user_message("go")
    (one,) = agent.usage.calls
    assert one.started is not None and one.ttft is not None and one.seconds is not None
    assert before <= one.started <= time.time()
    assert one.ttft >= 0.3
    assert one.seconds >= one.ttft + 0.02 * (len(model.chunks) - 2)  # the chunks' gaps after
    assert one.completion_tokens > 0
    assert one.tokens_per_second == pytest.approx(
        one.completion_tokens / (one.seconds - one.ttft))
    assert agent.usage.model_seconds == one.seconds


async def test_a_call_that_is_not_streamed_has_its_whole_response_as_first_token() -> None:
    with ScriptedModel([hang(0.3, then=reply("all at once"))]) as model:
        agent = make_fragola(model).agent("t")
        await agent.user_message("go")
    (one,) = agent.usage.calls
    assert one.seconds is not None and one.seconds >= 0.3
    assert one.ttft == one.seconds
    assert one.tokens_per_second == pytest.approx(one.completion_tokens / one.seconds)


async def test_each_tool_call_that_ran_records_its_duration() -> None:
    script = [tool_calls(call("slow", {"q": "a"}, id="c1"), call("slow", {"q": "b"}, id="c2"),
                         call("missing", {}, id="c3")),
              reply("done")]
    with ScriptedModel(script) as model:
        agent = make_fragola(model).agent("t", tools=[slow])
        before = agent.usage
        await agent.user_message("go")
    turn = agent.usage.since(before)
    # the unknown tool did not run: no time was spent in it
    assert [(t.name, t.call_id) for t in turn.tools] == [("slow", "c1"), ("slow", "c2")]
    assert all(t.seconds >= 0.2 for t in turn.tools)
    assert turn.tool_seconds >= 0.4
    first, second = turn.tools
    assert second.started >= first.started + first.seconds - 0.01  # one after the other
    # the timeline: model, tool, tool, model, in the order they started, never overlapping
    timeline = Timeline.of(turn)
    assert [(b.kind, b.label) for b in timeline.bars] == [
        ("model", "gpt-4o-mini"), ("tool", "slow"), ("tool", "slow"), ("model", "gpt-4o-mini")]
    assert timeline.bars[0].offset == 0
    for earlier, later in pairwise(timeline.bars):
        assert later.offset >= earlier.offset + earlier.seconds - 0.01
    assert timeline.span >= 0.4
    assert "tools " in timeline.summary() and "model " in timeline.summary()
    # the turn split by its own timestamps: the parts sum to it, the gaps are between calls
    parts = timeline.parts()
    assert parts.tools >= 0.4 and math.fsum(parts) == pytest.approx(timeline.span)
    assert parts.between == pytest.approx(sum(bar.gap for bar in timeline.bars))


async def test_a_tool_that_raises_is_timed_too() -> None:
    @tool(name="broken", description="Fails after a while.")
    async def broken() -> str:
        await asyncio.sleep(0.2)
        raise RuntimeError("no")

    with ScriptedModel([tool_calls(call("broken", {})), reply("sorry")]) as model:
        agent = make_fragola(model).agent("t", tools=[broken])
        await agent.user_message("go")
    (timed,) = agent.usage.tools
    assert timed.name == "broken" and timed.seconds >= 0.2


async def test_a_fork_starts_with_no_tool_time_and_equal_usages_ignore_time() -> None:
    with ScriptedModel([tool_calls(call("slow", {"q": "a"})), reply("done")]) as model:
        agent = make_fragola(model).agent("t", tools=[slow])
        await agent.user_message("go")
    assert len(agent.usage.tools) == 1
    assert agent.fork().usage.tools == ()
    again = type(agent.usage)(tuple(type(c)(c.model, c.prompt_tokens, c.completion_tokens,
                                            c.total_tokens, c.cached_tokens, c.reported)
                                    for c in agent.usage.calls))
    assert again == agent.usage  # the counts decide equality, not the time


async def test_a_session_keeps_the_timings(tmp_path: Path) -> None:
    script = [hang(0.3, then=tool_calls(call("slow", {"q": "a"}, id="c1"))), reply("done")]
    with ScriptedModel(script) as model:
        agent = make_fragola(model).agent("t", tools=[slow])
        await agent.user_message("go")
        path = save_session(tmp_path / "s.json", agent)
        loaded = load_session(path, make_fragola(model), tools=[slow])["t"]
    saved = json.loads(path.read_text())["agents"][0]
    assert {"started", "ttft", "seconds"} <= set(saved["usage"][0])
    assert saved["tool_timings"][0]["name"] == "slow"
    for mine, theirs in zip(agent.usage.calls, loaded.usage.calls, strict=True):
        assert (mine.started, mine.ttft, mine.seconds) == (theirs.started, theirs.ttft,
                                                           theirs.seconds)
    assert loaded.usage.calls[0].ttft is not None and loaded.usage.calls[0].ttft >= 0.3
    assert loaded.usage.tools == agent.usage.tools
    assert Timeline.of(loaded.usage) == Timeline.of(agent.usage)


async def test_an_older_session_file_without_timings_still_loads(tmp_path: Path) -> None:
    with ScriptedModel([tool_calls(call("slow", {"q": "a"})), reply("done")]) as model:
        agent = make_fragola(model).agent("t", tools=[slow])
        await agent.user_message("go")
        path = save_session(tmp_path / "s.json", agent)
        document = json.loads(path.read_text())
        record = document["agents"][0]
        del record["tool_timings"]
        for used in record["usage"]:
            for name in ("started", "ttft", "seconds"):
                del used[name]
        path.write_text(json.dumps(document))
        loaded = load_session(path, make_fragola(model), tools=[slow])["t"]
    assert loaded.usage == agent.usage  # the counts, as before
    assert loaded.usage.tools == () and loaded.usage.calls[0].ttft is None
    assert loaded.usage.calls[0].tokens_per_second is None
    assert Timeline.of(loaded.usage).bars == () and timeline_shown(loaded.usage) == {}


def test_a_session_file_with_a_negative_time_is_refused(tmp_path: Path) -> None:
    from fragola_nb.base.errors import SessionError

    async def saved() -> Path:
        with ScriptedModel([reply("hi")]) as model:
            agent = make_fragola(model).agent("t")
            await agent.user_message("go")
            return save_session(tmp_path / "s.json", agent)

    path = asyncio.run(saved())
    document = json.loads(path.read_text())
    document["agents"][0]["usage"][0]["ttft"] = -1
    path.write_text(json.dumps(document))
    with ScriptedModel() as model, pytest.raises(SessionError):
        load_session(path, make_fragola(model))


async def test_batch_resume_rows_keep_the_timings_and_old_rows_load(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"

    def answer(request: dict[str, Any]) -> Any:
        if request["messages"][-1]["role"] == "user":
            return tool_calls(call("slow", {"q": "x"}))
        return reply("done")

    with ScriptedModel(brain=answer) as model:
        agent = make_fragola(model).agent("t", tools=[slow])
        first = await agent.batch(["a", "b"], resume=path, progress=False)
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert all({"started", "ttft", "seconds"} <= set(row["usage"][0]) for row in lines)
        assert all(row["tools"][0]["name"] == "slow" for row in lines)
        again = await agent.batch(["a", "b"], resume=path, progress=False)
        assert all(row.resumed for row in again)
        for old, new in zip(first, again, strict=True):
            assert old.usage is not None and new.usage is not None
            assert new.usage.tools == old.usage.tools
            assert [c.ttft for c in new.usage.calls] == [c.ttft for c in old.usage.calls]
        # a file written before the timings: no "tools", calls without timing fields
        old_rows = []
        for row in lines:
            row.pop("tools")
            for used in row["usage"]:
                for name in ("started", "ttft", "seconds"):
                    del used[name]
            old_rows.append(json.dumps(row))
        path.write_text("\n".join(old_rows) + "\n")
        older = await agent.batch(["a", "b"], resume=path, progress=False)
    assert all(row.resumed and row.usage is not None and row.usage.tools == ()
               for row in older)
    assert older.usage.total_tokens == first.usage.total_tokens


def test_a_resume_row_with_a_bad_time_is_refused() -> None:
    fields = {"model": "m", "prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3,
              "cached_tokens": 0, "reported": True}
    assert call_read_back(fields).ttft is None
    timed = call_read_back({**fields, "started": 1.0, "ttft": 0.5, "seconds": 2.0})
    assert (timed.started, timed.ttft, timed.seconds) == (1.0, 0.5, 2.0)
    assert timed.tokens_per_second == pytest.approx(2 / 1.5)
    for bad in ({**fields, "ttft": 0.5}, {**fields, "started": 1.0, "ttft": -1, "seconds": 2},
                {**fields, "started": 1.0, "ttft": True, "seconds": 2}):
        with pytest.raises(ValueError, match="a call's"):
            call_read_back(bad)


def test_the_panels_timeline_data_writes_durations_and_keeps_hostile_text_as_text() -> None:
    from fragola_nb.core.timing import ToolTiming
    from fragola_nb.core.usage import CallUsage, Usage

    hostile = '<img src=x onerror="alert(1)">\u202egnp.exe'
    usage = Usage((CallUsage("m", 10, 40, 50, 0, True, 100.0, 0.5, 1.5),
                   CallUsage("m", 10, 5, 15, 0, True, 102.0, 0.2, 0.2)),
                  tools=(ToolTiming("look", "c1", 101.6, 0.25),))
    messages = [{"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "look", "arguments": json.dumps({"q": hostile})}}]}]
    shown = timeline_shown(usage, messages)
    assert [(b["kind"], b["label"], b["start"], b["text"]) for b in shown["bars"]] == [
        ("model", "model", 0.0, "1.50 s"), ("tool", "look", pytest.approx(1.6), "250 ms"),
        ("model", "model", 2.0, "200 ms")]
    assert shown["span"] == pytest.approx(2.2)
    # 40 tokens over 1 s of streaming, 5 in one piece of 0.2 s: 45 over 1.2 s
    assert usage.tokens_per_second == pytest.approx(45 / 1.2)
    assert shown["summary"] == ("turn 2.20 s · model 1.70 s (77%) · tools 250 ms (12%) · "
                                "between calls 250 ms (11%) · 38 tokens/s")
    assert "first token after 500 ms" in shown["bars"][0]["title"]
    title = shown["bars"][1]["title"]
    assert "\\u202e" in title and "\u202e" not in title  # the override written out
    assert "<img" in title  # text for textContent/title, never HTML


def test_calls_without_timing_have_no_rate_rather_than_zero() -> None:
    from fragola_nb.core.usage import CallUsage, Usage

    usage = Usage((CallUsage("m", 1, 2, 3),), {})
    assert usage.as_dict()["requests"] == 1 and usage.tool_seconds == 0
    assert usage.calls[0].tokens_per_second is None and usage.tokens_per_second is None
