"""``AgentContext``: what tools and listeners may see and do while an agent runs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .redact import redacted
from .tools import Tool, check_tools

if TYPE_CHECKING:
    from .agent import Agent
    from .state import AgentState
    from .stores import Store

__all__ = ["AgentContext", "AgentOptions"]


@dataclass
class AgentOptions:
    """An agent's configuration. ``tools`` is the list the model is offered."""

    name: str
    description: str = ""
    instructions: str | None = None
    use_developer_role: bool = False
    model_settings: dict[str, Any] = field(default_factory=dict)
    max_step: int = 5
    reset_step_count_after_user_message: bool = True
    tools: list[Tool] = field(default_factory=list)

    def __repr__(self) -> str:
        # Settings may carry credentials (extra_headers={"Authorization": ...}): shown
        # redacted, by the rule session files use. The settings themselves are untouched.
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["model_settings"] = redacted(self.model_settings)
        return f"AgentOptions({', '.join(f'{name}={value!r}' for name, value in shown.items())})"


class AgentContext:
    """Handed to tool handlers and listeners; bound to one agent (a fork gets its own)."""

    __slots__ = ("agent",)

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    @property
    def options(self) -> AgentOptions:
        return self.agent.options

    @property
    def state(self) -> AgentState:
        return self.agent.state

    def get_store(self, namespace: str) -> Store[Any] | None:
        """The agent's store with that namespace, else the Fragola instance's, else None."""
        return self.agent.get_store(namespace)

    def update_tools(self, tools: Iterable[Tool]) -> None:
        """Replace the tools offered to the model (takes effect for the next request, or for
        the request being prepared when called from ``before_model_invocation``)."""
        self.agent.options.tools = list(check_tools(tools))

    def set_instructions(self, instructions: str | list[str] | None) -> None:
        self.agent.set_instructions(instructions)

    def stop(self) -> None:
        """Stop the run gracefully once the operation in flight finishes."""
        self.agent.stop()

    def __repr__(self) -> str:
        return f"AgentContext(agent={self.agent.name!r})"
