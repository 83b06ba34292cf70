"""``agent.batch``: many inputs, each on a fresh fork of the agent."""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["BatchResult", "run_batch"]


class BatchResult:
    """The rows of one ``agent.batch`` call, in input order. (Being built.)"""


async def run_batch(
    agent: Agent,
    inputs: Iterable[Any],
    concurrency: int,
    *,
    resume: str | PathLike[str] | None,
    progress: bool,
) -> BatchResult:
    raise NotImplementedError("agent.batch is being built")
