"""A finished conversation as an ``EvalRow``'s fields: its status, and the trajectory the row
keeps (``tool_calls``, ``answers``, ``ended``, the turns, the simulated user's calls). Used
by ``evaluate`` here and for the rows that come back from Ray."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from fragola_nb.core.usage import ModelPrice, Usage
from fragola_nb.experiments.conversation import Talk, answers_of
from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.graders.base import tool_calls_of
from fragola_nb.experiments.shared import verdict

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["NO_TURN", "talk_verdict", "with_talk"]

NO_TURN = "the simulated user ended the conversation before its first message"


def talk_verdict(fork: Agent, talk: Talk) -> tuple[str, str | None]:
    """The row's status and error once ``talk`` ended (its last turn's, as ``batch``)."""
    if talk.state is None:
        return "failed", NO_TURN
    return verdict(fork, talk.state)


def with_talk(row: EvalRow, fork: Agent | None, talk: Talk | None,
              prices: Mapping[str, ModelPrice]) -> EvalRow:
    """``row`` with what its fork did: the fork's own tool calls (with results), each
    turn's reply, and how the conversation ended."""
    if fork is None:
        return row
    conversation = talk is not None and (talk.ended is not None or len(talk.turns) > 1)
    return replace(
        row, tool_calls=tool_calls_of(fork), answers=answers_of(fork),
        ended=talk.ended if talk is not None else None,
        turns=talk.turns if talk is not None and conversation else row.turns,
        user_usage=Usage(talk.user_calls, prices) if talk is not None and talk.user_calls
        else None)
