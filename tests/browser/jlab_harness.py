"""A throw-away JupyterLab server driven by Playwright with Debian's chromium.

Adapted from the offline recipe (shared/recipes/browser-tests). Everything is local: the
server listens on 127.0.0.1:<free port> with auth off, every Jupyter config/data/runtime/
settings dir lives in a fresh temp dir (nothing in ``~`` is read), and the browser is
``/usr/bin/chromium`` (Debian package, ``apt-get install chromium``), never a browser build
downloaded by Playwright: ``playwright install`` needs the internet and is NOT used.
"""

from __future__ import annotations

import itertools
import json
import os
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
from typing import Any

CHROMIUM = os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]

# JupyterLab *user settings*, written into the private JUPYTERLAB_SETTINGS_DIR.
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    # no "fetch official Jupyter news?" toast and no update check (both would go online)
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false",
                                                    "checkForUpdates": False},
    # keep every cell attached to the DOM ('full'/'defer' windowing detach off-screen cells)
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    # Settings > "Save Widget State Automatically": Ctrl+S stores the widget models in the
    # notebook's metadata, so a reopened notebook shows its panels without their kernel
    "@jupyter-widgets/jupyterlab-manager/plugin": {"saveState": True},
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LabServer:
    proc: subprocess.Popen[bytes]
    port: int
    root: Path  # the server's root_dir: notebooks written here open at /lab/tree/<name>
    base: Path  # the temp dir holding root, config, settings and the log
    log_path: Path
    started_s: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    # -- the REST API (no token: auth is off) -------------------------------------------------

    def api(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path}", data=data, method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def kernels(self) -> list[dict[str, Any]]:
        return list(self.api("GET", "/api/kernels"))

    def shutdown_all_kernels(self, timeout: float = 30.0, wait: bool = True) -> None:
        """Delete every session and kernel; with ``wait``, wait until the server lists
        none."""
        for session in self.api("GET", "/api/sessions"):
            try:
                self.api("DELETE", f"/api/sessions/{session['id']}")
            except OSError:
                pass
        for kernel in self.kernels():
            try:
                self.api("DELETE", f"/api/kernels/{kernel['id']}")
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        while wait and self.kernels():
            if time.monotonic() > deadline:
                raise TimeoutError(f"kernels still running: {self.kernels()}")
            time.sleep(0.2)

    def read_notebook(self, path: str) -> dict[str, Any]:
        return dict(self.api("GET", f"/api/contents/{path}?content=1")["content"])


def _status(url: str, timeout: float = 2.0) -> int:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return int(r.status)


def start_lab(timeout: float = 120.0) -> LabServer:
    """Start ``python -m jupyterlab``; return once /api/status and /lab answer 200."""
    base = Path(tempfile.mkdtemp(prefix="fragola-e2e-jlab-"))
    root = base / "root"
    root.mkdir()
    settings = base / "lab-settings"
    for plugin, values in LAB_SETTINGS.items():
        pkg, name = plugin.rsplit("/", 1)
        p = settings / pkg / f"{name}.jupyterlab-settings"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(values))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}  # offline
    env.update(
        JUPYTER_CONFIG_DIR=str(base / "config"),  # ignore ~/.jupyter
        JUPYTER_DATA_DIR=str(base / "data"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        IPYTHONDIR=str(base / "ipython"),
        JUPYTER_PLATFORM_DIRS="1",
        PYTHONUNBUFFERED="1",
        # The guide's cells that wait for a person's click (wait_for_decisions) go on at once:
        # Run All here clicks nothing; a test that clicks passes its own timeout.
        FRAGOLA_DECISION_WAIT="0",
    )
    port = free_port()
    cmd = [
        sys.executable, "-m", "jupyterlab",
        "--no-browser",
        "--allow-root",  # CI runs as root: without it the server exits at once
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",  # fail instead of silently taking another port
        "--IdentityProvider.token=",  # no token; no password is the default
        "--ServerApp.disable_check_xsrf=True",  # lets the tests call the REST API directly
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",  # never query PyPI for extensions
    ]
    log_path = base / "jupyter.log"
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT)
    srv = LabServer(proc=proc, port=port, root=root, base=base, log_path=log_path)
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited rc={proc.returncode}\n{srv.log()}")
        try:
            if _status(f"{srv.url}/api/status") == 200 and _status(f"{srv.url}/lab") == 200:
                break
        except OSError:
            pass
        if time.monotonic() - t0 > timeout:
            stop_lab(srv)
            raise TimeoutError(f"jupyter lab did not answer in {timeout}s\n{srv.log()}")
        time.sleep(0.25)
    srv.started_s = time.monotonic() - t0
    return srv


def descendants(pid: int) -> list[Any]:
    import psutil

    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return []


def stop_lab(srv: LabServer, timeout: float = 20.0) -> list[int]:
    """SIGTERM the server (it shuts its kernels down itself), then SIGKILL any descendant
    still alive, by PID. Returns the PIDs that had to be force-killed. Kernels run in their
    own session, so killing the server's process group would not reach them."""
    import psutil

    kids = descendants(srv.proc.pid)  # kernels etc., recorded before they detach
    if srv.proc.poll() is None:
        srv.proc.send_signal(signal.SIGTERM)
        try:
            srv.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            srv.proc.kill()
            srv.proc.wait(5)
    psutil.wait_procs(kids, timeout=5)
    killed = []
    for k in kids:
        try:
            if k.is_running() and k.status() != psutil.STATUS_ZOMBIE:
                k.kill()
                killed.append(k.pid)
        except psutil.NoSuchProcess:
            pass
    if not os.environ.get("E2E_KEEP"):
        shutil.rmtree(srv.base, ignore_errors=True)
    return killed


def launch_browser(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


# ---------------------------------------------------------------- page helpers
# DOM selectors checked on JupyterLab 4.6
SEL_PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the visible notebook tab
SEL_NOTEBOOK = f"{SEL_PANEL} .jp-Notebook"
SEL_KERNEL_IDLE = f"{SEL_PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']"
SEL_CELLS = f"{SEL_NOTEBOOK} .jp-Cell"  # markdown + code cells, in order
SEL_STATUSBAR = "#jp-main-statusbar"  # "Python 3 (ipykernel) | Idle"


_workspaces = itertools.count(1)


def open_notebook(page: Any, lab: LabServer, path: str, timeout: float = 60_000,
                  start_kernel: bool = True, wait_kernel: bool = True) -> None:
    """Open ``/lab/tree/<path>`` and wait for the notebook (and its kernel to be idle).

    ``start_kernel``: start the notebook's session through the REST API while the page
    loads, as if the kernel were already running; JupyterLab, opening the notebook, joins
    that session instead of starting one after the page is up (saves seconds per notebook).
    Without it, JupyterLab starts the kernel itself, as it does for a person.
    """
    starter = None
    if start_kernel:
        body = {"path": path, "type": "notebook", "name": path.rsplit("/", 1)[-1],
                "kernel": {"name": "python3"}}
        starter = threading.Thread(target=lab.api, args=("POST", "/api/sessions", body),
                                   daemon=True)
        starter.start()
    # A workspace of its own: JupyterLab would otherwise reopen every notebook that an
    # earlier page of this server had open (the workspace is saved on the server), each
    # with a kernel.
    workspace = f"e2e-{next(_workspaces)}"
    page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{path}")
    if starter is not None:
        starter.join(timeout / 1000)
    page.wait_for_selector(SEL_NOTEBOOK, timeout=timeout)
    if wait_kernel:
        wait_kernel_idle(page, timeout)


def wait_kernel_idle(page: Any, timeout: float = 60_000) -> None:
    from playwright.sync_api import expect

    expect(page.locator(SEL_STATUSBAR)).to_contain_text("Idle", timeout=timeout)
    page.wait_for_selector(SEL_KERNEL_IDLE, timeout=timeout)


def run_all_cells(page: Any) -> None:
    """Run > Run All Cells through the real menu bar (it has no default shortcut)."""
    page.locator("#jp-MainMenu .lm-MenuBar-item", has_text="Run").first.click()
    page.locator("#jp-mainmenu-run .lm-Menu-item[data-command='runmenu:run-all']").click()


# True when every non-empty code cell shows an execution count ("[3]:"), none "[*]:". Or
# "stale" when the only cells without a count read "[*]:" although a later cell ran and the
# kernel says it is idle (the status bar): the kernel runs cells in order, so those finished,
# and JupyterLab missed their reply; its execution indicator then stays busy too. Seen in CI
# on the `%%fragola` cell right after an eight-column compare, every output there; the
# outputs are what the tests then check.
_ALL_EXECUTED_JS = """([sel, idle]) => {
  const prompts = [...document.querySelectorAll(sel)]
    .filter(c => c.classList.contains('jp-CodeCell'))
    .filter(c => ((c.querySelector('.jp-InputArea-editor .cm-content') || {}).textContent
                  || '').trim())
    .map(c => (c.querySelector('.jp-InputArea-prompt') || {}).textContent || '');
  const ran = p => /\\[\\d+\\]/.test(p);
  if (prompts.every(ran)) return true;
  // the kernel's own status (the status bar), not the notebook's execution indicator: that
  // one waits for the same missed reply
  const last = prompts.map(ran).lastIndexOf(true);
  if (!prompts.every((p, i) => ran(p) || (/\\[\\*\\]/.test(p) && i < last))) return false;
  const text = (document.querySelector(idle) || {}).textContent || '';
  if (/\\bIdle\\b/.test(text)) return "stale";
  // a narrow page drops the kernel's status from the status bar: the server says (Python)
  return /\\bBusy\\b/.test(text) ? false : "ask";
}"""

# The kernels' execution states as the server knows them (the page's own token).
_KERNEL_STATES_JS = """async () => {
  const config = JSON.parse(document.getElementById('jupyter-config-data').textContent);
  const reply = await fetch(config.baseUrl + 'api/kernels',
                            {headers: {Authorization: 'token ' + (config.token || '')}});
  return (await reply.json()).map(k => k.execution_state);
}"""


# Each code cell's prompt ("[3]:", "[*]:", "[ ]:") and the start of its output's text.
_CELL_STATES_JS = """(sel) => [...document.querySelectorAll(sel)]
  .filter(c => c.classList.contains('jp-CodeCell'))
  .map(c => [(c.querySelector('.jp-InputArea-prompt') || {}).textContent || '',
             ((c.querySelector('.jp-OutputArea') || {}).innerText || '').slice(0, 400)])"""


def cell_states(page: Any) -> list[tuple[str, str]]:
    return [(p, o) for p, o in page.evaluate(_CELL_STATES_JS, SEL_CELLS)]


def run_all_and_wait(page: Any, timeout: float = 120_000) -> None:
    """Run > Run All Cells, then wait until every code cell ran and the kernel is idle.

    A Run All that started nothing within 20 s (the click landed while JupyterLab was still
    wiring the notebook: every prompt still reads "[ ]:") is clicked once more; nothing ran,
    so nothing runs twice. On a timeout, the error names each cell's prompt and the start of
    its output, so a failure on a CI machine says which cell stopped and why."""
    run_all_cells(page)
    started = "(sel) => [...document.querySelectorAll(sel)].some(c => /\\[(\\d+|\\*)\\]/.test(" \
        "(c.querySelector('.jp-InputArea-prompt') || {}).textContent || ''))"
    try:
        page.wait_for_function(started, arg=SEL_CELLS, timeout=20_000)
    except Exception:
        run_all_cells(page)
    wait_all_executed(page, timeout)


def wait_all_executed(page: Any, timeout: float = 90_000) -> None:
    """Wait until Run All has gone through every code cell and the kernel is idle."""
    deadline = time.monotonic() + timeout / 1000
    try:
        while True:
            left = max(1.0, (deadline - time.monotonic()) * 1000)
            done = page.wait_for_function(_ALL_EXECUTED_JS, arg=[SEL_CELLS, SEL_STATUSBAR],
                                          timeout=left).json_value()
            if done == "ask" and set(page.evaluate(_KERNEL_STATES_JS)) != {"idle"}:
                if time.monotonic() > deadline:
                    raise TimeoutError("the kernel is still busy")
                page.wait_for_timeout(500)
                continue
            if done in ("stale", "ask"):
                print("[e2e] Run All finished; JupyterLab still shows [*] on a cell a later "
                      "cell ran after:", [p for p, _ in cell_states(page)])
                return  # the kernel is idle; the notebook's indicator never will be
            break
    except Exception as exc:
        try:
            states = cell_states(page)
        except Exception:  # the page itself is gone: the original error says enough
            raise exc from None
        listing = "\n".join(f"  cell {i} {prompt!r}: {out!r}"
                             for i, (prompt, out) in enumerate(states))
        raise AssertionError(f"not every code cell ran within {timeout / 1000:.0f} s; "
                             f"the code cells:\n{listing}") from exc
    wait_kernel_idle(page, timeout)


def cell(page: Any, index: int) -> Any:
    return page.locator(SEL_CELLS).nth(index)


def run_cell(page: Any, index: int) -> None:
    """Select cell ``index`` in command mode and press Ctrl+Enter (run, stay on it).
    Shift+Enter on the last cell would append a new empty cell."""
    c = cell(page, index)
    c.scroll_into_view_if_needed()
    c.locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Enter")


def cell_output(page: Any, index: int) -> Any:
    return cell(page, index).locator(".jp-OutputArea-output")


def save_notebook(page: Any, lab: LabServer, path: str, timeout: float = 30.0) -> dict[str, Any]:
    """Ctrl+S, as a person would, in the notebook's tab; wait until the file on disk changed
    and return it (the notebook JSON, read back through the server)."""
    before = lab.api("GET", f"/api/contents/{path}?content=0")["last_modified"]
    page.locator(f"{SEL_PANEL} .jp-NotebookPanel-toolbar").click(position={"x": 2, "y": 2})
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + timeout
    while lab.api("GET", f"/api/contents/{path}?content=0")["last_modified"] == before:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} was not saved in {timeout}s")
        time.sleep(0.1)
    while True:  # a busy machine: the file may still be being written (empty, unreadable)
        try:
            return lab.read_notebook(path)
        except urllib.error.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
