"""Module paths of earlier versions, still importable: ``fragola_nb.scripted`` is
``fragola_nb.models.scripted``, ``fragola_nb.agent`` is ``fragola_nb.core.agent``, and so on.

The package is built in layers, one folder each (``base`` < ``models`` < ``core`` <
``sessions`` | ``presets`` < ``experiments`` < ``notebook``; docs/architecture.md).
Programs written against the flat layout of 0.x import ``fragola_nb.scripted``,
``fragola_nb.mcptools`` or ``fragola_nb.hooks``; those names stay importable for this version.
An old name is an alias, not a copy: ``import fragola_nb.agent`` gives the very module
``fragola_nb.core.agent`` (one class ``Agent``, one set of module globals), because a finder put
first on ``sys.meta_path`` answers for the old names and nothing else.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

# old module path -> where it lives now; a moved package brings its submodules along
# (``fragola_nb.scripted.server`` is ``fragola_nb.models.scripted.server``).
MOVED: dict[str, str] = {
    **{f"fragola_nb.{name}": f"fragola_nb.base.{name}"
       for name in ("errors", "redact", "render", "textfile", "sync", "awake", "checks")},
    "fragola_nb.model_client": "fragola_nb.models.client",
    "fragola_nb.scripted": "fragola_nb.models.scripted",
    "fragola_nb.recording": "fragola_nb.models.recording",
    **{f"fragola_nb.{name}": f"fragola_nb.models.{name}"
       for name in ("local", "localprocess", "localchat")},
    **{f"fragola_nb.{name}": f"fragola_nb.core.{name}"
       for name in ("agent", "fragola", "runloop", "driver", "events", "tools", "schemas",
                    "state", "stores", "usage", "jsonmode", "jsonshapes", "context", "history",
                    "instructions", "options", "payloads", "probes", "listening",
                    "forking", "branchdiff", "diffhtml", "timing")},
    **{f"fragola_nb.{name}": f"fragola_nb.presets.{name}"
       for name in ("guardrails", "orchestration", "mcptools", "tracing", "hooks")},
    "fragola_nb.experiments.raybackend": "fragola_nb.experiments.ray.backend",
    "fragola_nb.experiments.rayrun": "fragola_nb.experiments.ray.run",
    "fragola_nb.experiments.rayworker": "fragola_nb.experiments.ray.worker",
}


def new_name(old: str) -> str | None:
    """Where the module ``old`` lives now, or None when it did not move."""
    for length in range(old.count(".") + 1, 1, -1):
        prefix = ".".join(old.split(".")[:length])
        if prefix in MOVED:
            return MOVED[prefix] + old[len(prefix):]
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, module: ModuleType) -> None:
        self.module, self.spec = module, module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has just set the module's __spec__ to the alias's spec: the module
        # keeps its own (reloading, pickling and tracebacks name where it lives).
        module.__spec__ = self.spec


class _OldPaths(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("fragola_nb."):
            return None
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(importlib.import_module(new)))


def install() -> None:
    """Answer for the old names (once, first on ``sys.meta_path``)."""
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OldPaths())
