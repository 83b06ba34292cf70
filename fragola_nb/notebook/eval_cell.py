"""Evaluations in a notebook: the watcher that shows ``agent.evaluate`` as a live matrix, and
the ``%%fragola AGENT --evaluate CASES`` cell.

``%load_ext fragola_nb`` calls ``watch``: an ``EvalWatcher`` goes into the experiments'
``EVALUATION_WATCHERS`` (the core imports nothing of the notebook layer). In a kernel it shows
an ``EvalView`` when an evaluation starts, and when an ``Evaluation`` is displayed later (the
cell that ran it gets a one-line note instead of a second matrix), as ``compare_cell`` does
for comparisons; the same ``CompareWatcher`` machinery keeps track of the live views.

``%%fragola [AGENT] --evaluate CASES [--variants V] [--graders G] [--repeat N] [--out VAR]``:
CASES, V and G name variables in the notebook (a list of cases, a dict of variants, one
grader or a list of them). The cases hold the inputs, so the cell holds only ``#``
comments (a terminal IPython needs one line under a cell magic) or nothing. ``--out VAR``
binds the ``Evaluation``::

    %%fragola tutor --evaluate cases --variants styles --graders checks --repeat 3 --out ev
    # styles against the geography cases
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from fragola_nb.base.errors import BadUsage
from fragola_nb.experiments.compare.run import check_variants
from fragola_nb.experiments.evaluate.cases import check_cases
from fragola_nb.experiments.evaluate.evaluation import EVALUATION_WATCHERS, Evaluation
from fragola_nb.experiments.graders.base import check_graders
from fragola_nb.notebook.cellargs import CellOptions, lookup
from fragola_nb.notebook.compare_cell import CompareWatcher
from fragola_nb.notebook.textviews import show
from fragola_nb.notebook.turn import TurnInterrupted

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.notebook.magics import Extension

__all__ = ["EvalCell", "EvalWatcher", "unwatch", "watch"]


class EvalWatcher(CompareWatcher):
    """Shows the evaluations of one shell (see the module's docstring)."""

    def _view(self, evaluation: Any) -> Any:
        from fragola_nb.notebook.eval_view import EvalView

        return EvalView(evaluation, namespace=self.ext.shell.user_ns)

    def _note(self, evaluation: Any) -> str:
        return f"Evaluation of {len(evaluation):,} run(s): the matrix above"


def watch(ext: Extension) -> None:
    """Show evaluations in ``ext``'s shell (called when the extension loads)."""
    EVALUATION_WATCHERS.append(EvalWatcher(ext))


def unwatch(ext: Extension) -> None:
    """Stop showing evaluations in ``ext``'s shell (called when the extension unloads)."""
    EVALUATION_WATCHERS[:] = [w for w in EVALUATION_WATCHERS
                              if getattr(w, "ext", None) is not ext]


class EvalCell:
    """``%%fragola [AGENT] --evaluate CASES``: prepare (sync), run (one coroutine), finish
    (sync), as a ``Turn``. An interrupt ends the cell as an error (``TurnInterrupted``)."""

    def __init__(self, ext: Extension, options: CellOptions, body: str) -> None:
        self.ext, self.options, self.body = ext, options, body
        self.result: Evaluation | None = None
        self.error: Exception | None = None
        self.interrupted = False

    def prepare(self) -> None:
        """Check everything before any fork is made or anything is sent."""
        ns, options = self.ext.shell.user_ns, self.options
        if any(line.strip() and not line.lstrip().startswith("#")
               for line in self.body.splitlines()):
            raise UsageError("--evaluate takes its inputs from the cases: the cell holds "
                             "only # comments")
        cases = lookup(options.evaluate or "", ns, "--evaluate")
        variants = (None if options.variants is None
                    else lookup(options.variants, ns, "--variants"))
        graders = () if options.graders is None else lookup(options.graders, ns, "--graders")
        self.agent: Agent = self.ext.resolve_agent(options.agent)
        if self.agent.status != "idle":
            raise UsageError(f"agent {self.agent.name!r} is {self.agent.status}: "
                             "evaluate it once it is idle")
        if variants is not None and not isinstance(variants, Mapping):
            raise UsageError(f"--variants takes a dict of variants (name -> overrides), "
                             f"not {type(variants).__name__}")
        for flag, name, check in (
                ("--evaluate", options.evaluate, lambda: check_cases(cases)),
                ("--variants", options.variants,
                 lambda: variants is None or check_variants(self.agent, variants)),
                ("--graders", options.graders, lambda: check_graders(graders))):
            try:
                check()
            except BadUsage as exc:
                raise UsageError(f"{flag} {name}: {exc}") from None
        self.cases, self.variants, self.graders = cases, variants, graders

    async def run(self) -> None:
        try:
            self.result = await self.agent.evaluate(
                self.cases, self.variants, self.graders, repeat=self.options.repeat or 1,
                progress=True)  # in a kernel the matrix is the progress, else the bar
        except (asyncio.CancelledError, KeyboardInterrupt):
            self.interrupted = True
        except Exception as exc:
            self.error = exc

    def finish(self) -> None:
        result, name = self.result, self.agent.name
        if result is not None:
            if not self.ext.widgets:
                show(result)  # a terminal: the text line (the matrix showed in a kernel)
            if self.options.out is not None:
                self.ext.shell.user_ns[self.options.out] = result
        if self.interrupted:
            raise TurnInterrupted(f"evaluate on {name!r} stopped by the interrupt")
        if self.error is not None:
            raise self.error
