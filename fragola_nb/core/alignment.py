"""Aligning two sequences (of messages, of words) for ``diff``, in near-linear time.

``opcodes(a, b)`` is ``difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()``
while the work that takes is small: up to ``SMALL`` items in all, and few pairs of equal
items (for each item, its equals on the other side). Past that it is slow: it looks at
every pair of equals again at each level of its recursion (4 s for two 2,000-message
branches of a repeated exchange, minutes at 10,000; a second for 10,000 distinct ones).
Then the common head and tail are matched at once and the rest is aligned by Myers'
algorithm (the least edits; its time grows with the length times the number of edits, a
fifth of a second for 10,000 messages with 200 edits); past ``MOST_EDITS`` edits (two
sequences that differ throughout) the rest is paired position by position. Items are
compared by equality; they must be hashable.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Hashable, Sequence

__all__ = ["CHEAP_PAIRS", "MOST_EDITS", "SMALL", "opcodes"]

SMALL = 2_000
"""Up to this many items (both sides) ``SequenceMatcher`` may align, as it always did..."""
CHEAP_PAIRS = 50_000
"""...with up to this many pairs of equal items."""
MOST_EDITS = 600
"""Myers' search gives up past this many edits (its time is about length × edits)."""
Block = tuple[int, int, int]  # (i, j, size): a[i:i+size] == b[j:j+size]
Opcode = tuple[str, int, int, int, int]


def opcodes(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[Opcode]:
    """``difflib``'s opcodes (``equal``, ``replace``, ``delete``, ``insert``) of ``a``
    against ``b``: see the module."""
    if len(a) + len(b) <= SMALL and _equal_pairs(a, b) <= CHEAP_PAIRS:
        return list(difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes())
    return _from_blocks(_blocks(a, b), len(a), len(b))


def _equal_pairs(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    counts = Counter(a)
    return sum(counts[item] for item in b if item in counts)


def _blocks(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[Block]:
    n, m = len(a), len(b)
    head = 0
    while head < n and head < m and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and a[n - 1 - tail] == b[m - 1 - tail]:
        tail += 1
    middle_a, middle_b = a[head:n - tail], b[head:m - tail]
    found = _myers(middle_a, middle_b)
    if found is None:
        found = _by_position(middle_a, middle_b)
    blocks = [(0, 0, head)] if head else []
    blocks += [(i + head, j + head, size) for i, j, size in found]
    if tail:
        blocks.append((n - tail, m - tail, tail))
    return blocks


def _myers(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[Block] | None:
    """The runs of equal items of a shortest edit script (Myers 1986), or None past
    ``MOST_EDITS`` edits."""
    n, m = len(a), len(b)
    offset = MOST_EDITS + 1
    v = [0] * (2 * offset + 1)
    trace: list[list[int]] = []
    for d in range(MOST_EDITS + 1):
        trace.append(v[:])  # as it was before round d: what round d reads
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1]):
                x = v[offset + k + 1]  # a step down: an item of b inserted
            else:
                x = v[offset + k - 1] + 1  # a step right: an item of a deleted
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            v[offset + k] = x
            if x >= n and y >= m:
                return _path(trace, offset, d, n, m)
    return None


def _path(trace: list[list[int]], offset: int, last: int, n: int, m: int) -> list[Block]:
    """The equal runs (snakes) of the path found in round ``last``, walked back."""
    blocks: list[Block] = []
    x, y = n, m
    for d in range(last, 0, -1):
        v, k = trace[d], x - y
        down = k == -d or (k != d and v[offset + k - 1] < v[offset + k + 1])
        before = k + 1 if down else k - 1
        prev_x = v[offset + before]
        start = prev_x if down else prev_x + 1  # where the snake of round d began
        if x > start:
            blocks.append((start, start - k, x - start))
        x, y = prev_x, prev_x - before
    if x > 0:
        blocks.append((0, 0, x))
    blocks.reverse()
    return blocks


def _by_position(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[Block]:
    """Item i against item i: the runs where they are equal."""
    blocks: list[Block] = []
    run = 0
    for i in range(min(len(a), len(b)) + 1):
        if i < len(a) and i < len(b) and a[i] == b[i]:
            run += 1
        elif run:
            blocks.append((i - run, i - run, run))
            run = 0
    return blocks


def _from_blocks(blocks: list[Block], n: int, m: int) -> list[Opcode]:
    out: list[Opcode] = []
    i = j = 0
    for ai, bj, size in [*blocks, (n, m, 0)]:
        tag = ("replace" if i < ai and j < bj else "delete" if i < ai
               else "insert" if j < bj else "")
        if tag:
            out.append((tag, i, ai, j, bj))
        if size:
            out.append(("equal", ai, ai + size, bj, bj + size))
        i, j = ai + size, bj + size
    return out
