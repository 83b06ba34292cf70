"""``diff`` of two 10,000-message branches of repeated messages completes (it took minutes:
``SequenceMatcher`` weighs every pair of equal messages at each level of its recursion), and
its alignment is a least one: as many ``same`` pairs as the longest common subsequence."""

from __future__ import annotations

import difflib
import random
from typing import Any

import fragola_nb
from fragola_nb.core.alignment import opcodes


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def covers_both(diff: Any, left: list[Any], right: list[Any]) -> None:
    """Every message of each side appears once, in order, and ``same`` pairs are equal."""
    lefts = [p.left_index for p in diff.pairs if p.left_index is not None]
    rights = [p.right_index for p in diff.pairs if p.right_index is not None]
    assert lefts == list(range(diff.common, len(left)))
    assert rights == list(range(diff.common, len(right)))
    assert all(p.left == p.right for p in diff.pairs if p.kind == "same")


def test_diff_of_two_10000_message_branches_of_repeated_messages() -> None:
    base = [user("again"), assistant("ok")] * 5_000
    sparse = [assistant(f"changed {i}") if i % 97 == 0 else m for i, m in enumerate(base)]
    shifted = [assistant("ok"), user("again")] * 5_000
    inserted = [*base[:5_000], user("one more"), *base[5_000:]]

    edited = fragola_nb.diff(base, sparse)
    covers_both(edited, base, sparse)
    assert edited.common == 0 and edited.count("changed") == len(range(0, 10_000, 97))
    assert edited.count("same") == 10_000 - edited.count("changed")

    moved = fragola_nb.diff(base, shifted)
    covers_both(moved, base, shifted)
    assert (moved.count("same"), moved.count("only-left"), moved.count("only-right")) == (
        9_999, 1, 1)

    added = fragola_nb.diff(base, inserted)
    assert added.common == 5_000 and [p.kind for p in added.pairs].count("only-right") == 1
    covers_both(added, base, inserted)


def lcs(a: list[int], b: list[int]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        previous = 0
        for j, y in enumerate(b):
            previous, row[j + 1] = row[j + 1], previous + 1 if x == y else max(row[j + 1], row[j])
    return row[-1]


def test_long_alignments_are_least_edits_and_short_ones_are_difflibs() -> None:
    rng = random.Random(7)
    for _ in range(4):  # past 2,000 messages in all: Myers' alignment
        a = [rng.randrange(3) for _ in range(rng.randrange(1_010, 1_050))]
        b = [x if rng.random() < 0.97 else rng.randrange(3, 6) for x in a]
        found = opcodes(a, b)
        same = sum(i2 - i1 for op, i1, i2, _, _ in found if op == "equal")
        assert all(a[i1:i2] == b[j1:j2] for op, i1, i2, j1, j2 in found if op == "equal")
        assert same == lcs(a, b)
        short_a, short_b = a[:300], b[:300]
        assert opcodes(short_a, short_b) == difflib.SequenceMatcher(
            None, short_a, short_b, autojunk=False).get_opcodes()
