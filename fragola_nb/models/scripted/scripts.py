"""One agent's own script on a scripted model, rewindable.

A teacher gives one agent its answers and lets every other agent talk to the demo brain::

    fragola = Fragola.scripted()
    tutor = fragola.agent(name="tutor", tools=[add])
    script = fragola.script(tutor, [tool_calls(call("add", {"x": 2, "y": 3})), reply("5")])
    ...                    # tutor gets these two answers, in order; other agents the brain
    script.rewind()        # start it over: re-running a lesson gives the same answers

The server learns whose request it is from one header, ``x-fragola-script``, that
``Fragola.script`` puts in the agent's ``model_settings["extra_headers"]`` (the route every
request of the agent takes, with no change to how requests are sent). Its value is the agent's
id. A fork copies its parent's settings, so it goes on with its parent's script (one shared
list of answers) until it is given its own. A header naming no script of this server (a
session saved elsewhere) is ignored: that request is answered as if it had none.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from fragola_nb.models.scripted.items import Item, ScriptEntry, fail

__all__ = ["SCRIPT_HEADER", "AgentScript", "run_out"]

SCRIPT_HEADER = "x-fragola-script"
"""The request header that names the script (the agent id) a request is answered from."""


def run_out(who: str, count: int, where: str) -> Item:
    """The answer to a request past the end of a script: one line that says what to do,
    HTTP 409 with ``x-should-retry: false`` (retrying cannot help, so the client must not)."""
    if count == 0:  # nothing was scripted: there is no "all" to have used, no cell to re-run
        message = (f"{who} has no scripted answer: give it a script, or pass brain=demo_brain "
                   f"to {where} to answer every request")
    else:
        answers = "answer" if count == 1 else "answers"
        message = (f"{who} used all {count} scripted {answers}: re-run the cell that builds "
                   f"the script, or pass brain=demo_brain to {where} to answer after it")
    return fail(409, message, code="script_exhausted", headers={"x-should-retry": "false"})


class AgentScript:
    """The answers of one agent (and its forks), in order; made by ``Fragola.script``.

    ``brain``, when given, answers every request after the last entry; without one such a
    request fails with one line naming the agent and the fix. Thread-safe: the server's
    handler threads take entries from it.
    """

    def __init__(
        self,
        agent_name: str,
        entries: Iterable[ScriptEntry],
        *,
        brain: Callable[[dict[str, Any]], Item] | None = None,
    ) -> None:
        self.agent_name = agent_name
        self.entries: tuple[ScriptEntry, ...] = tuple(entries)
        self.brain = brain
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        """How many entries have answered a request since the start (or ``rewind``)."""
        return self._used

    @property
    def remaining(self) -> int:
        """How many entries are left."""
        return len(self.entries) - self._used

    def rewind(self) -> None:
        """Start over: the next request gets the first entry again."""
        with self._lock:
            self._used = 0

    def next_entry(self) -> ScriptEntry:
        """The entry for the request that just arrived (the brain, or the run-out error,
        once the entries are used up)."""
        with self._lock:
            if self._used < len(self.entries):
                self._used += 1
                return self.entries[self._used - 1]
        if self.brain is not None:
            return self.brain
        return run_out(f"agent {self.agent_name!r}", len(self.entries), "fragola.script(...)")

    def __repr__(self) -> str:
        return (f"AgentScript(agent={self.agent_name!r}, used={self._used}, "
                f"remaining={self.remaining})")
