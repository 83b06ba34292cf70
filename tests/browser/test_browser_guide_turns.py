"""Issue 27, a teacher after Run All, in JupyterLab: each ``%%fragola`` panel of the lesson
notebooks shows its own turn (its messages, status and step count as they ended), live and
in the saved widget state; the approval cards the notebook decides in code stay, saying so;
a 401 through the official client is said once in the panel. Screenshots at 700 px in the
dark theme, to read against the notebook's text.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

import nbformat
import pytest
from playwright.sync_api import expect

from . import jlab_harness as h
from . import scenarios
from .conftest import REPO, UI
from .test_browser_long_panel import set_theme

pytestmark = pytest.mark.timeout(300)

NOTEBOOKS = REPO / "notebooks"


def _index(path: str, starts: str) -> int:
    """The index (among all cells, as the page numbers them) of the cell starting so."""
    nb = nbformat.read(str(NOTEBOOKS / path), as_version=4)
    found = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
             and c.source.startswith(starts)]
    assert len(found) == 1, (starts, found)
    return found[0]


def _panel(page: Any, index: int) -> Any:
    return h.cell(page, index).locator(".fragola-panel").first


def _saved_state(saved: dict[str, Any], index: int) -> dict[str, Any]:
    """The saved widget state of the panel cell ``index`` shows (Save Widget State)."""
    [model_id] = [o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
                  for o in saved["cells"][index]["outputs"]
                  if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    states = saved["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]
    return states["state"][model_id]["state"]  # type: ignore[no-any-return]


def _dark_narrow(ui: UI, shots: dict[str, Any]) -> None:
    page = ui.page
    set_theme(page, "JupyterLab Dark")
    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        for name, panel in shots.items():
            box = panel.bounding_box()
            assert box is not None and box["width"] <= 700, name
            ui.shot(f"dark-700-{name}", panel)
    finally:
        page.set_viewport_size({"width": 1280, "height": 1100})
        set_theme(page, "JupyterLab Light")


def test_teaching_example_panels_keep_their_own_turns_after_run_all(ui: UI) -> None:
    shutil.copytree(NOTEBOOKS, ui.lab.root / "notebooks", dirs_exist_ok=True)
    rel = "notebooks/teaching_example.ipynb"
    ui.open_and_run_all(rel, timeout=180_000)
    page = ui.page
    part1 = _panel(page, _index("teaching_example.ipynb", "%%fragola converter\n"))
    part2 = _panel(page, _index("teaching_example.ipynb", "%%fragola converter --by 1"))
    part4a = _panel(page, _index("teaching_example.ipynb", "%%fragola chatty"))

    # Part 2: its question, the tool's result, and nothing of Part 3 or Part 4b
    expect(part2.locator(".fragola-messages")).to_contain_text("30 degrees celsius")
    for later in ("10 km", "5 km"):
        expect(part2.locator(".fragola-messages")).not_to_contain_text(later)
    expect(part2.locator(".fragola-status")).to_have_text("idle")
    expect(part2.locator(".fragola-facts")).to_contain_text(re.compile(r"steps 1/\d"))
    expect(part2.locator(".fragola-strip")).to_have_text("step budget used")
    expect(part2.locator(".fragola-detached")).to_contain_text("its turn ended")
    # Part 1: its own turn, finished
    expect(part1.locator(".fragola-messages")).to_contain_text("42 km")
    expect(part1.locator(".fragola-messages")).not_to_contain_text("30 degrees")
    expect(part1.locator(".fragola-strip")).to_have_text("finished")
    # Part 4a: the step budget, as the text beside it explains: 3 of 3, not 5 of 3
    expect(part4a.locator(".fragola-facts")).to_contain_text("steps 3/3")
    expect(part4a.locator(".fragola-strip")).to_have_text("step budget used")
    expect(part4a.locator(".fragola-messages")).not_to_contain_text("are 0.62, 1.24")

    _dark_narrow(ui, {"part2": part2, "part4a": part4a})

    saved = h.save_notebook(page, ui.lab, rel)
    state = _saved_state(saved, _index("teaching_example.ipynb", "%%fragola converter --by 1"))
    assert state["head"]["steps"] == 1 and state["strip"]["kind"] == "step_limit"
    saved_text = repr(state["saved_rows"])
    assert "30 degrees" in saved_text and "10 km" not in saved_text
    ui.assert_clean()


def test_tools_and_approvals_cards_stay_decided_in_code_after_run_all(ui: UI) -> None:
    shutil.copytree(NOTEBOOKS, ui.lab.root / "notebooks", dirs_exist_ok=True)
    rel = "notebooks/tools_and_approvals.ipynb"
    nb = "tools_and_approvals.ipynb"
    ui.open_and_run_all(rel, timeout=180_000)
    page = ui.page
    first = _panel(page, _index(nb, "%%fragola desk\nWhat is the weather in Paris?"))
    expect(first.locator(".fragola-messages")).to_contain_text("Paris")
    for later in ("JPY", "XYZ"):  # §2's conversions, run in code later
        expect(first.locator(".fragola-messages")).not_to_contain_text(later)

    expected = {
        "%%fragola desk\nPlease send an email": ["✓ send_email(", "approved in code"],
        '%%fragola desk\nPay invoice of 250': ["✓ pay_invoice(",
                                               "approved with edited arguments in code"],
        '%%fragola desk\nPay invoice of 900': [
            "✗ pay_invoice(", "rejected in code: Mallory is not one of our suppliers"],
        "%%fragola desk\nPlease ask the manager": ["✓ ask_manager(", "answered in code"],
    }
    shots = {}
    for starts, parts in expected.items():
        panel = _panel(page, _index(nb, starts))
        decision = panel.locator(".fragola-decision")
        expect(decision).to_have_count(1)
        for part in parts:
            expect(decision).to_contain_text(part)
        expect(panel.locator(".fragola-card")).to_have_count(0)  # nothing left to decide
        expect(panel.locator(".fragola-strip")).to_have_text("finished")
        shots[starts.split("\n")[1][:20]] = panel
    clerk = _panel(page, _index(nb, "%%fragola clerk"))
    expect(clerk.locator(".fragola-decision")).to_have_count(2)
    expect(clerk.locator(".fragola-decision-reject")).to_contain_text(
        "rejected in code: not a supplier")
    shots["clerk"] = clerk

    _dark_narrow(ui, shots)
    saved = h.save_notebook(page, ui.lab, rel)
    state = _saved_state(saved, _index(nb, "%%fragola desk\nPlease send an email"))
    assert [d["text"] for d in state["decisions"]] == ["approved in code"]
    ui.assert_clean()


def test_a_401_is_said_once_in_the_panel(ui: UI) -> None:
    scenarios.write(
        ui.lab.root / "unauthorized.ipynb",
        scenarios.SETUP + "from fragola_nb.models.scripted import fail\n"
        "bad = Fragola.scripted([fail(401, 'Incorrect API key provided: sk-abc***xyz')])\n"
        "bot = bad.agent(name='bot')\n",
        "%%fragola bot\nhi",
    )
    ui.open_and_run_all("unauthorized.ipynb")
    page = ui.page
    panel = _panel(page, 1)
    expect(panel.locator(".fragola-strip")).to_have_text("failed")
    expect(panel.locator(".fragola-notice")).to_contain_text("HTTP 401")
    text = panel.inner_text()
    assert text.count("Incorrect API key provided") == 1, text
    error = h.cell(page, 1).locator("[data-mime-type='application/vnd.jupyter.stderr']")
    expect(error).to_contain_text("401")  # the cell's error stays (Run All stops there)
    ui.shot("401-once", h.cell(page, 1))
    ui.assert_clean()
