"""4. Concurrency: 500 conversations at once against the lean server.

500 fresh conversations (K tool steps then an answer each) are started together with
``asyncio.gather`` on one event loop and one client per library; we time until the last one
finishes (wall) and the client CPU it took. Rounds are interleaved (floor, fragola_nb,
floor, ...) after a warm-up round of 100 each, and the median round is reported.

    python bench/concurrency.py [--agents 500] [--k 1] [--rounds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from typing import Any

from common import LeanServer, median, report
from overhead import FLOOR
from workloads import make_floor, make_fragola

LIBS = {FLOOR: make_floor, "fragola_nb": make_fragola}


async def _round(run: Any, agents: int, k: int) -> tuple[float, float]:
    gc.collect()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(run(k, False) for _ in range(agents)))
    return time.perf_counter() - wall0, time.process_time() - cpu0


async def measure(server: LeanServer, agents: int, k: int, rounds: int) -> list[dict[str, Any]]:
    runs = {name: make(server.base_url) for name, make in LIBS.items()}
    warmup = min(agents, 100)  # the pool keeps at most 100 idle connections after any round
    for name, run in runs.items():
        before = server.stats()["requests"]
        await _round(run, warmup, k)  # warm-up: imports, connection pool
        made = server.stats()["requests"] - before
        assert made == warmup * (k + 1), f"{name}: {made} requests"
    wall: dict[str, list[float]] = {n: [] for n in runs}
    cpu: dict[str, list[float]] = {n: [] for n in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            w, c = await _round(run, agents, k)
            wall[name].append(w)
            cpu[name].append(c)
    for run in runs.values():
        await run.aclose()
    rows = []
    for name in runs:
        rows.append({
            "library": name, "agents": agents, "k": k, "rounds": rounds,
            "wall_s": median(wall[name]), "cpu_s": median(cpu[name]),
            "wall_ratio": median([a / b for a, b in zip(wall[name], wall[FLOOR], strict=True)]),
        })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| library | conversations at once | model calls | wall s to finish all | "
           "× floor | client CPU s |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append(f"| {r['library']} | {r['agents']} | {r['agents'] * (r['k'] + 1):,} | "
                   f"{r['wall_s']:.2f} | {r['wall_ratio']:.2f}x | {r['cpu_s']:.2f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=500)
    parser.add_argument("--k", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    with LeanServer() as server:
        rows = asyncio.run(measure(server, args.agents, args.k, args.rounds))
    report(rows, table(rows), args.json)


if __name__ == "__main__":
    main()
