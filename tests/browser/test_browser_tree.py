"""The fork tree in JupyterLab (an anywidget): forking from the panel adds a node, and
clicking a node shows that branch's messages."""

from __future__ import annotations

import re

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect

pytestmark = pytest.mark.timeout(240)

TREE_CELL, BRANCH_CELL = 3, 4


def test_fork_from_the_panel_and_switch_branches(ui: UI) -> None:
    scenarios.fork_tree(ui.lab.root, "tree.ipynb")
    ui.open_and_run_all("tree.ipynb")
    page = ui.page
    expect(h.cell_output(page, BRANCH_CELL)).to_have_text("NO FORK YET")
    out = h.cell(page, TREE_CELL)
    nodes = out.locator(".fragola-tree-node")
    panel = out.locator(".fragola-tree-branch .fragola-panel")
    expect(nodes).to_have_count(1)
    root_id = nodes.nth(0).get_attribute("data-agent-id")
    assert root_id and re.fullmatch(r"[0-9a-f]+", root_id)
    expect(nodes.nth(0)).to_have_class(re.compile(r"\bfragola-tree-selected\b"))
    expect(nodes.nth(0).locator(".fragola-tree-name")).to_have_text("trunk")
    expect(nodes.nth(0).locator(".fragola-tree-count")).to_have_text("2 msg")
    expect(panel.locator(".fragola-name")).to_have_text("trunk")
    expect(panel.locator(".fragola-messages")).to_contain_text("Root answer")
    ui.shot("tree-one-node", out)

    # Fork from the panel under the tree: type a name, click Fork
    panel.locator(".fragola-fork-name").fill("what-if")
    ui.shot("fork-name-typed", out)
    panel.locator(".fragola-fork").click()
    expect(nodes).to_have_count(2)
    fork_node = nodes.nth(1)
    expect(fork_node.locator(".fragola-tree-name")).to_have_text("└ what-if")
    expect(fork_node.locator(".fragola-tree-added")).to_have_text("+0 since fork")
    expect(fork_node).to_have_class(re.compile(r"\bfragola-tree-selected\b"))  # shown at once
    expect(panel.locator(".fragola-name")).to_have_text("what-if")
    expect(panel.locator(".fragola-facts")).to_contain_text(f"fork of trunk {root_id}")
    expect(panel.locator(".fragola-fork-name")).to_have_value("")
    # the fork's panel, shown in its place, says which variable the fork got
    expect(panel.locator(".fragola-notice")).to_contain_text("bound to `what_if`")
    fork_id = fork_node.get_attribute("data-agent-id")
    assert fork_id and fork_id != root_id

    # The branch goes on (a cell sends it a message); its panel, live, shows it
    h.run_cell(page, BRANCH_CELL)
    expect(h.cell_output(page, BRANCH_CELL)).to_have_text(f"BRANCH {fork_id} what-if 4",
                                                          timeout=30_000)
    h.wait_kernel_idle(page)
    expect(panel.locator(".fragola-messages")).to_contain_text("Branch answer")
    expect(fork_node.locator(".fragola-tree-count")).to_have_text("4 msg")
    expect(fork_node.locator(".fragola-tree-added")).to_have_text("+2 since fork")
    ui.shot("fork-went-on", out)

    # Click the root: its branch, without the fork's messages
    nodes.nth(0).click()
    expect(nodes.nth(0)).to_have_class(re.compile(r"\bfragola-tree-selected\b"))
    expect(fork_node).not_to_have_class(re.compile(r"\bfragola-tree-selected\b"))
    expect(panel.locator(".fragola-name")).to_have_text("trunk")
    expect(panel.locator(".fragola-facts")).not_to_contain_text("fork of")
    messages = panel.locator(".fragola-messages")
    expect(messages).to_contain_text("Root answer")
    expect(messages).not_to_contain_text("Branch answer")
    expect(messages).not_to_contain_text("asked only on the branch")
    expect(panel.locator(".fragola-msg")).to_have_count(2)
    ui.shot("root-selected", out)

    # Click the fork: its branch again, with the shared start and its own messages
    fork_node.click()
    expect(panel.locator(".fragola-name")).to_have_text("what-if")
    expect(messages).to_contain_text("Root answer")
    expect(messages).to_contain_text("asked only on the branch")
    expect(messages).to_contain_text("Branch answer")
    expect(panel.locator(".fragola-msg")).to_have_count(4)
    ui.shot("fork-selected", out)
    ui.assert_clean()
