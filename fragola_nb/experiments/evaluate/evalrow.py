"""One row of an ``Evaluation``: a case run on a variant, once (one repeat), and graded.

A row is plain data: ``EvalRow.record()`` is what ``Evaluation.save`` writes and a resume
file holds, and ``EvalRow.from_record`` reads it back (``fork`` None, ``resumed`` True).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from fragola_nb.base.redact import redact_text
from fragola_nb.core.usage import ModelPrice, Usage, call_read_back
from fragola_nb.experiments.evaluate.labels import Label, label_read_back
from fragola_nb.experiments.graders.apply import passed_and_score
from fragola_nb.experiments.graders.base import Grade

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["EvalRow", "RowStatus", "flaky_cells", "grade_read_back", "grade_record"]

RowStatus = Literal["queued", "running", "done", "failed", "stopped", "not run"]
"""``queued``/``running`` while the evaluation runs; then ``done`` (a final answer),
``failed`` (an error: ``error`` says which), ``stopped`` (``stop_sync()``, an interrupt) or
``not run`` (stopped, or the budget spent, before it started: ``error`` says which)."""


@dataclass(frozen=True)
class EvalRow:
    """One (case, variant, repeat) of ``agent.evaluate`` and its grades.

    ``passed``: every grade passed (with no graders: the run gave an answer); None while it
    has not run. ``score``: the mean of the grades' scores, a grade without one counting 1
    when it passed and 0 when not (None without grades). ``usage`` is the graded fork's own
    calls; ``judge_usage`` the calls of its ``judge`` graders, counted apart. ``cached``: at
    least one of its model calls was answered from a cache (``Fragola.cached``). ``tags``:
    its case's; ``label``: a person's ``Label`` (``Evaluation.label``), else None.

    ``tool_calls``: the fork's own tool calls in order, ``{"name", "arguments", "result"}``;
    ``model_calls``: the model requests it made. A conversation (a case's ``turns`` or
    ``user``) gives ``answers`` (each turn's reply; ``answer`` is the last), ``ended`` (why
    it ended: ``"all turns"``, ``"user done"``, ``"max turns"``, ``"waiting"`` or
    ``"failed"``) and, with a ``SimulatedUser``, ``user_usage`` (its calls, counted apart).
    """

    case: int
    input: str | list[dict[str, Any]]
    variant: str
    repeat: int = 0
    expected: Any = None
    vars: Mapping[str, Any] = field(default_factory=dict, repr=False)
    status: RowStatus = "queued"
    answer: str | None = None
    error: str | None = None
    grades: tuple[Grade, ...] = ()
    seconds: float | None = None
    usage: Usage | None = field(default=None, repr=False)
    judge_usage: Usage | None = field(default=None, repr=False)
    fork: Agent | None = field(default=None, repr=False, compare=False)
    resumed: bool = False
    tool_calls: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    answers: tuple[str | None, ...] = field(default=(), repr=False)
    ended: str | None = None
    user_usage: Usage | None = field(default=None, repr=False)
    turns: tuple[Any, ...] = field(default=(), repr=False)
    """The user messages of a conversation, as sent (a ``turns`` case's, or a simulated
    user's)."""
    tags: tuple[str, ...] = ()
    label: Label | None = None
    """A person's verdict (``Evaluation.label``), None when unlabelled."""

    def __repr__(self) -> str:
        """The dataclass's repr, every credential in it hidden (an answer, a grade's reason,
        a label's note may quote the key a server was sent)."""
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}"
                          for f in dataclasses.fields(self) if f.repr)
        return redact_text(f"EvalRow({shown})")

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")

    @property
    def passed(self) -> bool | None:
        if not self.finished:
            return None
        if self.grades:
            return all(grade.passed for grade in self.grades)
        return self.status == "done"

    @property
    def score(self) -> float | None:
        return passed_and_score(self.grades)[1] if self.finished else None

    @property
    def tokens(self) -> int | None:
        if self.usage is None or self.usage.unreported:
            return None
        return self.usage.total_tokens

    @property
    def cost(self) -> float | None:
        """What the graded calls cost (a cached call costs nothing), None when a model's
        price is unknown."""
        return None if self.usage is None else self.usage.cost

    @property
    def model_calls(self) -> int | None:
        """The model requests the run made (None before it ran)."""
        return None if self.usage is None else self.usage.requests

    @property
    def cached(self) -> bool:
        return self.usage is not None and any(getattr(call, "cached", False)
                                              for call in self.usage.calls)

    def grade(self, name: str) -> Grade | None:
        """The grade a grader named ``name`` gave this row, if any."""
        return next((grade for grade in self.grades if grade.name == name), None)

    def __getitem__(self, name: str) -> Any:
        if name.startswith("_") or not hasattr(self, name):
            raise KeyError(name)
        return getattr(self, name)

    def record(self) -> dict[str, Any]:
        """The row as JSON-ready data: no fork, no settings, no key."""
        def calls(usage: Usage | None) -> list[dict[str, Any]] | None:
            return None if usage is None else [dataclasses.asdict(c) for c in usage.calls]

        return {"case": self.case, "input": self.input, "variant": self.variant,
                "repeat": self.repeat, "expected": _jsonable(self.expected),
                "vars": {k: _jsonable(v) for k, v in self.vars.items()},
                "status": self.status, "passed": self.passed, "score": self.score,
                "answer": self.answer, "error": self.error,
                "grades": [grade_record(g) for g in self.grades],
                "tokens": self.tokens, "cost": self.cost, "cached": self.cached,
                "seconds": self.seconds, "usage": calls(self.usage),
                "judge_usage": calls(self.judge_usage),
                "tool_calls": [{"name": c.get("name"), "arguments": _jsonable(c.get("arguments")),
                                "result": _jsonable(c.get("result"))} for c in self.tool_calls],
                "model_calls": self.model_calls, "answers": list(self.answers),
                "ended": self.ended, "turns": _jsonable(list(self.turns)),
                "user_usage": calls(self.user_usage), "tags": list(self.tags),
                "label": None if self.label is None else {"passed": self.label.passed,
                                                           "note": self.label.note}}

    @classmethod
    def from_record(cls, data: Any, prices: Mapping[str, ModelPrice]) -> EvalRow:
        """A row read back from ``record()``'s data; ``ValueError`` when it is not one."""
        if not isinstance(data, Mapping):
            raise ValueError("a row is a JSON object")
        try:
            status = data["status"]
            if status not in ("done", "failed", "stopped", "not run"):
                raise ValueError(f"unknown status {status!r}")
            case, repeat = data["case"], data["repeat"]
            if type(case) is not int or type(repeat) is not int or case < 0 or repeat < 0:
                raise ValueError("case and repeat are whole numbers >= 0")
            if not isinstance(data["variant"], str):
                raise ValueError("variant is a string")
            for name in ("answer", "error"):
                if not isinstance(data.get(name), (str, type(None))):
                    raise ValueError(f"{name} is a string or null")
            tags = data.get("tags") or []
            if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
                raise ValueError("tags is a list of strings")
            seconds = data.get("seconds")
            if not isinstance(seconds, (int, float, type(None))) or isinstance(seconds, bool):
                raise ValueError("seconds is a number or null")
            return cls(case=case, input=data["input"], variant=data["variant"], repeat=repeat,
                       expected=data.get("expected"), vars=dict(data.get("vars") or {}),
                       status=status, answer=data.get("answer"), error=data.get("error"),
                       grades=tuple(grade_read_back(g) for g in data.get("grades") or ()),
                       seconds=seconds, usage=_usage(data.get("usage"), prices),
                       judge_usage=_usage(data.get("judge_usage"), prices), resumed=True,
                       tags=tuple(tags), label=label_read_back(data.get("label")),
                       **_conversation(data, prices))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"a field is missing or of the wrong type ({exc})") from None


def _conversation(data: Mapping[str, Any], prices: Mapping[str, ModelPrice]
                  ) -> dict[str, Any]:
    """The trajectory fields of a saved row (absent from files written before them)."""
    calls = data.get("tool_calls") or []
    answers = data.get("answers") or []
    if not isinstance(calls, list) or not all(
            isinstance(c, Mapping) and isinstance(c.get("name"), str)
            and isinstance(c.get("arguments") or {}, Mapping) for c in calls):
        raise ValueError("tool_calls is a list of {name, arguments, result}")
    if not isinstance(answers, list) or not all(isinstance(a, (str, type(None)))
                                                for a in answers):
        raise ValueError("answers is a list of strings or nulls")
    if not isinstance(data.get("ended"), (str, type(None))):
        raise ValueError("ended is a string or null")
    return {"tool_calls": tuple({"name": c["name"], "arguments": dict(c.get("arguments") or {}),
                                 "result": c.get("result")} for c in calls),
            "answers": tuple(answers), "ended": data.get("ended"),
            "turns": tuple(data.get("turns") or ()),
            "user_usage": _usage(data.get("user_usage"), prices)}
def grade_record(grade: Grade) -> dict[str, Any]:
    """A grade as a row's record holds it (``raw_score`` and ``scale`` when it has them)."""
    record = {"name": grade.name, "passed": grade.passed, "score": grade.score,
              "reason": grade.reason}
    if grade.raw_score is not None or grade.scale is not None:
        record.update(raw_score=grade.raw_score,
                      scale=None if grade.scale is None else list(grade.scale))
    return record


def grade_read_back(data: Any) -> Grade:
    """A grade read back from ``grade_record``'s data; ``ValueError`` when it is not one
    (what a grade made by a grader holds always is)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        raise ValueError("a grade is an object with a name")
    passed, score, reason = data.get("passed"), data.get("score"), data.get("reason", "")
    if not isinstance(passed, bool) or not isinstance(reason, str):
        raise ValueError("a grade's passed is true or false and its reason a string")
    raw, scale = data.get("raw_score"), data.get("scale")
    for value in (score, raw, *(scale if isinstance(scale, list) else ())):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            raise ValueError("a grade's score, raw_score and scale are numbers or null")
    if score is not None and not 0 <= score <= 1:
        raise ValueError("a grade's score is from 0 to 1")
    if scale is not None and not (isinstance(scale, list) and len(scale) == 2
                                  and None not in scale and scale[0] < scale[1]):
        raise ValueError("a grade's scale is [low, high], low below high")
    return Grade(data["name"], passed, score, reason, raw_score=raw,
                 scale=None if scale is None else (scale[0], scale[1]))


def _usage(calls: Any, prices: Mapping[str, ModelPrice]) -> Usage | None:
    if calls is None:
        return None
    if not isinstance(calls, list):
        raise ValueError("usage is a list of calls")
    return Usage(tuple(call_read_back(call) for call in calls), prices)


def _jsonable(value: Any) -> Any:
    """``value`` if JSON can hold it, else its text (an ``expected`` may be any object)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # NaN and infinities are not JSON: their text, as any other object
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    dump = getattr(value, "model_dump", None)  # a pydantic model
    if callable(dump):
        try:
            return _jsonable(dump(mode="json"))
        except Exception:
            pass
    return str(value)


def flaky_cells(rows: Iterable[EvalRow]) -> set[tuple[int, str]]:
    """The (case, variant) cells whose repeats disagree: some passed, some did not."""
    seen: dict[tuple[int, str], set[bool]] = {}
    for row in rows:
        if row.finished:
            seen.setdefault((row.case, row.variant), set()).add(bool(row.passed))
    return {cell for cell, verdicts in seen.items() if len(verdicts) > 1}
