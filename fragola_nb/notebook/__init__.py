"""The notebook layer: ``%load_ext fragola_nb``.

Loading registers the ``%%fragola`` cell magic, the ``%fragola_panel``, ``%fragola_tree``,
``%fragola_agents``, ``%fragola_reset`` and ``%fragola_local`` line magics, and the input
transformer that lets a ``%%fragola`` cell run on the kernel's event loop (see ``magics``).
A ``fragola_nb.diff(a, b)`` shows as its paged view (``diff.view``). Loading twice is harmless;
``%unload_ext fragola_nb`` removes all of it and detaches the live panels. While loaded, a cell
interrupted while it awaits an agent ends in one line (``interrupts``).
``wait_for_decisions(agent)`` is a cell's wait for a person's click on a paused turn
(``decisions``).

This package imports IPython and ipywidgets; the core (``fragola_nb`` itself) never imports it.
"""

from __future__ import annotations

from typing import Any

from fragola_nb.core.branchdiff import BranchDiff
from fragola_nb.notebook import interrupts
from fragola_nb.notebook.compare import cell as compare_cell
from fragola_nb.notebook.decisions import wait_for_decisions
from fragola_nb.notebook.diff import view as diffview
from fragola_nb.notebook.evaluate import cell as eval_cell
from fragola_nb.notebook.magics import Extension, FragolaMagics

__all__ = ["load_ipython_extension", "unload_ipython_extension", "wait_for_decisions"]

_ATTR = "_fragola_nb"  # the shell attribute the transformed cells call


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics and the transformer on ``ipython`` (once)."""
    if isinstance(getattr(ipython, _ATTR, None), Extension):
        return
    ext = Extension(ipython)
    setattr(ipython, _ATTR, ext)
    ipython.register_magics(FragolaMagics(ipython, ext))
    ipython.input_transformers_cleanup.append(ext.transform)
    compare_cell.watch(ext)  # agent.compare shows its grid (the core has a hook, no import)
    eval_cell.watch(ext)  # agent.evaluate shows its matrix (the same kind of hook)
    interrupts.install(ipython)  # an interrupted `await agent...` cell ends in one line
    # fragola_nb.diff(a, b) in a cell: the paged view (the core's _repr_html_ elsewhere)
    ipython.display_formatter.mimebundle_formatter.for_type(BranchDiff, diffview.shower(ext))


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the magics and the transformer; detach every live panel."""
    ext = getattr(ipython, _ATTR, None)
    if not isinstance(ext, Extension):
        return
    cleanup = ipython.input_transformers_cleanup
    cleanup[:] = [t for t in cleanup if getattr(t, "__self__", None) is not ext]
    magics = ipython.magics_manager.magics
    for kind, names in FragolaMagics.magics.items():
        for name in names:
            magics[kind].pop(name, None)
    ipython.magics_manager.registry.pop(FragolaMagics.__name__, None)
    compare_cell.unwatch(ext)
    eval_cell.unwatch(ext)
    interrupts.uninstall(ipython)
    ipython.display_formatter.mimebundle_formatter.type_printers.pop(BranchDiff, None)
    ext.detach_all()
    delattr(ipython, _ATTR)
