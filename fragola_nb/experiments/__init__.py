"""Prompt experiments on forks: ``Comparison`` (``agent.compare``) and ``BatchResult``
(``agent.batch``). Imported on first use."""

from __future__ import annotations

from .batch import BatchResult
from .compare import Comparison

__all__ = ["BatchResult", "Comparison"]
