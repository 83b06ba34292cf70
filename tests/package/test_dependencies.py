"""What pyproject.toml declares is what fragola_nb uses: a dependency nothing imports is a
package every user installs for nothing (``nest-asyncio`` was one)."""

from __future__ import annotations

import ast
import re
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return canonical(match.group())


def imported_modules() -> set[str]:
    """The top-level modules fragola_nb imports, at the top of a module or inside a function."""
    found: set[str] = set()
    for path in (ROOT / "fragola_nb").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def test_every_dependency_is_imported_or_pins_a_requirement_of_one_that_is() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    # [project] dependencies: the first array so named (a regex keeps this test free of tomllib)
    block = re.search(r"^dependencies = \[(.*?)^\]", pyproject, re.MULTILINE | re.DOTALL)
    assert block, "no dependencies array in pyproject.toml"
    declared = {requirement_name(r) for r in re.findall(r'"([^"]+)"', block.group(1))}
    assert {"openai", "pydantic", "ipython"} <= declared  # the array was read
    distributions = metadata.packages_distributions()
    used = {canonical(dist) for module in imported_modules()
            for dist in distributions.get(module, [])}
    pinned = {requirement_name(r) for dist in used & declared
              for r in metadata.requires(dist) or [] if "extra ==" not in r}
    assert declared - used - pinned == set()


def optional_features() -> set[str]:
    """The packages of the optional features ([project.optional-dependencies] lines written
    on one line, such as ``otel = ["opentelemetry-api...", "opentelemetry-sdk..."]``), not
    the test extras (written over several lines)."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return {requirement_name(r) for line in re.findall(r'^[a-z-]+ = \[(".*)\]', pyproject,
                                                       re.MULTILINE)
            for r in re.findall(r'"([^"]+)"', line)}


def test_every_package_fragola_nb_imports_is_declared() -> None:
    import sys

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", pyproject, re.MULTILINE | re.DOTALL)
    assert block, "no dependencies array in pyproject.toml"
    declared = {requirement_name(r) for r in re.findall(r'"([^"]+)"', block.group(1))}
    assert {"pandas", "opentelemetry-sdk", "ray"} <= optional_features()  # the extras were read
    declared |= optional_features()
    distributions = metadata.packages_distributions()
    undeclared = {
        module: distributions.get(module) for module in imported_modules()
        if module not in sys.stdlib_module_names and module != "fragola_nb"
        and not {canonical(dist) for dist in distributions.get(module, [])} & declared
    }
    assert undeclared == {}  # a package imported only because another one happens to pull it
