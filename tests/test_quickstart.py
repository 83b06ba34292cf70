"""The README's first command, ``bash scripts/quickstart.sh``, installs what the quickstart
needs and no more: the package, a kernel, nbclient and JupyterLab (the "quickstart" extra),
not the test suite's toolchain. It once installed the "test" extra: 87 s and a 1.2 GB .venv
(Ray, Playwright, mkdocs, mypy...) to run one notebook offline. ``bash scripts/test.sh``
(what CI runs) keeps the whole set.

The last test runs the script as a newcomer does, from a clean copy of the checkout (the files
git tracks or would add), with a fresh .venv.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from support.wheel_install import ROOT, clean_env, tracked

HEAVY = {"ray", "playwright", "mkdocs", "mkdocs-material", "mkdocstrings", "mkdocs-jupyter",
         "mypy", "ruff", "pytest", "hypothesis", "pandas", "llama-cpp-python", "mcp",
         "opentelemetry-sdk", "import-linter", "build", "twine", "notebook"}
"""What the test suite, the docs site and the optional features need, the quickstart not."""
MAX_MB = 400
"""A few hundred MB: the .venv made with the "test" extra is 1.2 GB."""


def _name(requirement: str) -> str:
    """The normalised project name of a requirement string (``"a_b[x]>=1"`` -> ``"a-b"``)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def requirements(extra: str) -> set[str]:
    """The names pyproject.toml makes ``pip install -e .[extra]`` ask for: the dependencies,
    then the extra's, with ``fragola_nb[other]`` followed into the other extras."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    extras, names, todo = project["optional-dependencies"], set(), [extra]
    names |= {_name(r) for r in project["dependencies"]}
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for requirement in extras[name]:
            if _name(requirement) == "fragola-nb":
                todo += re.findall(r"[\w-]+", requirement.split("[", 1)[1].split("]")[0])
            else:
                names.add(_name(requirement))
    return names


def extra_of(script: str) -> str:
    """The extra a script's ``bash scripts/setup.sh`` installs (setup.sh's default: test)."""
    text = (ROOT / "scripts" / script).read_text(encoding="utf-8")
    calls = re.findall(r"^(.*)bash scripts/setup\.sh", text, re.M)
    assert calls, f"{script} does not run scripts/setup.sh"
    found = re.search(r"EXTRAS=\"?([\w,-]+)", calls[0])
    return found.group(1) if found else "test"


def test_the_quickstart_installs_no_test_tool() -> None:
    extra = extra_of("quickstart.sh")
    wanted = set().union(*(requirements(name) for name in extra.split(",")))

    assert sorted(wanted & HEAVY) == []
    assert {"ipykernel", "nbclient", "nbformat", "jupyterlab"} <= wanted
    # What the quickstart runs needs nothing else: its runner imports nbclient and nbformat.
    runner = (ROOT / "scripts" / "run_notebook.py").read_text(encoding="utf-8")
    imported = set(re.findall(r"^(?:from|import) (\w+)", runner, re.M))
    assert imported - {"__future__", "re", "sys", "html", "pathlib", "typing"} == {
        "nbformat", "nbclient"}


def test_the_test_command_keeps_the_whole_set() -> None:
    assert extra_of("test.sh") == "test"
    assert HEAVY - {"llama-cpp-python"} <= requirements("test")  # "local": test.sh's stage 3
    assert requirements("quickstart") <= requirements("test")  # test.sh after it adds only


@pytest.mark.timeout(900)
def test_the_quickstart_runs_from_a_clean_copy(tmp_path: Path) -> None:
    """``bash scripts/quickstart.sh`` in a fresh copy: it makes .venv, runs the notebook
    offline (the approval decided in code, and said so: nothing draws the panel), saves the
    executed copy, and the .venv holds none of the test tools, in a few hundred MB."""
    copy = tmp_path / "fragola_nb"
    for name in tracked():
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    env = clean_env(PYTHON=os.environ.get("PYTHON", "python3"))
    done = subprocess.run(["bash", "scripts/quickstart.sh"], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=840, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "approved in code: transfer {'amount': 5, 'to': 'Alice'}" in done.stdout
    assert "sent: [('Alice', 5)]" in done.stdout
    assert (copy / "build" / "quickstart.ipynb").is_file()

    listed = subprocess.run([copy / ".venv" / "bin" / "python", "-m", "pip", "list",
                             "--format", "json"], env=env, capture_output=True, text=True,
                            check=True).stdout
    installed = {_name(item["name"]) for item in json.loads(listed)}
    assert sorted(installed & HEAVY) == []
    assert {"fragola-nb", "ipykernel", "nbclient", "jupyterlab"} <= installed
    size = sum(path.stat().st_size for path in (copy / ".venv").rglob("*")
               if path.is_file() and not path.is_symlink())
    assert size < MAX_MB * 1024 * 1024, f"{size / 2**20:.0f} MB"


def test_the_guide_is_opened_on_copies_and_the_tracked_notebooks_stay_clean(
        tmp_path: Path) -> None:
    """JupyterLab saves a notebook's outputs into its file as it runs it: the README once
    said ``.venv/bin/jupyter lab notebooks/``, and running the guide dirtied the tracked
    notebooks. ``scripts/guide.sh`` opens copies in build/guide/ (ignored by git); the
    README, the docs' first page and the quickstart say to use it."""
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md",
                 ROOT / "notebooks" / "quickstart.ipynb"):
        text = page.read_text(encoding="utf-8")
        assert "jupyter lab notebooks" not in text and "bash scripts/guide.sh" in text

    copy = tmp_path / "fragola_nb"
    for name in [*tracked("notebooks"), "scripts/guide.sh"]:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)

    def guide(*args: str) -> str:
        done = subprocess.run(["bash", "scripts/guide.sh", *args], cwd=copy,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "Copied the user guide into build/guide/" in guide("--copy")
    guide_dir = copy / "build" / "guide"
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert sorted(p.name for p in guide_dir.glob("*.ipynb")) == notebooks
    for name in notebooks:
        assert (guide_dir / name).read_bytes() == (ROOT / "notebooks" / name).read_bytes()
    assert (guide_dir / "recordings" / "lesson.jsonl").is_file()  # the replays' relative paths
    ignored = subprocess.run(["git", "check-ignore", "-q", "build/guide/quickstart.ipynb"],
                             cwd=ROOT, check=False)
    assert ignored.returncode == 0
