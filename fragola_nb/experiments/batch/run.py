"""``agent.batch``: many inputs, each on a fresh fork of the agent.

>>> result = await agent.batch(["2 + 2?", "3 + 3?"], concurrency=8)   # doctest: +SKIP
>>> result[0].answer, result.done, result.failed                         # doctest: +SKIP
('4', 2, 0)

Each input is sent with ``user_message`` on its own fork of a snapshot of the agent taken when
the batch starts, so the agent's history (instructions, few-shot examples) is the shared
prefix of every request, and the agent itself is left as it was. At most ``concurrency``
inputs run at once. The forks are dropped from the fork tree as they are made (a thousand
branches would swamp the tree and its views); each row keeps its fork (``row.fork``), whose
``fork_of`` names the agent.

An input that fails (an API error or timeout, the step limit, a listener error, a tool that
waits for a person) is a row with its ``error`` and the other inputs go on; a tool waiting for
approval leaves ``row.fork`` waiting, to approve and ``step()`` by hand.

Stopping: ``agent.stop()`` starts nothing more and lets the running inputs finish;
``agent.stop_sync()`` cancels them too. Either way the call returns the rows, finished ones
kept, the others ``"stopped"`` or ``"not run"``. Cancelling the task (a kernel interrupt)
cancels what has not finished and raises, as cancellation does; the rows finished by then are
in the resume file when there is one.

``resume=PATH`` appends each finished row to ``PATH`` (see ``resume``); run again with the
same path and inputs, the inputs already answered are not sent again and their rows come back
from the file (``fork`` None, ``resumed`` True); failed ones run again.

Progress is a ``tqdm.auto`` bar (a widget in a notebook, a line on stderr in a terminal) with
the counts done and failed and the tokens; ``progress=False`` turns it off.

``budget=Budget(...)`` meters the whole batch (with the Fragola's own budget, if any): once
spent, no input starts, and the rows left are ``"not run"`` with the error ``"not run:
budget"``, as are those whose turn it ended (outcome ``"budget"``, ``row.fork`` kept); neither
is written to the resume file, so a resumed batch runs them. On Ray the driver holds the meter
(see ``ray.run``).

``backend="ray"`` (or a ``RayBackend``) runs the inputs on Ray workers instead of this event
loop, with the same rows, bar, stopping and resume file: see ``raybackend``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any

from fragola_nb.base.checks import check_content
from fragola_nb.base.errors import BadUsage
from fragola_nb.core.limits import Budget, Meter, check_budget, in_force, spending
from fragola_nb.core.usage import Usage
from fragola_nb.experiments.batch.result import BatchResult, BatchRow
from fragola_nb.experiments.batch.resume import ResumeFile
from fragola_nb.experiments.conversation import Script, run_item
from fragola_nb.experiments.graders.apply import graded_row, passed_and_score, unique_names
from fragola_nb.experiments.graders.base import check_graders
from fragola_nb.experiments.graders.stop import GradingStop, judge_models
from fragola_nb.experiments.shared import (
    NOT_RUN_BUDGET,
    answer_text,
    check_repeat,
    error_line,
    experiment_ended,
    row_tokens,
    stop_at_once,
    talk_status,
    undone_on_error,
    worker_pool,
    wrap_text,
)
from fragola_nb.models.recording.cache import REPEAT_INDEX

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["Batch", "run_batch"]

NOT_RUN = "not run: the batch was stopped before this input started"


async def run_batch(
    agent: Agent,
    inputs: Iterable[Any],
    concurrency: int,
    *,
    resume: str | PathLike[str] | None,
    progress: bool,
    backend: Any = "local",
    graders: Any = (),
    repeat: int = 1,
    budget: Budget | None = None,
) -> BatchResult:
    """``agent.batch``: see the module's docstring."""
    repeat = check_repeat(repeat)
    chosen = check_graders(graders)
    # k runs of an input are k rows, side by side: the inputs repeated in place.
    items = [item for item in _checked_inputs(inputs) for _ in range(repeat)]
    check_budget(budget)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise BadUsage(f"concurrency must be a whole number >= 1, got {concurrency!r}")
    if agent.status != "idle":
        raise BadUsage(f"agent {agent.name!r} is {agent.status}: a batch starts from an idle "
                       "agent (await or stop() what runs, decide what waits)")
    # One snapshot to fork every input from: the prefix stays what it was when the batch
    # began. It is in no tree, and no listener hears of it being made.
    base = agent.detached_fork(f"{agent.name}-batch")
    on_ray = definition = None
    if backend != "local":  # everything is checked before anything starts or is opened
        from fragola_nb.experiments.ray.backend import backend_of, definition_of

        on_ray = backend_of(backend)
        if on_ray is not None:
            definition = definition_of(base, agent.name, on_ray)
    # Entered first: a usd budget on a model without a price is refused before anything is
    # opened or sent; every input's turn (a task made inside) is metered by it.
    models = [agent.model, *judge_models(chosen, agent.fragola)]  # a judge's priced too
    with spending(budget, fragola=agent.fragola, models=models) as meter:
        file = None if resume is None else ResumeFile(resume, items, agent.fragola.prices)
        batch: Batch | None = None
        try:
            # A listener of the agent's after_state_update that raises on the "experiment"
            # event ends the call here with nothing left behind.
            with undone_on_error(agent):
                batch = Batch(agent, base, items, file, progress, meter, repeat)
                agent.experiment_began(batch.stop, f"batch of {len(items):,} inputs")
        except BaseException:
            if batch is not None:
                with contextlib.suppress(Exception):
                    agent.experiment_ended(batch.stop)
                batch.close()
            elif file is not None:
                file.close()
            raise
        try:
            if on_ray is not None and definition is not None:
                from fragola_nb.experiments.ray.run import run_on_ray

                await run_on_ray(batch, on_ray, concurrency, definition)
            else:
                await batch.run(concurrency)
            if chosen:
                await batch.grade(chosen, concurrency)
        finally:
            experiment_ended(agent, batch.stop)
            batch.close()
        return batch.result()


def _checked_inputs(inputs: Iterable[Any]) -> list[Any]:
    if isinstance(inputs, (str, bytes, dict)) or not isinstance(inputs, Iterable):
        raise BadUsage("inputs must be a list of user messages (each a string or a list of "
                       f"content parts), got a {type(inputs).__name__}")
    items = list(inputs)
    for index, item in enumerate(items):
        if isinstance(item, Script):  # evaluate's conversations, run on Ray as a batch
            continue
        try:
            check_content(item)
        except BadUsage as exc:
            raise BadUsage(f"input {index}: {exc}") from None
    return items


class Batch:
    """One ``agent.batch`` call in flight: the rows so far, the forks running, the bar.

    A runner drives it through what is public here: ``run`` (this process's workers) or the
    Ray runner (``experiments/ray/run.py``), which reads ``items``, ``rows``, ``base``,
    ``agent``, ``repeat``, ``bar`` and ``stopping``, sets ``on_stop``, asks ``spent()``,
    hands each row to ``finish_row(row)`` and redraws the bar's text with ``show()``.
    """

    def __init__(self, agent: Agent, base: Agent, items: list[Any], file: ResumeFile | None,
                 progress: bool, meter: Meter | None = None, repeat: int = 1) -> None:
        # A notebook widget under a kernel, else a line on stderr.
        from tqdm.auto import tqdm  # type: ignore[import-untyped,unused-ignore]

        # The inputs' forks are made from ``base`` and are in no tree either (a thousand
        # fork events would say nothing); each fork's own run is heard as any fork's, by the
        # listeners it inherits.
        self.base = base
        self.meter = meter
        """The batch's budget (``budget=``): once spent, no input starts."""
        self.agent, self.items, self.file, self.repeat = agent, items, file, repeat
        self.rows: dict[int, BatchRow] = dict(file.rows) if file is not None else {}
        todo = [i for i in range(len(items)) if i not in self.rows]
        self.workers = len(todo)
        """At most this many workers: one per input left, however high ``concurrency``."""
        self.todo = iter(todo)
        self.running: dict[int, Agent] = {}
        self.grading = GradingStop()
        self.stopping = False
        self.on_stop: Callable[[bool], None] | None = None
        """Told of a stop too: the Ray backend passes it on to its workers."""
        self.started = time.perf_counter()
        self.done, self.failed = len(self.rows), 0
        self.tokens = sum(row.tokens or 0 for row in self.rows.values())
        # The label is set after the bar is made: tqdm's notebook widget puts a ``desc`` given
        # at creation into its HTML label as it is (an agent named "<img onerror=...>" ran in
        # the page), while every redraw escapes it.
        self.bar = tqdm(total=len(items), initial=len(self.rows), disable=not progress,
                        unit=" input", dynamic_ncols=True)
        self.bar.set_description_str(f"batch {agent.name}", refresh=False)
        wrap_text(self.bar)
        self.show()

    async def run(self, concurrency: int) -> None:
        await worker_pool(self._work, min(concurrency, self.workers), self._halt)

    def _halt(self) -> None:
        self.stopping = True

    async def _work(self) -> None:
        name = self.agent.name
        for index in self.todo:  # one iterator shared by the workers
            if self.stopping:
                return
            if self.spent():
                self.finish_row(BatchRow(index=index, input=self.items[index], answer=None,
                                         error=NOT_RUN_BUDGET, status="not run"))
                continue
            started = time.perf_counter()
            fork: Agent | None = None
            try:
                fork = self.base.detached_fork(f"{name}-batch{index}")
                fork.fork_of = self.agent.id
                self.running[index] = fork
                if self.stopping:  # stop() from another thread since the check above
                    return
                REPEAT_INDEX.set(index % self.repeat)  # this worker task's own context
                talk = await run_item(fork, self.items[index])
            except Exception as exc:
                row = self._row(index, fork, started, "failed", error_line(exc))
            else:
                row = self._row(index, fork, started, *talk_status(fork, talk))
                row = dataclasses.replace(row, talk=talk)
            finally:
                self.running.pop(index, None)
            self.finish_row(row)

    def _row(self, index: int, fork: Agent | None, started: float, status: Any,
             error: str | None) -> BatchRow:
        usage = fork.usage if fork is not None else Usage()
        answer = answer_text(fork, fork.fork_point) if fork is not None else None
        return BatchRow(index=index, input=self.items[index], answer=answer, error=error,
                        status=status, tokens=row_tokens(usage),
                        seconds=time.perf_counter() - started, fork=fork, usage=usage,
                        repeat=index % self.repeat)

    def spent(self) -> bool:
        """Whether a budget in force is spent: the batch's, its Fragola's, or one around it
        (an evaluation's, whose rows a batch runs on Ray). No input starts then."""
        meters = (*in_force(self.agent.fragola), *(() if self.meter is None else (self.meter,)))
        return any(meter.spent is not None for meter in meters)

    def finish_row(self, row: BatchRow) -> None:
        self.rows[row.index] = row
        if row.status in ("stopped", "not run"):
            return  # not finished: not written, runs again on resume
        if self.file is not None:
            self.file.write(row)
        if row.status == "done":
            self.done += 1
        else:
            self.failed += 1
        self.tokens += row.tokens or 0
        self.show()
        self.bar.update()  # tqdm redraws at most every mininterval (0.1 s)

    def show(self, refresh: bool = False) -> None:
        self.bar.set_postfix_str(f"done={self.done}, failed={self.failed}, "
                                 f"tokens={self.tokens:,}", refresh=refresh)

    def stop(self, at_once: bool) -> None:
        """The stopper ``agent.stop()`` (``at_once=False``) and ``agent.stop_sync()``
        (``True``) call: nothing more starts; at once, the running inputs are stopped too."""
        self.stopping = True
        if self.on_stop is not None:
            self.on_stop(at_once)
        if not at_once:
            return
        self.grading.stop()
        stop_at_once(self.running.values())

    async def grade(self, graders: Sequence[Any], concurrency: int) -> None:
        """Grade every finished row (those read back from a resume file too: the file keeps
        no grades), at most ``concurrency`` at once; ``stop_sync()`` cancels what is being
        graded and grades nothing more (those rows keep no grades)."""
        names = unique_names(graders)
        gate = asyncio.Semaphore(concurrency)

        async def one(row: BatchRow) -> None:
            async with gate:
                graded = graded_row(row.input, row.answer, row.fork, row.usage, row.seconds,
                                    repeat=row.repeat)
                grades = await self.grading.grades(graded, graders, names)
            if grades is None:
                return
            passed, score = passed_and_score(grades)
            self.rows[row.index] = dataclasses.replace(row, grades=grades, passed=passed,
                                                       score=score)

        await asyncio.gather(*(one(row) for row in list(self.rows.values())
                               if row.status in ("done", "failed")))

    def close(self) -> None:
        self.bar.close()
        if self.file is not None:
            self.file.close()

    def result(self) -> BatchResult:
        rows = [self.rows.get(index) or BatchRow(index=index, input=item, answer=None,
                                                 error=NOT_RUN, status="not run")
                for index, item in enumerate(self.items)]
        return BatchResult(rows, seconds=time.perf_counter() - self.started,
                           stopped=self.stopping)
