"""95% intervals of an evaluation's figures, and a case's value on a variant.

A case's value for a variant is the mean over its repeats of the row's metric (``passed`` as
1 or 0, or ``score``); rows that did not run are left out. The pass rate's interval is the
Wilson score interval when every case ran once; with repeats it is clustered by case (the
repeats of one case are not independent samples): the mean of the case values ± t(0.975,
n − 1) · sd / √n, clipped to [0, 1]. scipy is imported here, when a figure is asked for.

>>> wilson(8, 10)                                   # doctest: +ELLIPSIS
(0.49015..., 0.94332...)
>>> clustered([1.0, 0.5, 1.0, 0.0])                 # doctest: +ELLIPSIS
(0.0, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from fragola_nb.experiments.evaluate.evalrow import EvalRow

__all__ = ["CONFIDENCE", "Metric", "case_values", "clustered", "mean_sd", "paired_interval",
           "rate_interval", "row_value", "t_interval", "t_quantile", "wilson"]

CONFIDENCE = 0.95
Metric = Literal["pass", "score"]


def row_value(row: EvalRow, metric: str) -> float | None:
    """The row's ``metric``: 1.0/0.0 for ``"pass"``, its score for ``"score"``; None when
    it did not run (or has no score)."""
    if not row.finished:
        return None
    if metric == "pass":
        return 1.0 if row.passed else 0.0
    return row.score


def case_values(rows: Iterable[EvalRow], metric: str, key: str = "case"
                ) -> dict[object, list[float]]:
    """Each case's values (one per repeat that ran), by ``row.case`` (``key="case"``) or by
    its input (``key="input"``, how a diff aligns two runs)."""
    import json

    values: dict[object, list[float]] = {}
    for row in rows:
        value = row_value(row, metric)
        if value is None:
            continue
        name: object = (row.case if key == "case" else
                        json.dumps(row.input, ensure_ascii=False, sort_keys=True))
        values.setdefault(name, []).append(value)
    return values


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (n − 1; 0 for one value)."""
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, 0.0
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def t_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """mean ± t(0.975, n − 1) · sd / √n; None under two values."""
    if len(values) < 2:
        return None
    mean, sd = mean_sd(values)
    half = t_quantile(len(values) - 1) * sd / math.sqrt(len(values))
    return mean - half, mean + half


def t_quantile(df: int) -> float:
    """``scipy.stats.t.ppf(0.975, df)``, the same float: ``scipy.special.stdtrit``, which
    ``t.ppf`` calls after checking its arguments (a hundred times slower; a live view asks
    for it every second)."""
    from scipy import special  # type: ignore[import-untyped,unused-ignore]

    return float(special.stdtrit(df, 0.5 + CONFIDENCE / 2))


def clustered(case_means: Sequence[float]) -> tuple[float, float] | None:
    """The t interval on the case values, clipped to [0, 1] when they lie in it."""
    interval = t_interval(case_means)
    if interval is None:
        return None
    if all(0.0 <= v <= 1.0 for v in case_means):
        return max(0.0, interval[0]), min(1.0, interval[1])
    return interval


def paired_interval(differences: Sequence[float]) -> tuple[float, float] | None:
    """The t interval on per-case differences, clipped to [-1, 1] when they lie in it (two
    values on 0 to 1 differ by at most 1: with few cases the bare t interval runs far past
    that, "−50 pts [−685, +585]", which no difference can reach)."""
    interval = t_interval(differences)
    if interval is None:
        return None
    if all(-1.0 <= d <= 1.0 for d in differences):
        return max(-1.0, interval[0]), min(1.0, interval[1])
    return interval


def wilson(passed: int, n: int) -> tuple[float, float] | None:
    """The Wilson score interval of ``passed`` out of ``n`` (None for n = 0)."""
    if n == 0:
        return None
    from scipy import stats  # type: ignore[import-untyped,unused-ignore]

    found = stats.binomtest(passed, n).proportion_ci(CONFIDENCE, method="wilson")
    return float(found.low), float(found.high)


def rate_interval(values: Mapping[Any, Sequence[float]]) -> tuple[float, float] | None:
    """The pass rate's interval: Wilson when every case ran once, else clustered by case."""
    if not values:
        return None
    if all(len(each) == 1 for each in values.values()):
        passed = sum(1 for each in values.values() if each[0] == 1.0)
        return wilson(passed, len(values))
    return clustered([math.fsum(each) / len(each) for each in values.values()])
