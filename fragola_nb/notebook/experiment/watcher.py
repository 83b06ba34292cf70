"""``ExperimentWatcher``: shows the experiments of one shell live, each once.

``%load_ext fragola_nb`` puts a watcher of each kind in the experiments' own list
(``experiments.compare.WATCHERS``, ``experiments.evaluate.EVALUATION_WATCHERS``: the core and
the experiments import nothing of the notebook layer). In a kernel it shows an experiment's
live view when the experiment starts, and again when the experiment is displayed later; the
cell that ran it (``await agent.compare(...)`` as its last line) gets a one-line note instead
of a second view. In a terminal IPython it shows nothing live, and a displayed experiment
prints its text table. A kind says the list it goes in (``watchers``), how its view is made
and what its note says (``compare.cell.CompareWatcher``, ``evaluate.cell.EvalWatcher``);
``Kind.watch(ext)`` and ``Kind.unwatch(ext)`` put a watcher of ``ext``'s shell in that list and
take it out, when the extension loads and unloads.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Any, ClassVar

from fragola_nb.base.render import escape

if TYPE_CHECKING:
    from fragola_nb.notebook.magics import Extension

__all__ = ["ExperimentWatcher", "unwatch"]


class ExperimentWatcher:
    """Shows the experiments of one shell (see the module's docstring)."""

    watchers: ClassVar[list[Any]]
    """The experiments' own list this kind goes in (the experiments call each one in it)."""
    STATIC_LATER = False
    """The final static table drawn right after the run returns, not before."""

    @classmethod
    def watch(cls, ext: Extension) -> None:
        """Show this kind's experiments in ``ext``'s shell (when the extension loads)."""
        cls.watchers.append(cls(ext))

    @classmethod
    def unwatch(cls, ext: Extension) -> None:
        """Stop showing them in ``ext``'s shell (when the extension unloads)."""
        unwatch(cls.watchers, ext)

    def __init__(self, ext: Extension) -> None:
        self.ext = ext
        # id(experiment) -> (the experiment, its live view, the cell it started in)
        self._live: dict[int, tuple[weakref.ref[Any], Any, int]] = {}

    def started(self, experiment: Any) -> bool:
        """Show ``experiment`` live; whether it was shown (a kernel with widgets)."""
        if not self.ext.widgets:
            return False
        view = self._view(experiment)
        self._live = {k: v for k, v in self._live.items() if v[0]() is not None}
        self._live[id(experiment)] = (weakref.ref(experiment), view, self._cell())
        handle = self.ext.show_view(view)

        def ended(part: Any) -> None:
            # The display's static table (nbconvert, GitHub) becomes the final one; an
            # evaluation's right after the run returns (its text and table say the verdicts,
            # permutation tests: see docs/evaluation-view.md), from the loop.
            if part is None:
                loop = _running_loop() if self.STATIC_LATER else None
                if loop is None:
                    handle.update(view)
                else:
                    loop.call_soon(handle.update, view)

        experiment.subscribe(ended)
        return True

    def mimebundle(self, experiment: Any) -> dict[str, Any] | None:
        """How ``experiment`` displays: its live view, or the note that it is shown above."""
        if not self.ext.widgets:
            return None
        live = self._live.get(id(experiment))
        if live is not None and live[0]() is experiment and live[2] == self._cell():
            # Every form, so IPython adds no second table below the live view.
            line = self._note(experiment)
            return {"text/plain": line, "text/html": f"<small>{escape(line)}</small>"}
        view = self._view(experiment)
        self.ext.views.append(view)  # detached on unload, as the magics' views are
        bundle: dict[str, Any] = view._repr_mimebundle_()
        return bundle

    def _view(self, experiment: Any) -> Any:
        """The live view of ``experiment`` (made when it is shown: the views import
        anywidget, the magics do not)."""
        raise NotImplementedError

    def _note(self, experiment: Any) -> str:
        """The line the cell that ran ``experiment`` shows below its live view."""
        raise NotImplementedError

    def _cell(self) -> int:
        return int(getattr(self.ext.shell, "execution_count", 0) or 0)


def unwatch(watchers: list[Any], ext: Extension) -> None:
    """Take ``ext``'s watchers out of ``watchers`` (when the extension unloads)."""
    watchers[:] = [w for w in watchers if getattr(w, "ext", None) is not ext]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
