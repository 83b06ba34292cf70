"""How far a streaming view in the page is behind the kernel (issue 26): the machinery shared
by ``bench/stream_panel_browser.py`` and ``test_browser_stream_rate.py``.

The method. The kernel stamps every chunk it receives: a ``model_chunk`` listener (cloned into
a comparison's forks) appends ``[time.time() in ms, characters so far]`` per stream to
``MARKS``, written to a file when the run is over (the side channel: nothing extra goes to
the page while it is measured). The page stamps what it shows: a MutationObserver on the cell,
read once per animation frame (the frame that paints it), appends ``[time, characters shown]``
whenever a stream's shown text grows (``performance.timeOrigin + performance.now()``: the same
wall clock as the kernel's, on the same machine). Just before the page shows ``L_i``
characters at ``t_i`` it showed ``L_{i-1}``; the kernel had the character after those since
``k(L_{i-1})``, the first stamp past ``L_{i-1}``: so the screen was ``t_i - k(L_{i-1})``
behind, the most it was behind in that gap (it is behind only while the kernel has text the
page does not). That is one lag sample per screen update; the last is the stored reply
replacing the streamed text. A websocket wrapper installed before the page loads stamps every
frame the page receives (channel, message type, comm id, size: JupyterLab's v1 binary
protocol decoded), and a PerformanceObserver records every long task.
"""

from __future__ import annotations

import bisect
import json
import statistics
from typing import Any

from . import jlab_harness as h

TOKEN = 4  # characters a token: the scripted model's default chunk is one token


def story(tokens: int) -> str:
    """Words of 4 characters (3 digits and a space, or a line break every 60 words, as a
    model's paragraphs): one token each (as in KERNEL)."""
    return "".join(f"{i % 1000:03d}" + ("\n" if i % 60 == 59 else " ")
                   for i in range(tokens)).rstrip()


KERNEL = '''\
import json, time
from pathlib import Path
from fragola_nb import Fragola
from fragola_nb.models.scripted import reply

MARKS = {}  # case -> {stream -> [[ms, characters so far], ...]}


def story(tokens):
    """Words of 4 characters (3 digits and a space or a line break): one token each."""
    return "".join(f"{i % 1000:03d}" + ("\\n" if i % 60 == 59 else " ")
                   for i in range(tokens)).rstrip()


def marker(case):
    def on_chunk(event):
        if event.content:
            marks = MARKS.setdefault(case, {}).setdefault(event.context.agent.name, [])
            marks.append([time.time() * 1e3, (marks[-1][1] if marks else 0) + len(event.content)])
    return on_chunk


def streamer(name, text, chunk, delay):
    agent = Fragola.scripted(brain=lambda request: reply(text), chunk_size=chunk,
                             chunk_delay=delay).agent(name=name, model_settings={"stream": True})
    agent.on_model_chunk(marker(name))
    return agent


def print_reply(case, text, chunk, delay):
    """The baseline: the same reply printed piece by piece, paced as the scripted server
    paces its chunks."""
    marks = MARKS.setdefault(case, {}).setdefault(case, [])
    for i in range(0, len(text), chunk):
        time.sleep(delay)
        print(text[i:i + chunk], end="", flush=True)
        marks.append([time.time() * 1e3, min(len(text), i + chunk)])


def dump():
    Path("stream_marks.json").write_text(json.dumps(MARKS))
    print("dumped")
'''

INIT_JS = """(() => {
  const P = window.__probe = { long: [], frames: [] };
  const now = () => performance.timeOrigin + performance.now();
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        P.long.push([performance.timeOrigin + e.startTime, e.duration]);
      }
    }).observe({ type: "longtask", buffered: true });
  } catch (e) { P.noLongtask = String(e); }
  const dec = new TextDecoder();
  const parse = (d) => {
    if (typeof d === "string") {
      const m = JSON.parse(d);
      return [m.channel, m.header.msg_type, m.content];
    }
    const v = new DataView(d), n = Number(v.getBigUint64(0, true)), off = [];
    for (let i = 0; i < n; i++) off.push(Number(v.getBigUint64(8 * (i + 1), true)));
    off.push(d.byteLength);
    const part = (i) => dec.decode(new Uint8Array(d, off[i], off[i + 1] - off[i]));
    const type = JSON.parse(part(1)).msg_type;
    return [part(0), type, type === "comm_msg" ? JSON.parse(part(4)) : null];
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (ev) => {
        try {
          const [ch, type, content] = parse(ev.data);
          const size = typeof ev.data === "string" ? ev.data.length : ev.data.byteLength;
          P.frames.push([now(), ch, type, (content && content.comm_id) || "", size]);
        } catch (e) { P.frames.push([now(), "?", "?", "", 0]); }
      });
    }
  };
})();"""

FINAL = ".fragola-msg-assistant:not(.fragola-stream) .fragola-md"  # the stored reply
STDOUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stdout"]'
# What one cell shows of each stream, sampled on the frame after each change.
WATCH_JS = """([sel, index, mode]) => {
  const cell = document.querySelectorAll(sel)[index];
  const W = window.__watch = { samples: [], shown: {} };
  const read = () => {
    const lens = {};
    if (mode === "panel") {
      const s = cell.querySelector(".fragola-stream-text");
      const f = [...cell.querySelectorAll(FINAL)].pop();
      lens.reply = s ? s.textContent.length : f ? f.textContent.trim().length : 0;
    } else if (mode === "grid") {
      for (const a of cell.querySelectorAll(".fragola-compare-answer")) {
        // a block per line, the breaks between them (compare.js): characters of the text
        lens[a.dataset.name] = a.textContent.length + Math.max(0, a.children.length - 1);
      }
    } else {
      lens.print = [...cell.querySelectorAll(STDOUT)]
        .map((e) => e.textContent).join("").length;
    }
    return lens;
  };
  let queued = false;
  const frame = () => {
    queued = false;
    const t = performance.timeOrigin + performance.now();
    for (const [name, n] of Object.entries(read())) {
      if (n > (W.shown[name] || 0)) { W.shown[name] = n; W.samples.push([t, name, n]); }
    }
  };
  W.observer = new MutationObserver(() => {
    if (!queued) { queued = true; requestAnimationFrame(frame); }
  });
  W.observer.observe(cell, { childList: true, subtree: true, characterData: true });
  W.t0 = performance.timeOrigin + performance.now();
}""".replace("FINAL", repr(FINAL)).replace("STDOUT", repr(STDOUT))

COLLECT_JS = """() => {
  const W = window.__watch, P = window.__probe;
  W.observer.disconnect();
  return { t0: W.t0, samples: W.samples, long: P.long.filter((l) => l[0] >= W.t0),
           frames: P.frames.filter((f) => f[0] >= W.t0), noLongtask: P.noLongtask || null };
}"""

# The text each stream of a cell ends with, as the page shows it.
FINAL_JS = """([sel, index, mode]) => {
  const cell = document.querySelectorAll(sel)[index];
  if (mode === "panel") {
    const f = [...cell.querySelectorAll(FINAL)].pop();
    return { reply: f ? f.textContent.trim() : null };
  }
  if (mode === "grid") {
    return Object.fromEntries([...cell.querySelectorAll(".fragola-compare-answer")]
      .map((a) => [a.dataset.name, [...a.children].map((d) => d.textContent).join("\\n")]));
  }
  return { print: [...cell.querySelectorAll(STDOUT)]
    .map((e) => e.textContent).join(""),
    warned: /rate exceeded/i.test(cell.textContent) };
}""".replace("FINAL", repr(FINAL)).replace("STDOUT", repr(STDOUT))


def lags(marks: list[list[float]], samples: list[tuple[float, int]]) -> list[float]:
    """One sample per screen update: how far behind the kernel the screen was just before
    it (see the module's docstring). ``marks``: the kernel's ``[ms, characters]``;
    ``samples``: the page's ``(ms, characters shown)``, in order."""
    produced = [n for _, n in marks]
    out, before = [], 0
    for t, shown in samples:
        i = bisect.bisect_right(produced, before)  # the first stamp past what was shown
        if i < len(marks):
            out.append(t - marks[i][0])
        before = shown
    return out


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(seen: dict[str, Any], marks: dict[str, list[list[float]]]) -> dict[str, Any]:
    """Lag, rates and long tasks of one measured cell (``seen``: COLLECT_JS's answer)."""
    by: dict[str, list[tuple[float, int]]] = {}
    for t, name, n in seen["samples"]:
        by.setdefault(name, []).append((t, n))
    lag = [x for name, s in by.items() for x in lags(marks.get(name, []), s)]
    start = min(m[0][0] for m in marks.values() if m)
    end = max(s[-1][0] for s in by.values()) if by else start
    seconds = max(1e-3, (end - start) / 1e3)
    frames = [f for f in seen["frames"] if start - 50 <= f[0] <= end + 50]
    iopub = [f for f in frames if f[1] == "iopub"]
    comms: dict[str, list[float]] = {}
    for t, _, kind, comm, _ in iopub:
        if kind == "comm_msg":
            comms.setdefault(comm, []).append(t)
    busiest = max(comms.values(), key=len) if comms else []
    per_second = max((bisect.bisect_left(busiest, t + 1000) - i for i, t in enumerate(busiest)),
                     default=0)
    shown = sum(s[-1][1] for s in by.values())
    spans = [(s[-1][0] - s[0][0]) / 1e3 for s in by.values() if len(s) > 1]
    produced = sum(m[-1][1] for m in marks.values() if m)
    made = [(m[-1][0] - m[0][0]) / 1e3 for m in marks.values() if len(m) > 1]
    long = [d for t, d in seen["long"] if start - 50 <= t <= end + 1000]
    return {
        "streams": len(by), "updates": sum(len(s) for s in by.values()),
        "lag_p50_ms": pct(lag, 0.5), "lag_p95_ms": pct(lag, 0.95),
        "lag_max_ms": max(lag, default=float("nan")),
        "produced_tok_s": produced / TOKEN / max(made, default=1e-3) if made else 0.0,
        "shown_tok_s": shown / TOKEN / max(spans, default=1e-3) if spans else 0.0,
        "seconds": seconds, "iopub_per_s": len(iopub) / seconds,
        "iopub_bytes_per_s": sum(f[4] for f in iopub) / seconds,
        "view_msgs_per_s": len(busiest) / seconds, "view_msgs_max_1s": per_second,
        "longest_task_ms": max(long, default=0.0),
    }


def load_marks(text: str) -> dict[str, dict[str, list[list[float]]]]:
    return dict(json.loads(text))


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def measure_cell(page: Any, index: int, mode: str, expected: dict[str, str],
                 timeout: float = 300_000) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run cell ``index`` and watch it until it is done and shows what it will show."""
    page.evaluate(WATCH_JS, [h.SEL_CELLS, index, mode])
    h.run_cell(page, index)
    page.wait_for_function(  # the cell ran: its prompt has a number
        "([sel, i]) => /\\[\\d+\\]/.test(document.querySelectorAll(sel)[i]"
        ".querySelector('.jp-InputArea-prompt').textContent)", arg=[h.SEL_CELLS, index],
        timeout=timeout)
    h.wait_kernel_idle(page, timeout)
    lengths = {name: len(text) for name, text in expected.items()}
    try:  # what a dropped message never brings: bounded, then the final text says so
        page.wait_for_function(
            "(want) => Object.entries(want).every(([k, n]) => (window.__watch.shown[k] || 0) >= n)",
            arg=lengths, timeout=10_000)
    except Exception:
        pass
    page.wait_for_timeout(1000)  # the long tasks of the frames after the last text
    seen = page.evaluate(COLLECT_JS)
    final = page.evaluate(FINAL_JS, [h.SEL_CELLS, index, mode])
    return seen, final


def run_until(page: Any, index: int, text: str, timeout: float = 120_000) -> None:
    """Run cell ``index`` and wait until its output holds ``text`` (its source may too)."""
    from playwright.sync_api import expect

    h.run_cell(page, index)
    expect(h.cell_output(page, index)).to_contain_text(text, timeout=timeout)
    h.wait_kernel_idle(page, timeout)
