"""Token usage and cost of model calls. (Being built.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["Usage", "tree_usage"]


@dataclass(frozen=True)
class Usage:
    """Tokens and requests of model calls (being built)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    requests: int = 0
    cost: float | None = None


def tree_usage(agent: Agent) -> Usage:
    raise NotImplementedError("tree_usage is being built")
