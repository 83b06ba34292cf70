"""``export_html`` files opened from disk (file://) in Chromium with the network blocked: every
view clicked (history, a tool call opened, tree nodes, the batch filters, the comparison's
columns), hostile text shown as text, nothing requested, no console error; screenshots at
700 px and in the dark (``prefers-color-scheme: dark``) in the test's artifacts folder.

The runs are real (``tests/html_export_world.py``: the official ``openai`` client against the
scripted server). No JupyterLab here: only the ``browser`` fixture of this package.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from fragola_nb import Fragola, export_html
from fragola_nb.models.scripted import ScriptedModel

from .conftest import ARTIFACTS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import html_export_world as world

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three kinds of export, from real runs, and a 5,000-message agent."""
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
    fragola = Fragola(api_key="k", base_url="http://127.0.0.1:9/v1")
    long = fragola.agent("long", messages=[
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i + 1}"}
        for i in range(5_000)])
    paths["long"] = folder / "long.html"
    export_html(long, paths["long"])
    return paths


@dataclass
class Opened:
    page: Page
    folder: Path
    requests: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    shots: int = 0

    def shot(self, name: str) -> None:
        self.shots += 1
        self.page.screenshot(path=str(self.folder / f"{self.shots:02d}-{name}.png"),
                             full_page=True)

    def assert_clean(self) -> None:
        assert self.requests == [], f"the file asked the network for {self.requests}"
        assert self.errors == [], self.errors
        assert [t for kind, t in self.console if kind == "error"] == []
        assert self.dialogs == []
        # nothing a model wrote became an element
        assert self.page.evaluate(
            "() => document.querySelectorAll('img,iframe,object,embed,form,"
            "script:not(#fx-data):not(:last-of-type)').length") == 0


@pytest.fixture
def opener(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Any]:
    folder = ARTIFACTS / request.node.name.replace("/", "_")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    contexts = []

    def open_file(path: Path, *, width: int = 1100, dark: bool = False) -> Opened:
        context = browser.new_context(viewport={"width": width, "height": 800},
                                      color_scheme="dark" if dark else "light")
        contexts.append(context)
        page = context.new_page()
        opened = Opened(page, folder)

        def route(r: Any) -> None:
            if r.request.url.startswith("file://"):
                r.continue_()
            else:  # recorded, and never let through
                opened.requests.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        page.on("console", lambda m: opened.console.append((m.type, m.text)))
        page.on("pageerror", lambda e: opened.errors.append(str(e)))
        def dialog(d: Any) -> None:  # an alert() that ran: recorded, dismissed
            opened.dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", dialog)
        page.goto(path.as_uri())
        expect(page.locator("html[data-fx-ready]")).to_have_count(1)
        return opened

    yield open_file
    for context in contexts:
        context.close()


def test_an_agent_file_browses_its_tree_history_and_tool_calls(
        files: dict[str, Path], opener: Any) -> None:
    view = opener(files["agent"])
    page = view.page
    nodes = page.locator(".fx-node")
    expect(nodes).to_have_count(4)
    # the exported agent ("deeper") is selected: its whole history, and where it was forked
    expect(page.locator(".fx-node.fx-selected .fx-node-name")).to_have_text("deeper")
    expect(page.locator(".fx-detail .fx-msg")).to_have_count(10)
    expect(page.locator(".fx-fork-note")).to_have_text(
        "fork of fork </script><script>alert(1)</script> at message #8")
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
    nodes.nth(1).click()
    expect(page.locator(".fx-detail .fx-msg")).to_have_count(8)
    expect(page.locator(".fx-fork-note")).to_contain_text("at message #6")
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


def test_a_long_history_is_drawn_as_it_is_scrolled_to(files: dict[str, Path],
                                                      opener: Any) -> None:
    view = opener(files["long"])
    page = view.page
    messages = page.locator(".fx-msg")
    expect(messages.first).to_contain_text("message 1")
    drawn = messages.count()
    assert 0 < drawn <= 150, drawn  # not 5,000 nodes at once
    # Scrolled to, the next chunk is drawn; a click on "show more" draws one more. When the
    # observer's callback lands (before or after the click) is the browser's: the counts are
    # whole chunks that grow, never the 5,000 at once.
    page.locator(".fx-more").scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelectorAll('.fx-msg').length >= 300")
    before = messages.count()
    page.locator(".fx-more").click()
    page.wait_for_function("(n) => document.querySelectorAll('.fx-msg').length >= n + 150",
                           arg=before)
    after = messages.count()
    assert before % 150 == 0 and after % 150 == 0 and after < 5000, (before, after)
    expect(page.locator(".fx-more")).to_contain_text(f"{after:,} of 5,000 shown")
    view.assert_clean()
