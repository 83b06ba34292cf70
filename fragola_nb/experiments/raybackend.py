"""``agent.batch(inputs, backend="ray")``: the same batch, run by Ray workers.

>>> result = await agent.batch(prompts, backend="ray")                  # doctest: +SKIP
>>> cluster = RayBackend(address="auto", workers=8)                      # doctest: +SKIP
>>> result = await agent.batch(prompts, backend=cluster)                 # doctest: +SKIP

What is sent (``rayworker.Definition``): the agent's snapshot as a session document (options,
instructions, the history prefix, stores), its tools and listeners (Ray's cloudpickle sends a
function of an importable module by import path, any other by value), and how to make the
worker's ``Fragola``: the same model, base URL and non-secret client options, with the key
read from the worker's environment; a scripted model is started again on each worker with
the same brain; ``RayBackend(fragola=factory)`` runs ``factory()`` on each worker instead
(``fragola=Fragola.local`` starts a llama.cpp server per worker). Credentials are never sent:
not the API key, not a header or a model setting that ``fragola_nb.redact`` takes for one
(each left behind is named in a warning). Anything that cannot be sent is a ``BadUsage``
naming it before Ray is even started.

How it runs: ``ray.init()`` (no address) starts a local Ray instance, or connects to the
cluster ``RAY_ADDRESS`` names; ``address=`` connects to that cluster; a Ray already
initialised in this process is used as it is. ``workers`` actors are started (default: as
many as the cluster's free CPUs allow at ``num_cpus`` each), each with its own ``Fragola``
and event loop, running at most ``concurrency`` inputs at once. Inputs go out in chunks of
``chunk_size``, two chunks per worker in flight, and each input's row comes back as soon as
it ends (a Ray streaming generator): the progress bar, the resume file and ``stop()`` work as
for the local backend. A row's ``fork`` is rebuilt here, on this ``Fragola``, from the
messages, usage and state its worker sent back (its stores are the prefix's).

When a worker dies (a crash, a killed process, a lost node), the inputs it had not reported
are run again on a fresh worker, up to ``retries`` more times each; past that, each is a
``failed`` row saying so. No input is lost silently: every input ends as a row.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import math
import re
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import BadUsage, SessionError
from ..events import is_transient
from ..redact import redact_text, scrub
from ..usage import Usage
from .batchrows import BatchRow
from .comparison import error_line, row_tokens
from .rayworker import BatchWorker, Definition, Recipe, RowReport

if TYPE_CHECKING:
    from ..agent import Agent
    from ..fragola import Fragola
    from .batch import _Batch

__all__ = ["RayBackend", "backend_of", "definition_of", "run_on_ray"]

_log = logging.getLogger("fragola_nb")

STOP_GRACE = 5.0
"""Seconds ``stop_sync()`` leaves the workers to report their stopped inputs before their
streams are cancelled."""
IN_FLIGHT = 2
"""Chunks each worker is given at once, so it never waits for the next."""


@dataclass(frozen=True)
class RayBackend:
    """Where and how ``agent.batch(..., backend=RayBackend(...))`` runs on Ray.

    ``address``: None starts a local Ray instance (or joins ``RAY_ADDRESS``); ``"auto"``, a
    ``host:port`` or a ``ray://host:10001`` URL connects to that cluster. ``workers``: Ray
    actors to start (default: the cluster's free CPUs / ``num_cpus``). ``num_cpus``: CPUs
    each worker reserves (a batch of API calls mostly waits: 0.25 packs four on a CPU).
    ``fragola``: a function each worker calls to make its ``Fragola`` (it must pickle).
    ``retries``: times an input whose worker died is run again. ``chunk_size``: inputs sent
    to a worker at once (default: from the number of inputs and workers). ``init``: more
    ``ray.init`` options (``runtime_env``, ``num_cpus``...), used when this call starts Ray.
    ``ready_timeout``: seconds to wait for the workers to start.
    """

    address: str | None = None
    workers: int | None = None
    num_cpus: float = 1.0
    fragola: Callable[[], Fragola] | None = None
    retries: int = 2
    chunk_size: int | None = None
    init: Mapping[str, Any] = field(default_factory=dict)
    ready_timeout: float = 120.0

    def __post_init__(self) -> None:
        def whole(name: str, value: Any, low: int) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise BadUsage(f"RayBackend: {name} must be a whole number >= {low}, got "
                               f"{value!r}")

        if self.address is not None and not isinstance(self.address, str):
            raise BadUsage(f"RayBackend: address must be a string or None, got "
                           f"{type(self.address).__name__}")
        if self.workers is not None:
            whole("workers", self.workers, 1)
        if self.chunk_size is not None:
            whole("chunk_size", self.chunk_size, 1)
        whole("retries", self.retries, 0)
        for name in ("num_cpus", "ready_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    0 < value < math.inf):
                raise BadUsage(f"RayBackend: {name} must be a number > 0, got {value!r}")
        if self.fragola is not None and not callable(self.fragola):
            raise BadUsage("RayBackend: fragola must be a function returning a Fragola")
        if not isinstance(self.init, Mapping):
            raise BadUsage("RayBackend: init must be a dict of ray.init options")


def backend_of(backend: Any) -> RayBackend | None:
    """None for ``"local"``; the ``RayBackend`` for ``"ray"`` or one given."""
    if isinstance(backend, RayBackend):
        return backend
    if backend == "local":
        return None
    if backend == "ray":
        return RayBackend()
    raise BadUsage(f'backend must be "local", "ray" or a RayBackend(...), got {backend!r}')


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BadUsage('backend="ray" needs Ray: pip install "fragola_nb[ray]"') from None
    return ray


# -- what is sent -----------------------------------------------------------------------------

def definition_of(base: Agent, name: str, backend: RayBackend) -> Definition:
    """What the workers are sent, every part checked to pickle; ``base`` is the batch's
    snapshot (its credentials in model settings are dropped here, with a warning)."""
    pickle = import_ray().cloudpickle
    recipe = _recipe(base.fragola, backend)
    base = base._copy(base.name)  # the rows' forks are made from ``base``: it keeps them all
    settings, removed = scrub(base.options.model_settings)
    if removed:
        base.options.model_settings = settings
        _left_behind(f"agent {name!r}'s model_settings", removed)
    listeners: dict[str, Any] = {}
    for fns in base._listeners._by_event.values():
        for fn in fns:
            if not is_transient(fn):  # a notebook panel's listener: a view, not the agent
                listeners[getattr(fn, "__qualname__", type(fn).__qualname__)] = fn
    parts: list[tuple[str, Any]] = [(f"tool {t.name!r}", t) for t in base.options.tools]
    parts += [(f"listener {key!r}", fn) for key, fn in listeners.items()]
    parts += [("RayBackend(fragola=...)", recipe.factory)] if recipe.factory else []
    parts += [("the scripted model's brain", recipe.scripted.get("brain"))
              ] if recipe.scripted else []
    for what, part in parts:
        try:
            pickle.dumps(part)
        except Exception as exc:
            raise BadUsage(
                f"{what} cannot be sent to Ray workers ({error_line(exc)}): define it in a "
                "module the workers can import (it is then sent by import path), or keep "
                "what it uses picklable (no open files, locks, sockets or clients)") from exc
    from ..sessions import session_to_json

    try:
        session = session_to_json(base, listeners=True)
    except SessionError as exc:
        raise BadUsage(f"the agent cannot be sent to Ray workers: {exc}") from None
    return Definition(session, tuple(base.options.tools), listeners, recipe, name)


def _recipe(fragola: Fragola, backend: RayBackend) -> Recipe:
    common = Recipe(fragola.model, json_mode=fragola.json_mode,
                    json_found=fragola.json_modes, prices=dict(fragola.prices))
    if backend.fragola is not None:
        return replace(common, factory=backend.fragola)
    scripted = fragola.scripted_model
    if scripted is not None:
        left = len(scripted._script) + len(scripted._agent_scripts)
        if left:
            raise BadUsage(
                "a scripted model with a script answers in order from this kernel; each Ray "
                "worker starts its own: give it a brain= (a function of the request) instead, "
                "or pass RayBackend(fragola=...)")
        manner = {"brain": scripted.brain, "chunk_size": scripted.chunk_size,
                  "chunk_delay": scripted.chunk_delay, "model_name": scripted.model_name,
                  "refuse": sorted(scripted.refuse)}
        return replace(common, scripted=manner)
    client = fragola._model
    why = ("it serves on this machine with its own key: pass RayBackend(fragola=Fragola.local) "
           "to start one on each worker" if fragola.local_server is not None else
           "its client= or http_client= cannot be made again elsewhere"
           if client._given is not None or "http_client" in client._options else
           "it records in this process only" if client.wrap_http is not None else None)
    if why:
        raise BadUsage(f"this Fragola cannot be rebuilt on Ray workers ({why}); pass "
                       "RayBackend(fragola=...), a function that makes the workers' Fragola")
    options, removed = scrub(dict(client._options))
    if removed:
        _left_behind("the Fragola's client options", removed)
    base_url = client._base_url
    if base_url is not None and redact_text(base_url) != base_url:
        _left_behind("the Fragola's base_url", ["base_url"])
        base_url = None
    return replace(common, base_url=base_url, options=options)


def _left_behind(what: str, paths: list[str]) -> None:
    _log.warning("fragola_nb: %s %s not sent to Ray workers (credentials are never sent): "
                 "set them in the workers' environment, or pass RayBackend(fragola=...)",
                 what, ", ".join(paths))


# -- running ----------------------------------------------------------------------------------

def connect(ray: Any, backend: RayBackend) -> None:
    """Start or join Ray. Ray's own processes die with the thread that started them, so
    off the main thread (``run_sync``'s loop, a thread of the user's) it is started on a
    thread of ours that never ends."""
    if ray.is_initialized():
        return
    options = {"logging_level": logging.WARNING, **backend.init}
    if threading.current_thread() is threading.main_thread():
        ray.init(address=backend.address, **options)
        return
    started: concurrent.futures.Future[None] = concurrent.futures.Future()

    def keep() -> None:
        try:
            ray.init(address=backend.address, **options)
        except BaseException as exc:
            started.set_exception(exc)
            return
        started.set_result(None)
        threading.Event().wait()  # Ray lives as long as this thread: until the process ends

    threading.Thread(target=keep, name="fragola_nb-ray", daemon=True).start()
    started.result()


@dataclass
class _Slot:
    """One worker place: its actor (None once it could not be replaced)."""

    actor: Any
    generation: int = 0


class _RayRun:
    def __init__(self, batch: _Batch, backend: RayBackend, concurrency: int, ray: Any,
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
        self.definition = ray.put(definition)

    # The sizes: enough chunks to balance the workers, none bigger than 2x concurrency.
    def sizes(self) -> tuple[int, int]:
        todo = len(self.queue)
        if self.backend.workers is not None:
            workers = self.backend.workers
        else:
            free = self.ray.available_resources().get("CPU", 1.0)
            workers = max(1, int(free // self.backend.num_cpus))
        chunk = self.backend.chunk_size or max(1, min(2 * self.concurrency,
                                                      -(-todo // (workers * 4))))
        return max(1, min(workers, -(-todo // chunk))), chunk

    def new_actor(self) -> Any:
        self.started += 1
        return self.remote.remote(self.definition, self.concurrency)

    async def ready(self, actors: list[Any]) -> None:
        waits = [asyncio.ensure_future(_awaited(actor.ready.remote())) for actor in actors]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), self.backend.ready_timeout)
        except TimeoutError:
            free = self.ray.available_resources().get("CPU", 0)
            late = sum(1 for wait in waits if not wait.done() or wait.cancelled())
            raise BadUsage(
                f"{late} of {len(actors)} Ray workers did not start within "
                f"{self.backend.ready_timeout:g} s (the cluster has {free:g} CPUs free, each "
                f"worker asks num_cpus={self.backend.num_cpus:g}): ask for fewer workers= or "
                "a smaller num_cpus=") from None
        except self.ray.exceptions.RayError as exc:
            cause = _cause(exc)
            if "ModuleNotFoundError" in cause:
                cause += (" (the workers import a tool, listener or brain by its module: "
                          "install it on the workers, pass RayBackend(init={'runtime_env': "
                          "{'py_modules': [module]}}), or send it by value with "
                          "ray.cloudpickle.register_pickle_by_value(module))")
            raise BadUsage(f"the Ray workers could not set up the agent: {cause}") from exc

    async def run(self) -> None:
        workers, chunk = self.sizes()
        self.slots = [_Slot(self.new_actor()) for _ in range(workers)]
        try:
            await self.ready([slot.actor for slot in self.slots])
            self.batch._show(refresh=True)
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
            if self.queue and not self.batch.stopping:  # every worker is gone
                self.lost(list(self.queue), final=True)
                self.queue.clear()
        finally:
            self.batch.on_stop = None
            for slot in self.slots:
                if slot.actor is not None:
                    with contextlib.suppress(Exception):
                        self.ray.kill(slot.actor)

    async def feed(self, slot: _Slot, size: int) -> None:
        errors = self.ray.exceptions
        while self.queue and not self.batch.stopping and slot.actor is not None:
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
                            self.batch._finish(self.stopped_row(index))
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
        self.batch._finish(BatchRow(
            index=report.index, input=self.batch.items[report.index], answer=report.answer,
            error=report.error, status=report.status,  # type: ignore[arg-type]
            tokens=row_tokens(usage), seconds=report.seconds, fork=fork, usage=usage))

    def fork(self, report: RowReport) -> Agent | None:
        """``row.fork``, made here from what the worker's fork held."""
        if report.messages is None:
            return None
        from ..sessions.restore import pending_call

        base, agent = self.batch.base, self.batch.agent
        fork = base._copy(f"{agent.name}-batch{report.index}")
        fork.fork_of = agent.id
        for message in report.messages:
            fork._history.append(message)
        fork._usage = Usage(report.calls, agent.fragola.prices)
        fork._step_count, fork._outcome = report.step_count, report.outcome  # type: ignore[assignment]
        fork._status = report.agent_status  # type: ignore[assignment]
        who = f"agent {fork.name!r}"
        for call in report.pending:
            tool = fork.tool_named(call["name"])
            if tool is not None:
                fork._pending[call["id"]] = pending_call(call, tool, who)
        return fork

    def stopped_row(self, index: int) -> BatchRow:
        from .batch import STOPPED

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
            self.batch._finish(BatchRow(index=index, input=self.batch.items[index],
                                        answer=None, error=error[:500], status="failed"))

    async def replace(self, slot: _Slot, generation: int) -> None:
        """A fresh actor in place of the dead one (once per death, however many streams
        saw it), while the batch goes on and the restarts stay within bounds."""
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
        try:
            await self.ready([slot.actor])
        except BadUsage as exc:
            self.last_death = str(exc)
            slot.actor = None

    def stop(self, at_once: bool) -> None:
        """From ``_Batch.stop``, on any thread: the workers start nothing more; at once,
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


async def run_on_ray(batch: _Batch, backend: RayBackend, concurrency: int,
                     definition: Definition) -> None:
    """Run what ``batch`` has left on Ray workers; rows arrive through ``batch._finish``."""
    if len(batch.rows) == len(batch.items):  # all read back from the resume file
        return
    ray = import_ray()
    try:
        if not ray.is_initialized():
            batch.bar.set_postfix_str("starting Ray…", refresh=True)  # ray.init takes seconds
        connect(ray, backend)
        batch.bar.set_postfix_str("starting the Ray workers…", refresh=True)
        await _RayRun(batch, backend, concurrency, ray, definition).run()
    finally:
        batch._show(refresh=True)


async def _awaited(ref: Any) -> Any:
    return await ref


_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Usage|Refused|Exit)): (.+)$")


def _cause(exc: BaseException) -> str:
    """The one line that says why: the last ``SomeError: text`` line of a Ray error (which
    carries the worker's whole traceback), credentials redacted."""
    lines = str(exc).splitlines()
    for line in reversed(lines):
        if _ERROR_LINE.match(line.strip()):
            return redact_text(line.strip())[:300]
    return error_line(exc)[:300]
