"""nbconvert's HTML of an executed notebook (widget state stored), exported plain and with
``fragola_nb.notebook.static.static_views``, opened from file:// in Chromium with the
network blocked (a route aborts and records every request that is not a file): the panel's
conversation is on the page as text, the hostile parts inert. The files:
``tests/support/saved_static_world.py`` (read without a browser by
``tests/notebook/static/test_saved_static_view.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from .conftest import ARTIFACTS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.saved_static_world import ANSWER, QUESTION, make_files

pytestmark = pytest.mark.timeout(300)

# nbconvert's lab template loads these itself (require.js, MathJax, and the widget manager
# for the notebook's slider); the static copy adds none
TEMPLATE_HOSTS = ("https://cdnjs.cloudflare.com/", "https://unpkg.com/@jupyter-widgets/")


def test_the_static_copy_shows_offline(browser: Browser, tmp_path: Path) -> None:
    files = make_files(tmp_path)
    folder = ARTIFACTS / "test_the_static_copy_shows_offline"
    folder.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    page = context.new_page()
    requests: list[str] = []
    dialogs: list[str] = []
    errors: list[str] = []

    def route(r: object) -> None:
        url = r.request.url  # type: ignore[attr-defined]
        if url.startswith("file:"):
            r.continue_()  # type: ignore[attr-defined]
        else:
            requests.append(url)
            r.abort()  # type: ignore[attr-defined]

    page.route("**/*", route)
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        for name in ("saved-static", "executed-static", "saved-plain", "executed-plain"):
            page.goto(files[name].as_uri())
            page.wait_for_load_state("load")
            shown = page.locator(".fragola-conversation")
            expect(shown).to_have_count(1)
            expect(shown).to_be_visible()
            expect(shown.locator(".fragola-text").first).to_have_text(QUESTION)
            expect(shown).to_contain_text(ANSWER)
            assert shown.locator("img, script, b:has-text('bold')").count() == 0
            page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    finally:
        context.close()
    assert not dialogs, dialogs
    assert requests and all(u.startswith(TEMPLATE_HOSTS) for u in requests), requests
