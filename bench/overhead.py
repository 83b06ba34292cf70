"""1. Overhead per model call: the floor, fragola_nb and the peers on the same workload.

For each mode (streaming or not) and K, every library is warmed up, then sampled in
interleaved repetitions (the order rotates each repetition: A B C D, B C D A, ...). A sample
is a batch of fresh conversations; around it we read ``time.process_time()`` (this process
only: the lean server runs in another) and ``time.perf_counter()``, and divide by the number
of model calls. Ratios to the floor are taken per repetition, then the median.

    python bench/overhead.py [--reps N] [--json FILE]
    python bench/overhead.py --paired 40     # fragola_nb vs the floor only, K=20
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from typing import Any

from common import LeanServer, median, median_ci, report, same_requests, spread
from workloads import LIBRARIES, Run

FLOOR = "bare openai (floor)"
# Conversations per sample: 24 model calls at K=5, 21 at K=20.
RUNS_PER_SAMPLE = {5: 4, 20: 1}


def check_same_requests() -> None:
    """The floor must send the very request bodies fragola_nb sends (so the ratio compares
    two ways through the same client, not two workloads)."""
    same_requests(LIBRARIES[FLOOR], LIBRARIES["fragola_nb"],
                  "the floor and fragola_nb send different requests")


async def _sample(run: Run, k: int, stream: bool, runs: int) -> tuple[float, float]:
    gc.collect()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(runs):
        await run(k, stream)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    calls = runs * (k + 1)
    return cpu / calls * 1e6, wall / calls * 1e6


async def measure(server: LeanServer, reps: int, ks: tuple[int, ...] = (5, 20),
                  warmup: int = 3) -> list[dict[str, Any]]:
    runs = {name: make(server.base_url) for name, make in LIBRARIES.items()}
    names = list(runs)
    rows: list[dict[str, Any]] = []
    for stream in (False, True):
        for k in ks:
            for name in names:  # warm up, and check that each run makes k + 1 model calls
                before = server.stats()["requests"]
                for _ in range(warmup):
                    await runs[name](k, stream)
                made = server.stats()["requests"] - before
                assert made == warmup * (k + 1), f"{name} made {made} calls, not {warmup*(k+1)}"
            cpu: dict[str, list[float]] = {n: [] for n in names}
            wall: dict[str, list[float]] = {n: [] for n in names}
            for rep in range(reps):
                order = names[rep % len(names):] + names[: rep % len(names)]
                for name in order:
                    c, w = await _sample(runs[name], k, stream, RUNS_PER_SAMPLE.get(k, 2))
                    cpu[name].append(c)
                    wall[name].append(w)
            for name in names:
                cpu_ratio = [a / b for a, b in zip(cpu[name], cpu[FLOOR], strict=True)]
                wall_ratio = [a / b for a, b in zip(wall[name], wall[FLOOR], strict=True)]
                rows.append({
                    "stream": stream, "k": k, "library": name, "reps": reps,
                    "cpu_us": median(cpu[name]), "cpu_noise": spread(cpu[name]),
                    "cpu_ratio": median(cpu_ratio),
                    "wall_us": median(wall[name]), "wall_noise": spread(wall[name]),
                    "wall_ratio": median(wall_ratio),
                })
            print(f"  overhead: stream={stream} K={k} done", file=sys.stderr, flush=True)
    for run in runs.values():
        await run.aclose()  # type: ignore[attr-defined]
    return rows


async def paired(server: LeanServer, k: int, stream: bool, reps: int) -> dict[str, Any]:
    """fragola_nb against the floor alone, many paired repetitions (the order alternates):
    the ratio's median with a 95% confidence interval, for a verdict at the 1.00x line."""
    floor, fragola = LIBRARIES[FLOOR](server.base_url), LIBRARIES["fragola_nb"](server.base_url)
    for run in (floor, fragola):
        for _ in range(3):
            await run(k, stream)
    ratios = []
    runs = RUNS_PER_SAMPLE.get(k, 1)
    for rep in range(reps):
        pair = (floor, fragola) if rep % 2 == 0 else (fragola, floor)
        cpu = {}
        for run in pair:
            cpu[run] = (await _sample(run, k, stream, runs))[0]
        ratios.append(cpu[fragola] / cpu[floor])
    for run in (floor, fragola):
        await run.aclose()  # type: ignore[attr-defined]
    low, high = median_ci(ratios)
    return {"k": k, "stream": stream, "reps": reps, "ratio": median(ratios),
            "low": low, "high": high}


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| mode | K | library | CPU µs/call | CPU × floor | wall µs/call | wall × floor |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        mode = "stream" if r["stream"] else "non-stream"
        out.append(
            f"| {mode} | {r['k']} | {r['library']} | {r['cpu_us']:.0f} "
            f"(±{r['cpu_noise']*100:.0f}%) | {r['cpu_ratio']:.2f}x | {r['wall_us']:.0f} | "
            f"{r['wall_ratio']:.2f}x |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=25)
    parser.add_argument("--paired", type=int, default=0, metavar="REPS",
                        help="only fragola_nb against the floor at K=20, REPS paired samples")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    check_same_requests()
    if args.paired:
        with LeanServer() as server:

            async def both() -> list[dict[str, Any]]:
                return [await paired(server, 20, stream, args.paired) for stream in (False, True)]

            pairs = asyncio.run(both())
        report(pairs, "\n".join(
            f"K=20 stream={p['stream']}: fragola_nb/floor CPU {p['ratio']:.3f} "
            f"(95% CI {p['low']:.3f}-{p['high']:.3f}, {p['reps']} pairs)" for p in pairs),
            args.json)
        return
    with LeanServer() as server:
        rows = asyncio.run(measure(server, args.reps))
    report(rows, table(rows), args.json)


if __name__ == "__main__":
    main()
