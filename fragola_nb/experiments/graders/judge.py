"""``judge(rubric)``: a grader that asks a model to score an answer by a rubric.

The judge is a fresh agent, on the Fragola given (``fragola=``) or else the graded fork's,
with ``model=`` for its calls when given. Its system prompt holds the rubric and the scale;
its user message the input, the expected answer (when the case has one) and the answer. It
answers through ``agent.json`` with ``{"score": number, "reason": str}``. The agent is in no
fork tree, and its calls are in ``Grade.usage``, not in the graded fork's usage.

On the scripted model's demo brain the score is fixed and explained (the rule is in
``fragola_nb.models.scripted.judging``): the fraction of the rubric's quoted phrases found in
the answer, mapped onto the scale.
"""

from __future__ import annotations

import json
import math
import numbers
from typing import TYPE_CHECKING, Any

import pydantic

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import text_of
from fragola_nb.core.usage import Usage
from fragola_nb.experiments.graders.base import Grade, GradedRow, one_line

if TYPE_CHECKING:
    from fragola_nb.core.fragola import Fragola

__all__ = ["DEFAULT_SCALE", "Judge", "judge", "trajectory_text"]

SHORT = 200
"""A judge with ``trajectory=True`` reads each argument list and result cut to this length."""
MAX_CALLS = 50
DEFAULT_SCALE = (1, 5)
"""A judge's scale unless given one: 1 (fails the rubric) to 5 (meets it fully)."""
MARKER = "[fragola_nb judge]"  # the scripted model's demo brain knows a judge by it


class Verdict(pydantic.BaseModel):
    """What a judge answers."""

    score: float
    reason: str


class Judge:
    """A grader that asks a model (see ``judge``); its name is ``judge``."""

    __name__ = "judge"

    def __init__(self, rubric: str, model: str | None, fragola: Fragola | None,
                 scale: tuple[float, float], threshold: float | None,
                 trajectory: bool = False) -> None:
        self.rubric, self.model, self.fragola = rubric, model, fragola
        self.scale, self.threshold, self.trajectory = scale, threshold, trajectory

    @property
    def pass_mark(self) -> float:
        """The least score that passes: ``threshold``, else the scale's midpoint."""
        low, high = self.scale
        return self.threshold if self.threshold is not None else (low + high) / 2

    def system_prompt(self) -> str:
        low, high = self.scale
        return (f"You are a judge {MARKER}: you grade an answer by a rubric.\n"
                f"Rubric:\n{self.rubric}\n\n"
                f"Score the answer on a scale from {low} to {high} ({low}: it fails the "
                f"rubric; {high}: it meets it fully). Reply with JSON: "
                '{"score": number, "reason": "one sentence"}.')

    def question(self, row: GradedRow) -> str:
        parts = [f"Question:\n{text_of(row.input)}"]
        if row.expected is not None:
            parts.append(f"Expected answer:\n{row.expected}")
        if self.trajectory:
            parts.append(f"How the agent got there:\n{trajectory_text(row)}")
        parts.append(f"Answer to grade:\n{row.answer}")
        return "\n\n".join(parts)

    async def __call__(self, row: GradedRow) -> Grade:
        if row.answer is None:
            return Grade("judge", False, reason="no answer", usage=Usage())
        fragola = self.fragola or (row.fork.fragola if row.fork is not None else None)
        if fragola is None:
            raise BadUsage("judge() needs fragola= to grade a row without a fork")
        settings = {"model": self.model} if self.model else {}
        agent = fragola.agent("judge", instructions=self.system_prompt(),
                              model_settings=settings, max_step=1)
        try:
            result = await agent.json(self.question(row), Verdict)
        except Exception as exc:  # the judge's calls still count: the grade keeps its usage
            known = fragola.credentials(settings)
            return Grade("judge", False, reason=one_line(exc, known), usage=agent.usage)
        if not result.success or not isinstance(result.data, Verdict):
            return Grade("judge", False, reason=f"the judge's reply does not fit "
                         f"{{score, reason}}: {redact_text(str(result.error))[:200]}",
                         usage=agent.usage)
        # The model's reason is shown in tables and saved: a key it quoted back stays hidden.
        reason = redact_text(" ".join(result.data.reason.split()), fragola.credentials(settings))
        # Kept on its scale as raw_score; Grade makes score 0-1 of it, and fails a score
        # that is outside the scale or not a number (NaN, infinite), saying so.
        score = result.data.score
        return Grade("judge", score >= self.pass_mark, reason=reason, usage=agent.usage,
                     raw_score=score, scale=self.scale)

    def __repr__(self) -> str:
        more = ", trajectory=True" if self.trajectory else ""
        return f"judge({self.rubric!r:.60}, scale={self.scale}{more})"


def _short(value: Any, limit: int = SHORT) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                            default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def trajectory_text(row: GradedRow) -> str:
    """The conversation's turns and the fork's tool calls with their results, each shortened
    to ``SHORT`` characters (at most ``MAX_CALLS`` calls), as the judge reads them."""
    lines = []
    if len(row.answers) > 1:
        turns = row.fork.messages_since(row.fork.fork_point) if row.fork is not None else []
        said = [text_of(m.get("content")) for m in turns if m.get("role") == "user"]
        for number, (user, reply) in enumerate(zip(said, row.answers, strict=False), 1):
            lines.append(f"Turn {number}: user: {_short(user)} | assistant: {_short(reply)}")
    calls = row.tool_calls
    for number, call in enumerate(calls[:MAX_CALLS], 1):
        lines.append(f"{number}. {call.get('name')}({_short(call.get('arguments') or {})}) -> "
                     f"{_short(call.get('result'))}")
    if len(calls) > MAX_CALLS:
        lines.append(f"... and {len(calls) - MAX_CALLS} more calls")
    lines.append(f"({len(calls)} tool calls, {row.model_calls} model calls)")
    return "\n".join(lines)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(
            float(value)):
        raise BadUsage(f"judge({what}=...) takes a number, not {value!r:.60}")
    return value  # type: ignore[return-value]  # kept as given: (1, 5) stays whole numbers


def judge(rubric: str, model: str | None = None, fragola: Fragola | None = None,
          scale: tuple[float, float] | None = None, threshold: float | None = None,
          trajectory: bool = False) -> Judge:
    """An LLM judge: a grader that asks a model to score the answer by ``rubric``.

    It answers ``{"score": number, "reason": str}`` through ``agent.json``, on ``scale``
    (``(low, high)``, default ``(1, 5)``); the grade passes when the score is at least
    ``threshold``, else the scale's midpoint (3 on 1-5). A score outside the scale fails,
    saying so (a NaN or infinite score too); a row without an answer fails with ``no
    answer`` (no call is made). It runs
    on the graded fork's Fragola unless given ``fragola=``, on ``model=`` when given, else on
    that Fragola's model (not the graded agent's settings: every variant of an evaluation is
    judged alike); its calls are in ``Grade.usage``, apart from the graded calls.
    ``Grade.raw_score`` is the judge's score on the scale, ``Grade.scale`` the scale, and
    ``Grade.score`` that score on 0 to 1 (``(raw_score - low) / (high - low)``), as every
    grade's score is. ``trajectory=True``: the judge also reads how the agent got there, the
    turns of a conversation and the fork's tool calls with their results, each shortened
    (``trajectory_text``).

    On the scripted model (``Fragola.scripted()``) the score is fixed: the fraction of the
    rubric's quoted phrases (``"..."`` or backticks) found in the answer, in any letter case,
    mapped onto the scale (``low + found / phrases × (high - low)``), and the reason says so;
    without quoted phrases the expected answer is the phrase, and without one either the
    score is the top of the scale.

    >>> polite = judge('The answer greets the user with "hello".', threshold=4)
    >>> polite.pass_mark
    4
    """
    if not isinstance(rubric, str) or not rubric.strip():
        raise BadUsage("judge() takes a rubric: a non-empty string")
    if model is not None and (not isinstance(model, str) or not model):
        raise BadUsage(f"judge(model=...) takes a model name, not {model!r:.60}")
    if fragola is not None:
        from fragola_nb.core.fragola import Fragola

        if not isinstance(fragola, Fragola):
            raise BadUsage(f"judge(fragola=...) takes a Fragola, not {type(fragola).__name__}")
    if scale is None:
        scale = DEFAULT_SCALE
    if not isinstance(scale, (tuple, list)) or len(scale) != 2:
        raise BadUsage(f"judge(scale=...) takes (low, high), not {scale!r:.60}")
    low, high = _number(scale[0], "scale"), _number(scale[1], "scale")
    if not low < high:
        raise BadUsage(f"judge(scale=...): low must be below high, not ({low}, {high})")
    if threshold is not None:
        threshold = _number(threshold, "threshold")
        if not low <= threshold <= high:
            raise BadUsage(f"judge(threshold={threshold}) is outside the scale {low}-{high}")
    if not isinstance(trajectory, bool):
        raise BadUsage(f"judge(trajectory=...) takes True or False, not {trajectory!r:.60}")
    return Judge(rubric, model, fragola, (low, high), threshold, trajectory)
