"""The panel, second version (issue 11), as a person meets it in JupyterLab: a long
conversation stays in a bounded box; hostile text everywhere stays text; the strip says what
happens; call rows and approval cards; the message box and Fork; Reset; a stopped stream; the
dark theme and a narrow window."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from . import jlab_harness as h
from . import scenarios
from .conftest import UI, SharedNotebook, expect, shared_notebook, shared_ui

pytestmark = pytest.mark.timeout(300)

EXECUTED = re.compile(r"\[\d+\]:")


def run_and_wait(page: Any, index: int, timeout: float = 60_000) -> None:
    """Run a cell that never ran, and wait until it has its execution count."""
    h.run_cell(page, index)
    expect(h.cell(page, index).locator(".jp-InputArea-prompt")).to_have_text(
        EXECUTED, timeout=timeout)


def panel_of(page: Any, index: int) -> Any:
    return h.cell(page, index).locator(".fragola-panel").first


def watch_dialogs(page: Any) -> list[str]:
    """Every alert/confirm/prompt the page opens (none may)."""
    seen: list[str] = []

    def on_dialog(dialog: Any) -> None:
        seen.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return seen


# ------------------------------------------------------------------------------- (1) size

SHOWN_IN_BOX_JS = """(box, index) => {
  const row = box.querySelector(`.fragola-msg[data-index='${index}']`);
  if (!row) return false;
  const r = row.getBoundingClientRect(), b = box.getBoundingClientRect();
  return r.bottom > b.top + 1 && r.top < b.bottom - 1;
}"""


def shown_in_box(box: Any, index: int) -> bool:
    """Whether message ``index`` is drawn and inside the box's visible part."""
    return bool(box.evaluate(SHOWN_IN_BOX_JS, index))


def test_five_thousand_messages_stay_in_a_bounded_box(ui: UI) -> None:
    page = ui.page
    scenarios.big(ui.lab.root, "big.ipynb", 5000)
    ui.open_and_run_all("big.ipynb")  # cell 3 runs too: 12 more turns, 24 messages
    total = 5000 + 24
    panel = panel_of(page, 2)
    box = panel.locator(".fragola-messages")
    rows = panel.locator(".fragola-msg")
    expect(h.cell_output(page, 3)).to_have_text(f"ADDED {total}", timeout=60_000)
    # at the bottom: the newest message is drawn; only the rows near the view are in the DOM
    expect(rows.last).to_have_attribute("data-index", str(total - 1))
    assert shown_in_box(box, total - 1)
    box.scroll_into_view_if_needed()
    height = box.evaluate("e => e.getBoundingClientRect().height")
    assert height <= 450, height
    assert rows.count() <= 100, rows.count()
    # header, strip and Stop are in the panel's box, on screen, without scrolling the box
    panel.scroll_into_view_if_needed()
    pbox = panel.bounding_box()
    assert pbox is not None and pbox["height"] < 900, pbox
    for part in (".fragola-header", ".fragola-strip", ".fragola-stop"):
        expect(panel.locator(part)).to_be_in_viewport()
        b = panel.locator(part).bounding_box()
        assert b and pbox["y"] - 1 <= b["y"], (part, b, pbox)
        assert b["y"] + b["height"] <= pbox["y"] + pbox["height"] + 1, (part, b, pbox)
    ui.shot("bottom-of-5000", panel)

    # scrolled to the top: message 0
    box.evaluate("e => { e.scrollTop = 0; }")
    expect(rows.first).to_have_attribute("data-index", "0")
    assert shown_in_box(box, 0)
    assert rows.count() <= 100, rows.count()
    ui.shot("top-of-5000", panel)

    # a run adds messages while the person reads the top: the box stays there, "↓ newest"
    jump = panel.locator(".fragola-jump")
    expect(jump).to_be_visible()
    h.run_cell(page, 3)
    expect(h.cell_output(page, 3)).to_have_text(f"ADDED {total + 24}", timeout=60_000)
    assert shown_in_box(box, 0)
    assert box.evaluate("e => e.scrollTop") < 5
    expect(jump).to_be_visible()
    ui.shot("scrolled-up-during-run", panel)
    jump.click()
    expect(rows.last).to_have_attribute("data-index", str(total + 24 - 1))
    expect(jump).to_be_hidden()
    # at the bottom, a run keeps it there
    h.run_cell(page, 3)
    expect(h.cell_output(page, 3)).to_have_text(f"ADDED {total + 48}", timeout=60_000)
    expect(rows.last).to_have_attribute("data-index", str(total + 48 - 1))
    assert shown_in_box(box, total + 48 - 1)
    expect(jump).to_be_hidden()
    ui.shot("bottom-after-run", panel)
    ui.assert_clean()


# ------------------------------------------------------------------------- (2) hostile text

NO_MARKUP_JS = """(root) => {
  const bad = [];
  for (const e of [root, ...root.querySelectorAll('*')]) {
    if (['SCRIPT', 'IMG', 'SVG', 'IFRAME', 'OBJECT', 'EMBED', 'STYLE', 'LINK']
        .includes(e.tagName.toUpperCase())) bad.push(e.tagName);
    for (const a of e.attributes) if (/^on/i.test(a.name)) bad.push(e.tagName + '@' + a.name);
    if (e.tagName === 'A' && e.hasAttribute('href') && !/^https?:/i.test(e.getAttribute('href')))
      bad.push('a href=' + e.getAttribute('href'));
  }
  return bad;
}"""
TOO_WIDE_JS = """(panel) => {
  const limit = panel.getBoundingClientRect().right + 1;
  const wide = [...panel.querySelectorAll('*')].filter(e => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.right > limit && !e.closest('pre, table');
  }).map(e => e.className || e.tagName);
  return {scroll: panel.scrollWidth, client: panel.clientWidth, wide: wide.slice(0, 5)};
}"""


def check_hostile_panel(panel: Any) -> None:
    assert panel.evaluate(NO_MARKUP_JS) == []
    assert "\u202e" not in panel.inner_text()
    width = panel.evaluate(TOO_WIDE_JS)
    assert width["scroll"] <= width["client"] and not width["wide"], width


def test_hostile_text_everywhere_stays_text(ui: UI) -> None:
    page = ui.page
    dialogs = watch_dialogs(page)
    scenarios.hostile_everywhere(ui.lab.root, "hostile2.ipynb")
    h.open_notebook(page, ui.lab, "hostile2.ipynb")
    run_and_wait(page, 1)
    run_and_wait(page, 2)
    panel = panel_of(page, 2)
    shown_name = scenarios.HOSTILE_NAME.replace("\u202e", "\\u202e")
    expect(panel.locator(".fragola-name")).to_have_text(shown_name)
    expect(panel.locator(".fragola-status")).to_have_text("waiting")
    expect(panel.locator(".fragola-msg-user")).to_contain_text(scenarios.HOSTILE_SCRIPT)
    expect(panel.locator(".fragola-msg-user")).to_contain_text("file\\u202egnp.exe")
    # the card: arguments with a direction override are flagged
    card = panel.locator(".fragola-card")
    expect(card).to_have_count(1)
    expect(card.locator(".fragola-card-flag")).to_be_visible()
    expect(card.locator(".fragola-card-args")).to_contain_text("file\\u202egnp.exe")
    # the call to a tool named like markup failed, and shows its name as text
    bad_call = panel.locator(".fragola-call-error")
    expect(bad_call).to_have_count(1)
    expect(bad_call.locator(".fragola-call-name")).to_have_text(scenarios.HOSTILE_TOOL)
    # the store's name and value
    stores = panel.locator(".fragola-stores")
    stores.locator("summary").click()
    expect(stores.locator(".fragola-store-name")).to_have_text("<b>notes</b>\\u202e")
    expect(stores.locator("pre")).to_contain_text(scenarios.HOSTILE_SCRIPT)
    check_hostile_panel(panel)
    ui.shot("hostile-card", panel)

    card.locator(".fragola-approve").click()
    expect(panel.locator(".fragola-status")).to_have_text("idle", timeout=30_000)
    ran = panel.locator(".fragola-call-ran")
    expect(ran.locator(".fragola-result-text")).to_have_text("page body: "
                                                             + scenarios.HOSTILE_SHOWN)
    md = panel.locator(".fragola-msg-assistant .fragola-md").last
    expect(md).to_contain_text(scenarios.HOSTILE_SCRIPT)
    expect(md).to_contain_text(scenarios.HOSTILE_IMG)
    # Markdown: the web link opens in a new tab that cannot reach back; the others are text
    safe = md.locator("a", has_text="safe")
    expect(safe).to_have_attribute("href", "https://example.org")
    expect(safe).to_have_attribute("target", "_blank")
    expect(safe).to_have_attribute("rel", "noopener noreferrer")
    expect(md.locator("a")).to_have_count(1)
    expect(md).to_contain_text("js")
    expect(md).to_contain_text("data")
    # table, strikethrough, code block with its copy button
    expect(md.locator("table td").first).to_have_text("file\\u202egnp.exe")
    expect(md.locator("table s, table del")).to_have_text("old")
    expect(md.locator(".fragola-code pre")).to_contain_text("print('copy me')")
    expect(md.locator(".fragola-code .fragola-copy")).to_be_visible()
    check_hostile_panel(panel)
    ui.shot("hostile-answer", panel)

    # a hostile fork name, typed into the panel
    fork_name = '<img src=x onerror="alert(7)"> \u202egnp.exe'
    panel.locator(".fragola-fork-name").fill(fork_name)
    panel.locator(".fragola-fork").click()
    expect(panel.locator(".fragola-notice")).to_contain_text(
        "forked '<img src=x onerror=\"alert(7)\"> \\u202egnp.exe'")

    # an error whose message is hostile: the strip says "failed", the notice shows it as text
    h.run_cell(page, 3)
    error_panel = panel_of(page, 3)
    expect(error_panel.locator(".fragola-strip")).to_have_text("failed", timeout=30_000)
    expect(error_panel.locator(".fragola-notice")).to_contain_text(scenarios.HOSTILE_SCRIPT)
    check_hostile_panel(error_panel)
    ui.shot("hostile-error", error_panel)
    everything = page.locator(".fragola-panel, .fragola-tree")
    bad = everything.evaluate_all(f"els => els.flatMap({NO_MARKUP_JS})")
    assert bad == [], bad
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert dialogs == [], dialogs
    ui.assert_clean()


# -------------------------------------- (3) strip, (4) call rows, (5) cards, (9) dark + narrow

CARDS = "cards.ipynb"
MIXED, STOPPER, BUDGET, TREE, SLEEPY = 2, 3, 4, 5, 6


@pytest.fixture(scope="module")
def cards_notebook(browser: Any, lab: h.LabServer) -> Iterator[SharedNotebook]:
    yield from shared_notebook(browser, lab)


def _prepare_cards(ui: UI) -> None:
    scenarios.cards(ui.lab.root, CARDS)
    h.open_notebook(ui.page, ui.lab, CARDS)
    h.run_all_cells(ui.page)
    for index in (MIXED, STOPPER, BUDGET, TREE):  # the last one, sleepy, hangs
        expect(h.cell(ui.page, index).locator(".jp-InputArea-prompt")).to_have_text(
            EXECUTED, timeout=60_000)
    expect(panel_of(ui.page, SLEEPY).locator(".fragola-status")).to_have_text(
        "generating", timeout=30_000)


@pytest.fixture
def cards_ui(cards_notebook: SharedNotebook, lab: h.LabServer,
             request: pytest.FixtureRequest) -> Iterator[UI]:
    yield from shared_ui(cards_notebook, lab, request, _prepare_cards)


def test_strip_says_what_happens(cards_ui: UI) -> None:
    ui, page = cards_ui, cards_ui.page
    sleepy = panel_of(page, SLEEPY)
    strip = sleepy.locator(".fragola-strip")
    # the --model of the turn, in the strip and the header; the seconds tick
    expect(strip).to_have_text(re.compile(r"^calling other-model… \d+ s$"))
    expect(sleepy.locator(".fragola-facts")).to_contain_text("model other-model")
    first = int(re.findall(r"(\d+) s$", strip.inner_text())[0])
    expect(strip).to_have_text(re.compile(rf"^calling other-model… (?!{first} s$)\d+ s$"),
                               timeout=5_000)
    ui.shot("calling-model", sleepy)
    sleepy.locator(".fragola-stop").click()
    expect(strip).to_have_text("stopped", timeout=30_000)
    expect(panel_of(page, MIXED).locator(".fragola-strip")).to_have_text(
        "4 calls need your decision")
    expect(panel_of(page, STOPPER).locator(".fragola-strip")).to_have_text(
        "1 call needs your decision")
    budget = panel_of(page, BUDGET)
    expect(budget.locator(".fragola-strip")).to_have_text("step budget used — Step goes on")
    # a fork's header says whose
    tree_panel = h.cell(page, TREE).locator(".fragola-panel")
    h.cell(page, TREE).locator(".fragola-tree-node").nth(1).click()
    expect(tree_panel.locator(".fragola-name")).to_have_text("budget-twin")
    expect(tree_panel.locator(".fragola-facts")).to_contain_text("fork of budget ")
    h.cell(page, TREE).locator(".fragola-tree-node").nth(0).click()
    expect(tree_panel.locator(".fragola-name")).to_have_text("budget")
    ui.shot("step-budget", budget)
    ui.assert_clean()


CONTRAST_JS = """(els) => {
  const parse = (c) => {
    const m = c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const lum = (rgb) => {
    const f = (v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * f(rgb[0]) + 0.7152 * f(rgb[1]) + 0.0722 * f(rgb[2]);
  };
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let base = [255, 255, 255];
    for (const l of layers.reverse()) base = base.map((v, i) => l[i] * l[3] + v * (1 - l[3]));
    return base;
  };
  return els.filter(e => e.getClientRects().length).map((el) => {
    const fg = parse(getComputedStyle(el).color);
    const bg = background(el);
    const c = fg.slice(0, 3).map((v, i) => v * fg[3] + bg[i] * (1 - fg[3]));
    const a = lum(c), b = lum(bg);
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    return {what: el.className, text: el.textContent.slice(0, 30),
            ratio: Math.round(ratio * 100) / 100};
  });
}"""
TEXT_PARTS = (".fragola-role, .fragola-facts, .fragola-strip, .fragola-call-line, "
              ".fragola-call-line > span, .fragola-call-line > bdi, .fragola-card-summary > *, "
              ".fragola-name, .fragola-notice-text, .fragola-md p")


def set_theme(page: Any, theme: str) -> None:
    """Settings > Theme > ``theme``, through the menu bar."""
    page.locator("#jp-MainMenu .lm-MenuBar-item", has_text="Settings").click()
    page.locator(".lm-Menu-item", has_text=re.compile(r"^Theme$")).hover()
    page.locator(".lm-Menu-item[data-command='apputils:change-theme']",
                 has_text=re.compile(rf"^{theme}$")).click()
    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme)
    # JupyterLab shows its splash while a theme loads: a shot taken under it shows the splash
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=15_000)


def test_dark_theme_text_contrast(cards_ui: UI) -> None:
    ui, page = cards_ui, cards_ui.page
    set_theme(page, "JupyterLab Dark")
    try:
        ui.shot("dark-cards", panel_of(page, MIXED))
        ui.shot("dark-budget", panel_of(page, BUDGET))
        ratios = []
        for index in (MIXED, STOPPER, BUDGET, SLEEPY):
            parts = panel_of(page, index).locator(TEXT_PARTS)
            measured = parts.evaluate_all(CONTRAST_JS)
            assert measured, index  # every panel has text to measure
            ratios += measured
    finally:
        set_theme(page, "JupyterLab Light")
    assert len(ratios) > 30
    low = [r for r in ratios if r["ratio"] < 4.5]
    assert low == [], low


def test_dark_narrow_window_and_tree_keys(cards_ui: UI) -> None:
    ui, page = cards_ui, cards_ui.page
    set_theme(page, "JupyterLab Dark")
    try:
        mixed = panel_of(page, MIXED)
        # 700 px wide, the file browser open: every button is on screen, horizontally
        page.set_viewport_size({"width": 700, "height": 1000})
        if not page.locator("#filebrowser").is_visible():
            page.locator(".jp-SideBar [data-id='filebrowser']").click()
        expect(page.locator("#filebrowser")).to_be_visible()
        ui.shot("narrow-with-file-browser")
        buttons = mixed.locator(".fragola-controls button, .fragola-chat button, "
                                ".fragola-card-buttons button")
        assert buttons.count() >= 6 + 4 * 4
        outside = []
        for i in range(buttons.count()):
            b = buttons.nth(i)
            b.scroll_into_view_if_needed()
            expect(b).to_be_visible()
            box = b.bounding_box()
            if box is None or box["x"] < 0 or box["x"] + box["width"] > 700:
                outside.append((b.inner_text(), box))
        ui.shot("narrow-panel", mixed)
        assert outside == [], outside

        # arrows in a focused tree move between nodes, not between notebook cells
        tree = h.cell(page, TREE)
        nodes = tree.locator(".fragola-tree-node")
        nodes.nth(0).click()
        active = "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')]" \
                 ".findIndex(c => c.classList.contains('jp-mod-active'))"
        before = page.evaluate(active)
        page.keyboard.press("ArrowDown")
        expect(nodes.nth(1)).to_be_focused()
        page.keyboard.press("ArrowUp")
        expect(nodes.nth(0)).to_be_focused()
        page.keyboard.press("ArrowDown")
        expect(nodes.nth(1)).to_be_focused()
        assert page.evaluate(active) == before
        ui.shot("tree-keys", tree)
    finally:
        page.set_viewport_size({"width": 1280, "height": 1100})
        set_theme(page, "JupyterLab Light")
    ui.assert_clean()


def test_cards_decide_each_call_and_rows_differ(cards_ui: UI) -> None:
    ui, page = cards_ui, cards_ui.page
    panel = panel_of(page, MIXED)
    cards = panel.locator(".fragola-card")
    expect(cards).to_have_count(4)
    card = {way: panel.locator(f".fragola-card[data-call-id='c_{way}']")
            for way in ("approve", "reject", "edit", "inject")}
    notice = panel.locator(".fragola-notice")

    # Step with an undecided call says which
    panel.locator(".fragola-step").click()
    expect(notice).to_contain_text("decide these calls first: add (c_approve), add (c_reject)")

    # a double-click on Approve is one decision, without an error
    card["approve"].locator(".fragola-approve").dblclick()
    expect(card["approve"]).to_have_class(re.compile(r"\bfragola-card-done\b"))
    # decided: the card collapses to one line
    expect(card["approve"].locator(".fragola-card-decided")).to_have_text(
        "✓ add(x=1, y=1) — approved")
    expect(card["approve"].locator(".fragola-card-line")).to_be_hidden()
    expect(card["approve"].locator(".fragola-card-error")).to_have_text("")
    expect(panel.locator(".fragola-strip")).to_have_text("3 calls need your decision")

    # an empty reason asks again
    card["reject"].locator(".fragola-reject").click()
    card["reject"].locator(".fragola-reject-send").click()
    expect(card["reject"].locator(".fragola-card-error")).to_have_text(
        "write a reason first: the model reads it")
    card["reject"].locator(".fragola-reason").fill("not now")
    card["reject"].locator(".fragola-reason").press("Enter")
    expect(card["reject"].locator(".fragola-card-decided")).to_contain_text("rejected: not now")

    # edited arguments with a key the tool does not take: said, nothing decided
    card["edit"].locator(".fragola-edit-toggle").click()
    card["edit"].locator(".fragola-args-edit").fill('{"x": 30, "y": 3, "z": 9}')
    card["edit"].locator(".fragola-edit-approve").click()
    expect(card["edit"].locator(".fragola-card-error")).to_have_text(
        "z: not in the arguments add takes (x, y); remove them")
    ui.shot("card-errors", panel)
    card["edit"].locator(".fragola-args-edit").fill('{"x": 30, "y": 3}')
    card["edit"].locator(".fragola-edit-approve").click()
    expect(card["edit"].locator(".fragola-card-decided")).to_contain_text(
        "approved with edited arguments")

    # an empty result asks again
    card["inject"].locator(".fragola-answer-toggle").click()
    card["inject"].locator(".fragola-inject").click()
    expect(card["inject"].locator(".fragola-card-error")).to_contain_text(
        "type the result first")
    card["inject"].locator(".fragola-inject-text").fill("eight, by hand")
    card["inject"].locator(".fragola-inject").click()

    # the last decision lets the run go on: each call's row in its own state
    expect(panel.locator(".fragola-status")).to_have_text("idle", timeout=30_000)
    expect(cards).to_have_count(0)
    calls = panel.locator(".fragola-call")
    expect(calls).to_have_count(5)
    states = calls.evaluate_all(
        "els => els.map(e => [...e.classList].find(c => /^fragola-call-[a-z]+$/.test(c)))")
    assert states == ["fragola-call-ran", "fragola-call-rejected", "fragola-call-edited",
                      "fragola-call-injected", "fragola-call-error"], states
    expect(calls.nth(1).locator(".fragola-call-state")).to_have_text("rejected: not now")
    expect(calls.nth(4).locator(".fragola-call-icon")).to_have_text("✗")
    expect(panel.locator(".fragola-strip")).to_have_text("finished")
    expect(panel.locator(".fragola-msg-assistant").last).to_contain_text(
        "| 2 | The user rejected this call to add. Reason: not now | (The user edited the "
        'arguments before this call ran: {"x": 30, "y": 3})\n33 | eight, by hand')
    ui.shot("every-call-state", panel)

    # the stopped run's call: cancelled, a fifth look
    stopper = panel_of(page, STOPPER)
    stopper.locator(".fragola-stop").click()
    expect(stopper.locator(".fragola-status")).to_have_text("idle", timeout=30_000)
    expect(stopper.locator(".fragola-call")).to_have_class(
        re.compile(r"\bfragola-call-cancelled\b"))
    expect(stopper.locator(".fragola-strip")).to_have_text("stopped")
    ui.shot("cancelled", stopper)
    looks = {c.evaluate("e => getComputedStyle(e).borderLeft + getComputedStyle(e).background"
                        ) for c in (*[calls.nth(i) for i in range(5)],
                                    stopper.locator(".fragola-call"))}
    assert len(looks) >= 4, looks  # ran/edited/injected share green; the rest each differ
    ui.assert_clean()


def test_step_notice_goes_once_the_calls_are_decided(cards_ui: UI) -> None:
    # the state test_cards_decide_each_call_and_rows_differ left: every call decided, done
    panel = panel_of(cards_ui.page, MIXED)
    expect(panel.locator(".fragola-strip")).to_have_text("finished")
    cards_ui.shot("stale-notice", panel)
    expect(panel.locator(".fragola-notice")).to_have_text("")


# --------------------------------------------------------------------- (6) message box, Fork

def test_message_box_and_fork_button(ui: UI) -> None:
    page = ui.page
    scenarios.chat(ui.lab.root, "chat.ipynb")
    h.open_notebook(page, ui.lab, "chat.ipynb")
    run_and_wait(page, 1)
    run_and_wait(page, 2)
    panel = panel_of(page, 2)
    expect(panel.locator(".fragola-msg")).to_have_count(2)
    box = panel.locator(".fragola-chat-input")
    box.fill("A second question, typed in the panel")
    box.press("Enter")
    expect(box).to_have_value("")
    expect(panel.locator(".fragola-msg-user").last).to_have_text(
        re.compile("A second question, typed in the panel"), timeout=30_000)
    expect(panel.locator(".fragola-msg")).to_have_count(4, timeout=30_000)
    expect(panel.locator(".fragola-status")).to_have_text("idle")
    ui.shot("typed-turn", panel)

    panel.locator(".fragola-fork-name").fill("branchy")
    panel.locator(".fragola-fork").click()
    expect(panel.locator(".fragola-notice")).to_contain_text("bound to `branchy`")
    run_and_wait(page, 3)
    expect(h.cell_output(page, 3)).to_contain_text("branchy")
    run_and_wait(page, 4)
    fork_panel = panel_of(page, 4)
    expect(fork_panel.locator(".fragola-name")).to_have_text("branchy")
    expect(fork_panel.locator(".fragola-msg-user")).to_contain_text("Hello fork")
    expect(fork_panel.locator(".fragola-facts")).to_contain_text("fork of chatty")
    ui.shot("fork-reached", h.cell(page, 4))
    ui.assert_clean()


# ------------------------------------------------------------------------------ (7) reset

def test_reset_asks_twice_and_older_turns_keep_their_messages(ui: UI) -> None:
    page = ui.page
    scenarios.reset(ui.lab.root, "reset.ipynb")
    h.open_notebook(page, ui.lab, "reset.ipynb")
    for index in (1, 2, 3, 4):
        run_and_wait(page, index)
    first, second, full = panel_of(page, 2), panel_of(page, 3), panel_of(page, 4)
    expect(full.locator(".fragola-status")).to_have_text("waiting")
    for panel in (second, full):
        expect(panel.locator(".fragola-reset")).to_be_disabled()  # not while waiting
    ui.shot("reset-disabled-while-waiting", full)
    second.locator(".fragola-approve").click()
    expect(full.locator(".fragola-status")).to_have_text("idle", timeout=30_000)
    reset = full.locator(".fragola-reset")
    expect(reset).to_be_enabled()
    reset.click()
    expect(reset).to_have_text("Really reset?")
    expect(full.locator(".fragola-msg")).to_have_count(5)  # nothing reset yet
    ui.shot("really-reset", full)
    reset.click()
    expect(full.locator(".fragola-msg")).to_have_count(0)
    expect(full.locator(".fragola-notice")).to_contain_text("reset")
    expect(reset).to_have_text("Reset")
    # the turn panels keep their turns
    expect(first.locator(".fragola-msg-assistant")).to_contain_text("First answer")
    expect(second.locator(".fragola-msg-assistant").last).to_contain_text("Second answer")
    ui.shot("after-panel-reset", page.locator(h.SEL_NOTEBOOK))

    run_and_wait(page, 5)
    third = panel_of(page, 5)
    expect(third.locator(".fragola-msg-assistant")).to_contain_text("Third answer")
    run_and_wait(page, 6)
    expect(h.cell_output(page, 6)).to_contain_text("reset")
    expect(full.locator(".fragola-msg")).to_have_count(0)
    for panel, text in ((first, "First answer"), (third, "Third answer")):
        expect(panel.locator(".fragola-msg-assistant").last).to_contain_text(text)
    ui.shot("after-magic-reset", third)
    ui.assert_clean()


# ---------------------------------------------------------------------- (8) stop a stream

def test_stop_keeps_the_partial_reply_marked_not_saved(ui: UI) -> None:
    page = ui.page
    text = " ".join(f"word{i}" for i in range(200))  # ~1,300 characters: ~16 s at 4 per 50 ms
    scenarios.stop_stream(ui.lab.root, "stopstream.ipynb", text)
    h.open_notebook(page, ui.lab, "stopstream.ipynb")
    run_and_wait(page, 1)
    h.run_cell(page, 2)
    panel = panel_of(page, 2)
    block = panel.locator(".fragola-stream")
    expect(block.locator(".fragola-role")).to_have_text("assistant · streaming…",
                                                        timeout=30_000)
    expect(block.locator(".fragola-stream-text")).to_have_text(re.compile(r"word20\b"),
                                                               timeout=30_000)
    ui.shot("streaming", panel)
    panel.locator(".fragola-stop").click()
    expect(panel.locator(".fragola-status")).to_have_text("idle", timeout=30_000)
    expect(block.locator(".fragola-role")).to_have_text("assistant · (stopped — not saved)")
    expect(block).to_have_class(re.compile(r"\bfragola-stream-stopped\b"))
    partial = block.locator(".fragola-stream-text").text_content() or ""
    assert len(partial) > 100 and text.startswith(partial) and partial != text, partial
    # not stored: no assistant message besides the stopped block
    expect(panel.locator(".fragola-msg-assistant:not(.fragola-stream)")).to_have_count(0)
    expect(panel.locator(".fragola-strip")).to_have_text("stopped")
    ui.shot("stopped-stream", panel)
    ui.assert_clean()
