"""Saved with widget state, reopened later: the conversation is still shown, read-only.

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
import re
from collections.abc import Iterator
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, SharedNotebook, Tab, expect, shared_ui

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
    expect(turn.locator(".fragola-name")).to_have_text("geographer")
    expect(turn.locator(".fragola-status")).to_have_text("idle")
    expect(turn.locator(".fragola-msg-user")).to_contain_text("What is the capital of France?")
    expect(turn.locator(".fragola-call-ran .fragola-call-name")).to_have_text("capital")
    expect(turn.locator(".fragola-call-ran .fragola-result-text")).to_have_text("Paris")
    expect(turn.locator(".fragola-msg-assistant").last).to_contain_text(
        "The capital of France is Paris.")
    tree = h.cell(page, TREE_CELL)
    expect(tree.locator(".fragola-tree-node")).to_have_count(1)
    expect(tree.locator(".fragola-tree-name")).to_have_text("geographer")
    expect(tree.locator(".fragola-panel .fragola-messages")).to_contain_text(
        "The capital of France is Paris.")


@pytest.fixture(scope="module")
def notebook(browser: Any, lab: h.LabServer) -> Iterator[SharedNotebook]:
    shared = SharedNotebook(Tab.open(browser))
    try:
        yield shared
    finally:
        shared.tab.close()
        lab.shutdown_all_kernels(wait=False)


@pytest.fixture
def ui(notebook: SharedNotebook, browser: Any, lab: h.LabServer,
       request: pytest.FixtureRequest) -> Iterator[UI]:
    def prepare(view: UI) -> None:
        save_and_reopen(view, browser, lab)
        notebook.tab = view.tab  # the reopened tab is the one the next tests look at

    yield from shared_ui(notebook, lab, request, prepare)


def save_and_reopen(ui: UI, browser: Any, lab: h.LabServer) -> None:
    scenarios.saved(lab.root, "saved.ipynb")
    ui.open_and_run_all("saved.ipynb")
    check_conversation(ui)
    ui.shot("before-save")
    # Saved at once: the panel copies its rows into the widget state as they arrive, so a
    # Ctrl+S right after a reply keeps the reply.
    nb = h.save_notebook(ui.page, lab, "saved.ipynb")  # Ctrl+S
    # the file on disk holds the widget state, with the model of every view
    state = nb["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    names = {m["model_name"] for m in state.values()}
    assert {"VBoxModel", "AnyModel"} <= names, names  # the tree's box; panels, tree view
    views = [o["data"][WIDGET_VIEW]["model_id"] for c in nb["cells"] if c["cell_type"] == "code"
             for o in c["outputs"] if WIDGET_VIEW in o.get("data", {})]
    assert len(views) >= 2 and all(v in state for v in views), views
    panels = [m["state"] for m in state.values() if "saved_rows" in m["state"]]
    assert len(panels) == 2, panels  # the turn's panel and the tree's
    for panel in panels:
        assert "The capital of France is Paris." in json.dumps(panel["saved_rows"])

    old_kernels = {k["id"] for k in lab.kernels()}
    lab.shutdown_all_kernels()  # the kernel that made the panels is gone
    assert lab.kernels() == []
    ui.new_tab(browser)  # a fresh tab: nothing cached from the first one
    h.open_notebook(ui.page, lab, "saved.ipynb", start_kernel=False, wait_kernel=False)
    check_conversation(ui)
    assert not old_kernels & {k["id"] for k in lab.kernels()}


def test_saved_widget_state_shows_the_conversation_read_only_after_reopening(ui: UI) -> None:
    page = ui.page
    # the restored controls are inert views of saved models: no "model not found"
    expect(page.locator(".jp-OutputArea-output", has_text="Error displaying widget")
           ).to_have_count(0)
    # read-only: every control off, and the panel says why
    for panel in (h.cell(page, TURN_CELL).locator(".fragola-panel"),
                  h.cell(page, TREE_CELL).locator(".fragola-panel")):
        expect(panel.locator(".fragola-offline")).to_contain_text(
            "No kernel holds this agent", timeout=30_000)
        expect(panel.locator(".fragola-offline")).to_be_visible()
        expect(panel).to_have_class(re.compile(r"\bfragola-inactive\b"))
        controls = panel.locator(".fragola-controls button, .fragola-controls input, "
                                 ".fragola-chat button, .fragola-chat textarea")
        expect(controls).to_have_count(9)  # Stop Step Reset, name Fork, var Bind, box Send
        for i in range(controls.count()):
            expect(controls.nth(i)).to_be_disabled()
    ui.shot("reopened")
    ui.shot("reopened-turn-panel", h.cell(page, TURN_CELL).locator(".jp-OutputArea"))
    ui.shot("reopened-tree", h.cell(page, TREE_CELL).locator(".jp-OutputArea"))
    marks = page.evaluate(MARKS_JS)
    assert marks["disconnected"] > 0, marks  # the views really are kernel-less
    h.wait_kernel_idle(page)
    ui.assert_clean()


def test_a_kernel_less_tree_shows_one_broken_link_mark(ui: UI) -> None:
    # ipywidgets marks every widget without a kernel with a red broken-link icon; a tree or
    # a panel shows one for itself, not one per inner widget
    ui.shot("reopened-tree", h.cell(ui.page, TREE_CELL).locator(".jp-OutputArea"))
    marks = ui.page.evaluate(MARKS_JS)
    assert marks["inner_marks"] == 0, marks


def test_the_static_copies_hide_beside_their_live_views(ui: UI) -> None:
    # the file keeps each view's static copy (the next output); beside a view that draws,
    # the page holds no second conversation: the copy is emptied and its output hidden
    page = ui.page
    for index in (TURN_CELL, TREE_CELL):
        copy = h.cell(page, index).locator(".fragola-static-copy")
        expect(copy).to_have_count(1)
        expect(copy).to_be_hidden()
        expect(copy).to_have_text("")


def test_without_saved_widget_state_the_static_copy_shows_the_conversation(
        ui: UI, browser: Any, lab: h.LabServer) -> None:
    # someone else's copy of the notebook, saved without widget state (JupyterLab's default)
    # and so no longer signed: the widgets cannot draw, the static copies show the run
    nb = lab.read_notebook("saved.ipynb")
    del nb["metadata"]["widgets"]
    (lab.root / "stateless.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    lab.shutdown_all_kernels()
    ui.new_tab(browser)
    h.open_notebook(ui.page, lab, "stateless.ipynb", start_kernel=False, wait_kernel=False)
    page = ui.page
    turn = h.cell(page, TURN_CELL).locator(".fragola-static-copy .fragola-conversation")
    expect(turn).to_be_visible(timeout=60_000)
    expect(turn).to_contain_text("What is the capital of France?")
    expect(turn).to_contain_text("The capital of France is Paris.")
    tree = h.cell(page, TREE_CELL).locator(".fragola-static-copy")
    expect(tree).to_be_visible()
    expect(tree).to_contain_text("geographer")
    expect(h.cell(page, TURN_CELL).locator(".fragola-panel")).to_have_count(0)
    ui.shot("stateless-turn", h.cell(page, TURN_CELL).locator(".jp-OutputArea"))
    ui.shot("stateless-tree", h.cell(page, TREE_CELL).locator(".jp-OutputArea"))
