"""Grading a finished run, shared by ``evaluate``, ``batch`` and ``compare``: the graders'
unique names, a ``GradedRow`` from a fork, the grades under those names, and a row's
``passed`` and ``score``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fragola_nb.core.usage import Usage
from fragola_nb.experiments.graders.base import (
    Grade,
    GradedRow,
    grade_each,
    grader_name,
    tool_calls_of,
)

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["graded_row", "grades_of", "passed_and_score", "unique_names"]


def unique_names(graders: Sequence[Any]) -> list[str]:
    """The graders' names in order, made unique: a second ``contains('a')`` is
    ``contains('a')#2``."""
    seen: dict[str, int] = {}
    out = []
    for name in map(grader_name, graders):
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def graded_row(input: Any, answer: str | None, fork: Agent | None, usage: Usage | None,
               seconds: float | None, *, expected: Any = None,
               vars: Mapping[str, Any] | None = None, variant: str = "base",
               repeat: int = 0, tool_calls: Sequence[dict[str, Any]] | None = None,
               answers: Sequence[str | None] | None = None,
               ended: str | None = None) -> GradedRow:
    """What a grader is given; ``tool_calls`` default to the fork's own (a row read back
    from a file gives those it kept), ``answers`` to ``(answer,)``."""
    usage = usage or Usage()
    if tool_calls is None:
        tool_calls = () if fork is None else tool_calls_of(fork)
    return GradedRow(input=input, expected=expected, answer=answer, fork=fork,
                     usage=usage, seconds=seconds, tool_calls=tuple(tool_calls),
                     vars=vars or {}, variant=variant, repeat=repeat,
                     model_calls=usage.requests,
                     answers=tuple(answers) if answers is not None else (answer,),
                     ended=ended)


async def grades_of(row: GradedRow, graders: Sequence[Any], names: Sequence[str]
                    ) -> tuple[Grade, ...]:
    """Each grader's grade under its unique name, in order (one that gives None gives none);
    the async ones (judges wait on a model) run concurrently."""
    return tuple(g for g in await grade_each(row, graders, names) if g is not None)


def passed_and_score(grades: Sequence[Grade]) -> tuple[bool | None, float | None]:
    """Every grade passed; the mean score, a grade without one counting 1 when it passed and
    0 when not. (None, None) without grades."""
    if not grades:
        return None, None
    values = [g.score if g.score is not None else float(g.passed) for g in grades]
    return all(g.passed for g in grades), sum(values) / len(values)
