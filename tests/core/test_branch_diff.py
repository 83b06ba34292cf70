"""``fragola_nb.diff(a, b)``: two branches aligned after their common prefix, as data and HTML."""

from __future__ import annotations

import re

import pytest
from support.helpers import answered, asked, make_agent, user

import fragola_nb
from fragola_nb import BadUsage, BranchDiff
from fragola_nb.core.diffhtml import STATIC_ROWS
from fragola_nb.models.scripted import call, reply, tool_calls

HOSTILE = ("<script>alert(1)</script> <img src=x onerror=alert(2)> "
           "[link](javascript:alert(3)) file\u202egnp.exe zero\u200bwidth " + "A" * 5000)


def _lookup(q: str) -> str:
    """Look ``q`` up."""
    return f"{q} found"


lookup = fragola_nb.tool(_lookup, name="lookup")


def test_aligned_pairs_after_the_common_prefix():
    left = [user("Hi"), {"role": "assistant", "content": "The sky is blue today."},
            user("And grass?"), {"role": "assistant", "content": "Green."}]
    right = [user("Hi"), {"role": "assistant", "content": "The sky is grey today."},
             user("And grass?"), user("Well?"), {"role": "assistant", "content": "Green."}]

    d = fragola_nb.diff(left, right)

    assert d.common == 1
    assert [p.kind for p in d.pairs] == ["changed", "same", "only-right", "same"]
    changed = d.pairs[0]
    assert ("-", "blue") in changed.words and ("+", "grey") in changed.words
    assert ("=", "The sky is ") in changed.words
    assert (changed.left_index, changed.right_index) == (1, 1)
    assert d.pairs[2].left is None and d.pairs[2].right == user("Well?")
    assert (d.pairs[3].left_index, d.pairs[3].right_index) == (3, 4)
    left_msg, right_msg = d.pairs[1]
    assert left_msg == right_msg == user("And grass?")
    assert repr(d) == ("BranchDiff('a' vs 'b': 1 in common, 4 pairs after: 2 same, 1 changed, "
                       "0 only-left, 1 only-right)")


def test_tool_calls_arguments_and_results_are_compared():
    left = [user("go"), asked(("c1", "lookup", {"q": "x"})), answered("c1", "x found")]
    right = [user("go"), asked(("c1", "lookup", {"q": "y"})), answered("c1", "y missing")]
    d = fragola_nb.diff(left, right)
    assert d.common == 1 and [p.kind for p in d.pairs] == ["changed", "changed"]
    call_words, result_words = d.pairs[0].words, d.pairs[1].words
    assert ("-", "x") in call_words and ("+", "y") in call_words
    assert any(op == "=" and "lookup" in text for op, text in call_words)
    assert ("-", "found") in result_words and ("+", "missing") in result_words


async def test_two_forks_diff_with_their_own_usage(model):
    agent = make_agent(model, lookup, name="root")
    model.push(tool_calls(call("lookup", {"q": "x"}, id="c1")), reply("x found."))
    await agent.user_message("Find x.")
    a, b = agent.fork("plain", at=1), agent.fork("edited", at=3)
    b.edit(2, result="x is not there")
    model.push(tool_calls(call("lookup", {"q": "x"}, id="c2")), reply("Found it."),
               reply("It is not there."))
    await a.step()
    await b.step()

    d = fragola_nb.diff(a, b)

    assert d.names == ("plain", "edited") and d.common == 1
    assert [p.kind for p in d.pairs] == ["changed", "changed", "changed"]
    assert d.pairs[1].right["content"].endswith("x is not there")
    left_usage, right_usage = d.usage
    assert left_usage is not None and right_usage is not None
    # plain made two calls after the prefix; edited one (the calls it inherited cost it none)
    assert (left_usage.requests, right_usage.requests) == (2, 1)
    assert d.lengths == (4, 4)
    assert isinstance(d, BranchDiff)
    # The parent against a fork: the same prefix, then what each holds.
    assert fragola_nb.diff(agent, b).common == 2


def test_not_branches_is_one_bad_usage():
    with pytest.raises(BadUsage, match="diff\\(\\) compares two agents"):
        fragola_nb.diff("a", [user("x")])


def test_html_escapes_hostile_text_and_marks_words():
    left = [user("q"), {"role": "assistant", "content": "safe words " + HOSTILE}]
    right = [user("q"), {"role": "assistant", "content": "other words " + HOSTILE},
             {"role": "tool", "tool_call_id": "c\u202e1", "content": "\ud800 lone"}]
    page = fragola_nb.diff(left, right)._repr_html_()

    body = page.split("</style>", 1)[1]
    assert "<script" not in body and "<img" not in body and "<a " not in body
    assert "&lt;script&gt;" in body and "&lt;img src=x onerror=alert(2)&gt;" in body
    assert "\u202e" not in page and "\u200b" not in page
    assert "file\\u202egnp.exe" in body and "zero\\u200bwidth" in body
    assert "<del>safe</del>" in body and "<ins>other</ins>" in body
    assert 'class="fragola-diff-row fragola-diff-only-right"' in body
    assert "\\ud800 lone" in body and page.encode("utf-8")  # no lone surrogate is left


def long_branches() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Two 5,000-message branches alike but for every 23rd message from #205 (209 changed
    pairs), and a message only the right holds (#4010)."""
    left = [user(f"q{i}") for i in range(5000)]
    right = [user(f"edited q{i}") if i >= 205 and i % 23 == 0 else m for i, m in enumerate(left)]
    right.insert(4010, user("one more"))
    return left, right


def test_html_of_thousands_of_messages_shows_the_changes_first_and_folds_identical_runs():
    d = fragola_nb.diff(*long_branches())
    page = d._repr_html_()
    changed = len(range(207, 5000, 23))  # 207 is the first multiple of 23 from 205
    assert d.common == 207 and d.count("changed") == changed and d.count("only-right") == 1
    # Every pair that differs is in the page, the last one included; the identical ones
    # fill what is left of the static copy's STATIC_ROWS (4 runs of 22).
    assert page.count('data-kind="changed"') == changed and "<ins>edited </ins>" in page
    assert page.count('data-kind="only-right"') == 1
    assert 'data-index="#4991"' in page and 'data-index="#4992"' in page
    assert page.count('data-kind="same"') == 4 * 22 <= STATIC_ROWS - changed - 1
    folds = re.findall(r'<details class="fragola-diff-fold" data-count="(\d+)"><summary>'
                       r"… ([\d,]+) identical messages \((#[^<]*)\)</summary>", page)
    assert folds[0] == ("22", "22", "#208–#229") and len(folds) == 4
    later = re.findall(r'data-count="(\d+)">… [\d,]+ identical messages \((#[^<]*)\), not in '
                       "this static copy", page)
    # 208 runs between changes, one after the last, one split in two by the added message
    assert len(folds) + len(later) == changed + 1
    assert sum(int(n) for n, *_ in folds + later) == d.count("same")
    assert ("15", "#4010–#4024 ↔ #4011–#4025") in later  # after the added one
    assert f'data-count="{changed}">{changed} changed</span>' in page
    assert 'data-count="1">1 only in b</span>' in page and "0 only in a" in page
    assert f"changes only ({changed + 1})" in page and f'data-differ="{changed + 1}"' in page
    assert "max-height:32em;overflow:auto" in page and "more pairs" not in page


def test_html_past_its_budget_counts_the_pairs_that_differ_left_out():
    left = [user(f"q{i}") for i in range(3000)]
    right = [user(f"r{i}") for i in range(3000)]
    page = fragola_nb.diff(left, right)._repr_html_()
    assert page.count('class="fragola-diff-row') == STATIC_ROWS
    assert f"… {3000 - STATIC_ROWS:,} more pairs that differ, not in this static copy" in page
    assert "changes only (3,000)" in page


def test_short_identical_runs_are_not_folded():
    left = [user("a"), user("b"), user("c"), user("d"), user("e")]
    right = [user("A"), user("b"), user("c"), user("D"), user("e")]
    page = fragola_nb.diff(left, right)._repr_html_()
    assert "fragola-diff-fold" not in page.split("</style>", 1)[1]
    assert page.count('data-kind="same"') == 3  # b, c and e, shown as they are
    assert "changes only (2)" in page


def test_identical_messages_show_once_with_both_numbers_and_stay_escaped():
    same = [user(f"alike {i} " + HOSTILE) for i in range(4)]
    left, right = [user("x"), *same], [user("y"), user("extra"), *same]
    body = fragola_nb.diff(left, right)._repr_html_().split("</style>", 1)[1]
    assert "… 4 identical messages (#1–#4 ↔ #2–#5)" in body
    assert 'data-index="#1 ↔ #2"' in body and body.count("alike 0") == 1
    assert "<script" not in body and "<img" not in body and "\u202e" not in body
    # an identical message is shortened (nothing in it differs)
    assert f"({len('alike 0 ' + HOSTILE) - 1000:,} more characters)" in body
