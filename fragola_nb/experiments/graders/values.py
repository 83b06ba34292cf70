"""What a ``Grade`` may hold, made sane once, when the grade is made (``Grade.__post_init__``).

Whatever a grader hands back, the grade it becomes can be counted, shown, saved and read
back: ``passed`` is a ``bool``, ``score`` a number from 0 to 1 or None, ``reason`` a string.

- Sensible values are taken as they mean: a numpy bool, or a number equal to 1 or 0, as
  ``passed``; any real number (numpy's too) as a ``float``.
- A judge's score on its own scale (``raw_score`` on ``scale=(low, high)``) gives
  ``score = (raw_score - low) / (high - low)``: every score is on one scale, 0 to 1.
- Nonsense (``passed`` None or ``"no"``, a score that is NaN, infinite, out of 0..1 or not a
  number, a raw score outside its scale) makes the grade failed, ``score`` None, and its
  reason says what was given, before the grader's own reason: never an exception that
  loses the row.

>>> normal_fields("short", None, float("nan"), "too long", None, None, None)["reason"]
'passed=None is not True or False; score=nan is not a number from 0 to 1 (too long)'
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from fragola_nb.base.redact import redact_text
from fragola_nb.core.usage import Usage

__all__ = ["as_bool", "is_bool", "normal_fields", "number", "shown"]


def as_bool(value: Any) -> bool | None:
    """``value`` as ``passed``: a bool, a numpy bool, or a number equal to 1 or 0; None for
    anything else."""
    if isinstance(value, bool):
        return value
    if _numpy_bool(value):
        return bool(value)
    if isinstance(value, numbers.Real) and number(value) in (0.0, 1.0):
        return number(value) == 1.0
    return None


def number(value: Any) -> float | None:
    """``value`` as a finite ``float`` (a bool, a numpy number too), else None."""
    if _numpy_bool(value):
        value = bool(value)
    if not isinstance(value, numbers.Real):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if math.isfinite(out) else None


def is_bool(value: Any) -> bool:
    """A bool, or numpy's."""
    return isinstance(value, bool) or _numpy_bool(value)


def _numpy_bool(value: Any) -> bool:
    """A numpy bool (or a 0-d bool array), known without importing numpy."""
    dtype = getattr(value, "dtype", None)
    return getattr(dtype, "kind", None) == "b" and getattr(value, "shape", None) == ()


def shown(value: Any) -> str:
    """``value`` as a reason quotes it: its repr, in one short line, credentials hidden."""
    try:
        text = " ".join(repr(value).split())
    except Exception:  # a repr that raises still says what it was
        text = f"a {type(value).__name__}"
    return redact_text(text if len(text) <= 60 else text[:59] + "…")


def _scale(value: Any) -> tuple[float, float] | None:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return None
    low, high = (None if isinstance(end, bool) else number(end) for end in value)
    if low is None or high is None or not low < high or not math.isfinite(high - low):
        return None
    whole = [type(end) is int for end in value]  # (1, 5) stays whole numbers
    return (value[0] if whole[0] else low), (value[1] if whole[1] else high)


def normal_fields(name: Any, passed: Any, score: Any, reason: Any, usage: Any,
                  raw_score: Any, scale: Any) -> dict[str, Any]:
    """A grade's fields made sane (see the module): the values to store."""
    problems = []
    ok = as_bool(passed)
    if ok is None:
        problems.append(f"passed={shown(passed)} is not True or False")
    value = None if score is None else number(score)
    if score is not None and (value is None or not 0.0 <= value <= 1.0):
        problems.append(f"score={shown(score)} is not a number from 0 to 1")
        value = None
    span = None if scale is None else _scale(scale)
    if scale is not None and span is None:
        problems.append(f"scale={shown(scale)} is not (low, high), two numbers, low below high")
    raw = None if raw_score is None else number(raw_score)
    if raw_score is not None and raw is None:
        problems.append(f"raw_score={shown(raw_score)} is not a number" if span is None else
                        f"score {shown(raw_score)} is not a number on the scale "
                        f"{span[0]:g}-{span[1]:g}")
    if raw is not None and span is not None:
        low, high = span
        fitted = (raw - low) / (high - low) if low <= raw <= high else math.nan
        value = fitted if 0.0 <= fitted <= 1.0 else None
        if value is None:
            problems.append(f"score {raw:g} is outside the scale {low:g}-{high:g}")
    text = reason if isinstance(reason, str) else "" if reason is None else shown(reason)
    said = "; ".join(p for p in problems if p not in text)  # made again: said once
    if said:
        text = f"{said} ({text})" if text else said
    return {"name": name if isinstance(name, str) else "" if name is None else shown(name),
            "passed": bool(ok) and not problems, "score": value, "reason": text,
            "usage": usage if isinstance(usage, Usage) else None,
            "raw_score": raw, "scale": span}
