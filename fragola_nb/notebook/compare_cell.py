"""Comparisons in a notebook: the watcher that shows ``agent.compare`` as a live grid, and the
``%%fragola AGENT --compare VARIANTS`` cell.

``%load_ext fragola_nb`` calls ``watch``: a ``CompareWatcher`` goes into the core's
``compare.comparison.WATCHERS`` (the core imports nothing of the notebook layer). In a kernel
it shows a ``CompareView`` when a comparison starts, and when a ``Comparison`` is displayed
later (the cell that ran it, e.g. ``await agent.compare(...)`` as its last line, gets a
one-line note instead of a second grid). In a terminal IPython it shows nothing live; a
displayed ``Comparison`` prints its text table.

``%%fragola [AGENT] --compare VARIANTS [--out VAR] [--no-stream]``: VARIANTS names a dict of
variants in the notebook; the cell's text (with ``{var}`` interpolation) is the message. The
grid shows live; ``--out VAR`` binds the ``Comparison`` (without it, the forks are still in
``AGENT.forks`` and the fork tree). Variants stream unless ``--no-stream`` or a variant's own
``model_settings`` say otherwise.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.render import escape
from fragola_nb.experiments.compare.comparison import WATCHERS, Comparison
from fragola_nb.experiments.compare.run import check_variants
from fragola_nb.notebook.cellargs import CellOptions, interpolate, lookup
from fragola_nb.notebook.textviews import say, show
from fragola_nb.notebook.turn import TurnInterrupted

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.notebook.magics import Extension

__all__ = ["CompareCell", "CompareWatcher", "unwatch", "watch"]


class CompareWatcher:
    """Shows the comparisons of one shell (see the module's docstring)."""

    def __init__(self, ext: Extension) -> None:
        self.ext = ext
        self._live: dict[int, tuple[weakref.ref[Comparison], Any, int]] = {}

    def started(self, comparison: Comparison) -> bool:
        """Show ``comparison`` live; whether it was shown (a kernel with widgets)."""
        if not self.ext.widgets:
            return False
        view = self._view(comparison)
        self._live = {k: v for k, v in self._live.items() if v[0]() is not None}
        self._live[id(comparison)] = (weakref.ref(comparison), view, self._cell())
        handle = self.ext.show_view(view)

        def ended(run: Any) -> None:
            # The display's static table (nbconvert, GitHub) becomes the final one.
            if run is None:
                handle.update(view)

        comparison.subscribe(ended)
        return True

    def mimebundle(self, comparison: Comparison) -> dict[str, Any] | None:
        if not self.ext.widgets:
            return None
        live = self._live.get(id(comparison))
        if live is not None and live[0]() is comparison and live[2] == self._cell():
            # Every form, so IPython adds no second table below the live grid.
            line = self._note(comparison)
            return {"text/plain": line, "text/html": f"<small>{escape(line)}</small>"}
        view = self._view(comparison)
        self.ext.views.append(view)  # detached on unload, as the magics' views are
        bundle: dict[str, Any] = view._repr_mimebundle_()
        return bundle

    def _view(self, comparison: Any) -> Any:
        # The view of one experiment: EvalWatcher (eval_cell) shows an evaluation's matrix.
        from fragola_nb.notebook.compare_view import CompareView

        return CompareView(comparison, namespace=self.ext.shell.user_ns)

    def _note(self, comparison: Any) -> str:
        return f"Comparison of {len(comparison)} variant(s): the grid above"

    def _cell(self) -> int:
        return int(getattr(self.ext.shell, "execution_count", 0) or 0)


def watch(ext: Extension) -> None:
    """Show comparisons in ``ext``'s shell (called when the extension loads)."""
    WATCHERS.append(CompareWatcher(ext))


def unwatch(ext: Extension) -> None:
    """Stop showing comparisons in ``ext``'s shell (called when the extension unloads)."""
    WATCHERS[:] = [w for w in WATCHERS if getattr(w, "ext", None) is not ext]


class CompareCell:
    """``%%fragola [AGENT] --compare VARIANTS``: prepare (sync), run (one coroutine), finish
    (sync), as a ``Turn``. An interrupt ends the cell as an error (``TurnInterrupted``), the
    variants that finished kept in their forks; so does an error of the run itself."""

    def __init__(self, ext: Extension, options: CellOptions, body: str) -> None:
        self.ext, self.options, self.body = ext, options, body
        self.result: Comparison | None = None
        self.error: Exception | None = None
        self.interrupted = False

    def prepare(self) -> None:
        """Check everything before any fork is made."""
        ns, options = self.ext.shell.user_ns, self.options
        self.text = interpolate(self.body, ns).strip()
        if not self.text:
            raise UsageError("the cell is empty: write the message below the %%fragola line")
        variants = lookup(options.compare or "", ns, "--compare")
        if not isinstance(variants, Mapping):
            raise UsageError(f"--compare takes a dict of variants (name -> overrides), "
                             f"not {type(variants).__name__}")
        self.agent: Agent = self.ext.resolve_agent(options.agent)
        if self.agent.status != "idle":
            raise UsageError(f"agent {self.agent.name!r} is {self.agent.status}: "
                             "compare it once it is idle")
        try:
            check_variants(self.agent, variants)
        except BadUsage as exc:
            raise UsageError(f"--compare {options.compare}: {exc}") from None
        self.variants = {name: _streaming(self.agent, override, options.stream)
                         for name, override in variants.items()}

    async def run(self) -> None:
        try:
            self.result = await self.agent.compare(self.text, self.variants)
        except (asyncio.CancelledError, KeyboardInterrupt):
            self.interrupted = True  # each fork repaired its history; finish says so
        except Exception as exc:
            self.error = exc

    def finish(self) -> None:
        result, name = self.result, self.agent.name
        if result is not None:
            if not self.ext.widgets:
                show(result)  # a terminal: the text table (the grid showed in a kernel)
            waiting = [variant for variant, fork in result.items() if fork.status == "waiting"]
            if waiting:
                how = ("click its name in the grid to open its panel" if self.ext.widgets else
                       f"decide with {name}.forks[...].approve(id) (or reject/inject), then "
                       "step()")
                say(f"fragola_nb: {', '.join(waiting)} wait(s) for a decision: {how}")
            if self.options.out is not None:
                self.ext.shell.user_ns[self.options.out] = result
        if self.interrupted:
            raise TurnInterrupted(f"compare on {name!r} stopped by the interrupt; the variants "
                                  f"that finished are kept in {name}.forks")
        if self.error is not None:
            raise self.error


def _streaming(agent: Agent, override: Any, stream: bool) -> dict[str, Any]:
    """``override`` with ``stream`` set, unless the agent or the variant sets it."""
    out = dict(override)
    settings = dict(out.get("model_settings") or {})
    if "stream" not in settings and "stream" not in agent.options.model_settings:
        settings["stream"] = stream
        out["model_settings"] = settings
    return out
