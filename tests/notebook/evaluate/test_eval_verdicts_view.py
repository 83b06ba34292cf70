"""The evaluation matrix's verdicts in-process: each variant's interval and a line per verdict
(what repr and the static table say; the run's tests drawn right after it returns), flaky
and labelled cells, and a label set from a cell's detail (the message the view sends)
reaching ``Evaluation.label``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from support.helpers import make_agent

from fragola_nb.experiments.evaluate.evaluation import EVALUATION_WATCHERS, Evaluation
from fragola_nb.experiments.evaluate.labels import Label
from fragola_nb.graders import contains
from fragola_nb.models.scripted import Item, ScriptedModel, reply
from fragola_nb.notebook.evaluate.verdicts import label_message
from fragola_nb.notebook.evaluate.view import EvalView

HOSTILE = "<img src=x onerror=alert(1)>\u202e"
SHOWN = "<img src=x onerror=alert(1)>\\u202e"


def brain(request: dict[str, Any]) -> Item:
    """Paris, unless told to be wrong; "coin" alternates Paris and London on every ask."""
    first = request["messages"][0]
    said = str(request["messages"][-1]["content"])
    if "coin" in said:
        brain.asked = getattr(brain, "asked", 0) + 1  # type: ignore[attr-defined]
        return reply("Paris" if brain.asked % 2 else "London")  # type: ignore[attr-defined]
    wrong = first["role"] in ("system", "developer") and "wrong" in first["content"]
    return reply("London" if wrong else "Paris")


@pytest.fixture
def views() -> Iterator[list[EvalView]]:
    made: list[EvalView] = []

    class Watcher:
        def started(self, evaluation: Evaluation) -> bool:
            made.append(EvalView(evaluation))
            return True

    watcher = Watcher()
    EVALUATION_WATCHERS.append(watcher)
    try:
        yield made
    finally:
        EVALUATION_WATCHERS.remove(watcher)
        for view in made:
            view.close()


async def test_the_head_shows_each_interval_and_the_verdicts_as_repr_does(
        model: ScriptedModel, views: list[EvalView]) -> None:
    model.brain = brain
    agent = make_agent(model, name="geo")
    variants = {"right": {}, HOSTILE: {"instructions": "be wrong"}}
    evaluation = await agent.evaluate([f"q{i}" for i in range(8)], variants,
                                      [contains("Paris")], progress=True)
    [view] = views
    # evaluate has returned with the intervals drawn; the tests come right after, from the
    # loop (the verdicts asked for here first are then shared: worked out once)
    assert view.matrix.verdicts["lines"] == []
    assert len(view.matrix.verdicts["intervals"]) == 2
    await asyncio.sleep(0)

    data = view.matrix.verdicts
    summary = evaluation.summary()
    assert [(i["rate"], i["low"], i["high"], i["cases"]) for i in data["intervals"]] == [
        (line["pass_rate"], *line["pass_rate_ci"], line["cases"]) for line in summary]
    assert data["intervals"][0]["text"] == "100% [68–100%]"
    [verdict] = evaluation.verdicts()
    assert data["lines"] == [{"text": verdict.line().replace("\u202e", "\\u202e"),
                              "decided": True}]
    assert data["lines"][0]["text"].startswith(f"{SHOWN} vs right: −100 pts")
    assert data["lines"][0]["text"] in repr(evaluation)  # the repr writes \u202e out too
    html = evaluation._repr_html_()
    assert "68–100% of 8 cases" in html and "−100 pts" in html
    assert "<img src=x" not in html  # the hostile name is escaped in the static table


async def test_with_a_baseline_the_view_says_each_variants_verdict_and_the_setups_changes(
        model: ScriptedModel, views: list[EvalView]) -> None:
    model.brain = brain
    agent = make_agent(model, name="geo")
    before = await agent.evaluate(["q1", "q2"], {"v": {"instructions": "be wrong"}},
                                  [contains("Paris")], progress=True)
    now = await agent.evaluate(["q1", "q2"], {"v": {}}, [contains("Paris")], progress=True)
    diff = now.diff(before)

    lines = [line["text"] for line in views[-1].matrix.verdicts["lines"]]
    assert lines == [diff.versus["v"].line(),
                     "setup: variant 'v': instructions changed: [-be wrong-]"]
    # two cases, both better: the same difference everywhere (sd 0, no cases_needed), yet
    # no exact test decides on two cases
    assert lines[0] == ("v now vs v before: +100 pts [+100, +100], p = 0.5, not "
                        "distinguishable (about 6 cases would tell)")
    assert lines[0] in repr(diff)


async def test_flaky_cells_and_labels_are_marked_and_a_detail_labels_its_row(
        model: ScriptedModel, views: list[EvalView]) -> None:
    model.brain = brain
    brain.asked = 0  # type: ignore[attr-defined]
    agent = make_agent(model, name="geo")
    evaluation = await agent.evaluate(["coin", "fixed"], {"right": {}}, [contains("Paris")],
                                      repeat=2, concurrency=1, progress=True)
    [view] = views
    matrix = view.matrix
    assert matrix.flags == {"0": [True, ""]}  # case 0's repeats disagree

    matrix.selected = [1, 0, 1]  # a click on case 1, repeat 2
    assert matrix.detail["label"] is None and matrix.detail["finished"] is True
    message = {"do": "label", "at": [1, 0, 1], "passed": False, "note": "<b>too short</b>"}
    matrix._handle_custom_msg(message, [])  # what ✗ in the detail sends
    assert evaluation[3].label == Label(False, "<b>too short</b>")
    assert matrix.detail["label"] == {"passed": False, "note": "<b>too short</b>"}
    view.refresh()
    assert matrix.flags == {"0": [True, ""], "1": [False, "-n"]}
    assert "labelled ✗" in evaluation._repr_html_() and "≈ flaky" in evaluation._repr_html_()
    matrix._handle_custom_msg({**message, "passed": None}, [])
    assert evaluation[3].label is None


def test_a_label_message_names_a_row_that_ran_or_nothing() -> None:
    from fragola_nb.experiments.evaluate.evalrow import EvalRow

    rows = [EvalRow(case=0, input="q", variant="a", status="done", answer="x"),
            EvalRow(case=0, input="q", variant="b", status="not run")]
    run = Evaluation(rows, variants=["a", "b"], graders=[], repeat=1)

    assert label_message(run, {"do": "label", "at": [0, 0, 0], "passed": True,
                               "note": "x" * 3000}) == (0, True, "x" * 2000)
    for bad in ({"do": "label", "at": [0, 1, 0], "passed": True},  # not run
                {"do": "label", "at": [0, 2, 0], "passed": True},  # no such variant
                {"do": "label", "at": [0, 0], "passed": True},
                {"do": "label", "at": [0, 0, 0], "passed": "yes"},
                {"do": "label", "at": [0, 0, 0], "passed": True, "note": 3},
                {"do": "hello"}, "label"):
        assert label_message(run, bad) is None
