"""Saved with widget state, reopened later: the conversation is still shown.

The lab runs with Settings > "Save Widget State Automatically" on (the
``@jupyter-widgets/jupyterlab-manager:plugin`` setting ``saveState``, see jlab_harness), so
Ctrl+S writes every widget model into the notebook's metadata. After that the kernel that
made the panels is shut down (REST API) and the notebook is reopened in a fresh tab.

JupyterLab always starts the notebook's kernel when it opens it; that fresh kernel knows
nothing of these panels (none of their objects exist in it), so what shows comes from the
saved state alone. (When no kernel can start at all, jupyterlab-manager itself shows
"Loading widget..." forever, for any widget: a JupyterLab limitation, not ours.)
"""

from __future__ import annotations

import json

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect

pytestmark = pytest.mark.timeout(240)

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
TURN_CELL, TREE_CELL = 2, 3
MARKS_JS = """() => {
  const all = [...document.querySelectorAll('.jupyter-widgets-disconnected')];
  const inner = all.filter(e => e.parentElement.closest('.fragola-panel, .fragola-fork-tree'));
  const shown = inner.filter(e => getComputedStyle(e, '::before').display !== 'none');
  return {disconnected: all.length, inner_marks: shown.length};
}"""


def check_conversation(ui: UI) -> None:
    page = ui.page
    turn = h.cell(page, TURN_CELL).locator(".fragola-panel")
    expect(turn).to_be_visible(timeout=60_000)
    expect(turn.locator(".fragola-header")).to_contain_text("geographer")
    expect(turn.locator(".fragola-status")).to_have_text("idle")
    expect(turn.locator(".fragola-msg-user")).to_contain_text("What is the capital of France?")
    expect(turn.locator(".fragola-result-text")).to_have_text("Paris")
    expect(turn.locator(".fragola-msg-assistant").last).to_contain_text(
        "The capital of France is Paris.")
    tree = h.cell(page, TREE_CELL)
    expect(tree.locator(".fragola-tree-node")).to_have_count(1)
    expect(tree.locator(".fragola-tree-name")).to_have_text("geographer")
    expect(tree.locator(".fragola-panel .fragola-messages")).to_contain_text(
        "The capital of France is Paris.")


def test_saved_widget_state_shows_the_conversation_after_reopening(
    ui: UI, browser: object, lab: h.LabServer
) -> None:
    scenarios.saved(lab.root, "saved.ipynb")
    ui.open_and_run_all("saved.ipynb")
    check_conversation(ui)
    ui.shot("before-save")

    nb = h.save_notebook(ui.page, lab, "saved.ipynb")  # Ctrl+S
    # the file on disk holds the widget state, with the model of every view
    state = nb["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    names = {m["model_name"] for m in state.values()}
    assert {"VBoxModel", "HTMLModel", "ButtonModel", "AnyModel"} <= names, names
    views = [o["data"][WIDGET_VIEW]["model_id"] for c in nb["cells"] if c["cell_type"] == "code"
             for o in c["outputs"] if WIDGET_VIEW in o.get("data", {})]
    assert len(views) >= 2 and all(v in state for v in views), views
    assert "The capital of France is Paris." in json.dumps(state)

    old_kernels = {k["id"] for k in lab.kernels()}
    lab.shutdown_all_kernels()  # the kernel that made the panels is gone
    assert lab.kernels() == []
    ui.new_tab(browser)  # a fresh tab: nothing cached from the first one
    h.open_notebook(ui.page, lab, "saved.ipynb", start_kernel=False, wait_kernel=False)
    check_conversation(ui)
    assert not old_kernels & {k["id"] for k in lab.kernels()}
    # the restored controls are inert views of saved models: no "model not found"
    expect(ui.page.locator(".jp-OutputArea-output", has_text="Error displaying widget")
           ).to_have_count(0)
    # ipywidgets marks every widget without a kernel with a red broken-link icon; a panel
    # shows one for itself, not one per inner widget
    marks = ui.page.evaluate(MARKS_JS)
    assert marks["disconnected"] > 0, marks  # the views really are kernel-less
    assert marks["inner_marks"] == 0, marks
    ui.shot("reopened")
    h.wait_kernel_idle(ui.page)
    ui.assert_clean()
