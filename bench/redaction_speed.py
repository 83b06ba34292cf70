"""Redaction of adversarial text: seconds per size, to see that it grows linearly.

Each shape made a key-shape pattern backtrack over a whole run from each of its letters
before issue 32 (100,000 letters of "hahaha…" took 18-34 s to grade or export). Each is
redacted at 100 KB, 200 KB and 1 MB, with a credential in use known (as in a real run);
a linear redaction takes about ten times as long at 1 MB as at 100 KB.

    .venv/bin/python bench/redaction_speed.py

Prints a table; writes nothing.
"""

from __future__ import annotations

import time

from fragola_nb.base.inuse import remember
from fragola_nb.base.redact import redact_text

SHAPES = {
    "hahaha…": lambda n: "ha" * (n // 2),
    "one letter": lambda n: "a" * n,
    "sk- and a run": lambda n: "sk-" + "a" * n,
    "sk-sk-sk-…": lambda n: "sk-" * (n // 3),
    "?a?a… =": lambda n: "?a" * (n // 2) + " =",
    "a://b:…": lambda n: "a://b:" * (n // 6),
    "aB1.aB1.…": lambda n: "aB1." * (n // 4),
    "basic + run + ===": lambda n: "basic " + "a" * n + "===",
}
SIZES = (100_000, 200_000, 1_000_000)


def main() -> None:
    remember(["corp-gw-7Q2xL9pZ4mN8"])
    print(f"{'shape':<20}" + "".join(f"{size:>12,}" for size in SIZES) + "   1 MB / 100 KB")
    for name, make in SHAPES.items():
        seconds = []
        for size in SIZES:
            text = make(size)
            start = time.perf_counter()
            redact_text(text)
            seconds.append(time.perf_counter() - start)
        print(f"{name:<20}" + "".join(f"{s:>11.3f}s" for s in seconds)
              + f"   {seconds[-1] / seconds[0]:>8.1f}×")


if __name__ == "__main__":
    main()
