"""Fixtures of the real-browser tests: one JupyterLab server and one Chromium for the whole
``tests/browser`` package, a fresh browser context (a fresh tab) per test.

Artifacts go to ``$E2E_ARTIFACTS`` (default ``<repo>/artifacts``), one folder per test:
the screenshots of its key steps (``01-waiting.png``, ...; kept on success too, to look
at), ``console.log`` (the page's console and uncaught errors), and on failure ``FAILED.png``
(the page as it was) and ``jupyter.log`` (the server and kernel log so far). The server log
of the whole run is ``jupyter.log`` at the top.

A missing or broken browser is an error of the test, never a skip.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from . import jlab_harness as h

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("E2E_ARTIFACTS") or REPO / "artifacts")

# Console errors that are not ours and say nothing about the panels, as (regex, why) pairs
# matched against the message text; any other message logged at level "error" (and any
# uncaught exception) fails the test. None was needed so far: with JupyterLab 4.6,
# ipywidgets 8.1, anywidget 0.11 and chromium 156 the console only ever held two "debug"
# lines per page ("Starting application in workspace", "Starting WebSocket").
CONSOLE_NOISE: list[tuple[str, str]] = []


def _noise(text: str) -> bool:
    return any(re.search(pattern, text) for pattern, _ in CONSOLE_NOISE)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep each phase's report on the item, so fixtures know whether the test failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="package")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="package")
def lab(artifacts: Path) -> Iterator[h.LabServer]:
    srv = h.start_lab()
    print(f"\n[e2e] jupyter lab up on {srv.url} in {srv.started_s:.1f}s (pid {srv.proc.pid})")
    try:
        yield srv
    finally:
        shutil.copy(srv.log_path, artifacts / "jupyter.log")
        pids = [srv.proc.pid] + [c.pid for c in h.descendants(srv.proc.pid)]
        killed = h.stop_lab(srv)
        alive = [p for p in pids if psutil.pid_exists(p)
                 and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        print(f"[e2e] server stopped; force-killed={killed}; still alive={alive}")
    assert not alive, f"jupyter processes left behind: {alive}"


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """Debian's chromium through Playwright. If it cannot start, every test errors."""
    me = psutil.Process()
    before = {c.pid for c in me.children()}
    with sync_playwright() as p:
        drivers = [c for c in me.children() if c.pid not in before]  # playwright's driver
        try:
            b = h.launch_browser(p)
        except Exception as exc:
            pytest.fail(f"cannot start the browser {h.CHROMIUM} (Debian's chromium: "
                        f"`apt-get install chromium`, as scripts/test.sh does): {exc}")
        try:
            yield b
        finally:
            tree = drivers + [d for drv in drivers for d in drv.children(recursive=True)]
            b.close()
    psutil.wait_procs(tree, timeout=10)
    alive = [x.pid for x in tree if x.is_running() and x.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"playwright/chromium processes left behind: {alive}"


@dataclass
class Tab:
    """A browser context with one JupyterLab page, and what its page reported."""

    context: BrowserContext
    page: Page
    page_errors: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)  # (type, text)
    closed: bool = False

    @classmethod
    def open(cls, browser: Browser) -> Tab:
        context = browser.new_context(viewport={"width": 1280, "height": 1100})
        context.set_default_timeout(30_000)
        tab = cls(context, context.new_page())
        tab.page.on("pageerror",
                    lambda e: tab.page_errors.append(f"{e.name}: {e.message}\n{e.stack}"))
        tab.page.on("console", lambda m: tab.console.append((m.type, m.text)))
        return tab

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.context.close()


@dataclass
class UI:
    """What a test drives: a JupyterLab tab, the server, and this test's artifacts."""

    tab: Tab
    lab: h.LabServer
    dir: Path  # this test's artifacts
    shots: int = 0
    old_tabs: list[Tab] = field(default_factory=list)

    @property
    def page(self) -> Page:
        return self.tab.page

    def new_tab(self, browser: Browser) -> None:
        """Close the tab (a person closing the browser window) and open a fresh one; what
        the old tab reported still counts for ``assert_clean``."""
        self.tab.close()
        self.old_tabs.append(self.tab)
        self.tab = Tab.open(browser)

    def shot(self, name: str, target: Any = None) -> Path:
        """Save a screenshot of a key step: the element ``target`` (scrolled into view) or
        the whole page."""
        self.shots += 1
        path = self.dir / f"{self.shots:02d}-{name}.png"
        if target is not None:
            target.scroll_into_view_if_needed()
            target.screenshot(path=str(path))
        else:
            self.page.screenshot(path=str(path))
        return path

    def open_and_run_all(self, path: str, timeout: float = 120_000) -> None:
        """Open the notebook, wait for its kernel, Run All, wait until every cell ran."""
        h.open_notebook(self.page, self.lab, path)
        h.run_all_and_wait(self.page, timeout)

    def console_errors(self) -> list[str]:
        return [text for tab in (*self.old_tabs, self.tab) for kind, text in tab.console
                if kind == "error" and not _noise(text)]

    def page_errors(self) -> list[str]:
        return [e for tab in (*self.old_tabs, self.tab) for e in tab.page_errors]

    def assert_clean(self) -> None:
        """No uncaught exception in the page, no console error that is not known noise."""
        assert not self.page_errors(), f"uncaught errors in the page: {self.page_errors()}"
        assert not self.console_errors(), f"console errors: {self.console_errors()}"


@contextmanager
def view_for(tab: Tab, lab: h.LabServer, request: pytest.FixtureRequest) -> Iterator[UI]:
    """A UI on ``tab`` for the running test; on failure, leave FAILED.png, console.log and
    jupyter.log in the test's artifacts folder."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name).strip("_")
    folder = ARTIFACTS / name
    shutil.rmtree(folder, ignore_errors=True)  # no stale pictures from an older run
    folder.mkdir(parents=True)
    view = UI(tab=tab, lab=lab, dir=folder)
    try:
        yield view
    except BaseException:  # the fixture's own setup failed (a shared notebook's Run All)
        _save_failure(view)
        raise
    node = request.node
    if any(getattr(getattr(node, f"rep_{w}", None), "failed", False) for w in ("setup", "call")):
        _save_failure(view)
    else:
        _save_console(view)


def _save_console(view: UI) -> None:
    """The page's console and uncaught errors (kept for passing tests too: it is small)."""
    (view.dir / "console.log").write_text(
        "".join(f"[{kind}] {text}\n" for t in (*view.old_tabs, view.tab)
                for kind, text in t.console)
        + "".join(f"[pageerror] {e}\n" for e in view.page_errors()))


def _save_failure(view: UI) -> None:
    """What a person would have seen: the page, its console, the server's log."""
    _save_console(view)
    shutil.copy(view.lab.log_path, view.dir / "jupyter.log")
    try:
        view.page.screenshot(path=str(view.dir / "FAILED.png"))
    except Exception as exc:  # a closed or crashed page: the logs still say what happened
        (view.dir / "FAILED.txt").write_text(f"no screenshot: {exc!r}\n")


@pytest.fixture
def ui(browser: Browser, lab: h.LabServer, artifacts: Path,
       request: pytest.FixtureRequest) -> Iterator[UI]:
    """A fresh tab for one test; its kernels are shut down after it."""
    first = Tab.open(browser)
    view: UI | None = None
    try:
        with view_for(first, lab, request) as view:
            yield view
    finally:
        first.close()
        if view is not None:
            view.tab.close()  # the test may have opened another (UI.new_tab)
        lab.shutdown_all_kernels(wait=False)  # the next test starts its own


@dataclass
class SharedNotebook:
    """One tab on one notebook, shared by the tests of a module (one kernel start, one
    Run All for several tests). ``prepare(ui)`` runs once, inside the first test that asks,
    so its failure is that test's, with artifacts."""

    tab: Tab
    prepared: bool = False
    failed: bool = False


def shared_notebook(browser: Browser, lab: h.LabServer) -> Iterator[SharedNotebook]:
    """The body of a module's fixture holding its :class:`SharedNotebook`: a tab for the
    module, closed with the kernels it started."""
    tab = Tab.open(browser)
    try:
        yield SharedNotebook(tab)
    finally:
        tab.close()
        lab.shutdown_all_kernels(wait=False)


def shared_ui(shared: SharedNotebook, lab: h.LabServer, request: pytest.FixtureRequest,
              prepare: Any) -> Iterator[UI]:
    """The body of a module's ``ui`` fixture over a :class:`SharedNotebook`."""
    with view_for(shared.tab, lab, request) as view:
        if shared.failed:
            pytest.fail("the shared notebook of this module failed to get ready (see the "
                        "first test's artifacts)")
        if not shared.prepared:
            shared.failed = True
            prepare(view)
            shared.prepared, shared.failed = True, False
        yield view


__all__ = ["UI", "SharedNotebook", "Tab", "expect", "shared_ui", "view_for"]
