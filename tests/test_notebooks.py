"""The notebooks are the user guide: each must run top to bottom offline in a real kernel.

Each is written by ``notebooks/build.py`` from its source, ``notebooks/src/<name>.py`` (jupytext's
percent format, linted and type-checked with the code), and stored without outputs; the
quickstart is also run the way a newcomer runs it, clicking Approve and a node of the fork tree.
"""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from support.helpers import until
from support.kernel_harness import Kernel

HERE = Path(__file__).parent.parent / "notebooks"
NOTEBOOKS = sorted(HERE.glob("*.ipynb"))
SOURCES = sorted((HERE / "src").glob("*.py"))
GUIDE = {"quickstart", "tools_and_approvals", "forks_and_tree", "json_and_streaming",
         "teaching_example", "experiments"}
OFFLINE_NOTICE = "running offline on the scripted demo model"


def test_the_user_guide_is_there() -> None:
    assert GUIDE <= {path.stem for path in NOTEBOOKS}


def test_each_notebook_has_its_source() -> None:
    assert {path.stem for path in SOURCES} == {path.stem for path in NOTEBOOKS}


def check(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(folder / "build.py"), "--check"],
                          capture_output=True, text=True)


def test_the_notebooks_are_what_build_py_writes() -> None:
    run = check(HERE)
    assert run.returncode == 0, run.stderr


def test_a_changed_source_is_found_and_built(tmp_path: Path) -> None:
    """An edited source makes --check fail, naming its notebook; build.py then rewrites that
    notebook (with the edit) and leaves the others byte for byte as they were."""
    copy = tmp_path / "notebooks"
    shutil.copytree(HERE, copy, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    source = copy / "src" / "forks_and_tree.py"
    text = source.read_text(encoding="utf-8")
    assert text.count('planner.fork("rome")') == 1  # the script-only cell after --fork rome
    source.write_text(text.replace("# %%fragola planner --fork rome\n",
                                   "# %%fragola planner --fork rome --no-stream\n"),
                      encoding="utf-8")
    before = {path.name: path.read_bytes() for path in copy.glob("*.ipynb")}

    edited = check(copy)
    assert edited.returncode == 1
    assert "forks_and_tree.ipynb" in edited.stderr and "quickstart" not in edited.stderr

    built = subprocess.run([sys.executable, str(copy / "build.py")], capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stderr
    assert check(copy).returncode == 0
    after = {path.name: path.read_bytes() for path in copy.glob("*.ipynb")}
    assert [name for name in before if before[name] != after[name]] == ["forks_and_tree.ipynb"]
    cells = nbformat.read(copy / "forks_and_tree.ipynb", as_version=4).cells
    assert "%%fragola planner --fork rome --no-stream\nThen book hotel in Rome for 3 nights." in [
        cell.source for cell in cells if cell.cell_type == "code"]
    # The script-only cells (ruff's and mypy's) are not in the notebook.
    assert not [cell for cell in cells if 'planner.fork("rome")' in cell.source
                or "ruff: noqa" in cell.source]

    (copy / "src" / "forks_and_tree.py").unlink()
    orphan = check(copy)
    assert orphan.returncode == 1 and "forks_and_tree.ipynb" in orphan.stderr


def test_the_sources_are_type_checked_as_the_package_is() -> None:
    """notebooks/mypy.ini (scripts/test.sh runs mypy with it) checks every source, for the
    same Python floor as the package's own run, and strict but for what it says."""
    config = configparser.ConfigParser()
    config.read(HERE / "mypy.ini")
    with open(HERE.parent / "pyproject.toml", "rb") as f:
        package = tomllib.load(f)["tool"]["mypy"]
    assert config["mypy"]["python_version"] == package["python_version"]
    assert config["mypy"]["strict"] == "True"
    assert config["mypy"]["files"] == "notebooks/src"


def test_a_notebook_run_and_saved_in_place_is_not_out_of_date(tmp_path: Path) -> None:
    """A teacher runs quickstart.ipynb in JupyterLab and saves it: outputs, execution counts,
    widget state in the metadata. Its cells are still its source's, so --check passes; an
    edited cell is still found. (.ipynb_checkpoints/, which JupyterLab writes beside it, is
    ignored by git.)"""
    copy = tmp_path / "notebooks"
    shutil.copytree(HERE, copy, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    path = copy / "quickstart.ipynb"
    notebook = nbformat.read(path, as_version=4)
    for count, cell in enumerate(c for c in notebook.cells if c.cell_type == "code"):
        cell.execution_count = count + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
    nbformat.write(notebook, path)

    assert check(copy).returncode == 0, check(copy).stderr
    notebook.cells[-1].source += "\n# a teacher's edit"
    nbformat.write(notebook, path)
    edited = check(copy)
    assert edited.returncode == 1 and "quickstart.ipynb" in edited.stderr
    ignored = subprocess.run(["git", "check-ignore", "-q", "notebooks/.ipynb_checkpoints/x"],
                             cwd=HERE.parent)
    assert ignored.returncode == 0


def stored(path: Path) -> nbformat.NotebookNode:
    """The notebook as git is to store it (the index), else (not added yet) the file: a copy
    run and saved in the work tree may have outputs, the repository's may not."""
    shown = subprocess.run(["git", "show", f":{path.relative_to(HERE.parent).as_posix()}"],
                           cwd=HERE.parent, capture_output=True, text=True)
    if shown.returncode == 0:
        return nbformat.reads(shown.stdout, as_version=4)
    return nbformat.read(path, as_version=4)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_clean(path: Path) -> None:
    notebook = stored(path)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)
    # A guide that checks nothing cannot fail when the library breaks it.
    assert any("assert " in cell.source for cell in code)


# A whole notebook in a fresh kernel: about 30-60 s on 2 quiet cores, over the suite's 120 s
# per test when the machine is busy (its cells have 300 s each).
@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_offline(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel inherits this environment: no key means the scripted model answers.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    notebook = nbformat.read(path, as_version=4)
    shipped = {file: file.read_bytes() for file in (HERE / "recordings").glob("*.jsonl")}
    # Where llama.cpp is installed, the teaching notebook's Parts 7 and 8 run on the real
    # model: Part 8's 60 answers take about a minute on 2 busy cores.
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    # Every notebook starts with Fragola.from_env(), which must say it is offline (some
    # lessons also script exact replies with Fragola.scripted, which is always offline).
    assert OFFLINE_NOTICE in text
    # A replay or a cache read from the shipped files never writes to them.
    assert {file: file.read_bytes() for file in (HERE / "recordings").glob("*.jsonl")} == shipped
    if path.stem == "teaching_example":
        replayed_from_the_shipped_cache(notebook)
    # Run headless, a cell that waits for a person's click says it does not, and why.
    for cell in notebook.cells:
        if "await wait_for_decisions(" in cell.source:
            said = [o.data["text/plain"] for o in cell.outputs if "data" in o]
            assert any(line.startswith("fragola_nb: not waiting for a click on ")
                       and "no front end has drawn its panel" in line for line in said), said


def replayed_from_the_shipped_cache(notebook: nbformat.NotebookNode) -> None:
    """The teaching notebook's Part 8 replays the experiment make_experiment_cache.py ran on
    the real local model, with or without llama.cpp here: every one of the 60 calls is
    answered from the shipped file (the same requests as the maker's, to the byte of each
    body), at no cost, and the recorded verdict is shown: the pirate prompt passes more."""
    [cell] = [c for c in notebook.cells if "replayed = await cache.agent(" in c.source]
    shown = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    lines = dict(line.split("|", 1) for line in shown.splitlines()[:2])
    assert [name.strip() for name in lines] == ["plain", "pirate"]
    assert all(line.endswith("| 30 of 30 cached | $0.00") for line in lines.values())
    rates = [int(line.split("%")[0].split()[-1]) for line in lines.values()]
    assert rates[1] > rates[0]
    assert "10 cases × 2 variants × 3 repeats" in shown and "$0.00" in shown.splitlines()[2]


def _cells(name: str) -> list[str]:
    notebook = nbformat.read(HERE / f"{name}.ipynb", as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def test_quickstart_with_clicks() -> None:
    """The issue's "done when": run the quickstart offline, approve the tool call by clicking,
    fork, and pick a branch in the tree; the headless fallback cell then does nothing."""
    cells = _cells("quickstart")
    approval = next(i for i, s in enumerate(cells) if s.startswith("%%fragola calculator\n")
                    and "transfer" in s)
    tree = next(i for i, s in enumerate(cells) if s.startswith("%fragola_tree"))
    with Kernel() as kernel:
        for source in cells[:approval + 1]:
            result = kernel.execute(source)
        assert "waiting on 1 tool call" in result.data[-1]["text/plain"]  # a display line
        assert kernel.eval("calculator.status") == "waiting"
        kernel.drain()
        assert [card["name"] for card in kernel.widgets[kernel.panel()]["cards"]] == ["transfer"]
        kernel.act("approve", id=kernel.eval("calculator.pending[0].id"))
        kernel.wait_for("calculator.status == 'idle'")
        fallback = kernel.execute(cells[approval + 1])
        assert "approved in code" not in fallback.stdout  # the click decided it
        assert "sent: [('Alice', 5)]" in fallback.stdout
        for source in cells[approval + 2:tree + 1]:
            kernel.execute(source)
        fork_id = kernel.eval("what_if.id")
        kernel.send_state(kernel.find("fragola-tree"), {"selected": fork_id})

        def shows_the_fork() -> bool:
            kernel.drain(0.05)
            return bool(kernel.widgets[kernel.panel()]["head"]["name"] == "what_if")

        until(shows_the_fork)
        for source in cells[tree + 1:]:
            kernel.execute(source)


CLICK = re.compile(r"👉[^\n]*\*\*(Click )?(Approve|Reject|Answer by hand)|👉 (Type|Change|Click)"
                   r"[^.]*\*\*(Approve|Reject|Answer)")


@pytest.mark.parametrize("name", sorted(GUIDE | {"system"}))
def test_a_click_the_text_asks_for_is_waited_for_under_run_all(name: str) -> None:
    """"👉 Click Approve now", then a cell that approved in code at once: under Run All nobody
    ever could click. Each text asking for a click on a card is followed, after its paused
    turn, by a cell that waits for it (``wait_for_decisions``), and decides in code only
    where nobody could click or nobody did."""
    cells = nbformat.read(HERE / f"{name}.ipynb", as_version=4).cells
    asks = [i for i, cell in enumerate(cells)
            if cell.cell_type == "markdown" and CLICK.search(cell.source)]
    for index in asks:
        after = next(cell for cell in cells[index + 1:] if cell.cell_type == "code"
                     and not cell.source.startswith("%%fragola"))
        assert "await wait_for_decisions(" in after.source, (name, cells[index].source)
    waits = sum("await wait_for_decisions(" in cell.source for cell in cells)
    assert waits == len(asks)
    assert waits >= {"quickstart": 1, "tools_and_approvals": 5, "system": 1}.get(name, 0)


def scripts_in(page: str) -> list[str]:
    """The ``<script>`` elements of a page that run (not its JSON data blocks)."""
    tags = re.findall(r"<script\b[^>]*>", page)
    return [tag for tag in tags if "application/json" not in tag]


def test_what_forks_and_tree_says_of_each_export_is_true() -> None:
    """It once said ``export_html`` writes "a standalone page with no script": that page is
    drawn by one inline script; ``export_tree_html``'s has none. Each claim names the export
    it is true of, and the exports are checked to be so."""
    from fragola_nb import Fragola, export_html, export_tree_html, run_sync

    planner = Fragola.scripted().agent(name="planner")
    run_sync(planner.user_message("Plan a trip"))
    rome = planner.fork("rome")
    run_sync(rome.user_message("Rome, then"))
    assert len(scripts_in(export_html(rome))) == 1
    assert scripts_in(export_tree_html(rome)) == []

    text = "\n".join(cell.source for cell in nbformat.read(
        HERE / "forks_and_tree.ipynb", as_version=4).cells if cell.cell_type == "markdown")
    claims = {"no script": "export_tree_html", "one small inline script": "export_html"}
    for claim, export in claims.items():
        assert claim in text
        for found in re.finditer(re.escape(claim), text):
            named = re.findall(r"`(export_\w+)", text[:found.start()])
            assert named[-1] == export, (claim, named[-1])
