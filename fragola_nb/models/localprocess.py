"""The llama.cpp server processes behind ``Fragola.local()`` (``fragola_nb.models.local``): started
on a free loopback port, checked with a first answer, shared by settings, stopped with their
last user, at exit, or when this process dies.
"""

from __future__ import annotations

import atexit
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
from dataclasses import dataclass
from pathlib import Path

from fragola_nb.base.errors import FragolaError
from fragola_nb.models.localchat import write_tokenizer_config

__all__ = ["NO_AMX", "ServerProcess", "Settings", "launch", "lock", "release", "servers",
           "stop_all"]

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


@dataclass(frozen=True)
class Settings:
    """What makes two servers the same: a running one is reused only when all are equal."""

    model_file: Path
    model_name: str
    n_ctx: int
    server_args: tuple[str, ...]
    port: int | None
    smollm2: bool
    """Serve it with ``fragola_nb.models.localchat``'s template (SmolLM2's own cannot read a
    history with tool calls)."""


class ServerProcess:
    """One running server, shared by the ``LocalServer`` handles on it."""

    def __init__(self, settings: Settings, popen: subprocess.Popen[bytes], port: int,
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
lock = threading.RLock()
servers: dict[Settings, ServerProcess] = {}
"""The running servers, by settings."""


def release(process: ServerProcess, force: bool = False) -> None:
    """One handle lets go: the last one (or ``force``) stops the server."""
    with lock:
        process.handles -= 1
        if process.handles > 0 and not force:
            return
        if servers.get(process.settings) is process:
            del servers[process.settings]
    process.terminate()


@atexit.register
def stop_all() -> None:
    """Stop every server this process started (at exit)."""
    with lock:
        processes = list(servers.values())
        servers.clear()
    for process in processes:
        process.terminate()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    """Whether a program accepts connections on ``127.0.0.1:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _answers(process: ServerProcess) -> bool:
    """Whether our server answers: ``GET /v1/models`` with our key lists our model. Another
    server on the port (Ollama, LM Studio, a server without a key) is not taken for ours."""
    request = urllib.request.Request(f"{process.base_url}/models",
                                     headers={"Authorization": f"Bearer {process.api_key}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            if response.status != 200:
                return False
            served = json.loads(response.read()).get("data") or ()
            return any(isinstance(model, dict) and model.get("id") == process.settings.model_name
                       for model in served)
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        return False


def launch(settings: Settings, ready_timeout: float) -> ServerProcess:
    """Start the server and wait until it answers; one retry when a port picked here was
    taken in between."""
    if settings.port is not None and _listening(settings.port):
        ours = [p for p in servers.values() if p.port == settings.port and p.running]
        if ours:
            raise FragolaError(
                f"port {settings.port} is taken by the local server of "
                f"{ours[0].settings.model_file.name} started earlier with other settings: stop "
                "it first (its fragola.local_server.stop()), or choose another port= (or none, "
                "for a free one)")
        raise FragolaError(f"port {settings.port} is taken: another program listens on it "
                           "(choose another port=, or leave it out for a free one)")
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
        process = ServerProcess(settings, popen, port, api_key, folder)
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
    """The server could not listen: another process took the port picked for it."""


def _wait_ready(process: ServerProcess, timeout: float) -> None:
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


def _exited(process: ServerProcess, when: str) -> FragolaError:
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
