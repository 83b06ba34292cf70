"""Graders for ``agent.evaluate``: checks of one answer, each giving a ``Grade``.

>>> from fragola_nb.graders import contains, judge, max_tokens, tool_called
>>> graders = [contains("Paris"), tool_called("lookup", city="Paris"), max_tokens(2000),
...            judge('The answer names "Paris" as the capital.')]

Any callable ``(row) -> Grade | bool | float | None`` (sync or async) is a grader too; it is
given a ``GradedRow``. A number passes when it is at least 0.5; None gives no grade; a grader
that raises gives a failed grade whose reason is the error in one line. See
``fragola_nb.experiments.graders``: ``base`` (the rules), ``builtins`` (the built-ins),
``trajectory`` (how the agent got there: ``tool_sequence``, ``tool_args``, ``never_called``,
``max_tool_calls``, ``max_model_calls``, ``tool_call_f1``) and ``judge``; and
``fragola_nb.experiments.evaluate.human`` (``human()``: a person's labels as grades).
"""

from __future__ import annotations

import types

from fragola_nb.experiments.evaluate.human import human
from fragola_nb.experiments.graders.base import (
    Grade,
    GradedRow,
    Grader,
    check_graders,
    grade,
    grader_name,
    tool_calls_of,
)
from fragola_nb.experiments.graders.builtins import (
    contains,
    equals,
    json_schema,
    max_cost,
    max_seconds,
    max_tokens,
    regex,
    tool_called,
)
from fragola_nb.experiments.graders.judge import judge
from fragola_nb.experiments.graders.trajectory import (
    max_model_calls,
    max_tool_calls,
    never_called,
    tool_args,
    tool_call_f1,
    tool_sequence,
)

__all__ = [
    "Grade",
    "GradedRow",
    "Grader",
    "check_graders",
    "contains",
    "equals",
    "grade",
    "grader_name",
    "human",
    "json_schema",
    "judge",
    "max_cost",
    "max_model_calls",
    "max_seconds",
    "max_tokens",
    "max_tool_calls",
    "never_called",
    "regex",
    "tool_args",
    "tool_call_f1",
    "tool_called",
    "tool_calls_of",
    "tool_sequence",
]


# Each exported class and function says this face as its module (what ``help``, reprs and
# tracebacks print; pickle and Ray find it here by name). ``Grade`` and ``GradedRow`` are
# ``fragola_nb``'s too, and say the top face.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, (type, types.FunctionType)):
        _value.__module__ = "fragola_nb" if _name in ("Grade", "GradedRow") else __name__
del _name, _value
