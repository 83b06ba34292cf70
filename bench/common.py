"""Shared pieces: the lean server in its own process, and small statistics helpers."""

from __future__ import annotations

import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


class LeanServer:
    """``bench/lean_server.py`` in a child process; stops when closed (or when we die)."""

    def __init__(self, dump: str | None = None) -> None:
        env = dict(os.environ)
        if dump:
            env["BENCH_DUMP"] = dump  # the server appends each request body to this file
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "lean_server.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(f"lean server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict[str, int]:
        """``{"requests": N, "streamed": M}`` served so far."""
        with urllib.request.urlopen(f"{self.base_url}/stats", timeout=5) as response:
            return dict(json.load(response))

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # the server exits when its stdin closes
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> LeanServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def same_requests(first: Callable[[str], Any], second: Callable[[str], Any],
                  differ: str) -> None:
    """The two workload makers send the very same request bodies: run both at K=2, streaming
    and not, and compare the bodies as JSON; ``differ`` is the failure's message."""
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "requests.jsonl")
        with LeanServer(dump=dump) as server:

            async def both() -> None:
                for make in (first, second):
                    run = make(server.base_url)
                    for stream in (False, True):
                        await run(2, stream)
                    await run.aclose()

            asyncio.run(both())
        with open(dump) as f:
            bodies = [json.loads(line) for line in f]
    assert len(bodies) == 12, len(bodies)
    assert bodies[:6] == bodies[6:], differ


def report(result: Any, text: str, json_path: str | None) -> None:
    """End of a section run alone: write ``result`` as JSON when asked, print ``text``."""
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result, f, indent=1)
    print(text)


def median(values: list[float]) -> float:
    return statistics.median(values)


def median_ci(values: list[float]) -> tuple[float, float]:
    """An approximate 95% confidence interval of the median (order statistics)."""
    ordered = sorted(values)
    n = len(ordered)
    half = 1.96 * math.sqrt(n) / 2
    low, high = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half) - 1)
    return ordered[low], ordered[high]


def spread(values: list[float]) -> float:
    """Half the interquartile range relative to the median (a robust noise figure)."""
    if len(values) < 4:
        return 0.0
    q = statistics.quantiles(values, n=4)
    mid = statistics.median(values)
    return (q[2] - q[0]) / 2 / mid if mid else 0.0


def write_section(section: str, text: str, path: Path = HERE / "results.md") -> None:
    """Put ``text`` under the heading ``section`` of results.md, replacing what a run left
    there (run.py writes the file; panel_browser.py and batch.py add their sections)."""
    old = path.read_text() if path.exists() else "# fragola_nb benchmark results\n"
    body = f"{section}\n\n{text}\n"
    start = old.find(f"\n{section}\n")
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + body
    else:
        end = old.find("\n## ", start + len(section) + 2)
        new = old[:start + 1] + body + (old[end:] if end >= 0 else "")
    path.write_text(new)
