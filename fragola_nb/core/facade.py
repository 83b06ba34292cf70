"""The one edge from the core up to the experiments.

``agent.compare``, ``agent.batch`` and ``agent.evaluate`` are façades: their work lives in
``fragola_nb.experiments``, a layer above the core. This module is the only place in the core
that imports it, on first use (so ``import fragola_nb.core`` stays light and the layers stay
one way at import time); ``tests/package/test_import_cycles.py`` allows this edge and no
other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the façades' types, for core.agent's signatures: through here too
    from fragola_nb.core.agent import Agent
    from fragola_nb.experiments import BatchResult as BatchResult
    from fragola_nb.experiments import Comparison as Comparison
    from fragola_nb.experiments.evaluate.evaluation import Evaluation as Evaluation
    from fragola_nb.experiments.ray.backend import RayBackend as RayBackend

__all__ = ["batch", "compare", "evaluate"]


async def compare(agent: Agent, *args: Any, **kwargs: Any) -> Comparison:
    """``agent.compare``: ``fragola_nb.experiments.compare.run.run_compare``."""
    from fragola_nb.experiments.compare.run import run_compare

    return await run_compare(agent, *args, **kwargs)


async def batch(agent: Agent, *args: Any, **kwargs: Any) -> BatchResult:
    """``agent.batch``: ``fragola_nb.experiments.batch.run.run_batch``."""
    from fragola_nb.experiments.batch.run import run_batch

    return await run_batch(agent, *args, **kwargs)


async def evaluate(agent: Agent, *args: Any, **kwargs: Any) -> Evaluation:
    """``agent.evaluate``: ``fragola_nb.experiments.evaluate.run.run_evaluate``."""
    from fragola_nb.experiments.evaluate.run import run_evaluate

    return await run_evaluate(agent, *args, **kwargs)
