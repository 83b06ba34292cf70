"""``export_html`` files opened from disk (file://) in Chromium with the network blocked: every
view clicked (history, a tool call opened, tree nodes, the batch filters, the comparison's
columns), hostile text shown as text, nothing requested, no console error; screenshots at
700 px and in the dark (``prefers-color-scheme: dark``) in the test's artifacts folder.

The runs are real (``tests/support/html_export_world.py``: the official ``openai`` client
against the scripted server). No JupyterLab here: only the ``browser`` fixture of this package.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from fragola_nb import export_html
from fragola_nb.models.scripted import ScriptedModel

from .export_pages import opening

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support import html_export_world as world

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three kinds of export, from real runs (long histories and forks of them:
    test_browser_export_windowed.py)."""
    folder = tmp_path_factory.mktemp("exports")

    async def build() -> dict[str, Any]:
        model = ScriptedModel().start()
        try:
            root = await world.tree_agent(model)
            compared = await world.comparison(model)
            result = await world.batch(model)
        finally:
            model.stop()
        return {"agent": root.forks[0].forks[0], "comparison": compared, "batch": result}

    # Playwright's sync API runs a loop in this thread: the runs get a thread of their own.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        made = pool.submit(lambda: asyncio.run(build())).result()
    paths = {kind: folder / f"{kind}.html" for kind in made}
    for kind, obj in made.items():
        export_html(obj, paths[kind])
    return paths


@pytest.fixture
def opener(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from opening(browser, request.node.name)


def test_an_agent_file_browses_its_tree_history_and_tool_calls(
        files: dict[str, Path], opener: Any) -> None:
    view = opener(files["agent"])
    page = view.page
    nodes = page.locator(".fx-node")
    expect(nodes).to_have_count(4)
    # the exported agent ("deeper") is selected, opened at its fork point: its own messages,
    # what it shares with its parent folded behind a marker
    expect(page.locator(".fx-node.fx-selected .fx-node-name")).to_have_text("deeper")
    expect(page.locator(".fx-fork-note")).to_have_text(
        "fork of fork </script><script>alert(1)</script> at message #8")
    expect(page.locator(".fx-detail .fx-msg .fx-index")).to_have_text(["#8", "#9"])
    expect(page.locator(".fx-fold-text")).to_have_text(
        "8 messages inherited from fork </script><script>alert(1)</script> (#0 to #7)")
    page.locator(".fx-fold-toggle").click()  # shown: the whole history
    expect(page.locator(".fx-detail .fx-msg")).to_have_count(10)
    # the server's half emoji (a lone surrogate) was stored as U+FFFD
    expect(page.locator(".fx-msg").last).to_contain_text("half \ufffd of an emoji")
    # hostile text is text: the names, the user's message, the answer, the controls written out
    expect(nodes.first.locator(".fx-node-name")).to_have_text(
        f"<b>root</b>{world.IMAGE}")
    expect(page.locator(".fx-msg-user").first).to_contain_text(f"Log me in {world.IMAGE}")
    expect(page.locator(".fx-msg-assistant .fx-md").nth(0)).to_contain_text(
        "Look: </script><script>alert(1)</script> <img src=x onerror=alert(2)>")
    expect(page.locator(".fx-msg-assistant .fx-md").nth(1)).to_have_text(
        "pay\\u200bpal line\\u2028para\\u2029end")
    view.shot("deeper-selected")

    # a tool call opened: its arguments (the key hidden) and its result
    call = page.locator(".fx-call").first
    call.locator("summary").click()
    expect(call.locator(".fx-args")).to_contain_text('"api_key": "[redacted]"')
    expect(call.locator(".fx-args")).to_contain_text('"user": "bob file\\u202egnp.exe"')
    expect(call.locator(".fx-result")).to_have_text(
        f"logged in as bob file\\u202egnp.exe {world.IMAGE}")
    result = page.locator(".fx-tool-result").first
    result.locator("summary").click()
    expect(result.locator("summary")).to_have_text("result of login")
    view.shot("tool-call-open")

    # another node clicked: its history alone
    nodes.first.click()
    expect(page.locator(".fx-node.fx-selected")).to_have_count(1)
    expect(page.locator(".fx-detail .fx-msg")).to_have_count(6)
    expect(page.locator(".fx-fork-note")).to_have_count(0)
    expect(page.locator(".fx-detail")).not_to_contain_text("fork question")
    expect(page.locator(".fx-fold")).to_have_count(0)  # the root inherits nothing
    nodes.nth(1).click()
    expect(page.locator(".fx-detail .fx-msg .fx-index")).to_have_text(["#6", "#7"])
    expect(page.locator(".fx-fork-note")).to_contain_text("at message #6")
    expect(page.locator(".fx-fold-toggle")).to_have_text("show")  # each fork opens folded
    # numbered as fork.state.messages[7] (from 0, as every view and the code count)
    expect(page.locator(".fx-msg").last).to_have_text("#7 · assistantthe fork's own answer")
    expect(page.locator(".fx-msg").last).to_have_attribute("data-index", "7")
    view.shot("fork-selected")
    view.assert_clean()


def test_a_comparison_file_shows_the_variants_side_by_side(
        files: dict[str, Path], opener: Any) -> None:
    view = opener(files["comparison"])
    page = view.page
    columns = page.locator(".fx-variant")
    expect(columns).to_have_count(2)
    first, second = (columns.nth(i).bounding_box() for i in range(2))
    assert first and second and first["y"] == second["y"] and second["x"] > first["x"]
    expect(columns.nth(1).locator("h2")).to_contain_text(f"long {world.IMAGE}")
    expect(columns.nth(0).locator(".fx-answer")).to_have_text(f"short {world.IMAGE}")
    expect(page.locator(".fx-asked")).to_have_text(f"asked: Which? {world.SCRIPT}")
    columns.nth(1).locator(".fx-variant-history summary").click()
    expect(columns.nth(1).locator(".fx-msg")).to_have_count(2)
    page.locator(".fx-shared summary").click()
    expect(page.locator(".fx-shared .fx-msg")).to_have_count(2)
    view.shot("comparison")
    view.assert_clean()


def test_a_batch_file_filters_its_rows(files: dict[str, Path], opener: Any) -> None:
    view = opener(files["batch"])
    page = view.page
    rows = page.locator("tr.fx-row")
    expect(rows).to_have_count(4)
    page.locator(".fx-filter-status").select_option("failed")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".fx-error")).to_contain_text("key [redacted]")
    expect(rows.first).to_contain_text(f"fail {world.IMAGE}")
    page.locator(".fx-filter-status").select_option("")
    page.locator(".fx-filter-text").fill("3 +")
    expect(rows).to_have_count(1)
    expect(page.locator(".fx-count")).to_have_text("1 of 4 rows")
    rows.first.click()
    expect(page.locator(".fx-row-detail .fx-msg")).to_have_count(2)
    expect(page.locator(".fx-row-detail .fx-msg").last).to_contain_text("answer to 3 + 3?")
    page.locator(".fx-filter-text").fill("")
    expect(rows).to_have_count(4)
    view.shot("batch")
    view.assert_clean()


def test_narrow_and_dark(files: dict[str, Path], opener: Any) -> None:
    for kind in ("agent", "comparison", "batch"):
        view = opener(files[kind], width=700, dark=True)
        page = view.page
        for summary in page.locator("summary").all():
            summary.click()
        background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(13, 17, 23)"
        # nothing wider than the window: the page does not scroll sideways
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 700
        view.shot(f"{kind}-700-dark")
        view.assert_clean()
