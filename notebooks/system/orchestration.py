"""Orchestration: this part's cells of ``notebooks/system.ipynb`` (see ``notebooks/build.py``)."""

from __future__ import annotations

from collections.abc import Callable

Cell = tuple[str, str]


def cells(md: Callable[[str], Cell], code: Callable[[str], Cell]) -> list[Cell]:
    return []
