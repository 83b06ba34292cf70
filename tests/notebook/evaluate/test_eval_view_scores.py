"""The evaluation matrix on one scale: a cell's mean score is from 0 to 1 even with a judge on
1 to 5 beside a check, and a row's detail shows the judge's own score on its scale."""

from __future__ import annotations

from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.evaluate.evaluation import Evaluation
from fragola_nb.graders import Grade
from fragola_nb.notebook.evaluate.view import EvalView, matrix_cells


def test_a_judges_score_is_on_0_to_1_in_the_cell_and_as_it_gave_it_in_the_detail() -> None:
    grades = (Grade("contains('Paris')", True, reason="answer contains 'Paris'"),
              Grade("judge", True, reason="fine", raw_score=4, scale=(1, 5)))
    evaluation = Evaluation([EvalRow(case=0, input="Capital?", variant="base", status="done",
                                     answer="Paris", grades=grades, seconds=0.1)],
                            variants=["base"], graders=[g.name for g in grades], repeat=1)
    view = EvalView(evaluation)
    try:
        view.matrix.selected = [0, 0, 0]

        assert matrix_cells(evaluation)[0][1] == 0.875  # (1 + 0.75) / 2, not (1 + 4) / 2
        assert view.matrix.detail["grades"] == [
            {"name": "contains('Paris')", "passed": True, "score": None,
             "reason": "answer contains 'Paris'"},
            {"name": "judge", "passed": True, "score": 0.75, "raw": "4 of 1-5",
             "reason": "fine"}]
    finally:
        view.close()
