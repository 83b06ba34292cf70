"""Issue 27 as a person sees it in JupyterLab: the compare grid with a real model's kind of
answers (two that share little are shown as they are, with a note, not struck through into
each other; two that share much are diffed; a "diff words / plain" toggle), a 700 px window
with the file browser open (the grid says how many columns there are and which way the rest
are; the batch table and the bar's text fit), a Markdown export shown compact, all in the
dark theme too, with hostile text."""

from __future__ import annotations

import re
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect
from .test_browser_long_panel import CONTRAST_JS, set_theme

pytestmark = pytest.mark.timeout(300)

FIRST = '<img src=x onerror="window.__pwned=1">smol'
# Two free answers of SmolLM2 to "What is DNS?" share a few words; "close" is the first with
# a word changed; "evil" holds hostile text (markup, a javascript: link, an RTL override, a
# zero-width space, a 5,000-character token, a lone surrogate's escape).
SCRIPT = f'''\
FIRST_ANSWER = ("DNS, the Domain Name System, is like the phonebook of the internet. When you "
                "type a website name, your computer asks a DNS server for its IP address.")
ANSWERS = {{
    "": FIRST_ANSWER,
    "pirate": ("Arr matey! Ye be askin' about them name-lookin' seas: every ship hath a "
               "harbour number, and the harbourmaster tells ye which one."),
    "close": FIRST_ANSWER.replace("phonebook", "address book"),
    "evil": ('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1"> '
             '[click me](javascript:window.__pwned=1) file\\u202egnp.exe pay\\u200bpal '
             + "W" * 5000 + " \\\\ud800 end"),
}}

def brain(request):
    first = request["messages"][0]
    told = first["content"] if first["role"] in ("system", "developer") else ""
    last = request["messages"][-1]["content"]
    if last.startswith("question") or last.startswith("Tell me"):
        return reply("answer to " + last + " <b>bold?</b> [x](javascript:window.__pwned=1)")
    return reply(ANSWERS[told])

fragola = Fragola.scripted(brain=brain, chunk_size=40)
agent = fragola.agent("tutor", model_settings={{"stream": True}})
variants = {{{FIRST!r}: {{}}, "pirate": {{"instructions": "pirate"}},
            "close": {{"instructions": "close"}}, "evil": {{"instructions": "evil"}}}}
'''
GRID_CELL = "comparison = await agent.compare('What is DNS?', variants)"
BATCH_CELL = ("results = await agent.batch([f'question {i}' for i in range(5)], concurrency=2)\n"
              "results")
EXPORT_CELL = '''\
import tempfile
from pathlib import Path
from fragola_nb import export_tree_markdown
for i in range(6):
    await agent.user_message(f"Tell me more, part {i}")
path = Path(tempfile.mkdtemp()) / "lesson.md"
export_tree_markdown(agent, path)
'''
GRID, BATCH, EXPORT = 2, 3, 4
PWNED = "() => window.__pwned === undefined"


def check_contrast(out: Any, selector: str) -> None:
    ratios = out.locator(selector).evaluate_all(CONTRAST_JS)
    assert ratios, selector
    low = [r for r in ratios if r["ratio"] < 4.5]
    assert low == [], low


def fits(area: Any, what: Any) -> None:
    """``what`` lies inside the output area, left to right."""
    outer, inner = area.bounding_box(), what.bounding_box()
    assert inner is not None and outer is not None
    assert inner["x"] >= outer["x"] - 1, (inner, outer)
    assert inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 1, (inner, outer)


def test_diff_rule_toggle_narrow_with_the_file_browser_and_a_compact_export(ui: UI) -> None:
    scenarios.write(ui.lab.root / "issue27grid.ipynb", scenarios.SETUP + "\n" + SCRIPT,
                    GRID_CELL, BATCH_CELL, EXPORT_CELL, title="Issue 27")
    dialogs: list[str] = []
    ui.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    ui.open_and_run_all("issue27grid.ipynb", timeout=200_000)
    page = ui.page
    out = h.cell(page, GRID).locator(".jp-OutputArea")
    cols = out.locator(".fragola-compare-col")
    expect(cols.locator(".fragola-compare-status")).to_have_text(["finished"] * 4)

    # -- item 2: the diff rule ---------------------------------------------------------------
    pirate, close, evil = cols.nth(1), cols.nth(2), cols.nth(3)
    # little in common with the first: shown as it is, said so, nothing struck through
    expect(pirate.locator(".fragola-compare-answer")).to_have_text(re.compile(r"^Arr matey!"))
    expect(pirate.locator("del, ins")).to_have_count(0)
    expect(pirate.locator(".fragola-compare-apart")).to_have_text(
        f"little in common with {FIRST}: shown as it is")
    # much in common: the word that changed, marked
    expect(close.locator("del.fragola-diff-gone")).to_have_text(["phonebook "])
    expect(close.locator("ins.fragola-diff-new")).to_have_text(["address book "])
    expect(close.locator(".fragola-compare-apart")).to_have_count(0)
    expect(out.locator(".fragola-compare-legend")).to_be_visible()
    # hostile text is text
    expect(evil.locator(".fragola-compare-answer")).to_contain_text(
        "[click me](javascript:window.__pwned=1) file\\u202egnp.exe pay\\u200bpal")
    assert out.locator("script, img, a, iframe").count() == 0 and page.evaluate(PWNED)
    ui.shot("grid-diff", out)
    # the toggle: plain shows every answer as it is, no marks, no legend; and back
    modes = out.locator(".fragola-compare-mode")
    expect(modes).to_have_text(["diff words", "plain"])
    expect(modes.nth(0)).to_have_attribute("aria-pressed", "true")
    modes.nth(1).click()
    expect(modes.nth(1)).to_have_attribute("aria-pressed", "true")
    expect(out.locator(".fragola-compare-grid").locator("del, ins")).to_have_count(0)
    expect(out.locator(".fragola-compare-legend")).to_be_hidden()
    expect(out.locator(".fragola-compare-apart")).to_have_count(0)
    expect(close.locator(".fragola-compare-answer")).to_contain_text("is like the address book")
    ui.shot("grid-plain", out)
    modes.nth(0).click()
    expect(close.locator("ins.fragola-diff-new")).to_have_text(["address book "])
    # four columns fit a wide notebook: no scroll cue
    expect(out.locator(".fragola-compare-more")).to_be_hidden()

    # -- item 7: the export, compact ---------------------------------------------------------
    export = h.cell(page, EXPORT).locator(".jp-OutputArea-output")
    box = export.locator(".fragola-export-box")
    expect(box).to_be_visible()
    assert export.locator("h1, h2, h3").count() == 0
    expect(box.locator(".fragola-export-h1")).to_have_text("tutor")
    assert box.evaluate("b => b.scrollHeight > b.clientHeight")  # long: it scrolls
    assert export.bounding_box()["height"] <= 420, export.bounding_box()
    size = box.locator(".fragola-export-h1").evaluate("e => getComputedStyle(e).fontSize")
    assert float(size.removesuffix("px")) <= 14, size
    assert export.locator("script, img, iframe, a[href^='javascript']").count() == 0
    assert page.evaluate(PWNED)
    ui.shot("export", export)

    # -- item 3: 700 px, the file browser open -----------------------------------------------
    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id='filebrowser']")
        if "lm-mod-current" not in (tab.get_attribute("class") or ""):
            tab.click()
        expect(page.locator("#filebrowser")).to_be_visible()
        area = page.locator(h.SEL_NOTEBOOK).bounding_box()
        assert area["width"] <= 520, area
        out.scroll_into_view_if_needed()
        more = out.locator(".fragola-compare-more")
        expect(more).to_be_visible()
        expect(more).to_have_text(re.compile(r"^columns? 1(–2)? of 4 · scroll →$"))
        scroller = out.locator(".fragola-compare-scroller")
        expect(scroller).to_have_class(re.compile("fragola-compare-more-right"))
        fits(out, out.locator(".fragola-compare-grid"))
        ui.shot("grid-700-sidebar", out)
        more.click()  # scrolls sideways; the shadow then shows on the left too
        expect(scroller).to_have_class(re.compile("fragola-compare-more-left"))
        assert out.locator(".fragola-compare-grid").evaluate("g => g.scrollLeft") > 0
        expect(more).to_have_text(re.compile(r"^columns? [2-4](–[3-4])? of 4 · scroll [↔←]$"))

        batch = h.cell(page, BATCH).locator(".jp-OutputArea")
        batch.scroll_into_view_if_needed()
        ui.shot("batch-700-sidebar", batch)
        fits(batch, batch.locator(".fragola-batch table"))
        expect(batch.locator("th").last).to_have_text("s")
        fits(batch, batch.locator("th").last)
        for cell in batch.locator("td, th").all():  # nothing cut inside a cell
            width = cell.evaluate("c => [c.scrollWidth, c.clientWidth]")
            assert width[0] <= width[1] + 1, (cell.inner_text(), width)
        # the bar's text: all of it readable (wrapped), nothing cut
        bar_text = batch.locator(".widget-html-content").last
        expect(bar_text).to_contain_text(re.compile(r"done=5,\s+failed=0"))
        fits(batch, bar_text)
        assert bar_text.evaluate("e => e.scrollWidth <= e.clientWidth + 1")

        # -- dark theme, still 700 px ------------------------------------------------------
        set_theme(page, "JupyterLab Dark")
        try:
            out.scroll_into_view_if_needed()
            # the cue is read again once JupyterLab has restyled the outputs
            expect(more).to_have_text(re.compile(r"^columns? [2-4](–[3-4])? of 4 · scroll [↔←]$"))
            ui.shot("grid-700-dark", out)
            check_contrast(out, ".fragola-compare-more, .fragola-compare-mode, "
                           ".fragola-compare-apart, .fragola-compare-answer > *")
            batch.scroll_into_view_if_needed()
            ui.shot("batch-700-dark", batch)
            export.scroll_into_view_if_needed()
            ui.shot("export-700-dark", export)
            check_contrast(export, ".fragola-export-about, .fragola-export-box p")
            fits(export, box)
        finally:
            set_theme(page, "JupyterLab Light")
    finally:
        page.set_viewport_size({"width": 1280, "height": 1100})
    assert dialogs == [] and page.evaluate(PWNED)
    ui.assert_clean()
