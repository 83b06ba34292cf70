"""``export_html`` of long histories, opened from disk (file://) in Chromium with the network
blocked (no JupyterLab): a fork of a 5,000-message run opens at its fork point (the 2,500
messages it inherits folded behind a marker, its first own message in view), unfolds with the
inherited messages in view above the marker, jumps back to it; after a full scroll the page
still holds a few hundred elements and every message was drawn on the way; the export's own
find (which Ctrl+F opens: the browser's find sees only the rows drawn) reaches messages that
are not drawn, folded ones included; a deep fork's name keeps its room in the tree beside its
marks. Screenshots (light, dark, 700 px) in the test's artifacts folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from fragola_nb import Fragola, export_html

from .export_pages import opening

pytestmark = pytest.mark.timeout(240)

LONG, AT = 5_000, 2_500
# Down the whole page a screen at a time, a frame after each step: every message drawn on
# the way, the most elements and message rows the page held at once, and at the end.
SCROLL_ALL_JS = """async () => {
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const seen = new Set();
  let most = 0, rows = 0, last = -1, still = 0;
  for (let step = 0; step < 20000 && still < 3; step++) {
    await frame();
    for (const m of document.querySelectorAll('.fx-detail .fx-msg')) seen.add(+m.dataset.index);
    most = Math.max(most, document.getElementsByTagName('*').length);
    rows = Math.max(rows, document.querySelectorAll('.fx-msg').length);
    still = window.scrollY === last ? still + 1 : 0;
    last = window.scrollY;
    window.scrollBy(0, window.innerHeight);
  }
  return {seen: [...seen], most, rows, end: document.getElementsByTagName('*').length};
}"""


def message(i: int, text: str) -> dict[str, Any]:
    if i % 10 == 5:  # a taller one now and then: rows are not all of one height
        return {"role": "assistant", "content": f"{text}:\n\n- a point\n- another\n\n**done**"}
    return {"role": "user" if i % 2 == 0 else "assistant", "content": text}


@pytest.fixture(scope="module")
def long_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 5,000-message run, its fork at message 2,500 adding 2,500 of its own (a needle to
    find in each part), and a tree nine forks deep, each with a message edited by hand."""
    folder = tmp_path_factory.mktemp("long-exports")
    fragola = Fragola(api_key="k", base_url="http://127.0.0.1:9/v1")
    run = fragola.agent("long", messages=[
        message(i, "an inherited needle" if i == 1_234 else f"message {i}") for i in range(LONG)])
    fork = run.fork("what if", at=AT)
    fork.reset([*fork.state.messages, *(
        message(i, "an own needle" if i == 4_321 else f"own {i}") for i in range(AT, LONG))])
    deep = fragola.agent("root", messages=[message(i, f"m {i}") for i in range(20)])
    for depth in range(8):
        deep = deep.fork(f"fork-depth-{depth}-experiment_name")
        deep.reset([*deep.state.messages, message(0, "asked"), message(1, "answered")])
        deep.edit(len(deep.state.messages) - 1, content="edited by a person")
    paths = {name: folder / f"{name}.html" for name in ("run", "fork", "deep")}
    for name, agent in (("run", run), ("fork", fork), ("deep", deep)):
        export_html(agent, paths[name])
    return paths


@pytest.fixture
def opener(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from opening(browser, request.node.name)


def box(locator: Locator) -> dict[str, float]:
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not drawn"
    return dict(found)


def in_view(page: Page, locator: Locator) -> bool:
    """Wholly on the screen, below the history's sticky bar."""
    found = box(locator)
    under = page.evaluate("() => document.querySelector('.fx-bar').getBoundingClientRect().bottom")
    height = (page.viewport_size or {"height": 0})["height"]
    return found["y"] >= under - 1 and found["y"] + found["height"] <= height + 1


def drawn(page: Page) -> list[int]:
    return [int(i) for i in page.eval_on_selector_all(
        ".fx-detail .fx-msg", "ms => ms.map(m => m.dataset.index)")]


def elements(page: Page) -> int:
    count: int = page.evaluate("() => document.getElementsByTagName('*').length")
    return count


def test_a_fork_opens_at_its_fork_point_and_unfolds_what_it_inherits(
        long_files: dict[str, Path], opener: Any) -> None:
    view = opener(long_files["fork"])
    page = view.page
    marker = page.locator(".fx-fold")
    first_own = page.locator('.fx-msg[data-index="2500"]')
    expect(page.locator(".fx-fold-text")).to_have_text(
        "2,500 messages inherited from long (#0 to #2499)")
    expect(page.locator(".fx-fork-point")).to_have_text(
        "\u25bc fork point: this fork's own 2,500 messages, from #2500")
    expect(page.locator(".fx-jump")).to_have_text("\u2193 fork point #2500")
    assert in_view(page, marker) and in_view(page, first_own)
    assert box(marker)["y"] + box(marker)["height"] <= box(first_own)["y"]
    assert min(drawn(page)) == AT  # nothing inherited drawn
    view.shot("fork-opened", full_page=False)

    # shown: the messages just before the fork point in view above the marker, the fork's own below
    page.locator(".fx-fold-toggle").click()
    expect(page.locator(".fx-fold-toggle")).to_have_text("fold")
    expect(page.locator(".fx-fold-text")).to_have_text(
        "\u25b2 2,500 messages inherited from long (#0 to #2499)")
    last_inherited = page.locator('.fx-msg[data-index="2499"]')
    expect(last_inherited).to_be_visible()
    assert in_view(page, last_inherited) and in_view(page, marker) and in_view(page, first_own)
    assert box(last_inherited)["y"] < box(marker)["y"] < box(first_own)["y"]
    view.shot("fork-unfolded", full_page=False)

    # at the history's first message, the jump goes back to the fork point
    page.evaluate("() => window.scrollTo(0, 0)")
    expect(page.locator('.fx-msg[data-index="0"]')).to_be_visible()
    expect(first_own).to_have_count(0)  # far below: not drawn
    page.locator(".fx-jump").click()
    expect(first_own).to_be_visible()
    assert in_view(page, marker) and in_view(page, first_own)
    view.shot("fork-jumped-back", full_page=False)

    page.locator(".fx-fold-toggle").click()  # folded again
    expect(last_inherited).to_have_count(0)
    assert in_view(page, marker) and in_view(page, first_own)
    view.assert_clean()


def test_a_long_history_stays_light_after_a_full_scroll(
        long_files: dict[str, Path], opener: Any) -> None:
    view = opener(long_files["fork"])
    page = view.page
    assert elements(page) < 600
    page.locator(".fx-fold-toggle").click()
    page.evaluate("() => window.scrollTo(0, 0)")
    expect(page.locator('.fx-msg[data-index="0"]')).to_be_visible()
    scrolled = page.evaluate(SCROLL_ALL_JS)
    # every message of the 5,000 was drawn on the way down, none kept: a few hundred elements
    assert sorted(scrolled["seen"]) == list(range(LONG))
    assert scrolled["most"] < 800 and scrolled["end"] < 800, scrolled["most"]
    assert scrolled["rows"] < 80, scrolled["rows"]
    assert in_view(page, page.locator('.fx-msg[data-index="4999"]'))
    view.shot("fork-scrolled-to-the-end", full_page=False)

    root = opener(long_files["run"])  # the run itself: no marker, the same window
    expect(root.page.locator(".fx-fold")).to_have_count(0)
    assert drawn(root.page)[0] == 0
    scrolled = root.page.evaluate(SCROLL_ALL_JS)
    assert sorted(scrolled["seen"]) == list(range(LONG)) and scrolled["most"] < 800
    view.assert_clean()
    root.assert_clean()


def test_the_exports_own_find_reaches_messages_not_drawn(
        long_files: dict[str, Path], opener: Any) -> None:
    view = opener(long_files["fork"])
    page = view.page
    find = page.locator("input.fx-find")
    page.keyboard.press("Control+f")  # the browser's find would see only the rows drawn
    expect(find).to_be_focused()
    page.keyboard.type("NEEDLE")
    expect(page.locator(".fx-find-count")).to_have_text("2 messages")
    page.keyboard.press("Enter")  # from the first message in view: the fork's own first
    hit = page.locator(".fx-msg.fx-hit")
    expect(hit).to_have_attribute("data-index", "4321")
    assert in_view(page, hit)
    expect(page.locator(".fx-find-count")).to_have_text("2 of 2")
    page.keyboard.press("Enter")  # the next one, back at the start, is inherited: shown for it
    expect(hit).to_have_attribute("data-index", "1234")
    expect(hit).to_contain_text("an inherited needle")
    assert in_view(page, hit)
    expect(page.locator(".fx-find-count")).to_have_text("1 of 2")
    view.shot("found-an-inherited-message", full_page=False)
    page.keyboard.press("Shift+Enter")
    expect(hit).to_have_attribute("data-index", "4321")
    page.locator(".fx-jump").click()  # the fold was opened for #1234
    expect(page.locator(".fx-fold-toggle")).to_have_text("fold")
    page.locator("input.fx-find").focus()
    # pressed again in the find box, Ctrl+F is the browser's own: the page lets it through
    assert page.evaluate("""() => {
      const e = new KeyboardEvent('keydown', {key: 'f', ctrlKey: true, bubbles: true,
                                              cancelable: true});
      document.activeElement.dispatchEvent(e);
      return e.defaultPrevented;
    }""") is False
    find.fill("no such text")
    expect(page.locator(".fx-find-count")).to_have_text("not found")
    expect(page.locator(".fx-msg.fx-match")).to_have_count(0)
    view.assert_clean()


def test_a_fork_at_700_px_light_and_dark(long_files: dict[str, Path], opener: Any) -> None:
    for dark in (False, True):
        view = opener(long_files["fork"], width=700, dark=dark)
        page = view.page
        assert in_view(page, page.locator(".fx-fold"))
        assert in_view(page, page.locator('.fx-msg[data-index="2500"]'))
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 700
        # the history as wide as the tree above it, whatever its text
        fold, tree = box(page.locator(".fx-fold")), box(page.locator(".fx-tree"))
        assert abs(fold["x"] + fold["width"] - tree["x"] - tree["width"]) <= 1, (fold, tree)
        mode = "dark" if dark else "light"
        view.shot(f"fork-700-{mode}", full_page=False)
        page.locator(".fx-fold-toggle").click()
        expect(page.locator('.fx-msg[data-index="2499"]')).to_be_visible()
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 700
        view.shot(f"fork-700-unfolded-{mode}", full_page=False)
        view.assert_clean()


def test_a_deep_forks_name_keeps_its_room_beside_its_marks(
        long_files: dict[str, Path], opener: Any) -> None:
    for width in (820, 1100):  # the tree a column of 220 px beside the history
        view = opener(long_files["deep"], width=width)
        page = view.page
        nodes = page.locator(".fx-node")
        expect(nodes).to_have_count(9)
        expect(page.locator(".fx-node-edited")).to_have_count(8)
        for i in range(9):
            name = box(nodes.nth(i).locator(".fx-node-name"))
            # at least 9em (117 px) of the tree's 220, the marks wrapped below when need be
            assert name["width"] >= 110, (i, name)
            pencil = nodes.nth(i).locator(".fx-node-edited")
            if i:  # a mark keeps its own size, beside or under the name
                assert box(pencil)["height"] <= 24
        view.shot(f"deep-tree-{width}")
        view.assert_clean()
