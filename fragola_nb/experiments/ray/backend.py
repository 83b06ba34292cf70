"""``agent.batch(inputs, backend="ray")``: the same batch, run by Ray workers.

>>> result = await agent.batch(prompts, backend="ray")                  # doctest: +SKIP
>>> cluster = RayBackend(address="auto", workers=8)                      # doctest: +SKIP
>>> result = await agent.batch(prompts, backend=cluster)                 # doctest: +SKIP

What is sent (``rayworker.Definition``): the agent's snapshot as a session document (options,
instructions, the history prefix, stores), its tools, listeners and hooks (Ray's cloudpickle
sends a function of an importable module by import path, any other by value; each worker
puts the hooks on again, as ``load_session(..., hooks=...)`` does), and how to make the
worker's ``Fragola``: the same model, base URL and non-secret client options, with the key
read from the worker's environment; a scripted model is started again on each worker with
the same brain; ``RayBackend(fragola=factory)`` runs ``factory()`` on each worker instead
(``fragola=Fragola.local`` starts a llama.cpp server per worker). Credentials are never sent:
not the API key, not a header or a model setting that ``fragola_nb.base.redact`` takes for one
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

import logging
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage, SessionError
from fragola_nb.base.redact import redact_text, redacted, scrub
from fragola_nb.core.events import is_transient
from fragola_nb.core.hooks import hook_keys
from fragola_nb.experiments.ray.worker import Definition, Recipe
from fragola_nb.experiments.shared import error_line
from fragola_nb.models.client import NO_KEY

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.fragola import Fragola

__all__ = ["RayBackend", "backend_of", "definition_of", "import_ray"]

_log = logging.getLogger("fragola_nb")


@dataclass(frozen=True)
class RayBackend:
    """Where and how ``agent.batch(..., backend=RayBackend(...))`` runs on Ray.

    ``address``: None joins ``RAY_ADDRESS`` or the last cluster ``ray start`` started on
    this machine, else starts a local Ray instance; ``"local"`` always starts one; ``"auto"``,
    a ``host:port`` or a ``ray://host:10001`` URL connects to that cluster. ``workers``: Ray
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

    def __repr__(self) -> str:
        # ``init`` may carry a runtime_env with keys in its env_vars, ``address`` a password:
        # never shown.
        shown = {**vars(self), "init": redacted(dict(self.init)),
                 "address": None if self.address is None else redact_text(self.address)}
        return "RayBackend(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


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
    base = base.detached_fork(base.name)  # the rows' forks are made from it: it keeps them all
    settings, removed = scrub(base.options.model_settings)
    if removed:
        base.options.model_settings = settings
        _left_behind(f"the model_settings of agent {name!r}", removed)
    listeners: dict[str, Any] = {}
    # A hook's listeners are not sent: the hook is, and puts them on again on the worker.
    for fns in base.own_listeners().values():
        for fn in fns:
            if not is_transient(fn):  # a notebook panel's listener: a view, not the agent
                listeners[getattr(fn, "__qualname__", type(fn).__qualname__)] = fn
    # Under the key the session document saves each hook by (its name, else __qualname__).
    used = base.hooks_used()
    hooks = {key: hook for key, (_, hook) in zip(hook_keys(used), used, strict=True)}
    for tool in base.options.tools:
        if getattr(tool.handler, "__module__", None) == "fragola_nb.presets.mcptools":
            raise BadUsage(
                f"tool {tool.name!r} comes from an MCP connection of this process "
                "(mcp_tools): Ray workers cannot use it; run this batch with the local backend")
    parts: list[tuple[str, Any]] = [(f"tool {t.name!r}", t) for t in base.options.tools]
    parts += [(f"listener {key!r}", fn) for key, fn in listeners.items()]
    parts += [(f"hook {key!r}", hook) for key, hook in hooks.items()]
    parts += [("RayBackend(fragola=...)", recipe.factory)] if recipe.factory else []
    parts += [("the scripted model's brain", recipe.scripted.get("brain"))
              ] if recipe.scripted else []
    for what, part in parts:
        try:
            data = pickle.dumps(part)
        except Exception as exc:
            raise BadUsage(
                f"{what} cannot be sent to Ray workers ({error_line(exc)}): define it in a "
                "module the workers can import (it is then sent by import path), or keep "
                "what it uses picklable (no open files, locks, sockets or clients)") from exc
        text = data.decode("latin-1")  # what Ray would send, bytes as they are
        if redact_text(text) != text:
            raise BadUsage(
                f"{what} would carry a credential to the Ray workers (a value shaped like a "
                "key, in what it refers to): read it from os.environ where it runs, so that "
                "each worker uses its own")
    from fragola_nb.sessions import session_to_json

    try:
        session = session_to_json(base, listeners=True)
    except SessionError as exc:
        raise BadUsage(f"the agent cannot be sent to Ray workers: {exc}") from None
    return Definition(session, tuple(base.options.tools), listeners, recipe, name, hooks)


def _recipe(fragola: Fragola, backend: RayBackend) -> Recipe:
    common = Recipe(fragola.model, json_mode=fragola.json_mode,
                    json_found=fragola.json_modes, prices=dict(fragola.prices),
                    rate_limit=fragola.client_settings().rate_limit)
    if backend.fragola is not None:
        return replace(common, factory=backend.fragola)
    scripted = fragola.scripted_model
    if scripted is not None and type(scripted.brain).__name__ == "Replayer":
        raise BadUsage(
            "this Fragola cannot be rebuilt on Ray workers (it replays a recording held in this "
            "process); pass RayBackend(fragola=lambda: Fragola.replay(PATH)) so that each "
            "worker reads the recording itself")
    if scripted is not None:
        left = scripted.pending + scripted.agent_scripts
        if left:
            raise BadUsage(
                "a scripted model with a script answers in order from this kernel; each Ray "
                "worker starts its own: give it a brain= (a function of the request) instead, "
                "or pass RayBackend(fragola=...)")
        manner = {"brain": scripted.brain, "chunk_size": scripted.chunk_size,
                  "chunk_delay": scripted.chunk_delay, "model_name": scripted.model_name,
                  "refuse": sorted(scripted.refuse)}
        return replace(common, scripted=manner)
    client = fragola.client_settings()
    why = ("it serves on this machine with its own key: pass RayBackend(fragola=Fragola.local) "
           "to start one on each worker" if fragola.local_server is not None else
           "its client= or http_client= cannot be made again elsewhere"
           if client.given_client else
           "it records in this process only" if fragola.recording else None)
    if why:
        raise BadUsage(f"this Fragola cannot be rebuilt on Ray workers ({why}); pass "
                       "RayBackend(fragola=...), a function that makes the workers' Fragola")
    options, removed = scrub(client.options)
    if removed:
        _left_behind("the Fragola's client options", removed)
    if client.api_key not in (NO_KEY, os.environ.get("OPENAI_API_KEY", "").strip()):
        _left_behind("the Fragola's", ["api_key"])  # given by hand: the workers use theirs
    base_url = client.base_url
    if base_url is not None and redact_text(base_url) != base_url:
        _left_behind("the Fragola's base_url", ["base_url"])
        base_url = None
    return replace(common, base_url=base_url, options=options)


def _left_behind(what: str, paths: list[str]) -> None:
    _log.warning("fragola_nb: not sent to Ray workers (credentials are never sent): %s %s; "
                 "the workers use what their own environment holds (OPENAI_API_KEY...), or "
                 "pass RayBackend(fragola=...)", what, ", ".join(paths))
