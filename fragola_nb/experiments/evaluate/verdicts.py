"""Paired comparisons of two variants on the same cases: ``Versus``, and Holm's correction.

Both variants ran on the same cases, so they are compared case by case: a case's value is
the mean over its repeats of the metric (see ``intervals``), n the cases that ran on both,
and each case gives a difference b − a. ``delta`` is their mean, ``ci`` the paired t
interval (clipped to [-1, 1], the most two values on 0 to 1 can differ by). The test is
exact McNemar (a two-sided binomial test on the cases where only one variant passed) when
every case ran once and the metric is pass/fail; otherwise a two-sided paired sign-flip
permutation test on the differences: exact up to 16 cases, 10,000 seeded resamples above.
``cases_needed`` is the number of cases that would detect this delta with 80% power at 5%:
⌈((z₀.₉₇₅ + z₀.₈) · sd / |delta|)²⌉.

>>> evaluation.versus("brief", "formal").line()     # doctest: +SKIP
'formal vs brief: +12 pts [−3, +27], p = 0.14, not distinguishable (about 40 cases would tell)'

"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.render import visible
from fragola_nb.core.usage import Usage
from fragola_nb.experiments.evaluate.intervals import mean_sd, paired_interval

if TYPE_CHECKING:
    from fragola_nb.experiments.evaluate.evaluation import Evaluation

__all__ = ["ALPHA", "EXACT_UP_TO", "RESAMPLES", "SEED", "Versus", "check_pair", "holm", "paired",
           "verdict_of"]

ALPHA = 0.05
EXACT_UP_TO = 16
"""Up to this many cases the permutation test enumerates every sign flip (2¹⁶ of them)."""
RESAMPLES = 10_000
BATCH = 2_000_000
"""Values (resamples × cases) the permutation test works out at a time: the p-value does not
depend on it (scipy's ``batch``), the time does: all 10,000 resamples of 1,000 cases at once
are arrays of 160 MB, about four times slower than batches of 2,000."""
SEED = 0
"""The permutation test's resamples are seeded: the same data give the same p-value."""
FEWEST_CASES = 6
"""No exact two-sided test at 5% decides on fewer cases (its least p-value is 2 / 2ⁿ): the
line never says fewer would tell, whatever ``cases_needed``'s normal approximation gives."""
MCNEMAR = "exact McNemar"
EXACT = "exact sign-flip permutation"
SAMPLED = f"sign-flip permutation, {RESAMPLES:,} resamples"


@dataclass(frozen=True)
class Versus:
    """``b`` against ``a`` over the ``n`` cases both ran (see the module's docstring).

    ``wins`` / ``ties`` / ``losses``: cases where b is above, equal to, below a. ``verdict``:
    ``"<b> better"``, ``"<a> better"`` or ``"not distinguishable"``, taken at 5% on
    ``p_adjusted`` when ``verdicts()`` set it (Holm across its comparisons), else on
    ``p_value``. A pairwise judge (``judge_pairs``) fills ``position_flips``, ``usage``
    (its calls) and ``picks`` (each case's picks and the judge's reasons).
    """

    a: str
    b: str
    metric: str
    n: int
    delta: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    test: str
    wins: int
    ties: int
    losses: int
    cases_needed: int | None
    verdict: str
    p_adjusted: float | None = None
    position_flips: int | None = None
    usage: Usage | None = field(default=None, repr=False, compare=False)
    picks: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)

    def line(self) -> str:
        """``"formal vs brief: +12 pts [−3, +27], p = 0.14, not distinguishable (about 40
        cases would tell)"``: what the views and reprs show."""
        if not self.n or self.delta is None:
            return f"{self.b} vs {self.a}: no case ran on both"
        where = ("" if self.ci is None else
                 f" [{_amount(self.ci[0], self.metric, unit=False)}, "
                 f"{_amount(self.ci[1], self.metric, unit=False)}]")
        p = f"p = {_p(self.p_value)}"
        if self.p_adjusted is not None:
            p += f" (Holm: {_p(self.p_adjusted)})"
        need = max(self.cases_needed or 0, FEWEST_CASES)
        tell = (f" (about {need:,} cases would tell)"
                if self.verdict == "not distinguishable" and self.delta else "")
        flips = (f", {self.position_flips} position flip{'s' if self.position_flips != 1 else ''}"
                 if self.position_flips else "")
        return (f"{self.b} vs {self.a}: {_amount(self.delta, self.metric)}{where}, {p}, "
                f"{self.verdict}{tell}{flips}")

    def __repr__(self) -> str:
        return visible(f"Versus({self.line()})")  # names a person chose: a bidi override too


def verdict_of(a: str, b: str, delta: float | None, p: float | None, alpha: float) -> str:
    if p is None or delta is None or p >= alpha or delta == 0:
        return "not distinguishable"
    return f"{b} better" if delta > 0 else f"{a} better"


def check_pair(evaluation: Evaluation, a: Any, b: Any, what: str) -> None:
    known = ", ".join(map(repr, evaluation.variants)) or "none"
    for name in (a, b):
        if not isinstance(name, str) or name not in evaluation.variants:
            raise BadUsage(f"{what}: no variant named {name!r:.60} in this evaluation (its "
                           f"variants: {known})")
    if a == b:
        raise BadUsage(f"{what}: a and b are the same variant, {a!r}: name two")


def paired(a: str, b: str, metric: str, a_values: Mapping[Any, Sequence[float]],
           b_values: Mapping[Any, Sequence[float]], *, binary: bool) -> Versus:
    """``b`` against ``a`` from each case's values (per repeat) on either side; ``binary``:
    the values are pass/fail, so one run per case on both sides calls for McNemar."""
    both = [key for key in a_values if key in b_values and a_values[key] and b_values[key]]
    once = binary and all(len(a_values[k]) == 1 and len(b_values[k]) == 1 for k in both)
    differences = [math.fsum(b_values[k]) / len(b_values[k])
                   - math.fsum(a_values[k]) / len(a_values[k]) for k in both]
    return from_differences(a, b, metric, differences, mcnemar=once)


def from_differences(a: str, b: str, metric: str, differences: Sequence[float], *,
                     mcnemar: bool, sign_test: str = MCNEMAR) -> Versus:
    """The comparison of per-case differences b − a (``mcnemar``: each is −1, 0 or 1, and
    the test is the binomial test on the nonzero ones, named ``sign_test``)."""
    n = len(differences)
    wins = sum(1 for d in differences if d > 0)
    losses = sum(1 for d in differences if d < 0)
    if n == 0:
        return Versus(a, b, metric, 0, None, None, None, "none: no case ran on both", 0, 0,
                      0, None, "not distinguishable")
    delta, sd = mean_sd(differences)
    if mcnemar:
        test, p = sign_test, _binomial(wins, wins + losses)
    else:
        test, p = (EXACT if n <= EXACT_UP_TO else SAMPLED), _sign_flip(differences)
    return Versus(a, b, metric, n, delta, paired_interval(differences), p, test, wins,
                  n - wins - losses, losses, _cases_needed(delta, sd),
                  verdict_of(a, b, delta, p, ALPHA))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest p times
    (m − i + 1), made non-decreasing, at most 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def with_holm(comparisons: Sequence[Versus], alpha: float) -> list[Versus]:
    """Each comparison with ``p_adjusted`` (Holm across those with a p-value) and the
    verdict taken on it at ``alpha``."""
    tested = [i for i, v in enumerate(comparisons) if v.p_value is not None]
    adjusted = dict(zip(tested, holm([comparisons[i].p_value or 0.0 for i in tested]),
                        strict=True))
    out = []
    for index, versus in enumerate(comparisons):
        p = adjusted.get(index)
        out.append(replace(versus, p_adjusted=p,
                           verdict=verdict_of(versus.a, versus.b, versus.delta, p, alpha)))
    return out


def _binomial(successes: int, trials: int) -> float:
    if trials == 0:
        return 1.0
    from scipy import stats  # type: ignore[import-untyped,unused-ignore]

    return float(stats.binomtest(successes, trials, 0.5).pvalue)


def _sign_flip(differences: Sequence[float]) -> float:
    if len(differences) < 2:  # one case: both of its signs are as far from 0, p = 1
        return 1.0
    return _sign_flip_of(tuple(float(d) for d in differences))


@functools.lru_cache(maxsize=256)
def _sign_flip_of(differences: tuple[float, ...]) -> float:
    """Two-sided paired sign-flip permutation test of a zero mean difference. Kept for the
    same differences: the exact test on 16 cases takes scipy about a second, and a view
    asks again after every label."""
    from scipy import stats  # type: ignore[import-untyped,unused-ignore]

    n = len(differences)
    resamples = 2 ** n if n <= EXACT_UP_TO else RESAMPLES
    result = stats.permutation_test(
        (list(differences),), _mean, vectorized=True,
        permutation_type="samples", alternative="two-sided",
        n_resamples=resamples, rng=SEED, batch=max(1, min(resamples, BATCH // n)))
    return float(min(1.0, result.pvalue))


def _mean(values: Any, axis: int) -> Any:
    return values.mean(axis=axis)  # a numpy array: scipy's, so numpy is not imported here


def _cases_needed(delta: float, sd: float) -> int | None:
    if delta == 0 or sd == 0:
        return None
    from scipy import stats  # type: ignore[import-untyped,unused-ignore]

    z = float(stats.norm.ppf(0.975) + stats.norm.ppf(0.8))
    return math.ceil((z * sd / abs(delta)) ** 2)


def _amount(value: float, metric: str, *, unit: bool = True) -> str:
    """``+12 pts`` for a pass rate's difference, ``+0.12`` for a score's, with a minus sign."""
    if metric == "pass":
        points = round(value * 100)
        text = (f"{points:+d}" if points else "0") + (" pts" if unit else "")
    else:
        text = f"{value:+.2f}" if round(value, 2) else "0.00"
    return text.replace("-", "−")


def _p(p: float | None) -> str:
    if p is None:
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.2g}"
