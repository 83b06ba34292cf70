"""Every notebook of ``notebooks/`` opens in JupyterLab, runs all (Run > Run All Cells) and
shows its panels, with no uncaught error in the page and no console error.

The notebooks are listed when the tests are collected, so a notebook added, renamed or
rewritten is picked up as it is. A cell is expected to show a panel (``.fragola-panel``) when
it starts with a line magic or cell magic that shows one (``%%fragola``, ``%fragola_panel``,
``%fragola_tree``) or builds ``AgentPanel(...)``/``ForkTree(...)`` as its last expression;
the notebook is saved after the run and its cells checked for error outputs. A cell tagged
``raises-exception`` (a mistake shown on purpose) may have an error and no panel.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from . import jlab_harness as h
from .conftest import REPO, UI, expect

pytestmark = pytest.mark.timeout(300)

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
PANEL_MAGIC = re.compile(r"^\s*(%%fragola\b|%fragola_panel\b|%fragola_tree\b)", re.M)
PANEL_CALL = re.compile(r"\b(AgentPanel|ForkTree)\(")


COMPARE_MAGIC = re.compile(r"^\s*%%fragola\b.*\s--compare\b", re.M)


def shows_grid(source: str) -> bool:
    """A ``%%fragola ... --compare`` cell: a compare grid, not an agent panel."""
    return bool(COMPARE_MAGIC.search(source))


def shows_panel(source: str) -> bool:
    if shows_grid(source):
        return False
    if PANEL_MAGIC.search(source):
        return True
    lines = [line for line in source.strip().splitlines() if line.strip()]
    return bool(lines) and bool(PANEL_CALL.search(lines[-1])) and "=" not in lines[-1]


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "notebooks/ holds no notebook"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_all_and_shows_its_panels(ui: UI, path: Path) -> None:
    # a copy of the whole folder, so that relative paths in the notebooks work
    shutil.copytree(path.parent, ui.lab.root / "notebooks", dirs_exist_ok=True)
    rel = f"notebooks/{path.name}"
    nb = nbformat.read(str(path), as_version=4)
    ui.open_and_run_all(rel, timeout=180_000)
    ui.shot("after-run-all")

    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
            and "raises-exception" not in c.get("metadata", {}).get("tags", [])]
    expected = [i for i in code if shows_panel(nb.cells[i].source)]
    for index in expected:
        panel = h.cell(ui.page, index).locator(".fragola-panel").first
        expect(panel).to_be_visible()
        expect(panel.locator(".fragola-header")).not_to_be_empty()
        expect(panel.locator(".fragola-status")).to_have_text(
            re.compile(r"^(idle|waiting|generating)$"))
    for index in [i for i in code if shows_grid(nb.cells[i].source)]:
        grid = h.cell(ui.page, index).locator(".fragola-compare-col")
        expect(grid.first).to_be_visible()
        assert grid.count() >= 2, f"cell {index}: a compare grid with {grid.count()} column(s)"
    for index in expected[:4]:  # the first few panels, to look at
        ui.shot(f"panel-cell{index}", h.cell(ui.page, index).locator(".jp-OutputArea"))
    if not expected:  # a notebook without panels still renders, and shows no broken widget
        assert ui.page.locator(".fragola-panel").count() == 0

    # No error output: save what the page shows, read it back through the server
    saved = h.save_notebook(ui.page, ui.lab, rel)
    errors = []
    for index, c in enumerate(saved["cells"]):
        tags = c.get("metadata", {}).get("tags", [])
        for o in c.get("outputs", []):
            if o["output_type"] == "error" and "raises-exception" not in tags:
                errors.append(f"cell {index}: {o['ename']}: {o['evalue']}")
    assert not errors, errors
    assert not ui.page.get_by_text("Error displaying widget").count()
    ui.assert_clean()
