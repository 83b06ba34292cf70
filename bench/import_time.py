"""5. Import time: ``import fragola_nb`` against ``import openai`` (target ≤ 1.20x).

Each sample is a fresh interpreter (``python -E -s -c``, run from the repository root so the
``fragola_nb`` imported is this tree's) that times one import in-process, wall clock
(``perf_counter``) and CPU (``process_time``), so interpreter start-up counts for neither side.
The two imports alternate, and which goes first alternates every round (A B, B A, ...), so a
burst of load on a shared machine falls on both; the ratio is taken per round and its median
reported with a 95% confidence interval, beside the ratio of the two fastest samples (the least
disturbed, as timeit advises). ``fragola_nb`` imports ``openai`` itself, so the ratio is 1 + what
fragola_nb adds on top of it.

The modules fragola_nb adds to what ``import openai`` loaded are listed with their own import
time (``-X importtime``, the least of ``--profiles`` runs): where to look when the ratio grows.

    python bench/import_time.py [--rounds 40] [--profiles 7] [--json FILE]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import median, median_ci, report, spread

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.20
TIMED = ("import time as _t\n"
         "_w, _c = _t.perf_counter(), _t.process_time()\n"
         "import {module}\n"
         "print(_t.perf_counter() - _w, _t.process_time() - _c)")


def sample(module: str) -> tuple[float, float]:
    """Wall and CPU seconds of ``import module`` in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-E", "-s", "-c", TIMED.format(module=module)],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    wall, cpu = out.split()
    return float(wall), float(cpu)


def measure(rounds: int) -> dict[str, Any]:
    times: dict[str, list[tuple[float, float]]] = {"openai": [], "fragola_nb": []}
    for _ in range(2):  # warm the file cache and the bytecode caches of both
        sample("openai"), sample("fragola_nb")
    for i in range(rounds):
        order = ("openai", "fragola_nb") if i % 2 == 0 else ("fragola_nb", "openai")
        for module in order:
            times[module].append(sample(module))
    result: dict[str, Any] = {"rounds": rounds}
    for k, what in enumerate(("wall", "cpu")):
        ratios = [f[k] / o[k] for f, o in zip(times["fragola_nb"], times["openai"], strict=True)]
        low, high = median_ci(ratios)
        result[what] = {
            "openai_ms": median([o[k] for o in times["openai"]]) * 1e3,
            "fragola_nb_ms": median([f[k] for f in times["fragola_nb"]]) * 1e3,
            "openai_spread": spread([o[k] for o in times["openai"]]),
            "fragola_nb_spread": spread([f[k] for f in times["fragola_nb"]]),
            "ratio": median(ratios), "low": low, "high": high,
            "best_ratio": min(f[k] for f in times["fragola_nb"])
            / min(o[k] for o in times["openai"]),
        }
    return result


def added_modules(runs: int) -> list[dict[str, Any]]:
    """What ``import fragola_nb`` loads after ``import openai``, heaviest first."""
    best: dict[str, tuple[int, int]] = {}
    for _ in range(runs):
        err = subprocess.run([sys.executable, "-E", "-s", "-X", "importtime", "-c",
                              "import openai; import fragola_nb"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stderr
        lines = err.splitlines()
        after = max(i for i, line in enumerate(lines) if line.rstrip().endswith("| openai"))
        for line in lines[after + 1:]:
            fields = line.removeprefix("import time:").split("|")
            if len(fields) != 3 or not fields[0].strip().isdigit():
                continue
            own, total, name = int(fields[0]), int(fields[1]), fields[2].strip()
            old = best.get(name, (own, total))
            best[name] = (min(old[0], own), min(old[1], total))
    return [{"module": name, "own_us": own, "total_us": total}
            for name, (own, total) in sorted(best.items(), key=lambda kv: -kv[1][0])]


def table(result: dict[str, Any]) -> str:
    lines = ["| import | wall ms | CPU ms |", "| --- | ---: | ---: |"]
    for module in ("openai", "fragola_nb"):
        wall, cpu = result["wall"], result["cpu"]
        lines.append(f"| `import {module}` | {wall[module + '_ms']:.0f} "
                     f"(±{wall[module + '_spread'] * 100:.0f}%) | {cpu[module + '_ms']:.0f} "
                     f"(±{cpu[module + '_spread'] * 100:.0f}%) |")
    lines.append("| fragola_nb ÷ openai (median of the paired ratios, 95% CI) | "
                 + " | ".join(f"{result[w]['ratio']:.2f}x ({result[w]['low']:.2f}–"
                              f"{result[w]['high']:.2f})" for w in ("wall", "cpu")) + " |")
    lines.append("| fragola_nb ÷ openai (fastest sample of each) | "
                 + " | ".join(f"{result[w]['best_ratio']:.2f}x" for w in ("wall", "cpu")) + " |")
    added = result.get("added", [])
    if added:
        own = sum(m["own_us"] for m in added) / 1e3
        lines += ["", f"{len(added)} modules loaded by fragola_nb on top of openai's, "
                      f"{own:.0f} ms of their own import time in all; the heaviest:", "",
                  "| module | own ms | with its imports ms |", "| --- | ---: | ---: |"]
        lines += [f"| `{m['module']}` | {m['own_us'] / 1e3:.1f} | {m['total_us'] / 1e3:.1f} |"
                  for m in added[:8]]
    return "\n".join(lines)


def target_line(result: dict[str, Any]) -> str:
    cpu = result["cpu"]
    met = cpu["ratio"] <= TARGET
    return (f"- `import fragola_nb` at {cpu['ratio']:.2f}x the CPU of `import openai` "
            f"(95% CI {cpu['low']:.2f}–{cpu['high']:.2f}, {result['rounds']} paired fresh "
            f"interpreters; target ≤ {TARGET:.2f}x): {'**met**' if met else '**missed**'}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--profiles", type=int, default=7)
    parser.add_argument("--json")
    args = parser.parse_args()
    result = measure(args.rounds)
    result["added"] = added_modules(args.profiles)
    report(result, target_line(result) + "\n\n" + table(result), args.json)


if __name__ == "__main__":
    main()
