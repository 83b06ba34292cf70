"""``ExperimentCell``: a ``%%fragola`` cell that runs an experiment, as a turn runs.

``%%fragola [AGENT] --compare VARIANTS`` (``compare.cell.CompareCell``) and ``%%fragola [AGENT]
--evaluate CASES`` (``evaluate.cell.EvalCell``) are each three steps, as a ``Turn``: ``prepare``
(sync: every option checked, each wrong one a ``UsageError`` naming its flag, before any fork is
made), ``run`` (one coroutine: the experiment) and ``finish`` (sync: in a terminal the result's
text, since no live view showed; ``--out VAR`` bound; an interrupt ends the cell as an error,
``TurnInterrupted``, and so does an error of the run itself).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from fragola_nb.base.errors import BadUsage
from fragola_nb.notebook.textviews import show
from fragola_nb.notebook.turn import TurnInterrupted

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.notebook.cellargs import CellOptions
    from fragola_nb.notebook.magics import Extension

__all__ = ["ExperimentCell", "checked", "variants_dict"]


class ExperimentCell:
    """prepare (sync), run (one coroutine), finish (sync); a kind says what it checks
    (``prepare``), what it runs (``_run``) and what its interrupt says (``_stopped``)."""

    def __init__(self, ext: Extension, options: CellOptions, body: str) -> None:
        self.ext, self.options, self.body = ext, options, body
        self.result: Any = None
        self.error: Exception | None = None
        self.interrupted = False

    def prepare(self) -> None:
        """Check everything before any fork is made or anything is sent."""
        raise NotImplementedError

    async def run(self) -> None:
        try:
            self.result = await self._run()
        except (asyncio.CancelledError, KeyboardInterrupt):
            self.interrupted = True  # each fork repaired its history; finish says so
        except Exception as exc:
            self.error = exc

    def finish(self) -> None:
        result = self.result
        if result is not None:
            if not self.ext.widgets:
                show(result)  # a terminal: the text form (the live view showed in a kernel)
            self._ended(result)
            if self.options.out is not None:
                self.ext.shell.user_ns[self.options.out] = result
        if self.interrupted:
            raise TurnInterrupted(self._stopped())
        if self.error is not None:
            raise self.error

    def idle_agent(self, verb: str) -> Agent:
        """The cell's agent (its name, else the notebook's only one), idle, or a
        ``UsageError``: "agent 'tutor' is generating: VERB it once it is idle"."""
        agent = self.ext.resolve_agent(self.options.agent)
        if agent.status != "idle":
            raise UsageError(f"agent {agent.name!r} is {agent.status}: "
                             f"{verb} it once it is idle")
        return agent

    async def _run(self) -> Any:
        """Run the experiment; its result."""
        raise NotImplementedError

    def _ended(self, result: Any) -> None:
        """What the cell says of ``result`` once it ran (nothing unless a kind says)."""

    def _stopped(self) -> str:
        """What an interrupt of the cell says."""
        raise NotImplementedError


def checked(flag: str, name: str | None, check: Callable[[], object]) -> None:
    """Run ``check``; its ``BadUsage`` as a ``UsageError`` naming the option: "--graders
    G: ..."."""
    try:
        check()
    except BadUsage as exc:
        raise UsageError(f"{flag} {name}: {exc}") from None


def variants_dict(value: Any, flag: str) -> Mapping[str, Any]:
    """``value`` if it is a dict of variants, else a ``UsageError`` naming ``flag``."""
    if not isinstance(value, Mapping):
        raise UsageError(f"{flag} takes a dict of variants (name -> overrides), "
                         f"not {type(value).__name__}")
    return value
