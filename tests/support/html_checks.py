"""What the tests check of the HTML fragola_nb makes.

``assert_inert``: a fragment (a message, a panel's rows, a grid's column) holds only harmless
tags. ``assert_page_is_closed``: an ``export_html`` page runs only its own two scripts and
fetches nothing; ``data_of``: the run as the page's script reads it.
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import json
import re
from typing import Any

# Every tag the renderer may produce (markdown-it's safe subset and the message frames).
ALLOWED_TAGS = {
    "a", "b", "blockquote", "br", "code", "details", "div", "em", "h1", "h2", "h3", "h4",
    "h5", "h6", "hr", "i", "li", "ol", "p", "pre", "small", "span", "strong", "style",
    "summary", "ul",
}


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def assert_inert(html: str) -> None:
    """``html`` holds only harmless tags: no script, no image, no event handler attribute,
    no javascript: link."""
    parser = _Tags()
    parser.feed(html)
    parser.close()
    for tag, attrs in parser.tags:
        assert tag in ALLOWED_TAGS, f"unexpected <{tag}> in {html[:300]!r}"
        for name, value in attrs:
            assert not name.startswith("on"), f"event handler {name} on <{tag}>"
            assert not (value or "").strip().lower().startswith(("javascript:", "data:")), value


class Page(html.parser.HTMLParser):
    """The tags a browser builds from the page, and the text of its two scripts."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)
            self.scripts.append((self._in_script, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)


def data_of(page: str) -> dict[str, Any]:
    """The run as the page's script reads it (``JSON.parse`` of the data block)."""
    scripts = Page(page).scripts
    blocks = [text for attrs, text in scripts if attrs.get("type") == "application/json"]
    assert len(blocks) == 1
    result: dict[str, Any] = json.loads(blocks[0])
    return result


def assert_page_is_closed(page: str) -> None:
    """Exactly the two scripts of the export (the data block, the viewer allowed by its hash),
    no tag or attribute that runs or loads anything, a policy that forbids every request."""
    parsed = Page(page)
    assert [attrs for attrs, _ in parsed.scripts] == [
        {"type": "application/json", "id": "fx-data"}, {}]
    names = {tag for tag, _ in parsed.tags}
    assert not names & {"img", "iframe", "object", "embed", "link", "base", "form", "a"}, names
    for _, attrs in parsed.tags:
        assert not [a for a in attrs if a.startswith("on") or a in ("src", "href")], attrs
    viewer = parsed.scripts[1][1]
    digest = base64.b64encode(hashlib.sha256(viewer.encode()).digest()).decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    assert policy.group(1).startswith("default-src 'none'; ")
    assert f"script-src 'sha256-{digest}';" in policy.group(1)
    assert "http" not in viewer and "fetch(" not in viewer and "XMLHttpRequest" not in viewer
