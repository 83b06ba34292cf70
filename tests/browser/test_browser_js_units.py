"""The views' message handling as pure functions (issue 35, item 5), run in the browser: each
anywidget module (the panel, the compare grid, the evaluation matrix, the branch diff) is
imported as the page imports it, an ES module, and its exported ``COMMANDS`` table and
``update`` (state, message) -> state are called with messages as the kernel sends them. No
JupyterLab here: the modules are served from the package to a page of their own.

Each function is checked for what it returns and for leaving the state it was given as it was
(the input is frozen, deeply, before the call: a write to it throws)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route

PACKAGE = Path(__file__).resolve().parents[2] / "fragola_nb"
ORIGIN = "http://units.fragola.test"
# each view's module, found by what only it defines (the files may move between folders)
MARKERS = {"panel": "function renderView(", "compare": "function gridNodes(",
           "evaluation": "function matrixNodes(", "diffview": "function pairRow(",
           "tree": "function pickBox("}

# the page's helpers: `freeze` (deep, Maps and Sets too: their writers throw) and `plain`
# (Maps, Sets and holes made JSON for the test to read)
HELPERS = """
window.freeze = (x) => {
  if (x && typeof x === "object" && !Object.isFrozen(x)) {
    if (x instanceof Map || x instanceof Set) {
      const no = () => { throw new Error("written"); };
      for (const m of ["set", "add", "delete", "clear"]) if (m in x) x[m] = no;
      for (const v of x.values()) window.freeze(v);
    }
    Object.freeze(x);
    for (const v of Object.values(x)) window.freeze(v);
  }
  return x;
};
window.plain = (x) => JSON.parse(JSON.stringify(x, (k, v) =>
  v instanceof Map ? { map: [...v.entries()] } : v instanceof Set ? { set: [...v] }
    : v === undefined ? null : v));
"""


def _source(view: str) -> str:
    found = [p for p in PACKAGE.rglob("*.js") if MARKERS[view] in p.read_text(encoding="utf-8")]
    assert len(found) == 1, f"the {view} module: {found}"
    return found[0].read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    def serve(route: Route) -> None:
        name = route.request.url.removeprefix(ORIGIN + "/")
        if name in MARKERS:
            route.fulfill(body=_source(name), content_type="text/javascript")
        else:
            route.fulfill(body=f"<!doctype html><title>units</title><script>{HELPERS}</script>",
                          content_type="text/html")

    page.route(ORIGIN + "/**", serve)
    page.goto(ORIGIN + "/")
    page.evaluate("""async (names) => {
      window.mods = {};
      for (const n of names) window.mods[n] = await import("/" + n);
    }""", list(MARKERS))
    yield page
    context.close()
    assert errors == []


def run(page: Page, body: str) -> Any:
    """``body`` is a function of (panel, compare, evaluation, diffview, tree): the modules."""
    return page.evaluate(f"() => plain(({body})(mods.panel, mods.compare, mods.evaluation, "
                         "mods.diffview, mods.tree))")


def test_each_view_declares_the_commands_the_kernel_sends(page: Page) -> None:
    tables = run(page, """(p, c, e, d, t) => [p, c, e, d, t].map((m) => Object.fromEntries(
      Object.entries(m.COMMANDS).map(([k, v]) =>
        [k, [v.by, typeof m[v.by], v.says.length > 20]])))""")
    assert tables == [
        {"rows": ["update", "function", True], "stream": ["update", "function", True],
         "timeline": ["update", "function", True], "source": ["editorUpdate", "function", True],
         "edited": ["editorUpdate", "function", True]},
        {"live": ["update", "function", True], "stream": ["update", "function", True]},
        {"live": ["update", "function", True], "patch": ["update", "function", True]},
        {"fold": ["update", "function", True]},
        {"nodes": ["update", "function", True], "selected": ["update", "function", True],
         "picked": ["update", "function", True]},
    ]
    frozen = run(page, "(...ms) => ms.map((m) => Object.isFrozen(m.COMMANDS))")
    assert frozen == [True, True, True, True, True]


def test_the_panel_update_keeps_rows_stream_and_timeline(page: Page) -> None:
    states = run(page, """(p) => {
      const steps = [];
      let s = freeze(p.initialState([{ k: 0, i: 0, role: "user" }]));
      steps.push(s);
      const send = (msg) => { s = freeze(p.update(s, msg)); steps.push(s); };
      send({ t: "rows", reset: true, total: 3, rows: [{ k: 0, i: 0, role: "system" }] });
      send({ t: "rows", rows: [{ k: 2, i: 2, role: "assistant" }], stream: "Hel", stopped: false });
      send({ t: "stream", add: "lo" });
      send({ t: "stream", text: "", stopped: true });
      send({ t: "timeline", from: 0, bars: [{ n: 1 }, { n: 2 }], summary: "1 s" });
      send({ t: "timeline", from: 1, bars: [{ n: 3 }], summary: "2 s" });
      return steps.map((x) => ({ rows: x.rows.map((r) => r && r.role), stream: x.stream,
        stopped: x.stopped, live: x.live, timeline: x.timeline }));
    }""")
    assert [x["rows"] for x in states] == [
        ["user"], ["system", None, None], ["system", None, "assistant"],
        ["system", None, "assistant"], ["system", None, "assistant"],
        ["system", None, "assistant"], ["system", None, "assistant"]]
    assert [x["stream"] for x in states] == ["", "", "Hel", "Hello", "", "", ""]
    assert [x["stopped"] for x in states] == [False, False, False, False, True, True, True]
    assert [x["live"] for x in states] == [False] + [True] * 6
    assert states[5]["timeline"] == {"summary": "1 s", "bars": [{"n": 1}, {"n": 2}]}
    assert states[6]["timeline"] == {"summary": "2 s", "bars": [{"n": 1}, {"n": 3}]}


def test_the_panel_update_forgets_the_markdown_asked_on_a_reset_only(page: Page) -> None:
    asked = run(page, """(p) => {
      const s = freeze({ ...p.initialState([]), asked: new Set([4, 5]) });
      return [p.update(s, { t: "rows", rows: [{ k: 4 }] }).asked,
              p.update(s, { t: "rows", reset: true, rows: [] }).asked,
              p.update(s, "not a message") === s, p.update(s, null) === s,
              p.update(s, { t: "other" }).live, p.update(s, { t: "other" }).rows === s.rows];
    }""")
    assert asked == [{"set": [4, 5]}, {"set": []}, True, True, True, True]


def test_the_panel_rows_wait_for_a_stream_that_ends(page: Page) -> None:
    # A frame asked for by one rows message, then a hold() by the next (it clears a stream:
    # its stored row must not be drawn beside the streamed text): the frame waits too. Two
    # rows messages in one frame once drew the row beside its stream (a busy machine).
    drawn = page.evaluate("""async () => {
      const frames = () => new Promise((r) =>
        requestAnimationFrame(() => requestAnimationFrame(r)));
      const box = document.createElement("div");
      box.style.cssText = "height: 300px; overflow: auto";
      document.body.append(box);
      const store = { rows: [{ k: 0, i: 0, role: "user", html: "", calls: [] }] };
      const win = new mods.panel.Window(store, box, () => {});
      const seen = [];
      win.schedule();
      win.hold();
      await frames();
      seen.push(win.drawn.size);
      store.rows.push({ k: 1, i: 1, role: "assistant", html: "", calls: [] });
      win.schedule();
      await frames();
      seen.push(win.drawn.size);
      win.release();
      seen.push(win.drawn.size);
      win.schedule();
      await frames();
      seen.push(win.drawn.size);
      box.remove();
      return seen;
    }""")
    assert drawn == [0, 0, 2, 2]


def test_the_panel_editor_follows_the_kernel_answers(page: Page) -> None:
    got = run(page, """(p) => {
      const open = freeze({ i: 3, k: 3, call: "", text: null, busy: false });
      const typed = freeze({ ...open, text: "mine", busy: true, runs: true, flag: false,
        role: "user" });
      const u = p.editorUpdate;
      return {
        other: u(open, { t: "source", i: 4, text: "x" }) === open,
        otherCall: u(open, { t: "source", i: 3, call: "c1", text: "x" }) === open,
        otherKind: u(open, { t: "rows", i: 3 }) === open,
        closed: u(null, { t: "source", i: 3, text: "x" }),
        read: u(open, { t: "source", i: 3, call: "", text: "the text", runs: 1, flag: 1,
          role: "tool" }),
        unread: u(open, { t: "source", i: 3, failed: true }),
        refused: u(typed, { t: "edited", i: 3, ok: false }),
        forked: u(typed, { t: "edited", i: 3, ok: true }),
      };
    }""")
    assert got == {
        "other": True, "otherCall": True, "otherKind": True, "closed": None,
        "read": {"i": 3, "k": 3, "call": "", "text": "the text", "busy": False, "runs": True,
                 "flag": True, "role": "tool"},
        "unread": None,
        "refused": {"i": 3, "k": 3, "call": "", "text": "mine", "busy": False, "runs": True,
                    "flag": False, "role": "user"},
        "forked": None,
    }


def test_the_compare_update_keeps_each_column_streamed_text(page: Page) -> None:
    got = run(page, """(p, c) => {
      let s = freeze({ live: false, streamed: new Map([["b", "kept"]]) });
      const seen = [];
      const first = JSON.parse('{"__proto__": {"add": "He"}, "a": {"text": "x"}}');
      const second = { __proto__: null, a: { add: "y" }, b: { text: "" } };
      for (const msg of [{ t: "stream", cols: first }, { t: "stream", cols: second },
                         { live: true }]) {
        s = freeze(c.update(s, msg));
        seen.push(s);
      }
      return { seen, again: c.update(s, { live: true }) === s,
        other: c.update(s, { t: "rows" }) === s };
    }""")
    assert got["seen"] == [
        {"live": False, "streamed": {"map": [["b", "kept"], ["__proto__", "He"], ["a", "x"]]}},
        {"live": False, "streamed": {"map": [["__proto__", "He"], ["a", "xy"]]}},
        {"live": True, "streamed": {"map": [["__proto__", "He"], ["a", "xy"]]}},
    ]
    assert got["again"] is True and got["other"] is True


def test_the_compare_columns_take_their_streamed_text(page: Page) -> None:
    got = run(page, """(p, c) => {
      const streamed = freeze(new Map([["run", "so far"], ["done", "old"], ["kept", "final"]]));
      const cols = freeze([{ name: "run", status: "running", answer: "" },
        { name: "done", status: "finished", answer: "stored" },
        { name: "kept", status: "finished", kept: true, answer: "" },
        { name: "new", status: "running", streaming: true, answer: "first" }]);
      const next = c.keepStreamed(streamed, cols);
      return { next, drawn: cols.map((col) => c.withStream(next, col)) };
    }""")
    assert got["next"] == {"map": [["kept", "final"], ["new", "first"]]}
    assert got["drawn"] == [
        {"name": "run", "status": "running", "answer": ""},
        {"name": "done", "status": "finished", "answer": "stored"},
        {"name": "kept", "status": "finished", "kept": True, "answer": "final"},
        {"name": "new", "status": "running", "streaming": True, "answer": "first"},
    ]


def test_the_evaluation_update_patches_cells_and_flags(page: Page) -> None:
    got = run(page, """(p, c, e) => {
      const s = freeze({ live: false, cells: [["q", null, ""], ["p", 1, ""], ["f", 0, ""]],
        flags: { "1": [true, "y"], "2": [false, "n"] } });
      const patched = e.update(s, { do: "patch", cells: [[0, ["pf", 0.5, "regressed"]]],
        flags: [[1, null], [0, [true, ""]]] });
      return { patched, live: e.update(s, { live: true }).live,
        same: [e.update(s, { do: "other" }) === s, e.update(s, null) === s],
        kinds: [e.commandOf({ do: "patch" }), e.commandOf({ live: true }),
          e.commandOf({ t: "x" })] };
    }""")
    assert got["patched"] == {
        "live": False, "cells": [["pf", 0.5, "regressed"], ["p", 1, ""], ["f", 0, ""]],
        "flags": {"0": [True, ""], "2": [False, "n"]}}
    assert got["live"] is True and got["same"] == [True, True]
    assert got["kinds"] == ["patch", "live", None]


def test_the_evaluation_filters_pick_failed_and_changed_cases(page: Page) -> None:
    got = run(page, """(p, c, e) => {
      const cases = ["a", "b", "c", "d"];
      const cells = freeze([["pp", 1, ""], ["p", 1, ""], ["pf", 0.5, ""], ["p", 1, "improved"],
        ["f", 0, ""], null, ["p", 1, "regressed"], ["p", 1, ""]]);
      const pick = (failed, changed) => e.casesShown(cases, cells, 2, failed, changed);
      return [pick(false, false), pick(true, false), pick(false, true), pick(true, true)];
    }""")
    assert got == [[0, 1, 2, 3], [1, 2], [1, 3], [1]]


def test_the_diff_update_keeps_each_fold_once_sent(page: Page) -> None:
    got = run(page, """(p, c, e, d) => {
      const s = freeze({ only: false, page: 2, got: new Map([[3, [{ k: "same" }]]]) });
      const next = d.update(s, { fold: 7, rows: [{ k: "changed" }] });
      return { next, same: [d.update(s, { fold: "7", rows: [] }) === s,
        d.update(s, { fold: 7 }) === s, d.update(s, null) === s] };
    }""")
    assert got["next"] == {"only": False, "page": 2,
                           "got": {"map": [[3, [{"k": "same"}]], [7, [{"k": "changed"}]]]}}
    assert got["same"] == [True, True, True]


def test_the_tree_update_takes_the_traits_the_kernel_sets(page: Page) -> None:
    got = run(page, """(p, c, e, d, t) => {
      const s = freeze(t.initialState());
      const nodes = t.update(s, { set: "nodes", value: [{ id: "a" }, { id: "b" }] });
      return { nodes, selected: t.update(s, { set: "selected", value: "b" }),
        picked: t.update(s, { set: "picked", value: ["a", "b"] }),
        cleared: t.update(freeze({ ...s, selected: "b" }), { set: "selected", value: null }),
        same: [t.update(s, { set: "other", value: 1 }) === s, t.update(s, null) === s,
          t.update(s, { set: "toString", value: 1 }) === s, t.update(s, "nodes") === s] };
    }""")
    assert got["nodes"] == {"nodes": [{"id": "a"}, {"id": "b"}], "selected": "", "picked": []}
    assert got["selected"] == {"nodes": [], "selected": "b", "picked": []}
    assert got["picked"] == {"nodes": [], "selected": "", "picked": ["a", "b"]}
    assert got["cleared"] == {"nodes": [], "selected": "", "picked": []}
    assert got["same"] == [True, True, True, True]


def test_the_tree_ticks_and_keys(page: Page) -> None:
    got = run(page, """(p, c, e, d, t) => {
      const ids = freeze(["a", "b"]);
      return { ticks: [t.picked(ids, "c", true), t.picked(ids, "a", false),
          t.picked(ids, "a", true), t.picked(ids, "z", false)],
        keys: ["Enter", " ", "ArrowDown", "ArrowUp", "Home", "End", "x", "Tab"].map(
          (k) => t.keyTarget(k, 2, 5)) };
    }""")
    assert got["ticks"] == [["a", "b", "c"], ["b"], ["b", "a"], ["a", "b"]]
    assert got["keys"] == ["choose", "choose", 3, 1, 0, 4, None, None]
