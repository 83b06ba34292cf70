"""The panel of fragola_nb installed from its wheel (tests/support/wheel_install.py: built from
a clean copy, pip-installed, not editable, in a fresh venv), in JupyterLab: the notebook's kernel is
that venv's python, so the panel's JavaScript and CSS that reach the browser are the wheel's
files, read by the installed package (the wheel once had none: every panel raised
FileNotFoundError). The JupyterLab front end (ipywidgets, anywidget) is the test venv's."""

from __future__ import annotations

import shutil

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from support.wheel_install import KERNEL_NAME, kernel_specs, venv

from . import jlab_harness as h
from .conftest import UI, expect

pytestmark = pytest.mark.timeout(600)  # the wheel and its venv, if no test made them yet

CELLS = [
    "import sys, fragola_nb\nprint('FROM', sys.prefix)\nprint('PACKAGE', fragola_nb.__file__)",
    '''%load_ext fragola_nb
from fragola_nb import Fragola, tool

@tool
def add(x: int, y: int) -> int:
    """Add two whole numbers."""
    return x + y

calc = Fragola.from_env().agent(name="calc", instructions="Use your tools.", tools=[add])''',
    "%%fragola calc\nPlease add 2 and 3",
]


def test_the_panel_of_the_wheel_install_in_jupyterlab(ui: UI) -> None:
    env = venv()
    # The server lists the kernelspecs of its private data dir on each request.
    shutil.copytree(kernel_specs(env) / KERNEL_NAME,
                    ui.lab.base / "data" / "kernels" / KERNEL_NAME, dirs_exist_ok=True)
    notebook = new_notebook(cells=[new_code_cell(source) for source in CELLS])
    notebook.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": KERNEL_NAME,
                                       "language": "python"}
    nbformat.write(notebook, str(ui.lab.root / "wheel.ipynb"))
    ui.lab.api("POST", "/api/sessions", {"path": "wheel.ipynb", "type": "notebook",
                                         "name": "wheel.ipynb", "kernel": {"name": KERNEL_NAME}})
    h.open_notebook(ui.page, ui.lab, "wheel.ipynb", start_kernel=False)
    h.run_all_and_wait(ui.page)

    where = h.cell(ui.page, 0).locator(".jp-OutputArea")
    expect(where).to_contain_text(f"FROM {env.path}")
    expect(where).to_contain_text(f"PACKAGE {env.site_packages}/fragola_nb/__init__.py")
    panel = h.cell(ui.page, 2).locator(".fragola-panel")
    expect(panel).to_be_visible(timeout=30_000)
    expect(panel.locator(".fragola-status")).to_have_text("idle")
    final = panel.locator(".fragola-msg-assistant .fragola-md").last
    expect(final).to_have_text("The tool add returned: 5.")
    # panel.css from the wheel is applied: its custom properties are set on the panel
    assert panel.evaluate("e => getComputedStyle(e).getPropertyValue('--fg-line2')").strip()
    assert not h.cell(ui.page, 2).locator(".jp-RenderedText[data-mime-type="
                                          "'application/vnd.jupyter.stderr']").count()
    ui.shot("panel-from-the-wheel", panel)
    ui.assert_clean()
