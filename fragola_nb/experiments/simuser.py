"""``SimulatedUser``: a second agent that plays the user of a case, to evaluate an agent over a
conversation of several turns.

    cases = [{"user": SimulatedUser('Ask "How warm is it in Oslo?" then "And in Paris?"'),
              "expected": "Paris"}]

It is a fresh agent, on the Fragola given (``fragola=``) or else the graded fork's, with
``model=`` for its calls when given; its system prompt holds the goal (and ``instructions``).
It writes each user message; the fork's reply is its next user message; the conversation
ends when it answers ``[done]`` (``ended = "user done"``) or after ``max_turns`` turns
(``"max turns"``), or when a turn of the fork does not finish (``"waiting"``, ``"failed"``),
or when a budget cuts its own call (``"failed"``: the row is ``not run: budget``).
Its calls are counted apart (``row.user_usage``), as a judge's are.

On the scripted model (``Fragola.scripted()``) it is fixed: it says the goal's quoted phrases
(``"..."``, curly quotes or backticks), one per turn in order, then ``[done]``; a goal without
any is said once as it is (``fragola_nb.models.scripted.simulating``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.experiments.conversation import Decide, Talk, turn
from fragola_nb.experiments.shared import answer_text
from fragola_nb.models.scripted.simulating import DONE, OPENING, USER_MARKER

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.fragola import Fragola

__all__ = ["SimulatedUser"]

DEFAULT_INSTRUCTIONS = ("Write only your next message to the assistant, as the user would, in "
                        "one or two sentences. Do not answer for the assistant.")


class SimulatedUser:
    """A case's ``user``: a second agent that plays the user with ``goal`` as its
    instructions, for at most ``max_turns`` turns (see the module's docstring).

    >>> SimulatedUser("Ask for the weather in Oslo.", max_turns=2)
    SimulatedUser('Ask for the weather in Oslo.', max_turns=2)
    """

    def __init__(self, goal: str, *, model: str | None = None, fragola: Fragola | None = None,
                 max_turns: int = 5, instructions: str | None = None) -> None:
        if not isinstance(goal, str) or not goal.strip():
            raise BadUsage("SimulatedUser() takes a goal: a non-empty string")
        if model is not None and (not isinstance(model, str) or not model):
            raise BadUsage(f"SimulatedUser(model=...) takes a model name, not {model!r:.60}")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise BadUsage(f"SimulatedUser(max_turns=...) takes a whole number >= 1, not "
                           f"{max_turns!r:.60}")
        if instructions is not None and not isinstance(instructions, str):
            raise BadUsage("SimulatedUser(instructions=...) takes a string")
        if fragola is not None:
            from fragola_nb.core.fragola import Fragola

            if not isinstance(fragola, Fragola):
                raise BadUsage(f"SimulatedUser(fragola=...) takes a Fragola, not "
                               f"{type(fragola).__name__}")
        self.goal, self.model, self.fragola = goal, model, fragola
        self.max_turns, self.instructions = max_turns, instructions

    def system_prompt(self) -> str:
        return (f"You play a user {USER_MARKER} talking with an assistant.\n"
                f"Your goal:\n{self.goal}\n\n"
                f"{self.instructions or DEFAULT_INSTRUCTIONS}\n"
                f"When your goal is met, or cannot be met, reply with exactly {DONE}.")

    def agent(self, fork: Agent) -> Agent:
        """The agent that plays the user: fresh, in no fork tree."""
        fragola = self.fragola or fork.fragola
        settings = {"model": self.model} if self.model else {}
        return fragola.agent("simulated_user", instructions=self.system_prompt(),
                             model_settings=settings, max_step=1)

    async def talk(self, fork: Agent, decide: Decide | None) -> Talk:
        """Talk with ``fork`` until done, ``max_turns``, or a turn that does not finish."""
        user = self.agent(fork)
        heard: str = OPENING
        said: list[str] = []
        state = None
        ended = "max turns"
        for _ in range(self.max_turns):
            told = await user.user_message(heard)
            if told.outcome == "budget":  # spent (on Fragola.cached: a miss not sent)
                return Talk(told, "failed", tuple(said), user.usage.calls)
            message = answer_text(user) or ""
            if not message.strip() or message.strip().casefold().endswith(DONE):
                ended = "user done"
                break
            said.append(message)
            since = len(fork.state.messages)
            state = await turn(fork, message, decide)
            if state.outcome != "finished":
                ended = "waiting" if state.outcome == "paused" else "failed"
                break
            heard = answer_text(fork, since) or "(no reply)"
        return Talk(state, ended, tuple(said), user.usage.calls)

    def __repr__(self) -> str:
        more = "" if self.max_turns == 5 else f", max_turns={self.max_turns}"
        model = f", model={self.model!r}" if self.model else ""
        return f"SimulatedUser({self.goal!r:.80}{model}{more})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent to a Ray worker without its Fragola (the worker's own is used there).
        return (_remade, (self.goal, self.model, self.max_turns, self.instructions))


def _remade(goal: str, model: str | None, max_turns: int, instructions: str | None
            ) -> SimulatedUser:
    return SimulatedUser(goal, model=model, max_turns=max_turns, instructions=instructions)
