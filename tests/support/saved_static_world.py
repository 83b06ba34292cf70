"""An executed notebook with a ``%%fragola`` panel (and someone else's widget), and its
nbconvert HTML pages, plain and with ``fragola_nb.notebook.static.static_views``: real
``jupyter nbconvert`` in a subprocess, a real kernel, the scripted model (offline). Shared by
tests/notebook/static/test_saved_static_view.py and tests/browser/test_browser_saved_static.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

PREPROCESSOR = "fragola_nb.notebook.static.static_views"
QUESTION = 'Is <img src=x onerror="alert(1)"> a capital?'
ANSWER = "No: <script>alert(2)</script> <b>bold</b> is not a city."
SETUP = f"""\
%load_ext fragola_nb
from fragola_nb import Fragola
from fragola_nb.models.scripted import reply
agent = Fragola.scripted([reply({ANSWER!r})]).agent(name="geographer")
"""
SLIDER = "import ipywidgets\nipywidgets.IntSlider(value=3)"  # someone else's widget


def nbconvert(*args: str, cwd: Path) -> None:
    subprocess.run([sys.executable, "-m", "nbconvert", *args], cwd=cwd, check=True,
                   capture_output=True, timeout=240)


def make_files(folder: Path) -> dict[str, Path]:
    """The notebook executed by nbconvert (widget state stored), the same without its
    widget state, and their HTML pages: plain nbconvert and with the preprocessor."""
    nb = new_notebook(cells=[new_code_cell(SETUP), new_code_cell(f"%%fragola\n{QUESTION}"),
                             new_code_cell(SLIDER)],
                      metadata={"kernelspec": {"name": "python3", "language": "python",
                                               "display_name": "Python 3"}})
    nbformat.write(nb, str(folder / "asked.ipynb"))
    nbconvert("--execute", "--to", "notebook", "asked.ipynb", "--output", "saved", cwd=folder)
    stateless = nbformat.read(str(folder / "saved.ipynb"), as_version=4)
    del stateless.metadata["widgets"]
    nbformat.write(stateless, str(folder / "stateless.ipynb"))
    for name in ("saved", "stateless"):
        nbconvert("--to", "html", f"{name}.ipynb", "--output", f"{name}-plain", cwd=folder)
        nbconvert("--to", "html", f"{name}.ipynb", "--output", f"{name}-static",
                  f"--HTMLExporter.preprocessors={PREPROCESSOR}", cwd=folder)
    # in one command, as people run it
    nbconvert("--execute", "--to", "html", "asked.ipynb", "--output", "executed-plain",
              cwd=folder)
    nbconvert("--execute", "--to", "html", "asked.ipynb", "--output", "executed-static",
              f"--HTMLExporter.preprocessors={PREPROCESSOR}", cwd=folder)
    return {path.stem: path for path in folder.iterdir()}
