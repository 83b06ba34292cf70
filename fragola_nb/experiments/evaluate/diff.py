"""``Evaluation.diff(baseline)``: a run against an earlier one, cell by cell.

Cells are aligned by the case's input (the message sent) and the variant's name, so cases
added, removed or reordered between the runs line up. A cell's figure is the share of its
repeats that passed; the change is ``improved`` (higher now), ``regressed`` (lower),
``unchanged``, ``new`` (not in the baseline, or not run there) or ``gone`` (in the baseline
only, or not run now). A cell whose verdicts did not change can still have other answers
(a prompt changed, and every case still passes): ``answers_changed`` counts those cells, and
``rates`` holds each variant's pass rate before and after, as the matrix's header shows it
(``"100% → 0%"``).

>>> diff = evaluation.diff("last_run.json")      # doctest: +SKIP
>>> diff.totals                                  # doctest: +SKIP
{'improved': 2, 'regressed': 1, 'unchanged': 17, 'new': 0, 'gone': 0}

A cell whose repeats disagree (in either run) is ``flaky``: a flip there may be chance, not
a regression. ``versus`` compares each variant present in both runs, case by case
(``Versus``: the baseline as ``a``, this run as ``b``); ``setup_changes`` says in words what
changed in the setup (instructions, model, settings, tools, graders, cases).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fragola_nb.base.figures import percent
from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import escape, text_of, visible
from fragola_nb.experiments.evaluate.evalrow import flaky_cells

if TYPE_CHECKING:
    from fragola_nb.experiments.evaluate.evalrow import EvalRow
    from fragola_nb.experiments.evaluate.evaluation import Evaluation
    from fragola_nb.experiments.evaluate.verdicts import Versus

__all__ = ["CHANGES", "CellChange", "EvaluationDiff"]

Change = Literal["improved", "regressed", "unchanged", "new", "gone"]
CHANGES: tuple[Change, ...] = ("improved", "regressed", "unchanged", "new", "gone")


@dataclass(frozen=True)
class CellChange:
    """One (case, variant) cell: its pass share before and after, and the change."""

    input: Any
    variant: str
    case: int
    """The case's index in the current run (in the baseline's for a ``gone`` cell)."""
    before: float | None
    after: float | None
    change: Change
    answers_changed: bool = False
    """The answers differ from the baseline's (repeat by repeat), whatever the verdicts."""
    flaky: bool = False
    """Its repeats disagree, in this run or in the baseline: a change may be chance."""


class EvaluationDiff:
    """The cells of two runs side by side; ``totals`` counts each kind of change."""

    def __init__(self, baseline: Evaluation, current: Evaluation) -> None:
        old, new = _cells(baseline), _cells(current)
        shaky = (_keyed(baseline, flaky_cells(baseline))
                 | _keyed(current, flaky_cells(current)))
        changes = []
        for key, (case, rows) in new.items():
            after = _share(rows)
            before = _share(old[key][1]) if key in old else None
            other = key in old and _answers(old[key][1]) != _answers(rows)
            changes.append(CellChange(rows[0].input, key[1], case, before, after,
                                      _change(before, after), other, key in shaky))
        for key, (case, rows) in old.items():
            if key not in new:
                changes.append(CellChange(rows[0].input, key[1], case, _share(rows), None,
                                          "gone", flaky=key in shaky))
        self.changes = tuple(changes)
        self.totals = {kind: sum(1 for c in changes if c.change == kind) for kind in CHANGES}
        """How many cells of each kind."""
        self._by_cell = {(c.case, c.variant): c for c in changes if c.change != "gone"}
        self.answers_changed = sum(1 for c in changes if c.answers_changed
                                   and c.change == "unchanged")
        """Cells ``unchanged`` in their verdicts whose answers differ from the baseline's."""
        old_lines = {line["variant"]: line["pass_rate"] for line in baseline.summary()}
        self.rates = {line["variant"]: (old_lines.get(line["variant"]), line["pass_rate"])
                      for line in current.summary()}
        """Each variant of this run: its pass rate in the baseline (None when it was not
        there) and now."""
        from fragola_nb.experiments.evaluate.intervals import case_values
        from fragola_nb.experiments.evaluate.setups import setup_changes
        from fragola_nb.experiments.evaluate.verdicts import paired

        self.setup_changes: list[str] = setup_changes(baseline, current)
        """What differs from the baseline's setup, in words (``"variant 'a': instructions
        changed: ..."``, ``"3 cases added"``); empty when nothing did."""
        self.versus: dict[str, Versus] = {
            variant: paired(f"{variant} before", f"{variant} now", "pass",
                            case_values((r for r in baseline if r.variant == variant), "pass",
                                        key="input"),
                            case_values((r for r in current if r.variant == variant), "pass",
                                        key="input"), binary=True)
            for variant in current.variants if variant in baseline.variants}
        """Per variant in both runs: this run (``b``) against the baseline (``a``), over
        the cases both ran."""

    def of(self, case: int, variant: str) -> CellChange | None:
        """The change of the current run's cell (case index, variant)."""
        return self._by_cell.get((case, variant))

    def cells(self, *kinds: Change) -> list[CellChange]:
        """The cells whose change is one of ``kinds`` (all without)."""
        return [c for c in self.changes if not kinds or c.change in kinds]

    @property
    def regressed(self) -> list[CellChange]:
        return self.cells("regressed")

    @property
    def improved(self) -> list[CellChange]:
        return self.cells("improved")

    @property
    def flaky(self) -> list[CellChange]:
        """The cells whose repeats disagree (in either run)."""
        return [c for c in self.changes if c.flaky]

    def overview(self) -> str:
        """``"0 improved, 1 regressed, 39 unchanged (other answers in 39), 0 new, 0 gone"``,
        and how many of the changed cells are flaky."""
        other = self.answers_changed
        text = ", ".join(f"{count} {kind}" + (f" (other answers in {other})"
                                              if kind == "unchanged" and other else "")
                         for kind, count in self.totals.items())
        shaky = sum(1 for c in self.changes if c.flaky and c.change in ("improved",
                                                                        "regressed"))
        return text + (f" ({shaky} of the changed cells flaky)" if shaky else "")

    def lines(self) -> list[str]:
        """The verdict of each variant against the baseline, then the setup's changes."""
        return ([v.line() for v in self.versus.values()]
                + [f"setup: {change}" for change in self.setup_changes])

    def __repr__(self) -> str:
        return visible("\n  ".join([f"EvaluationDiff({self.overview()})", *self.lines()]))

    def _repr_html_(self) -> str:
        shown = [c for c in self.changes if c.change != "unchanged" or c.answers_changed][:50]
        rows = "".join(
            f"<tr><td>{escape(_said(c))}{' (flaky)' if c.flaky else ''}</td>"
            f"<td>{escape(c.variant)}</td>"
            f'<td style="overflow-wrap:anywhere;text-align:left">'
            f"{escape(_short(text_of(c.input)))}</td>"
            f"<td>{_pct(c.before)}</td><td>{_pct(c.after)}</td></tr>" for c in shown)
        table = ("<table><thead><tr><th>change</th><th>variant</th><th>case</th>"
                 f"<th>before</th><th>after</th></tr></thead><tbody>{rows}</tbody></table>"
                 if shown else "")
        said = "".join(f"<li>{escape(line)}</li>" for line in self.lines())
        return (f'<div class="fragola-evaldiff"><p><b>EvaluationDiff</b> · '
                f"{escape(self.overview())}</p>{f'<ul>{said}</ul>' if said else ''}"
                f"{table}</div>")


def _cells(evaluation: Evaluation) -> dict[tuple[str, str], tuple[int, list[EvalRow]]]:
    cells: dict[tuple[str, str], tuple[int, list[EvalRow]]] = {}
    for row in evaluation:
        key = (json.dumps(row.input, ensure_ascii=False, sort_keys=True), row.variant)
        cells.setdefault(key, (row.case, []))[1].append(row)
    return cells


def _keyed(evaluation: Evaluation, cells: set[tuple[int, str]]) -> set[tuple[str, str]]:
    """``cells`` (case index, variant) by the case's input, as ``_cells`` keys them."""
    inputs = {row.case: json.dumps(row.input, ensure_ascii=False, sort_keys=True)
              for row in evaluation}
    return {(inputs[case], variant) for case, variant in cells if case in inputs}


def _share(rows: Iterable[EvalRow]) -> float | None:
    ran = [row for row in rows if row.finished]
    return sum(1 for row in ran if row.passed) / len(ran) if ran else None


def _change(before: float | None, after: float | None) -> Change:
    if after is None:
        return "gone" if before is not None else "unchanged"
    if before is None:
        return "new"
    if after > before:
        return "improved"
    return "regressed" if after < before else "unchanged"


def _said(cell: CellChange) -> str:
    return "unchanged, other answers" if cell.change == "unchanged" else cell.change


def _answers(rows: Iterable[EvalRow]) -> list[str | None]:
    return [row.answer for row in sorted(rows, key=lambda row: row.repeat) if row.finished]


def _pct(value: float | None) -> str:
    return percent(value)


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(redact_text(text).split())  # before it is cut: no half key is left
    return text if len(text) <= limit else text[: limit - 1] + "…"
