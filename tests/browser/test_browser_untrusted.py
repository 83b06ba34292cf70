"""A notebook executed elsewhere (a teacher's, run with nbclient as ``scripts/quickstart.sh``
does) opened in JupyterLab by someone else: untrusted, it shows each view's text line ("what
it is: run the cell, or trust the notebook") and its static copy, never a raw repr. Run, the
same notebook shows the live panels: an edited tool result is the value typed (the demo model
answers "30", shown as 30, not as an empty list item), marked "edited by hand", every message
numbered as ``state.messages[i]``; and its ``export_html`` file shows the same.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect

pytestmark = pytest.mark.timeout(300)

SEE = ": run the cell, or trust the notebook"
AGENT = '''\
fragola = Fragola.scripted()  # the demo model: it reports tool results as it reads them
@tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b
calculator = fragola.agent("calculator", tools=[add])
'''
TURN = "%%fragola calculator\nAdd 20 and 10"  # 0 user, 1 the call, 2 its result, 3 the answer
EDIT = '''\
what_if = calculator.fork("what_if", at=3)  # messages #0 to #2
what_if.edit(2, result="30.")               # what "edit result and run" does
await what_if.step()
export_html(what_if, "edited.html");  # the page is written to the file
'''
PANEL = "%fragola_panel what_if"
TURN_CELL, PANEL_CELL = 3, 5  # with the title cell first


def executed(root: Path, name: str) -> None:
    """The notebook, executed by nbclient (no browser, no trust), saved in the lab's root."""
    path = scenarios.write(root / name, scenarios.SETUP + "from fragola_nb import export_html",
                           AGENT, TURN, EDIT, PANEL, title="Shared by a teacher")
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(root)}}).execute()
    nbformat.write(notebook, str(path))


def test_a_shared_executed_notebook_says_what_each_view_is_then_runs_live(ui: UI) -> None:
    page = ui.page
    executed(ui.lab.root, "shared.ipynb")
    h.open_notebook(page, ui.lab, "shared.ipynb", start_kernel=False, wait_kernel=False)

    # untrusted: no panel, no raw repr; the line saying what the view is, then its copy
    for index, line in ((TURN_CELL, "fragola_nb turn panel of 'calculator', messages "
                         "#0 to #3" + SEE),
                        (PANEL_CELL, "fragola_nb panel of 'what_if', 4 messages" + SEE)):
        outputs = h.cell(page, index).locator(".jp-OutputArea-output")
        # a turn's text says where its time went on a second line (issue 34)
        timed = r"\s+timeline · turn .+ · between calls .+" if index == TURN_CELL else ""
        expect(outputs.nth(0)).to_have_text(re.compile(f"^{re.escape(line)}{timed}$"))
        expect(outputs.nth(0).locator(".fragola-panel")).to_have_count(0)
        copy = outputs.nth(1)
        what = line.removeprefix("fragola_nb ").removesuffix(SEE)
        expect(copy.locator(".fragola-static-note")).to_have_text(
            f"static copy of the {what}, as saved")
        expect(copy.locator(".fragola-conversation")).to_be_visible()
        expect(copy.locator(".fragola-conversation .fragola-role").first).to_contain_text("#")
    expect(page.locator(".jp-Notebook")).not_to_contain_text("AgentPanel(")
    copy = h.cell(page, PANEL_CELL).locator(".jp-OutputArea-output").nth(1)
    expect(copy.locator(".fragola-msg-tool .fragola-role")).to_have_text(
        "#2 · tool edited by hand")
    expect(copy.locator(".fragola-msg-tool .fragola-result-text")).to_have_text("30.")
    expect(copy.locator(".fragola-msg-assistant").last).to_contain_text("30")
    ui.shot("untrusted-shared-notebook")
    h.cell(page, PANEL_CELL).scroll_into_view_if_needed()
    ui.shot("untrusted-edited-copy", h.cell(page, PANEL_CELL))

    # run it: live panels, the edited result as typed and marked, numbered as the history
    h.wait_kernel_idle(page, 60_000)
    h.run_all_and_wait(page, 120_000)
    panel = h.cell(page, PANEL_CELL).locator(".fragola-panel")
    expect(panel.locator(".fragola-name")).to_have_text("what_if", timeout=60_000)
    rows = panel.locator(".fragola-msg")
    expect(rows).to_have_count(3)  # the result is folded into its call's row
    expect(rows.locator(".fragola-role .fragola-index")).to_have_text(["#0", "#1", "#3"])
    call = panel.locator(".fragola-call-amended")
    expect(call.locator(".fragola-call-state")).to_have_text(
        "result edited by hand, not what the tool returned")
    call.locator(".fragola-call-line").click()
    expect(call.locator(".fragola-call-label").last).to_have_text("result #2")
    expect(call.locator(".fragola-result-text")).to_have_text("30.")
    answer = rows.nth(2).locator(".fragola-md")
    expect(answer).to_contain_text("30")  # "30." alone is text, not an empty list item
    expect(answer.locator("ol, li")).to_have_count(0)
    expect(panel).not_to_contain_text("The user edited")
    ui.shot("live-edited-result", panel)
    ui.assert_clean()

    # the export of the fork, opened from disk: the same numbers, the same mark
    page.goto((ui.lab.root / "edited.html").as_uri())
    messages = page.locator(".fx-detail .fx-msg")
    expect(messages.locator(".fx-index")).to_have_text(["#2", "#3"])  # opened at its fork point
    page.locator(".fx-fold-toggle").click()  # the two it shares with calculator, shown
    expect(messages).to_have_count(4)
    expect(messages.locator(".fx-index")).to_have_text(["#0", "#1", "#2", "#3"])
    expect(messages.nth(2).locator(".fx-edited")).to_have_text("edited by hand")
    expect(messages.nth(3).locator(".fx-md")).to_contain_text("30")
    expect(messages.nth(3).locator(".fx-md li")).to_have_count(0)
    expect(page.locator(".fx-node-edited")).to_have_count(1)
    ui.shot("export-edited-result")
