"""The header of a file ``Evaluation.save`` wrote (the first row's ``"run"``), read back.

A file edited by hand may hold anything there: each field is checked, and what does not fit
is a ``ValueError`` saying which field, which ``Evaluation.load`` turns into its ``BadUsage``
naming the file (never a bare ``TypeError`` or ``OverflowError`` from a conversion).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fragola_nb.core.usage import ModelPrice, Usage, call_read_back

__all__ = ["run_of", "usage_read_back"]


def run_of(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Evaluation`` arguments the header ``meta`` gives: variants, graders, repeat,
    seconds and stopped (the last three may be missing: 1, 0.0, False)."""
    names = {}
    for field in ("variants", "graders"):
        value = meta.get(field, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"{field} is not a list of names (strings)")
        names[field] = value
    repeat = meta.get("repeat", 1)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError("repeat is not a whole number >= 1")
    seconds = meta.get("seconds", 0.0)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not math.isfinite(seconds) or seconds < 0:
        raise ValueError("seconds is not a number >= 0")
    stopped = meta.get("stopped", False)
    if not isinstance(stopped, bool):
        raise ValueError("stopped is not true or false")
    return {**names, "repeat": repeat, "seconds": float(seconds), "stopped": stopped}


def usage_read_back(calls: Any, prices: Mapping[str, ModelPrice], field: str) -> Usage:
    """The calls the header's ``field`` holds (``pairs_usage``: ``judge_pairs``'s; none in
    files written before it)."""
    if calls is None:
        return Usage()
    if not isinstance(calls, list):
        raise ValueError(f"{field} is not a list of calls")
    try:
        return Usage(tuple(call_read_back(call) for call in calls), prices)
    except ValueError as exc:
        raise ValueError(f"{field} holds a call that is not one ({exc})") from None
