"""Issue 34 as a person sees it: the waterfall of a 200-step ``%%fragola`` turn (401 calls,
three of its tools slow) says where the time went. Its line gives the turn's length and
model, tools and between calls with their shares, summing to it; opened, the split is drawn
and explained, 30 rows show and the other 371 are folded behind one line that opens them,
in a box whose height stays bounded; "slowest first" puts the three slow tools on top;
every bar is visible (4 px at least); at 700 px and in the dark theme, readable."""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect
from .test_browser_guardrails_view import inside
from .test_browser_long_panel import CONTRAST_JS, set_theme
from .test_browser_timeline import SUMMARY, TIME, check_summary, seconds_of

pytestmark = pytest.mark.timeout(400)

SLOW = (37, 111, 150)  # the tools that take 0.3 s; bar n of step i is 2 * i + 2
SCRIPT = f'''\
import time

@tool(name="step", description="One step.")
def step(n: int) -> str:
    time.sleep(0.3 if n in {SLOW!r} else 0.002)
    return f"step {{n}} done"

fragola = Fragola.scripted([tool_calls(call("step", {{"n": i}})) for i in range(200)]
                           + [reply("200 steps done")])
long_turn = fragola.agent(name="long_turn", tools=[step], max_step=250)
'''
TURN = 2
SHOWN = 30
ROWS_JS = """(rows) => rows.map(r => ({
  top: r.getBoundingClientRect().top,  // and where its cells end: inside it, or over the next
  bottom: Math.max(r.getBoundingClientRect().bottom,
                   ...[...r.children].map(c => c.getBoundingClientRect().bottom)),
  overlap: [...r.children].some((a, i) => [...r.children].slice(i + 1).some(b => {
    const p = a.getBoundingClientRect(), q = b.getBoundingClientRect();
    return Math.min(p.right, q.right) - Math.max(p.left, q.left) > 1
      && Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top) > 1;
  })),
  n: r.querySelector('.fragola-tl-n').textContent,
  label: r.querySelector('.fragola-tl-label').textContent,
  time: r.querySelector('.fragola-tl-time').textContent,
  width: r.querySelector('.fragola-tl-bar').getBoundingClientRect().width,
  clipped: [...r.children].some(c => c.scrollWidth > c.clientWidth + 1)}))"""


def rows_of(panel: Any) -> list[dict[str, Any]]:
    return list(panel.locator(".fragola-tl-row").evaluate_all(ROWS_JS))


def check_readable(panel: Any) -> None:
    """Thirty rows, each bar 4 px wide at least, no cell's text cut."""
    rows = rows_of(panel)
    assert len(rows) == SHOWN
    assert all(r["width"] >= 3.9 for r in rows), [r for r in rows if r["width"] < 3.9]
    assert not [r for r in rows if r["clipped"]]
    assert not [r for r in rows if r["overlap"]]  # a row's name, bar and times side by side
    assert all(later["top"] >= earlier["bottom"] - 0.5 for earlier, later in pairwise(rows))
    assert panel.locator(".fragola-tl-head").evaluate(
        "h => [...h.querySelectorAll('*')].every(c => c.scrollWidth <= c.clientWidth + 1)")
    legend = panel.locator(".fragola-tl-key-text").all_inner_texts()
    assert [text.split()[0] for text in legend] == ["model", "tools", "between"], legend


def test_the_waterfall_of_200_steps_says_where_the_time_went(ui: UI) -> None:
    scenarios.write(ui.lab.root / "waterfall34.ipynb", scenarios.SETUP + "\n" + SCRIPT,
                    "%%fragola long_turn\nTake 200 steps", title="Where 200 steps went")
    ui.open_and_run_all("waterfall34.ipynb", timeout=240_000)
    page = ui.page
    panel = h.cell(page, TURN).locator(".fragola-panel")
    expect(panel.locator(".fragola-msg-assistant").last).to_contain_text("200 steps done")
    summary = panel.locator(".fragola-timeline > summary")
    expect(summary).to_have_text(SUMMARY)
    check_summary(summary.inner_text())
    closed = panel.bounding_box()["height"]
    ui.shot("01-collapsed", panel)

    summary.click()
    expect(panel.locator(".fragola-tl-row")).to_have_count(SHOWN)
    check_readable(panel)
    assert [r["n"] for r in rows_of(panel)] == [str(n) for n in range(1, SHOWN + 1)]
    fold = panel.locator(".fragola-tl-fold")
    expect(fold).to_have_text(re.compile(
        rf"^… 371 more calls, {TIME}( \(and {TIME} between calls\))?: show them$"))
    note = panel.locator(".fragola-tl-note")
    expect(note).to_contain_text("fragola_nb itself and your listeners")
    # bounded: the open waterfall adds at most 640 px whatever the turn's length
    opened = panel.bounding_box()["height"]
    assert opened - closed < 640, (closed, opened)
    ui.shot("02-open-in-order", panel)

    panel.locator(".fragola-tl-order-slowest").click()
    expect(panel.locator(".fragola-tl-order-slowest")).to_have_attribute("aria-pressed", "true")
    rows = rows_of(panel)
    times = [seconds_of(r["time"]) for r in rows]
    assert times == sorted(times, reverse=True)
    # the slow tools are on top (a model call on a busy machine may be as slow: it is there too)
    slow = [r for r in rows if r["label"] == "step" and seconds_of(r["time"]) >= 0.3]
    assert {r["n"] for r in slow} == {str(2 * i + 2) for i in SLOW}
    assert all(seconds_of(r["time"]) >= 0.3 for r in rows[:rows.index(slow[-1]) + 1])
    ui.shot("03-slowest-first", panel)

    fold.click()  # the folded tail opens, in the same bounded box
    expect(panel.locator(".fragola-tl-row")).to_have_count(401)
    expect(fold).to_have_text(f"show the first {SHOWN} only")
    assert panel.bounding_box()["height"] - opened < 40
    bars = panel.locator(".fragola-timeline-bars")
    assert bars.evaluate("b => b.scrollHeight > b.clientHeight + 100")
    last = panel.locator(".fragola-tl-row").last
    last.scroll_into_view_if_needed()
    expect(last).to_be_in_viewport()
    fold.click()
    expect(panel.locator(".fragola-tl-row")).to_have_count(SHOWN)

    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        panel.scroll_into_view_if_needed()
        inside(panel, 700)
        check_readable(panel)
        ui.shot("04-700px", panel.locator(".fragola-timeline"))
        set_theme(page, "JupyterLab Dark")
        texts = panel.locator(".fragola-tl-label, .fragola-tl-time, .fragola-tl-gap, "
                              ".fragola-tl-n, .fragola-tl-key-text, .fragola-tl-note, "
                              ".fragola-tl-fold, .fragola-timeline > summary")
        ratios = texts.evaluate_all(CONTRAST_JS)
        assert len(ratios) > 4 * SHOWN and [r for r in ratios if r["ratio"] < 4.5] == [], [
            r for r in ratios if r["ratio"] < 4.5]
        inside(panel, 700)
        ui.shot("05-700px-dark", panel.locator(".fragola-timeline"))
    finally:
        set_theme(page, "JupyterLab Light")
        page.set_viewport_size({"width": 1280, "height": 1100})
    ui.assert_clean()
