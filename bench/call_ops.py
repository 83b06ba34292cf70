"""Python bytecode instructions a model call, fragola_nb against the ``post()`` floor (issue 34).

Deterministic, unlike CPU time on a busy machine: both ways of ``call_floor`` run on the
in-process transport (``in_process_http``) under ``sys.settrace`` with opcode events on, and
every instruction executed is counted (ours, the openai client's, httpx's, asyncio's). A C
function counts as the one instruction that calls it, so this is a proxy for the CPU, good
for telling what a change to Python code did, not a time.

    .venv/bin/python bench/call_ops.py
"""

from __future__ import annotations

import asyncio
import sys
from types import FrameType
from typing import Any

from in_process import in_process_http, make_fragola_on
from workloads import Run

_count = [0]


def _tracer(frame: FrameType, event: str, arg: Any) -> Any:
    frame.f_trace_opcodes = True
    if event == "opcode":
        _count[0] += 1
    return _tracer


async def _per_call(run: Run, k: int, stream: bool, runs: int = 3) -> float:
    for _ in range(3):
        await run(k, stream)
    _count[0] = 0
    sys.settrace(_tracer)
    try:
        for _ in range(runs):
            await run(k, stream)
    finally:
        sys.settrace(None)
    return _count[0] / (runs * (k + 1))


async def instructions(ks: tuple[int, ...] = (5, 20)) -> list[dict[str, Any]]:
    from call_floor import make_post_floor

    url = "http://bench.invalid/v1"
    floor, ours = make_post_floor(url, in_process_http()), make_fragola_on(url, in_process_http())
    rows = []
    for stream in (False, True):
        for k in ks:
            a, b = await _per_call(floor, k, stream), await _per_call(ours, k, stream)
            rows.append({"stream": stream, "k": k, "floor": a, "fragola": b})
    for run in (floor, ours):
        await run.aclose()  # type: ignore[attr-defined]
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| mode | K | floor: instructions a call | fragola_nb | fragola_nb's beyond the floor "
           "| × floor |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append(f"| {'stream' if r['stream'] else 'plain'} | {r['k']} | {r['floor']:,.0f} "
                   f"| {r['fragola']:,.0f} | {r['fragola'] - r['floor']:,.0f} "
                   f"| {r['fragola'] / r['floor']:.2f}x |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table(asyncio.run(instructions())))
