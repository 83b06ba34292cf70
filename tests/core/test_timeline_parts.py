"""Issue 34, "where did the time go": a turn's timeline split by the wall clock into the time
a model call ran, the time only tools ran and the time between calls (fragola_nb itself, the
listeners of its events, approvals), figured on fixed timestamps; the three sum to the turn's
length, each gap is attributed to the bar after it, and the panel's data writes them out.
A real run with a slow listener shows the listener's time between the calls."""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.helpers import make_fragola

from fragola_nb import tool
from fragola_nb.core.timing import Parts, Timeline, ToolTiming, percents
from fragola_nb.core.usage import CallUsage, Usage
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls
from fragola_nb.notebook.panel.timeline import Made, timeline_shown


def model_call(started: float, seconds: float) -> CallUsage:
    return CallUsage("m", 10, 20, 30, 0, True, started, seconds / 2, seconds)


# model 100.0-101.5, tool 101.6-101.85, model 102.0-102.2: 2.2 s, 0.1 + 0.15 s between
USAGE = Usage((model_call(100.0, 1.5), model_call(102.0, 0.2)),
              tools=(ToolTiming("look", "c1", 101.6, 0.25),))


def test_the_parts_of_a_turn_sum_to_its_length_and_the_gaps_go_to_the_bar_after_them() -> None:
    timeline = Timeline.of(USAGE)
    assert timeline.span == pytest.approx(2.2)
    assert [bar.gap for bar in timeline.bars] == pytest.approx([0.0, 0.1, 0.15])
    assert timeline.parts() == pytest.approx(Parts(1.7, 0.25, 0.25))
    assert math.fsum(timeline.parts()) == pytest.approx(timeline.span)
    assert timeline.summary() == ("turn 2.20 s · model 1.70 s (77%) · tools 250 ms (12%) · "
                                  "between calls 250 ms (11%) · 47 tokens/s")  # 40 over 0.85 s


def test_tools_side_by_side_count_once_and_a_model_call_over_a_tool_counts_as_the_models(
) -> None:
    # model 0-1; tools 1-2 and 1.5-2.5 side by side; nothing 2.5-3; model 3-4 over a tool 3.5-4.2
    usage = Usage((model_call(0.0, 1.0), model_call(3.0, 1.0)),
                  tools=(ToolTiming("a", "c1", 1.0, 1.0), ToolTiming("b", "c2", 1.5, 1.0),
                         ToolTiming("c", "c3", 3.5, 0.7)))
    timeline = Timeline.of(usage)
    assert [(bar.label, bar.offset) for bar in timeline.bars] == [
        ("m", 0.0), ("a", 1.0), ("b", 1.5), ("m", 3.0), ("c", 3.5)]
    assert [bar.gap for bar in timeline.bars] == pytest.approx([0, 0, 0, 0.5, 0])
    assert timeline.span == pytest.approx(4.2)
    assert timeline.parts() == pytest.approx(Parts(2.0, 1.7, 0.5))
    assert timeline.tool_seconds == pytest.approx(2.7)  # summed: more than their wall time
    tools = timeline_shown(usage)["parts"][1]
    assert tools["text"] == "1.70 s (40%)" and "2.70 s of tool time summed" in tools["title"]


def test_shares_are_whole_percents_that_sum_to_100() -> None:
    assert percents([1, 1, 1], 3) == [34, 33, 33]
    assert percents([1.7, 0.25, 0.25], 2.2) == [77, 12, 11]
    assert percents([0.996, 0.002, 0.002], 1.0) == [100, 0, 0]
    assert percents([0, 0, 0], 0) == [0, 0, 0]


def test_a_turn_of_200_steps_is_split_exactly_whatever_its_gaps() -> None:
    calls, tools, now = [], [], 1000.0
    for step in range(200):  # a model call, a gap, a tool call, a gap
        seconds = 0.05 + step % 3 * 0.01
        calls.append(model_call(now, seconds))
        now += seconds + 0.001 * (step % 7 + 1)
        tools.append(ToolTiming("t", f"c{step}", now, 0.002 * (step % 5)))
        now += tools[-1].seconds + 0.001 * (step % 4 + 1)
    calls.append(model_call(now, 0.1))
    usage = Usage(tuple(calls), tools=tuple(tools))
    timeline = Timeline.of(usage)
    parts = timeline.parts()
    assert len(timeline.bars) == 401
    assert math.fsum(parts) == pytest.approx(timeline.span, abs=1e-9)
    assert parts.between == pytest.approx(sum(0.001 * (s % 7 + 1) + 0.001 * (s % 4 + 1)
                                              for s in range(200)))
    assert parts.model == pytest.approx(sum(c.seconds or 0 for c in calls))
    shown = timeline_shown(usage)
    assert sum(part["share"] for part in shown["parts"]) == 100
    assert [bar["n"] for bar in shown["bars"]] == list(range(1, 402))


def test_the_panels_data_names_each_gap_and_the_parts() -> None:
    shown = timeline_shown(USAGE)
    assert shown["turn"] == "2.20 s"
    assert [(p["label"], p["text"]) for p in shown["parts"]] == [
        ("model", "1.70 s (77%)"), ("tools", "250 ms (12%)"), ("between calls", "250 ms (11%)")]
    assert "fragola_nb itself and your listeners" in shown["parts"][2]["title"]
    assert [(b["n"], b["gap_text"]) for b in shown["bars"]] == [
        (1, ""), (2, "100 ms"), (3, "150 ms")]
    assert "150 ms between calls before it" in shown["bars"][2]["title"]


def test_a_growing_waterfall_made_again_is_as_fresh_and_keeps_each_bar_it_made() -> None:
    # A running turn's waterfall is made again as it grows (TimelineFeed): with what the makes
    # before made (Made), each make equals a fresh one and the bars made before are reused,
    # not made again (their tooltips' arguments made visible once).
    made = Made()
    before: dict[str, Any] | None = None
    calls: list[CallUsage] = []
    tools: list[ToolTiming] = []
    messages: list[dict[str, Any]] = []
    for step in range(30):
        calls.append(model_call(1000.0 + step, 0.5))
        tools.append(ToolTiming("look", f"c{step}", 1000.6 + step, 0.2))
        arguments = json.dumps({"n": step, "name": "file\u202egnp.exe"}, ensure_ascii=False)
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{step}", "type": "function",
             "function": {"name": "look", "arguments": arguments}}]})
        usage = Usage(tuple(calls), tools=tuple(tools))
        shown = timeline_shown(usage, messages, made)
        assert shown == timeline_shown(usage, messages)
        assert timeline_shown(usage, messages, made) is shown  # nothing added: not made again
        if before is not None:
            kept = shown["bars"][:len(before["bars"])]
            assert all(a is b for a, b in zip(kept, before["bars"], strict=True))
        before = shown
    assert before is not None and len(before["bars"]) == 60
    assert '"n": 29' in before["bars"][-1]["title"]
    assert "\\u202e" in before["bars"][-1]["title"]  # made visible, as a fresh make does


@tool(name="quick", description="Answer at once.")
async def quick(q: str) -> str:
    await asyncio.sleep(0)
    return q


async def test_a_slow_listener_shows_as_time_between_calls() -> None:
    script = [tool_calls(call("quick", {"q": "a"}, id="c1")),
              tool_calls(call("quick", {"q": "b"}, id="c2")), reply("done")]
    with ScriptedModel(script) as model:
        agent = make_fragola(model).agent("t", tools=[quick])
        agent.on_after_tool_call(lambda event: time.sleep(0.15))  # a listener that blocks
        before = agent.usage
        await agent.user_message("go")
    timeline = Timeline.of(agent.usage.since(before))
    assert [bar.kind for bar in timeline.bars] == ["model", "tool", "model", "tool", "model"]
    # each tool's end is followed by 0.15 s of the listener before the next model call
    assert timeline.bars[2].gap >= 0.15 and timeline.bars[4].gap >= 0.15
    parts = timeline.parts()
    assert parts.between >= 0.3
    assert math.fsum(parts) == pytest.approx(timeline.span)



def _grown(events: list[tuple[str, float, float]]) -> list[Usage]:
    """The usages of a turn as its calls are recorded one by one (each the one before, plus
    a call): ("model" or a tool's name, start, seconds)."""
    calls: list[CallUsage] = []
    tools: list[ToolTiming] = []
    grown = []
    for n, (kind, start, seconds) in enumerate(events):
        if kind == "model":
            calls.append(model_call(start, seconds))
        else:
            tools.append(ToolTiming(kind, f"c{n}", start, seconds))
        grown.append(Usage(tuple(calls), tools=tuple(tools)))
    return grown


@given(st.lists(st.tuples(st.sampled_from(["model", "look", "add"]),
                          st.floats(0, 50, allow_nan=False), st.floats(0, 5, allow_nan=False)),
                min_size=1, max_size=25),
       st.booleans(), st.sets(st.integers(0, 24), max_size=6))
@settings(max_examples=150, deadline=None)
def test_a_waterfall_made_as_it_grows_is_the_one_made_at_once(
        events: list[tuple[str, float, float]], in_order: bool, others: set[int]) -> None:
    # Calls recorded in the order they started (a running turn: each make lays out its new
    # calls only) or not (one that started before the last laid out: all laid out again),
    # and now and then a usage that does not go on from the last one (its calls other
    # objects, another turn's): every make equals a make from nothing.
    made = Made()
    for n, usage in enumerate(_grown(sorted(events, key=lambda e: e[1]) if in_order
                                     else events)):
        if n in others:
            usage = Usage(tuple(model_call(c.started or 0.0, c.seconds or 0.0)
                                for c in usage.calls), tools=usage.tools)
        assert timeline_shown(usage, (), made) == timeline_shown(usage, (), Made())
