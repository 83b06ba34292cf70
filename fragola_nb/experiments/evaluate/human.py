"""``graders.human()``: a grader that gives a person's label of the same answer to the same
case (``evaluate/labels.py`` keeps the labels), so a re-run that gives the same answers keeps
the teacher's grades.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from fragola_nb.base.errors import BadUsage
from fragola_nb.experiments.evaluate.evaluation import Evaluation
from fragola_nb.experiments.evaluate.labels import LABELS, Label, answer_key
from fragola_nb.experiments.graders.base import Grade

if TYPE_CHECKING:
    from fragola_nb.experiments.graders.base import GradedRow

__all__ = ["Human", "human"]


class Human:
    """The grader ``human()`` makes; its name is ``human``."""

    __name__ = "human"

    def __init__(self, book: Mapping[tuple[str, str | None], Label] | None) -> None:
        self.book = book

    def __call__(self, row: GradedRow) -> Grade | None:
        found = (self.book if self.book is not None else LABELS).get(answer_key(row))
        if found is None:
            return None
        return Grade("human", found.passed, reason=found.note or "labelled by hand")

    def __repr__(self) -> str:
        return "human()"


def human(labels: Evaluation | str | os.PathLike[str] | None = None) -> Human:
    """A grader that returns the human label of the same answer to the same case (None,
    no grade, where there is none): a re-run that gives the same answers keeps the labels.

    The labels are those given in this Python session (``evaluation.label``, the view's ✓ /
    ✗, and every file ``Evaluation.load`` read), or only those of ``labels`` (an
    ``Evaluation`` or a file ``save`` wrote) when given.
    """
    if labels is None:
        return Human(None)
    if not isinstance(labels, Evaluation):
        if not isinstance(labels, (str, os.PathLike)):
            raise BadUsage(f"human(labels=...) takes an Evaluation or a file Evaluation.save "
                           f"wrote, not {type(labels).__name__}")
        labels = Evaluation.load(labels)
    return Human({answer_key(row): row.label for row in labels if row.label is not None})
