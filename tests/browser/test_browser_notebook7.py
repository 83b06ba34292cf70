"""The agent panel in Notebook 7 (the ``notebook`` package's single-document UI), not only in
JupyterLab: the lab server of these tests also serves Notebook 7 at ``/notebooks/<path>``
(the ``notebook`` server extension is enabled by the package's own config file in
``<sys.prefix>/etc/jupyter/jupyter_server_config.d/notebook.json``, which the harness's
private ``JUPYTER_CONFIG_DIR`` does not hide).

A person opens the notebook at ``/notebooks/<name>``, Run > Run All Cells, approves the
paused tool call from the panel's card, sees the run finish, then types a message in the
panel's message box and sees the reply in the same panel.

Notebook 7 has no JupyterLab status bar: the kernel is waited on through the notebook
toolbar's execution indicator (the circle next to "Python 3 (ipykernel)") and the cells'
execution counts.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect

pytestmark = pytest.mark.timeout(240)

NOTEBOOK = "notebook7.ipynb"
TURN_CELL = 2  # cells: title, setup, the %%fragola turn
EXECUTED = re.compile(r"^\[\d+\]:$")

# Notebook 7 DOM (checked on notebook 7.6 over JupyterLab 4.6): one document, no tabs, no
# status bar; the kernel's busy/idle circle sits in the notebook's toolbar.
SEL_NB7_PANEL = "#main-panel .jp-NotebookPanel"
SEL_NB7_IDLE = f"{SEL_NB7_PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']"

# An uncaught error that Notebook 7 itself throws on every page load (also on /tree, and on a
# notebook holding only ``1+1``; never in JupyterLab): its keyboard-shortcuts plugin reacts to
# the settings registry announcing ``@jupyterlab/docmanager-extension:plugin`` as changed, a
# plugin Notebook 7 has no settings for, and reads ``.schema`` of undefined. Only this exact
# message is let through; any other uncaught error fails the test.
_SCHEMA_OF_UNDEFINED = r"TypeError: Cannot read properties of undefined \(reading 'schema'\)"
NB7_OWN_PAGE_ERROR = re.compile(  # as conftest's Tab records it: "name: message\nstack"
    rf"^{_SCHEMA_OF_UNDEFINED}\n{_SCHEMA_OF_UNDEFINED}\n"
    r"\s+at \S+/static/notebook/notebook_core\.")


# Another of Notebook 7's own, seen in some runs only (the whole suite, on a loaded machine):
# its router asks for JupyterLab's file-browser command, which a notebook page does not
# register. Thrown from notebook_core alone, before any output exists.
NB7_OPEN_PATH = re.compile(
    r"^Error: Command 'filebrowser:open-path' not registered\.\n"
    r"Error: Command 'filebrowser:open-path' not registered\.\n"
    r"\s+at [^\n]*/static/notebook/notebook_core\.")


def is_nb7_own_error(error: str) -> bool:
    return any(known.match(error) for known in (NB7_OWN_PAGE_ERROR, NB7_OPEN_PATH))


SCRIPT = '''\
def last_user_text(request):
    """The content of the last user message the model received."""
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]

fragola = Fragola.scripted([
    tool_calls(call("add", {"x": 2, "y": 3})),
    lambda request: reply("Final answer, the tool said: " + last_tool_text(request)),
    lambda request: reply("You wrote: " + last_user_text(request)),
])
agent = fragola.agent(name="calc7", instructions="Use your tools.", tools=[add])
'''


def write_notebook(ui: UI) -> None:
    scenarios.write(ui.lab.root / NOTEBOOK,
                    scenarios.SETUP + "\n" + scenarios.ADD_TOOL + "\n" + SCRIPT,
                    "%%fragola agent\nPlease add 2 and 3",
                    title="The panel in Notebook 7")


def open_in_notebook7(page: Any, lab: h.LabServer, path: str, timeout: float = 60_000) -> None:
    """Open ``/notebooks/<path>`` (Notebook 7 starts the kernel itself, as for a person) and
    wait until the toolbar's kernel indicator says idle."""
    page.goto(f"{lab.url}/notebooks/{path}")
    expect(page.locator(f"{SEL_NB7_PANEL} .jp-Notebook .jp-Cell")).not_to_have_count(
        0, timeout=timeout)
    expect(page.locator(f"{SEL_NB7_PANEL} .jp-Toolbar-kernelName")).to_have_text(
        "Python 3 (ipykernel)", timeout=timeout)
    expect(page.locator(SEL_NB7_IDLE)).to_have_count(1, timeout=timeout)


def run_all_from_menu(ui: UI) -> None:
    """Run > Run All Cells in Notebook 7's menu bar."""
    page = ui.page
    page.locator("#jp-MainMenu .lm-MenuBar-item", has_text="Run").first.click()
    item = page.locator(".lm-Menu .lm-Menu-item[data-command='runmenu:run-all']")
    expect(item).to_contain_text("Run All Cells")
    ui.shot("run-menu")
    item.click()


def wait_all_ran(page: Any, timeout: float = 120_000) -> None:
    """Every code cell shows an execution count ("[3]:", not "[*]:") and the kernel is idle."""
    prompts = page.locator(f"{SEL_NB7_PANEL} .jp-CodeCell .jp-InputArea-prompt")
    expect(prompts).to_have_count(2)
    for i in range(2):
        expect(prompts.nth(i)).to_have_text(EXECUTED, timeout=timeout)
    expect(page.locator(SEL_NB7_IDLE)).to_have_count(1, timeout=timeout)


def test_approve_and_chat_in_notebook7(ui: UI) -> None:
    page = ui.page
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    write_notebook(ui)
    open_in_notebook7(page, ui.lab, NOTEBOOK)
    assert page.url == f"{ui.lab.url}/notebooks/{NOTEBOOK}"  # Notebook 7, not JupyterLab
    expect(page.locator("#jp-NotebookLogo")).to_be_visible()
    ui.shot("opened-in-notebook7")
    run_all_from_menu(ui)
    wait_all_ran(page)

    turn = page.locator(f"{SEL_NB7_PANEL} .jp-Cell").nth(TURN_CELL)
    panel = turn.locator(".fragola-panel")
    expect(panel).to_have_count(1)
    expect(panel).to_be_visible()
    expect(panel.locator(".fragola-name")).to_have_text("calc7")
    expect(panel.locator(".fragola-status")).to_have_text("waiting")
    expect(panel.locator(".fragola-strip")).to_have_text("1 call needs your decision")
    card = panel.locator(".fragola-card")
    expect(card).to_have_count(1)
    expect(card.locator(".fragola-card-summary")).to_have_text(
        "add(x=2, y=3)needs your approval")
    expect(card.locator(".fragola-approve")).to_be_enabled()
    # the line under the panel, updated in place (update_display_data) after the click
    line = turn.locator(".jp-OutputArea-output").last
    expect(line).to_have_text(
        "fragola_nb: 'calc7' is waiting on 1 tool call(s): use the controls above")
    ui.shot("waiting-for-approval", panel)
    ui.shot("waiting-for-approval-page")

    card.locator(".fragola-approve").click()
    expect(panel.locator(".fragola-strip")).to_have_text("finished", timeout=30_000)
    expect(panel.locator(".fragola-status")).to_have_text("idle")
    ran = panel.locator(".fragola-msg-assistant .fragola-call-ran")
    expect(ran).to_have_count(1)
    expect(ran.locator(".fragola-result-text")).to_have_text("5")
    expect(panel.locator(".fragola-msg-assistant").last).to_have_text(
        re.compile("Final answer, the tool said: 5"))
    expect(panel.locator(".fragola-card")).to_have_count(0)
    expect(panel.locator(".fragola-notice")).to_have_text("")
    expect(line).to_have_text("fragola_nb: 'calc7' went on after the decisions: finished")
    ui.shot("approved-and-finished", panel)

    box = panel.locator(".fragola-chat-input")
    expect(box).to_be_enabled()
    box.fill("Thanks, and hello from Notebook 7")
    box.press("Enter")
    expect(box).to_have_value("")
    expect(panel.locator(".fragola-msg-user").last).to_have_text(
        re.compile("Thanks, and hello from Notebook 7"), timeout=30_000)
    expect(panel.locator(".fragola-msg-assistant").last).to_have_text(
        re.compile("You wrote: Thanks, and hello from Notebook 7"), timeout=30_000)
    expect(panel.locator(".fragola-status")).to_have_text("idle")
    expect(panel.locator(".fragola-strip")).to_have_text("finished")
    expect(page.locator(".fragola-panel")).to_have_count(1)  # the reply came in this panel
    # nothing sticks out of the panel in Notebook 7's narrower, centred document
    assert panel.evaluate("p => p.scrollWidth <= p.clientWidth"), "the panel overflows"
    ui.shot("typed-message-answered", panel)
    ui.shot("final-page")

    assert dialogs == [], dialogs
    expect(page.locator(".jp-Dialog")).to_have_count(0)  # no Jupyter modal either
    unexpected = [e for e in ui.page_errors() if not is_nb7_own_error(e)]
    assert not unexpected, f"uncaught errors in the page: {unexpected}"
    assert not ui.console_errors(), f"console errors: {ui.console_errors()}"
