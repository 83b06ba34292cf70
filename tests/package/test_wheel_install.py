"""What ``pip install fragola_nb`` gives a user: the wheel and the sdist carry every file of the
package, pass ``twine check``, state one version, and the wheel, installed (not editable) in a
fresh venv and used from a directory outside the checkout, makes every view with its
JavaScript and CSS and runs the quickstart notebook in a kernel of that venv. The docs'
usage snippet prices its calls in that plain install, and their traces snippet runs with only
the extra it names (``otel``).

The wheel once had no ``notebook/panel.js``: every panel raised FileNotFoundError in a real
install while the editable install of the other tests read the file from the checkout.
"""

from __future__ import annotations

import ast
import json
import re
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from support.doc_snippets import section_blocks
from support.wheel_install import (
    KERNEL_NAME,
    ROOT,
    WheelKernel,
    built,
    clean_env,
    kernel_specs,
    run,
    tracked,
    venv,
)

pytestmark = pytest.mark.timeout(600)  # the first test to ask builds the wheel and the venv

VERSION_FILE = ROOT / "fragola_nb" / "_version.py"


def version_in_source() -> str:
    """The version as fragola_nb/_version.py writes it (read, not imported: the checkout)."""
    tree = ast.parse(VERSION_FILE.read_text(encoding="utf-8"))
    (value,) = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__version__"]]
    assert isinstance(value, str)
    return value


def wheel_files() -> set[str]:
    with zipfile.ZipFile(built().wheel) as wheel:
        return {name for name in wheel.namelist() if not name.endswith("/")}


def sdist_files() -> set[str]:
    with tarfile.open(built().sdist) as sdist:
        names = [member.name for member in sdist.getmembers() if member.isfile()]
    top = f"fragola_nb-{version_in_source()}/"
    assert all(name.startswith(top) for name in names), names[:3]
    return {name.removeprefix(top) for name in names}


def test_the_wheel_and_the_sdist_carry_every_file_of_the_package() -> None:
    package = set(tracked("fragola_nb"))
    assert {"fragola_nb/notebook/panel/panel.js", "fragola_nb/notebook/panel/panel.css",
            "fragola_nb/notebook/compare/compare.js", "fragola_nb/notebook/compare/compare.css",
            "fragola_nb/py.typed"} <= package  # the list was read

    in_wheel = {name for name in wheel_files() if name.startswith("fragola_nb/")}
    in_sdist = {name for name in sdist_files() if name.startswith("fragola_nb/")}
    # Exactly the tracked files: none forgotten, no __pycache__ or checkpoint taken along.
    assert in_wheel == package, (package - in_wheel, in_wheel - package)
    assert in_sdist == package, (package - in_sdist, in_sdist - package)
    assert {"pyproject.toml", "README.md"} <= sdist_files()


def test_twine_check_passes_on_the_wheel_and_the_sdist() -> None:
    import sys

    art = built()
    done = run([sys.executable, "-m", "twine", "check", "--strict", art.wheel, art.sdist])
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_version_is_written_in_one_place() -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "fragola_nb._version.__version__"}
    version = version_in_source()

    with zipfile.ZipFile(built().wheel) as wheel:
        metadata = wheel.read(f"fragola_nb-{version}.dist-info/METADATA").decode()
    assert f"\nVersion: {version}\n" in metadata
    env = venv()
    code = ("import fragola_nb, importlib.metadata as m; "
            "print(fragola_nb.__version__, m.version('fragola_nb'))")
    shown = run([env.python, "-c", code], cwd=env.outside(), env=clean_env()).stdout.split()
    assert shown == [version, version]


VIEWS = [
    "import sys, fragola_nb\nprint(fragola_nb.__file__)\nprint(sys.prefix)",
    "%load_ext fragola_nb",
    """
from fragola_nb import Fragola, tool

@tool
def add(x: int, y: int) -> int:
    \"\"\"Add two whole numbers.\"\"\"
    return x + y

fragola = Fragola.from_env()
calc = fragola.agent(name="calc", instructions="Use your tools.", tools=[add])
""",
    "%%fragola calc\nPlease add 2 and 3",
    "%fragola_panel calc",
    "%fragola_tree calc",
    "comparison = await calc.compare('Explain DNS.', {'pirate': {'instructions': 'Arr.'}, "
    "'bare': {}})\ncomparison",
    "evaluation = await calc.evaluate(['Add 1 and 2', 'Add 3 and 4'], "
    "{'plain': {}, 'terse': {'instructions': 'One word.'}}, graders=[lambda row: True])",
    "batch = await calc.batch(['Add 1 and 2', 'Add 3 and 4'])\nbatch",
    "from fragola_nb import export_html\npage = export_html(calc)\n"
    "print('EXPORTED', 'Please add 2 and 3' in page, len(page) > 10_000)",
]


def test_every_view_is_made_from_the_installed_wheel_outside_the_checkout() -> None:
    env = venv()
    with zipfile.ZipFile(built().wheel) as wheel:
        assets = {name.rsplit("/", 1)[1]: wheel.read(name).decode()
                  for name in wheel.namelist() if re.search(r"\.(js|css)$", name)}
    # The views' assets (and the exported page's viewer) came with the wheel.
    assert {"panel.js", "panel.css", "compare.js", "compare.css", "evaluation.js",
            "evaluation.css", "tree.js", "tree.css", "htmlexport.js",
            "htmlexport.css"} <= set(assets)
    with WheelKernel(env) as kernel:
        results = [kernel.execute(source.strip(), timeout=120) for source in VIEWS]
        where, prefix = results[0].stdout.split()
        assert Path(prefix) == env.path
        assert Path(where).is_relative_to(env.site_packages)  # not the checkout
        kernel.drain()
        anywidgets = [state for state in kernel.widgets.values() if "_esm" in state]

    def made(esm: str) -> list[dict[str, Any]]:
        return [s for s in anywidgets if s["_esm"] == esm]

    # The agent panels (the turn's and %fragola_panel's, the compare's forks when opened):
    # the wheel's panel.js and panel.css, as anywidget sends them to the browser.
    panels = made(assets["panel.js"])
    assert len(panels) >= 2 and all(p["_css"] == assets["panel.css"] for p in panels)
    grids = made(assets["compare.js"])
    assert len(grids) == 1 and grids[0]["_css"] == assets["compare.css"]
    assert [c["name"] for c in grids[0]["columns"]] == ["pirate", "bare"]
    # The evaluation's live matrix: the wheel's evaluation.js and .css, 2 cases × 2 variants.
    matrices = made(assets["evaluation.js"])
    assert len(matrices) == 1 and matrices[0]["_css"] == assets["evaluation.css"]
    assert matrices[0]["cases"] == ["Add 1 and 2", "Add 3 and 4"]
    # The fork tree: the wheel's tree.js and tree.css (its code is in files, not in Python).
    trees = made(assets["tree.js"])
    assert len(trees) == 1 and trees[0]["_css"] == assets["tree.css"]
    assert {s["_esm"] for s in anywidgets} <= {
        assets[name] for name in ("panel.js", "compare.js", "evaluation.js", "tree.js")}
    # The batch's table is HTML of its own (no script): its two rows, done.
    table = results[-2].data[-1]["text/html"]
    assert "<table" in table and "Add 3 and 4" in table
    assert "2 inputs: 2 done" in results[-2].data[-1]["text/plain"]
    # A run exported to one HTML file, its inline viewer read from the installed package.
    assert results[-1].stdout.split() == ["EXPORTED", "True", "True"], results[-1]


def test_the_quickstart_notebook_runs_in_a_kernel_of_the_wheel_install() -> None:
    env = venv()
    notebook = nbformat.read(ROOT / "notebooks" / "quickstart.ipynb", as_version=4)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(
        "import sys, fragola_nb\nprint('FROM', sys.prefix, fragola_nb.__file__)"))
    where = env.outside()
    specs = KernelSpecManager(kernel_dirs=[str(kernel_specs(env))])
    manager = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)
    client = NotebookClient(notebook, km=manager, timeout=120, kernel_name=KERNEL_NAME,
                            resources={"metadata": {"path": str(where)}})
    client.execute(env=clean_env())  # no OPENAI_*: the scripted model answers
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert [o for o in outputs if o.output_type == "error"] == []
    text = "".join(o.get("text", "") for o in outputs)
    assert f"FROM {env.path} {env.site_packages}/fragola_nb/__init__.py" in text
    assert "running offline on the scripted demo model" in text
    # Its panels were made (a widget view each), not replaced by an error.
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json"
             in o.get("data", {})]
    assert len(views) >= 3


RUN_SNIPPET = """
import ast, asyncio, sys
source = open(sys.argv[1], encoding="utf-8").read()
code = compile(source, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
result = eval(code, {"__name__": "__main__"})
if asyncio.iscoroutine(result):
    asyncio.run(result)
"""
"""Runs a docs block as pasted into a notebook (top-level await) in a plain python."""


def readme_block(section: str) -> str:
    """The first Python block under the heading ``section`` (a docs page's, or the README's)."""
    (block,) = [b for b in section_blocks(section) if b.lang == "python"][:1]
    return block.text


def run_snippet(env_extras: str, text: str) -> str:
    env = venv(env_extras)
    where = env.outside()
    (where / "snippet.py").write_text(text, encoding="utf-8")
    (where / "run.py").write_text(RUN_SNIPPET, encoding="utf-8")
    return run([env.python, "run.py", "snippet.py"], cwd=where, env=clean_env()).stdout


def test_the_usage_snippet_prices_its_calls_in_a_plain_install() -> None:
    out = run_snippet("", readme_block("Usage and cost"))
    lines = out.splitlines()
    # "cost=None" and a price unknown were what a plain install gave before. Offline, the
    # calls are priced (genai-prices) but not paid: no dollar figure in the summary.
    assert re.search(r"requests=1, cost=0\.0\)$", lines[0]), lines[0]
    assert re.fullmatch(r"\d+ tokens", lines[1]), lines[1]
    assert float(lines[2]) > 0, lines[2]


def test_the_otel_extra_brings_what_the_traces_snippet_uses() -> None:
    with zipfile.ZipFile(built().wheel) as wheel:
        metadata = wheel.read(f"fragola_nb-{version_in_source()}.dist-info/METADATA").decode()
    otel = {re.match(r"[\w.-]+", line.split(": ", 1)[1]).group()  # type: ignore[union-attr]
            for line in metadata.splitlines()
            if line.startswith("Requires-Dist:") and line.endswith('extra == "otel"')}
    assert otel == {"opentelemetry-api", "opentelemetry-sdk"}

    snippet = readme_block("Traces (OpenTelemetry)")
    assert "from opentelemetry.sdk" in snippet  # what a plain opentelemetry-api lacked
    out = run_snippet("otel", snippet)
    spans = json.loads(out.strip().splitlines()[-1].replace("'", '"'))
    assert spans == ["chat scripted", "execute_tool plus", "chat scripted", "invoke_agent calc"]
