"""The cases of ``agent.evaluate``: strings, dicts or a pandas DataFrame, checked and made into
``Case`` values before anything is sent.

A case is a string (the user message), or a dict with ``input`` (a string, or a list of
content parts), an optional ``expected`` (anything a grader reads), and other keys of its own,
which fill ``{name}`` fields in the input and reach graders as ``row.vars``::

    cases = ["2 + 2?", {"input": "Capital of {country}?", "expected": "Paris",
                        "country": "France"}]

A case may give ``turns`` (a list of user messages, each sent in order to the same fork) or
``user`` (a ``SimulatedUser``) instead of ``input``: a conversation (``conversation``).
``tags`` (a list of strings) group the cases in ``summary(by="tag")``.

A DataFrame gives one case per row, its columns as the keys (``input`` required). A ``{name}``
the case does not define is a ``BadUsage`` naming the case; ``{{`` and ``}}`` are braces.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fragola_nb.base.checks import check_content
from fragola_nb.base.errors import BadUsage, exception_text

__all__ = ["Case", "check_cases"]


@dataclass(frozen=True)
class Case:
    """One case, checked: ``input`` is the message sent (its ``{name}`` fields filled),
    ``template`` the input as given, ``key`` what a baseline is aligned by (the input sent,
    as JSON text)."""

    index: int
    input: str | list[dict[str, Any]]
    template: str | list[dict[str, Any]]
    expected: Any = None
    vars: Mapping[str, Any] = field(default_factory=dict)
    turns: tuple[Any, ...] = ()
    """A conversation's user messages (filled), else ``(input,)``."""
    user: Any = None
    """A ``SimulatedUser``, or None."""
    tags: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        if self.user is not None:
            return json.dumps({"user": self.user.goal}, ensure_ascii=False)
        shown = self.input if len(self.turns) <= 1 else {"turns": list(self.turns)}
        return json.dumps(shown, ensure_ascii=False, sort_keys=True)


def check_cases(cases: Any) -> list[Case]:
    """``cases`` as ``Case`` values, in order; a ``BadUsage`` naming the first bad one."""
    records = _records(cases)
    checked = [_case(index, record) for index, record in enumerate(records)]
    if not checked:
        raise BadUsage("cases is empty: give at least one case")
    return checked


def _records(cases: Any) -> list[Any]:
    to_dict = getattr(cases, "to_dict", None)
    if callable(to_dict) and hasattr(cases, "columns"):  # a pandas DataFrame
        if "input" not in cases.columns:
            raise BadUsage("a DataFrame of cases needs an 'input' column, got columns "
                           f"{', '.join(map(repr, map(str, cases.columns)))}")
        return [{str(k): _plain(v) for k, v in row.items()} for row in to_dict("records")]
    if isinstance(cases, (str, bytes, Mapping)) or not isinstance(cases, Iterable):
        raise BadUsage("cases must be a list of cases (strings or dicts with 'input') or a "
                       f"pandas DataFrame, got a {type(cases).__name__}")
    return list(cases)


def _plain(value: Any) -> Any:
    """A DataFrame cell as a plain value: numpy scalars as Python numbers, NaN as None."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (str, bytes)):
        try:
            value = item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, float) and value != value:  # NaN: a cell left empty
        return None
    return value


def _case(index: int, record: Any) -> Case:
    where = f"case {index}"
    if isinstance(record, str):
        return Case(index, check_content(record), record, turns=(record,))
    if not isinstance(record, Mapping):
        raise BadUsage(f"{where}: a case is a string or a dict with 'input' (or 'turns', "
                       f"'user'), got a "
                       f"{type(record).__name__}")
    given = [key for key in ("input", "turns", "user") if key in record]
    if not given:
        raise BadUsage(f"{where}: a dict case needs an 'input' key (or 'turns', 'user'), got "
                       f"keys {', '.join(map(repr, record)) or 'none'}")
    if len(given) > 1:
        raise BadUsage(f"{where}: a dict case gives one of 'input', 'turns' and 'user', not "
                       f"{' and '.join(map(repr, given))}")
    names = [name for name in record if not isinstance(name, str)]
    if names:
        raise BadUsage(f"{where}: keys must be strings, got {names[0]!r}")
    variables = {k: v for k, v in record.items() if k not in ("input", "expected", "turns",
                                                                "user", "tags")}
    tags = _tags(record.get("tags"), where)
    if given[0] == "user":
        return _user_case(index, record, variables, tags)
    templates = [record["input"]] if given[0] == "input" else _turn_list(record["turns"], where)
    try:
        sent = []
        for template in templates:
            check_content(template)
            sent.append(_filled(template, variables))
    except BadUsage as exc:
        raise BadUsage(f"{where}: {exc}") from None
    return Case(index, sent[0], templates[0], record.get("expected"), variables, tuple(sent),
                tags=tags)


def _turn_list(turns: Any, where: str) -> list[Any]:
    if isinstance(turns, (str, bytes, Mapping)) or not isinstance(turns, Iterable):
        raise BadUsage(f"{where}: 'turns' is a list of user messages, not a "
                       f"{type(turns).__name__}")
    listed = list(turns)
    if not listed:
        raise BadUsage(f"{where}: 'turns' is empty: give at least one user message")
    return listed


def _user_case(index: int, record: Mapping[str, Any], variables: dict[str, Any],
               tags: tuple[str, ...]) -> Case:
    from fragola_nb.experiments.simuser import SimulatedUser

    user = record["user"]
    if not isinstance(user, SimulatedUser):
        raise BadUsage(f"case {index}: 'user' is a SimulatedUser, not a {type(user).__name__}")
    return Case(index, user.goal, user.goal, record.get("expected"), variables, (), user,
                tags)


def _tags(tags: Any, where: str) -> tuple[str, ...]:
    """A case's ``tags``: a list of strings (a string alone is one tag), in order, once each."""
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = [tags]
    if isinstance(tags, Mapping) or not isinstance(tags, Iterable):
        raise BadUsage(f"{where}: tags must be a list of strings, got {tags!r:.80}")
    listed = list(tags)
    if not all(isinstance(tag, str) for tag in listed):
        raise BadUsage(f"{where}: tags must be a list of strings, got {listed!r:.80}")
    return tuple(dict.fromkeys(str(tag) for tag in listed))


def _filled(template: Any, variables: Mapping[str, Any]) -> Any:
    if isinstance(template, str):
        return _fill(template, variables)
    return [{**part, "text": _fill(part["text"], variables)}
            if part.get("type") == "text" and isinstance(part.get("text"), str) else part
            for part in template]


def _fill(text: str, variables: Mapping[str, Any]) -> str:
    if "{" not in text and "}" not in text:
        return text
    out = []
    try:
        for literal, name, spec, conversion in string.Formatter().parse(text):
            out.append(literal)
            if name is None:
                continue
            if name not in variables:
                known = ", ".join(map(repr, variables)) or "none"
                raise BadUsage(f"the input names {{{name}}}, which the case does not define "
                               f"(its keys: {known}); write {{{{ and }}}} for a brace")
            out.append(_formatted(name, variables[name], spec, conversion))
    except ValueError as exc:  # an unmatched brace
        raise BadUsage(f"the input's {{name}} fields cannot be filled: {exc} (write {{{{ and "
                       "}} for a brace)") from None
    return "".join(out)


def _formatted(name: str, value: Any, spec: str | None, conversion: str | None) -> str:
    """``{name!conversion:spec}`` filled with ``value``; a ``BadUsage`` naming the field when
    the value cannot take that format (``{n:>5}`` of a list, ``{n:.2f}`` of a string) or its
    ``__format__``, ``str`` or ``repr`` raises."""
    field = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec
                                                                      else "") + "}"
    converters: dict[str, Callable[[Any], str]] = {"r": repr, "s": str, "a": ascii}
    convert = converters.get(conversion or "s")
    if convert is None:
        raise BadUsage(f"the input's field {field} has the conversion !{conversion}: write "
                       "!r, !s or !a")
    try:
        return format(convert(value) if conversion else value, spec or "")
    except Exception as exc:  # a bad spec (ValueError), a type that takes none (TypeError)
        raise BadUsage(f"the input's field {field} cannot be filled with the case's "
                       f"{type(value).__name__} value: {exception_text(exc)}") from None
