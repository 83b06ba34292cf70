"""One ``%%fragola`` turn: prepare it (sync), run it (one coroutine), show how it ended (sync).

Both ways a cell reaches us run the same coroutine: the input transformer turns the cell into
``await ...run_cell(line, body)`` so it runs on the kernel's own loop (widget clicks get through,
an interrupt cancels it), and the plain cell magic runs it with ``fragola_nb.run_sync``.

How a cell ends follows Jupyter's rule that a cell which did not do its work fails, so "Run
All" and ``jupyter execute`` stop there. A mistake on the line is a ``UsageError`` before
anything is sent. An error of the run (the model API, a listener, ``JsonModeError``) and an
interrupt end the cell as an error after the panel (or transcript) shows the turn as it
ended: the error is raised again, shown in one line (``_render_traceback_``). A turn that
pauses for a decision, uses its step budget, is stopped from its panel, or gets a ``--json``
reply that does not match the schema has done what was asked: the cell ends normally.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pydantic
from IPython.core.error import UsageError

from fragola_nb.base.errors import BadUsage, ShortTraceback
from fragola_nb.core.agent import Agent
from fragola_nb.core.jsonmode import JsonResult
from fragola_nb.core.schemas import load_json_schema
from fragola_nb.core.state import AgentState
from fragola_nb.notebook.cellargs import CellOptions, interpolate, lookup, parse_options
from fragola_nb.notebook.runner import runs_of
from fragola_nb.notebook.textviews import TextLine, TurnTranscript, say, show

if TYPE_CHECKING:
    from fragola_nb.core.events import Event
    from fragola_nb.notebook.magics import Extension

__all__ = ["Turn", "TurnInterrupted", "TurnSettings", "TurnView"]

_log = logging.getLogger("fragola_nb")


class TurnInterrupted(ShortTraceback, KeyboardInterrupt):
    """A ``%%fragola`` turn ended by an interrupt (the kernel's Interrupt, Ctrl-C). The agent
    stopped with a valid history; the cell ends as an interrupted cell does, in one line
    rather than a traceback through the run (``%tb`` shows the traceback, as for our
    errors)."""


class TurnSettings:
    """Request settings for one turn (``--model``, ``--temperature``, streaming), set by a
    ``before_model_invocation`` listener rather than on the agent's options. They last until
    the agent is idle again, so a run resumed by an approval click keeps them; a fork made
    while paused carries them until it is idle too."""

    def __init__(self, agent: Agent, settings: dict[str, Any], drop: tuple[str, ...]) -> None:
        self.agent, self.settings, self.drop = agent, settings, drop
        self.on_idle: Callable[[], None] | None = None  # once, when idle after a pause
        self.on_waiting: Callable[[], None] | None = None  # each time it pauses again

    def install(self) -> TurnSettings:
        self.agent.on_before_model_invocation(self._apply)
        self.agent.on_status_change(self._status)
        return self

    def release(self, agent: Agent | None = None) -> None:
        agent = agent or self.agent
        agent.off("before_model_invocation", self._apply)
        agent.off("status_change", self._status)

    def _apply(self, event: Event) -> dict[str, Any]:
        config: dict[str, Any] = event.config  # type: ignore[attr-defined]
        for key in self.drop:
            config.pop(key, None)
        config.update(self.settings)
        return config

    def _status(self, event: Event) -> None:
        status, agent = event.status, event.context.agent  # type: ignore[attr-defined]
        if status == "waiting" and agent is self.agent:
            _observe(self.on_waiting)
        if status != "idle":
            return
        self.release(agent)
        if agent is self.agent:
            on_idle, self.on_idle, self.on_waiting = self.on_idle, None, None
            _observe(on_idle)


class TurnView:
    """A turn panel on display. ``refresh`` re-sends the display so its static text/html
    fallback (what nbconvert and GitHub show) holds the conversation as it is now."""

    def __init__(self, panel: Any, handle: Any) -> None:
        self.panel, self.handle = panel, handle

    def show_error(self, exc: BaseException) -> None:
        self.panel.show_error(exc)

    def refresh(self) -> None:
        self.panel.sync_now()
        if self.handle is not None:
            self.handle.update(self.panel)


class Turn:
    """``%%fragola [AGENT] [options]`` with ``body`` as the user message."""

    def __init__(self, ext: Extension, line: str, body: str) -> None:
        self.ext, self.line, self.body = ext, line, body
        self.result: AgentState | JsonResult[Any] | None = None
        self.error: Exception | None = None
        self.interrupted = False

    def prepare(self) -> None:
        """Check everything, then make the side effects: default agent, fork, panel."""
        ns = self.ext.shell.user_ns
        self.options = options = parse_options(interpolate(self.line, ns))
        self.text = interpolate(self.body, ns).strip()
        if not self.text:
            raise UsageError("the cell is empty: write the message below the %%fragola line")
        self.schema = None if options.json is None else _schema(lookup(options.json, ns, "--json"))
        agent = self.ext.resolve_agent(options.agent)
        if agent.status != "idle":
            raise UsageError(
                f"agent {agent.name!r} is {agent.status}"
                + (": decide its pending calls or stop it first" if agent.status == "waiting"
                   else ": wait for the run in progress or stop it")
            )
        if options.fork is not None:
            agent = agent.fork(options.fork)
            ns[options.fork] = agent
        self.agent = agent
        self.var = options.fork or options.agent or "agent"  # how the notebook names it
        self.since = agent.message_count
        self.usage_before = agent.usage
        self.panel: TurnView | None = self.ext.show_turn(agent, self.since, options.model)
        self.settings = TurnSettings(agent, *_request_settings(options)).install()

    async def run(self) -> None:
        """The turn itself. Errors and interruptions are recorded for ``finish``."""
        try:
            # The runs of this turn are its panel's, whatever later cells run on the agent.
            with runs_of(self.panel.panel if self.panel is not None else None):
                if self.schema is not None:
                    self.result = await self.agent.json(self.text, self.schema,
                                                        json_mode=self.options.json_mode)
                else:
                    self.result = await self.agent.user_message(self.text, by=self.options.by)
        except (asyncio.CancelledError, KeyboardInterrupt):
            # The agent repaired its history when cancelled; ``finish`` raises TurnInterrupted.
            self.interrupted = True
        except Exception as exc:  # shown by the panel, raised again by finish
            self.error = exc
        finally:
            if self.agent.status != "waiting":
                self.settings.release()

    def finish(self) -> None:
        """Show the outcome: the panel's final form (or a transcript), and one-line notes;
        then fail the cell if the turn was interrupted or raised."""
        agent, options = self.agent, self.options
        if self.panel is not None:
            if self.error is not None:
                self.panel.show_error(self.error)
            self.panel.refresh()
        else:
            show(TurnTranscript(agent, self.since, agent.usage.since(self.usage_before)))
        if isinstance(self.result, JsonResult):
            if self.result.success:
                show(self.result.data)
            else:
                say(f"fragola_nb: the reply does not match the schema: {self.result.error}",
                    file=sys.stderr)
        if agent.status == "waiting":
            self._say_waiting()
        elif agent.outcome == "step_limit" and self.result is not None:
            say(f"fragola_nb: {agent.name!r} used its step budget; "
                f"`await {self.var}.step()` lets it go on")
        elif agent.outcome == "budget" and self.result is not None:
            say(f"fragola_nb: {agent.name!r} stopped before its next model call: "
                f"{agent.state.spent}")
        if options.out is not None and self.result is not None:
            self.ext.shell.user_ns[options.out] = self.result
        if self.interrupted:
            raise TurnInterrupted(
                f"{agent.name!r} stopped by the interrupt; its history is kept valid"
            )
        if self.error is not None:
            raise self.error

    def _say_waiting(self) -> None:
        v, name, pending = self.var, self.agent.name, self.agent.pending
        if self.panel is None:  # no controls: list the calls to decide in code
            say(f"fragola_nb: {name!r} is waiting on {len(pending)} tool call(s): decide each "
                f"with {v}.approve(id) / {v}.reject(id, reason) / {v}.inject(id, result), "
                f"then `await {v}.step()`")
            for call in pending:
                say(f"  {call.id}: {call.name}({call.arguments}) [{call.reason}]")
            return
        # Decided in the panel, later: a line that says so when the agent goes on, rather
        # than printed text that stays "waiting" for good.
        note = TextLine(f"fragola_nb: {name!r} is waiting on {len(pending)} tool call(s): "
                        "use the controls above")
        panel = self.panel

        def waiting_again() -> None:
            panel.refresh()
            note.update(f"fragola_nb: {name!r} went on after the decisions and waits again, "
                        f"on {len(self.agent.pending)} tool call(s): use the controls above")

        def idle() -> None:
            panel.refresh()
            note.update(self._after_waiting())

        self.settings.on_waiting, self.settings.on_idle = waiting_again, idle

    def _after_waiting(self) -> str:
        name, outcome = self.agent.name, self.agent.outcome
        if outcome == "stopped":
            return f"fragola_nb: {name!r} was stopped: no longer waiting"
        if outcome == "step_limit":
            return (f"fragola_nb: {name!r} went on after the decisions: step budget used; "
                    f"`await {self.var}.step()` lets it go on")
        if outcome == "finished":
            return f"fragola_nb: {name!r} went on after the decisions: finished"
        if outcome == "budget":
            return (f"fragola_nb: {name!r} went on after the decisions: "
                    f"{self.agent.state.spent}")
        return f"fragola_nb: {name!r} is no longer waiting: it did not finish (see the panel)"


def _observe(callback: Callable[[], None] | None) -> None:
    """Call a view's callback from a status listener: a view must not break the run."""
    if callback is None:
        return
    try:
        callback()
    except Exception:
        _log.exception("fragola_nb: the turn's display failed to update")


def _request_settings(options: CellOptions) -> tuple[dict[str, Any], tuple[str, ...]]:
    settings: dict[str, Any] = {}
    if options.model is not None:
        settings["model"] = options.model
    if options.temperature is not None:
        settings["temperature"] = options.temperature
    if options.stream:
        settings["stream"] = True
        return settings, ()
    return settings, ("stream", "stream_options")


def _schema(value: Any) -> Any:
    if isinstance(value, (str, dict)):
        try:
            load_json_schema(value)
        except BadUsage as exc:
            raise UsageError(f"--json: {exc}") from None
        return value
    if isinstance(value, type) and (
        issubclass(value, pydantic.BaseModel) or hasattr(value, "__fields__")
    ):
        return value  # a pydantic v2 model, or a pydantic.v1 one
    raise UsageError(
        f"--json takes a pydantic model class or a JSON Schema, not {type(value).__name__}"
    )
