"""The compare grid in JupyterLab: ``await agent.compare(...)`` shows one column per variant,
the differences from the first column marked, hostile text as text, a 700 px window scrolling
the columns rather than cutting them, and a click on a column's name opening its panel."""

from __future__ import annotations

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect

pytestmark = pytest.mark.timeout(240)

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)> file\u202egnp.exe"
SCRIPT = f'''\
def brain(request):
    first = request["messages"][0]
    told = first["content"] if first["role"] == "system" else "nothing special"
    return reply("I was told: " + told + ". DNS maps names to addresses.")

fragola = Fragola.scripted(brain=brain, chunk_size=3)
agent = fragola.agent("tutor", model_settings={{"stream": True}})
variants = {{
    "plain": {{}},
    "pirate": {{"instructions": "talk like a pirate"}},
    "evil": {{"instructions": {HOSTILE!r}}},
    "fourth": {{"instructions": "be brief"}},
}}
'''
GRID_CELL = 2


def test_the_grid_side_by_side_with_differences_and_a_branch_panel(ui: UI) -> None:
    scenarios.write(ui.lab.root / "compare.ipynb", scenarios.SETUP + "\n" + SCRIPT,
                    'comparison = await agent.compare("What is DNS?", variants)',
                    title="Compare")
    dialogs: list[str] = []
    ui.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    ui.open_and_run_all("compare.ipynb")
    page, out = ui.page, h.cell(ui.page, GRID_CELL)
    grid = out.locator(".fragola-compare-grid")
    cols = grid.locator(".fragola-compare-col")
    expect(cols).to_have_count(4)
    expect(cols.locator(".fragola-compare-name")).to_have_text(
        ["plain", "pirate", "evil", "fourth"])
    expect(cols.locator(".fragola-compare-status")).to_have_text(["finished"] * 4)
    expect(cols.nth(0).locator(".fragola-compare-answer")).to_have_text(
        "I was told: nothing special. DNS maps names to addresses.")
    # the second column: what differs from the first is marked, the rest plain
    expect(cols.nth(1).locator("ins.fragola-diff-new")).to_have_text(["talk like a pirate."])
    expect(cols.nth(1).locator("del.fragola-diff-gone")).to_have_text(["nothing special."])
    expect(cols.nth(1).locator(".fragola-compare-facts")).to_contain_text("tokens")
    # hostile text is text: no script, no image, the direction override written out
    evil = cols.nth(2).locator(".fragola-compare-answer")
    expect(evil).to_contain_text("<script>alert(1)</script><img src=x onerror=alert(2)>")
    expect(evil).to_contain_text("file\\u202egnp.exe")
    assert out.locator("script, img").count() == 0 and dialogs == []
    ui.shot("grid", out)

    # 700 px wide: the grid stays inside the window; its columns scroll sideways
    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        grid.scroll_into_view_if_needed()
        box = grid.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 700, box
        assert grid.evaluate("g => g.scrollWidth > g.clientWidth")
        assert cols.nth(0).bounding_box()["width"] >= 200  # type: ignore[index]
        ui.shot("grid-700px", out)
    finally:
        page.set_viewport_size({"width": 1280, "height": 1100})

    # a click on a column's name opens that fork's panel below the grid; again closes it
    cols.nth(1).locator(".fragola-compare-head").click()
    panel = out.locator(".fragola-panel")
    expect(panel.locator(".fragola-name")).to_have_text("pirate")
    expect(panel.locator(".fragola-messages")).to_contain_text("talk like a pirate")
    expect(cols.nth(1)).to_have_class("fragola-compare-col fragola-compare-selected")
    ui.shot("branch-panel", out)
    cols.nth(1).locator(".fragola-compare-head").click()
    expect(panel).to_have_count(0)
    ui.assert_clean()
