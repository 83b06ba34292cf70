"""Issue 32: ``diff`` of two long branches of repeated messages (a chatbot's "ok" over and
over), in CPU seconds, against ``difflib.SequenceMatcher`` on the same messages (what
``diff`` aligned with before; skipped past 2,000 messages a side, where it takes minutes).

    python bench/branch_diff.py [--sizes 2000 10000]
"""

from __future__ import annotations

import argparse
import difflib
import json
import time
from typing import Any

import fragola_nb


def shapes(n: int) -> dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """Two branches of ``n`` messages each: a repeated exchange, with a message replaced
    every 97 (sparse edits), shifted by one, and one message inserted in the middle."""
    def user(text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def assistant(text: str) -> dict[str, Any]:
        return {"role": "assistant", "content": text}

    base = [user("again"), assistant("ok")] * (n // 2)
    sparse = [assistant(f"changed {i}") if i % 97 == 0 else m for i, m in enumerate(base)]
    shifted = [assistant("ok"), user("again")] * (n // 2)
    half = n // 2
    inserted = [*base[:half], user("one more"), *base[half:]]
    return {"sparse edits": (base, sparse), "shifted": (base, shifted),
            "inserted": (base, inserted)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[2_000, 10_000])
    sizes = parser.parse_args().sizes
    fragola_nb.diff(*shapes(10)["sparse edits"])  # imports done before the clock starts
    print("| messages a side | shape | diff (s) | SequenceMatcher (s) |")
    print("| ---: | --- | ---: | ---: |")
    for n in sizes:
        for name, (left, right) in shapes(n).items():
            started = time.process_time()
            fragola_nb.diff(left, right)
            ours = time.process_time() - started
            theirs = "-"
            if n <= 2_000:
                keys = [[json.dumps(m, sort_keys=True) for m in side] for side in (left, right)]
                started = time.process_time()
                difflib.SequenceMatcher(None, *keys, autojunk=False).get_opcodes()
                theirs = f"{time.process_time() - started:.2f}"
            print(f"| {n:,} | {name} | {ours:.2f} | {theirs} |")


if __name__ == "__main__":
    main()
