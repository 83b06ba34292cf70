"""How ``agent.batch(..., backend="ray")`` runs: start or join Ray, start the workers, feed
them chunks of inputs, turn each report into the batch's row (and its fork), run again what a
dead worker had not reported, and pass ``stop()``/``stop_sync()`` on. See ``backend`` for
what the user sees, ``connect`` for how Ray is started or joined, ``worker`` for the other side.

Limits: the Fragola's ``RateLimit`` is split evenly among the workers (``rpm / N``,
``tpm / N``; a ``RayBackend(fragola=...)`` factory sets its own). A ``budget`` is held by the
driver: the workers' calls are counted as their rows come back, and no chunk is sent once it
is spent; the chunks in flight finish, so a budget may be passed by at most those.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redact_text
from fragola_nb.core import limits
from fragola_nb.core.usage import Usage
from fragola_nb.experiments.batch.result import BatchRow
from fragola_nb.experiments.conversation import Talk
from fragola_nb.experiments.ray.backend import RayBackend, import_ray
from fragola_nb.experiments.ray.connect import connect, quiet_start
from fragola_nb.experiments.ray.worker import BatchWorker, Definition, RowReport
from fragola_nb.experiments.shared import NOT_RUN_BUDGET, STOPPED, error_line, row_tokens

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.experiments.batch.run import Batch

__all__ = ["run_on_ray"]

_log = logging.getLogger("fragola_nb")

STOP_GRACE = 5.0
"""Seconds ``stop_sync()`` leaves the workers to report their stopped inputs before their
streams are cancelled."""
IN_FLIGHT = 2
"""Chunks each worker is given at once, so it never waits for the next."""


@dataclass
class _Slot:
    """One worker place: its actor (None once it is gone for good) and ``up``, the task
    that says whether that actor became ready."""

    actor: Any
    up: asyncio.Task[bool]
    generation: int = 0
    ever_ready: bool = False


class _RayRun:
    def __init__(self, batch: Batch, backend: RayBackend, concurrency: int, ray: Any,
                 definition: Definition) -> None:
        self.batch, self.backend, self.ray = batch, backend, ray
        self.concurrency = concurrency
        self.queue: deque[int] = deque(i for i in range(len(batch.items))
                                       if i not in batch.rows)
        self.attempts: dict[int, int] = {}
        self.streams: set[Any] = set()
        self.slots: list[_Slot] = []
        self.started = 0
        self.last_death = ""
        self.loop = asyncio.get_running_loop()
        self.remote = ray.remote(BatchWorker).options(num_cpus=backend.num_cpus,
                                                      max_restarts=0)
        self.definition = ray.put(_rate_shared(definition, self.sizes()[0]))

    # The sizes: enough chunks to balance the workers, none bigger than 2x concurrency.
    def sizes(self) -> tuple[int, int]:
        todo = len(self.queue)
        if self.backend.workers is not None:
            workers = self.backend.workers
        else:
            # The cluster's CPUs, not those free this instant: an earlier batch's workers
            # may still be giving theirs back. A worker that cannot start yet joins later.
            cpus = self.ray.cluster_resources().get("CPU", 1.0)
            workers = max(1, int(cpus // self.backend.num_cpus))
        chunk = self.backend.chunk_size or max(1, min(2 * self.concurrency,
                                                      -(-todo // (workers * 4))))
        return max(1, min(workers, -(-todo // chunk))), chunk

    def new_slot(self) -> _Slot:
        actor = self.new_actor()
        slot = _Slot(actor, asyncio.ensure_future(self.wait_ready(actor)))
        return slot

    def new_actor(self) -> Any:
        self.started += 1
        return self.remote.remote(self.definition, self.concurrency)

    async def wait_ready(self, actor: Any) -> bool:
        """True once ``actor`` has made its ``Fragola`` and loaded the agent; False if it
        could not start within ``ready_timeout`` (no CPU for it); a ``BadUsage`` if it could
        not set up (no key, a module it cannot import)."""
        try:
            await asyncio.wait_for(_awaited(actor.ready.remote()), self.backend.ready_timeout)
        except TimeoutError:
            with contextlib.suppress(Exception):
                self.ray.kill(actor)
            return False
        except self.ray.exceptions.RayError as exc:
            cause = _cause(exc)
            if "no API key" in cause:
                cause += (" (each worker reads OPENAI_API_KEY from its own environment; no "
                          "key is ever sent to the workers)")
            if "ModuleNotFoundError" in cause:
                cause += (" (the workers import a tool, listener or brain by its module: "
                          "install it on the workers, pass RayBackend(init={'runtime_env': "
                          "{'py_modules': [module]}}), or send it by value with "
                          "ray.cloudpickle.register_pickle_by_value(module))")
            raise BadUsage(f"the Ray workers could not set up the agent: {cause}") from exc
        return True

    async def first_ready(self) -> None:
        """Wait until one worker is ready (the others join as they come), or the batch is
        stopped meanwhile; the first that cannot set up ends the batch with its reason."""
        pending: set[asyncio.Task[bool]] = {slot.up for slot in self.slots}
        while pending and not self.batch.stopping:
            done, pending = await asyncio.wait(pending, timeout=0.2,
                                               return_when=asyncio.FIRST_COMPLETED)
            for slot in self.slots:
                if slot.up in done and slot.up.result():
                    slot.ever_ready = True
            if any(slot.ever_ready for slot in self.slots):
                return
        if not self.batch.stopping:
            raise BadUsage(self.late_line(len(self.slots), f"did not start within "
                                          f"{self.backend.ready_timeout:g} s")
                           + ": ask for fewer workers= or a smaller num_cpus=")

    def late_line(self, late: int, what: str) -> str:
        free = self.ray.available_resources().get("CPU", 0)
        return (f"{late} of {len(self.slots)} Ray workers {what} (the cluster has {free:g} "
                f"CPUs free, each worker asks num_cpus={self.backend.num_cpus:g})")

    async def slot_ready(self, slot: _Slot) -> bool:
        """Whether ``slot`` has a ready worker; a feeder of a worker still starting waits,
        unless nothing is left to give it."""
        while not slot.up.done():
            if not self.queue or self.batch.stopping or slot.actor is None:
                return False
            await asyncio.wait({slot.up}, timeout=0.2)
        try:
            ready = slot.up.result()
        except BadUsage as exc:  # a replacement that could not set up
            self.last_death, ready = str(exc), False
        slot.ever_ready = slot.ever_ready or ready
        if not ready:
            slot.actor = None
        return ready and slot.actor is not None  # None: gone, and not replaced

    async def run(self) -> None:
        workers, chunk = self.sizes()
        self.slots = [self.new_slot() for _ in range(workers)]
        try:
            await self.first_ready()
            self.batch.show(refresh=True)
            self.batch.on_stop = self.stop
            feeders = [asyncio.ensure_future(self.feed(slot, chunk))
                       for slot in self.slots for _ in range(IN_FLIGHT)]
            try:
                await asyncio.gather(*feeders)
            except BaseException:
                for feeder in feeders:
                    feeder.cancel()
                await asyncio.wait(feeders)
                raise
            if self.queue and self.batch.spent():  # the budget: nothing more was started
                for index in self.queue:
                    self.batch.finish_row(self.budget_row(index))
                self.queue.clear()
            if self.queue and not self.batch.stopping:  # every worker is gone
                self.lost(list(self.queue), final=True)
                self.queue.clear()
            late = sum(1 for slot in self.slots if not slot.ever_ready)
            if late and not self.batch.stopping:
                _log.warning("fragola_nb: %s; the batch ran on the others",
                             self.late_line(late, "never started"))
        finally:
            self.batch.on_stop = None
            for slot in self.slots:
                slot.up.cancel()
                if slot.up.done() and not slot.up.cancelled():
                    slot.up.exception()  # a late worker's set-up error: seen, not logged
                if slot.actor is not None:
                    with contextlib.suppress(Exception):
                        self.ray.kill(slot.actor)

    async def feed(self, slot: _Slot, size: int) -> None:
        errors = self.ray.exceptions
        while (self.queue and not self.batch.stopping and not self.batch.spent()
               and await self.slot_ready(slot)):
            if not self.queue:  # taken by another feeder meanwhile
                return
            chunk = [self.queue.popleft() for _ in range(min(size, len(self.queue)))]
            actor, generation = slot.actor, slot.generation
            pairs = [(index, self.batch.items[index]) for index in chunk]
            stream = actor.run.options(num_returns="streaming").remote(pairs)
            self.streams.add(stream)
            reported: set[int] = set()
            try:
                async for ref in stream:
                    reports: list[RowReport] = await ref
                    for report in reports:
                        reported.add(report.index)
                        self.take(report)
            except errors.TaskCancelledError:
                if self.batch.stopping:  # stop_sync(): what had not reported was running
                    for index in chunk:
                        if index not in reported:
                            self.batch.finish_row(self.stopped_row(index))
                    return
                self.lost([i for i in chunk if i not in reported], cause="cancelled")
            except errors.RayError as exc:  # the worker died, or its task failed outright
                self.last_death = _cause(exc)
                self.lost([i for i in chunk if i not in reported])
                await self.replace(slot, generation)
            except BaseException:
                self.queue.extendleft(reversed([i for i in chunk if i not in reported]))
                with contextlib.suppress(Exception):
                    self.ray.cancel(stream)
                raise
            finally:
                self.streams.discard(stream)

    def take(self, report: RowReport) -> None:
        if report.status == "not run":  # stopped before it started: runs again on resume
            return
        fork = self.fork(report)
        usage = fork.usage if fork is not None else Usage()
        # The workers' calls were not metered where they ran: the batch's budget and the
        # Fragola's count them here, as each row comes back; a simulated user's calls too
        # (kept apart in the row, paid all the same), as they are counted locally.
        fragola = self.batch.agent.fragola
        limits.count(fragola, usage)
        if report.user_calls:
            limits.count(fragola, Usage(report.user_calls, fragola.prices))
        self.batch.finish_row(BatchRow(
            index=report.index, input=self.batch.items[report.index], answer=report.answer,
            error=report.error, status=report.status,  # type: ignore[arg-type]
            tokens=row_tokens(usage), seconds=report.seconds, fork=fork, usage=usage,
            repeat=report.index % self.batch.repeat,
            talk=None if fork is None else Talk(fork.state, report.ended, report.turns,
                                                report.user_calls)))

    def fork(self, report: RowReport) -> Agent | None:
        """``row.fork``, made here from what the worker's fork held."""
        if report.messages is None:
            return None
        from fragola_nb.sessions.load import pending_call

        base, agent = self.batch.base, self.batch.agent
        fork = base.detached_fork(f"{agent.name}-batch{report.index}")
        fork.fork_of = agent.id
        snapshot = fork.snapshot()
        for message in report.messages:  # after the base's, in the fork's own history
            snapshot.history.append(message)
        for namespace, value in report.stores:  # what the tools changed on the worker
            store = fork.get_store(namespace)
            if store is not None:
                store.set(value)
        who = f"agent {fork.name!r}"
        pending = {call["id"]: pending_call(call, tool, who) for call in report.pending
                   if (tool := fork.tool_named(call["name"])) is not None}
        fork.restore(dataclasses.replace(
            snapshot, usage=Usage(report.calls, agent.fragola.prices, report.tools),
            step_count=report.step_count, outcome=report.outcome,  # type: ignore[arg-type]
            status=report.agent_status, pending=pending))  # type: ignore[arg-type]
        return fork

    def budget_row(self, index: int) -> BatchRow:
        return BatchRow(index=index, input=self.batch.items[index], answer=None,
                        error=NOT_RUN_BUDGET, status="not run")

    def stopped_row(self, index: int) -> BatchRow:
        return BatchRow(index=index, input=self.batch.items[index], answer=None,
                        error=STOPPED, status="stopped")

    def lost(self, indices: list[int], *, final: bool = False, cause: str = "") -> None:
        """Inputs whose worker went away before reporting them: run again while they have
        retries left, else failed rows that say so."""
        why = cause or self.last_death or "no worker left"
        for index in indices:
            if final:  # never sent: every worker was gone
                error = f"not run: no Ray worker was left to run it (the last died: {why})"
            else:
                tries = self.attempts[index] = self.attempts.get(index, 0) + 1
                if tries <= self.backend.retries:
                    self.queue.appendleft(index)
                    continue
                error = (f"worker lost: the Ray worker running this input died ({tries} "
                         f"time{'s' if tries > 1 else ''}): {why}")
            self.batch.finish_row(BatchRow(index=index, input=self.batch.items[index],
                                            answer=None, error=error[:500], status="failed"))

    async def replace(self, slot: _Slot, generation: int) -> None:
        """A fresh actor in place of the dead one (once per death, however many streams
        saw it), while the batch goes on and the restarts stay within bounds; the slot's
        feeders wait until it is ready."""
        if slot.generation != generation:
            return
        slot.generation += 1
        with contextlib.suppress(Exception):
            self.ray.kill(slot.actor)
        limit = len(self.slots) * (self.backend.retries + 1)
        if self.batch.stopping or not self.queue or self.started >= limit:
            slot.actor = None
            return
        slot.actor = self.new_actor()
        slot.up.cancel()
        slot.up = asyncio.ensure_future(self.wait_ready(slot.actor))

    def stop(self, at_once: bool) -> None:
        """From ``Batch.stop``, on any thread: the workers start nothing more; at once,
        they stop their running inputs, and streams still open after ``STOP_GRACE`` s are
        cancelled."""
        for slot in list(self.slots):
            if slot.actor is not None:
                with contextlib.suppress(Exception):
                    slot.actor.stop.remote(at_once)
        if at_once:
            self.loop.call_soon_threadsafe(self.loop.call_later, STOP_GRACE, self.cancel)

    def cancel(self) -> None:
        for stream in list(self.streams):
            with contextlib.suppress(Exception):
                self.ray.cancel(stream)


def _rate_shared(definition: Definition, workers: int) -> Definition:
    """The Fragola's rate limit is the whole batch's: each of ``workers`` gets its share."""
    limit = definition.recipe.rate_limit
    if limit is None:
        return definition
    recipe = dataclasses.replace(definition.recipe, rate_limit=limit.split(workers))
    return dataclasses.replace(definition, recipe=recipe)


async def run_on_ray(batch: Batch, backend: RayBackend, concurrency: int,
                     definition: Definition) -> None:
    """Run what ``batch`` has left on Ray workers; rows arrive through ``batch.finish_row``."""
    if len(batch.rows) == len(batch.items):  # all read back from the resume file
        return
    ray = import_ray()
    try:
        starting = not ray.is_initialized()
        if starting:
            batch.bar.set_postfix_str("starting Ray…", refresh=True)  # ray.init takes seconds
        began = time.perf_counter()
        with quiet_start():
            logs = connect(ray, backend)
        if starting:
            _restart_clock(batch, time.perf_counter() - began, logs)
        batch.bar.set_postfix_str("starting the Ray workers…", refresh=True)
        await _RayRun(batch, backend, concurrency, ray, definition).run()
    finally:
        batch.show(refresh=True)


def _restart_clock(batch: Batch, seconds: float, logs: str | None) -> None:
    """Ray took ``seconds`` to start: say so apart, and start the bar's clock now, so its
    elapsed time and its rate per input count the batch, not Ray's start-up (5 inputs read
    "27 s/input" when Ray took 15 s of it). A Ray started here runs until the process ends
    and leaves its logs in the temp dir: say where."""
    bar = batch.bar
    if getattr(bar, "disable", True):
        if logs:
            _log.info("fragola_nb: started a local Ray; its logs are in %s", logs)
        return
    now = bar._time()  # tqdm's own clock
    bar.start_t = bar.last_print_t = now
    bar.write(f"Ray started in {seconds:.0f} s (the bar counts from then)")
    if logs:
        bar.write(f"It runs until this Python process (the kernel) ends, or ray.shutdown(); "
                  f"its logs stay after, in {logs}")


async def _awaited(ref: Any) -> Any:
    return await ref


_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Usage|Refused|Exit)): (.+)$")


def _cause(exc: BaseException) -> str:
    """The one line that says why: the last ``SomeError: text`` line of a Ray error (which
    carries the worker's whole traceback), credentials redacted."""
    lines = str(exc).splitlines()
    for line in reversed(lines):
        if _ERROR_LINE.match(line.strip()):
            return redact_text(line.strip().removeprefix("fragola_nb.base.errors."))[:300]
    return error_line(exc)[:300]
