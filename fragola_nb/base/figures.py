"""Percentages as every view writes them: one rounding, so the title, the matrix's header,
the static table, the diff and the export never show 62% and 63% for the same pass rate.

>>> percent(0.625), percent(5 / 8), percent(None)
('63%', '63%', '–')
"""

from __future__ import annotations

import math

__all__ = ["percent"]


def percent(rate: float | None) -> str:
    """``rate`` (0 to 1) as a whole percentage, halves rounded up (``0.625`` is ``63%``,
    where Python's ``f"{0.625:.0%}"`` gives 62% and JavaScript's ``Math.round`` 63%);
    ``"–"`` for None (nothing ran)."""
    if rate is None:
        return "–"
    # The nudge keeps a share such as 0.285 (28.499999... once multiplied) a half.
    return f"{math.floor(rate * 100 + 0.5 + 1e-9):d}%"
