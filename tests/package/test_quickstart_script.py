"""``bash scripts/quickstart.sh`` prints the run a person reads, not markup: it once printed
560 lines, most of them each panel's static HTML (``nbconvert --to markdown``). After setting
up .venv it runs scripts/run_notebook.py, run here as the script runs it (the set-up step is
tests/package/test_setup_script.py's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
TAG = re.compile(r"</?[A-Za-z][\w-]*(\s[^<>]*)?/?>")


def test_the_script_runs_the_quickstart_with_run_notebook() -> None:
    script = (ROOT / "scripts" / "quickstart.sh").read_text(encoding="utf-8")
    commands = [line for line in script.splitlines() if line and not line.startswith("#")]

    # the quickstart's own extra (tests/test_quickstart.py keeps heavy packages out of it)
    assert "EXTRAS=quickstart PIP_OPTIONS=--no-compile bash scripts/setup.sh" in commands
    assert (".venv/bin/python scripts/run_notebook.py notebooks/quickstart.ipynb "
            "build/quickstart.ipynb") in commands
    assert "nbconvert" not in script


def test_the_quickstart_run_prints_as_text_without_markup(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}  # offline
    executed = tmp_path / "quickstart.ipynb"
    done = subprocess.run(
        [sys.executable, "scripts/run_notebook.py", "notebooks/quickstart.ipynb", str(executed)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout

    assert TAG.search(out) is None, TAG.search(out)
    assert "{" not in out.split("In [")[0]  # no CSS before the first cell either
    assert len(out.splitlines()) < 300
    # The run's text: the offline notice, code, printed lines, and each turn's conversation
    # (the message, the tool call, its result, the reply) from the panels.
    for text in ["running offline on the scripted demo model", "%%fragola calculator",
                 "Please add 2 and 3", "result of add", "The tool add returned: 5.",
                 "sent: [('Alice', 5)]", "what_if ["]:
        assert text in out, text
    assert "Traceback" not in out
    notebook = nbformat.read(executed, as_version=4)  # the copy to open in JupyterLab
    assert any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")
