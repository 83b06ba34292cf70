"""``agent.compare``: one message, several variants, each on its own fork."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["Comparison", "run_compare"]


class Comparison:
    """The forks of one ``agent.compare`` call, by variant name. (Being built.)"""


async def run_compare(
    agent: Agent, message: str, variants: Mapping[str, Mapping[str, Any]], concurrency: int
) -> Comparison:
    raise NotImplementedError("agent.compare is being built")
