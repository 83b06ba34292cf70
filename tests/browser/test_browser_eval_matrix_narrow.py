"""Issue 34 as a person sees it in JupyterLab: the finished 1,000-case matrix reaches every
row (by scroll: the first, a middle and the last case; by the keyboard: ↓ from mark to mark
past the rows drawn; a click in the last row opens its detail); at 700 px, a diffed
matrix and a 4-variant one keep every variant's marks and ▲/▼ badges in sight, each case
read across its row above its cells (light and dark); narrower still, the cue names the
variants in sight and says it scrolls; hostile case text stays text."""

from __future__ import annotations

import re
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect
from .test_browser_long_panel import CONTRAST_JS, set_theme

pytestmark = pytest.mark.timeout(600)

EVIL = ('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1"> '
        '[click me](javascript:window.__pwned=1)')
# The evaluations run before the extension is loaded (no live matrix: this test is about
# the finished one, and a 1,000-case live run is the bench's), then are displayed.
SCRIPT = f'''\
from fragola_nb import Fragola
from fragola_nb.graders import contains
from fragola_nb.models.scripted import reply
EVIL = {EVIL!r}
flip = False

def brain(request):
    first = request["messages"][0]
    told = first["content"] if first["role"] == "system" else ""
    said = request["messages"][-1]["content"]
    number = int(said.split(":", 1)[0].split()[-1])
    wrong = bool(told) and ((number % 5 == 0) != (flip and number % 3 == 0))
    return reply(("London" if wrong else "Paris") + " says " + said)

agent = Fragola.scripted(brain=brain).agent("geo")
cases = [f"case {{i}}: what is the capital of France, the country west of Germany? "
         + (EVIL if i == 1 else "") for i in range(1000)]
variants = {{"plain": {{}}, "terse": {{"instructions": "terse"}}}}
four = {{"plain": {{}}, "terse": {{"instructions": "terse"}},
        "formal": {{"instructions": "formal"}},
        "pirate": {{"instructions": "pirate"}}}}
checks = [contains("Paris")]
evaluation = await agent.evaluate(cases, variants, checks, concurrency=32, progress=False)
flip = True
again = await agent.evaluate(cases[:100], variants, checks, concurrency=32, progress=False)
_ = again.diff(evaluation)
flip = False
base4 = await agent.evaluate(cases[:40], four, checks, concurrency=32, progress=False)
flip = True
again4 = await agent.evaluate(cases[:40], four, checks, concurrency=32, progress=False)
_ = again4.diff(base4)
print("ran", len(evaluation), len(again), len(again4))
'''
FINISHED, DIFFED, FOUR = 2, 3, 4
PWNED = "() => window.__pwned === undefined"

# Each drawn row in sight: its marks and badges, left and right, against the scroller's box.
MARKS_JS = """(m) => {
  const box = m.querySelector('.fragola-eval-scroller').getBoundingClientRect();
  const body = m.querySelector('.fragola-eval-body').getBoundingClientRect();
  const out = [];
  for (const row of m.querySelectorAll('.fragola-eval-rows .fragola-eval-row')) {
    const r = row.getBoundingClientRect();
    if (r.bottom <= body.top || r.top >= body.bottom) continue;
    for (const part of row.querySelectorAll('.fragola-eval-mark, .fragola-eval-change')) {
      const p = part.getBoundingClientRect();
      const cell = part.closest('.fragola-eval-cell').getBoundingClientRect();
      out.push({ text: part.innerText, left: p.left - box.left, right: box.right - p.right,
                 width: p.width, clipped: p.right > cell.right + 0.5 });
    }
  }
  return out;
}"""


def rows(out: Any) -> Any:
    return out.locator(".fragola-eval-rows .fragola-eval-row")


def in_sight(out: Any, text: str) -> None:
    """The row of the case starting with ``text`` is drawn, inside the matrix's scroll box."""
    row = rows(out).filter(has_text=text)
    expect(row).to_have_count(1)
    r, body = row.bounding_box(), out.locator(".fragola-eval-body").bounding_box()
    assert body["y"] - 1 <= r["y"] and r["y"] + r["height"] <= body["y"] + body["height"] + 1, (
        text, r, body)


def all_marks_in_sight(matrix: Any, variants: int, badges: bool) -> None:
    parts = matrix.evaluate(MARKS_JS)
    assert len(parts) >= 10 * variants, parts[:5]
    hidden = [p for p in parts
              if p["left"] < -1 or p["right"] < -1 or p["width"] <= 0 or p["clipped"]]
    assert hidden == [], hidden[:5]
    if badges:
        assert any(p["text"] == "▲" for p in parts) and any(p["text"] == "▼" for p in parts)
    expect(matrix.locator(".fragola-eval-more")).to_be_hidden()  # nothing to scroll to
    width = matrix.locator(".fragola-eval-scroller").evaluate("s => [s.scrollWidth, s.clientWidth]")
    assert width[0] <= width[1] + 1, width


def case_above_cells(matrix: Any) -> None:
    """Narrow: a case reads across its row, above the row's cells (no case column)."""
    row = rows(matrix).nth(0)
    line, case = row.bounding_box(), row.locator(".fragola-eval-case").bounding_box()
    mark = row.locator(".fragola-eval-mark").first.bounding_box()
    assert case["width"] >= line["width"] - 12, (case, line)
    assert case["y"] + case["height"] <= mark["y"] + 1, (case, mark)
    assert mark["x"] - line["x"] <= 8, (mark, line)  # the first variant's cell at the left


def test_every_row_reachable_and_700px_keeps_every_variant_in_sight(ui: UI) -> None:
    scenarios.write(ui.lab.root / "eval34.ipynb", SCRIPT, "%load_ext fragola_nb\nevaluation",
                    "again", "again4", title="Issue 34")
    ui.open_and_run_all("eval34.ipynb", timeout=480_000)
    expect(h.cell_output(page := ui.page, 1)).to_contain_text("ran 2000 200 160")
    out = h.cell(page, FINISHED).locator(".jp-OutputArea")
    matrix = out.locator(".fragola-eval")
    expect(matrix).to_have_count(1)
    expect(matrix.locator(".fragola-eval-count")).to_have_text("1000 cases")
    body = matrix.locator(".fragola-eval-body")
    in_sight(matrix, "case 0:")
    # hostile case text: text, not markup
    expect(rows(matrix).nth(1).locator(".fragola-eval-case")).to_contain_text(
        "<script>window.__pwned=1</script><img src=x")
    assert out.locator("script, img, a, iframe").count() == 0
    ui.shot("finished-1000", out)

    # by scroll: a middle case, then the last; only the rows in sight are in the page
    body.evaluate("b => { b.scrollTop = b.scrollHeight / 2 - b.clientHeight / 2; }")
    in_sight(matrix, "case 500:")
    assert rows(matrix).count() <= 60
    body.evaluate("b => { b.scrollTop = b.scrollHeight; }")
    in_sight(matrix, "case 999:")
    # a click in the last row opens its detail and its fork's panel
    rows(matrix).filter(has_text="case 999:").locator(".fragola-eval-mark").nth(1).click()
    detail = matrix.locator(".fragola-eval-detail")
    expect(detail.locator(".fragola-eval-dhead")).to_contain_text("case: case 999:")
    expect(detail.locator(".fragola-eval-dfacts")).to_contain_text("terse · repeat 1")
    expect(out.locator(".fragola-panel .fragola-name")).to_have_text("geo-terse-case999-r0")
    ui.shot("last-row-clicked", out)
    rows(matrix).filter(has_text="case 999:").locator(".fragola-eval-mark").nth(1).click()
    expect(out.locator(".fragola-panel")).to_have_count(0)

    # by the keyboard: ↓ from mark to mark, 45 rows down, past the rows drawn at first
    body.evaluate("b => { b.scrollTop = 0; }")
    in_sight(matrix, "case 0:")
    rows(matrix).nth(0).locator(".fragola-eval-mark").nth(1).focus()
    for _ in range(45):
        page.keyboard.press("ArrowDown")
    focused = page.evaluate("() => document.activeElement.dataset.at")
    assert focused == "45,1,0", focused
    in_sight(matrix, "case 45:")
    page.keyboard.press("ArrowUp")
    assert page.evaluate("() => document.activeElement.dataset.at") == "44,1,0"

    # 700 px: the diffed 100 × 2 matrix and the 4-variant one keep every mark and badge
    page.set_viewport_size({"width": 700, "height": 1000})
    diffed = h.cell(page, DIFFED).locator(".jp-OutputArea .fragola-eval").first
    four = h.cell(page, FOUR).locator(".jp-OutputArea .fragola-eval").first
    try:
        for theme in ("JupyterLab Light", "JupyterLab Dark"):
            set_theme(page, theme)
            dark = theme.endswith("Dark")
            for name, m, variants in (("diffed", diffed, 2), ("four", four, 4)):
                m.scroll_into_view_if_needed()
                expect(m).to_have_class(re.compile(r"\bfragola-eval-narrow\b"))
                expect(m.locator(".fragola-eval-change").first).to_be_visible()
                ui.shot(f"{name}-700px{'-dark' if dark else ''}", m)
                all_marks_in_sight(m, variants, badges=True)
                case_above_cells(m)
            if dark:
                ratios = page.locator(
                    ".fragola-eval-narrow :is(.fragola-eval-case, .fragola-eval-mark, "
                    ".fragola-eval-change, .fragola-eval-vname, .fragola-eval-vfacts)"
                ).evaluate_all(CONTRAST_JS)
                assert len(ratios) > 50
                low = [r for r in ratios if r["ratio"] < 4.5]
                assert low == [], low[:10]
        set_theme(page, "JupyterLab Light")

        # narrower still: the cue names the variants wholly in sight and says it scrolls
        page.set_viewport_size({"width": 560, "height": 1000})
        four.scroll_into_view_if_needed()
        more = four.locator(".fragola-eval-more")
        expect(more).to_be_visible()
        whole = four.evaluate("""m => {
          const s = m.querySelector('.fragola-eval-scroller').getBoundingClientRect();
          return [...m.querySelectorAll('.fragola-eval-vhead')].filter((v) => {
            const r = v.getBoundingClientRect();
            return r.left >= s.left - 1 && r.right <= s.right + 1; }).length; }""")
        assert 1 <= whole < 4, whole
        said = "variant 1 of 4 in sight" if whole == 1 else f"variants 1–{whole} of 4 in sight"
        expect(more).to_have_text(f"{said} · scroll →")
        ui.shot("four-560px-cue", four)
    finally:
        set_theme(page, "JupyterLab Light")
        page.set_viewport_size({"width": 1280, "height": 1100})
    assert page.evaluate(PWNED)
    ui.lab.shutdown_all_kernels()
    ui.assert_clean()
