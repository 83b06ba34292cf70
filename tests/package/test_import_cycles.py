"""No run-time import circle in fragola_nb (issue 35, item 6): imports inside functions count,
those under ``if TYPE_CHECKING:`` do not. The one allowed edge back up is the façade:
``core.facade`` calls into ``experiments`` (``agent.compare``, ``batch``, ``evaluate``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FACADE = ("fragola_nb.core.facade", "fragola_nb.experiments")


def modules(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted((root / "fragola_nb").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def owner(name: str, known: dict[str, Path]) -> str | None:
    """The module of ours that ``name`` (a module, or a name in one) lives in."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ours that ``name`` imports at run time."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(node) for test in ast.walk(tree)
                   if isinstance(test, ast.If) and "TYPE_CHECKING" in ast.unparse(test.test)
                   for statement in test.body for node in ast.walk(statement)}
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [base])])
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    found = {owner(target, known) for target in targets if target.startswith("fragola_nb")}
    if name == FACADE[0]:
        found = {m for m in found if m is not None and not m.startswith(FACADE[1])}
    return {m for m in found if m is not None and m != name}


def circles(root: Path) -> list[list[str]]:
    """Each group of modules that import one another, round and round (Tarjan's strongly
    connected components with more than one module)."""
    known = modules(root)
    edges = {name: imported(name, path, known) for name, path in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for other in sorted(edges[name]):
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            group = [stack.pop()]
            while group[-1] != name:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for name in sorted(edges):
        if name not in index:
            visit(name)
    return found


def test_no_import_circle_but_the_facade() -> None:
    assert circles(ROOT) == []


def test_an_import_inside_a_function_makes_a_circle(tmp_path: Path) -> None:
    package = tmp_path / "fragola_nb"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def late() -> None:\n    from fragola_nb import high\n")
    (package / "high.py").write_text("from fragola_nb import typed\n"
                                     "from fragola_nb.low import late\n")
    (package / "typed.py").write_text("from typing import TYPE_CHECKING\n"
                                      "if TYPE_CHECKING:\n    from fragola_nb import high\n")

    assert circles(tmp_path) == [["fragola_nb.high", "fragola_nb.low"]]
