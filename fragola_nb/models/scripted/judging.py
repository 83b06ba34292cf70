"""How the demo brain answers a judge (``fragola_nb.graders.judge``): a fixed, explainable score.

A request is a judge's when its system message holds ``[fragola_nb judge]`` (a pairwise
judge's, ``[fragola_nb pairwise judge]``, is answered by ``pairing``). The brain reads
the rubric, the scale and the answer from the judge's prompt and scores by one rule:

- the text looked in is the answer, and with ``judge(..., trajectory=True)`` the calls and
  turns the judge is shown too (so ``'called "lookup"'`` can be found as ``lookup``);
- the **phrases** are the rubric's quoted phrases (in ``"double quotes"``, curly quotes or
  backticks); without any, the expected answer, when the request gives one;
- the score is ``low + found / phrases × (high - low)``, where ``found`` counts the phrases in
  the answer (any letter case), rounded to two decimals; with nothing to look for, ``high``;
- the reason states the rule: ``scripted judge: 1 of 2 phrases of the rubric in the answer
  (found "Paris"; missing "capital"): 1 + 1/2 × (5 - 1) = 3``.

>>> verdict("Names \\"Paris\\".", (1, 5), "Paris.", None)["score"]
5
"""

from __future__ import annotations

import re
from typing import Any

from fragola_nb.models.scripted.pairing import PAIR_MARKER, pair_verdict
from fragola_nb.models.scripted.phrases import phrases_of

__all__ = ["JUDGE_MARKER", "judge_request", "phrases_of", "verdict"]

JUDGE_MARKER = "[fragola_nb judge]"
"""In a judge's system message (``fragola_nb.experiments.graders.judge`` writes the same text)."""
_RUBRIC, _SCALE = "\nRubric:\n", "\n\nScore the answer on a scale from "
_EXPECTED, _ANSWER = "\n\nExpected answer:\n", "\n\nAnswer to grade:\n"
_TRAJECTORY = "\n\nHow the agent got there:\n"
_NUMBER = r"(-?\d+(?:\.\d+)?)"


def judge_request(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The verdict for a judge's request, or None when ``messages`` are not a judge's."""
    system = next((m.get("content") for m in messages
                   if m.get("role") in ("system", "developer")), None)
    asked = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), None)
    if not isinstance(system, str) or not isinstance(asked, str):
        return None
    if PAIR_MARKER in system:
        return pair_verdict(system, asked)
    if JUDGE_MARKER not in system:
        return None
    rubric = system.partition(_RUBRIC)[2].rpartition(_SCALE)[0]
    scale = re.search(rf"{re.escape(_SCALE.strip())} {_NUMBER} to {_NUMBER}", system)
    low, high = (float(scale.group(1)), float(scale.group(2))) if scale else (1.0, 5.0)
    before, _, answer = asked.partition(_ANSWER)
    before, _, trajectory = before.partition(_TRAJECTORY)
    expected = before.partition(_EXPECTED)[2] if _EXPECTED in before else None
    if trajectory:  # judge(trajectory=True): the phrases are looked for in the calls too
        answer = f"{answer}\n{trajectory}"
    return verdict(rubric, (low, high), answer, expected)


def verdict(rubric: str, scale: tuple[float, float], answer: str, expected: str | None
            ) -> dict[str, Any]:
    """``{"score": ..., "reason": ...}`` by the rule in the module's docstring."""
    low, high = (_plain(bound) for bound in scale)
    phrases, what = phrases_of(rubric, expected)
    if not phrases:
        return {"score": high, "reason": f"scripted judge: nothing to look for in the rubric, "
                                         f"so the top of the scale, {high}"}
    found = [p for p in phrases if p.casefold() in answer.casefold()]
    missing = [p for p in phrases if p not in found]
    score = _plain(round(low + len(found) / len(phrases) * (high - low), 2))
    listed = "; ".join(part for part in (
        "found " + ", ".join(f'"{p}"' for p in found) if found else "",
        "missing " + ", ".join(f'"{p}"' for p in missing) if missing else "") if part)
    told = (f"{len(found)} of {len(phrases)} {what}" if what.startswith("phrases")
            else f"{'found' if found else 'not'} {what}")
    return {"score": score, "reason": f"scripted judge: {told} in the answer ({listed}): "
                                      f"{low} + {len(found)}/{len(phrases)} × ({high} - {low}) "
                                      f"= {score}"}


def _plain(number: float) -> float | int:
    """``5`` for ``5.0``: the scores read as the scale was written."""
    return int(number) if float(number).is_integer() else number
