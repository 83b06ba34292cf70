"""Approval by clicking, in JupyterLab: ``%%fragola`` turns pause on a tool call that needs
approval; a person decides each from its panel (Approve, Reject with a typed reason, Approve
edited arguments, Answer by hand with a typed result) and the run resumes in the same panel.

One notebook holds four paused agents, one per test (one kernel, one Run All). Each agent's
final answer quotes the tool message the model received, so seeing it in the panel proves
the decision reached the model.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, SharedNotebook, expect, shared_notebook, shared_ui

pytestmark = pytest.mark.timeout(240)

NOTEBOOK = "approvals.ipynb"
# cells: title, setup, then one %%fragola cell per agent, in scenarios.APPROVERS order
TURN_CELL = {agent: 2 + i for i, agent in enumerate(scenarios.APPROVERS)}


@pytest.fixture(scope="module")
def notebook(browser: Any, lab: h.LabServer) -> Iterator[SharedNotebook]:
    yield from shared_notebook(browser, lab)


def _prepare(ui: UI) -> None:
    scenarios.approvals(ui.lab.root, NOTEBOOK)
    ui.open_and_run_all(NOTEBOOK)
    ui.shot("run-all-four-paused")


@pytest.fixture
def ui(notebook: SharedNotebook, lab: h.LabServer,
       request: pytest.FixtureRequest) -> Iterator[UI]:
    yield from shared_ui(notebook, lab, request, _prepare)


def paused_panel(ui: UI, agent: str) -> Any:
    """The agent's turn panel, checked to be waiting on one approval card with its controls."""
    panel = h.cell(ui.page, TURN_CELL[agent]).locator(".fragola-panel")
    expect(panel).to_be_visible()
    expect(panel.locator(".fragola-name")).to_have_text(agent)
    badge = panel.locator(".fragola-status")
    expect(badge).to_have_text("waiting")
    expect(badge).to_have_class(re.compile(r"\bfragola-status-waiting\b"))
    expect(panel.locator(".fragola-strip")).to_have_text("1 call needs your decision")
    # the call's row in the conversation waits too
    call = panel.locator(".fragola-msg-assistant .fragola-call")
    expect(call).to_have_count(1)
    expect(call).to_have_class(re.compile(r"\bfragola-call-asked\b"))
    card = panel.locator(".fragola-card")
    expect(card).to_have_count(1)
    expect(card).to_have_attribute("data-call-id", "call_1")
    expect(card.locator(".fragola-card-summary")).to_have_text(
        "add(x=2, y=3)needs your approval")
    expect(card.locator(".fragola-card-full pre.fragola-args")).to_contain_text('"x": 2')
    for control in (".fragola-approve", ".fragola-reject", ".fragola-edit-toggle",
                    ".fragola-answer-toggle"):
        expect(card.locator(control)).to_be_visible()
        expect(card.locator(control)).to_be_enabled()
    # the forms open on demand
    for form in (".fragola-reason", ".fragola-args-edit", ".fragola-inject-text"):
        expect(card.locator(form)).to_be_hidden()
    expect(panel.locator(".fragola-stop")).to_be_enabled()  # a paused run can be stopped
    ui.shot("waiting-for-approval", panel)
    return panel


def expect_answered(panel: Any, tool_text: str, state: str) -> None:
    """The call's row shows ``tool_text`` as its result and ``state`` as its class, the final
    answer quotes it, the agent is idle, the card is gone and nothing shows an error."""
    expect(panel.locator(".fragola-status")).to_have_text("idle", timeout=30_000)
    call = panel.locator(".fragola-msg-assistant .fragola-call")
    expect(call).to_have_count(1)
    expect(call).to_have_class(re.compile(rf"\bfragola-call-{state}\b"))
    expect(call.locator(".fragola-result-text")).to_have_text(tool_text)
    expect(panel.locator(".fragola-msg-assistant").last).to_contain_text(
        "Final answer, the tool said: " + tool_text)
    expect(panel.locator(".fragola-card")).to_have_count(0)
    expect(panel.locator(".fragola-strip")).to_have_text("finished")
    expect(panel.locator(".fragola-notice")).to_have_text("")


def test_approve_runs_the_tool_and_the_run_ends(ui: UI) -> None:
    panel = paused_panel(ui, "approver")
    # the line under the panel is updated in place (update_display_data from the click)
    line = h.cell(ui.page, TURN_CELL["approver"]).locator(".jp-OutputArea-output").last
    expect(line).to_have_text(
        "fragola_nb: 'approver' is waiting on 1 tool call(s): use the controls above")
    panel.locator(".fragola-approve").click()
    expect_answered(panel, "5", "ran")
    expect(panel.locator(".fragola-call-line")).to_contain_text("✓")
    expect(panel.locator(".fragola-facts")).to_contain_text("steps 2/5")
    expect(line).to_have_text("fragola_nb: 'approver' went on after the decisions: finished")
    ui.shot("approved", panel)
    ui.assert_clean()


def test_reject_with_a_typed_reason(ui: UI) -> None:
    panel = paused_panel(ui, "rejecter")
    panel.locator(".fragola-reject").click()
    reason = panel.locator(".fragola-reason")
    expect(reason).to_be_focused()
    reason.fill("numbers this small, add them yourself")
    ui.shot("reason-typed", panel)
    panel.locator(".fragola-reject-send").click()
    expect_answered(
        panel,
        "The user rejected this call to add. Reason: numbers this small, add them yourself",
        "rejected",
    )
    expect(panel.locator(".fragola-call-state")).to_have_text(
        "rejected: numbers this small, add them yourself")
    ui.shot("rejected", panel)
    ui.assert_clean()


def test_edit_arguments_wrong_then_right(ui: UI) -> None:
    panel = paused_panel(ui, "editor")
    panel.locator(".fragola-edit-toggle").click()
    editor = panel.locator(".fragola-args-edit")
    expect(editor).to_have_value('{\n  "x": 2,\n  "y": 3\n}')
    error = panel.locator(".fragola-card-error")

    editor.fill('{"x": "forty", "y": 2}')  # not an int: the tool's schema refuses it
    panel.locator(".fragola-edit-approve").click()
    expect(error).to_contain_text("InvalidArguments")
    expect(error).to_contain_text("x: Input should be a valid integer")
    expect(panel.locator(".fragola-status")).to_have_text("waiting")  # nothing was decided
    expect(panel.locator(".fragola-edit-approve")).to_be_enabled()
    ui.shot("invalid-arguments", panel)

    editor.fill("[40, 2]")  # JSON, but not an object
    panel.locator(".fragola-edit-approve").click()
    expect(error).to_contain_text("must be a JSON object")

    editor.fill('{"x": 40, "y": 2}')
    panel.locator(".fragola-edit-approve").click()
    # the model is told the person changed its arguments
    expect_answered(panel, '(The user edited the arguments before this call ran: '
                           '{"x": 40, "y": 2})\n42', "edited")
    ui.shot("edited-and-approved", panel)
    ui.assert_clean()


def test_inject_a_typed_result(ui: UI) -> None:
    panel = paused_panel(ui, "injector")
    panel.locator(".fragola-answer-toggle").click()
    panel.locator(".fragola-inject-text").fill("seven, by hand")
    panel.locator(".fragola-inject").click()
    expect_answered(panel, "seven, by hand", "injected")
    expect(panel.locator(".fragola-call-state")).to_have_text("answered by hand")
    ui.shot("injected", panel)
    ui.assert_clean()
