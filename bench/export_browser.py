"""export_html of a fork in the browser: the export as it is against the export before issue 34.

A run of 5,000 messages (short Markdown turns, a tool call with its result every 10 messages;
``export_html.history``) and its fork at message 2,500 adding 2,500 of its own, exported with
``export_html(fork)`` (the fork selected). The baseline is the same file with the viewer of
commit ``BASELINE`` (its ``htmlexport.js`` and ``.css`` read from git, the page's policy hash
made for it): same data, same run. Each open is a fresh page of the Debian chromium of the
browser tests, from disk (file://), the network blocked, 1,100 × 800 px:

- opened: from navigation start to the first frame after the viewer drew its first rows;
- fork point on screen: to the first frame with the fork's first own message (#2500) on the
  screen. The current viewer opens there; the baseline opens at #0, so the bench clicks its
  "show more" (a chunk of 150 drawn each time) until #2500 exists, then scrolls to it: a lower
  bound of what a reader waits;
- elements in the page when opened, and after a full scroll (a screen at a time, a frame after
  each step, down to the end; the current viewer with the inherited part shown first, so both
  pass all 5,000 messages);
- the longest main-thread task (``longtask`` entries: none means none over 50 ms) while
  opening and while scrolling.

Rounds interleaved (old, new / new, old), a warm-up round first; medians, and the median of
the paired ratios new ÷ old; the full scroll in the first two rounds only (it takes the
baseline about 45 s on a busy machine). About 4 minutes.

    .venv/bin/python bench/export_browser.py [--reps 3] [--quick] [--no-write]

Replaces its own section of bench/results.md.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, sync_playwright

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import write_section  # noqa: E402  (bench/, the script's own directory)
from export_html import history  # noqa: E402

from fragola_nb import Fragola, export_html  # noqa: E402

SECTION = "## export_html: a fork of a 5,000-message run (issue 34)"
BASELINE = "1eb3e02"  # main before issue 34: the fork opened at #0, 150 more per scroll
LONG, AT = 5_000, 2_500

WATCH_JS = """(() => {
  const B = window.__fx = { tasks: [] };
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) B.tasks.push([e.startTime, e.duration]);
    }).observe({ type: "longtask", buffered: true });
  } catch (e) { B.noLongtask = String(e); }
  new MutationObserver((_, obs) => {
    if (document.documentElement.dataset.fxReady) {
      obs.disconnect();
      requestAnimationFrame(() => { B.opened = performance.now(); });
    }
  }).observe(document, { attributes: true, subtree: true, attributeFilter: ["data-fx-ready"] });
})();"""
FRAME = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
# The fork's first own message on the screen (the baseline scrolled down until it is drawn).
FORK_POINT_JS = """async () => {
  const frame = FRAME;
  const own = () => document.querySelector('.fx-msg[data-index="AT"]');
  const shown = (e) => {
    const r = e.getBoundingClientRect();
    return r.top >= 0 && r.bottom <= innerHeight;
  };
  // on the screen in the first frame: that frame's time
  if (own() && shown(own())) return { at: window.__fx.opened };
  // its "show more" clicked (scrolled to the end, it can sit in view with its observer quiet)
  while (!own()) { document.querySelector('.fx-more').click(); await frame(); }
  if (!shown(own())) { own().scrollIntoView(); await frame(); }
  return { at: performance.now() };
}""".replace("FRAME", FRAME).replace("AT", str(AT))
FULL_SCROLL_JS = """async () => {
  const frame = FRAME;
  const unfold = document.querySelector('.fx-fold-toggle');
  if (unfold) { unfold.click(); await frame(); }
  window.scrollTo(0, 0);
  await frame();
  const start = performance.now();
  let last = -1, still = 0;
  while (still < 3) {
    window.scrollBy(0, innerHeight);
    await frame();
    still = window.scrollY === last ? still + 1 : 0;
    last = window.scrollY;
  }
  return { start, end: performance.now(), messages: document.querySelectorAll('.fx-msg').length,
           elements: document.getElementsByTagName('*').length };
}""".replace("FRAME", FRAME)


def files(folder: Path) -> dict[str, Path]:
    """The fork's export, and the same page with the baseline's viewer."""
    fragola = Fragola(api_key="k", base_url="http://127.0.0.1:9/v1")
    run = fragola.agent("long", messages=history(LONG))
    fork = run.fork("what if", at=AT)
    fork.reset([*fork.state.messages, *history(LONG - AT)])
    page = export_html(fork)
    script = re.search(r"<script>(.*)</script>\n</body>", page, re.S)
    style = re.search(r"<style>(.*?)</style>", page, re.S)
    assert script is not None and style is not None
    old_script, old_style = (subprocess.run(
        ["git", "-C", str(HERE.parent), "show", f"{BASELINE}:fragola_nb/sessions/htmlexport.{ext}"],
        check=True, capture_output=True, text=True).stdout for ext in ("js", "css"))
    old = (page.replace(script.group(1), old_script).replace(style.group(1), old_style)
           .replace(digest(script.group(1)), digest(old_script)))
    paths = {"old": folder / "old.html", "new": folder / "new.html"}
    paths["old"].write_text(old, encoding="utf-8")
    paths["new"].write_text(page, encoding="utf-8")
    return paths


def digest(script: str) -> str:
    return base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()


def one_open(browser: Browser, path: Path, scroll: bool, requests: list[str]) -> dict[str, Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 800})

    def route(r: Any) -> None:
        if r.request.url.startswith("file://"):
            r.continue_()
        else:  # recorded and refused: none is expected
            requests.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.add_init_script(WATCH_JS)
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_function("() => window.__fx.opened")
    opened = page.evaluate("() => ({ at: window.__fx.opened, "
                           "elements: document.getElementsByTagName('*').length })")
    fork_point = page.evaluate(FORK_POINT_JS)
    ended = page.evaluate("() => performance.now()")  # the tasks of opening: until here
    out = {"opened_ms": opened["at"], "fork_point_ms": fork_point["at"],
           "elements_open": opened["elements"]}
    if scroll:
        scrolled = page.evaluate(FULL_SCROLL_JS)
        out.update(elements_end=scrolled["elements"], messages_end=scrolled["messages"],
                   scroll_s=(scrolled["end"] - scrolled["start"]) / 1e3)
    page.evaluate(FRAME)
    fx = page.evaluate("() => window.__fx")
    if "noLongtask" in fx:
        raise RuntimeError(f"no longtask entries in this browser: {fx['noLongtask']}")
    tasks = fx["tasks"]
    out["task_open_ms"] = max([0, *(d for t, d in tasks if t < ended)])
    out["task_scroll_ms"] = max([0, *(d for t, d in tasks if t >= ended)])
    context.close()
    return out


def measure(reps: int, scroll_rounds: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="fx-fork-bench-"))
    paths = files(folder)
    rounds: list[dict[str, dict[str, Any]]] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            for rep in range(reps + 1):  # a warm-up round first
                order = ("old", "new") if rep % 2 else ("new", "old")
                scroll = 1 <= rep <= scroll_rounds
                got = {kind: one_open(browser, paths[kind], scroll, requests) for kind in order}
                print(f"round {rep}: {got}", file=sys.stderr)
                if rep:
                    rounds.append(got)
        finally:
            browser.close()
    return {"rounds": rounds, "requests": requests,
            "bytes": {k: p.stat().st_size for k, p in paths.items()}}


def section(result: dict[str, Any]) -> str:
    rounds = result["rounds"]

    def med(kind: str, key: str) -> float:
        return statistics.median(r[kind][key] for r in rounds if key in r[kind])

    def worst(kind: str, key: str) -> float:
        return max(r[kind][key] for r in rounds if key in r[kind])

    def ratio(key: str) -> float:
        return statistics.median(r["new"][key] / r["old"][key] for r in rounds)

    def task(ms: float) -> str:
        return f"{ms:.0f} ms" if ms else "none ≥ 50 ms"

    rows = ["| viewer | opened (first paint) | fork point #2500 on screen | elements when opened "
            "| elements after a full scroll | longest task: opening / scrolling | full scroll |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for kind, name in (("old", f"before (commit {BASELINE})"), ("new", "now")):
        rows.append(
            f"| {name} | {med(kind, 'opened_ms'):.0f} ms | {med(kind, 'fork_point_ms'):.0f} ms | "
            f"{med(kind, 'elements_open'):,.0f} | {med(kind, 'elements_end'):,.0f} | "
            f"{task(worst(kind, 'task_open_ms'))} / {task(worst(kind, 'task_scroll_ms'))} | "
            f"{med(kind, 'scroll_s'):.1f} s |")
    scrolled = sum(1 for r in rounds if "elements_end" in r["new"])
    return "\n".join([
        "`bench/export_browser.py`: `export_html` of a fork (at message 2,500, adding 2,500) of "
        "a 5,000-message run, opened from disk in chromium (1,100 × 800, network blocked), "
        f"against the same file with the viewer of commit {BASELINE} (before issue 34) in the "
        f"same run; {len(rounds)} rounds interleaved after a warm-up, medians (the longest "
        f"task: the worst round), the full scroll in {scrolled} of them. A busy machine (2 "
        "cores shared with other work): the ratios of paired rounds are what counts.", "",
        *rows, "",
        f"- fork point on screen: **{ratio('fork_point_ms'):.2f}x** the baseline's time "
        f"(median of paired ratios); opened: {ratio('opened_ms'):.2f}x. The baseline opens "
        "at #0 and reaches #2500 only by being scrolled through (here as fast as a script "
        "can: a reader takes longer).",
        f"- after a full scroll the page holds {med('new', 'elements_end'):,.0f} elements "
        f"({med('new', 'messages_end'):.0f} message rows drawn) against "
        f"{med('old', 'elements_end'):,.0f} ({med('old', 'messages_end'):,.0f} rows).",
        f"- file: {result['bytes']['new'] / 1e6:.2f} MB (baseline "
        f"{result['bytes']['old'] / 1e6:.2f} MB: the same data); requests to the network: "
        f"{len(result['requests'])}.", ""])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round: not for numbers")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    reps = 1 if args.quick else args.reps
    result = measure(reps, scroll_rounds=min(reps, 2))  # a full scroll: ~20 s and ~45 s
    text = section(result)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)
    if result["requests"]:
        sys.exit(f"the file asked the network for {result['requests']}")


if __name__ == "__main__":
    main()
