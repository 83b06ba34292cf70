"""The built-in graders: ``contains``, ``regex``, ``equals``, ``json_schema``, ``tool_called``,
``max_tokens``, ``max_cost``, ``max_seconds`` (``judge`` is in ``graders/judge.py``).

Each is made with its settings, checked at once (a ``BadUsage`` before anything is sent), and
named as it was written, ``contains('Paris')``: the name is the column of an evaluation's
table. Each grade says why in a short ``reason``. A row without an answer (its run failed)
fails the answer checks with the reason ``no answer``.

>>> contains("Paris").__name__
"contains('Paris')"
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Callable
from typing import Any

import pydantic

from fragola_nb.base.errors import BadUsage, FragolaError
from fragola_nb.base.redact import redact_text
from fragola_nb.core.schemas import json_validator, load_json_schema
from fragola_nb.experiments.graders.base import Grade, GradedRow

__all__ = ["Check", "contains", "equals", "json_schema", "max_cost", "max_seconds",
           "max_tokens", "regex", "tool_called"]

_FENCE = re.compile(r"^\s*```[\w-]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


class Check:
    """A built-in grader: a name and a rule from a row to a ``Grade``."""

    def __init__(self, name: str, rule: Callable[[GradedRow], tuple[bool, str]]) -> None:
        self.__name__ = name
        self._rule = rule

    def __call__(self, row: GradedRow) -> Grade:
        passed, reason = self._rule(row)
        return Grade(self.__name__, passed, reason=reason)

    def __repr__(self) -> str:
        return self.__name__


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _limit(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
            math.isfinite(float(value)) and float(value) >= 0):
        raise BadUsage(f"{what} takes a number >= 0, not {_shown(value)}")
    return float(value)


def contains(text: str, case_sensitive: bool = False) -> Check:
    """Passes when the answer contains ``text`` (in any letter case unless ``case_sensitive``).

    >>> contains("Paris").__name__
    "contains('Paris')"
    """
    if not isinstance(text, str) or not text:
        raise BadUsage(f"contains() takes a non-empty string, not {_shown(text)}")

    def rule(row: GradedRow) -> tuple[bool, str]:
        if row.answer is None:
            return False, "no answer"
        found = text in row.answer if case_sensitive else text.casefold() in row.answer.casefold()
        return found, f"answer {'contains' if found else 'does not contain'} {text!r}"

    suffix = ", case_sensitive=True" if case_sensitive else ""
    return Check(f"contains({text!r}{suffix})", rule)


def regex(pattern: str | re.Pattern[str]) -> Check:
    """Passes when ``pattern`` (a string or a compiled pattern) matches somewhere in the answer
    (``re.search``; anchor it with ``^...$`` for the whole answer).

    >>> regex("[0-9]{4}").__name__
    "regex('[0-9]{4}')"
    """
    try:
        compiled = re.compile(pattern)
    except (re.error, TypeError) as exc:
        raise BadUsage(f"regex() takes a regular expression: {exc}") from None

    def rule(row: GradedRow) -> tuple[bool, str]:
        if row.answer is None:
            return False, "no answer"
        match = compiled.search(row.answer)
        if match is None:
            return False, f"answer does not match {compiled.pattern!r}"
        return True, f"answer matches {compiled.pattern!r} at {_shown(match.group())}"

    return Check(f"regex({compiled.pattern!r})", rule)


def equals(value: Any) -> Check:
    """Passes when the answer, stripped of surrounding white space, equals ``value``; a value
    that is not a string is compared with the answer read as JSON (``equals(4)`` passes
    ``"4"``, ``equals({"ok": True})`` passes ``'{"ok": true}'``).

    >>> equals("Paris").__name__
    "equals('Paris')"
    """

    def rule(row: GradedRow) -> tuple[bool, str]:
        if row.answer is None:
            return False, "no answer"
        got: Any = row.answer.strip()
        if not isinstance(value, str):
            try:
                got = json.loads(_unfenced(got))
            except (ValueError, RecursionError):
                return False, f"answer is not JSON, so not {_shown(value)}"
        same = got == (value.strip() if isinstance(value, str) else value)
        return same, f"answer {'equals' if same else 'is not'} {_shown(value)}"

    return Check(f"equals({_shown(value)})", rule)


def json_schema(schema: Any) -> Check:
    """Passes when the answer is JSON that fits ``schema``: a pydantic model, or a JSON Schema
    (a dict, or its text). An answer in a Markdown code fence is read inside the fence.

    >>> json_schema({"type": "object", "required": ["city"]}).__name__
    'json_schema(object)'
    """
    validate: Callable[[Any], str | None]
    if isinstance(schema, type) and issubclass(schema, pydantic.BaseModel):
        model, label = schema, schema.__name__

        def validate(document: Any) -> str | None:
            try:
                model.model_validate(document)
            except pydantic.ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(map(str, first["loc"])) or "(root)"
                return f"{where}: {first['msg']}"
            return None
    else:
        try:
            raw = load_json_schema(schema)
        except (FragolaError, TypeError) as exc:
            raise BadUsage(f"json_schema() takes a pydantic model or a JSON Schema: {exc}"
                           ) from None
        validator, label = json_validator(raw), str(raw.get("title") or raw.get("type") or "schema")

        def validate(document: Any) -> str | None:
            error = next(iter(validator.iter_errors(document)), None)
            if error is None:
                return None
            return f"{'.'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"

    def rule(row: GradedRow) -> tuple[bool, str]:
        if row.answer is None:
            return False, "no answer"
        try:
            document = json.loads(_unfenced(row.answer))
        except (ValueError, RecursionError) as exc:
            return False, f"answer is not JSON ({type(exc).__name__}: {str(exc)[:80]})"
        problem = validate(document)
        if problem is not None:
            return False, f"answer does not fit {label}: {redact_text(problem)[:200]}"
        return True, f"answer fits {label}"

    return Check(f"json_schema({label})", rule)


def tool_called(name: str, **arguments: Any) -> Check:
    """Passes when the fork called the tool ``name``; with ``arguments``, in a call whose
    arguments hold each of them with that value (other arguments may be there too).

    >>> tool_called("lookup", city="Oslo").__name__
    "tool_called('lookup', city='Oslo')"
    """
    if not isinstance(name, str) or not name:
        raise BadUsage(f"tool_called() takes a tool name, not {_shown(name)}")
    wanted = ", ".join(f"{key}={_shown(value)}" for key, value in arguments.items())

    def rule(row: GradedRow) -> tuple[bool, str]:
        calls = [call for call in row.tool_calls if call.get("name") == name]
        if not calls:
            made = sorted({str(call.get("name")) for call in row.tool_calls})
            return False, f"{name!r} was not called" + (f" (called: {', '.join(made)})"
                                                         if made else " (no tool call)")
        for call in calls:
            given = call.get("arguments") or {}
            if all(key in given and given[key] == value for key, value in arguments.items()):
                return True, f"{name!r} was called" + (f" with {wanted}" if wanted else "")
        return False, (f"{name!r} was called, but not with {wanted} "
                       f"(arguments: {_shown(calls[-1].get('arguments'))})")

    return Check(f"tool_called({name!r}{', ' + wanted if wanted else ''})", rule)


def max_tokens(n: int) -> Check:
    """Passes when the graded calls used at most ``n`` tokens (``usage.total_tokens``); fails
    when a call's server reported no usage (the count is unknown).

    >>> max_tokens(2000).__name__
    'max_tokens(2000)'
    """
    limit = _limit(n, "max_tokens()")

    def rule(row: GradedRow) -> tuple[bool, str]:
        if row.usage.unreported:
            return False, f"tokens unknown ({row.usage.unreported} calls without usage)"
        used = row.usage.total_tokens
        return used <= limit, f"{used:,} tokens {'<=' if used <= limit else '>'} {n:,}"

    return Check(f"max_tokens({n!r})", rule)


def max_cost(usd: float) -> Check:
    """Passes when the graded calls cost at most ``usd`` dollars; fails when the cost is
    unknown (a model without a price, a call without usage).

    >>> max_cost(0.01).__name__
    'max_cost(0.01)'
    """
    limit = _limit(usd, "max_cost()")

    def rule(row: GradedRow) -> tuple[bool, str]:
        cost = row.usage.cost
        if cost is None:
            return False, "cost unknown (no price for the model, or a call without usage)"
        return cost <= limit, f"${cost:.6f} {'<=' if cost <= limit else '>'} ${limit:g}"

    return Check(f"max_cost({usd!r})", rule)


def max_seconds(s: float) -> Check:
    """Passes when the case took at most ``s`` seconds (``row.seconds``).

    >>> max_seconds(30).__name__
    'max_seconds(30)'
    """
    limit = _limit(s, "max_seconds()")

    def rule(row: GradedRow) -> tuple[bool, str]:
        if row.seconds is None:
            return False, "time unknown"
        fast = row.seconds <= limit
        return fast, f"{row.seconds:.2f} s {'<=' if fast else '>'} {limit:g} s"

    return Check(f"max_seconds({s!r})", rule)


def _unfenced(text: str) -> str:
    """The text inside a Markdown code fence (```json ... ```), or the text itself."""
    match = _FENCE.match(text)
    return match.group(1) if match else text
