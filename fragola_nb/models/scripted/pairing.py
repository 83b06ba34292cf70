"""How the demo brain answers a pairwise judge (``Evaluation.judge_pairs``): a fixed rule.

A request is a pairwise judge's when its system message holds ``[fragola_nb pairwise
judge]``. The brain looks for the same **phrases** as the judge does (the rubric's quoted
phrases, else the expected answer: see ``judging``) in answer A and in answer B, in any
letter case; the answer with more of them wins, and equal counts are a tie. The order the
answers come in never changes the pick, so on this model ``position_flips`` is 0. The reason
states the rule::

    scripted pairwise judge: looking for 2 phrases of the rubric, A has 2 ("Paris",
    "capital"), B has 1 ("Paris"): A

>>> pair_verdict("[fragola_nb pairwise judge]\\nRubric:\\nNames \\"Paris\\".\\n\\nSay which",
...              "Question:\\nq\\n\\nAnswer A:\\nParis.\\n\\nAnswer B:\\nLyon.")["winner"]
'A'
"""

from __future__ import annotations

from typing import Any

from fragola_nb.models.scripted.phrases import phrases_of

__all__ = ["PAIR_MARKER", "pair_verdict"]

PAIR_MARKER = "[fragola_nb pairwise judge]"
"""In a pairwise judge's system message (``fragola_nb.experiments.evaluate.pairjudge`` writes
it)."""
_RUBRIC, _END = "\nRubric:\n", "\n\nSay which"
_EXPECTED, _FIRST, _SECOND = "\n\nExpected answer:\n", "\n\nAnswer A:\n", "\n\nAnswer B:\n"


def pair_verdict(system: str, asked: str) -> dict[str, Any]:
    """``{"winner": "A" | "B" | "tie", "reason": ...}`` by the rule in the docstring."""
    rubric = system.partition(_RUBRIC)[2].rpartition(_END)[0]
    before, _, answers = asked.partition(_FIRST)
    first, _, second = answers.partition(_SECOND)
    expected = before.partition(_EXPECTED)[2] if _EXPECTED in before else None
    phrases, what = phrases_of(rubric, expected)
    if not phrases:
        return {"winner": "tie", "reason": "scripted pairwise judge: nothing to look for in "
                                           "the rubric, so a tie"}
    found = {side: [p for p in phrases if p.casefold() in text.casefold()]
             for side, text in (("A", first), ("B", second))}
    counts = {side: len(hits) for side, hits in found.items()}
    winner = ("A" if counts["A"] > counts["B"] else "B" if counts["B"] > counts["A"]
              else "tie")
    noun = ("expected answer" if not what.startswith("phrases") else
            "phrase of the rubric" if len(phrases) == 1 else what)
    said = ", ".join(f"{side} has {counts[side]}" + (
        " (" + ", ".join(f'"{p}"' for p in found[side]) + ")" if found[side] else "")
        for side in ("A", "B"))
    said = f"looking for {len(phrases)} {noun}, {said}"
    return {"winner": winner, "reason": f"scripted pairwise judge: {said}: {winner}"}
