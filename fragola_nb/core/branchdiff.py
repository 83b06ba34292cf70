"""``diff(a, b)``: what two branches (agents, or lists of messages) did differently.

Two forks share a prefix; what matters is what each did after it. ``BranchDiff`` holds the
length of the common prefix (``common``: leading messages that are the same object or equal
in both) and, after it, the two sides aligned message by message (``pairs``). The alignment
is difflib's over whole messages (``fragola_nb.core.alignment``: Myers' least edits for long
branches of repeated messages, in near-linear time), so a message one side added does not
shift every later pair into "changed": equal runs pair up as ``same``, a message replaced
by one in the same place is ``changed`` (with a word diff of its text, tool calls and their
arguments, or tool result), and the rest is ``only-left``/``only-right``.

Usage and seconds per side count the model calls that side made itself after the prefix
(``fragola_nb.core.usage``): the last ones of its own calls, one per assistant message it holds
past both the prefix and its own fork point (a message it inherited, even one it edited,
cost it nothing). This is an estimate where a call failed without a message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from fragola_nb.base.checks import META
from fragola_nb.base.errors import BadUsage
from fragola_nb.core.alignment import opcodes
from fragola_nb.core.diffhtml import branch_diff_html, message_text
from fragola_nb.core.usage import Usage

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["BranchDiff", "DiffPair", "diff", "message_text"]

Kind = Literal["same", "changed", "only-left", "only-right"]
Message = dict[str, Any]
_WORDS = re.compile(r"\s+|\w+|[^\w\s]")
WORD_LIMIT = 4_000
"""Words per side past which a changed text is shown as replaced whole (a diff must stay
quick on a 50,000-word tool result)."""


@dataclass(frozen=True)
class DiffPair:
    """One aligned pair: ``left``/``right`` (None on the side that has no message there),
    ``kind``, and for a changed pair ``words``: ``(op, text)`` runs, op ``=``/``-``/``+``.
    ``left_index``/``right_index`` are the messages' indexes in their branches. Unpacks as
    ``left, right = pair``."""

    kind: Kind
    left: Message | None
    right: Message | None
    left_index: int | None = None
    right_index: int | None = None
    words: tuple[tuple[str, str], ...] = ()

    def __iter__(self) -> Iterator[Message | None]:
        return iter((self.left, self.right))


@dataclass(frozen=True)
class BranchDiff:
    """Two branches compared: ``common`` leading messages in both, then ``pairs``; per side
    ``names``, ``usage`` (the side's own calls after the prefix; None for a list of
    messages) and ``seconds`` (those calls' time, None when unknown). In a notebook it shows
    side by side (``_repr_html_``)."""

    names: tuple[str, str]
    common: int
    pairs: tuple[DiffPair, ...]
    usage: tuple[Usage | None, Usage | None] = (None, None)
    seconds: tuple[float | None, float | None] = (None, None)
    lengths: tuple[int, int] = field(default=(0, 0))

    def count(self, kind: Kind) -> int:
        return sum(1 for pair in self.pairs if pair.kind == kind)

    def __repr__(self) -> str:
        left, right = self.names
        kinds = ", ".join(f"{self.count(k)} {k}" for k in ("same", "changed", "only-left",
                                                          "only-right"))
        return (f"BranchDiff({left!r} vs {right!r}: {self.common} in common, "
                f"{len(self.pairs)} pairs after: {kinds})")

    def _repr_html_(self) -> str:
        return branch_diff_html(self)


def _side(branch: Any, which: str) -> tuple[str, list[Message], Agent | None]:
    from fragola_nb.core.agent import Agent

    if isinstance(branch, Agent):
        return branch.name, branch.state.messages, branch
    if isinstance(branch, Sequence) and not isinstance(branch, (str, bytes)) and all(
            isinstance(message, dict) for message in branch):
        return which, list(branch), None
    raise BadUsage(f"diff() compares two agents (or two lists of message dicts); {which} is "
                   f"a {type(branch).__name__}")


def _key(message: Message) -> str:
    return json.dumps(message, sort_keys=True, default=repr)


def _words(left: str, right: str) -> tuple[tuple[str, str], ...]:
    a, b = _WORDS.findall(left), _WORDS.findall(right)
    if len(a) > WORD_LIMIT or len(b) > WORD_LIMIT:
        return tuple(run for run in (("-", left), ("+", right)) if run[1])
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in opcodes(a, b):
        if op == "equal":
            out.append(("=", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(("-", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(("+", "".join(b[j1:j2])))
    return tuple(out)


def _align(left: list[Message], right: list[Message], start: int) -> list[DiffPair]:
    a, b = left[start:], right[start:]
    pairs: list[DiffPair] = []
    for op, i1, i2, j1, j2 in opcodes([_key(m) for m in a], [_key(m) for m in b]):
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            lm = a[i] if i < i2 else None
            rm = b[j] if j < j2 else None
            li = start + i if lm is not None else None
            ri = start + j if rm is not None else None
            if op == "equal":
                pairs.append(DiffPair("same", lm, rm, li, ri))
            elif lm is not None and rm is not None:
                pairs.append(DiffPair("changed", lm, rm, li, ri,
                                      _words(message_text(lm), message_text(rm))))
            else:
                pairs.append(DiffPair("only-left" if rm is None else "only-right", lm, rm, li, ri))
    return pairs


def _spent(agent: Agent | None, messages: list[Message], common: int) -> tuple[Usage | None,
                                                                               float | None]:
    if agent is None:
        return None, None
    made = sum(1 for message in messages[max(common, agent.fork_point):]
               if message.get("role") == "assistant" and META not in message)
    calls = agent.usage.calls[-made:] if made else ()
    times = [getattr(call, "seconds", None) for call in calls]
    seconds = None if not calls or None in times else float(sum(times))  # type: ignore[arg-type]
    return Usage(tuple(calls), agent.usage.prices), seconds


def diff(a: Any, b: Any) -> BranchDiff:
    """Compare two branches: agents (``agent``, ``agent.fork(...)``) or lists of messages.

    >>> d = fragola_nb.diff(agent, agent.forks[0])                # doctest: +SKIP
    >>> d.common, [pair.kind for pair in d.pairs]                  # doctest: +SKIP
    (2, ['changed', 'only-right'])
    """
    left_name, left, left_agent = _side(a, "a")
    right_name, right, right_agent = _side(b, "b")
    common = 0
    for x, y in zip(left, right, strict=False):
        if x is not y and x != y:
            break
        common += 1
    (lu, ls), (ru, rs) = _spent(left_agent, left, common), _spent(right_agent, right, common)
    return BranchDiff((left_name, right_name), common, tuple(_align(left, right, common)),
                      (lu, ru), (ls, rs), (len(left), len(right)))
