"""Issue 24 item 3 as a person sees it: a ``%%fragola`` turn with five tool calls (one with a
hostile argument) shows, under its conversation, a "timeline" toggle whose line holds the
turn's totals; opened, a waterfall of the model and tool calls in order, never overlapping
(the tools run one after the other), labelled and timed as text, the hostile argument only
in a tooltip, as text; at 700 px and in the dark theme, readable."""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect
from .test_browser_guardrails_view import NOT_PWNED, inside
from .test_browser_long_panel import CONTRAST_JS, set_theme

pytestmark = pytest.mark.timeout(300)

EVIL = ('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1"> '
        'file\u202egnp.exe pay\u200bpal ' + "A" * 600)
SCRIPT = f'''\
import asyncio
EVIL = {EVIL!r}

@tool(name="step", description="One slow step.")
async def step(n: str) -> str:
    await asyncio.sleep(0.15)
    return "step " + n[:20] + " done"

fragola = Fragola.scripted([
    hang(0.3, then=tool_calls(*[call("step", {{"n": EVIL if i == 2 else str(i)}})
                                for i in range(5)])),
    reply("all five steps done"),
], chunk_delay=0.01)
timed = fragola.agent(name="timed", tools=[step])
'''
SETUP, TURN = 1, 2

BARS_JS = """(rows) => rows.map(r => {
  const bar = r.querySelector('.fragola-tl-bar').getBoundingClientRect();
  return {left: bar.left, right: bar.right, width: bar.width, title: r.title,
          label: r.querySelector('.fragola-tl-label').textContent,
          time: r.querySelector('.fragola-tl-time').textContent,
          color: getComputedStyle(r.querySelector('.fragola-tl-bar')).backgroundColor,
          track: getComputedStyle(r.querySelector('.fragola-tl-track')).backgroundColor};
})"""


TIME = r"(\d+ ms|\d+\.\d\d s)"
SUMMARY = re.compile(  # the turn, then its three parts, each with its share (issue 34)
    rf"^timeline · turn {TIME} · model {TIME} \((\d+)%\) · tools {TIME} \((\d+)%\) · "
    rf"between calls {TIME} \((\d+)%\)( · [\d,]+ tokens/s)?$")


def seconds_of(text: str) -> float:
    """``850 ms`` or ``1.42 s`` as seconds."""
    number, unit = text.split()
    return float(number) / (1000 if unit == "ms" else 1)


def check_summary(text: str) -> None:
    """The summary's parts sum to the turn (to the rounding of what is written), and so do
    their shares."""
    found = SUMMARY.fullmatch(text)
    assert found is not None, text
    turn, model, model_pc, tools, tools_pc, between, between_pc = found.groups()[:7]
    parts = [seconds_of(model), seconds_of(tools), seconds_of(between)]
    assert abs(sum(parts) - seconds_of(turn)) <= 0.016, text
    assert int(model_pc) + int(tools_pc) + int(between_pc) == 100, text


def bars_of(panel: Any) -> list[dict[str, Any]]:
    return list(panel.locator(".fragola-tl-row").evaluate_all(BARS_JS))


def check_waterfall(bars: list[dict[str, Any]]) -> None:
    assert [b["label"] for b in bars] == ["model", *["step"] * 5, "model"], bars
    for earlier, later in pairwise(bars):
        # one after the other: a bar starts where the one before ends (4 px: the min width)
        assert later["left"] >= earlier["right"] - 4.5, (earlier, later)
    assert all(b["width"] >= 3.9 for b in bars)
    assert all(re.fullmatch(r"\d+ ms|\d+\.\d\d s", b["time"]) for b in bars), bars
    assert all(b["color"] not in ("rgba(0, 0, 0, 0)", b["track"]) for b in bars), bars
    assert bars[0]["color"] != bars[1]["color"]  # model and tool bars told apart


def test_the_waterfall_of_a_turn_with_five_tool_calls_hostile_narrow_dark(ui: UI) -> None:
    scenarios.write(ui.lab.root / "timeline24.ipynb", scenarios.SETUP + "\n" + SCRIPT,
                    "%%fragola timed\nTake five steps", title="Where the time went")
    dialogs: list[str] = []
    ui.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    ui.open_and_run_all("timeline24.ipynb")
    page = ui.page
    panel = h.cell(page, TURN).locator(".fragola-panel")
    expect(panel.locator(".fragola-msg-assistant").last).to_contain_text("all five steps done")
    box = panel.locator(".fragola-timeline")
    summary = box.locator("summary")
    # collapsed: the totals only, no bar in the page
    expect(summary).to_have_text(SUMMARY)
    check_summary(summary.inner_text())
    assert box.get_attribute("open") is None
    expect(panel.locator(".fragola-tl-row")).to_have_count(0)
    tools_time = re.search(r"tools (\S+) (\S+)", summary.inner_text())
    assert tools_time is not None
    seconds = float(tools_time.group(1)) / (1000 if tools_time.group(2) == "ms" else 1)
    assert seconds >= 0.75  # five steps of 0.15 s
    ui.shot("01-timeline-collapsed", panel)

    summary.click()
    expect(panel.locator(".fragola-tl-row")).to_have_count(7)
    bars = bars_of(panel)
    check_waterfall(bars)
    hostile = bars[3]["title"]
    assert hostile.startswith("step(") and "<img src=x" in hostile and "\\u202e" in hostile
    assert "\u202e" not in hostile and "\u200b" not in hostile
    assert "first token after" in bars[0]["title"]
    assert panel.locator("script, img, iframe").count() == 0 and page.evaluate(NOT_PWNED)
    ui.shot("02-timeline-open", panel)

    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        panel.scroll_into_view_if_needed()
        inside(panel, 700)
        check_waterfall(bars_of(panel))
        ui.shot("03-timeline-700px", panel)
        set_theme(page, "JupyterLab Dark")
        ratios = panel.locator(".fragola-tl-label, .fragola-tl-time, .fragola-timeline > summary"
                               ).evaluate_all(CONTRAST_JS)
        assert len(ratios) == 15 and [r for r in ratios if r["ratio"] < 4.5] == [], ratios
        check_waterfall(bars_of(panel))
        inside(panel, 700)
        ui.shot("04-timeline-700px-dark", panel)
        summary.click()  # closed again: the bars leave the page
        expect(panel.locator(".fragola-tl-row")).to_have_count(0)
    finally:
        set_theme(page, "JupyterLab Light")
        page.set_viewport_size({"width": 1280, "height": 1100})
    assert dialogs == [] and page.evaluate(NOT_PWNED)
    ui.assert_clean()
