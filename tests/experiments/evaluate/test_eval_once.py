"""Issue 34: a display of a finished evaluation reads its summary, its verdicts and its cells
several times (the matrix, its title, the repr, the static table); they are worked out once
for the same rows. These tests hold the other half: a changed row (a new, frozen object)
changes every figure at once, and what a caller is given is its own to change."""

from __future__ import annotations

import dataclasses

from support.helpers import make_fragola

from fragola_nb.experiments.graders.base import Grade
from fragola_nb.graders import contains
from fragola_nb.models.scripted import ScriptedModel, reply


async def test_a_changed_row_changes_the_summary_verdicts_and_cells(model: ScriptedModel) -> None:
    model.brain = lambda request: reply("Paris")
    agent = make_fragola(model).agent("geo")
    cases = [f"say Paris, case {n}" for n in range(6)]
    evaluation = await agent.evaluate(cases, {"a": {}, "b": {"instructions": "b"}},
                                      [contains("Paris")], progress=False)
    before = evaluation.summary()
    assert [line["pass_rate"] for line in before] == [1.0, 1.0]
    before[0]["pass_rate"] = 0.0  # the caller's own copy
    before[0]["graders"].clear()
    assert evaluation.summary()[0]["pass_rate"] == 1.0
    assert evaluation.summary()[0]["graders"] == {"contains('Paris')": 1.0}
    first = evaluation.verdicts()
    assert (first[0].losses, first[0].ties) == (0, 6)
    index = next(i for i, row in enumerate(evaluation) if row.variant == "b" and row.case == 2)
    row = evaluation[index]
    failed = dataclasses.replace(row, grades=[Grade("contains('Paris')", passed=False)])
    evaluation.set_row(index, failed)
    assert evaluation.summary()[1]["pass_rate"] == 5 / 6
    assert (evaluation.verdicts()[0].losses, evaluation.verdicts()[0].ties) == (1, 5)
    assert evaluation.cell(2, "b") == [failed]
    assert evaluation.cell(2, "a")[0].passed
    assert "b 83%" in repr(evaluation) and "83%" in evaluation._repr_html_()
    assert evaluation.cell(99, "a") == []
