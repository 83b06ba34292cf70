"""Issue 34 as a person sees it: a ``%%fragola`` turn of 200 tool steps, whose panel sends what
changed, paced (``panel.outbox.Outbox``, ``panel.timeline_feed.TimelineFeed``), still shows every
step: the last one on screen when the turn ends, the header's step count right, the first
call reachable by scrolling up, the waterfall's totals, and every row and bar in the widget
state a saved notebook keeps; readable at 700 px in the dark theme. Each step's call streams
into the panel before it is stored, and the paced message that brings its row also clears
its stream: no frame shows a stored call beside its streamed preview."""

from __future__ import annotations

from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect
from .test_browser_guardrails_view import inside
from .test_browser_long_panel import set_theme, shown_in_box

pytestmark = pytest.mark.timeout(300)

STEPS = 200
SCRIPT = f'''\
@tool
def add(x: int) -> int:
    """Add one."""
    return x + 1

def brain(request):
    done = sum(1 for m in request["messages"] if m["role"] == "tool")
    return tool_calls(call("add", {{"x": done}})) if done < {STEPS} else reply("all done")

long = Fragola.scripted(brain=brain).agent(name="long", tools=[add], max_step={STEPS + 5})
'''
TURN = 2
# Each frame: a streamed preview ("→ add({"x": 5})") whose call's row is drawn too, recorded.
BOTH_JS = r"""(() => {
  const both = window.__both = [];
  const tick = () => {
    for (const text of document.querySelectorAll(".fragola-stream .fragola-stream-text")) {
      const n = (/"x":\s*(\d+)/.exec(text.textContent || "") || [])[1];
      const panel = text.closest(".fragola-panel");
      if (n === undefined || !panel) continue;
      for (const args of panel.querySelectorAll(".fragola-call-args")) {
        if (args.textContent === "(x=" + n + ")") both.push(n);
      }
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();"""
LAST = 2 * STEPS + 1  # the user's message, a call and its result a step, the answer


def saved_with_widgets(page: Any, lab: h.LabServer, path: str) -> dict[str, Any]:
    """Ctrl+S until the file holds the widget state: the widget manager reads its
    ``saveState`` setting once its plugin is up, which a busy machine delays in a fresh lab
    (the first save of this test's lab held no widget state)."""
    for _ in range(3):
        saved = h.save_notebook(page, lab, path)
        if "widgets" in saved["metadata"]:
            return saved
        page.wait_for_timeout(2_000)
    raise AssertionError(f"{path} was saved without its widget state")


def panel_state(saved: dict[str, Any]) -> dict[str, Any]:
    states = saved["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    found = [s["state"] for s in states.values() if "saved_rows" in s["state"]]
    assert len(found) == 1, len(found)
    return dict(found[0])


def test_a_turn_of_200_steps_shows_every_step(ui: UI) -> None:
    scenarios.write(ui.lab.root / "steps34.ipynb", scenarios.SETUP + "\n" + SCRIPT,
                    f"%%fragola long\nTake {STEPS} steps", title="A long turn")
    ui.page.add_init_script(BOTH_JS)
    ui.open_and_run_all("steps34.ipynb")
    page = ui.page
    panel = h.cell(page, TURN).locator(".fragola-panel")
    box = panel.locator(".fragola-messages")
    rows = panel.locator(".fragola-msg")
    # the end of the turn on screen: its last message, the header's count of steps
    expect(rows.last).to_have_attribute("data-index", str(LAST), timeout=60_000)
    expect(panel.locator(".fragola-msg-assistant").last).to_contain_text("all done")
    assert shown_in_box(box, LAST)
    expect(panel).to_contain_text(f"steps {STEPS + 1}/{STEPS + 5}")
    expect(panel.locator(".fragola-status")).to_have_text("idle")
    summary = panel.locator(".fragola-timeline > summary")  # the waterfall's split of the turn
    expect(summary).to_contain_text("timeline · turn ")
    expect(summary).to_contain_text(" · model ")
    expect(summary).to_contain_text(" · between calls ")
    # the step before the last: its call and its result, folded into one row
    before = panel.locator(f".fragola-msg[data-index='{LAST - 2}']")
    expect(before).to_contain_text(f"x={STEPS - 1}")
    expect(before).to_contain_text(str(STEPS))
    ui.shot("01-200-steps-end", panel)
    assert page.evaluate("window.__both") == []  # never a stored call beside its preview
    # the first step is reachable: scrolled to the top, the first call is drawn
    box.evaluate("b => { b.scrollTop = 0; }")
    expect(panel.locator(".fragola-msg[data-index='1']")).to_contain_text("x=0")
    assert shown_in_box(box, 1)
    # every row and every bar, in what a saved notebook keeps
    state = panel_state(saved_with_widgets(page, ui.lab, "steps34.ipynb"))
    saved_rows = state["saved_rows"]
    assert len(saved_rows) == STEPS + 2 and [r["i"] for r in saved_rows] == [
        0, *range(1, LAST, 2), LAST]
    calls = [c for r in saved_rows for c in r["calls"]]
    assert [c["args"] for c in calls] == [f"x={n}" for n in range(STEPS)]
    assert all(c["state"] == "ran" and c["result"] == str(n + 1) for n, c in enumerate(calls))
    bars = state["timeline"]["bars"]
    assert [b["kind"] for b in bars] == ["model", *["tool", "model"] * STEPS]
    assert state["head"]["steps"] == STEPS + 1 and state["head"]["status"] == "idle"

    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        set_theme(page, "JupyterLab Dark")
        box.evaluate("b => { b.scrollTop = b.scrollHeight; }")
        expect(panel.locator(".fragola-msg-assistant").last).to_contain_text("all done")
        panel.scroll_into_view_if_needed()
        inside(panel, 700)
        ui.shot("02-200-steps-700px-dark", panel)
    finally:
        set_theme(page, "JupyterLab Light")
        page.set_viewport_size({"width": 1280, "height": 1100})
    ui.assert_clean()
