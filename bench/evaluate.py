"""``agent.evaluate`` against ``agent.batch`` (issue 23): what graders, rows and the matrix's
bookkeeping cost in client CPU.

1,000 cases × 2 variants (two instructions), 8 at a time, against the lean server, graded by
three deterministic graders (``contains``, ``regex``, ``max_tokens``); the baseline is the
same 2,000 model calls as two ``agent.batch`` calls of 1,000 inputs on two agents holding the
two instructions, no graders, in the same run. Both with the progress bar off. Every round
checks that each way made exactly one request per run, and that every grade passed.
Rounds are interleaved, the order rotating after a warm-up; CPU is ``time.process_time``,
× batch is the median of the per-round ratios.

    python bench/evaluate.py [--cases 1000] [--rounds 5] [--json FILE] [--no-write]

It replaces the "Evaluate" section of ``bench/results.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from common import LeanServer, median, median_ci, report, write_section
from workloads import MODEL, TIMEOUT

SECTION = "## Evaluate (issue 23)"
BATCH = "`agent.batch` × 2 agents, no graders (baseline)"
EVALUATE = "`agent.evaluate`, 2 variants, 3 graders"
INSTRUCTIONS = {"terse": "Answer with the total only.", "plain": "Answer with a sentence."}
ANSWER = "The total is 0."  # what the lean server answers a request without a tool step
Way = Callable[[list[str]], Awaitable[None]]


def make_batch(base_url: str) -> Way:
    from fragola_nb import Fragola

    fragola = Fragola(model=MODEL, api_key="bench", base_url=base_url, max_retries=0,
                      timeout=TIMEOUT)
    agents = [fragola.agent(name, instructions=text) for name, text in INSTRUCTIONS.items()]

    async def way(cases: list[str]) -> None:
        for agent in agents:
            result = await agent.batch(cases, concurrency=8, progress=False)
            assert result.done == len(cases) and result.answers == [ANSWER] * len(cases)

    way.aclose = fragola.aclose  # type: ignore[attr-defined]
    return way


def make_evaluate(base_url: str) -> Way:
    from fragola_nb import Fragola
    from fragola_nb.graders import contains, max_tokens, regex

    fragola = Fragola(model=MODEL, api_key="bench", base_url=base_url, max_retries=0,
                      timeout=TIMEOUT)
    agent = fragola.agent("bench")
    variants = {name: {"instructions": text} for name, text in INSTRUCTIONS.items()}
    graders = [contains("total"), regex(r"\d"), max_tokens(100)]

    async def way(cases: list[str]) -> None:
        evaluation = await agent.evaluate(cases, variants, graders, concurrency=8,
                                          progress=False)
        assert len(evaluation) == 2 * len(cases)
        assert all(row.passed for row in evaluation), evaluation

    way.aclose = fragola.aclose  # type: ignore[attr-defined]
    return way


async def _round(way: Way, cases: list[str]) -> float:
    gc.collect()
    cpu0 = time.process_time()
    await way(cases)
    return time.process_time() - cpu0


async def measure(server: LeanServer, n: int, rounds: int) -> dict[str, Any]:
    ways = {BATCH: make_batch(server.base_url), EVALUATE: make_evaluate(server.base_url)}
    cases = [f"Case {i}: what is {i} + 0?" for i in range(n)]
    for name, way in ways.items():  # warm-up: imports, the connection pool
        before = server.stats()["requests"]
        await _round(way, cases[:50])
        assert server.stats()["requests"] - before == 100, name
    cpu: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for index in range(rounds):
        for name in names[index % 2:] + names[:index % 2]:
            before = server.stats()["requests"]
            cpu[name].append(await _round(ways[name], cases))
            assert server.stats()["requests"] - before == 2 * n, name
    for way in ways.values():
        await way.aclose()  # type: ignore[attr-defined]
    ratios = [a / b for a, b in zip(cpu[EVALUATE], cpu[BATCH], strict=True)]
    return {"cases": n, "rounds": rounds, "cpu": cpu, "ratio": median(ratios),
            "ci": median_ci(ratios)}


def text_of(result: dict[str, Any], when: str, load: float) -> str:
    cpu, n = result["cpu"], result["cases"]
    rows = ["| way | runs | client CPU s (median) | × batch |", "| --- | ---: | ---: | ---: |"]
    for name in (BATCH, EVALUATE):
        ratio = 1.0 if name == BATCH else result["ratio"]
        rows.append(f"| {name} | {2 * n:,} | {median(cpu[name]):.2f} | {ratio:.2f}x |")
    low, high = result["ci"]
    verdict = "**met**" if result["ratio"] <= 1.3 else "**missed**"
    return "\n".join([
        f"{when} · {n:,} cases × 2 variants, 8 at a time, against the lean server; median of "
        f"{result['rounds']} interleaved rounds; load average {load:.1f}.", "", *rows, "",
        f"- `evaluate` with three deterministic graders costs **{result['ratio']:.2f}x** the "
        f"client CPU of the same runs as `batch` without graders (95% CI {low:.2f}–"
        f"{high:.2f}; target ≤ 1.3x: {verdict})."])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    when = datetime.datetime.now().isoformat(timespec="minutes")
    load = os.getloadavg()[0]
    with LeanServer() as server:
        result = asyncio.run(measure(server, args.cases, args.rounds))
    text = text_of(result, when, load)
    if not args.no_write:
        write_section(SECTION, text)
    report(result, text, args.json)
    if args.json:
        Path(args.json).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
