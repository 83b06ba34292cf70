"""Panel in the browser: the agent panel in a real JupyterLab and Chromium, against the same
messages shown as static HTML.

Everything is local: the throw-away JupyterLab server and the Debian chromium of the browser
tests (``tests/browser/jlab_harness.py``), a scripted model on loopback.

(a) Shown in: a code cell ``AgentPanel(agent)`` (the agent holds N messages: user and
    assistant turns in short Markdown, and tool calls with their results) is run with
    Ctrl+Enter; the time goes from that key press (``performance.now()`` in a capture
    listener) to the panel's last message row being in the DOM, inside the visible part of its
    scroll box (a MutationObserver and a per-frame check), and to the next frame after it
    (painted). Before each run every output is cleared, the earlier panels are closed, and
    both the kernel and the page are garbage-collected. Medians of ``--reps`` rounds whose
    order rotates; a warm-up round first (the widget's code and CSS load once).
(b) Longest main-thread task: a PerformanceObserver for ``longtask`` (and
    ``long-animation-frame``, for what ran in them), installed before the page loads; the
    longest task from the key press until shown, and in the 3 s after (the view copies its
    rows into the saved widget state 0.5 s after they arrive).
(c) Bytes per appended message: a second page records every websocket frame (Playwright's
    ``framereceived``); each agent runs K real turns against the scripted model (a user
    message, a tool call, its result, the answer: 4 messages a turn) and the ``comm_msg``
    frames of that agent's panel comm are counted, at a history of 50, 5,000 and 20,000.
(d) Baseline: the same messages as ``IPython.display.HTML(conversation_html(messages))``,
    timed the same way, in the same rounds.

In the kernel, ``time.perf_counter`` times the construction (``AgentPanel(agent)``, or
``conversation_html``), the display (the rest of the cell: the display hook builds the
MIME bundle and sends it) and the send of the rows a new view asks for; in the page, the
arrival of every frame of 20 KB or more. A cProfile of the construction at 5,000 messages,
outside the browser, says where the Python time goes.

    .venv/bin/python bench/panel_browser.py [--reps 3] [--turns 5] [--quick] [--json FILE]
                                            [--no-write] [--from-json FILE]

It replaces the "Panel in the browser" section of ``bench/results.md`` (``--no-write``: print
only).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
from common import write_section  # noqa: E402  (bench/, the script's own directory)

from tests.browser import jlab_harness as h  # noqa: E402

SIZES = (50, 5_000, 20_000)
TAIL_MS = 3_000  # watched after "shown", for the work that follows it
BIG_FRAME = 20_000  # bytes: frames at least this big have their arrival time recorded
SECTION = "## Panel in the browser"

# ---------------------------------------------------------------------------- the kernel side

SETUP = '''\
import gc, json, time
from pathlib import Path
from IPython import get_ipython
from IPython.display import HTML
from fragola_nb import Fragola, tool
from fragola_nb.notebook.panel.view import AgentPanel
from fragola_nb.base.render import conversation_html
from fragola_nb.models.scripted import call, reply, tool_calls

SIZES = __SIZES__


def conversation(n):
    """User and assistant turns in short Markdown, every third exchange through a tool."""
    out, i = [], 0
    while len(out) < n:
        cid = f"call_{i:06d}"
        out += [
            {"role": "user", "content": f"Question {i}: what is *{i}* plus one?"},
            {"role": "assistant",
             "content": f"It is **{i + 1}**, because:\\n\\n- one point\\n- `code {i}`"},
            {"role": "user", "content": f"Now add {i} and 1 with the tool."},
            {"role": "assistant", "tool_calls": [{"id": cid, "type": "function", "function": {
                "name": "add", "arguments": json.dumps({"x": i, "y": 1})}}]},
            {"role": "tool", "tool_call_id": cid, "content": str(i + 1)},
            {"role": "assistant", "content": f"The tool says **{i + 1}**."},
        ]
        i += 1
    out = out[:n]
    assert out[-1]["role"] == "assistant" and out[-1].get("content"), out[-1]
    return out


def add(x: int, y: int) -> int:
    """Add two numbers."""
    return x + y


def brain(request):
    if request["messages"][-1]["role"] == "user":
        return tool_calls(call("add", {"x": 2, "y": 3}))
    return reply("The tool says **5**:\\n\\n- one point\\n- `another`")


fragola = Fragola.scripted(brain=brain)
messages = {n: conversation(n) for n in SIZES}
agents = {n: fragola.agent(f"bench{n}", tools=[tool(add)], messages=messages[n]) for n in SIZES}
KERNEL = {"runs": []}
_open = []
_resets = 0


def built(kind, n, seconds, panel=None):
    """Called by a timed cell right after construction."""
    run = {"kind": kind, "n": n, "build_s": seconds, "built_at": time.perf_counter()}
    if panel is not None:
        run["model_id"] = panel.model_id
        _open.append(panel)
        send = panel.send

        def timed_send(content, buffers=None):  # times the rows a new view asks for
            t = time.perf_counter()
            send(content, buffers)
            if isinstance(content, dict) and content.get("reset") and content.get("rows"):
                run["hello_send_s"] = time.perf_counter() - t

        panel.send = timed_send
    KERNEL["runs"].append(run)


def _after_cell(result):  # the display hook has run: the MIME bundle is built and sent
    if KERNEL["runs"] and "display_s" not in KERNEL["runs"][-1]:
        KERNEL["runs"][-1]["display_s"] = time.perf_counter() - KERNEL["runs"][-1]["built_at"]


get_ipython().events.register("post_run_cell", _after_cell)


def reset():
    global _resets
    for panel in _open:
        panel.close()
    _open.clear()
    Path("bench_kernel.json").write_text(json.dumps(KERNEL))
    gc.collect()
    _resets += 1
    print(f"reset {_resets}")


async def turns(n, k):
    agent = agents[n]
    before = agent.message_count
    for i in range(k):
        state = await agent.user_message(f"Add 2 and 3, please ({i}).")
        assert state.outcome == "finished", state.outcome
    print(f"turns done {n}: {agent.message_count - before} messages")


print("setup done")
'''

PANEL_CELL = '''\
_t = time.perf_counter()
panel = AgentPanel(agents[{n}])
built("panel", {n}, time.perf_counter() - _t, panel)
panel'''

HTML_CELL = '''\
_t = time.perf_counter()
static = HTML(conversation_html(messages[{n}]))
built("html", {n}, time.perf_counter() - _t)
static'''


def _notebook(path: Path, cells: list[str]) -> None:
    nb = new_notebook(cells=[new_code_cell(c) for c in cells], metadata={  # type: ignore[no-untyped-call]
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                       "language": "python"},
        "language_info": {"name": "python"}})
    nbformat.write(nb, str(path))  # type: ignore[no-untyped-call]


# ------------------------------------------------------------------------------ the page side

INIT_JS = """(() => {
  const B = window.__bench = { longtasks: [], loafs: [], frames: [], t0: null, dom: null,
    painted: null };
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) B.longtasks.push({ start: e.startTime, dur: e.duration });
    }).observe({ type: "longtask", buffered: true });
  } catch (e) { B.noLongtask = String(e); }
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const end = e.startTime + e.duration;
        B.loafs.push({ start: e.startTime, dur: e.duration,
          render: e.renderStart ? end - e.renderStart : 0,
          layout: e.styleAndLayoutStart ? end - e.styleAndLayoutStart : 0,
          scripts: e.scripts.map((s) => ({ inv: s.invoker, fn: s.sourceFunctionName,
            url: (s.sourceURL || "").split("/").pop(), dur: s.duration,
            pos: s.sourceCharPosition, forced: s.forcedStyleAndLayoutDuration })) });
      }
    }).observe({ type: "long-animation-frame", buffered: true });
  } catch (e) { B.noLoaf = String(e); }
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (ev) => {
        const d = ev.data;
        const n = typeof d === "string" ? d.length : (d.byteLength ?? d.size ?? 0);
        if (n >= BIG_FRAME) B.frames.push({ t: performance.now(), n });
      });
    }
  };
  window.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) B.t0 = performance.now();
  }, true);
})();""".replace("BIG_FRAME", str(BIG_FRAME))

# Waits for the row: in the DOM, laid out, inside the visible part of its scroll box.
WATCH_JS = """([sel, marker]) => {
  const B = window.__bench;
  B.t0 = B.dom = B.painted = null;
  const check = () => {
    if (B.dom !== null) return;
    const el = document.querySelector(sel);
    if (!el || !el.isConnected || !el.textContent.includes(marker)) return;
    const r = el.getBoundingClientRect();
    if (r.height <= 0) return;
    const box = el.closest(".fragola-messages");
    if (box) {
      const b = box.getBoundingClientRect();
      if (r.bottom <= b.top || r.top >= b.bottom) return;
    }
    B.dom = performance.now();
    mo.disconnect();
    requestAnimationFrame(() => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => { B.painted = performance.now(); };
      ch.port2.postMessage(0);
    });
  };
  const mo = new MutationObserver(check);
  mo.observe(document.body, { childList: true, subtree: true });
  const poll = () => { check(); if (B.dom === null) requestAnimationFrame(poll); };
  requestAnimationFrame(poll);
}"""

COLLECT_JS = """(tail) => {
  const B = window.__bench, lo = B.t0, hi = B.painted + tail;
  const inside = (e) => e.start >= lo && e.start <= hi;
  return { t0: B.t0, dom: B.dom, painted: B.painted, noLongtask: B.noLongtask || null,
    longtasks: B.longtasks.filter(inside), loafs: B.loafs.filter(inside),
    frames: B.frames.filter((f) => f.t >= lo && f.t <= hi) };
}"""


def _row_selector(n: int) -> str:
    return f'.jp-OutputArea-output .fragola-msg[data-index="{n - 1}"]'


def _marker(n: int) -> str:
    i = (n - 1) // 6  # the last message is an answer of exchange i (see conversation())
    last = (n - 1) % 6
    return {1: f"It is {i + 1}", 5: f"The tool says {i + 1}"}[last]


def _clear_outputs(page: Any) -> None:
    page.locator("#jp-MainMenu .lm-MenuBar-item", has_text="Edit").first.click()
    page.locator("#jp-mainmenu-edit .lm-Menu-item", has_text="Clear Outputs of All Cells").click()
    page.wait_for_function("() => !document.querySelector('.jp-OutputArea-output .fragola-msg')")


def _run_and_wait_text(page: Any, index: int, text: str, timeout: float = 300_000) -> None:
    from playwright.sync_api import expect

    h.run_cell(page, index)
    expect(h.cell_output(page, index)).to_contain_text(text, timeout=timeout)


class Page:
    """A notebook open in a fresh browser context."""

    def __init__(self, browser: Any, lab: h.LabServer, name: str, cells: list[str]) -> None:
        _notebook(lab.root / name, cells)
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.page.add_init_script(INIT_JS)
        self.resets = 0

    def open(self, lab: h.LabServer, name: str) -> None:
        h.open_notebook(self.page, lab, name)
        _run_and_wait_text(self.page, 0, "setup done")
        h.wait_kernel_idle(self.page)

    def reset(self) -> None:
        """Clear every output, close the panels, collect garbage in the kernel and the page."""
        _clear_outputs(self.page)
        self.resets += 1
        _run_and_wait_text(self.page, 1, f"reset {self.resets}")
        h.wait_kernel_idle(self.page)
        self.page.evaluate("() => window.gc && window.gc()")

    def show(self, index: int, n: int) -> dict[str, Any]:
        """Run cell ``index`` and wait until message ``n - 1`` is shown; what the page saw."""
        self.page.evaluate(WATCH_JS, [_row_selector(n), _marker(n)])
        h.run_cell(self.page, index)
        self.page.wait_for_function("() => window.__bench.painted !== null", timeout=300_000)
        h.wait_kernel_idle(self.page, 300_000)
        self.page.wait_for_timeout(TAIL_MS)  # a measurement window, not a wait for state
        seen = self.page.evaluate(COLLECT_JS, TAIL_MS)
        if seen["noLongtask"]:
            raise RuntimeError(f"no longtask entries in this browser: {seen['noLongtask']}")
        return dict(seen)


def _browser_facts(seen: dict[str, Any]) -> dict[str, Any]:
    t0, painted = seen["t0"], seen["painted"]
    until = [t for t in seen["longtasks"] if t["start"] < painted]
    after = [t for t in seen["longtasks"] if t["start"] >= painted]
    frames = seen["frames"]
    loafs = [f for f in seen["loafs"] if f["start"] < painted]

    def scripts(frames: list[dict[str, Any]]) -> list[tuple[str, float]]:
        total: dict[str, float] = {}
        for frame in frames:
            for s in frame["scripts"]:
                key = f"{s['inv']} ({s['url'] or '?'})"
                total[key] = total.get(key, 0.0) + s["dur"]
        return sorted(total.items(), key=lambda kv: -kv[1])[:4]

    return {
        "dom_ms": seen["dom"] - t0, "shown_ms": painted - t0,
        "longest_ms": max((t["dur"] for t in until), default=0.0),
        "long_total_ms": sum(t["dur"] for t in until),
        "longest_after_ms": max((t["dur"] for t in after), default=0.0),
        "frames": [{"at_ms": f["t"] - t0, "bytes": f["n"]} for f in frames],
        "last_frame_ms": max((f["t"] - t0 for f in frames if f["t"] < painted), default=0.0),
        "render_ms": sum(f["render"] for f in loafs),
        "scripts": scripts(loafs),
        "scripts_after": scripts([f for f in seen["loafs"] if f["start"] >= painted]),
    }


# ------------------------------------------------------------------------------ (a), (b), (d)

def timing(browser: Any, lab: h.LabServer, reps: int) -> list[dict[str, Any]]:
    plan = [(kind, n) for n in SIZES for kind in ("panel", "html")]
    cells = [SETUP.replace("__SIZES__", repr(SIZES)), "reset()"]
    cells += [(PANEL_CELL if kind == "panel" else HTML_CELL).format(n=n) for kind, n in plan]
    name = "panel_timing.ipynb"
    tab = Page(browser, lab, name, cells)
    tab.open(lab, name)
    order = [plan[0], plan[1]]  # warm-up: the widget's code, CSS and markdown-it load once
    for r in range(reps):
        order += plan[r % len(plan):] + plan[:r % len(plan)]  # rotate: no slot is favoured
    seen = []
    for kind, n in order:
        tab.reset()
        seen.append((kind, n, tab.show(2 + plan.index((kind, n)), n)))
        print(f"  {kind} {n:>6,}: shown in {seen[-1][2]['painted'] - seen[-1][2]['t0']:,.0f} ms",
              file=sys.stderr)
    tab.reset()  # writes the kernel's timings
    kernel = json.loads((lab.root / "bench_kernel.json").read_text())["runs"]
    tab.context.close()
    assert [(k["kind"], k["n"]) for k in kernel] == [(k, n) for k, n, _ in seen], kernel
    runs = [{"kind": kind, "n": n, **_browser_facts(page_seen),
             **{key: k.get(key) for key in ("build_s", "display_s", "hello_send_s")}}
            for (kind, n, page_seen), k in zip(seen, kernel, strict=True)]
    return runs[2:]  # the warm-up is not counted


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for n in SIZES:
        for kind in ("panel", "html"):
            mine = [r for r in runs if r["n"] == n and r["kind"] == kind]
            med = {key: statistics.median(r[key] for r in mine) for key in (
                "dom_ms", "shown_ms", "longest_ms", "long_total_ms", "longest_after_ms",
                "last_frame_ms", "render_ms", "build_s", "display_s")}
            hello = [r["hello_send_s"] for r in mine if r["hello_send_s"] is not None]
            worst = max(mine, key=lambda r: r["shown_ms"])
            out.append({"kind": kind, "n": n, "reps": len(mine), **med,
                        "hello_send_s": statistics.median(hello) if hello else None,
                        "longest_max_ms": max(r["longest_ms"] for r in mine),
                        "longest_after_max_ms": max(r["longest_after_ms"] for r in mine),
                        "frames": mine[0]["frames"], "scripts": worst["scripts"],
                        "scripts_after": worst["scripts_after"]})
    return out


# -------------------------------------------------------------------------------------- (c)

def _decode(payload: bytes | str) -> dict[str, Any] | None:
    """A kernel websocket frame: JSON text, or the v1 binary protocol (offsets, channel,
    header, parent header, metadata, content, buffers)."""
    if isinstance(payload, str):
        msg = json.loads(payload)
        return {"msg_type": msg.get("msg_type") or msg["header"]["msg_type"],
                "content": msg.get("content", {})}
    count = int.from_bytes(payload[:8], "little")
    offsets = [int.from_bytes(payload[8 * (i + 1):8 * (i + 2)], "little") for i in range(count)]
    offsets.append(len(payload))
    part = [payload[offsets[i]:offsets[i + 1]] for i in range(count)]
    header = json.loads(part[1])
    return {"msg_type": header["msg_type"], "content": json.loads(part[4]),
            "content_bytes": len(part[4])}


def appends(browser: Any, lab: h.LabServer, k: int) -> list[dict[str, Any]]:
    shows = [PANEL_CELL.format(n=n) for n in SIZES]
    cells = [SETUP.replace("__SIZES__", repr(SIZES)), "reset()", *shows,
             *[f"await turns({n}, {k})" for n in SIZES]]
    name = "panel_bytes.ipynb"
    tab = Page(browser, lab, name, cells)
    frames: list[tuple[str, bytes | str]] = []
    phase = ["open"]
    tab.page.on("websocket", lambda ws: ws.on(
        "framereceived", lambda payload: frames.append((phase[0], payload))))
    tab.open(lab, name)
    for i, n in enumerate(SIZES):
        tab.show(2 + i, n)
    out = []
    for i, n in enumerate(SIZES):
        phase[0] = f"turns {n}"
        tab.page.evaluate("() => { window.__bench.t0 = performance.now(); }")
        _run_and_wait_text(tab.page, 2 + len(SIZES) + i, f"turns done {n}: {4 * k} messages")
        h.wait_kernel_idle(tab.page)
        tab.page.wait_for_timeout(500)  # the frames' events reach Python after the page
        longest = tab.page.evaluate(
            "() => Math.max(0, ...window.__bench.longtasks"
            ".filter((t) => t.start >= window.__bench.t0).map((t) => t.dur))")
        out.append({"n": n, "appended": 4 * k, "longest_ms": longest})
    phase[0] = "end"
    tab.reset()
    kernel = json.loads((lab.root / "bench_kernel.json").read_text())["runs"]
    tab.context.close()
    ids = {run["n"]: run["model_id"] for run in kernel}
    for row in out:
        mine = []
        for label, payload in frames:
            if label != f"turns {row['n']}":
                continue
            msg = _decode(payload)
            if msg and msg["msg_type"] == "comm_msg" and \
                    msg["content"].get("comm_id") == ids[row["n"]]:
                mine.append((len(payload), msg))
        kinds: dict[str, int] = {}
        for size, msg in mine:
            data = msg["content"].get("data", {})
            kind = (data.get("content") or {}).get("t") or data.get("method", "?")
            if kind == "update":
                kind = "update " + ",".join(sorted(data.get("state", {})))
            kinds[kind] = kinds.get(kind, 0) + size
        total = sum(size for size, _ in mine)
        row.update(comm_messages=len(mine), bytes=total, bytes_per_message=total / row["appended"],
                   largest=max((size for size, _ in mine), default=0), by_kind=kinds)
    return out


# --------------------------------------------------------------------- where the Python goes

def profile_build(n: int = 5_000, top: int = 10) -> dict[str, Any]:
    """cProfile of ``AgentPanel(agent)`` and of its MIME bundle at ``n`` messages, here (a
    recording comm in place of the kernel's)."""
    from panels import _install_recording_comm

    _install_recording_comm()
    namespace: dict[str, Any] = {}
    exec(SETUP.split("fragola = Fragola.scripted")[0].replace("__SIZES__", repr((n,))), namespace)
    from fragola_nb import Fragola, tool
    from fragola_nb.notebook.panel.view import AgentPanel

    fragola = Fragola(model="bench-model", api_key="bench", base_url="http://127.0.0.1:9/v1")
    agent = fragola.agent("bench", tools=[tool(namespace["add"])],
                          messages=namespace["conversation"](n))
    out: dict[str, Any] = {"n": n}
    made: list[Any] = []
    for label, work in (("build", lambda: made.append(AgentPanel(agent))),
                        ("bundle", lambda: made[0]._repr_mimebundle_())):
        profile = cProfile.Profile()
        t = time.perf_counter()
        profile.enable()
        work()
        profile.disable()
        out[f"{label}_s"] = time.perf_counter() - t
        stats = pstats.Stats(profile, stream=io.StringIO())
        rows = []
        for (file, line, fn), (_, calls, own, cum, _) in stats.stats.items():  # type: ignore
            where = file.split("/site-packages/")[-1].replace(str(ROOT) + "/", "")
            rows.append({"function": f"{fn} ({where}:{line})", "calls": calls,
                         "own_s": own, "cum_s": cum})
        # fragola_nb's functions and markdown-it's entry point, by cumulative time: the
        # own-time list is spread over a hundred markdown-it rules
        ours = [r for r in rows if "fragola_nb/" in r["function"]
                or r["function"].startswith("render (markdown_it/main.py")]
        out[label] = sorted(ours, key=lambda r: -r["cum_s"])[:top]
    panel = made[0]
    bundle = panel._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    out["bundle_html_bytes"] = len(data["text/html"])
    out["rows_json_bytes"] = len(json.dumps(panel._rows.rows))
    panel.close()
    return out


# ---------------------------------------------------------------------------------- the report

def _s(ms: float) -> str:
    return f"{ms / 1000:.2f} s"


def table(result: dict[str, Any]) -> str:
    summary, bytes_rows, prof = result["timing"], result["appends"], result["profile"]
    by = {(r["kind"], r["n"]): r for r in summary}
    panel5, panel20 = by[("panel", 5_000)], by[("panel", 20_000)]
    ratio = panel20["shown_ms"] / panel5["shown_ms"]
    longest = max(by[("panel", n)]["longest_max_ms"] for n in SIZES)
    small = next(r for r in bytes_rows if r["n"] == SIZES[0])

    def verdict(ok: bool) -> str:
        return "**met**" if ok else "**missed**"

    out = [
        f"{result['when']} · load average before/after: {result['load'][0]:.1f} / "
        f"{result['load'][1]:.1f} · {result['chromium']} · JupyterLab {result['jupyterlab']} · "
        f"{result['reps']} rounds (median){' · QUICK RUN' if result['quick'] else ''}", "",
        f"- panel of 5,000 messages shown in {_s(panel5['shown_ms'])} (target ≤ 1.5 s): "
        f"{verdict(panel5['shown_ms'] <= 1500)}",
        f"- panel of 20,000 messages shown in {_s(panel20['shown_ms'])}, {ratio:.1f}x the "
        f"5,000 time (target ≤ 2x): {verdict(ratio <= 2)}",
        f"- longest main-thread task until a panel is shown: {longest:,.0f} ms at most over "
        "the rounds (" + ", ".join(f"{n:,}: {by[('panel', n)]['longest_max_ms']:,.0f} ms"
                                     for n in SIZES) + f"; target ≤ 200 ms): "
        f"{verdict(longest <= 200)}",
    ]
    ratios = [r["bytes_per_message"] / small["bytes_per_message"] for r in bytes_rows]
    out.append("- kernel→browser bytes per appended message at a history of " + " / ".join(
        f"{r['n']:,}" for r in bytes_rows) + ": " + " / ".join(
        f"{r['bytes_per_message']:,.0f}" for r in bytes_rows) + f" (× {SIZES[0]}: " +
        " / ".join(f"{x:.2f}x" for x in ratios) + "; target: independent of the history, "
        f"read as ≤ 1.10x): {verdict(max(ratios) <= 1.10)}")
    out += ["", "Shown in: from Ctrl+Enter on the cell to the next frame after the last "
            "message row is in the DOM and inside the visible part of its scroll box (the "
            "static HTML: its last message in the DOM). Python: the construction "
            "(`AgentPanel(agent)`, or `conversation_html`) / the display hook (the MIME "
            "bundle built and sent) / the send of the rows a new view asks for. Frames: the "
            "kernel→browser websocket frames of 20 KB or more, with when they arrived.", "",
            "| shown as | messages | shown in | row in DOM | Python: build / display / rows "
            "sent | big frames: KB @ arrival | longest task until shown (median / max) | "
            "all long tasks until shown | longest task in the 3 s after |",
            "| --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: |"]
    for r in summary:
        kind = "panel (`AgentPanel`)" if r["kind"] == "panel" else "static HTML"
        hello = f" / {r['hello_send_s'] * 1e3:,.0f}" if r["hello_send_s"] is not None else ""
        frames = ", ".join(f"{f['bytes'] / 1e3:,.0f} @ {_s(f['at_ms'])}" for f in r["frames"])
        out.append(
            f"| {kind} | {r['n']:,} | {_s(r['shown_ms'])} | {_s(r['dom_ms'])} | "
            f"{r['build_s'] * 1e3:,.0f} / {r['display_s'] * 1e3:,.0f}{hello} ms | "
            f"{frames or '—'} | {r['longest_ms']:,.0f} / {r['longest_max_ms']:,.0f} ms | "
            f"{r['long_total_ms']:,.0f} ms | {r['longest_after_ms']:,.0f} ms |")
    out += ["", f"Bytes sent while the agent runs {result['turns']} real turns (user message, "
            "tool call, tool result, answer: 4 messages a turn) against the scripted model: "
            "the `comm_msg` websocket frames of that agent's panel, whole frames as received.",
            "", "| history | messages appended | comm messages | bytes | bytes per message | "
            "largest frame | by kind (bytes) | longest task meanwhile |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for r in bytes_rows:
        kinds = ", ".join(f"{k}: {v:,}" for k, v in sorted(r["by_kind"].items(),
                                                            key=lambda kv: -kv[1]))
        out.append(f"| {r['n']:,} | {r['appended']} | {r['comm_messages']} | {r['bytes']:,} | "
                   f"{r['bytes_per_message']:,.0f} | {r['largest']:,} | {kinds} | "
                   f"{r['longest_ms']:,.0f} ms |")
    out += ["", f"Where the Python time goes, `AgentPanel(agent)` at {prof['n']:,} messages "
            f"outside the browser (cProfile, a recording comm): construction "
            f"{prof['build_s'] * 1e3:,.0f} ms, the MIME bundle {prof['bundle_s'] * 1e3:,.0f} ms "
            f"(its `text/html` is {prof['bundle_html_bytes'] / 1e6:.2f} MB; the rows are "
            f"{prof['rows_json_bytes'] / 1e6:.2f} MB of JSON; times under the profiler, which "
            "about doubles them). fragola_nb's functions and markdown-it's `render`, by "
            "cumulative time:", "",
            "| part | function | calls | own ms | cumulative ms |",
            "| --- | --- | ---: | ---: | ---: |"]
    for label in ("build", "bundle"):
        for f in prof[label][:8]:
            out.append(f"| {label} | `{f['function']}` | {f['calls']:,} | "
                       f"{f['own_s'] * 1e3:,.0f} | {f['cum_s'] * 1e3:,.0f} |")
    out += ["", "In the browser, the scripts of the long animation frames (Long Animation "
            "Frames API; the slowest round; invoker, script file, ms), until shown | in the "
            "3 s after:", ""]
    for r in summary:
        if r["n"] != SIZES[0]:
            kind = "panel" if r["kind"] == "panel" else "static HTML"
            out.append(f"- {kind}, {r['n']:,}: " + ("; ".join(
                f"{name} {ms:,.0f}" for name, ms in r["scripts"]) or "none") + " | " + ("; ".join(
                f"{name} {ms:,.0f}" for name, ms in r["scripts_after"]) or "none"))
    return "\n".join(out)


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one round: a smoke run")
    parser.add_argument("--json")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--from-json", help="only print (and write) the tables of a saved run")
    args = parser.parse_args()
    if args.from_json:
        text = table(json.loads(Path(args.from_json).read_text()))
        if not args.no_write:
            write_section(SECTION, text)
        print(text)
        return
    reps = 1 if args.quick else args.reps
    load_before = os.getloadavg()
    print("panel in the browser (8-12 minutes on 2 cores)...", file=sys.stderr)
    lab = h.start_lab()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=h.CHROMIUM,  # gc() between runs
                                        args=[*h.CHROMIUM_ARGS, "--js-flags=--expose-gc"])
            try:
                runs = timing(browser, lab, reps)
                lab.shutdown_all_kernels()
                bytes_rows = appends(browser, lab, args.turns)
                version = browser.version
            finally:
                browser.close()
    finally:
        h.stop_lab(lab)
    import jupyterlab  # type: ignore[import-untyped]

    result = {"when": datetime.datetime.now().isoformat(timespec="minutes"),
              "load": [load_before[0], os.getloadavg()[0]], "reps": reps, "quick": args.quick,
              "chromium": f"Chromium {version}", "jupyterlab": jupyterlab.__version__,
              "turns": args.turns, "runs": runs, "timing": summarize(runs),
              "appends": bytes_rows, "profile": profile_build()}
    text = table(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if not args.no_write:
        write_section(SECTION, text)
    print(text)


if __name__ == "__main__":
    main()
