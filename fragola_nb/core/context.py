"""``AgentContext``: what tools and listeners may see and do while an agent runs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from fragola_nb.base.redact import redacted
from fragola_nb.core.tools import Tool, check_tools

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.state import AgentState
    from fragola_nb.core.stores import Store

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

    def set_instructions(self, instructions: str | list[str] | None,
                         scope: str | None = None) -> None:
        """The agent's instructions, or those of ``scope`` (``fragola_nb.core.instructions``)."""
        self.agent.set_instructions(instructions, scope)

    def instructions(self, scope: str | None = None) -> str | None:
        """Upstream's ``context.instructions(scope?)``: ``agent.instructions_for(scope)``."""
        return self.agent.instructions_for(scope)

    def remove_instructions(self, scope: str) -> bool:
        return self.agent.remove_instructions(scope)

    @property
    def system_prompt(self) -> str | None:
        """The system message the model is sent: every scope's instructions merged."""
        return self.agent.system_prompt

    def add_store(self, store: Store[Any]) -> None:
        self.agent.add_store(store)

    def remove_store(self, namespace: str) -> bool:
        return self.agent.remove_store(namespace)

    def set_options(self, **changes: Any) -> None:
        """``agent.set_options``: refused while the agent generates, so not from a listener
        of a running turn; from a hook, or between turns."""
        self.agent.set_options(**changes)

    def stop(self) -> None:
        """Stop the run gracefully once the operation in flight finishes."""
        self.agent.stop()

    def __repr__(self) -> str:
        return f"AgentContext(agent={self.agent.name!r})"
