"""3. Panels: what the notebook view costs, in time and in bytes sent to the browser.

The widgets' comm is replaced by one that records the size of every message it would send
(the JSON of ``data`` and ``metadata`` plus binary buffers), so the bytes counted are the
bytes a kernel would put on the wire to the browser, and which widget they were for.

* Adding one message to an ``AgentPanel`` already showing 50 or 5,000 messages: the message
  is stored the way the run loop stores it (``agent.conversation.append``, which fires
  ``after_state_update``, the event the panel listens to), 400 times, to both panels in turn
  (which goes first alternates, so neither gets the caches the other warmed); CPU time and
  bytes per message, median and mean, and the median of the paired ratios.
* A 2,000-token streamed reply from the lean server, paced at 400 tokens/s (about 5 s) and
  then as fast as it comes: how many updates the streaming view sends per second (a message
  that changes the text it shows: a part's new text, or a new part opened with its text),
  and the bytes of everything sent to the view and its parts.

    python bench/panels.py [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import comm
from comm.base_comm import BaseComm
from fork import conversation

RECORDS: list[tuple[str, str, int, bool]] = []  # (comm id, message type, bytes, streamed text)


class RecordingComm(BaseComm):  # type: ignore[misc]
    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None,
                    buffers: Any = None, **keys: Any) -> None:
        size = len(json.dumps(data, default=str, separators=(",", ":")))
        size += len(json.dumps(metadata or {}, separators=(",", ":")))
        size += sum(len(memoryview(b)) for b in buffers or ())
        content = (data or {}).get("content")
        streamed = isinstance(content, dict) and content.get("t") == "stream"
        RECORDS.append((self.comm_id, msg_type, size, streamed))


def _install_recording_comm() -> None:
    comm.create_comm = RecordingComm  # ipywidgets looks it up at each widget's open


def _new_message(i: int) -> dict[str, Any]:
    if i % 2 == 0:
        return {"role": "user", "content": f"Follow-up {i}: and what about *this* one?"}
    return {"role": "assistant",
            "content": f"Here is **answer {i}**:\n\n- one point\n- another point\n\n`code {i}`"}


def add_one_message(sizes: tuple[int, ...] = (50, 5_000), appends: int = 400
                    ) -> list[dict[str, Any]]:
    """Panels of each size side by side, one message added to each in turn (paired, so a
    busy moment of the machine hits both)."""
    from workloads import add

    from fragola_nb import Fragola, tool
    from fragola_nb.notebook.panel.view import AgentPanel

    fragola = Fragola(model="bench-model", api_key="bench", base_url="http://127.0.0.1:9/v1")
    shown: dict[int, tuple[Any, Any, float]] = {}
    for n in sizes:
        agent = fragola.agent("bench", tools=[tool(add)], messages=conversation(n))
        t0 = time.process_time()
        shown[n] = (agent, AgentPanel(agent), time.process_time() - t0)
    cpu: dict[int, list[float]] = {n: [] for n in sizes}
    sent: dict[int, list[int]] = {n: [] for n in sizes}
    count: dict[int, list[int]] = {n: [] for n in sizes}
    for i in range(appends):
        message = _new_message(i)
        for n in (sizes if i % 2 == 0 else sizes[::-1]):
            RECORDS.clear()
            t0 = time.process_time()  # CPU time: waiting for a core is not the panel's cost
            shown[n][0].conversation.append(message, "user_message")  # as the loop stores one
            cpu[n].append((time.process_time() - t0) * 1e6)
            sent[n].append(sum(size for _, _, size, _ in RECORDS))
            count[n].append(len(RECORDS))
    rows = []
    for n in sizes:
        agent, panel, build_s = shown[n]
        assert panel._rows.count == n + appends, panel._rows.count  # every message read
        panel.close()
        rows.append({
            "messages": n, "appends": appends, "build_ms": build_s * 1e3,
            "us_median": statistics.median(cpu[n]), "us_mean": statistics.fmean(cpu[n]),
            "ratio_to_smallest": statistics.median(
                [a / b for a, b in zip(cpu[n], cpu[sizes[0]], strict=True)]),
            "bytes_median": statistics.median(sent[n]), "bytes_mean": statistics.fmean(sent[n]),
            "comm_messages_mean": statistics.fmean(count[n])})
    return rows


async def _streamed_reply(base_url: str, tokens: int, rate: int) -> dict[str, Any]:
    from fragola_nb import Fragola
    from fragola_nb.notebook.panel.view import AgentPanel

    fragola = Fragola(model="bench-model", api_key="bench", base_url=base_url, max_retries=0)
    agent = fragola.agent("bench", model_settings={"stream": True})
    panel = AgentPanel(agent)
    # The streamed text goes to the browser as the panel's own custom messages ("t": "stream").
    stream_ids = {panel.comm.comm_id}
    RECORDS.clear()
    chunks = 0

    def count(_: Any) -> None:
        nonlocal chunks
        chunks += 1

    agent.on_model_chunk(count)
    t0 = time.perf_counter()
    state = await agent.user_message(f"bench tokens={tokens} rate={rate}")
    seconds = time.perf_counter() - t0
    assert state.outcome == "finished"
    to_view = [(kind, size, text) for cid, kind, size, text in RECORDS if cid in stream_ids]
    updates = [size for kind, size, text in to_view if text and kind in ("comm_open", "comm_msg")]
    panel.close()
    await fragola.aclose()
    return {"tokens": tokens, "rate": rate, "seconds": seconds, "chunks": chunks,
            "updates": len(updates), "updates_per_s": len(updates) / seconds,
            "comm_messages": len(to_view), "parts": 0,
            "bytes_total": sum(size for _, size, _ in to_view),
            "bytes_max": max(updates, default=0),
            "all_widgets_bytes": sum(size for _, _, size, _ in RECORDS)}


def measure(base_url: str) -> dict[str, Any]:
    _install_recording_comm()
    add = add_one_message()
    stream = [asyncio.run(_streamed_reply(base_url, 2_000, rate)) for rate in (400, 0)]
    return {"add": add, "stream": stream}


def table(result: dict[str, Any]) -> str:
    out = ["| panel showing | CPU µs to add one message (median / mean) | × 50 (paired) "
           "| bytes sent (median / mean) | comm messages per add | building the panel |",
           "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in result["add"]:
        out.append(f"| {r['messages']:,} messages | {r['us_median']:,.0f} / {r['us_mean']:,.0f} "
                   f"| {r['ratio_to_smallest']:.2f}x "
                   f"| {r['bytes_median']:,.0f} / {r['bytes_mean']:,.0f} | "
                   f"{r['comm_messages_mean']:.1f} | {r['build_ms']:,.0f} ms CPU |")
    out += ["", "| streamed reply | chunks | seconds | updates to the streaming view | "
            "updates/s | bytes sent to it (total / largest update) |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in result["stream"]:
        pace = f"{r['rate']} tokens/s" if r["rate"] else "as fast as it comes"
        out.append(f"| {r['tokens']:,} tokens, {pace} | {r['chunks']:,} | {r['seconds']:.2f} | "
                   f"{r['updates']} | {r['updates_per_s']:.1f} | "
                   f"{r['bytes_total']:,} / {r['bytes_max']:,} |")
    return "\n".join(out)


def main() -> None:
    from common import LeanServer, report

    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    with LeanServer() as server:
        result = measure(server.base_url)
    report(result, table(result), args.json)


if __name__ == "__main__":
    main()
