"""2. Fork: ``agent.fork()`` of an agent holding 1,000 and 10,000 messages, and
``agent.fork(at=n // 2)`` (a fork from the middle, holding half), against ``copy.deepcopy``
of the same history, in the same run.

Time is timeit-style, in CPU time of this process: many forks per timing, the best of several
repeats (timeit's own advice: the minimum is the least disturbed), with the median beside it.
Memory is what ``tracemalloc`` still counts after 100 forks (or 10 deep copies), divided by
their number: what each one keeps alive. No request is made (the client is never used).

    python bench/fork.py [--json FILE]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import time
import timeit
import tracemalloc
from typing import Any

from common import report
from workloads import add

SIZES = (1_000, 10_000)


def conversation(n: int) -> list[dict[str, Any]]:
    """``n`` messages shaped like a real tool-using conversation (user, call, result,
    answer), with texts of a few hundred characters."""
    out: list[dict[str, Any]] = []
    i = 0
    while len(out) < n:
        call_id = f"call_{i:06d}"
        out.append({"role": "user", "content": f"Question {i}: " + "please add one " * 12})
        out.append({"role": "assistant", "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": "add", "arguments": json.dumps({"x": i})}}]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": str(i + 1)})
        out.append({"role": "assistant", "content": f"The answer is {i + 1}. " + "ok " * 40})
        i += 1
    return out[:n]


def _agent(n: int) -> Any:
    from fragola_nb import Fragola, tool

    fragola = Fragola(model="bench-model", api_key="bench", base_url="http://127.0.0.1:9/v1")
    return fragola.agent("bench", tools=[tool(add)], messages=conversation(n))


def _time(stmt: Any, number: int, repeat: int = 7, setup: Any = "pass") -> tuple[float, float]:
    # CPU time of this process: on a shared machine the wall clock also counts the time we
    # wait for a core, which says nothing about fork.
    times = [t / number * 1e6 for t in timeit.repeat(stmt, setup, number=number, repeat=repeat,
                                                      timer=time.process_time)]
    return min(times), statistics.median(times)


def _kept(make: Any, count: int) -> float:
    """Bytes still allocated per object after making ``count`` of them."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    made = [make() for _ in range(count)]
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del made
    return (after - before) / count


def measure() -> list[dict[str, Any]]:
    rows = []
    for n in SIZES:
        parent = _agent(n)
        history = parent.state.messages
        assert len(history) == n
        # A fork's name is checked against its siblings' (O(forks)): the tree is emptied
        # before each repeat so both columns time forks of a tree of at most 100 forks, not
        # of the 14,000 the earlier repeats would leave.
        empty = parent._forks.clear
        fork_best, fork_median = _time(parent.fork, number=100, repeat=21, setup=empty)
        middle = n // 2  # a user message: a clean cut, taken as asked
        at_best, at_median = _time(lambda: parent.fork(at=middle),  # noqa: B023
                                   number=100, repeat=21, setup=empty)
        copy_best, copy_median = _time(lambda: copy.deepcopy(history),  # noqa: B023
                                       number=max(1, 20_000 // n))
        # A fresh parent for memory, so the forks made while timing do not count.
        parent = _agent(n)
        fork_kept = _kept(parent.fork, 100)
        at_kept = _kept(lambda: parent.fork(at=middle), 100)  # noqa: B023
        copy_kept = _kept(lambda: copy.deepcopy(history), 10)  # noqa: B023
        child = parent.fork()  # a fork sees the history and goes on alone
        assert child.state.messages == history and child.message_count == n
        half = parent.fork(at=middle)
        assert half.fork_at == middle and half.state.messages == history[:middle]
        rows.append({
            "messages": n,
            "fork_us": fork_best, "fork_us_median": fork_median,
            "fork_at_us": at_best, "fork_at_us_median": at_median, "fork_at_kept_bytes": at_kept,
            "deepcopy_us": copy_best, "deepcopy_us_median": copy_median,
            "fork_kept_bytes": fork_kept, "deepcopy_kept_bytes": copy_kept,
        })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| messages | fork CPU µs (best / median) | fork(at=n/2) CPU µs (best / median) | "
           "deepcopy CPU µs (best / median) | fork KiB kept | fork(at) KiB kept | "
           "deepcopy KiB kept |",
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append(
            f"| {r['messages']:,} | {r['fork_us']:.1f} / {r['fork_us_median']:.1f} | "
            f"{r['fork_at_us']:.1f} / {r['fork_at_us_median']:.1f} | "
            f"{r['deepcopy_us']:,.0f} / {r['deepcopy_us_median']:,.0f} | "
            f"{r['fork_kept_bytes'] / 1024:.1f} | {r['fork_at_kept_bytes'] / 1024:.1f} | "
            f"{r['deepcopy_kept_bytes'] / 1024:,.0f} |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = measure()
    report(rows, table(rows), args.json)


if __name__ == "__main__":
    main()
