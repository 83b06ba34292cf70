"""``wait_for_decisions``: a cell that leaves a paused turn to the person, under Run All too.

A ``%%fragola`` cell ends when the agent pauses on a call that needs a person. Under Run All
the next cells run at once, so a cell that decides in code "if nobody clicked" always
decides: nobody had time to. A lesson whose point is the click waits for it instead:

    if not await wait_for_decisions(calculator):   # nobody could click, or nobody did
        for pending in calculator.state.pending:
            calculator.approve(pending.id)         # ... decided in code, and said so
        await calculator.step()

It waits only where a person can click: a panel of the agent drawn by a front end (its view
said hello), in a kernel that takes a click while a cell awaits (ipykernel 7; 6 queues the
click behind the cell). Run headless (nbclient, nbconvert, ``jupyter execute``: nothing draws
the panel) it returns at once. One line under the cell says which, and is updated in place.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import time
from typing import Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.core.agent import Agent
from fragola_nb.notebook.panel.actions import clicked
from fragola_nb.notebook.textviews import TextLine

__all__ = ["wait_for_decisions"]

DEFAULT_WAIT = 120.0
WAIT_VARIABLE = "FRAGOLA_DECISION_WAIT"
"""The environment variable that sets the default wait (seconds): 0 where a notebook is run
in a browser by a program that clicks nothing (tests/browser)."""
SEEN_GRACE = 2.0
"""Seconds after a panel is shown for a front end to draw it (its hello) before the notebook
is taken to run headless."""
POLL = 0.05


async def wait_for_decisions(agent: Agent, timeout: float | None = None) -> bool:
    """Wait until a person decides ``agent``'s paused calls in its panel, and the run they
    resume has ended (idle, or paused again on new calls); at most ``timeout`` seconds
    (default: ``FRAGOLA_DECISION_WAIT`` from the environment, else 120; 0 waits for nobody).

    True when every call that was waiting has been decided (at once when none waits: the
    person clicked before this cell ran). False when one is still undecided: no panel of the
    agent is drawn by a front end (the notebook runs headless), the kernel cannot take a click
    while a cell runs, or nobody decided in time. The caller then decides in code."""
    if not isinstance(agent, Agent):
        raise BadUsage(f"wait_for_decisions takes an Agent, not a {type(agent).__name__}")
    if timeout is None:
        timeout = _default_timeout()
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise BadUsage(f"timeout must be a number of seconds >= 0, not {timeout!r}")
    waited = {call.id for call in agent.pending if call.decision is None}
    if not waited:
        await _settled(agent, {call.id for call in agent.pending})
        return True
    name = agent.name
    calls = f"{len(waited)} tool call{'s' if len(waited) > 1 else ''}"
    why_not = _kernel_refuses_clicks() or await _nobody_sees(agent)
    if why_not:
        TextLine(f"fragola_nb: not waiting for a click on {name!r}'s {calls}: {why_not}")
        return False
    line = TextLine(f"fragola_nb: waiting for your decision on {name!r}'s {calls} in its panel "
                    f"above (at most {timeout:g} s; then the cell goes on without it)")
    deadline = time.monotonic() + timeout
    while _undecided(agent, waited) and time.monotonic() < deadline:
        await asyncio.sleep(POLL)
    if _undecided(agent, waited):
        line.update(f"fragola_nb: nobody decided {name!r}'s {calls} in {timeout:g} s: the "
                    "cell goes on without a decision")
        return False
    await _settled(agent, waited)
    where = " in the panel" if all(clicked(agent, call_id) for call_id in waited) else ""
    then = "it waits again" if agent.status == "waiting" else str(agent.outcome)
    line.update(f"fragola_nb: {name!r}'s {calls} decided{where}; the run went on: {then}")
    return True


def _default_timeout() -> float:
    text = os.environ.get(WAIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_WAIT
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise BadUsage(f"{WAIT_VARIABLE}={text!r}: write a number of seconds >= 0")
    return seconds


def _undecided(agent: Agent, waited: set[str]) -> bool:
    return any(call.id in waited and call.decision is None for call in agent.pending)


async def _settled(agent: Agent, waited: set[str]) -> None:
    """Until the run the decisions resume has ended. The last decision in a panel starts it
    as a task that may not have begun yet (the agent still waits on the calls decided): that
    is waited for a moment only, as decisions made in code start no run."""
    began = time.monotonic()
    while agent.status == "generating" or (
            agent.status == "waiting" and time.monotonic() < began + SEEN_GRACE
            and any(call.id in waited for call in agent.pending)):
        await asyncio.sleep(POLL)


def _kernel_refuses_clicks() -> str:
    """Why a click cannot reach this cell while it waits ("" when it can, or when no kernel
    runs it: then no panel is live either)."""
    if getattr(_shell(), "kernel", None) is None:
        return ""
    # the installed version, read without importing ipykernel (a kernel's own package, not
    # one fragola_nb depends on)
    try:
        version = importlib.metadata.version("ipykernel")
    except importlib.metadata.PackageNotFoundError:
        return ""
    if version.split(".")[0].isdigit() and int(version.split(".")[0]) < 7:
        return (f"ipykernel {version} takes a click only once the cell has ended "
                "(ipykernel 7 takes it while the cell waits)")
    return ""


async def _nobody_sees(agent: Agent) -> str:
    """Why no person can click a panel of ``agent`` ("" when one is drawn): waits up to
    ``SEEN_GRACE`` after the newest panel was shown for a front end to draw it."""
    panels = _panels_of(agent)
    if not panels:
        return f"no live panel shows {agent.name!r} (%%fragola or %fragola_panel shows one)"
    deadline = max(panel.shown_at for panel in panels) + SEEN_GRACE
    while not any(panel.seen for panel in panels) and time.monotonic() < deadline:
        await asyncio.sleep(POLL)
    if any(panel.seen for panel in panels):
        return ""
    return ("no front end has drawn its panel (the notebook runs headless, as nbclient and "
            "nbconvert run it)")


def _panels_of(agent: Agent) -> list[Any]:
    """The live panels of ``agent`` that the loaded extension shows."""
    from fragola_nb.notebook.panel.view import AgentPanel

    views = getattr(getattr(_shell(), "_fragola_nb", None), "views", [])
    return [view for view in views if isinstance(view, AgentPanel) and view.agent is agent
            and not view._detached]


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()
