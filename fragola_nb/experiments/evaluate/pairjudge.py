"""``Evaluation.judge_pairs``: a model shown two variants' answers to each case picks the
better one by a rubric, or a tie.

For each case and repeat that both variants answered, a fresh judge agent (on ``fragola=``,
else the Fragola the rows ran on; on ``model=`` when given) is shown the question, the
expected answer (when the case has one) and the two answers as A and B, and answers through
``agent.json`` with ``{"winner": "A" | "B" | "tie", "reason": str}``. With ``both_orders``
(the default) it is asked again with the answers swapped: a pick counts for a variant only
when both orders agree, otherwise it is a tie, and ``position_flips`` counts the cases where
the order changed the pick. A case's value is the mean over its repeats of +1 (b picked),
−1 (a picked) or 0 (a tie); the result is a ``Versus`` with metric ``"preference"``. The
judge's calls are in ``Versus.usage`` (and the evaluation's ``judge_usage``), apart from
the graded calls; a call that fails leaves its pair out. ``Versus.picks`` has each pair's
``case``, ``repeat``, ``picks`` (per order: ``"a"``, ``"b"``, ``"tie"`` or ``"error"``) and
the judge's ``reasons``.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import pydantic

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import text_of
from fragola_nb.core.usage import Usage
from fragola_nb.experiments.evaluate.verdicts import check_pair, from_differences
from fragola_nb.experiments.graders.base import one_line

if TYPE_CHECKING:
    from fragola_nb.core.fragola import Fragola
    from fragola_nb.experiments.evaluate.evalrow import EvalRow
    from fragola_nb.experiments.evaluate.evaluation import Evaluation
    from fragola_nb.experiments.evaluate.verdicts import Versus

__all__ = ["MARKER", "judge_pairs"]

MARKER = "[fragola_nb pairwise judge]"  # the scripted model's demo brain knows it by this
AT_ONCE = 8  # judge calls in flight at once


class Pick(pydantic.BaseModel):
    """What a pairwise judge answers."""

    winner: Literal["A", "B", "tie"]
    reason: str


def system_prompt(rubric: str) -> str:
    return (f"You are a judge {MARKER}: you compare two answers to one question by a "
            f"rubric.\nRubric:\n{rubric}\n\nSay which answer meets the rubric better: A, B, "
            'or tie when neither does. Reply with JSON: {"winner": "A" | "B" | "tie", '
            '"reason": "one sentence"}.')


def question(row: EvalRow, first: str, second: str) -> str:
    parts = [f"Question:\n{text_of(row.input)}"]
    if row.expected is not None:
        parts.append(f"Expected answer:\n{row.expected}")
    parts += [f"Answer A:\n{first}", f"Answer B:\n{second}"]
    return "\n\n".join(parts)


async def judge_pairs(evaluation: Evaluation, a: str, b: str, rubric: str, *,
                      model: str | None, fragola: Fragola | None, both_orders: bool) -> Versus:
    """See the module's docstring."""
    check_pair(evaluation, a, b, "judge_pairs")
    if not isinstance(rubric, str) or not rubric.strip():
        raise BadUsage("judge_pairs() takes a rubric: a non-empty string")
    if model is not None and (not isinstance(model, str) or not model):
        raise BadUsage(f"judge_pairs(model=...) takes a model name, not {model!r:.60}")
    if not isinstance(both_orders, bool):
        raise BadUsage(f"judge_pairs(both_orders=...) is True or False, not {both_orders!r:.60}")
    pairs = _pairs(evaluation, a, b)
    fragola = _fragola(fragola, pairs)
    settings = {"model": model} if model else {}
    known = frozenset(fragola.credentials(settings)) | evaluation.known
    gate = asyncio.Semaphore(AT_ONCE)
    usage: list[Usage] = []

    async def ask(row: EvalRow, first: str, second: str) -> tuple[str, str]:
        async with gate:
            agent = fragola.agent("pair-judge", instructions=system_prompt(rubric),
                                  model_settings=settings, max_step=1)
            try:
                result = await agent.json(question(row, first, second), Pick)
            except Exception as exc:  # its calls still count
                return "error", one_line(exc, known)
            finally:
                usage.append(agent.usage)
            if not result.success or not isinstance(result.data, Pick):
                return "error", f"the reply does not fit {{winner, reason}}: {result.error!s:.200}"
            return result.data.winner, redact_text(" ".join(result.data.reason.split()), known)

    async def judged(ra: EvalRow, rb: EvalRow) -> dict[str, Any]:
        asks = [ask(ra, ra.answer or "", rb.answer or "")]
        if both_orders:
            asks.append(ask(ra, rb.answer or "", ra.answer or ""))
        said = await asyncio.gather(*asks)
        picks = [_side(said[0][0], "a", "b")] + ([_side(said[1][0], "b", "a")] if both_orders
                                                  else [])
        return {"case": ra.case, "repeat": ra.repeat, "picks": picks,
                "reasons": [reason for _, reason in said]}

    found = await asyncio.gather(*(judged(ra, rb) for ra, rb in pairs))
    return _versus(a, b, found, both_orders, sum(usage, Usage()))


def _side(winner: str, first: str, second: str) -> str:
    """The judge's A or B as the variant it showed there (``"a"`` or ``"b"``)."""
    return {"A": first, "B": second}.get(winner, winner)  # "tie" or "error" stay


def _pairs(evaluation: Evaluation, a: str, b: str) -> list[tuple[EvalRow, EvalRow]]:
    """(a's row, b's row) for each case and repeat both answered, in case order."""
    answered = {(r.case, r.variant, r.repeat): r for r in evaluation
                if r.finished and r.answer is not None}
    return [(row, answered[(row.case, b, row.repeat)]) for row in evaluation
            if row.variant == a and (row.case, a, row.repeat) in answered
            and (row.case, b, row.repeat) in answered]


def _fragola(fragola: Any, pairs: list[tuple[EvalRow, EvalRow]]) -> Fragola:
    from fragola_nb.core.fragola import Fragola

    if fragola is not None:
        if not isinstance(fragola, Fragola):
            raise BadUsage(f"judge_pairs(fragola=...) takes a Fragola, not "
                           f"{type(fragola).__name__}")
        return fragola
    for ra, rb in pairs:
        for row in (ra, rb):
            if row.fork is not None:
                return row.fork.fragola
    raise BadUsage("judge_pairs() needs fragola= here: no row has a fork to take its Fragola "
                   "from (rows read back from a file have none)")


def _versus(a: str, b: str, found: list[dict[str, Any]], both_orders: bool,
            usage: Usage) -> Versus:
    values: dict[int, list[float]] = {}
    flipped: set[int] = set()
    for pair in found:
        picks = pair["picks"]
        if "error" in picks:
            continue
        if len(set(picks)) > 1:
            flipped.add(pair["case"])
        pick = picks[0] if len(set(picks)) == 1 else "tie"
        values.setdefault(pair["case"], []).append(1.0 if pick == "b" else -1.0 if pick == "a"
                                                   else 0.0)
    differences = [math.fsum(v) / len(v) for v in values.values()]
    once = all(len(v) == 1 for v in values.values())
    versus = from_differences(a, b, "preference", differences, mcnemar=once,
                              sign_test="exact sign test")
    return replace(versus, position_flips=len(flipped) if both_orders else None,
                   usage=usage, picks=tuple(found))
