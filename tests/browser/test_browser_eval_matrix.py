"""Issue 23 as a person sees it in JupyterLab: ``await agent.evaluate(...)`` over 1,000 cases
× 2 variants as a live matrix (one row per case, only the rows in sight in the page), the
pass rate per variant on top; hostile text in cases, answers and reasons shown as text; the
"failed only" filter; a click on a cell opening its row's detail and its fork's panel; the
matrix of an evaluation displayed later; a second run diffed against the first with
"changed only"; the dark theme (contrast) and a 700 px window; the saved static table."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect
from .test_browser_long_panel import CONTRAST_JS, set_theme

pytestmark = pytest.mark.timeout(420)

# Any of it parsed as HTML would set window.__pwned.
EVIL = ('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1"> '
        '[click me](javascript:window.__pwned=1)')
HOSTILE = [EVIL, "W" * 5000, "file\u202egnp.exe", "pay\u200bpal"]
SCRIPT = f'''\
from fragola_nb.graders import Grade, contains
HOSTILE = {HOSTILE!r}
flip = False

def brain(request):
    first = request["messages"][0]
    terse = first["role"] == "system" and "terse" in first["content"]
    said = request["messages"][-1]["content"]
    number = int(said.split(":", 1)[0].split()[-1])
    wrong = terse and ((number % 5 == 0) != (flip and number % 3 == 0))
    return reply(("London" if wrong else "Paris") + " says " + said)

def says(row):
    return Grade("says", passed=True, reason="it said: " + (row.answer or "")[:400])

agent = Fragola.scripted(brain=brain).agent("geo")
cases = [f"case {{i}}: capital of France? " + (HOSTILE[i - 1] if 1 <= i <= 4 else "")
         for i in range(1000)]
variants = {{"plain": {{}}, "terse": {{"instructions": "terse"}}}}
checks = [contains("Paris"), says]
'''
RUN, LATER, AGAIN = 2, 3, 4
PWNED = "() => window.__pwned === undefined"


def notebook(ui: UI, path: str) -> None:
    scenarios.write(ui.lab.root / path, scenarios.SETUP + "\n" + SCRIPT,
                    "evaluation = await agent.evaluate(cases, variants, checks, "
                    "concurrency=32)",  # the live matrix (progress=True)
                    "evaluation",
                    "flip = True\nagain = await agent.evaluate(cases[:50], variants, checks)"
                    "\n_ = again.diff(evaluation)",
                    title="Issue 23")


def rows(out: Any) -> Any:
    return out.locator(".fragola-eval-rows .fragola-eval-row")


def test_matrix_of_1000_cases_hostile_filters_click_diff_dark_narrow(ui: UI) -> None:
    notebook(ui, "eval23.ipynb")
    dialogs: list[str] = []
    ui.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    ui.open_and_run_all("eval23.ipynb", timeout=300_000)
    page = ui.page
    out = h.cell(page, RUN).locator(".jp-OutputArea")
    matrix = out.locator(".fragola-eval")
    expect(matrix).to_have_count(1)
    expect(matrix.locator(".fragola-eval-count")).to_have_text("1000 cases")
    expect(matrix.locator(".fragola-eval-vname")).to_have_text(["plain", "terse"])
    expect(matrix.locator(".fragola-eval-vrate")).to_have_text(["100% passed", "80% passed"])
    expect(matrix.locator(".fragola-eval-vci-text")).to_have_text(["[100–100%]", "[77–82%]"])
    expect(matrix.locator(".fragola-eval-top")).to_contain_text("1000 cases × 2 variants")
    # only the rows in sight (and a few more) are in the page
    assert 10 <= rows(out).count() <= 60, rows(out).count()
    first = rows(out).nth(0)
    expect(first.locator(".fragola-eval-mark")).to_have_text(["✓", "✗"])
    expect(first.locator(".fragola-eval-score")).to_have_text(["1.00", "0.50"])
    # hostile cases: text, with their invisible characters written out, cut to one line
    cases = rows(out).locator(".fragola-eval-case")
    expect(cases.nth(1)).to_contain_text("<script>window.__pwned=1</script><img src=x")
    expect(cases.nth(3)).to_contain_text("file\\u202egnp.exe")
    expect(cases.nth(4)).to_contain_text("pay\\u200bpal")
    assert out.locator("script, img, a, iframe").count() == 0
    long_case = cases.nth(2).evaluate("c => [c.scrollWidth > c.clientWidth, c.clientHeight]")
    assert long_case[0] and long_case[1] <= 26, long_case
    width = out.evaluate("o => [o.scrollWidth, o.clientWidth]")
    assert width[0] <= width[1] + 1, width
    ui.shot("matrix-1000x2", out)

    # failed only: the 200 cases the terse variant fails (every fifth)
    matrix.locator(".fragola-eval-filter", has_text="failed only").locator("input").check()
    expect(matrix.locator(".fragola-eval-count")).to_have_text("200 of 1000 cases")
    expect(rows(out).nth(1).locator(".fragola-eval-case")).to_contain_text("case 5:")
    failed = rows(out).evaluate_all(
        "rs => rs.every(r => r.querySelector('.fragola-eval-mark-f'))")
    assert failed
    ui.shot("failed-only", out)
    matrix.locator(".fragola-eval-filter", has_text="failed only").locator("input").uncheck()
    expect(matrix.locator(".fragola-eval-count")).to_have_text("1000 cases")

    # a click on the hostile case's terse cell: its row's answer and reasons as text, and
    # its fork's panel below; a second click closes them
    mark = rows(out).nth(1).locator(".fragola-eval-cell").nth(1).locator(".fragola-eval-mark")
    mark.click()
    detail = matrix.locator(".fragola-eval-detail")
    expect(detail.locator(".fragola-eval-answer")).to_contain_text(
        "Paris says case 1: capital of France? <script>window.__pwned=1</script>")
    expect(detail.locator(".fragola-eval-grades li").nth(1)).to_contain_text(
        "[click me](javascript:window.__pwned=1)")
    panel = out.locator(".fragola-panel")
    expect(panel.locator(".fragola-name")).to_have_text("geo-terse-case1-r0")
    expect(rows(out).nth(1).locator(".fragola-eval-selected")).to_have_count(1)
    assert out.locator("script, img, a[href^='javascript'], iframe").count() == 0
    ui.shot("cell-clicked", out)
    mark.click()
    expect(panel).to_have_count(0)
    expect(detail).to_be_hidden()
    # the long case's detail wraps inside the output
    rows(out).nth(2).locator(".fragola-eval-mark").nth(0).click()
    expect(panel.locator(".fragola-name")).to_have_text("geo-plain-case2-r0")
    wrap = detail.evaluate("d => [d.scrollWidth, d.clientWidth]")
    assert wrap[0] <= wrap[1] + 1, wrap
    rows(out).nth(2).locator(".fragola-eval-mark").nth(0).click()
    expect(panel).to_have_count(0)

    # scrolled to the end: the last cases are drawn
    out.locator(".fragola-eval-body").evaluate("b => { b.scrollTop = b.scrollHeight; }")
    expect(cases.last).to_contain_text("case 999:")
    assert rows(out).count() <= 60

    # displayed later: a matrix again, drawn fast (the bench measures it closely)
    later = h.cell(page, LATER).locator(".jp-OutputArea")
    expect(rows(later).first).to_be_visible()
    started = time.monotonic()
    h.run_cell(page, LATER)
    expect(rows(later).nth(5)).to_be_visible(timeout=10_000)
    assert time.monotonic() - started < 10  # loose on a shared machine: the bench times it
    expect(later.locator(".fragola-eval-count")).to_have_text("1000 cases")

    # the second run, diffed against the first: changed only
    again = h.cell(page, AGAIN).locator(".jp-OutputArea")
    changed = again.locator(".fragola-eval-filter", has_text="changed only")
    expect(changed).to_be_visible()
    changed.locator("input").check()
    # terse flips on every third case: 0, 3, ..., 48 (case 0 and 15, 30, 45 improve)
    expect(again.locator(".fragola-eval-count")).to_have_text("17 of 50 cases")
    expect(rows(again).nth(0).locator(".fragola-eval-change")).to_have_text("▲ improved")
    expect(rows(again).nth(1).locator(".fragola-eval-change")).to_have_text("▼ regressed")
    ui.shot("changed-only", again)

    # dark theme: every text readable
    set_theme(page, "JupyterLab Dark")
    try:
        ui.shot("matrix-dark", out)
        ui.shot("changed-dark", again)
        parts = page.locator(".fragola-eval-top, .fragola-eval-filter, .fragola-eval-count, "
                             ".fragola-eval-vname, .fragola-eval-vfacts, .fragola-eval-case, "
                             ".fragola-eval-mark, .fragola-eval-score, .fragola-eval-change")
        ratios = parts.evaluate_all(CONTRAST_JS)
        assert len(ratios) > 100
        low = [r for r in ratios if r["ratio"] < 4.5]
        assert low == [], low[:10]
    finally:
        set_theme(page, "JupyterLab Light")

    # 700 px: the matrix stays inside the window
    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        out.scroll_into_view_if_needed()
        box = matrix.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 700, box
        width = out.evaluate("o => [o.scrollWidth, o.clientWidth]")
        assert width[0] <= width[1] + 1, width
        ui.shot("matrix-700px", out)
    finally:
        page.set_viewport_size({"width": 1280, "height": 1100})
    assert dialogs == [] and page.evaluate(PWNED)

    # saved: the static table beside the widget, escaped
    saved = h.save_notebook(page, ui.lab, "eval23.ipynb")
    html = "".join(o["data"].get("text/html", "") for o in saved["cells"][RUN]["outputs"]
                   if "data" in o)
    assert "<table" in html and "&lt;script&gt;" in html and "<script>" not in html, [
        (o.get("output_type"), sorted(o.get("data", {}))) for o in saved["cells"][RUN]["outputs"]]
    assert re.search(r"… 950 more cases", html)
    static = ui.tab.context.new_page()
    static.set_content(html)
    assert static.locator("script, img, a[href^='javascript']").count() == 0
    assert static.evaluate(PWNED)
    static.screenshot(path=str(ui.dir / "static-html.png"))
    static.close()
    ui.lab.shutdown_all_kernels()
    ui.assert_clean()
