"""Start or join Ray for ``agent.batch(..., backend="ray")`` (and ``agent.evaluate``'s rows,
run as batches): on loopback only when it starts a Ray of its own, an address that nothing
answers on said in one line, Ray's start-up notice kept out of the cell. ``run`` uses it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import logging
import os
import socket
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redact_text

if TYPE_CHECKING:
    from fragola_nb.experiments.ray.backend import RayBackend

__all__ = ["LOOPBACK", "connect", "quiet_start"]

_log = logging.getLogger("fragola_nb")


def connect(ray: Any, backend: RayBackend) -> str | None:
    """Start or join Ray. Ray's own processes die with the thread that started them, so
    off the main thread (``run_sync``'s loop, a thread of the user's) it is started on a
    thread of ours that never ends. Returns the logs folder of a Ray started here (Ray keeps
    them in its temp dir, ``/tmp/ray/session_*/logs`` unless ``init={"_temp_dir": ...}``),
    None when it joined one."""
    if ray.is_initialized():
        unused = [name for name in ("address", "init") if getattr(backend, name)]
        if unused:
            _log.warning("fragola_nb: RayBackend(%s) is not used: this process already runs "
                         "Ray, and it is used as it is (ray.shutdown() first to start or "
                         "join another)", ", ".join(f"{name}=..." for name in unused))
        return None
    _reachable(backend.address or os.environ.get("RAY_ADDRESS") or None)
    starts = _starts_local(backend)
    options = {"logging_level": logging.WARNING, **(LOOPBACK if starts else {}),
               **backend.init}

    logs: list[str] = []

    def init() -> None:
        with _loopback_node(starts and options.get("_node_ip_address") == "127.0.0.1"):
            context = ray.init(address=backend.address, **options)
        session = (getattr(context, "address_info", None) or {}).get("session_dir")
        if starts and session:
            logs.append(os.path.join(str(session), "logs"))

    def start() -> None:
        try:
            init()
        except ValueError as exc:
            if "existing cluster" not in str(exc):
                raise
            # No address, but Ray found one to join: RAY_ADDRESS, or the last `ray start`
            # on this machine (recorded in /tmp/ray/ray_current_cluster), which takes no
            # resources of ours.
            raise BadUsage(
                f"Ray joined a running cluster (RAY_ADDRESS, or the last `ray start` on this "
                f"machine) and refused RayBackend(init=...): {str(exc).splitlines()[0]} Drop "
                "those options, or pass RayBackend(address='local') to start a Ray of its "
                "own") from None
        except Exception as exc:
            # Ray's raylet gives its agent process 15 s to start and dies past that, which a
            # busy or cold machine can miss once (ray-project/ray#65983): once more, warm.
            if "timed out during startup" not in str(exc):
                raise
            _log.warning("fragola_nb: Ray did not start in time (%s); trying once more",
                         str(exc).splitlines()[0])
            ray.shutdown()
            init()

    if threading.current_thread() is threading.main_thread():
        start()
        return logs[-1] if logs else None
    started: concurrent.futures.Future[None] = concurrent.futures.Future()

    def keep() -> None:
        try:
            start()
        except BaseException as exc:
            started.set_exception(exc)
            return
        started.set_result(None)
        threading.Event().wait()  # Ray lives as long as this thread: until the process ends

    threading.Thread(target=keep, name="fragola_nb-ray", daemon=True).start()
    started.result()
    return logs[-1] if logs else None


LOOPBACK: dict[str, Any] = {"_node_ip_address": "127.0.0.1", "include_dashboard": False}
"""``ray.init`` options for a Ray this project starts itself. Ray's default node address is
the machine's network address and its servers (GCS, raylet, object manager, every worker's
gRPC server, the runtime-env agent) then listen on every interface: anyone who reaches the
machine could run code on it. With the node on 127.0.0.1 Ray binds each of them to loopback
(it does so for its macOS/Windows single-machine mode); the dashboard, which is a web UI and
a job API, is not started. ``RayBackend(init=...)`` overrides either (a cluster of several
machines needs a node address they can reach)."""


def _starts_local(backend: RayBackend) -> bool:
    """Whether ``ray.init`` will start a Ray instance rather than join one: Ray's own rule
    (``address`` None or ``"auto"`` look for ``RAY_ADDRESS`` and the last ``ray start`` on
    this machine), so that a node joining a cluster is never told to be on loopback."""
    address = backend.address
    if address == "local":
        return True
    if address not in (None, "auto"):
        return False
    try:
        services: Any = importlib.import_module("ray._private.services")
        canonical = services.canonicalize_bootstrap_address
    except (ImportError, AttributeError):  # Ray moved it: decide from what is documented
        return address is None and not os.environ.get("RAY_ADDRESS")
    try:
        found = canonical(address, backend.init.get("_temp_dir"))
    except Exception:
        return False  # "auto" with nothing to join: Ray itself says so
    return found is None


@contextlib.contextmanager
def _loopback_node(wanted: bool) -> Iterator[None]:
    """Let ``_node_ip_address="127.0.0.1"`` stand. Ray replaces a loopback node address with
    the machine's network address unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` was 0 when Ray
    was imported (it is read once, into ``ray_constants.ENABLE_RAY_CLUSTER``): that switch is
    turned off while this ``ray.init`` starts the node, and put back after. Ray's processes
    are given the node address on their command lines, so they need nothing more."""
    try:
        constants: Any = importlib.import_module("ray._private.ray_constants")
    except ImportError:
        constants = None
    if not wanted or not hasattr(constants, "ENABLE_RAY_CLUSTER"):
        yield
        return
    before = constants.ENABLE_RAY_CLUSTER
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = before


def _reachable(address: str | None) -> None:
    """A cluster address that nothing answers on is one line now: Ray itself would retry for
    minutes, the kernel frozen, and may end the process."""
    if address in (None, "auto", "local"):
        return
    where = address.removeprefix("ray://")
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit():
        return  # a form Ray knows and this does not: let Ray say
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise BadUsage(f"nothing answers at the Ray address {redact_text(address)!r} "
                       f"({exc.strerror or exc}): is the cluster's head running?") from None


_TOKEN_NOTICE = "Token authentication is enabled for this Ray cluster"


class _StartNoise(logging.Filter):
    """Drops Ray's start-up notice that token authentication is on (a WARNING Ray logs for
    every new local cluster, shown red in the cell, that asks nothing of the user: the
    cluster is the safer for it). Ray's other warnings and errors go through."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno < logging.ERROR
                    and record.getMessage().startswith(_TOKEN_NOTICE))


@contextlib.contextmanager
def quiet_start() -> Iterator[None]:
    """While this project starts (or joins) Ray: its notice that token authentication is on
    stays out of the cell. The logger is Ray's ``authentication_token_setup`` module's."""
    noise = _StartNoise()
    logger = logging.getLogger("ray._private.authentication.authentication_token_setup")
    logger.addFilter(noise)
    try:
        yield
    finally:
        logger.removeFilter(noise)
