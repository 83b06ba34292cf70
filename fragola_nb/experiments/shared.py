"""What the experiment families share (``compare/``, ``batch/``, ``evaluate/`` and ``ray/``):
a fork's answer and tool calls as text, its tokens, an error in one line, pandas on demand,
undoing an experiment that fails to start and stopping its forks at once, a row's status from
how its talk ended, and the checks of ``repeat``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redact_text
from fragola_nb.base.render import text_of
from fragola_nb.core.run.driver import StopNow
from fragola_nb.core.usage import Usage

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.state import AgentState
    from fragola_nb.experiments.conversation import Talk

__all__ = ["NOT_RUN_BUDGET", "STOPPED", "answer_text", "check_repeat", "error_line",
           "experiment_ended", "import_pandas", "row_tokens", "stop_at_once", "talk_status",
           "tool_call_texts", "undone_on_error", "verdict", "worker_pool", "wrap_text"]

_log = logging.getLogger("fragola_nb")

NOT_RUN_BUDGET = "not run: budget"
"""The error of an input (a variant) a batch's (a comparison's) ``budget`` left unfinished:
never started once it was spent, or ended by it before a final answer (``row.fork.state.spent``
says which budget)."""
STOPPED = "stopped: the batch was stopped at once (stop_sync(), Stop) while this input ran"


def answer_text(agent: Agent, since: int = 0) -> str | None:
    """The text of the last assistant message from index ``since`` on, or None when that
    message has no text (a call to a tool) or there is none."""
    for message in reversed(agent.messages_since(since)):
        if message.get("role") == "assistant":
            return text_of(message.get("content")) or None
    return None


def tool_call_texts(agent: Agent, since: int = 0) -> list[str]:
    """Each tool call the assistant made from index ``since`` on, as ``name(arguments)``."""
    calls = []
    for message in agent.messages_since(since):
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            calls.append(f"{function.get('name', '?')}({function.get('arguments') or ''})")
    return calls


def row_tokens(usage: Usage) -> int | None:
    """``usage.total_tokens``, or None when a call's server sent no usage (never a guess):
    the ``tokens`` of a comparison's and of a batch's rows."""
    return None if usage.unreported else usage.total_tokens


def error_line(exc: BaseException) -> str:
    """``ClassName: first line of the message``, credentials redacted: a row's error."""
    lines = str(exc).strip().splitlines()
    return redact_text(f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__)


def import_pandas(what: str) -> Any:
    """The ``pandas`` module, imported on first use, or an ImportError saying how to get it."""
    try:
        import pandas  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError(f"{what} needs pandas: pip install fragola_nb[pandas]") from None
    return pandas


@contextlib.contextmanager
def undone_on_error(agent: Agent, stopper: Callable[[bool], None] | None = None
                    ) -> Iterator[None]:
    """Forks made of ``agent`` inside the block are dropped, and ``stopper`` unregistered, when
    the block raises (a listener of the agent's ``after_state_update`` that raises on the fork
    it was told of): the experiment leaves nothing half made, then the error goes on."""
    before = {id(fork) for fork in agent.forks}
    try:
        yield
    except BaseException:
        for fork in agent.forks:
            if id(fork) not in before:
                with contextlib.suppress(Exception):  # the same listener, told of the drop
                    fork.drop()
        if stopper is not None:
            with contextlib.suppress(Exception):
                agent.experiment_ended(stopper)
        raise


def stop_at_once(forks: Iterable[Agent]) -> None:
    """``stop_sync()`` on each of ``forks`` (an experiment's running ones). Called from a
    listener of one of them, that fork's ``StopNow`` goes on once the others are stopped."""
    here: StopNow | None = None
    for fork in list(forks):
        try:
            fork.stop_sync()
        except StopNow as exc:  # called from a listener of that very fork's run
            here = exc
    if here is not None:
        raise here


def experiment_ended(agent: Agent, stopper: Callable[[bool], None]) -> None:
    """``agent.experiment_ended``, a listener's error logged: the experiment's rows are kept
    (they would be lost with the call's return value)."""
    try:
        agent.experiment_ended(stopper)
    except Exception:
        _log.exception("fragola_nb: a listener failed on the end of an experiment on %r",
                       agent.name)


def check_repeat(repeat: Any) -> int:
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise BadUsage(f"repeat must be a whole number >= 1, got {repeat!r}")
    return repeat


async def worker_pool(work: Callable[[], Awaitable[None]], workers: int,
                      halt: Callable[[], None]) -> None:
    """The workers of a batch or an evaluation: ``workers`` tasks running ``work`` (they share
    one iterator of what is left). Cancelled (an interrupt) or broken (a resume file that
    cannot be written): ``halt()`` (nothing more starts), the workers are cancelled and
    settle, then the error goes on."""
    tasks = [asyncio.ensure_future(work()) for _ in range(workers)]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        halt()
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        raise


def wrap_text(bar: Any) -> None:
    """tqdm's notebook bar writes its text with figure spaces, which never break: in a narrow
    notebook (the file browser open) "done=5, failed=0, tokens=…" was cut at "done=5, fai".
    Its right-hand text gets plain spaces back after each redraw, so it wraps (the bar's row
    already wraps, so the text takes a line of its own when it does not fit beside the bar)."""
    container = getattr(bar, "container", None)  # tqdm.notebook's HBox; none in a terminal
    children: Any = getattr(container, "children", ())
    if len(children) != 3:
        return
    right = children[2]
    drawn = bar.display

    def display(*args: Any, **kwargs: Any) -> Any:
        result = drawn(*args, **kwargs)
        text = str(right.value)
        if "\u2007" in text:
            right.value = text.replace("\u2007", " ")
        return result

    bar.display = display
    if getattr(bar, "disp", None) == drawn:  # tqdm.notebook draws its last state through it
        bar.disp = display


def talk_status(fork: Agent, talk: Talk) -> tuple[str, str | None]:
    """The status and error of an input whose conversation ended as ``talk`` says."""
    if talk.state is None:
        return "failed", "the simulated user ended the conversation before its first message"
    return verdict(fork, talk.state)


def verdict(fork: Agent, state: AgentState) -> tuple[str, str | None]:
    """The status and error of an input whose ``user_message`` returned ``state``."""
    if state.outcome == "finished":
        return "done", None
    if state.outcome == "stopped":
        return "stopped", STOPPED
    if state.outcome == "budget":
        return "not run", NOT_RUN_BUDGET
    if state.outcome == "paused":
        names = ", ".join(sorted({call.name for call in state.pending})) or "a tool"
        return "failed", (f"waiting: {names} waits for a person's decision; row.fork is "
                          "waiting: approve/reject/inject it, then await row.fork.step()")
    return "failed", (f"step limit: no final answer within max_step="
                      f"{fork.options.max_step} model calls")
