"""``Evaluation.versus``, ``verdicts``, ``label``, ``agreement`` and ``judge_pairs``
(``Judgements``, a base of ``Evaluation``): the checks of their arguments and the rows they
read (the statistics are in ``verdicts``, the labels in ``labels``, the pairwise judge in
``pairjudge``)."""

from __future__ import annotations

import math
import numbers
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.figures import percent
from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.evaluate.intervals import case_values
from fragola_nb.experiments.evaluate.labels import Label, remember
from fragola_nb.experiments.evaluate.verdicts import Versus, check_pair, paired, with_holm

if TYPE_CHECKING:
    from fragola_nb.core.fragola import Fragola
    from fragola_nb.experiments.evaluate.evaluation import Evaluation
    from fragola_nb.experiments.evaluate.labels import Agreement

__all__ = ["METRICS", "Judgements", "labelled", "rate_text", "verdict_lines",
           "verdict_texts", "verdicts", "versus"]

METRICS = ("pass", "score")


def versus(evaluation: Evaluation, a: str, b: str, metric: str = "pass") -> Versus:
    """``Evaluation.versus``: ``b`` against ``a`` on ``metric``, case by case."""
    check_pair(evaluation, a, b, "versus")
    if metric not in METRICS:
        raise BadUsage(f"versus(metric=...) takes 'pass' or 'score', not {metric!r:.60}")
    return paired(a, b, metric,
                  case_values((r for r in evaluation if r.variant == a), metric),
                  case_values((r for r in evaluation if r.variant == b), metric),
                  binary=metric == "pass")


def verdicts(evaluation: Evaluation, alpha: float = 0.05) -> list[Versus]:
    """``Evaluation.verdicts``: each variant against the first, Holm-adjusted."""
    if (isinstance(alpha, bool) or not isinstance(alpha, numbers.Real)
            or not math.isfinite(alpha) or not 0 < alpha < 1):
        raise BadUsage(f"verdicts(alpha=...) takes a number between 0 and 1, not {alpha!r:.60}")
    first, *others = evaluation.variants or ("",)
    # once for the same rows: the matrix, the repr and the static table of a display ask
    key = ("verdicts", float(alpha), evaluation.variants)
    return list(evaluation._once(key, lambda _: with_holm(
        [versus(evaluation, first, other) for other in others], float(alpha))))


def verdict_lines(evaluation: Evaluation) -> list[str]:
    """What the reprs and views show: each variant's pass rate with its interval, then a
    line per verdict (none while it runs, nor with one variant)."""
    parts = []
    for line in evaluation.summary():  # worked out once for the same rows
        parts.append(f"{line['variant']} {rate_text(line['pass_rate'], line['pass_rate_ci'])}"
                     f" of {line['cases']} case{'s' if line['cases'] != 1 else ''}")
    lines = ["pass rate, 95% interval: " + "; ".join(parts)] if parts else []
    return lines + verdict_texts(evaluation)


def verdict_texts(evaluation: Evaluation) -> list[str]:
    """``Versus.line()`` of each of ``verdicts()``, once the evaluation has ended."""
    if not evaluation.done or len(evaluation.variants) < 2:
        return []
    return [v.line() for v in verdicts(evaluation)]


def rate_text(rate: float | None, ci: tuple[float, float] | None) -> str:
    """``"40% [17–67%]"``: a pass rate and its interval, in whole percents."""
    if rate is None:
        return "–"
    return percent(rate) + ("" if ci is None else f" [{percent(ci[0])}–{percent(ci[1])}]"
                            .replace("%–", "–"))


def labelled(evaluation: Evaluation, row: EvalRow | int, passed: bool | None,
             note: str) -> tuple[int, EvalRow]:
    """``Evaluation.label``: the row's index, and the row with its label set (or taken off
    with ``passed=None``)."""
    if isinstance(row, EvalRow):
        index = next((i for i, r in enumerate(evaluation) if r is row), None)
        if index is None:
            index = next((i for i, r in enumerate(evaluation) if (r.case, r.variant, r.repeat)
                          == (row.case, row.variant, row.repeat)), None)
        if index is None:
            raise BadUsage("label(row, ...): that row is not one of this evaluation's")
    elif isinstance(row, int) and not isinstance(row, bool):
        if not -len(evaluation) <= row < len(evaluation):
            raise BadUsage(f"label({row}, ...): no row {row} (the evaluation has "
                           f"{len(evaluation)} rows)")
        index = row % len(evaluation)
    else:
        raise BadUsage(f"label(row, ...) takes an EvalRow or its index, not "
                       f"{type(row).__name__}")
    if passed is not None and not isinstance(passed, bool):
        raise BadUsage(f"label(row, passed): passed is True, False or None, not {passed!r:.60}")
    if not isinstance(note, str):
        raise BadUsage(f"label(row, passed, note=...) takes a string, not {type(note).__name__}")
    current = evaluation[index]
    if not current.finished and passed is not None:
        raise BadUsage(f"label({index}, ...): the row is {current.status}: only a row that ran "
                       "can be labelled")
    done = replace(current, label=None if passed is None else Label(passed, note.strip()))
    remember(done)
    return index, done


class Judgements:
    """What ``Evaluation`` can say of its variants and rows beyond the figures: paired
    comparisons, verdicts, human labels and a pairwise judge."""

    def versus(self, a: str, b: str, metric: str = "pass") -> Versus:
        """``b`` against ``a``, case by case (``metric``: ``"pass"`` or ``"score"``): the
        mean difference, its paired 95% interval, a paired test's p-value, wins / ties /
        losses, the cases needed to tell, and the verdict (see ``Versus``)."""
        return versus(_this(self), a, b, metric)

    def verdicts(self, alpha: float = 0.05) -> list[Versus]:
        """``versus(first, other)`` for every other variant, each with ``p_adjusted`` (Holm
        across the comparisons) and its verdict taken on it at ``alpha``."""
        return verdicts(_this(self), alpha)

    def label(self, row: EvalRow | int, passed: bool | None, note: str = "") -> EvalRow:
        """A person's verdict on ``row`` (an ``EvalRow`` of this evaluation or its index):
        shown on the row (``row.label``), kept by ``save`` and by the run's resume file,
        read by ``agreement`` and ``graders.human()``; ``passed=None`` takes it off.
        Returns the labelled row."""
        this = _this(self)
        index, done = labelled(this, row, passed, note)
        if this.resume is not None:  # so that a resume keeps it
            try:
                this.resume.relabel(done)
            except BadUsage:
                remember(this[index])  # not labelled: human() reads the label it had
                raise
        this.set_row(index, done)
        this.notify(None)  # as diff does: the views redraw at once, a saved table too
        return done

    def agreement(self, grader: str) -> Agreement:
        """How the grader named ``grader`` agrees with the human labels on the labelled
        rows it graded: ``n``, ``kappa`` (Cohen's) and the 2 × 2 counts."""
        from fragola_nb.experiments.evaluate.labels import agreement

        this = _this(self)
        if grader not in this.graders:
            raise BadUsage(f"no grader named {grader!r} in this evaluation (its graders: "
                           f"{', '.join(map(repr, this.graders)) or 'none'})")
        return agreement(this, grader)

    async def judge_pairs(self, a: str, b: str, rubric: str,
                          model: str | None = None, fragola: Fragola | None = None,
                          both_orders: bool = True) -> Versus:
        """A model, shown the answers of ``a`` and ``b`` to each case (in both orders unless
        ``both_orders=False``), picks the better by ``rubric`` or a tie: a ``Versus`` with
        metric ``"preference"`` and ``position_flips`` (see ``pairjudge``)."""
        from fragola_nb.experiments.evaluate.pairjudge import judge_pairs

        this = _this(self)
        versus = await judge_pairs(this, a, b, rubric, model=model, fragola=fragola,
                                   both_orders=both_orders)
        if versus.usage is not None:
            this.pairs_usage += versus.usage
        return versus


def _this(judgements: Judgements) -> Evaluation:
    return cast("Evaluation", judgements)  # Judgements is a base of Evaluation only
