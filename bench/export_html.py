"""export_html in the browser: how fast the file of a long run opens.

An agent of N messages (user and assistant turns in short Markdown, and a tool call with its
result every 10 messages) with 20 forks spread over its history (each adding 4 messages) is
exported with ``export_html``; the file is opened from disk (file://) in the Debian chromium
of the browser tests, the network blocked (a route that aborts every non-file request; none
is expected). Timed per open, in a fresh page: from navigation start to the ``load`` event,
and to the first paint of the history (a ``requestAnimationFrame`` after the viewer has drawn
its first rows, ``html[data-fx-ready]``, with its first message in the DOM). Baseline in the
same run: the same agent with 50 messages (and its 20 forks). Medians of ``--reps`` opens, the
sizes interleaved. Also the file's size and the time ``export_html`` takes in Python.

    .venv/bin/python bench/export_html.py [--reps 7] [--messages 5000] [--no-write]

Appends (or replaces) the "export_html: opening a long run" section of bench/results.md.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

from fragola_nb import Agent, Fragola, export_html

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.md"
TITLE = "## export_html: opening a long run (issue 24)"
TARGET_S = 1.5

TIMING_JS = """async () => {
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const nav = performance.getEntriesByType('navigation')[0];
  const paint = performance.getEntriesByName('first-contentful-paint')[0];
  return {load: nav.loadEventEnd, ready: window.__fxPainted || null,
          fcp: paint ? paint.startTime : null,
          messages: document.querySelectorAll('.fx-msg').length};
}"""
# Installed before the page's scripts: the first frame after the viewer marked itself ready.
WATCH_JS = """
new MutationObserver((_, obs) => {
  if (document.documentElement.dataset.fxReady) {
    obs.disconnect();
    requestAnimationFrame(() => { window.__fxPainted = performance.now(); });
  }
}).observe(document, {attributes: true, subtree: true, attributeFilter: ['data-fx-ready']});
"""


def history(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while len(messages) < n:
        i = len(messages)
        if i % 10 == 4 and n - i >= 3:
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [{
                    "id": f"c{i}", "type": "function",
                    "function": {"name": "lookup", "arguments": f'{{"q": "item {i}"}}'}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"},
            ]
        elif i % 2 == 0:
            messages.append({"role": "user", "content": f"Question {i}: what about *this*?"})
        else:
            messages.append({"role": "assistant",
                             "content": f"Answer {i}: **yes**, see `code` and a list:\n- a\n- b"})
    return messages[:n]


def tree(n: int) -> Agent:
    fragola = Fragola(api_key="k", base_url="http://127.0.0.1:9/v1")
    agent = fragola.agent("long", messages=history(n))
    for k in range(20):
        at = max(1, n * (k + 1) // 21)
        at -= at % 2  # after an answer: the forks stay valid histories
        fork = agent.fork(f"fork {k}")
        fork.reset([*agent.state.messages[:at], *history(4)])
    return agent


def route(r: Any, requests: list[str]) -> None:
    """Let the file itself load; record and abort anything else (none is expected)."""
    if r.request.url.startswith("file://"):
        r.continue_()
    else:
        requests.append(r.request.url)
        r.abort()


def measure(reps: int, n: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="fx-bench-"))
    files: dict[int, Path] = {}
    export_s: dict[int, float] = {}
    for size in (50, n):
        agent = tree(size)
        started = time.perf_counter()
        files[size] = folder / f"run-{size}.html"
        export_html(agent, files[size])
        export_s[size] = time.perf_counter() - started
    samples: dict[int, list[dict[str, Any]]] = {50: [], n: []}
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            for rep in range(reps + 1):  # a warm-up round first
                for size in ((50, n) if rep % 2 else (n, 50)):
                    context = browser.new_context(viewport={"width": 1200, "height": 800})
                    context.route("**/*", lambda r: route(r, requests))
                    page = context.new_page()
                    page.add_init_script(WATCH_JS)
                    page.goto(files[size].as_uri(), wait_until="load")
                    page.wait_for_function("() => window.__fxPainted")
                    sample = page.evaluate(TIMING_JS)
                    context.close()
                    if rep:
                        samples[size].append(sample)
        finally:
            browser.close()
    out: dict[str, Any] = {"n": n, "requests": requests, "sizes": {}}
    for size, rows in samples.items():
        out["sizes"][size] = {
            "load_ms": statistics.median(r["load"] for r in rows),
            "painted_ms": statistics.median(r["ready"] for r in rows),
            "max_painted_ms": max(r["ready"] for r in rows),
            "drawn": rows[0]["messages"], "bytes": files[size].stat().st_size,
            "export_s": export_s[size]}
    return out


def section(result: dict[str, Any], reps: int) -> str:
    n = result["n"]
    rows = ["| messages (+ 20 forks) | file | export_html (Python) | load event | "
            "history painted (median) | slowest of the opens | messages in the DOM |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for size, s in result["sizes"].items():
        rows.append(f"| {size:,} | {s['bytes'] / 1e6:.2f} MB | {s['export_s'] * 1e3:.0f} ms | "
                    f"{s['load_ms']:.0f} ms | {s['painted_ms']:.0f} ms | "
                    f"{s['max_painted_ms']:.0f} ms | {s['drawn']} |")
    big = result["sizes"][n]
    met = "met" if big["max_painted_ms"] / 1e3 < TARGET_S else "NOT met"
    return "\n".join([
        TITLE, "",
        "`bench/export_html.py`: the file `export_html` writes for an agent of N messages with "
        "20 forks, opened from disk (file://) in chromium with the network blocked; from "
        "navigation start to the load event and to the first frame after the viewer drew the "
        f"history's first rows. Medians of {reps} opens, a fresh page each, sizes "
        "interleaved; baseline: the same run with 50 messages.", "",
        *rows, "",
        f"- {n:,} messages open in **{big['painted_ms']:.0f} ms** (slowest "
        f"{big['max_painted_ms']:.0f} ms; target < {TARGET_S:.1f} s: **{met}**); requests "
        f"to the network: {len(result['requests'])}.",
        "- Why it is fast: the page holds the run as one JSON block (each fork only the "
        "messages it adds) and draws only the messages near the screen (windowed, issue 34: "
        "`bench/export_browser.py`), so the DOM does not grow with the history; the parse of "
        "the JSON is what grows.", ""])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    result = measure(args.reps, args.messages)
    text = section(result, args.reps)
    print(text)
    if args.no_write:
        return
    current = RESULTS.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(TITLE) + r".*?(?=\n## |\Z)", re.S)
    updated = (pattern.sub(lambda _: text.rstrip("\n"), current) if TITLE in current
               else current.rstrip("\n") + "\n\n" + text)
    RESULTS.write_text(updated if updated.endswith("\n") else updated + "\n", encoding="utf-8")
    if result["requests"]:
        sys.exit(f"the file asked the network for {result['requests']}")


if __name__ == "__main__":
    main()
