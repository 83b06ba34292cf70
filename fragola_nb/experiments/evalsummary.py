"""``Evaluation.summary()``: one variant's figures over its rows.

pass@k is the share of cases that passed in at least one of their k repeats, pass^k the
share that passed in all of them (k = the repeats each case has run; a row not run does not
count). With ``repeat=1`` both equal the pass rate.

``rate_text`` is how every view writes a line's pass rate: ``"80% passed"``, or, when some
rows did not run (a stop, a budget), ``"88% of 16 run"``: the rate is over the rows that ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fragola_nb.base.figures import percent
from fragola_nb.core.usage import Usage
from fragola_nb.experiments.evalrows import EvalRow

__all__ = ["rate_text", "variant_summary"]


def rate_text(line: dict[str, Any]) -> str:
    """A summary line's pass rate in words: ``"80% passed"``, ``"88% of 16 run"`` when rows
    are missing (not run, or still running), ``"not run"`` when none ran."""
    if not line["ran"]:
        return "not run"
    if line["ran"] < line["rows"]:
        return f"{percent(line['pass_rate'])} of {line['ran']:,} run"
    return f"{percent(line['pass_rate'])} passed"


def variant_summary(variant: str, rows: Sequence[EvalRow],
                    graders: Sequence[str]) -> dict[str, Any]:
    """The summary line of ``variant``: see ``Evaluation.summary``."""
    ran = [row for row in rows if row.finished]
    by_case: dict[int, list[bool]] = {}
    for row in ran:
        by_case.setdefault(row.case, []).append(bool(row.passed))
    scores = [row.score for row in ran if row.score is not None]
    seconds = sorted(row.seconds for row in ran if row.seconds is not None)
    usage = sum((row.usage for row in rows if row.usage is not None), Usage())
    judged = sum((row.judge_usage for row in rows if row.judge_usage is not None), Usage())
    return {
        "variant": variant,
        "rows": len(rows),
        "ran": len(ran),
        "failed": sum(1 for row in ran if row.status == "failed"),
        "pass_rate": _share(sum(1 for row in ran if row.passed), len(ran)),
        "graders": {name: _grader_rate(ran, name) for name in graders},
        "mean_score": sum(scores) / len(scores) if scores else None,
        "pass_at_k": _share(sum(1 for v in by_case.values() if any(v)), len(by_case)),
        "pass_all_k": _share(sum(1 for v in by_case.values() if all(v)), len(by_case)),
        "tokens": None if usage.unreported else usage.total_tokens,
        "cost": usage.cost,
        "judge_cost": judged.cost if judged.calls else 0.0,
        "total_cost": (usage + judged).cost,
        "cost_text": (usage + judged).cost_text(),
        "cached_calls": sum(1 for call in usage.calls if getattr(call, "cached", False)),
        "p50_seconds": _quantile(seconds, 0.50),
        "p95_seconds": _quantile(seconds, 0.95),
    }


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _grader_rate(rows: Sequence[EvalRow], name: str) -> float | None:
    grades = [grade for row in rows if (grade := row.grade(name)) is not None]
    return _share(sum(1 for grade in grades if grade.passed), len(grades))


def _quantile(values: list[float], share: float) -> float | None:
    """The ``share`` quantile of sorted ``values`` (linear between the nearest two)."""
    if not values:
        return None
    position = share * (len(values) - 1)
    low = int(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)
