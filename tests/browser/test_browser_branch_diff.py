"""``fragola_nb.diff(a, b)``'s HTML view in JupyterLab: two branches of one agent (a fork from
the middle whose tool result was edited, run on) side by side, with hostile text in the
user's message, the tool's arguments and result, both answers and a branch's name, in a
700 px window and the dark theme; and a diff of 3,000-message branches in a bounded box that
scrolls."""

from __future__ import annotations

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, expect
from .test_browser_guardrails_view import EVIL, LONG, NOT_PWNED, inside, no_markup
from .test_browser_long_panel import CONTRAST_JS, set_theme

pytestmark = pytest.mark.timeout(300)

BRANCHES = f'''\
import json
import fragola_nb
EVIL, LONG = {EVIL!r}, {LONG!r}
office = Fragola.scripted()
root = office.agent("root", messages=[
    {{"role": "user", "content": "Find it " + EVIL}},
    {{"role": "assistant", "tool_calls": [{{"id": "c1", "type": "function", "function": {{
        "name": "lookup", "arguments": json.dumps({{"q": EVIL}})}}}}]}},
    {{"role": "tool", "tool_call_id": "c1", "content": "found " + EVIL + LONG}},
    {{"role": "assistant", "content": "The answer is blue. " + EVIL}},
])
what_if = root.fork("what-if \\u202e<b>x</b>", at=3)
what_if.edit(2, result="missing pay\\u200bpal " + EVIL)
office.script(what_if, [reply("The answer is grey. " + EVIL)])
await what_if.step()
'''
DIFF = "fragola_nb.diff(root, what_if)"
BIG = '''\
left = [{"role": "user", "content": f"question {i} " + EVIL} for i in range(3000)]
right = [{"role": "user", "content": f"query {i} " + EVIL} for i in range(3000)]
fragola_nb.diff(left, right)'''


def test_the_diff_of_two_branches_hostile_narrow_dark(ui: UI) -> None:
    scenarios.write(ui.lab.root / "diff.ipynb", scenarios.SETUP + "\n" + BRANCHES, DIFF, BIG,
                    title="Branch diff")
    dialogs: list[str] = []
    ui.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    ui.open_and_run_all("diff.ipynb")
    page = ui.page
    out = h.cell(page, 2).locator(".jp-OutputArea")
    view = out.locator(".fragola-diff")
    expect(view).to_have_count(1)
    text = view.inner_text()
    assert "what-if \\u202e<b>x</b>" in text and "pay\\u200bpal" in text, text[:500]
    assert "\u202e" not in text and "\u200b" not in text
    assert "2 message(s) in common, then 2 pair(s): 2 changed" in text, text[:800]
    # The changed words are marked, each side its own; the rest is plain text.
    expect(view.locator("del", has_text="blue")).to_have_count(1)
    expect(view.locator("ins", has_text="grey")).to_have_count(1)
    expect(view.locator("ins", has_text="missing")).to_have_count(1)
    expect(view.locator(".fragola-diff-changed")).to_have_count(2)
    no_markup(out, page)
    ui.shot("diff-1280", out)

    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        out.scroll_into_view_if_needed()
        inside(view, 700)
        # The two sides share the width (the file browser open leaves the notebook ~330 px):
        # neither is squeezed by the other's 5,000-character token.
        width = view.evaluate("e => e.getBoundingClientRect().width")
        cells = view.locator(".fragola-diff-cell").evaluate_all(
            "els => els.map(e => e.getBoundingClientRect().width)")
        assert cells and min(cells) > 0.4 * width, (cells, width)
        ui.shot("diff-700px", out)
        set_theme(page, "JupyterLab Dark")
        ratios = view.locator(".fragola-diff-text, .fragola-diff-role, .fragola-diff-head > div"
                              ).evaluate_all(CONTRAST_JS)
        assert len(ratios) >= 6 and [r for r in ratios if r["ratio"] < 4.5] == [], ratios
        ui.shot("diff-700px-dark", out)

        big = h.cell(page, 3).locator(".fragola-diff-body")
        expect(big).to_have_count(1)
        box = big.evaluate("e => [e.clientHeight, e.scrollHeight, e.scrollWidth, e.clientWidth]")
        assert box[0] < 600 and box[1] > 10 * box[0] and box[2] <= box[3] + 1, box
        big.evaluate("e => e.scrollTop = e.scrollHeight / 2")
        inside(h.cell(page, 3).locator(".fragola-diff"), 700)
        ui.shot("big-diff-scrolled-dark", h.cell(page, 3).locator(".jp-OutputArea"))
    finally:
        set_theme(page, "JupyterLab Light")
        page.set_viewport_size({"width": 1280, "height": 1100})
    assert dialogs == [] and page.evaluate(NOT_PWNED)
    ui.assert_clean()
