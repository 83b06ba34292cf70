"""Human labels on an evaluation's rows, the judge's agreement with them, and ``human()``.

A teacher checks a grader before trusting it: they label some rows by hand
(``evaluation.label(row, passed, note="")``, or ✓ / ✗ in the matrix view's detail), and
``evaluation.agreement("judge")`` says how often the grader agrees (Cohen's kappa and the
2 × 2 counts). ``graders.human()`` is a grader that gives the label of the same answer to
the same case (``evaluate/human.py``), so a re-run that gives the same answers keeps the
teacher's grades.

>>> evaluation.label(3, False, note="wrong river")          # doctest: +SKIP
>>> evaluation.agreement("judge")                            # doctest: +SKIP
Agreement(judge: 9 labelled rows, kappa 0.55; both passed 5, both failed 2, ...)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fragola_nb.base.redact import redact_text

if TYPE_CHECKING:
    from fragola_nb.experiments.evaluate.evalrow import EvalRow

__all__ = ["LABELS", "Agreement", "Label", "agreement", "answer_key", "label_read_back",
           "remember"]


@dataclass(frozen=True)
class Label:
    """A person's verdict on one row: ``passed`` and an optional ``note``."""

    passed: bool
    note: str = ""

    def __repr__(self) -> str:  # a note may quote an answer, and the key a server put in it
        return redact_text(f"Label(passed={self.passed!r}, note={self.note!r})")


LABELS: dict[tuple[str, str | None], Label] = {}
"""The labels given in this Python session (``Evaluation.label``, and those read by
``Evaluation.load``), by (the case's input as JSON, the answer): what ``human()`` reads."""


def answer_key(row: Any) -> tuple[str, str | None]:
    return json.dumps(row.input, ensure_ascii=False, sort_keys=True), row.answer


def remember(row: EvalRow) -> None:
    """Keep (or forget) ``row``'s label for ``human()``."""
    if row.label is None:
        LABELS.pop(answer_key(row), None)
    else:
        LABELS[answer_key(row)] = row.label


def label_read_back(data: Any) -> Label | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("passed"), bool) or not (
            isinstance(data.get("note", ""), str)):
        raise ValueError("a label is an object with passed (true or false) and a note")
    return Label(data["passed"], data.get("note", ""))


@dataclass(frozen=True)
class Agreement:
    """A grader's verdicts against the human labels on the ``n`` labelled rows it graded.

    ``kappa``: Cohen's kappa, (po − pe) / (1 − pe), None when pe = 1 (both gave one verdict
    throughout). ``counts``: ``[[both passed, only the human passed], [only the grader
    passed, both failed]]`` (rows: the human's pass, fail; columns: the grader's).
    """

    grader: str
    n: int
    kappa: float | None
    agreed: float | None
    both_passed: int
    both_failed: int
    only_human_passed: int
    only_grader_passed: int

    @property
    def counts(self) -> list[list[int]]:
        return [[self.both_passed, self.only_human_passed],
                [self.only_grader_passed, self.both_failed]]

    def __repr__(self) -> str:
        kappa = "–" if self.kappa is None else f"{self.kappa:.2f}"
        return (f"Agreement({self.grader}: {self.n} labelled row{'s' if self.n != 1 else ''}, "
                f"kappa {kappa}; both passed {self.both_passed}, both failed "
                f"{self.both_failed}, only the human passed {self.only_human_passed}, only "
                f"the grader passed {self.only_grader_passed})")


def agreement(rows: Iterable[EvalRow], grader: str) -> Agreement:
    """``Evaluation.agreement``: the labelled rows that ``grader`` graded."""
    pairs = [(row.label.passed, grade.passed) for row in rows
             if row.label is not None and (grade := row.grade(grader)) is not None]
    n = len(pairs)
    a = sum(1 for h, g in pairs if h and g)
    b = sum(1 for h, g in pairs if h and not g)
    c = sum(1 for h, g in pairs if not h and g)
    d = n - a - b - c
    kappa = agreed = None
    if n:
        agreed = (a + d) / n
        expected = ((a + b) * (a + c) + (c + d) * (b + d)) / n ** 2
        kappa = None if expected == 1 else (agreed - expected) / (1 - expected)
    return Agreement(grader, n, kappa, agreed, a, d, b, c)
