"""``fragola_nb.diff(a, b)`` as the paged view (``DiffView``): what it sends the browser holds
every pair, changes first (identical runs folded), its text made visible and its credentials
redacted; a kernel's cells show it, with a bounded static HTML beside it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

import fragola_nb
from fragola_nb.core.diffhtml import STATIC_ROWS
from fragola_nb.notebook.diff.view import PAGE, DiffView, unfolded

WIDGET = "application/vnd.jupyter.widget-view+json"
HOSTILE = ("<script>alert(1)</script> <img src=x onerror=alert(2)> [a](javascript:alert(3)) "
           "file\u202egnp.exe zero\u200bwidth \ud800 " + "A" * 5000)
KEY = "sk-proj-diffviewkey0123456789abcdef"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def long_branches() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    left = [user(f"q{i}") for i in range(5000)]
    right = [user(f"edited q{i}") if i >= 205 and i % 23 == 0 else m for i, m in enumerate(left)]
    right.insert(4010, user("one more"))
    return left, right


def test_the_view_holds_every_pair_changes_first_and_identical_runs_folded() -> None:
    d = fragola_nb.diff(*long_branches())
    view = DiffView(d)
    try:
        rows, head = view.rows, view.head
        differ = [r for r in rows if r["k"] != "fold"]
        folds = [r for r in rows if r["k"] == "fold"]
        assert head["counts"] == {"changed": 209, "only-left": 0, "only-right": 1, "same": 4584}
        assert head["common"] == 207 and head["pairs"] == 4794
        assert len(differ) == 210 and [r["k"] for r in differ].count("changed") == 209
        assert differ[-1]["l"]["n"] == "#4991" and differ[-1]["r"]["n"] == "#4992"
        assert differ[-1]["r"]["words"] == [["+", "edited "], ["=", "q4991"]]
        assert sum(f["count"] for f in folds) == 4584
        assert folds[0] == {"k": "fold", "count": 22, "where": "#208–#229"}
        assert {"k": "fold", "count": 15, "where": "#4010–#4024 ↔ #4011–#4025"} in folds
        # a fold's messages are sent when it is unfolded (the click's message asks for them)
        at = rows.index(folds[0])
        inner = unfolded(d, at)
        assert len(inner) == 22 and inner[0] == {
            "k": "same", "l": {"n": "#208", "role": "user", "edited": False, "text": "q208"}}
        assert sum(len(unfolded(d, i)) for i, r in enumerate(rows) if r["k"] == "fold") == 4584
        assert unfolded(d, 0) == [] and unfolded(d, 10_000) == []  # not a fold: nothing
    finally:
        view.close()


def test_the_view_sends_text_made_visible_and_no_credential() -> None:
    left = [user("start"), *[user("same " + HOSTILE + KEY)] * 3]
    right = [user("start!"), *[user("same " + HOSTILE + KEY)] * 3, {
        "role": "tool", "tool_call_id": "c\u202e1", "content": "other " + KEY + HOSTILE}]
    d = fragola_nb.diff(left, right)
    view = DiffView(d)
    try:
        sent = json.dumps([view.get_state(), unfolded(d, 1)], ensure_ascii=False)
        assert KEY not in sent and "diffviewkey" not in sent
        assert "\u202e" not in sent and "\u200b" not in sent and "\\\\u202e" in sent
        assert "\\\\ud800" in sent and sent.encode("utf-8")  # no lone surrogate left
        # a message's text is sent as text (the view draws it with textContent)
        assert "<script>alert(1)</script>" in sent
        assert sent.count("same <script>") == 3  # the fold's messages, asked for
        tool = view.rows[2]["r"]
        assert tool["role"] == "tool" and tool["id"] == "c\\u202e1"
    finally:
        view.close()


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.extension_manager.load_extension("fragola_nb")
    try:
        yield ip
    finally:
        ip.extension_manager.unload_extension("fragola_nb")
        ip.reset(new_session=False)


def test_a_kernel_cell_shows_the_view_with_a_bounded_static_copy(
        shell: InteractiveShell) -> None:
    d = fragola_nb.diff(*long_branches())
    data, _ = shell.display_formatter.format(d)
    assert WIDGET not in data  # not a kernel: the text and the static HTML
    shell._fragola_nb.widgets = True  # as in a kernel
    data, _ = shell.display_formatter.format(d)
    assert WIDGET in data and data["text/plain"].startswith("fragola_nb diff of 'a' and 'b'")
    assert data["text/html"].count('class="fragola-diff-row') == PAGE < STATIC_ROWS
    assert "… 110 more pairs that differ, not in this static copy" in data["text/html"]
    shell.extension_manager.unload_extension("fragola_nb")
    assert WIDGET not in shell.display_formatter.format(d)[0]  # unloaded: no view
    shell.extension_manager.load_extension("fragola_nb")  # for the fixture's unload
