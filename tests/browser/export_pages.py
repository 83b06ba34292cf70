"""Export files opened from disk (file://) in a fresh Chromium context each, the network
blocked and recorded, the page's console, errors and dialogs kept, its screenshots in the
test's artifacts folder: what tests/browser/test_browser_export_*.py open their files with.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, expect

from .conftest import ARTIFACTS


@dataclass
class Opened:
    page: Page
    folder: Path
    requests: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    shots: int = 0

    def shot(self, name: str, *, full_page: bool = True) -> None:
        """The whole page, or what is on the screen (a page 300,000 px tall: a history)."""
        self.shots += 1
        self.page.screenshot(path=str(self.folder / f"{self.shots:02d}-{name}.png"),
                             full_page=full_page)

    def assert_clean(self) -> None:
        assert self.requests == [], f"the file asked the network for {self.requests}"
        assert self.errors == [], self.errors
        assert [t for kind, t in self.console if kind == "error"] == []
        assert self.dialogs == []
        # nothing a model wrote became an element
        assert self.page.evaluate(
            "() => document.querySelectorAll('img,iframe,object,embed,form,"
            "script:not(#fx-data):not(:last-of-type)').length") == 0


def opening(browser: Browser, test: str) -> Iterator[Any]:
    """Yields ``open_file(path, width=, dark=)`` -> ``Opened``; closes what it opened."""
    folder = ARTIFACTS / test.replace("/", "_")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    contexts = []

    def open_file(path: Path, *, width: int = 1100, dark: bool = False) -> Opened:
        context = browser.new_context(viewport={"width": width, "height": 800},
                                      color_scheme="dark" if dark else "light")
        contexts.append(context)
        page = context.new_page()
        opened = Opened(page, folder)

        def route(r: Any) -> None:
            if r.request.url.startswith("file://"):
                r.continue_()
            else:  # recorded, and never let through
                opened.requests.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        page.on("console", lambda m: opened.console.append((m.type, m.text)))
        page.on("pageerror", lambda e: opened.errors.append(str(e)))
        def dialog(d: Any) -> None:  # an alert() that ran: recorded, dismissed
            opened.dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", dialog)
        page.goto(path.as_uri())
        expect(page.locator("html[data-fx-ready]")).to_have_count(1)
        return opened

    yield open_file
    for context in contexts:
        context.close()
