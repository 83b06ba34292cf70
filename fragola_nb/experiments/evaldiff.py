"""``Evaluation.diff(baseline)``: a run against an earlier one, cell by cell.

Cells are aligned by the case's input (the message sent) and the variant's name, so cases
added, removed or reordered between the runs line up. A cell's figure is the share of its
repeats that passed; the change is ``improved`` (higher now), ``regressed`` (lower),
``unchanged``, ``new`` (not in the baseline, or not run there) or ``gone`` (in the baseline
only, or not run now).

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

from fragola_nb.base.render import escape, text_of
from fragola_nb.experiments.evalrows import flaky_cells

if TYPE_CHECKING:
    from fragola_nb.experiments.evalrows import EvalRow
    from fragola_nb.experiments.evaluation import Evaluation
    from fragola_nb.experiments.verdicts import Versus

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
            changes.append(CellChange(rows[0].input, key[1], case, before, after,
                                      _change(before, after), key in shaky))
        for key, (case, rows) in old.items():
            if key not in new:
                changes.append(CellChange(rows[0].input, key[1], case, _share(rows), None,
                                          "gone", key in shaky))
        self.changes = tuple(changes)
        self.totals = {kind: sum(1 for c in changes if c.change == kind) for kind in CHANGES}
        """How many cells of each kind."""
        self._by_cell = {(c.case, c.variant): c for c in changes if c.change != "gone"}
        from fragola_nb.experiments.evalsetup import setup_changes
        from fragola_nb.experiments.intervals import case_values
        from fragola_nb.experiments.verdicts import paired

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
        text = ", ".join(f"{count} {kind}" for kind, count in self.totals.items())
        shaky = sum(1 for c in self.changes if c.flaky and c.change in ("improved",
                                                                        "regressed"))
        return text + (f" ({shaky} of the changed cells flaky)" if shaky else "")

    def lines(self) -> list[str]:
        """The verdict of each variant against the baseline, then the setup's changes."""
        return ([v.line() for v in self.versus.values()]
                + [f"setup: {change}" for change in self.setup_changes])

    def __repr__(self) -> str:
        return "\n  ".join([f"EvaluationDiff({self.overview()})", *self.lines()])

    def _repr_html_(self) -> str:
        shown = [c for c in self.changes if c.change != "unchanged"][:50]
        rows = "".join(
            f"<tr><td>{escape(c.change)}{' (flaky)' if c.flaky else ''}</td>"
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


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
