"""Trajectory graders: how the agent reached its answer, from the fork's own tool calls (not the
shared prefix), in the order they were made (``row.tool_calls``), and its model requests.

``tool_sequence``, ``tool_args``, ``never_called``, ``max_tool_calls``, ``max_model_calls`` and
``tool_call_f1``; ``judge(..., trajectory=True)`` is in ``graders/judge.py``. Each
is checked when made (a ``BadUsage`` before anything is sent), named as written, and gives a
short reason.

>>> tool_sequence(["search", "answer"], mode="exact").__name__
"tool_sequence(['search', 'answer'], mode='exact')"
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.experiments.graders.base import Grade, GradedRow
from fragola_nb.experiments.graders.builtins import Check, _shown

__all__ = ["MODES", "max_model_calls", "max_tool_calls", "never_called", "tool_args",
           "tool_call_f1", "tool_sequence"]

MODES = ("exact", "in_order", "any_order", "subset", "superset")
"""``tool_sequence``'s modes."""


def _names(row: GradedRow) -> list[str]:
    return [str(call.get("name")) for call in row.tool_calls]


def _made(names: Sequence[str]) -> str:
    return f"called: {', '.join(names)}" if names else "no tool call"


def _name_list(names: Any, what: str) -> list[str]:
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence) or not all(
            isinstance(n, str) and n for n in names):
        raise BadUsage(f"{what} takes a list of tool names, not {_shown(names)}")
    return list(names)


def _in_order(wanted: Sequence[str], made: Sequence[str]) -> bool:
    calls = iter(made)
    return all(any(name == call for call in calls) for name in wanted)


def tool_sequence(names: Sequence[str], mode: str = "in_order") -> Check:
    """Passes when the fork's tool calls match ``names`` by ``mode``: ``"exact"`` (the calls'
    names, in order, are exactly ``names``), ``"in_order"`` (``names`` appear in that order,
    other calls allowed between), ``"any_order"`` (the same names as many times, in any
    order), ``"subset"`` (every call made is one of ``names``), ``"superset"`` (every name in
    ``names`` was called).

    >>> tool_sequence(["lookup"]).__name__
    "tool_sequence(['lookup'])"
    """
    wanted = _name_list(names, "tool_sequence()")
    if mode not in MODES:
        raise BadUsage(f"tool_sequence(mode=...) is one of {', '.join(map(repr, MODES))}, "
                       f"not {_shown(mode)}")

    def rule(row: GradedRow) -> tuple[bool, str]:
        made = _names(row)
        if mode == "exact":
            passed = made == wanted
        elif mode == "in_order":
            passed = _in_order(wanted, made)
        elif mode == "any_order":
            passed = Counter(made) == Counter(wanted)
        elif mode == "subset":
            passed = set(made) <= set(wanted)
        else:
            passed = set(wanted) <= set(made)
        return passed, f"{mode} {'matches' if passed else 'does not match'} ({_made(made)})"

    suffix = "" if mode == "in_order" else f", mode={mode!r}"
    return Check(f"tool_sequence({wanted!r}{suffix})", rule)


def tool_args(name: str, nth: int = 0, **arguments: Any) -> Check:
    """Passes when the ``nth`` call of ``name`` (0: the first) exists and its arguments hold
    each of ``arguments`` with that value (other arguments may be there too).

    >>> tool_args("lookup", nth=1, city="Oslo").__name__
    "tool_args('lookup', nth=1, city='Oslo')"
    """
    if not isinstance(name, str) or not name:
        raise BadUsage(f"tool_args() takes a tool name, not {_shown(name)}")
    if isinstance(nth, bool) or not isinstance(nth, int) or nth < 0:
        raise BadUsage(f"tool_args(nth=...) takes a whole number >= 0, not {_shown(nth)}")
    wanted = ", ".join(f"{key}={_shown(value)}" for key, value in arguments.items())

    def rule(row: GradedRow) -> tuple[bool, str]:
        calls = [call for call in row.tool_calls if call.get("name") == name]
        if len(calls) <= nth:
            return False, f"{name!r} was called {len(calls)} time{'s' * (len(calls) != 1)}"
        given = calls[nth].get("arguments") or {}
        wrong = [key for key, value in arguments.items()
                 if key not in given or given[key] != value]
        if wrong:
            return False, (f"call {nth} of {name!r} has {wrong[0]}="
                           f"{_shown(given.get(wrong[0], '(none)'))}, not "
                           f"{_shown(arguments[wrong[0]])}")
        return True, f"call {nth} of {name!r} has " + (wanted or "no argument asked for")

    nth_text = f", nth={nth}" if nth else ""
    return Check(f"tool_args({name!r}{nth_text}{', ' + wanted if wanted else ''})", rule)


def never_called(*names: str) -> Check:
    """Passes when none of the tools ``names`` was called.

    >>> never_called("delete_file").__name__
    "never_called('delete_file')"
    """
    forbidden = _name_list(list(names), "never_called()")
    if not forbidden:
        raise BadUsage("never_called() takes at least one tool name")

    def rule(row: GradedRow) -> tuple[bool, str]:
        touched = [n for n in forbidden if n in _names(row)]
        if touched:
            count = sum(1 for n in _names(row) if n in touched)
            plural = "s" * (count != 1)
            return False, f"{', '.join(map(repr, touched))} called ({count} call{plural})"
        return True, f"{', '.join(map(repr, forbidden))} never called"

    return Check(f"never_called({', '.join(map(repr, forbidden))})", rule)


def _count(n: Any, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise BadUsage(f"{what} takes a whole number >= 0, not {_shown(n)}")
    return n


def _calls(n: int, kind: str) -> str:
    return f"{n} {kind} call{'s' * (n != 1)}"


def max_tool_calls(n: int) -> Check:
    """Passes when the fork made at most ``n`` tool calls.

    >>> max_tool_calls(3).__name__
    'max_tool_calls(3)'
    """
    limit = _count(n, "max_tool_calls()")

    def rule(row: GradedRow) -> tuple[bool, str]:
        made = len(row.tool_calls)
        return made <= limit, f"{_calls(made, 'tool')} {'<=' if made <= limit else '>'} {limit}"

    return Check(f"max_tool_calls({limit})", rule)


def max_model_calls(n: int) -> Check:
    """Passes when the run made at most ``n`` model requests (a judge's and a simulated
    user's are counted apart, not here).

    >>> max_model_calls(4).__name__
    'max_model_calls(4)'
    """
    limit = _count(n, "max_model_calls()")

    def rule(row: GradedRow) -> tuple[bool, str]:
        made = row.model_calls
        return made <= limit, f"{_calls(made, 'model')} {'<=' if made <= limit else '>'} {limit}"

    return Check(f"max_model_calls({limit})", rule)


def _expected_calls(expected: Any) -> list[tuple[str, Any]]:
    if isinstance(expected, (str, bytes, Mapping)) or not isinstance(expected, Sequence):
        raise BadUsage("tool_call_f1() takes a list of tool names or of {'name', 'arguments'}"
                       f", not {_shown(expected)}")
    out: list[tuple[str, Any]] = []
    for item in expected:
        if isinstance(item, str) and item:
            out.append((item, None))
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str) and item["name"]:
            arguments = item.get("arguments")
            if arguments is not None and not isinstance(arguments, Mapping):
                raise BadUsage(f"tool_call_f1(): arguments of {item['name']!r} must be a dict")
            out.append((item["name"], None if arguments is None else dict(arguments)))
        else:
            raise BadUsage(f"tool_call_f1(): {_shown(item)} is neither a tool name nor a "
                           "{'name', 'arguments'}")
    return out


class ToolCallF1(Check):
    """``tool_call_f1``: a score, not a yes or no (passes at 0.5 or more)."""

    def __init__(self, expected: list[tuple[str, Any]], name: str) -> None:
        super().__init__(name, lambda row: (False, ""))
        self.expected = expected

    def __call__(self, row: GradedRow) -> Grade:
        left = list(self.expected)
        matched = 0
        for call in row.tool_calls:  # each call made matches at most one expected call
            for index, (name, arguments) in enumerate(left):
                if call.get("name") == name and (
                        arguments is None or dict(call.get("arguments") or {}) == arguments):
                    matched += 1
                    del left[index]
                    break
        made, wanted = len(row.tool_calls), len(self.expected)
        if made == wanted == 0:
            score = 1.0
        elif made == 0 or wanted == 0 or matched == 0:
            score = 0.0
        else:
            precision, recall = matched / made, matched / wanted
            score = 2 * precision * recall / (precision + recall)
        return Grade(self.__name__, score >= 0.5, score,
                     f"{matched} of {made} calls made expected, {matched} of {wanted} "
                     f"expected made: F1 {score:.2f}")


def tool_call_f1(expected: Sequence[Any]) -> Check:
    """A score: the F1 of the multiset of tool calls made against ``expected`` (tool names, or
    ``{"name", "arguments"}`` whose arguments must equal the call's, as given); 0 when one
    side is empty and the other not, 1 when both are. Passes at 0.5 or more, as numbers do.

    >>> tool_call_f1(["search", "search", "answer"]).__name__
    "tool_call_f1(['search', 'search', 'answer'])"
    """
    checked = _expected_calls(expected)
    return ToolCallF1(checked, f"tool_call_f1({_shown(list(expected))})")
