"""Issue 33, item 1, as a person sees it in JupyterLab: the evaluation matrix's header reads
once costs show. Each variant's pass rate, cost and rows left are on lines of their own,
inside its column, never running into the next one: 2 variants and 8, costs from $0.0001 to
$1,234, a budget stop ("x% of N run", "N not run"), a baseline ("100% → 0%"), at 1,400 and
700 px, light and dark. With columns out of sight, a "scroll →" cue names them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect
from .test_browser_long_panel import CONTRAST_JS, set_theme

pytestmark = pytest.mark.timeout(420)

SCRIPT = '''\
from fragola_nb import Budget
from fragola_nb.graders import contains
from fragola_nb.models.scripted import ScriptedModel

def brain(request):
    said = request["messages"][-1]["content"]
    wrong = "odd" in str(request["messages"][0]["content"]) and said.endswith(("1", "3"))
    return reply(("London" if wrong else "Paris") + " says " + said)

server = ScriptedModel(brain=brain).start()
# a price per model, per million tokens: costs from a ten-thousandth of a dollar to thousands
PRICES = {f"m{i}": {"input": p, "output": p} for i, p in
          enumerate([0.5, 3, 40, 900, 12_000, 250_000, 4_000_000, 40_000_000])}
paid = Fragola(model="m0", api_key="sk-test", base_url=server.base_url, prices=PRICES,
               max_retries=0)
geo = paid.agent("geo")
cases = [f"capital of France, case {i}" for i in range(6)]
checks = [contains("Paris")]
two = {"plain": {"model": "m1"}, "odd-and-formal": {"model": "m6", "instructions": "odd"}}
eight = {f"variant-{i}" + ("-with-a-long-name" if i % 3 == 0 else ""):
         {"model": f"m{i}", "instructions": "odd" if i % 2 else "even"} for i in range(8)}
'''
TWO, EIGHT, CAPPED, DIFFED = 2, 3, 4, 5

# Every header line's text (its real extent, even when it overflows) inside its own column,
# and the columns side by side, none over another.
LAYOUT_JS = """(matrix) => {
  const heads = [...matrix.querySelectorAll('.fragola-eval-vhead')];
  const boxes = heads.map(h => h.getBoundingClientRect());
  const problems = [];
  boxes.forEach((b, i) => {
    if (i && b.left < boxes[i - 1].right - 0.5) problems.push('column ' + i + ' over ' + (i - 1));
    const lines = '.fragola-eval-vrate, .fragola-eval-vcost, .fragola-eval-vleft';
    for (const line of heads[i].querySelectorAll(lines)) {
      const range = document.createRange();
      range.selectNodeContents(line);
      const t = range.getBoundingClientRect();
      if (t.left < b.left - 0.5 || t.right > b.right + 0.5)
        problems.push(line.textContent + ' spills out of column ' + i);
      if (line.scrollWidth > line.clientWidth + 1) problems.push(line.textContent + ' is cut');
    }
  });
  return {problems, count: heads.length,
          texts: heads.map(h => [...h.querySelectorAll('.fragola-eval-vfacts > div')]
                                .map(d => d.textContent))};
}"""


def notebook(ui: UI, path: str) -> None:
    run = "await geo.evaluate(cases, {}, checks, progress=False{})"
    scenarios.write(ui.lab.root / path, scenarios.SETUP + "\n" + SCRIPT,
                    "first = " + run.format("two", "") + "\nfirst",
                    run.format("eight", ""),
                    run.format("two", ", concurrency=1, budget=Budget(tokens=60)"),
                    "later = " + run.format("{'plain': {'model': 'm1', 'instructions': 'odd'},"
                                            " 'odd-and-formal': two['odd-and-formal']}", "")
                    + "\n_ = later.diff(first)\nlater",
                    title="Issue 33: the header")


def matrix_of(page: Any, index: int) -> Any:
    matrix = h.cell(page, index).locator(".jp-OutputArea .fragola-eval")
    expect(matrix).to_have_count(1)
    return matrix


def laid_out(matrix: Any) -> dict[str, Any]:
    result: dict[str, Any] = matrix.evaluate(LAYOUT_JS)
    assert result["problems"] == [], result
    return result


def test_the_header_reads_with_costs_2_and_8_variants_a_budget_dark_and_700px(ui: UI) -> None:
    notebook(ui, "eval33.ipynb")
    ui.open_and_run_all("eval33.ipynb", timeout=300_000)
    page = ui.page
    page.set_viewport_size({"width": 1400, "height": 1100})

    two = matrix_of(page, TWO)
    expect(two.locator(".fragola-eval-vrate")).to_have_text(["100% passed", "67% passed"])
    costs = two.locator(".fragola-eval-vcost").all_text_contents()
    assert [c.startswith("$") for c in costs] == [True, True], costs
    assert laid_out(two)["count"] == 2
    expect(two.locator(".fragola-eval-more")).to_be_hidden()
    ui.shot("two-variants-1400", two)

    eight = matrix_of(page, EIGHT)
    texts = laid_out(eight)["texts"]
    assert len(texts) == 8
    shown = eight.locator(".fragola-eval-vcost").all_text_contents()
    assert len(shown) == 8 and all(any(c in t for t in texts) for c in shown), (shown, texts)
    # each variant's interval (issue 36) is a line of its own, laid out as the others
    assert all(any(line.startswith("[") for line in t) for t in texts), texts
    # costs of every size, each short: from "$0.0001"-like to "$1,234"-like
    assert any(c.startswith("$0.000") for c in shown) and any("," in c for c in shown), shown
    ui.shot("eight-variants-1400", eight)

    capped = matrix_of(page, CAPPED)
    texts = laid_out(capped)["texts"]
    assert any(" of " in t[0] and t[0].endswith(" run") for t in texts), texts
    assert any(t[-1].endswith(" not run") for t in texts), texts
    expect(capped.locator(".fragola-eval-top")).to_contain_text("stopped (budget")
    ui.shot("budget-stop-1400", capped)

    diffed = matrix_of(page, DIFFED)
    expect(diffed.locator(".fragola-eval-vrate").first).to_have_text("100% → 67% passed")
    expect(diffed.locator(".fragola-eval-against")).to_contain_text("against the baseline:")
    laid_out(diffed)
    ui.shot("baseline-1400", diffed)

    set_theme(page, "JupyterLab Dark")
    try:
        for index in (TWO, EIGHT, CAPPED):
            laid_out(matrix_of(page, index))
        ui.shot("eight-variants-dark", matrix_of(page, EIGHT))
        ui.shot("budget-stop-dark", matrix_of(page, CAPPED))
        parts = page.locator(".fragola-eval-vname, .fragola-eval-vrate, .fragola-eval-vcost, "
                             ".fragola-eval-vleft, .fragola-eval-against, .fragola-eval-more, "
                             ".fragola-eval-vci-text, .fragola-eval-verdict")
        low = [r for r in parts.evaluate_all(CONTRAST_JS) if r["ratio"] < 4.5]
        assert low == [], low[:10]
    finally:
        set_theme(page, "JupyterLab Light")

    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        two = matrix_of(page, TWO)
        two.scroll_into_view_if_needed()
        laid_out(two)
        ui.shot("two-variants-700", two)
        eight = matrix_of(page, EIGHT)
        eight.scroll_into_view_if_needed()
        laid_out(eight)
        box = eight.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 700, box
        more = eight.locator(".fragola-eval-more")
        expect(more).to_be_visible()
        expect(more).to_have_text(
            re.compile(r"^(variants? 1(–\d)? of 8 in sight|8 variants) · scroll →$"))
        frame = eight.locator(".fragola-eval-frame")
        expect(frame).to_have_class(re.compile("fragola-eval-more-right"))
        ui.shot("eight-variants-700", eight)
        more.click()  # scrolls towards the hidden variants
        expect(more).to_have_text(re.compile(r"scroll (↔|←)$"))
        eight.locator(".fragola-eval-scroller").evaluate("s => { s.scrollLeft = s.scrollWidth; }")
        expect(more).to_have_text(re.compile(r"(\b8 of 8 in sight|^8 variants) · scroll ←$"))
        last = eight.locator(".fragola-eval-vhead").last.bounding_box()
        assert last["x"] + last["width"] <= 700, last
        laid_out(eight)
        ui.shot("eight-variants-700-scrolled", eight)
    finally:
        page.set_viewport_size({"width": 1280, "height": 1100})
    ui.lab.shutdown_all_kernels()
    ui.assert_clean()
