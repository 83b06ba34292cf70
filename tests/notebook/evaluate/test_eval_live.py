"""The live evaluation matrix costs what changed (issue 34): an update sends the cells of the
rows that changed (a ``patch`` message) and a head from counters kept row by row, never the
whole matrix; those counters equal a fresh working-out over every row at each change; the
end sends everything afresh; ``progress=False`` shows no live matrix."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from support.comm_log import Wire, record_comms
from support.helpers import make_agent, make_fragola

from fragola_nb import Fragola
from fragola_nb.core.usage import CallUsage, ModelPrice, Usage
from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.evaluate.evaluation import EVALUATION_WATCHERS, Evaluation
from fragola_nb.experiments.evaluate.summary import usage_total
from fragola_nb.graders import contains
from fragola_nb.models.scripted import Item, ScriptedModel, reply
from fragola_nb.notebook.evaluate.live import LiveTally, head_data
from fragola_nb.notebook.evaluate.verdicts import matrix_flags, verdict_data
from fragola_nb.notebook.evaluate.view import EvalView, matrix_cells


def queued(cases: int, variants: tuple[str, ...] = ("a", "b")) -> Evaluation:
    rows = [EvalRow(case=c, input=f"case {c}", variant=v) for c in range(cases)
            for v in variants]
    evaluation = Evaluation(rows, variants=variants, graders=[], repeat=1)
    evaluation.done = False  # as evaluate leaves it while rows run
    return evaluation


def one_update(wire: Wire, cases: int) -> tuple[list[Any], int]:
    """The messages the matrix of a ``cases``-case evaluation sends when one row finishes,
    and their size in bytes."""
    evaluation = queued(cases)
    view = EvalView(evaluation)  # no event loop here: an update is sent at once
    try:
        wire.clear()
        evaluation.set_row(3, replace(evaluation[3], status="done", answer="yes"))
        sent = [s for s in wire.log if s.kind == "comm_msg"]
        return [s.data for s in sent], sum(s.size for s in sent)
    finally:
        view.close()


def test_an_update_sends_the_changed_cell_and_the_head_whatever_the_rows_that_exist(
        monkeypatch: pytest.MonkeyPatch) -> None:
    wire = record_comms(monkeypatch)
    small, small_bytes = one_update(wire, 10)
    large, large_bytes = one_update(wire, 3000)  # 6,000 rows
    for sent in (small, large):
        patches = [m["content"] for m in sent if m.get("method") == "custom"]
        # row 3 is case 1 on variant b: cell 3, one mark, passed, no score
        assert patches == [{"do": "patch", "cells": [[3, ["p", None, ""]]], "flags": [[3, None]]}]
        states = [m["state"] for m in sent if m.get("method") == "update"]
        assert all(set(state) <= {"head", "verdicts"} for state in states), states
    # the same few hundred bytes: only the counts written in the head grow ("1/6,000")
    assert large_bytes - small_bytes < 40, (small_bytes, large_bytes)


def brain(request: dict[str, Any]) -> Item:
    """Paris on "right", London on "wrong"; "flip" alternates (a flaky cell)."""
    first = request["messages"][0]
    system = first["content"] if first["role"] in ("system", "developer") else ""
    if "flip" in system:
        brain.flips = getattr(brain, "flips", 0) + 1  # type: ignore[attr-defined]
        return reply("Paris" if brain.flips % 2 else "London")  # type: ignore[attr-defined]
    return reply("London" if "wrong" in system else "Paris")


VARIANTS = {"right": {}, "wrong": {"instructions": "be wrong"},
            "flaky": {"instructions": "flip"}}


class Checked:
    """At each change of a row, the matrix as the counters make it against a fresh working
    out over every row."""

    def __init__(self) -> None:
        self.checks = 0
        self.problems: list[str] = []

    def started(self, evaluation: Evaluation) -> bool:
        tally = LiveTally(evaluation)
        cells = matrix_cells(evaluation)
        flags: dict[str, Any] = {}

        def changed(index: int | None) -> None:
            if index is None:
                return
            tally.changed(index)
            new_cells, new_flags = tally.take()
            for at, cell in new_cells.items():
                cells[at] = cell
            for at, flag in new_flags.items():
                flags.pop(str(at), None) if flag is None else flags.__setitem__(str(at), flag)
            self.compare(evaluation, tally, cells, flags)

        evaluation.subscribe(changed)
        return False

    def compare(self, evaluation: Evaluation, tally: LiveTally, cells: list[Any],
                flags: dict[str, Any]) -> None:
        self.checks += 1
        lines = evaluation.summary()
        live = tally.lines()
        fresh = {"cells": matrix_cells(evaluation), "flags": matrix_flags(evaluation),
                 "head": head_data(evaluation, lines, evaluation.overview(lines)),
                 "intervals": verdict_data(evaluation, lines)["intervals"]}
        now = {"cells": cells, "flags": flags, "head": head_data(evaluation, live,
                                                                 tally.title(live)),
               "intervals": tally.intervals()}
        self.problems += [f"{key}: {now[key]!r} != {fresh[key]!r}" for key in fresh
                          if now[key] != fresh[key]]


@pytest.fixture
def checked() -> Iterator[Checked]:
    watcher = Checked()
    EVALUATION_WATCHERS.append(watcher)
    try:
        yield watcher
    finally:
        EVALUATION_WATCHERS.remove(watcher)


async def test_the_counters_equal_a_fresh_working_out_at_every_change(
        model: ScriptedModel, checked: Checked) -> None:
    model.brain = brain
    named = make_fragola(model).model
    agent = make_fragola(model, prices={named: {"input": 0.15, "output": 0.6}}).agent("geo")
    evaluation = await agent.evaluate([f"q{i}" for i in range(6)], VARIANTS,
                                      [contains("Paris")], repeat=2, concurrency=3)
    assert checked.checks >= 2 * len(evaluation) and checked.problems == []
    heads = head_data(evaluation, evaluation.summary(), evaluation.overview())["variants"]
    assert all(v["cost"].startswith("$") for v in heads)  # a paid cost, summed as it went
    assert matrix_flags(evaluation)  # the flaky variant's cells were flagged along the way


async def test_offline_calls_with_a_price_are_counted_as_priced_not_paid(
        checked: Checked) -> None:
    fragola = Fragola.scripted(brain=brain, prices={"scripted": {"input": 1, "output": 2}})
    try:
        evaluation = await fragola.agent("geo").evaluate(
            ["q1", "q2"], {"right": {}, "wrong": {"instructions": "be wrong"}},
            [contains("Paris")])
    finally:
        await fragola.aclose()
    assert checked.problems == [] and checked.checks >= 2 * len(evaluation)
    assert "not paid" in evaluation.overview()


def test_a_label_changes_only_its_cells_flags() -> None:
    evaluation = queued(4)
    for index in range(len(evaluation)):
        evaluation.set_row(index, replace(evaluation[index], status="done", answer="yes"))
    tally = LiveTally(evaluation)
    evaluation.label(5, False, "wrong")
    tally.changed(5)
    assert tally.take() == ({5: ["p", None, ""]}, {5: [False, "n"]})
    assert matrix_flags(evaluation) == {"5": [False, "n"]}


def test_the_end_sent_from_the_counters_equals_a_fresh_working_out() -> None:
    """At the run's end the matrix is sent whole from the counters, with the rows that did
    not run (changed without a word by ``end_unfinished``) counted in: the same cells,
    flags, head (stopped) and intervals as a fresh working-out over every row."""
    evaluation = queued(5)
    view = EvalView(evaluation)  # no event loop here: the tests are drawn at once
    try:
        for index in range(6):
            evaluation.set_row(index, replace(evaluation[index], status="done", answer="yes"))
        evaluation.set_row(6, replace(evaluation[6], status="running"))
        evaluation.end_unfinished("not run: stopped", "stopped")  # as evaluate's end does
        evaluation.seconds, evaluation.stopped, evaluation.why_stopped = 1.5, True, None
        evaluation.done = True
        evaluation.notify(None)
        lines = evaluation.summary()
        matrix = view.matrix
        assert matrix.cells == matrix_cells(evaluation)
        assert [cell[0] for cell in matrix.cells] == ["p"] * 6 + ["n"] * 4
        assert matrix.flags == matrix_flags(evaluation)
        assert matrix.head == head_data(evaluation, lines, evaluation.overview(lines))
        assert matrix.head["title"].endswith("stopped; 1.5 s")
        assert matrix.verdicts == verdict_data(evaluation, lines)
        assert len(matrix.verdicts["lines"]) == 1
    finally:
        view.close()


class Views:
    def __init__(self) -> None:
        self.views: list[EvalView] = []

    def started(self, evaluation: Evaluation) -> bool:
        self.views.append(EvalView(evaluation))
        return True


async def test_progress_false_shows_no_live_matrix(model: ScriptedModel) -> None:
    model.brain = brain
    watcher = Views()
    EVALUATION_WATCHERS.append(watcher)
    try:
        agent = make_agent(model, name="geo")
        await agent.evaluate(["q1"], VARIANTS, [contains("Paris")], progress=False)
        assert watcher.views == []
        shown = await agent.evaluate(["q1"], VARIANTS, [contains("Paris")])
        [view] = watcher.views  # progress=True (the default): the live matrix
        assert view.matrix.cells == matrix_cells(shown)
    finally:
        EVALUATION_WATCHERS.remove(watcher)
        for view in watcher.views:
            view.close()


def test_usages_summed_in_one_pass_equal_their_sum_one_by_one() -> None:
    first, second = ModelPrice(1.0, 2.0), ModelPrice(5.0, 9.0)
    usages = [Usage((CallUsage("m", 10, 5, 15),), {"m": first}), None,
              Usage((CallUsage("m", 3, 1, 4, cached=True), CallUsage("o", 7, 2, 9)),
                    {"m": second, "o": second}),
              Usage((CallUsage("x", 1, 1, 2, offline=True),))]
    start = Usage((CallUsage("s", 2, 2, 4),), {"s": second})
    for begin in (None, start):
        total = usage_total(usages, begin)
        one_by_one = sum((u for u in usages if u is not None), begin or Usage())
        assert total == one_by_one and total.prices == one_by_one.prices  # the first's win
        assert (total.cost, total.cost_text(), total.total_tokens) == (
            one_by_one.cost, one_by_one.cost_text(), one_by_one.total_tokens)
    assert usage_total([]) == Usage()
