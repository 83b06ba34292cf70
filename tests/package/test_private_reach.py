"""Private reach (issue 35): at most 20 reads or writes, in the whole package, of a private
attribute (``x._name``) that another module of fragola_nb defines.

An AST count, refined from /work/tools/reach.py: ``self._name``/``cls._name`` never count; a
name this module defines (an assignment to ``self._name``, a class attribute, a function or
class, a module global) is its own; names that end with ``_`` are protocols
(``_repr_html_``, ``_repr_mimebundle_``); and a name no module of ours defines belongs to a
third-party object (IPython's ``shell._showtraceback``, tqdm's ``bar._time``), not to us."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "fragola_nb"
LIMIT = 20


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and not name.endswith("_")


def _defined(tree: ast.Module) -> set[str]:
    """The private names a module defines."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in ("self", "cls") and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {name for name in names if _private(name)}


def reaches(root: Path = ROOT) -> list[str]:
    """Each ``path:line: expression`` reaching a private attribute another module defines."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8"))
             for path in sorted(root.rglob("*.py"))}
    defined = {path: _defined(tree) for path, tree in trees.items()}
    owners: dict[str, set[Path]] = defaultdict(set)
    for path, names in defined.items():
        for name in names:
            owners[name].add(path)
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not _private(node.attr):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr in defined[path] or not owners[node.attr]:
                continue  # its own, or a third-party object's
            found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_private_reach_is_at_most_twenty() -> None:
    found = reaches()
    assert len(found) <= LIMIT, (
        f"{len(found)} reads/writes of another module's private attributes (at most {LIMIT}):\n"
        + "\n".join(found))


def test_the_count_sees_a_reach(tmp_path: Path) -> None:
    """The counter itself: a module reading another's private attribute counts once; its own
    names, protocol names and names no module defines do not."""
    (tmp_path / "owner.py").write_text("class A:\n    def __init__(self):\n        self._x = 1\n")
    (tmp_path / "user.py").write_text(
        "def f(a, shell):\n    return a._x, a._repr_html_, shell._showtraceback\n")
    assert reaches(tmp_path) == [f"{tmp_path.name}/user.py:2: a._x"]
