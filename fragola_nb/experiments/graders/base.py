"""Graders: checks of one answer, for ``agent.evaluate`` (see ``fragola_nb.graders``).

A grader is any callable ``(row) -> Grade | bool | float | None``, sync or async, given a
``GradedRow``. ``grade(row, graders)`` runs them and reads what each returns:

- a ``Grade``: itself (its ``name`` filled in when empty), made sane when it was made (see
  ``Grade``: an odd ``passed`` or ``score`` is a failed grade saying what it was);
- ``True``/``False`` (numpy's too): a grade that passed or failed;
- a number: a score from 0 to 1, which passes when it is at least 0.5 (NaN, an infinity or a
  number outside 0..1 is a failed grade saying so);
- ``None``: no grade (the grader does not apply to this row; it is not counted);
- an exception: a failed grade whose reason is the error in one line, credentials redacted.

Every grade's ``score`` is on one scale, 0 to 1 (a judge keeps its own in ``raw_score``).

>>> short = lambda row: len(row.answer) < 80
>>> grades = await grade(row, [contains("Paris"), short])     # doctest: +SKIP
>>> [(g.name, g.passed) for g in grades]                       # doctest: +SKIP
[("contains('Paris')", True), ('<lambda>', True)]
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import numbers
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage, exception_text
from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import text_of
from fragola_nb.experiments.graders.values import is_bool, normal_fields, number, shown

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.usage import Usage

__all__ = ["PASS_SCORE", "Grade", "GradedRow", "Grader", "check_graders", "grade",
           "grade_each", "grader_name", "one_line", "tool_calls_of"]

PASS_SCORE = 0.5
"""A grader that returns a number passes when the number is at least this (a 0-1 score)."""


@dataclass(frozen=True)
class Grade:
    """What one grader said of one row: ``passed``, an optional ``score`` (0 to 1) and a
    short ``reason``.

    ``usage`` is the grader's own model calls (a ``judge``'s), None for the others: they are
    counted apart from the calls being graded. ``raw_score`` and ``scale``: a score given on
    a scale of its own (a judge's 4 on ``(1, 5)``); ``score`` is then that score on 0 to 1,
    ``(raw_score - low) / (high - low)``.

    A grade is made sane once, when it is made (``fragola_nb.experiments.graders.values``): a
    numpy bool or 1/0 as ``passed`` is a bool; ``passed`` that is not (None, ``"no"``), a
    score that is NaN, infinite or not from 0 to 1, makes a failed grade whose reason says
    what was given.

    >>> Grade("short", passed=False, reason="answer has 412 words")
    Grade(name='short', passed=False, score=None, reason='answer has 412 words')
    >>> Grade("judge", True, raw_score=4, scale=(1, 5))
    Grade(name='judge', passed=True, score=0.75, reason='', raw_score=4.0, scale=(1, 5))
    """

    name: str
    passed: bool
    score: float | None = None
    reason: str = ""
    usage: Usage | None = field(default=None, compare=False, repr=False)
    raw_score: float | None = None
    scale: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        fields = normal_fields(self.name, self.passed, self.score, self.reason, self.usage,
                               self.raw_score, self.scale)
        for key, value in fields.items():
            object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        raw = (f", raw_score={self.raw_score!r}, scale={self.scale!r}"
               if self.raw_score is not None or self.scale is not None else "")
        return (f"Grade(name={self.name!r}, passed={self.passed!r}, score={self.score!r}, "
                f"reason={self.reason!r}{raw})")


@dataclass(frozen=True)
class GradedRow:
    """One answer to grade, as a grader receives it.

    ``input``: the user message sent (after ``{name}`` substitution); ``expected``: the case's
    expected answer (None without one); ``answer``: the last assistant text (None when the run
    failed); ``fork``: the agent the case ran on; ``usage`` and ``seconds``: its calls and
    time; ``tool_calls``: ``{"name": ..., "arguments": {...}, "result": ...}`` for each tool
    call the fork made itself, in order (``tool_calls_of``); ``model_calls``: the model
    requests the run made; ``answers``: each turn's reply (one for a single message, one per
    turn of a conversation); ``ended``: why a conversation ended (None for one message);
    ``vars``: the case's other keys; ``variant`` and ``repeat``: which variant and which
    repetition. ``row["answer"]`` reads a field too.

    >>> def short(row: GradedRow) -> bool:
    ...     return row.answer is not None and len(row.answer.split()) <= 50
    """

    input: str | list[dict[str, Any]]
    expected: Any
    answer: str | None
    fork: Agent | None = field(repr=False, compare=False)
    usage: Usage = field(repr=False)
    seconds: float | None
    tool_calls: tuple[dict[str, Any], ...] = ()
    vars: Mapping[str, Any] = field(default_factory=dict)
    variant: str = "base"
    repeat: int = 0
    model_calls: int = 0
    answers: tuple[str | None, ...] = ()
    ended: str | None = None

    def __getitem__(self, name: str) -> Any:
        if name not in _FIELDS:
            raise KeyError(name)
        return getattr(self, name)


_FIELDS = frozenset(f.name for f in dataclasses.fields(GradedRow))

Grader = Callable[[GradedRow], Grade | bool | float | Awaitable[Any] | None]
"""A callable given a ``GradedRow``; it returns (or its awaitable gives) a ``Grade``, a
``bool``, a number or ``None``."""


def tool_calls_of(fork: Agent) -> tuple[dict[str, Any], ...]:
    """The tool calls ``fork`` made itself (in its messages since its fork point), in order,
    as ``{"name": str, "arguments": dict, "result": str | None}``; arguments that are not a
    JSON object read as ``{}``; ``result`` is the text of the tool's message (None while the
    call has none, e.g. waiting for approval).

    >>> tool_calls_of(row_fork)                    # doctest: +SKIP
    ({'name': 'lookup', 'arguments': {'city': 'Oslo'}, 'result': 'sunny'},)
    """
    own = fork.messages_since(fork.fork_point)
    results = {str(m.get("tool_call_id")): text_of(m.get("content"))
               for m in own if m.get("role") == "tool"}
    calls = []
    for message in own:
        for call in message.get("tool_calls") or () if message.get("role") == "assistant" else ():
            function = call.get("function") or {} if isinstance(call, dict) else {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except (TypeError, ValueError, RecursionError):
                arguments = {}
            calls.append({"name": str(function.get("name", "")),
                          "arguments": arguments if isinstance(arguments, dict) else {},
                          "result": results.get(str(call.get("id")))
                          if isinstance(call, dict) else None})
    return tuple(calls)


def grader_name(grader: Any) -> str:
    """A grader's name: a built-in's call as written (``contains('Paris')``), a judge's
    ``judge``, a function's ``__name__``, else its type's name.

    >>> grader_name(len)
    'len'
    """
    name = getattr(grader, "__name__", None)
    return name if isinstance(name, str) and name else type(grader).__name__


def check_graders(graders: Any) -> tuple[Grader, ...]:
    """One grader or an iterable of them, as a tuple; a ``BadUsage`` for one that is not
    callable (before anything is sent).

    >>> check_graders(len)
    (<built-in function len>,)
    """
    if graders is None:
        return ()
    items = (graders,) if callable(graders) else graders
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise BadUsage(f"graders must be a callable or a list of callables, not "
                       f"{type(graders).__name__}")
    checked = tuple(items)
    for item in checked:
        if not callable(item):
            raise BadUsage(f"a grader must be a callable (row) -> Grade | bool | float | None, "
                           f"not {type(item).__name__}: {item!r:.60}")
    return checked


async def grade(row: GradedRow, graders: Sequence[Grader]) -> tuple[Grade, ...]:
    """Run each grader on ``row``, the async ones concurrently, and return their grades in
    the graders' order (a grader that returned None gives none). Never raises, but on
    cancellation: a grader that raises gives a failed grade saying why."""
    return tuple(result for result in await grade_each(row, graders) if result is not None)


async def grade_each(row: GradedRow, graders: Sequence[Grader],
                     names: Sequence[str] | None = None) -> list[Grade | None]:
    """What each grader said of ``row``, in order (None where it gave no grade), under
    ``names`` when given. A sync grader is called in place, the awaitables are awaited
    together: a thousand rows of plain checks make no task each."""
    rename = names is not None
    names = names if names is not None else [grader_name(grader) for grader in graders]
    results: list[Grade | None] = []
    waiting: list[tuple[int, str, Any]] = []
    for index, (grader, name) in enumerate(zip(graders, names, strict=True)):
        try:
            said = grader(row)
            if inspect.isawaitable(said):
                waiting.append((index, name, said))
                results.append(None)
                continue
            results.append(_named(_as_grade(name, said), name, rename))
        except Exception as exc:  # a grader's bug is a failed grade, never a lost row
            results.append(Grade(name, False, reason=one_line(exc, _credentials(row))))
    if waiting:
        awaited = await asyncio.gather(*(_awaited(name, said, row, rename)
                                         for _, name, said in waiting))
        for (index, _, _), result in zip(waiting, awaited, strict=True):
            results[index] = result
    return results


async def _awaited(name: str, said: Any, row: GradedRow, rename: bool) -> Grade | None:
    try:
        return _named(_as_grade(name, await said), name, rename)
    except Exception as exc:
        return Grade(name, False, reason=one_line(exc, _credentials(row)))


def _named(grade: Grade | None, name: str, rename: bool) -> Grade | None:
    """A grade under the name asked for (``grade_each``'s unique ``names``); without, a
    callable's own ``Grade`` keeps the name it gave."""
    if grade is None or grade.name == name or not rename:
        return grade
    return dataclasses.replace(grade, name=name)


def _as_grade(name: str, said: Any) -> Grade | None:
    """What a grader returned as its grade (a ``Grade`` is made sane when it is made)."""
    if said is None:
        return None
    if isinstance(said, Grade):
        return said if said.name else dataclasses.replace(said, name=name)
    if is_bool(said):  # numpy's bool too
        return Grade(name, bool(said))
    if isinstance(said, numbers.Real):
        score = number(said)
        if score is None or not 0 <= score <= 1:
            return Grade(name, False, reason=f"the grader returned {shown(said)}, not a score "
                                             "from 0 to 1")
        return Grade(name, score >= PASS_SCORE, score)
    return Grade(name, False, reason=f"the grader returned {type(said).__name__}, not a Grade, "
                                     f"a bool, a number or None")


def one_line(exc: BaseException, known: Iterable[object] = ()) -> str:
    """``"ValueError: bad row"``: an error as one short line, credentials redacted."""
    text = " ".join(redact_text(exception_text(exc), known).split())
    return text if len(text) <= 300 else text[:299] + "…"


def _credentials(row: GradedRow) -> set[str]:
    """The credentials the row's agent sends: hidden in a grader's error by value too."""
    if row.fork is None:
        return set()
    try:
        return set(row.fork.fragola.credentials(row.fork.options.model_settings))
    except Exception:  # a reason without them is still redacted by shape
        return set()
