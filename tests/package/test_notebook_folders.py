"""The notebook layer's views keep their code in files: each anywidget reads its JavaScript and
CSS from files in its own folder (``notebook/panel/panel.js``, ``notebook/tree/tree.js``...),
and no Python module holds JavaScript in a string (the fork tree once did)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path

import anywidget

import fragola_nb
import fragola_nb.notebook

PACKAGE = Path(fragola_nb.__file__).parent
# What only JavaScript says: an ES module's export, a DOM call, a listener.
JAVASCRIPT = ("export default", "document.createElement(", ".addEventListener(")


def subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    return found.union(*(subclasses(sub) for sub in found))


def test_no_python_module_holds_javascript_in_a_string() -> None:
    held = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and any(
                    mark in node.value for mark in JAVASCRIPT):
                held.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert held == []


def test_each_view_reads_its_javascript_and_css_from_its_own_folder() -> None:
    for module in pkgutil.walk_packages(fragola_nb.notebook.__path__, "fragola_nb.notebook."):
        importlib.import_module(module.name)
    # the classes the modules define (an instance made earlier in the process has a class of
    # its own, traitlets' add_traits, with the same name and an ``_esm`` trait: not a view)
    views = {cls for cls in subclasses(anywidget.AnyWidget)
             if cls.__module__.startswith("fragola_nb.") and "_esm" in cls.__dict__
             and getattr(sys.modules[cls.__module__], cls.__name__, None) is cls}
    assert {cls.__name__ for cls in views} == {
        "AgentPanel", "CompareGrid", "DiffView", "EvalMatrix", "TreeView"}
    for cls in views:
        folder = Path(sys.modules[cls.__module__].__file__ or "").parent
        assert folder.parent.name == "notebook", cls  # a folder per widget
        assert not isinstance(cls._esm, str), cls  # a file (anywidget reads it), not a string
        assert str(cls._esm) in {p.read_text(encoding="utf-8") for p in folder.glob("*.js")}
        own_css = {p.read_text(encoding="utf-8") for p in folder.glob("*.css")}
        # the diff's view adds the static diff's rules (core.diffhtml) to its own file's
        assert own_css and any(css in str(cls._css) for css in own_css), cls
