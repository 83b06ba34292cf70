"""What the evaluation matrix shows of its verdicts, and the labels it sets.

``verdict_data`` is the ``verdicts`` trait: each variant's pass rate with its 95% interval
(drawn as a bar under the variant's name) and a line per verdict, drawn on top of the matrix
(``Evaluation.verdicts``, once the evaluation has ended; with a baseline, each variant's
verdict against it and what changed in the setup, as the diff's repr says). ``matrix_flags``
is the ``flags`` trait: the cells whose repeats disagree (flaky) and the labels of their
rows. A label set in a cell's detail (✓, ✗ and a note) comes as a message, read by
``label_message`` (a pure function), and the view calls ``Evaluation.label``: the widget
decides nothing.

>>> label_message(evaluation, {"do": "label", "at": [0, 1, 0], "passed": False,
...                            "note": "wrong"})                     # doctest: +SKIP
(1, False, 'wrong')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import visible
from fragola_nb.experiments.evaluate.evalrow import flaky_cells
from fragola_nb.experiments.evaluate.versus import rate_text, verdicts

if TYPE_CHECKING:
    from fragola_nb.experiments.evaluate.evaluation import Evaluation

__all__ = ["NOTE_LIMIT", "label_message", "matrix_flags", "verdict_data", "verdict_lines"]

NOTE_LIMIT = 2000
"""Characters of a note a label keeps (a longer one is cut)."""


def verdict_data(evaluation: Evaluation, summary: list[dict[str, Any]] | None = None
                 ) -> dict[str, Any]:
    """``{"intervals": [per variant: {rate, low, high, text} or None], "lines": [{text,
    decided}]}``: the text as ``repr`` and the static table say it (``summary``: the
    evaluation's, when the caller has it)."""
    intervals: list[dict[str, Any] | None] = []
    for line in evaluation.summary() if summary is None else summary:
        ci = line["pass_rate_ci"]
        rate = line["pass_rate"]
        intervals.append(None if rate is None else {
            "rate": rate, "low": None if ci is None else ci[0],
            "high": None if ci is None else ci[1], "cases": line["cases"],
            "text": rate_text(rate, ci)})
    return {"intervals": intervals, "lines": verdict_lines(evaluation)}


def verdict_lines(evaluation: Evaluation) -> list[dict[str, Any]]:
    """The ``lines`` of ``verdict_data``: ``[{text, decided}]``."""
    said: list[tuple[str, bool]] = []
    if evaluation.done and len(evaluation.variants) > 1:
        said += [(v.line(), v.verdict != "not distinguishable") for v in verdicts(evaluation)]
    diff = evaluation.baseline
    if diff is not None:  # against the baseline: each variant's verdict, what changed
        said += [(v.line(), v.verdict != "not distinguishable") for v in diff.versus.values()]
        said += [(f"setup: {change}", False) for change in diff.setup_changes]
    known = evaluation.known
    return [{"text": visible(redact_text(text, known)), "decided": decided}
            for text, decided in said]


def matrix_flags(evaluation: Evaluation) -> dict[str, list[Any]]:
    """By cell index (case × variants + variant, as text): ``[flaky, labels]``, ``labels``
    a letter per repeat (``y`` labelled passed, ``n`` failed, ``-`` unlabelled); only the
    cells that are flaky or have a label."""
    width = len(evaluation.variants)
    column = {name: i for i, name in enumerate(evaluation.variants)}
    flaky = flaky_cells(evaluation)
    labels: dict[int, dict[int, str]] = {}
    for row in evaluation:
        if row.label is not None and row.variant in column:
            labels.setdefault(row.case * width + column[row.variant], {})[row.repeat] = (
                "y" if row.label.passed else "n")
    cells = {case * width + column[variant] for case, variant in flaky if variant in column}
    flags: dict[str, list[Any]] = {}
    for index in sorted(cells | set(labels)):
        said = labels.get(index, {})
        letters = "".join(said.get(r, "-") for r in range(max(said, default=-1) + 1))
        flags[str(index)] = [index in cells, letters]
    return flags


def label_message(evaluation: Evaluation, content: Any) -> tuple[int, bool | None, str] | None:
    """A view's ``{"do": "label", "at": [case, variant index, repeat], "passed": true |
    false | null, "note": str}`` as (row index, passed, note); None when it is not one or
    names no row of ``evaluation``."""
    if not isinstance(content, dict) or content.get("do") != "label":
        return None
    at, passed, note = content.get("at"), content.get("passed"), content.get("note", "")
    if (not isinstance(at, list) or len(at) != 3
            or not all(type(n) is int for n in at) or not isinstance(passed, (bool, type(None)))
            or not isinstance(note, str)):
        return None
    case, variant, repeat = at
    if not 0 <= variant < len(evaluation.variants):
        return None
    name = evaluation.variants[variant]
    index = next((i for i, row in enumerate(evaluation)
                  if (row.case, row.variant, row.repeat) == (case, name, repeat)), None)
    if index is None or not evaluation[index].finished:
        return None
    return index, passed, note[:NOTE_LIMIT]
