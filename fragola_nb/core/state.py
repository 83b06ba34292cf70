"""Plain value types: an agent's state, its pending tool calls and their decisions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["AgentState", "Decision", "Outcome", "PendingCall", "Status"]

Status = Literal["idle", "generating", "waiting"]
Outcome = Literal["finished", "paused", "step_limit", "stopped", "budget"]
"""How the last ``user_message``/``step`` ended: a final answer, paused for a person or an
outside result, the step budget reached, stopped by ``stop()``/``stop_sync()``, or a
``Budget`` spent (``fragola_nb.core.limits``: ``AgentState.spent`` says which)."""


@dataclass(frozen=True)
class Decision:
    """A person's answer to a pending call: ``approve`` (maybe with edited params),
    ``reject`` (with a reason the model is told) or ``inject`` (a result given by hand)."""

    kind: Literal["approve", "reject", "inject"]
    params: Any = None
    text: str | None = None


@dataclass(frozen=True)
class PendingCall:
    """A tool call the run paused on.

    ``params`` is what the handler would receive (the validated model instance for a pydantic
    schema); ``arguments`` is the JSON object the model sent; ``reason`` is ``"approval"`` or
    ``"dynamic"``; ``decision`` stays ``None`` until ``approve``/``reject``/``inject``.
    """

    id: str
    name: str
    params: Any
    arguments: dict[str, Any]
    reason: Literal["approval", "dynamic"]
    decision: Decision | None = None


@dataclass(frozen=True)
class AgentState:
    """A snapshot of an agent: ``messages``, ``step_count``, ``status``, ``pending``, the
    ``outcome`` of the last run (``None`` before the first) and, when it was ``"budget"``,
    ``spent``: the one line saying which budget ran out."""

    messages: list[dict[str, Any]]
    step_count: int
    status: Status
    pending: tuple[PendingCall, ...] = ()
    outcome: Outcome | None = None
    spent: str | None = None

    @property
    def last_message(self) -> dict[str, Any] | None:
        return self.messages[-1] if self.messages else None

    def _repr_html_(self) -> str:
        from fragola_nb.base.render import conversation_html

        return conversation_html(self.messages, title="AgentState", status=self.status,
                                 subtitle=f"step {self.step_count} · outcome {self.outcome}")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        from fragola_nb.base.render import transcript_text

        printer.text(repr(self))
        if not cycle and self.messages:
            printer.text("\n" + transcript_text(self.messages))

    def __repr__(self) -> str:
        return (
            f"AgentState(status={self.status!r}, step_count={self.step_count}, "
            f"messages={len(self.messages)}, pending={len(self.pending)}, "
            f"outcome={self.outcome!r})"
        )
