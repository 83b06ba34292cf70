"""The end of a compare grid's streams (issue 26, item 3): a reply's last text and its clear go
with the group's paced messages, a column that ended with the text it streamed is not sent
again while others go on, and long answers are compared off the event loop."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.comm_log import Wire, record_comms
from support.compare_world import by_instructions
from support.helpers import make_agent
from support.helpers import until_async as until

from fragola_nb import Comparison
from fragola_nb.experiments.compare.comparison import WATCHERS
from fragola_nb.models.scripted import ScriptedModel
from fragola_nb.notebook.compare.view import CompareView
from fragola_nb.notebook.compare.worddiff import QUICK, LateDiffs, compared
from fragola_nb.notebook.stream import GROUP_INTERVAL, Stream, StreamGroup


def test_a_grouped_reply_ends_in_the_groups_paced_messages() -> None:
    async def scenario() -> list[tuple[float, dict[str, Any]]]:
        sent: list[tuple[float, dict[str, Any]]] = []
        group = StreamGroup(lambda news: sent.append((time.monotonic(), news)), ["a", "b"])
        group["a"].feed("one")
        group["a"].feed("one two")  # too soon: kept for the group's next message
        group["a"].end()  # stored: no message of its own
        assert [news for _, news in sent] == [{"a": {"text": "one", "stopped": False}}]
        await until(lambda: len(sent) == 3, timeout=2)
        await asyncio.sleep(GROUP_INTERVAL * 2)  # nothing more comes
        assert group["a"].ended_with == "one two" and group["a"].sent == ""
        return sent

    sent = asyncio.run(scenario())
    assert [news for _, news in sent] == [
        {"a": {"text": "one", "stopped": False}},
        {"a": {"add": " two", "stopped": False}},  # the last text, then the clear
        {"a": {"text": "", "stopped": False}},
    ]
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(sent)]
    assert min(gaps) >= GROUP_INTERVAL * 0.9, gaps  # each at the group's pace


def test_a_replys_end_goes_ahead_of_a_redraw_when_asked() -> None:
    async def scenario() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        group = StreamGroup(sent.append, ["a"])
        group["a"].feed("one")
        group["a"].feed("one two")
        group["a"].end()
        group.send_ends()  # a large message is about to go: the last text goes first
        group.send_ends()  # nothing ending with text: nothing
        return sent

    assert asyncio.run(scenario()) == [{"a": {"text": "one", "stopped": False}},
                                       {"a": {"add": " two", "stopped": False}}]


def test_a_chunk_without_text_sends_nothing_and_spends_no_pace() -> None:
    sent: list[dict[str, Any]] = []
    stream = Stream(sent.append)
    stream.feed("")  # a reply's first chunk: its role, no text
    stream.feed("Once")  # at once: the pace was not spent on the empty one
    assert sent == [{"text": "Once", "stopped": False}]
    news: list[dict[str, Any]] = []
    group = StreamGroup(news.append, ["a"])
    group["a"].feed("")
    group["a"].feed("Once")
    assert news == [{"a": {"text": "Once", "stopped": False}}]


def test_long_answers_are_compared_on_a_worker_and_the_view_is_told_once() -> None:
    short = ("a b c", "a b d")
    long_pairs = [("word " * (QUICK // 8), "word " * (QUICK // 8) + f"end {i}") for i in range(3)]

    async def scenario() -> list[Any]:
        told: list[float] = []
        diffs = LateDiffs(lambda: told.append(time.monotonic()))
        assert diffs.get(*short) == compared(*short)  # short: at once
        assert all(diffs.get(*pair) is None for pair in long_pairs)  # asked, not known yet
        assert diffs.get("x " * QUICK, "y " * QUICK, start=False) is None  # not asked
        await until(lambda: told, timeout=10)
        await asyncio.sleep(0.05)
        return [told, [diffs.get(*pair) for pair in long_pairs]]

    told, known = asyncio.run(scenario())
    assert len(told) == 1  # one redraw for the lot: each is a large message
    assert known == [compared(*pair) for pair in long_pairs]
    # with no event loop to come back to, at once
    assert LateDiffs(lambda: None).get(*long_pairs[0]) == compared(*long_pairs[0])


class Grids:
    """A watcher making a CompareView for each comparison, keeping every ``columns`` sent."""

    def __init__(self) -> None:
        self.views: list[CompareView] = []
        self.seen: list[list[dict[str, Any]]] = []

    def started(self, comparison: Comparison) -> None:
        view = CompareView(comparison)
        view.grid.observe(lambda change: self.seen.append(change["new"]), names="columns")
        self.views.append(view)

    def mimebundle(self, comparison: Comparison) -> None:
        return None


@pytest.fixture
def grids() -> Iterator[Grids]:
    watcher = Grids()
    WATCHERS.append(watcher)
    try:
        yield watcher
    finally:
        WATCHERS.remove(watcher)
        for view in watcher.views:
            view.close()


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    return record_comms(monkeypatch)


async def test_a_column_that_ended_with_its_streamed_text_is_kept_by_the_page_until_the_end(
        model: ScriptedModel, grids: Grids, wire: Wire) -> None:
    model.brain = by_instructions
    model.chunk_size, model.chunk_delay = 4, 0.005
    agent = make_agent(model, name="base", model_settings={"stream": True})
    task = asyncio.ensure_future(agent.compare("go", {
        "plain": {"instructions": "answer plainly"},
        "slow": {"instructions": "HANG then answer plainly"}}))
    await until(lambda: grids.views and [c["status"] for c in grids.views[0].grid.columns]
                == ["finished", "running"])
    [view] = grids.views
    answer = "[gpt-4o-mini] following: answer plainly"
    # plain ended with the text the page has from its stream: not sent again meanwhile
    await until(lambda: view.grid.columns[0]["kept"])
    plain = view.grid.columns[0]
    assert (plain["status"], plain["answer"], plain["streaming"]) == ("finished", "", False)
    assert plain["tokens"] and plain["seconds"] is not None
    # a page that opens now gets it with its hello
    wire.clear()
    view.grid._handle_custom_msg({"do": "hello"}, [])
    assert {"t": "stream", "cols": {"plain": {"text": answer}}} in wire.custom("stream")
    model.release()
    comparison = await task
    # the comparison's end: every answer in the columns, nothing kept
    first, slow = view.grid.columns
    assert (first["answer"], first["kept"]) == (answer, False)
    assert (slow["answer"], slow["kept"]) == ("late: HANG then answer plainly", False)
    assert slow["apart"] or slow["diff"]
    assert comparison.table()[0]["answer"] == answer
    assert any(cols[0]["kept"] for cols in grids.seen)
