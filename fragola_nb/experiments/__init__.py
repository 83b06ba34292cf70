"""Prompt experiments on forks: ``Comparison`` (``agent.compare``) and ``BatchResult``
(``agent.batch``). Imported on first use."""

from __future__ import annotations

from fragola_nb.experiments import pages  # export_html's pages of comparisons and batches
from fragola_nb.experiments.batch.result import BatchResult
from fragola_nb.experiments.compare.comparison import Comparison

del pages

__all__ = ["BatchResult", "Comparison"]
