"""Evaluations in a notebook: the watcher that shows ``agent.evaluate`` as a live matrix, and
the ``%%fragola AGENT --evaluate CASES`` cell.

``%load_ext fragola_nb`` calls ``watch``: an ``EvalWatcher`` goes into the experiments'
``EVALUATION_WATCHERS`` (the core imports nothing of the notebook layer). In a kernel it shows
an ``EvalView`` when an evaluation starts, and when an ``Evaluation`` is displayed later (the
cell that ran it gets a one-line note instead of a second matrix), as ``compare.cell`` does
for comparisons: both are an ``experiment.watcher.ExperimentWatcher``.

``%%fragola [AGENT] --evaluate CASES [--variants V] [--graders G] [--repeat N] [--out VAR]``:
CASES, V and G name variables in the notebook (a list of cases, a dict of variants, one
grader or a list of them). The cases hold the inputs, so the cell holds only ``#``
comments (a terminal IPython needs one line under a cell magic) or nothing. ``--out VAR``
binds the ``Evaluation``::

    %%fragola tutor --evaluate cases --variants styles --graders checks --repeat 3 --out ev
    # styles against the geography cases
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from fragola_nb.experiments.compare.run import check_variants
from fragola_nb.experiments.evaluate.cases import check_cases
from fragola_nb.experiments.evaluate.evaluation import EVALUATION_WATCHERS, Evaluation
from fragola_nb.experiments.graders.base import check_graders
from fragola_nb.notebook.cellargs import lookup
from fragola_nb.notebook.experiment.cell import ExperimentCell, checked, variants_dict
from fragola_nb.notebook.experiment.watcher import ExperimentWatcher

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["EvalCell", "EvalWatcher", "unwatch", "watch"]


class EvalWatcher(ExperimentWatcher):
    """Shows the evaluations of one shell (see the module's docstring)."""

    watchers = EVALUATION_WATCHERS
    STATIC_LATER = True

    def _view(self, evaluation: Any) -> Any:
        from fragola_nb.notebook.evaluate.view import EvalView

        return EvalView(evaluation, namespace=self.ext.shell.user_ns)

    def _note(self, evaluation: Any) -> str:
        return f"Evaluation of {len(evaluation):,} run(s): the matrix above"


watch = EvalWatcher.watch
unwatch = EvalWatcher.unwatch


class EvalCell(ExperimentCell):
    """``%%fragola [AGENT] --evaluate CASES`` (``ExperimentCell``)."""

    result: Evaluation | None

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
        self.agent: Agent = self.idle_agent("evaluate")
        if variants is not None:
            variants = variants_dict(variants, "--variants")
        checked("--evaluate", options.evaluate, lambda: check_cases(cases))
        checked("--variants", options.variants,
                lambda: variants is None or check_variants(self.agent, variants))
        checked("--graders", options.graders, lambda: check_graders(graders))
        self.cases, self.variants, self.graders = cases, variants, graders

    async def _run(self) -> Evaluation:
        return await self.agent.evaluate(
            self.cases, self.variants, self.graders, repeat=self.options.repeat or 1,
            progress=True)  # in a kernel the matrix is the progress, else the bar

    def _stopped(self) -> str:
        return f"evaluate on {self.agent.name!r} stopped by the interrupt"
