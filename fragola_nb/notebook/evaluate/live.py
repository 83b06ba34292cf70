"""What the live evaluation matrix sends while rows finish: counters kept row by row.

A refresh of the matrix used to work out the evaluation's summary, title, cells and flags
over every row, a few times a second: the cost grew with the square of the run (6,000 rows:
about 0.5 s of kernel time per refresh). ``LiveTally`` keeps, per variant, what the head
says (rows, ran, passed, cost and tokens) and each cell's rows, updated as a row changes
(its old part taken out, its new part put in), so a refresh costs the rows that changed
and the variants, not the rows that exist. The pass rates' intervals (scipy) are worked out
from per-case counts at most every ``STATS_EVERY`` seconds; the verdicts (permutation tests)
wait for the end, when ``EvalView.refresh`` works everything out afresh once.

>>> tally = LiveTally(evaluation)          # doctest: +SKIP
>>> tally.changed(7); tally.take()         # doctest: +SKIP
({3: ['pf', 0.5, '']}, {3: [True, '']})
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from fragola_nb.base.render import visible
from fragola_nb.core.usage import _call_cost, format_cost
from fragola_nb.experiments.evaluate.htmlview import head_facts
from fragola_nb.experiments.evaluate.intervals import rate_interval
from fragola_nb.experiments.evaluate.summary import rate_text
from fragola_nb.experiments.evaluate.versus import rate_text as interval_text

if TYPE_CHECKING:
    from fragola_nb.core.usage import Usage
    from fragola_nb.experiments.evaluate.evalrow import EvalRow
    from fragola_nb.experiments.evaluate.evaluation import Evaluation

__all__ = ["STATS_EVERY", "LiveTally", "cell_flag", "cell_marks", "head_data", "matrix_cells",
           "one_cell"]

STATS_EVERY = 1.0
"""Seconds between two workings-out of the pass rates' intervals while rows finish."""

_LETTER = {"queued": "q", "running": "r", "stopped": "s", "not run": "n"}


def cell_marks(rows: list[EvalRow]) -> str:
    """One letter per repeat: ``p`` passed, ``f`` failed (graded or errored), ``q`` queued,
    ``r`` running, ``s`` stopped, ``n`` not run."""
    return "".join(("p" if row.passed else "f") if row.finished else _LETTER.get(row.status, "n")
                   for row in rows)


def one_cell(rows: list[EvalRow], said: str = "") -> list[Any]:
    """A cell of the matrix: ``[marks, mean score or None, change]`` (rows by repeat)."""
    scores = [row.score for row in rows if row.score is not None]
    return [cell_marks(rows), round(sum(scores) / len(scores), 3) if scores else None, said]


def matrix_cells(evaluation: Evaluation) -> list[list[Any]]:
    """The cells in case order, then variant: ``[marks, mean score or None, change]``
    (``change``: ``""`` without a baseline or when unchanged; ``"other answers"`` when the
    verdicts did not change but the answers did)."""
    variants = {name: i for i, name in enumerate(evaluation.variants)}
    width = len(variants)
    grouped: dict[int, list[EvalRow]] = {}
    for row in evaluation:  # one pass: cell() would scan every row for every cell
        if row.variant in variants:
            grouped.setdefault(row.case * width + variants[row.variant], []).append(row)
    diff = evaluation.baseline
    cells: list[list[Any]] = []
    for index in range((max(grouped) // width + 1) * width if grouped else 0):
        rows = sorted(grouped.get(index, []), key=lambda r: r.repeat)
        change = diff.of(index // width, evaluation.variants[index % width]) if diff else None
        said = ("" if change is None else change.change if change.change != "unchanged"
                else "other answers" if change.answers_changed else "")
        cells.append(one_cell(rows, said))
    return cells


def cell_flag(rows: list[EvalRow]) -> list[Any] | None:
    """A cell's ``[flaky, labels]`` as ``verdicts.matrix_flags`` gives it; None when
    its repeats agree and none has a label."""
    flaky = len({bool(row.passed) for row in rows if row.finished}) > 1
    said = {row.repeat: "y" if row.label.passed else "n" for row in rows if row.label}
    if not flaky and not said:
        return None
    return [flaky, "".join(said.get(r, "-") for r in range(max(said, default=-1) + 1))]


def head_data(evaluation: Evaluation, lines: list[dict[str, Any]], title: str) -> dict[str, Any]:
    """The ``head`` trait: the title, and per variant its name and the lines under it."""
    diff = evaluation.baseline
    variants = [{"name": visible(line["variant"]), "rate": line["pass_rate"],
                 "ran": line["ran"], "rows": line["rows"], "rate_text": facts["rate"],
                 "cost": facts["cost"] or None, "left": facts["left"]}
                for line, facts in zip(lines, head_facts(evaluation, lines), strict=True)]
    return {"title": visible(title), "done": evaluation.done, "repeat": evaluation.repeat,
            "variants": variants, "baseline": None if diff is None else diff.totals,
            "against": "" if diff is None else visible(diff.overview())}


class Money:
    """What ``Usage.cost_text`` and ``total_tokens`` need, as sums a row adds or takes off."""

    __slots__ = ("offline", "paid", "paid_unknown", "requests", "tokens", "unlisted",
                 "unpaid", "unpaid_unknown")

    def __init__(self) -> None:
        self.requests = self.tokens = self.offline = self.unlisted = 0
        self.paid_unknown = self.unpaid_unknown = 0
        self.paid, self.unpaid = Decimal(0), Decimal(0)

    def add_usage(self, usage: Usage | None) -> None:
        if usage is None:
            return
        for call in usage.calls:
            self.requests += 1
            self.tokens += call.total_tokens
            if call.cached:
                continue
            price = _call_cost(call, usage.prices)
            if call.offline:
                self.offline += 1
                self.unlisted += call.model not in usage.prices
                self.unpaid_unknown += price is None
                self.unpaid += price or 0
            else:
                self.paid_unknown += price is None
                self.paid += price or 0

    def add(self, other: Money, sign: int = 1) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + sign * getattr(other, name))

    def text(self) -> str:
        """``Usage.cost_text()`` of the calls added."""
        shown = []
        if self.offline < self.requests and not self.paid_unknown:
            shown.append(format_cost(float(self.paid)))
        if self.offline and not self.unpaid_unknown and not self.unlisted:
            shown.append(f"priced as {format_cost(float(self.unpaid))}, not paid")
        return " + ".join(shown)


class _Part:
    """What one row adds to its variant's counters."""

    __slots__ = ("case", "failed", "finished", "money", "passed")

    def __init__(self, row: EvalRow) -> None:
        self.case, self.finished = row.case, row.finished
        self.passed = bool(row.passed)
        self.failed = row.status == "failed"
        self.money = Money()
        for usage in (row.usage, row.judge_usage, row.user_usage):
            self.money.add_usage(usage)


class _Variant:
    """One variant's counters: rows, ran, passed, failed, money, each case's passes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows = self.ran = self.passed = self.failed = 0
        self.money = Money()
        self.cases: dict[int, dict[int, float]] = {}  # case -> row index -> 1.0 or 0.0

    def add(self, index: int, part: _Part, sign: int) -> None:
        self.rows += sign
        if part.money.requests:  # no call: every sum is 0 (a row queued or running)
            self.money.add(part.money, sign)
        if not part.finished:
            return
        self.ran += sign
        self.passed += sign * part.passed
        self.failed += sign * part.failed
        runs = self.cases.setdefault(part.case, {})
        if sign > 0:
            runs[index] = 1.0 if part.passed else 0.0
        else:
            runs.pop(index, None)
            if not runs:
                del self.cases[part.case]

    def line(self) -> dict[str, Any]:
        """The keys of a ``summary()`` line the head and the title read."""
        return {"variant": self.name, "rows": self.rows, "ran": self.ran,
                "failed": self.failed, "cases": len(self.cases),
                "pass_rate": self.passed / self.ran if self.ran else None,
                "cost_text": self.money.text()}


class LiveTally:
    """The counters of one evaluation as its rows change (see the module's docstring)."""

    def __init__(self, evaluation: Evaluation) -> None:
        self.evaluation = evaluation
        column = {name: i for i, name in enumerate(evaluation.variants)}
        width = len(column)
        self.variants = [_Variant(name) for name in evaluation.variants]
        self.cases = len({row.case for row in evaluation})
        self._where: list[int] = []  # row index -> cell index (-1: a variant not shown)
        self._cells: dict[int, list[int]] = {}  # cell index -> row indexes by repeat
        self._parts: list[_Part] = []
        self._seen = list(evaluation)  # the rows as last counted
        self._dirty: set[int] = set()
        for index, row in enumerate(evaluation):
            at = row.case * width + column[row.variant] if row.variant in column else -1
            self._where.append(at)
            self._parts.append(part := _Part(row))
            if at >= 0:
                self._cells.setdefault(at, []).append(index)
                self.variants[at % width].add(index, part, 1)
        for indexes in self._cells.values():
            indexes.sort(key=lambda i: evaluation[i].repeat)

    def changed(self, index: int) -> None:
        """Row ``index`` changed: counted at the next ``take``."""
        self._dirty.add(index)

    def catch_up(self) -> None:
        """Count the rows changed without a word (``end_unfinished``: the rows that did not
        run) at the next ``take``."""
        self._dirty.update(index for index, (row, seen) in enumerate(zip(
            self.evaluation, self._seen, strict=True)) if row is not seen)

    def take(self) -> tuple[dict[int, list[Any]], dict[int, list[Any] | None]]:
        """The counters brought up to date with the rows changed since the last call; the
        cells of those rows, and their flags (None: no flag any more), by cell index."""
        dirty, self._dirty = self._dirty, set()
        width = len(self.variants)
        cells: set[int] = set()
        for index in dirty:
            at = self._where[index] if 0 <= index < len(self._where) else -1
            if at < 0:
                continue
            variant = self.variants[at % width]
            variant.add(index, self._parts[index], -1)
            self._seen[index] = row = self.evaluation[index]
            self._parts[index] = part = _Part(row)
            variant.add(index, part, 1)
            cells.add(at)
        rows = {at: [self.evaluation[i] for i in self._cells[at]] for at in cells}
        return ({at: one_cell(rows[at]) for at in sorted(cells)},
                {at: cell_flag(rows[at]) for at in sorted(cells)})

    def whole(self, cells: list[list[Any]], flags: dict[str, Any]) -> tuple[
            list[list[Any]], dict[str, Any], dict[str, Any], dict[str, Any]]:
        """At the run's end: the matrix's ``cells``, ``flags`` (as patched so far, copied),
        ``verdicts`` (the intervals; the tests' lines come later) and ``head``, from the
        counters, the rows that did not run (changed without a word) counted in."""
        self.catch_up()
        changed, flagged = self.take()
        cells, flags = list(cells), dict(flags)
        for at, cell in changed.items():
            cells[at] = cell
        for at, flag in flagged.items():
            flags.pop(str(at), None) if flag is None else flags.__setitem__(str(at), flag)
        lines = self.lines()
        return (cells, flags, {"intervals": self.intervals(), "lines": []},
                head_data(self.evaluation, lines, self.title(lines)))

    def lines(self) -> list[dict[str, Any]]:
        return [variant.line() for variant in self.variants]

    def title(self, lines: list[dict[str, Any]]) -> str:
        """``Evaluation.overview(lines)`` from the counters (see it)."""
        evaluation = self.evaluation
        total = Money()
        for variant in self.variants:
            total.add(variant.money)
        total.add_usage(evaluation.pairs_usage)
        repeats = f" × {evaluation.repeat} repeats" if evaluation.repeat > 1 else ""
        count = len(self.variants)
        head = (f"{self.cases} case{'s' if self.cases != 1 else ''} × {count} "
                f"variant{'s' if count != 1 else ''}{repeats}")
        parts = ", ".join(f"{line['variant']} {rate_text(line)}" for line in lines)
        money = total.text()
        tail = f"{total.tokens:,} tokens" + (f", {money}" if money else "")
        if not evaluation.done:
            tail += ", running"
        elif evaluation.stopped:
            why = evaluation.why_stopped
            tail += f", stopped ({why})" if why else ", stopped"
        return f"{head}: {parts}; {tail}; {evaluation.seconds:.1f} s"

    def intervals(self) -> list[dict[str, Any] | None]:
        """Each variant's pass rate and its 95% interval, as ``verdict_data`` gives them."""
        shown: list[dict[str, Any] | None] = []
        for variant in self.variants:
            rate = variant.passed / variant.ran if variant.ran else None
            ci = rate_interval({case: list(runs.values())
                                for case, runs in variant.cases.items()})
            shown.append(None if rate is None else {
                "rate": rate, "low": None if ci is None else ci[0],
                "high": None if ci is None else ci[1], "cases": len(variant.cases),
                "text": interval_text(rate, ci)})
        return shown
