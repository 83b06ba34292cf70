"""Where fragola_nb's own CPU per model call goes, part by part (issue 34).

On ``profile_calls.stubbed_fragola`` (the model client's send stubbed: no HTTP, no openai
client, so no noise from them), the K=5 and K=20 workload is timed as it is and with one part
at a time replaced by nothing; the difference is what that part costs a call. Each figure is
the best of many samples (CPU time), the ways interleaved. The parts removed are not optional
(they are there for interrupts and for redaction): this says what they cost, nothing more.

    .venv/bin/python bench/own_parts.py [--samples N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import time
from collections.abc import Callable
from typing import Any

from profile_calls import stubbed_fragola

from fragola_nb.core.run import driver
from fragola_nb.core.run import loop as runloop
from fragola_nb.models.client.client import ModelClient


async def _not_stopped(run: Any) -> bool:
    return False


def _parts() -> dict[str, tuple[Any, str, Any]]:
    """name: (owner, attribute, stand-in)."""
    return {
        "credential bookkeeping of each request (`ModelClient.credentials`)":
            (ModelClient, "credentials", lambda self, *sent: set()),
        "the passes of the event loop before a tool runs (`_stopped_before_start`; one "
        "while nothing else is due)":
            (runloop, "_stopped_before_start", _not_stopped),
        "the interrupt ticker of each turn (`kept_awake`)":
            (driver, "kept_awake", contextlib.nullcontext),
    }


async def _best(run: Any, k: int, samples: int) -> float:
    calls = 60 // (k + 1)
    best = float("inf")
    for _ in range(samples):
        gc.collect()
        start = time.process_time()
        for _ in range(calls):
            await run(k, False)
        best = min(best, (time.process_time() - start) / (calls * (k + 1)) * 1e6)
    return best


async def own_parts(samples: int = 30, ks: tuple[int, ...] = (5, 20)) -> list[dict[str, Any]]:
    run = stubbed_fragola()
    rows: list[dict[str, Any]] = []
    parts = _parts()
    for k in ks:
        for _ in range(10):
            await run(k, False)
        whole: list[float] = []
        without: dict[str, list[float]] = {name: [] for name in parts}
        for _ in range(3):  # interleaved rounds: each way sees the same machine
            whole.append(await _best(run, k, samples // 3))
            for name, (owner, attribute, stand_in) in parts.items():
                kept: Callable[..., Any] = getattr(owner, attribute)
                setattr(owner, attribute, stand_in)
                try:
                    without[name].append(await _best(run, k, samples // 3))
                finally:
                    setattr(owner, attribute, kept)
        total = min(whole)
        rows.append({"k": k, "own_us": total,
                     "parts": {name: total - min(v) for name, v in without.items()}})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    ks = [r["k"] for r in rows]
    out = ["| part of fragola_nb's own CPU | " + " | ".join(f"µs a call, K={k}" for k in ks)
           + " |", "| --- |" + " ---: |" * len(ks)]
    for name in rows[0]["parts"]:
        out.append(f"| {name} | " + " | ".join(f"{r['parts'][name]:.0f}" for r in rows) + " |")
    out.append("| the rest: run loop, request building, usage and limits, tool argument "
               "validation and call, the reply checked and stored | "
               + " | ".join(f"{r['own_us'] - sum(r['parts'].values()):.0f}" for r in rows) + " |")
    out.append("| **fragola_nb's own, in all** | "
               + " | ".join(f"**{r['own_us']:.0f}**" for r in rows) + " |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = asyncio.run(own_parts(args.samples))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(table(rows))


if __name__ == "__main__":
    main()
