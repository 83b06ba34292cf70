"""A message's "fork from here" and "edit and run from here" in JupyterLab, on a 2,000-message
history under ``%fragola_tree``; the tree's "at message #N" and the diff of two ticked nodes,
with hostile text, in the dark theme at 700 px."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect
from .test_browser_long_panel import (
    CONTRAST_JS,
    NO_MARKUP_JS,
    TOO_WIDE_JS,
    set_theme,
    watch_dialogs,
)

pytestmark = pytest.mark.timeout(300)

HOSTILE = (scenarios.HOSTILE_SCRIPT + " " + scenarios.HOSTILE_IMG
           + " snow \u202egnp.exe pay\u200bpal")
SHOWN = HOSTILE.replace("\u202e", "\\u202e").replace("\u200b", "\\u200b")
TREE = 2

SCRIPT = '''\
@tool
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: its name
    """
    return "sunny in " + city

def brain(request):
    # answers what it was sent: the last tool result, else the last user message
    last = request["messages"][-1]
    if last["role"] == "tool":
        return reply("Answer from the result: " + last["content"])
    return reply("Answer to: " + last["content"])

history = [
    {"role": "user", "content": "question 0: the weather?"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_w", "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}]},
    {"role": "tool", "tool_call_id": "call_w", "content": "sunny in Rome"},
    {"role": "assistant", "content": "answer 3: sunny"},
]
for i in range(4, 2000, 2):
    history.append({"role": "user", "content": f"question {i}"})
    history.append({"role": "assistant", "content": f"answer {i + 1}: " + "words " * (i % 5)})
fragola = Fragola.scripted([brain] * 10)
agent = fragola.agent(name="long-talker", tools=[weather], messages=history)
'''


def notebook(root: Path, name: str) -> None:
    scenarios.write(root / name, scenarios.SETUP + "\n" + SCRIPT, "%fragola_tree agent",
                    title="Fork from here")


def row(panel: Any, index: int) -> Any:
    """Message ``index`` of the panel, scrolled to (the list is windowed)."""
    box = panel.locator(".fragola-messages")
    target = panel.locator(f".fragola-msg[data-index='{index}']")
    # scrolled to the top until the row is drawn (a new panel's rows arrive newest first);
    # the locators are resolved again at each try, as a tree may still be swapping the panel
    # it shows (a handle taken before the swap scrolls a box no longer in the page)
    deadline = time.monotonic() + 30
    while target.count() != 1 and time.monotonic() < deadline:
        if box.count() == 1:
            box.evaluate("b => { b.scrollTop = 0; }")
        panel.page.wait_for_timeout(100)
    expect(target).to_have_count(1)
    target.scroll_into_view_if_needed()
    return target


def check_inert(root: Any, styles: int = 0) -> None:
    """No markup made of text (``styles``: the diff view's own ``<style>`` sheets, which
    must hold no text of a message)."""
    assert root.evaluate(NO_MARKUP_JS) == ["STYLE"] * styles
    sheets = root.locator("style").all_text_contents()
    assert not any("snow" in sheet or "<" in sheet for sheet in sheets), sheets
    assert "\u202e" not in root.inner_text() and "\u200b" not in root.inner_text()


def test_fork_from_here_edit_a_result_and_diff_two_branches(ui: UI) -> None:
    page = ui.page
    dialogs = watch_dialogs(page)
    notebook(ui.lab.root, "fromhere.ipynb")
    ui.open_and_run_all("fromhere.ipynb")
    out = h.cell(page, TREE)
    nodes = out.locator(".fragola-tree-node")
    panel = out.locator(".fragola-tree-branch .fragola-panel")
    expect(nodes).to_have_count(1)
    expect(nodes.nth(0).locator(".fragola-tree-count")).to_have_text("2000 msg")

    # the controls show on hover, and on focus (Tab reaches them)
    seven = row(panel, 7)
    tools = seven.locator(".fragola-row-tools")
    assert tools.evaluate("e => getComputedStyle(e).opacity") == "0"
    seven.hover()
    expect(tools).to_have_css("opacity", "1")
    ui.shot("row-tools-on-hover", panel)
    page.mouse.move(0, 0)
    seven.locator(".fragola-fork-here").focus()
    expect(tools).to_have_css("opacity", "1")
    expect(seven.locator(".fragola-fork-here")).to_have_attribute(
        "aria-label", "fork from message 7")

    # fork from message 7: the fork holds messages 0..6, is selected, and runs on by Step
    seven.locator(".fragola-fork-here").click()
    expect(nodes).to_have_count(2)
    fork_node = nodes.nth(1)
    expect(fork_node).to_have_class(re.compile(r"\bfragola-tree-selected\b"))
    expect(fork_node.locator(".fragola-tree-at")).to_have_text("at message #7")
    expect(panel.locator(".fragola-name")).to_have_text("long-talker-fork1")
    expect(panel.locator(".fragola-msg")).to_have_count(6)  # 0..6, the result in its call's row
    panel.locator(".fragola-step").click()
    expect(panel.locator(".fragola-msg-assistant").last).to_contain_text(
        "Answer to: question 6", timeout=30_000)
    expect(panel.locator(".fragola-status")).to_have_text("idle")
    expect(fork_node.locator(".fragola-tree-count")).to_have_text("8 msg")
    expect(nodes.nth(0).locator(".fragola-tree-count")).to_have_text("2000 msg")  # untouched
    ui.shot("forked-at-7-and-ran", out)

    # edit the weather call's result and run: the model's answer uses the edited result
    nodes.nth(0).click()
    expect(panel.locator(".fragola-name")).to_have_text("long-talker")
    call_row = row(panel, 1)
    call_row.locator(".fragola-call-line").click()  # open the call
    call_row.locator(".fragola-edit-result").click()
    editor = call_row.locator(".fragola-edit-here-text")
    expect(editor).to_have_value("sunny in Rome")
    expect(editor).to_be_focused()
    editor.fill(HOSTILE)
    ui.shot("editing-a-result", panel)
    panel.locator(".fragola-edit-here-run").click()
    expect(nodes).to_have_count(3)
    expect(nodes.nth(2)).to_have_class(re.compile(r"\bfragola-tree-selected\b"))
    expect(nodes.nth(2).locator(".fragola-tree-at")).to_have_text("at message #3")
    expect(nodes.nth(2).locator(".fragola-tree-edited")).to_have_text("edited by hand: #2")
    expect(panel.locator(".fragola-name")).to_have_text("long-talker-fork2")
    answer = panel.locator(".fragola-msg-assistant").last
    # the model was sent the text typed, alone: it answers with it
    expect(answer).to_contain_text("Answer from the result: " + SHOWN, timeout=30_000)
    expect(panel.locator(".fragola-call-amended .fragola-call-state")).to_have_text(
        "result edited by hand, not what the tool returned")
    expect(panel.locator(".fragola-call .fragola-result-text")).to_contain_text(SHOWN)
    check_inert(panel)
    ui.shot("edited-result-answered", out)

    # Escape closes an editor: nothing is forked (an edit the agent refuses: the kernel test)
    nodes.nth(0).click()
    expect(panel.locator(".fragola-name")).to_have_text("long-talker")  # the root's panel now
    first = row(panel, 0)
    first.hover()
    first.locator(".fragola-edit-here-open").click()
    expect(first.locator(".fragola-edit-here-text")).to_have_value("question 0: the weather?")
    first.locator(".fragola-edit-here-text").press("Escape")
    expect(first.locator(".fragola-edit-here")).to_have_count(0)
    expect(nodes).to_have_count(3)

    # tick the two forks: their diff between the tree and the panel, escaped
    nodes.nth(1).locator(".fragola-tree-pick").check()
    nodes.nth(2).locator(".fragola-tree-pick").check()
    compared = out.locator(".fragola-tree-compared")
    expect(compared.locator(".fragola-tree-diff")).to_be_visible()
    expect(compared.locator(".fragola-tree-diff-head")).to_contain_text(
        "diff of long-talker-fork1")
    expect(compared).to_contain_text("snow")
    check_inert(compared, styles=compared.locator("style").count())
    ui.shot("diff-of-two-forks", out)

    # dark theme, 700 px with the file browser open: nothing wider than the cell
    set_theme(page, "JupyterLab Dark")
    try:
        page.set_viewport_size({"width": 700, "height": 1000})
        if not page.locator("#filebrowser").is_visible():
            page.locator(".jp-SideBar [data-id='filebrowser']").click()
        ui.shot("dark-700-diff", compared)
        width = panel.evaluate(TOO_WIDE_JS)
        assert width["scroll"] <= width["client"] and not width["wide"], width
        area = out.locator(".jp-OutputArea-output").first
        assert area.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the tree is too wide"
        seven = row(panel, 1)
        seven.hover()
        for button in seven.locator(".fragola-row-act").all():
            b = button.bounding_box()
            assert b is not None and b["x"] >= 0 and b["x"] + b["width"] <= 700, b
        seven.locator(".fragola-edit-here-open").click()
        expect(seven.locator(".fragola-edit-here-text")).to_be_visible()
        ui.shot("dark-700-editor", panel)
        parts = out.locator(".fragola-row-act, .fragola-edit-here-label, .fragola-tree-at, "
                            ".fragola-tree-diff-head, .fragola-edit-here-run")
        ratios = parts.evaluate_all(CONTRAST_JS)
        assert len(ratios) >= 5, ratios
        low = [r for r in ratios if r["ratio"] < 4.5]
        assert low == [], low
        seven.locator(".fragola-edit-here-cancel").click()
    finally:
        page.set_viewport_size({"width": 1280, "height": 1100})
        set_theme(page, "JupyterLab Light")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert dialogs == [], dialogs
    ui.assert_clean()
