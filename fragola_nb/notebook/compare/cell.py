"""Comparisons in a notebook: the watcher that shows ``agent.compare`` as a live grid, and the
``%%fragola AGENT --compare VARIANTS`` cell.

``%load_ext fragola_nb`` calls ``watch``: a ``CompareWatcher`` goes into the core's
``compare.comparison.WATCHERS`` (the core imports nothing of the notebook layer). In a kernel
it shows a ``CompareView`` when a comparison starts, and when a ``Comparison`` is displayed
later (the cell that ran it, e.g. ``await agent.compare(...)`` as its last line, gets a
one-line note instead of a second grid). In a terminal IPython it shows nothing live; a
displayed ``Comparison`` prints its text table (``experiment.watcher.ExperimentWatcher``).

``%%fragola [AGENT] --compare VARIANTS [--out VAR] [--no-stream]``: VARIANTS names a dict of
variants in the notebook; the cell's text (with ``{var}`` interpolation) is the message. The
grid shows live; ``--out VAR`` binds the ``Comparison`` (without it, the forks are still in
``AGENT.forks`` and the fork tree). Variants stream unless ``--no-stream`` or a variant's own
``model_settings`` say otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from fragola_nb.experiments.compare.comparison import WATCHERS, Comparison
from fragola_nb.experiments.compare.run import check_variants
from fragola_nb.notebook.cellargs import interpolate, lookup
from fragola_nb.notebook.experiment.cell import ExperimentCell, checked, variants_dict
from fragola_nb.notebook.experiment.watcher import ExperimentWatcher
from fragola_nb.notebook.textviews import say

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["CompareCell", "CompareWatcher", "unwatch", "watch"]


class CompareWatcher(ExperimentWatcher):
    """Shows the comparisons of one shell (see the module's docstring)."""

    watchers = WATCHERS

    def _view(self, comparison: Any) -> Any:
        from fragola_nb.notebook.compare.view import CompareView

        return CompareView(comparison, namespace=self.ext.shell.user_ns)

    def _note(self, comparison: Any) -> str:
        return f"Comparison of {len(comparison)} variant(s): the grid above"


watch = CompareWatcher.watch
unwatch = CompareWatcher.unwatch


class CompareCell(ExperimentCell):
    """``%%fragola [AGENT] --compare VARIANTS`` (``ExperimentCell``). An interrupt ends the
    cell as an error, the variants that finished kept in their forks."""

    result: Comparison | None

    def prepare(self) -> None:
        """Check everything before any fork is made."""
        ns, options = self.ext.shell.user_ns, self.options
        self.text = interpolate(self.body, ns).strip()
        if not self.text:
            raise UsageError("the cell is empty: write the message below the %%fragola line")
        variants = variants_dict(lookup(options.compare or "", ns, "--compare"), "--compare")
        self.agent: Agent = self.idle_agent("compare")
        checked("--compare", options.compare, lambda: check_variants(self.agent, variants))
        self.variants = {name: _streaming(self.agent, override, options.stream)
                         for name, override in variants.items()}

    async def _run(self) -> Comparison:
        return await self.agent.compare(self.text, self.variants)

    def _ended(self, result: Comparison) -> None:
        waiting = [variant for variant, fork in result.items() if fork.status == "waiting"]
        if waiting:
            name = self.agent.name
            how = ("click its name in the grid to open its panel" if self.ext.widgets else
                   f"decide with {name}.forks[...].approve(id) (or reject/inject), then "
                   "step()")
            say(f"fragola_nb: {', '.join(waiting)} wait(s) for a decision: {how}")

    def _stopped(self) -> str:
        name = self.agent.name
        return (f"compare on {name!r} stopped by the interrupt; the variants that finished "
                f"are kept in {name}.forks")


def _streaming(agent: Agent, override: Any, stream: bool) -> dict[str, Any]:
    """``override`` with ``stream`` set, unless the agent or the variant sets it."""
    out = dict(override)
    settings = dict(out.get("model_settings") or {})
    if "stream" not in settings and "stream" not in agent.options.model_settings:
        settings["stream"] = stream
        out["model_settings"] = settings
    return out
