"""The live panel in JupyterLab: the reply streams in, Stop stops a run, hostile text stays
text."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Error as PlaywrightError

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect

pytestmark = pytest.mark.timeout(240)

STORY = (
    "Once upon a time a small agent lived in a notebook. Every morning it read the cells "
    "above it, called its tools with care, and waited politely for a person to approve. "
    "One day the person clicked Fork, and the agent found it had a twin on another branch."
)


def test_reply_streams_into_the_panel(ui: UI) -> None:
    # 4 characters a chunk, 40 ms apart: the reply takes about 2 s to arrive; the kernel sends
    # what is new at most every 0.15 s, and the browser shows it in a labelled block
    scenarios.streaming(ui.lab.root, "streaming.ipynb", STORY, chunk_delay=0.04, interval=0.15)
    h.open_notebook(ui.page, ui.lab, "streaming.ipynb")
    h.run_all_cells(ui.page)
    panel = h.cell(ui.page, 2).locator(".fragola-panel")
    block = panel.locator(".fragola-stream")
    stream = block.locator(".fragola-stream-text")
    final = panel.locator(".fragola-msg-assistant:not(.fragola-stream) .fragola-md")
    samples: list[str] = []
    labels: set[str] = set()
    shot_taken = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if final.count():  # the stored message replaced the streamed text: done
            break
        try:
            text = stream.text_content(timeout=200) or ""
            label = block.locator(".fragola-role").text_content(timeout=200) or ""
        except PlaywrightError:  # the block went between count() and the read
            continue
        if text and (not samples or samples[-1] != text):
            samples.append(text)
            labels.add(label)
            if not shot_taken and len(text) > 40:
                ui.shot("mid-stream", panel)
                shot_taken = True
        time.sleep(0.05)  # sampling rate of a reader, not a wait for a state
    expect(final).to_have_text(STORY, timeout=30_000)
    expect(block).to_have_count(0)  # gone once the message is stored
    h.wait_kernel_idle(ui.page)
    ui.shot("streamed", panel)

    partial = [s for s in samples if len(s) < len(STORY)]
    assert len(partial) >= 3, f"the reply was not seen growing: {samples!r}"
    assert labels == {"assistant · streaming…"}, labels
    for sample in samples:
        assert STORY.startswith(sample), f"not a prefix of the reply: {sample!r}"
    lengths = [len(s) for s in samples]
    assert lengths == sorted(lengths), f"the streamed text shrank: {lengths}"
    ui.assert_clean()


def test_stop_a_hanging_cell_and_a_hanging_step(ui: UI) -> None:
    scenarios.stop(ui.lab.root, "stop.ipynb")
    h.open_notebook(ui.page, ui.lab, "stop.ipynb")
    h.run_all_cells(ui.page)

    # 1. the %%fragola cell whose model never answers: the cell is still running
    sleepy = h.cell(ui.page, 3).locator(".fragola-panel")
    expect(sleepy.locator(".fragola-status")).to_have_text("generating", timeout=60_000)
    expect(h.cell(ui.page, 3).locator(".jp-InputArea-prompt")).to_have_text("[*]:")
    expect(sleepy.locator(".fragola-stop")).to_be_enabled()
    expect(sleepy.locator(".fragola-step")).to_be_disabled()
    expect(sleepy.locator(".fragola-step")).to_have_css("cursor", "not-allowed")
    orange = sleepy.locator(".fragola-stop").evaluate("e => getComputedStyle(e).backgroundColor")
    ui.shot("cell-hanging", sleepy)
    sleepy.locator(".fragola-stop").click()
    expect(sleepy.locator(".fragola-status")).to_have_text("idle", timeout=30_000)
    expect(sleepy.locator(".fragola-status")).to_have_class(re.compile(r"\bfragola-status-idle\b"))
    expect(h.cell(ui.page, 3).locator(".jp-InputArea-prompt")).to_have_text(
        re.compile(r"\[\d+\]:"), timeout=30_000)  # the cell ended
    h.wait_kernel_idle(ui.page)
    expect(sleepy.locator(".fragola-msg-user")).to_contain_text("Are you there?")  # kept
    expect(sleepy.locator(".fragola-strip")).to_have_text("stopped")
    expect(sleepy.locator(".fragola-stop")).to_be_disabled()
    # grey, not a faded orange that looks clickable
    expect(sleepy.locator(".fragola-stop")).to_have_css("cursor", "not-allowed")
    expect(sleepy.locator(".fragola-stop")).not_to_have_css("background-color", orange)
    expect(sleepy.locator(".fragola-step")).to_be_enabled()
    ui.shot("cell-stopped", sleepy)

    # 2. the panel's Step button starts a run (the kernel is idle) that hangs too
    stepper = h.cell(ui.page, 2).locator(".fragola-panel")
    expect(stepper.locator(".fragola-status")).to_have_text("idle")
    expect(stepper.locator(".fragola-msg-assistant")).to_contain_text("First answer.")
    stepper.locator(".fragola-step").click()
    expect(stepper.locator(".fragola-status")).to_have_text("generating", timeout=30_000)
    expect(stepper.locator(".fragola-stop")).to_be_enabled()
    ui.shot("step-hanging", stepper)
    stepper.locator(".fragola-stop").click()
    expect(stepper.locator(".fragola-status")).to_have_text("idle", timeout=30_000)
    expect(stepper.locator(".fragola-step")).to_be_enabled()
    expect(stepper.locator(".fragola-notice")).to_have_text("")
    expect(stepper.locator(".fragola-strip")).to_have_text("stopped")
    ui.shot("step-stopped", stepper)
    ui.assert_clean()


def test_hostile_text_shows_as_text(ui: UI) -> None:
    scenarios.hostile(ui.lab.root, "hostile.ipynb")
    ui.open_and_run_all("hostile.ipynb")
    page, hostile = ui.page, scenarios.HOSTILE_SHOWN
    turn = h.cell(page, 2).locator(".fragola-panel")
    tree = h.cell(page, 3)
    expect(turn.locator(".fragola-status")).to_have_text("idle")
    for panel in (turn, tree.locator(".fragola-panel")):
        expect(panel.locator(".fragola-call-ran .fragola-result-text")).to_have_text(
            "page body: " + hostile)
        reply = panel.locator(".fragola-msg-assistant .fragola-md").last

        expect(reply).to_contain_text(scenarios.HOSTILE_SCRIPT)
        expect(reply).to_contain_text(scenarios.HOSTILE_IMG)
        expect(reply).to_contain_text("file\\u202egnp.exe pay\\u200bpal")
        # nothing in the panel became an element: no script, no image
        assert panel.locator("script, img").count() == 0
        # and no character that reorders or hides text reached the page
        assert "\u202e" not in panel.inner_text() and "\u200b" not in panel.inner_text()
        # a 5,000-character token and a 600-character URL wrap: nothing is wider than the panel
        assert panel.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
        widths = panel.locator(".fragola-msg").evaluate_all("els => els.map(e => e.scrollWidth)")
        assert max(widths) <= panel.evaluate("e => e.clientWidth")
    ui.shot("hostile-turn", turn)

    # a hostile fork name, typed into the panel under the tree, goes through the
    # anywidget's nodes and the panel's header as text too
    fork_name = '<img src=x onerror="window.__pwned=1"> \u202egnp.exe'
    shown = fork_name.replace("\u202e", "\\u202e")
    tree.locator(".fragola-fork-name").fill(fork_name)
    tree.locator(".fragola-fork").click()
    node = tree.locator(".fragola-tree-node").nth(1)
    expect(node.locator(".fragola-tree-name")).to_have_text("└ " + shown)
    expect(tree.locator(".fragola-panel .fragola-name")).to_have_text(shown)
    assert tree.locator("script, img").count() == 0
    ui.shot("hostile-fork-name", tree)

    page.wait_for_timeout(500)  # an onerror handler would have run by now
    assert page.evaluate("typeof window.__pwned") == "undefined"
    ui.assert_clean()
