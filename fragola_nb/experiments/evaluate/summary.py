"""``Evaluation.summary()``: one variant's figures over its rows.

pass@k is the share of cases that passed in at least one of their k repeats, pass^k the
share that passed in all of them (k = the repeats each case has run; a row not run does not
count). With ``repeat=1`` both equal the pass rate. ``pass_rate_ci`` and ``mean_score_ci``
are 95% intervals (see ``intervals``); ``cases`` counts the cases that ran.

``rate_text`` is how every view writes a line's pass rate: ``"80% passed"``, or, when some
rows did not run (a stop, a budget), ``"88% of 16 run"``: the rate is over the rows that ran.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.figures import percent
from fragola_nb.core.usage import Usage
from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.evaluate.intervals import clustered, rate_interval

__all__ = ["rate_text", "summary_lines", "usage_total", "variant_summary"]


def rate_text(line: dict[str, Any]) -> str:
    """A summary line's pass rate in words: ``"80% passed"``, ``"88% of 16 run"`` when rows
    are missing (not run, or still running), ``"not run"`` when none ran."""
    if not line["ran"]:
        return "not run"
    if line["ran"] < line["rows"]:
        return f"{percent(line['pass_rate'])} of {line['ran']:,} run"
    return f"{percent(line['pass_rate'])} passed"


def usage_total(usages: Iterable[Usage | None], start: Usage | None = None) -> Usage:
    """``sum(usages, start)`` (None left out) in one pass: adding them one by one copies
    the calls so far at each step, a cost growing with the square of the rows."""
    calls = list(start.calls) if start is not None else []
    tools = list(start.tools) if start is not None else []
    prices = dict(start.prices) if start is not None else {}
    for usage in usages:
        if usage is not None:
            calls += usage.calls
            tools += usage.tools
            for model, price in usage.prices.items():
                prices.setdefault(model, price)  # as ``a + b``: the first one's prices win
    return Usage(tuple(calls), prices, tuple(tools))


def summary_lines(rows: Sequence[EvalRow], variants: Sequence[str], graders: Sequence[str],
                  by: str | None) -> list[dict[str, Any]]:
    """``Evaluation.summary(by)``: a line per variant, or per tag and variant (a case with
    no tag is under the tag None)."""
    if by is None:
        return [variant_summary(v, [r for r in rows if r.variant == v], graders)
                for v in variants]
    if by != "tag":
        raise BadUsage(f"summary(by=...) takes None or 'tag', not {by!r:.60}")
    tags: dict[str | None, None] = {}
    for row in rows:
        for tag in row.tags or (None,):
            tags.setdefault(tag)
    return [{"tag": tag, **variant_summary(v, [r for r in rows if r.variant == v and (
        tag in r.tags if tag is not None else not r.tags)], graders)}
            for tag in tags for v in variants]


def variant_summary(variant: str, rows: Sequence[EvalRow],
                    graders: Sequence[str]) -> dict[str, Any]:
    """The summary line of ``variant``: see ``Evaluation.summary``."""
    ran = [row for row in rows if row.finished]
    by_case: dict[int, list[bool]] = {}
    scored: dict[int, list[float]] = {}  # each case's scores: its interval
    scores = []
    for row in ran:  # a row's passed and score are worked out from its grades: once each
        by_case.setdefault(row.case, []).append(bool(row.passed))
        score = row.score
        if score is not None:
            scores.append(score)
            scored.setdefault(row.case, []).append(score)
    seconds = sorted(row.seconds for row in ran if row.seconds is not None)
    passes = {case: [1.0 if ok else 0.0 for ok in v] for case, v in by_case.items()}
    usage = usage_total(row.usage for row in rows)
    judged = usage_total(row.judge_usage for row in rows)
    users = usage_total(row.user_usage for row in rows)
    paid = usage + judged + users  # what the run paid: answers, judges, simulated users
    return {
        "variant": variant,
        "rows": len(rows),
        "ran": len(ran),
        "failed": sum(1 for row in ran if row.status == "failed"),
        "cases": len(passes),
        "pass_rate": _share(sum(sum(v) for v in by_case.values()), len(ran)),
        "pass_rate_ci": rate_interval(passes),
        "graders": {name: _grader_rate(ran, name) for name in graders},
        "mean_score": sum(scores) / len(scores) if scores else None,
        "mean_score_ci": clustered([math.fsum(v) / len(v) for v in scored.values()]),
        "pass_at_k": _share(sum(1 for v in by_case.values() if any(v)), len(by_case)),
        "pass_all_k": _share(sum(1 for v in by_case.values() if all(v)), len(by_case)),
        "tokens": None if usage.unreported else usage.total_tokens,
        "cost": usage.cost,
        "judge_cost": judged.cost if judged.calls else 0.0,
        "user_cost": users.cost if users.calls else 0.0,
        "total_cost": paid.cost,
        "cost_text": paid.cost_text(),
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
