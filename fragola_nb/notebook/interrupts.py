"""An interrupted cell that awaited an agent ends in one line, not 60.

ipykernel answers the Interrupt button by cancelling the running cell: a cell that awaits an
agent (``await agent.user_message(...)``, ``compare``, ``batch``...) then fails with a
``CancelledError`` whose traceback runs through the run loop, the ``openai`` client and
httpx. The agent has already repaired its history, so what the person needs is one line
saying so. While the extension is loaded, IPython's custom exception hook shows that line
for an interrupt that went through an agent; any other interrupt, and ``%tb`` afterwards,
show IPython's own full traceback. A custom hook the user set first is left alone.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

from fragola_nb.base.render import visible
from fragola_nb.core.agent import Agent

__all__ = ["install", "uninstall"]

INTERRUPTS = (asyncio.CancelledError, KeyboardInterrupt)


def install(shell: Any) -> None:
    """Show an agent's interrupt in one line, unless another hook is set already."""
    if getattr(shell, "custom_exceptions", None) == ():
        shell.set_custom_exc(INTERRUPTS, _one_line)


def uninstall(shell: Any) -> None:
    if getattr(shell, "custom_exceptions", None) == INTERRUPTS:
        shell.set_custom_exc((), None)


def _one_line(shell: Any, etype: type[BaseException], value: BaseException,
              tb: TracebackType | None, tb_offset: int | None = None) -> list[str]:
    """IPython's custom exception hook: it shows the error itself (the return value is not
    shown). An interrupt that did not go through an agent, or an error of ours that has its
    own short form (``TurnInterrupted``), goes the usual way."""
    agent = interrupted_agent(tb)
    if agent is None or hasattr(value, "_render_traceback_"):
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return []
    shell._get_exc_info((etype, value, tb))  # what %tb shows next: the full traceback
    lines = [visible(f"Interrupted: {agent.name!r} stopped; its history is kept valid"),
             "(%tb shows the full traceback)"]
    shell._showtraceback(etype, value, lines)
    return lines


def interrupted_agent(tb: TracebackType | None) -> Agent | None:
    """The agent the interrupted cell called: the outermost fragola_nb frame's ``self`` or
    ``agent``."""
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals.get("__name__", "").startswith("fragola_nb."):
            for name in ("self", "agent"):
                value = frame.f_locals.get(name)
                if isinstance(value, Agent):
                    return value
        tb = tb.tb_next
    return None
