"""Issue 36 as a person sees it in JupyterLab: the evaluation matrix shows each variant's pass
rate with its 95% interval (a bar) and a verdict line per variant on top, marks a flaky cell
(its repeats disagree), and labels a row from its detail (✗ and a note, reaching
``Evaluation.label`` in the kernel); hostile variant names as text, the dark theme
(contrast), a 700 px window, and the saved static table saying the same."""

from __future__ import annotations

import re
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect
from .test_browser_long_panel import CONTRAST_JS, set_theme

pytestmark = pytest.mark.timeout(300)

EVIL = '<img src=x onerror="window.__pwned=1">fo\u202erm'
SCRIPT = f'''\
from fragola_nb.graders import contains
EVIL = {EVIL!r}
asked = {{}}

def brain(request):
    first = request["messages"][0]
    mood = first["content"] if first["role"] == "system" else ""
    number = int(request["messages"][-1]["content"].split()[1].rstrip(":"))
    if number == 11:  # a coin: Paris and London in turn, on every variant
        asked[mood] = asked.get(mood, 0) + 1
        return reply("Paris" if asked[mood] % 2 else "London")
    if "evil" in mood:
        return reply("London")
    return reply("Paris" if "formal" in mood or number % 3 else "London")

agent = Fragola.scripted(brain=brain).agent("geo")
cases = [f"case {{i}}: capital of France?" for i in range(12)]
variants = {{"brief": {{}}, "formal": {{"instructions": "formal"}},
            EVIL: {{"instructions": "evil"}}}}
'''
RUN, LABELLED = 2, 3
PWNED = "() => window.__pwned === undefined"


def test_intervals_verdicts_flaky_cells_and_a_label_set_in_the_view(ui: UI) -> None:
    scenarios.write(ui.lab.root / "verdicts36.ipynb", scenarios.SETUP + "\n" + SCRIPT,
                    "evaluation = await agent.evaluate(cases, variants, [contains('Paris')], "
                    "repeat=2, concurrency=1)\nevaluation",
                    "print(evaluation[-1].label)", title="Issue 36")
    dialogs: list[str] = []
    ui.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    ui.open_and_run_all("verdicts36.ipynb", timeout=180_000)
    page = ui.page
    out = h.cell(page, RUN).locator(".jp-OutputArea")
    matrix = out.locator(".fragola-eval")
    expect(matrix).to_have_count(1)

    # a verdict line per variant against the first, on top; the hostile name as text
    lines = matrix.locator(".fragola-eval-verdicts .fragola-eval-verdict")
    expect(lines).to_have_count(2)
    expect(lines.nth(0)).to_have_text(
        "formal vs brief: +33 pts [+2, +65], p = 0.12 (Holm: 0.12), not distinguishable "
        "(about 18 cases would tell)")
    expect(lines.nth(1)).to_contain_text(
        '<img src=x onerror="window.__pwned=1">fo\\u202erm vs brief: −58 pts')
    expect(lines.nth(1)).to_contain_text("brief better")
    expect(lines.nth(1)).to_have_class(re.compile(r"\bfragola-eval-verdict-decided\b"))
    # each variant's pass rate with its interval: a bar and the bounds
    expect(matrix.locator(".fragola-eval-vci-text")).to_have_text(
        ["[32–93%]", "[87–100%]", "[0–13%]"])
    bars = matrix.locator(".fragola-eval-vhead .fragola-eval-bar")
    expect(bars).to_have_count(3)
    ranges = bars.evaluate_all("bs => bs.map(b => b.firstChild.getBoundingClientRect().width)")
    assert ranges[0] > ranges[1] > 0, ranges  # brief's interval is the widest
    # the coin case: flaky on every variant
    coin = out.locator(".fragola-eval-rows .fragola-eval-row").nth(11)
    expect(coin.locator(".fragola-eval-flakymark")).to_have_count(3)
    expect(coin.locator(".fragola-eval-cell").nth(0)).to_have_class(
        re.compile(r"\bfragola-eval-flaky\b"))
    assert out.locator("script, img, a, iframe").count() == 0
    ui.shot("verdicts-and-intervals", out)

    # a click on case 11's hostile-named cell, repeat 2, then ✗ with a note: labelled
    coin.locator(".fragola-eval-cell").nth(2).locator(".fragola-eval-mark").nth(1).click()
    detail = matrix.locator(".fragola-eval-detail")
    labels = detail.locator(".fragola-eval-labelbox")
    expect(labels.locator(".fragola-eval-label-n")).to_be_enabled()
    labels.locator(".fragola-eval-labelnote").fill("<b>London</b> is wrong")
    labels.locator(".fragola-eval-label-n").click()
    expect(labels.locator(".fragola-eval-label-n")).to_have_attribute("aria-pressed", "true")
    expect(labels.locator(".fragola-eval-labeltitle")).to_have_text("your label:")
    labelled = coin.locator(".fragola-eval-cell").nth(2).locator(".fragola-eval-mark").nth(1)
    expect(labelled).to_have_class(re.compile(r"\bfragola-eval-mark-labelled\b"))
    ui.shot("labelled-in-the-detail", out)
    h.run_cell(page, LABELLED)
    expect(h.cell_output(page, LABELLED)).to_have_text(
        "Label(passed=False, note='<b>London</b> is wrong')")

    # dark theme: the verdicts, the bounds and the label controls readable
    set_theme(page, "JupyterLab Dark")
    try:
        ui.shot("verdicts-dark", out)
        parts = page.locator(".fragola-eval-verdict, .fragola-eval-vci-text, "
                             ".fragola-eval-flakymark, .fragola-eval-labelbtn, "
                             ".fragola-eval-labeltitle, .fragola-eval-vfacts")
        ratios = parts.evaluate_all(CONTRAST_JS)
        assert len(ratios) >= 12
        low = [r for r in ratios if r["ratio"] < 4.5]
        assert low == [], low[:10]
    finally:
        set_theme(page, "JupyterLab Light")

    # 700 px: the verdict lines wrap inside the output, the matrix stays in the window
    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        out.scroll_into_view_if_needed()
        box = matrix.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 700, box
        width = out.evaluate("o => [o.scrollWidth, o.clientWidth]")
        assert width[0] <= width[1] + 1, width
        wrapped = lines.nth(1).evaluate("l => [l.scrollWidth, l.clientWidth]")
        assert wrapped[0] <= wrapped[1] + 1, wrapped
        ui.shot("verdicts-700px", out)
    finally:
        page.set_viewport_size({"width": 1280, "height": 1100})
    assert dialogs == [] and page.evaluate(PWNED)

    # saved: the static table says the same, escaped
    saved = h.save_notebook(page, ui.lab, "verdicts36.ipynb")
    html = "".join(o["data"].get("text/html", "") for o in saved["cells"][RUN]["outputs"]
                   if "data" in o)
    assert "formal vs brief: +33 pts [+2, +65], p = 0.12 (Holm: 0.12)" in html
    assert "32–93% of 12 cases" in html and "≈ flaky" in html and "labelled ✗" in html
    assert "&lt;img src=x" in html and "<img" not in html
    static = ui.tab.context.new_page()
    static.set_content(html)
    assert static.locator("script, img, a").count() == 0 and static.evaluate(PWNED)
    static.screenshot(path=str(ui.dir / "static-verdicts.png"))
    static.close()
    text: Any = saved["cells"][RUN]["outputs"]
    assert any("formal vs brief: +33 pts" in "".join(o.get("data", {}).get("text/plain", ""))
               for o in text)
    ui.lab.shutdown_all_kernels()
    ui.assert_clean()
