"""``fragola_nb.diff(a, b)``'s HTML view in JupyterLab: two branches of one agent (a fork from
the middle whose tool result was edited, run on) side by side, with hostile text in the
user's message, the tool's arguments and result, both answers and a branch's name, in a
700 px window and the dark theme; and a diff of 3,000-message branches in a bounded box that
scrolls; and two 5,000-message branches (issue 34): the counts on top, the identical runs
folded and unfolding, the "changes only" view holding exactly the pairs that differ, and the
last change reachable, in a cell and in the fork tree (light, dark, 700 px)."""

from __future__ import annotations

from typing import Any

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
    assert "2 message(s) in common, then 2 pair(s): 2 differ" in text, text[:800]
    assert "2 changed" in text and "0 only in root" in text, text[:800]
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
        ratios = view.locator(".fragola-diff-text, .fragola-diff-role, .fragola-diff-head > div, "
                              ".fragola-diff-count, .fragola-diff-toggle").evaluate_all(CONTRAST_JS)
        assert len(ratios) >= 6 and [r for r in ratios if r["ratio"] < 4.5] == [], ratios
        ui.shot("diff-700px-dark", out)

        big = h.cell(page, 3).locator(".fragola-diff-body")
        expect(big).to_have_count(1)
        box = big.evaluate("e => [e.clientHeight, e.scrollHeight, e.scrollWidth, e.clientWidth]")
        assert box[0] < 600 and box[1] > 3 * box[0] and box[2] <= box[3] + 1, box
        # 3,000 pairs that differ, 100 a page
        expect(h.cell(page, 3).locator(".fragola-diff-where")).to_have_text(
            "lines 1–100 of 3,000 · page 1 of 30")
        big.evaluate("e => e.scrollTop = e.scrollHeight / 2")
        inside(h.cell(page, 3).locator(".fragola-diff"), 700)
        ui.shot("big-diff-scrolled-dark", h.cell(page, 3).locator(".jp-OutputArea"))
    finally:
        set_theme(page, "JupyterLab Light")
        page.set_viewport_size({"width": 1280, "height": 1100})
    assert dialogs == [] and page.evaluate(NOT_PWNED)
    ui.assert_clean()


LONG_BRANCHES = '''\
import fragola_nb
from fragola_nb.notebook.tree.view import ForkTree
root = Fragola.scripted().agent("root", messages=[
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "words " * 20}
    for i in range(5000)])
edited = root.fork("edited \\u202e" + "N" * 60)
for i in range(207, 5000, 23):  # 209 changes, 22 identical messages between two
    edited.edit(i, f"edited message {i}")
print("branches ready")
'''
LONG_DIFF = "fragola_nb.diff(root, edited)"
LONG_TREE = "tree = ForkTree(root); tree.compare(root, edited); tree"
CHANGES = len(range(207, 5000, 23))


def to_first(view: Any) -> None:
    first = view.locator(".fragola-diff-page-first")
    if first.is_enabled():
        first.click()
    expect(first).to_be_disabled()


def pages_of(view: Any) -> list[list[str]]:
    """Every page of a diff view from the first: the kind of each line drawn, a fold's line
    as "fold"."""
    to_first(view)
    seen = []
    while True:
        seen.append(view.locator(".fragola-diff-body > *").evaluate_all(
            "els => els.map(e => e.dataset.kind || (e.dataset.count ? 'fold' : e.className))"))
        after = view.locator(".fragola-diff-page-next")
        if after.is_disabled():
            return seen
        after.click()


def check_long_view(ui: UI, view: Any, name: str) -> None:
    """The counts, the folds, the changed-only view and the last change of the diff of the
    5,000-message branches, in ``view``."""
    expect(view.locator(".fragola-diff-total")).to_have_text(
        f"207 message(s) in common, then 4,793 pair(s): {CHANGES} differ")
    expect(view.locator(".fragola-diff-count-changed")).to_have_text(f"{CHANGES} changed")
    expect(view.locator(".fragola-diff-count-same")).to_have_text(f"{4793 - CHANGES:,} identical")
    # Changes first: the identical runs folded, each behind one line; at most a page drawn.
    first = view.locator(".fragola-diff-fold-line").first
    expect(first).to_have_text("… 22 identical messages (#208–#229)")
    pages = pages_of(view)
    lines = [kind for one in pages for kind in one]
    assert max(len(one) for one in pages) <= 100, [len(one) for one in pages]
    assert lines.count("changed") == CHANGES and lines.count("fold") == CHANGES
    assert lines.count("same") == 0  # every identical message is in a fold
    # The last page holds the last change (#4991) and the fold after it.
    assert view.locator('.fragola-diff-cell[data-index="#4991"]').count() == 2
    expect(view.locator(".fragola-diff-fold-line").last).to_have_text(
        "… 8 identical messages (#4992–#4999)")
    ui.shot(f"{name}-last-page", view)
    # A fold unfolds (its 22 messages asked of the kernel) and folds again.
    to_first(view)
    first.click()
    unfolded = view.locator(".fragola-diff-unfolded")
    expect(unfolded).to_have_count(22)
    expect(unfolded.first).to_contain_text("#208")
    expect(unfolded.first).to_contain_text("message 208 words")
    expect(first).to_have_attribute("aria-expanded", "true")
    ui.shot(f"{name}-unfolded", view)
    first.click()
    expect(unfolded).to_have_count(0)
    # "changes only": exactly the pairs that differ, as many as the counts on top say.
    differ = int(view.locator(".fragola-diff-total").get_attribute("data-differ") or -1)
    view.locator(".fragola-diff-only").check()
    lines = [kind for one in pages_of(view) for kind in one]
    assert lines == ["changed"] * CHANGES and differ == CHANGES, lines[:5]
    expect(view.locator(".fragola-diff-where")).to_have_text(
        f"lines 201–{CHANGES} of {CHANGES} · page 3 of 3")
    assert view.locator('.fragola-diff-cell[data-index="#4991"]').count() == 2
    ui.shot(f"{name}-changes-only", view)
    view.locator(".fragola-diff-only").uncheck()


def test_two_5000_message_branches_changes_first_in_a_cell_and_in_the_tree(ui: UI) -> None:
    scenarios.write(ui.lab.root / "long_diff.ipynb", scenarios.SETUP + "\n" + LONG_BRANCHES,
                    LONG_DIFF, LONG_TREE, title="Long branches")
    ui.open_and_run_all("long_diff.ipynb", timeout=240_000)
    page = ui.page
    cell_view = h.cell(page, 2).locator(".fragola-diff")
    expect(cell_view).to_have_count(1)
    check_long_view(ui, cell_view, "cell")
    tree_view = h.cell(page, 3).locator(".fragola-tree-compared .fragola-diff")
    expect(tree_view).to_have_count(1)
    check_long_view(ui, tree_view, "tree")
    head = h.cell(page, 3).locator(".fragola-tree-diff-head")
    page.set_viewport_size({"width": 700, "height": 1000})
    try:
        for view, name in ((cell_view, "cell"), (tree_view, "tree")):
            view.scroll_into_view_if_needed()
            inside(view, 700)
            ui.shot(f"{name}-700px", view)
        # the tree's line above the diff wraps: the second branch's whole name is in sight
        inside(head, 700)
        assert head.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
        ui.shot("tree-head-700px", h.cell(page, 3).locator(".fragola-tree-compared"))
        set_theme(page, "JupyterLab Dark")
        for view, name in ((cell_view, "cell"), (tree_view, "tree")):
            ratios = view.locator(".fragola-diff-text, .fragola-diff-role, .fragola-diff-count, "
                                  ".fragola-diff-fold-line, .fragola-diff-where, "
                                  ".fragola-diff-toggle").evaluate_all(CONTRAST_JS)
            assert len(ratios) >= 10 and [r for r in ratios if r["ratio"] < 4.5] == [], ratios
            ui.shot(f"{name}-700px-dark", view)
    finally:
        set_theme(page, "JupyterLab Light")
        page.set_viewport_size({"width": 1280, "height": 1100})
    ui.assert_clean()
