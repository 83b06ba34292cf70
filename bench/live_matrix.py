"""The live evaluation matrix against none (issue 34): does the view slow the run it shows?

``agent.evaluate`` of 600 and 6,000 runs (100 / 1,000 cases × 2 variants × 3 repeats, one
``contains`` grader, 8 at a time) in a real kernel (``jupyter_client``: a python3 kernel
with ``%load_ext fragola_nb``), against the lean server in its own process. "live matrix":
``progress=True``, so the kernel shows the ``EvalView`` and sends its updates on iopub; this
script reads every iopub message as a front end does and answers the matrix's comm with the
page's hello. "none": ``progress=False`` (no matrix, no bar). Wall and CPU seconds are
measured in the kernel around the ``await`` (the matrix's last update included). No
browser draws the matrix: this is the kernel's cost (``eval_matrix_browser.py`` is the
page's). Rounds are interleaved, the order rotating; × none is the median of the paired
rounds' ratios; the front end also times each cell until the matrix is complete (its
verdict lines, drawn right after the run returns). Each round checks the rows (all ran, all
passed) and counts what the matrix sent: messages, bytes, and the largest update while rows
finished.

    .venv/bin/python bench/live_matrix.py [--rounds 3] [--quick] [--json FILE] [--no-write]

``--quick``: 60 and 600 runs, one round unless ``--rounds`` says; it writes nothing.

It replaces the "Live evaluation matrix" section of ``bench/results.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import queue
import sys
import time
from pathlib import Path
from typing import Any

from common import LeanServer, median, report, write_section
from jupyter_client.manager import KernelManager
from workloads import MODEL, TIMEOUT

SECTION = "## Live evaluation matrix (issue 34)"
WAYS = ("none", "live matrix")
SETUP = """\
%load_ext fragola_nb
import time
from fragola_nb import Fragola
from fragola_nb.graders import contains
agent = Fragola(model={model!r}, api_key="bench", base_url={url!r}, max_retries=0,
                timeout={timeout}).agent("bench")
variants = {{"terse": {{"instructions": "Answer with the total only."}},
             "plain": {{"instructions": "Answer with a sentence."}}}}
async def timed(n, progress):
    cases = [f"Case {{i}}: what is {{i}} + 0?" for i in range(n)]
    wall, cpu = time.perf_counter(), time.process_time()
    ev = await agent.evaluate(cases, variants, [contains("total")], repeat=3,
                              concurrency=8, progress=progress)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(ev) == 6 * n and all(row.passed for row in ev), ev
    return [wall, cpu]
"""


class Front:
    """A kernel and what a front end reads of it: every iopub message, the comms it opens."""

    def __init__(self) -> None:
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env={k: v for k, v in os.environ.items()
                                  if not k.startswith("OPENAI_")})
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code: str) -> tuple[str, dict[str, Any]]:
        """Run a cell; its result's text and what the matrix's comm sent meanwhile.
        ``sent["complete"]``: seconds from the request to the idle kernel and, with a
        matrix, to its verdict lines and its final static table (drawn right after
        ``evaluate`` returns: read on after the idle status until they come)."""
        began = time.perf_counter()
        msg_id = self.kc.execute(code)
        matrix: str | None = None
        sent: dict[str, Any] = {"messages": 0, "bytes": 0, "largest": 0}
        text, idle, tested, updated = "", False, False, False
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=600 if not idle else 60)
            except queue.Empty:
                raise RuntimeError("the kernel went quiet") from None
            kind, content = msg["msg_type"], msg["content"]
            if idle and (kind == "update_display_data" or (
                    kind == "comm_msg" and content["comm_id"] == matrix)):
                pass  # drawn right after the cell returned: its parent may differ
            elif msg["parent_header"].get("msg_id") != msg_id:
                continue
            if kind == "comm_open" and str(content["data"].get("state", {}).get(
                    "_anywidget_id", "")).endswith(".EvalMatrix"):
                matrix = content["comm_id"]  # the page renders it and says hello
                self.kc.shell_channel.send(self.kc.session.msg("comm_msg", {
                    "comm_id": matrix, "data": {"method": "custom",
                                                "content": {"do": "hello"}}}))
            if kind == "comm_msg" and content["comm_id"] == matrix:
                state = content["data"].get("state", {})
                tested = tested or bool(state.get("verdicts", {}).get("lines"))
                size = len(json.dumps(content["data"]))
                sent["messages"] += 1
                sent["bytes"] += size
                if not {"cases", "cells"} & set(content["data"].get("state", {})):
                    # a live update (a patch, the head); not the whole matrix, which is
                    # sent once when the rows are made and once at the end
                    sent["largest"] = max(sent["largest"], size)
            if kind == "execute_result":
                text = content["data"]["text/plain"]
            if kind == "error":
                raise RuntimeError("\n".join(content["traceback"]))
            if kind == "update_display_data":
                updated = True  # the final static table, drawn right after the run returns
            if kind == "status" and content["execution_state"] == "idle":
                idle = True
            if idle and (matrix is None or (tested and updated)):
                sent["complete"] = time.perf_counter() - began
                return text, sent

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def measure(server: LeanServer, sizes: list[int], rounds: int) -> dict[str, Any]:
    front = Front()
    try:
        front.run(SETUP.format(model=MODEL, url=server.base_url, timeout=TIMEOUT))
        for progress in (False, True):  # warm-up: imports, the pool, the widgets
            front.run(f"await timed(20, {progress})")
        result: dict[str, Any] = {}
        for n in sizes:
            result[str(n)] = {way: {"wall": [], "cpu": [], "sent": []} for way in WAYS}
        for index in range(rounds):
            for n in sizes:
                for way in WAYS[index % 2:] + WAYS[:index % 2]:
                    before = server.stats()["requests"]
                    text, sent = front.run(f"await timed({n}, {way != 'none'})")
                    assert server.stats()["requests"] - before == 6 * n, way
                    wall, cpu = json.loads(text)
                    into = result[str(n)][way]
                    into["wall"].append(wall)
                    into["cpu"].append(cpu)
                    into["sent"].append(sent)
                    print(f"{6 * n} runs, {way}: {wall:.2f} s", file=sys.stderr)
    finally:
        front.close()
    for data in result.values():
        live, none = data["live matrix"], data["none"]
        data["ratio"] = median([a / b for a, b in zip(live["wall"], none["wall"], strict=True)])
        data["cpu_ratio"] = median([a / b for a, b in zip(live["cpu"], none["cpu"],
                                                           strict=True)])
        data["complete_ratio"] = median([a["complete"] / b["complete"] for a, b in zip(
            live["sent"], none["sent"], strict=True)])
    return result


def text_of(result: dict[str, Any], rounds: int, when: str, load: float) -> str:
    rows = ["| runs | none: wall s | live matrix: wall s | × none (wall) | × none (kernel CPU) "
            "| × none (until the matrix is complete) | matrix messages | matrix KB "
            "| largest live update |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    verdicts = []
    for n, data in result.items():
        live, none = data["live matrix"], data["none"]
        sent = live["sent"][-1]
        rows.append(f"| {6 * int(n):,} | {median(none['wall']):.2f} | "
                    f"{median(live['wall']):.2f} | {data['ratio']:.2f}x | "
                    f"{data['cpu_ratio']:.2f}x | {data['complete_ratio']:.2f}x | "
                    f"{sent['messages']:,} | "
                    f"{sent['bytes'] / 1000:,.0f} | {sent['largest']:,} B |")
        met = "**met**" if data["ratio"] <= 1.1 else "**missed**"
        verdicts.append(f"{6 * int(n):,} runs: **{data['ratio']:.2f}x** ({met})")
    return "\n".join([
        f"{when} · `agent.evaluate` of 100 / 1,000 cases × 2 variants × 3 repeats, one "
        f"grader, 8 at a time, in a real kernel (jupyter_client; the matrix's iopub messages "
        f"read as a front end reads them, no browser drawing); against the lean server; "
        f"median of {rounds} interleaved rounds; load average {load:.1f} on 2 cores shared "
        f"with other work (a busy machine: the ratios, paired in the same run, are what "
        f"counts).", "", *rows, "",
        "- The live matrix costs the run " + "; ".join(verdicts) + " the time without it "
        "(target ≤ 1.1x at both sizes: the cost stays linear). Wall and CPU are the "
        "kernel's, around the `await`; the verdict lines (permutation tests) are drawn right "
        "after it returns: \"until the matrix is complete\" is seen from the front end, from "
        "the request to the idle kernel (none) or to the matrix's verdict lines and its "
        "final static table (live matrix), the cell's own round trip included. The largest "
        "update while rows finish does not grow with the run: only the changed cells and "
        "the head are sent; the whole matrix once, when the rows are made and at the end.",
        "- Each round's ratio, wall / kernel CPU (the noise of a shared machine): " + "; ".join(
            f"{6 * int(n):,} runs: " + ", ".join(
                f"{a / b:.2f}/{c / d:.2f}" for a, b, c, d in zip(
                    data["live matrix"]["wall"], data["none"]["wall"],
                    data["live matrix"]["cpu"], data["none"]["cpu"], strict=True))
            for n, data in result.items()) + "."])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--quick", action="store_true",
                        help="60 and 600 runs, 1 round unless --rounds")
    parser.add_argument("--json")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    sizes, rounds = ([10, 100], args.rounds or 1) if args.quick else ([100, 1000],
                                                                      args.rounds or 3)
    when = datetime.datetime.now().isoformat(timespec="minutes")
    load = os.getloadavg()[0]
    with LeanServer() as server:
        result = measure(server, sizes, rounds)
    text = text_of(result, rounds, when, load)
    if not args.no_write and not args.quick:
        write_section(SECTION, text)
    report(result, text, args.json)
    if args.json:
        Path(args.json).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
