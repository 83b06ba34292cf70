"""Prompt experiments on forks, in families: ``compare/`` (``agent.compare``, a
``Comparison``), ``batch/`` (``agent.batch``, a ``BatchResult``), ``evaluate/``
(``agent.evaluate``, an ``Evaluation``), ``graders/`` and ``ray/``, on what they share
(``shared``, ``conversation``). Imported on first use."""

from __future__ import annotations

from fragola_nb.experiments import pages  # export_html's pages of comparisons and batches
from fragola_nb.experiments.batch.result import BatchResult
from fragola_nb.experiments.compare.comparison import Comparison

del pages

__all__ = ["BatchResult", "Comparison"]
