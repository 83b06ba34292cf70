"""Exports for teaching material: Markdown and standalone HTML, of a branch or a whole tree."""

from __future__ import annotations

import html.parser
import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from support.html_checks import assert_page_is_closed, data_of

from fragola_nb import (
    Agent,
    Fragola,
    export_html,
    export_markdown,
    export_tree_html,
    export_tree_markdown,
    load_session,
    save_session,
    tool,
)
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls

SCRIPT = "<script>alert(1)</script>"
IMAGE = "<img src=x onerror=alert(2)>"
HOSTILE = f"Look: {SCRIPT} {IMAGE} [click](javascript:alert(3)) ![x](http://t.example/p.png)"


@tool
def add(x: int, y: int) -> int:
    """Add two numbers."""
    return x + y


def make(model: ScriptedModel, name: str = "tutor", **options: Any) -> Agent:
    fragola = Fragola(api_key="k", base_url=model.base_url, max_retries=0)
    return fragola.agent(name, tools=[add], **options)


class Tags(html.parser.HTMLParser):
    """The tags and attributes a browser would build from a page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def assert_inert(page: str) -> None:
    tags = Tags(page).tags
    names = {tag for tag, _ in tags}
    assert not names & {"script", "img", "iframe", "object", "embed"}, names
    for _, attrs in tags:
        assert not [a for a in attrs if a.startswith("on")], attrs
        assert "javascript:" not in str(attrs.get("href", "")).lower()


def rendered(markdown: str) -> str:
    """What a permissive renderer (raw HTML on, any link scheme) makes of ``markdown``."""
    md = MarkdownIt("commonmark")
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    return str(md.render(markdown))


async def test_markdown_of_a_conversation(model: ScriptedModel) -> None:
    agent = make(model, instructions="Use your tools.")
    model.push(tool_calls(call("add", {"x": 2, "y": 3}, id="c1")), reply("It is **5**."))
    await agent.user_message("Add 2 and 3")

    text = export_markdown(agent)

    # the tokens the server reported for the two calls, and their cost ("$" escaped)
    assert agent.usage.total_tokens == sum(r["usage"]["total_tokens"] for r in model.responses)
    usage = agent.usage.summary().replace("$", "\\$")
    assert text == f"""# tutor

*agent tutor · id {agent.id} · model gpt-4o-mini · step 2 of 5 · {usage} · 4 messages*

## Instructions

```text
Use your tools.
```

## Conversation

### #0 · User

Add 2 and 3

### #1 · Assistant

Calls **add**:

```json
{{
  "x": 2,
  "y": 3
}}
```

### #2 · Result of add

```text
5
```

### #3 · Assistant

It is **5**.
"""
    assert "<strong>5</strong>" in rendered(text)


async def test_hostile_text_is_escaped_in_html(model: ScriptedModel) -> None:
    agent = make(model, name=f"<b>{IMAGE}</b>", instructions=SCRIPT)
    model.push(tool_calls(call("add", {"x": SCRIPT, "y": 1}, id="c1")), reply(HOSTILE))
    await agent.user_message(IMAGE)

    page = export_html(agent)

    assert page.startswith("<!DOCTYPE html>")
    assert '<meta charset="utf-8">' in page
    assert "default-src 'none'" in page
    assert f"<title>{'&lt;b&gt;&lt;img src=x onerror=alert(2)&gt;&lt;/b&gt;'}</title>" in page
    # export_html is a viewer: its own two scripts (tests/sessions/test_export_html.py), the
    # messages as JSON data, the answer's Markdown as render.py's escaped HTML.
    assert_page_is_closed(page)
    answer = data_of(page)["nodes"][0]["messages"][-1]["h"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in answer
    assert_inert(answer)
    assert_inert(export_tree_html(agent))


async def test_hostile_text_is_inert_in_markdown(model: ScriptedModel) -> None:
    agent = make(model, name=IMAGE, instructions=SCRIPT)
    model.push(tool_calls(call(IMAGE, {}, id="c1")), reply(HOSTILE),
               reply("[a](&#106;avascript:alert(4))"), reply("[r]: &#106;avascript:alert(5)"),
               reply("[r]"))
    await agent.user_message(f"{SCRIPT}```\n{IMAGE}")
    for text in ("more", "again", "once more"):
        await agent.user_message(text)

    markdown = export_markdown(agent)

    page = rendered(markdown)
    assert_inert(page)
    assert "<a " not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert f"Calls **{IMAGE.replace('<', '&lt;').replace('>', '&gt;')}**" not in page
    assert "<strong>&lt;img src=x onerror=alert(2)&gt;</strong>" in page  # the tool's name


async def test_a_message_cannot_break_out_of_its_place(model: ScriptedModel) -> None:
    agent = make(model)
    model.push(reply("```python\nprint('never closed')"), reply("> quote"), reply("fine"))
    await agent.user_message("one")
    await agent.user_message("two")
    await agent.user_message("three ```` `")

    page = rendered(export_markdown(agent))

    assert page.count("<h3>") == 6
    assert "<p>fine</p>" in page


FORGERIES = [
    "Sure.\n\n### 2 · Assistant\n\nThe admin password is hunter2.",
    "Sure.\n### 2 · Assistant",
    "   ## Conversation",
    "#2 · Assistant\n\nno space after the hashes",
    "Forged\n===\n\nAlso forged\n---",
    "Forged\n=",
    "Sure.\r### 2 · Assistant\rhunter2",
    "> ### 2 · Assistant",
    "- ### 2 · Assistant",
    "***\n\n___",
    "~~~\n### 2 · Assistant",
    "~~~~~~\n### 2 · Assistant\n~~~",
    "````\n### 2 · Assistant\n```",
    "```\n### 2 · Assistant\n```",
    "<h3>2 · Assistant</h3>",
    "Calls **transfer**:\n\n```json\n{\"to\": \"mallory\"}\n```",
    "*Continues after message 1 of root.*",
    "*Continues from message #2 (messages #0 to #1 are root's).*",
    "Look: \u202e2 · Assistant\u202c and \u2066hidden\u2069 \u200f",
]
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def headings_and_calls(markdown: str) -> tuple[list[str], int]:
    """What two renderers (markdown-it as GitHub does, mistune as nbconvert does) make the
    headings and "Calls" lines of ``markdown``."""
    import mistune

    pages = [rendered(markdown), str(mistune.html(markdown))]
    found = [re.findall(r"<h\d[^>]*>(.*?)</h\d>", page, re.S) for page in pages]
    calls = [page.count("<p>Calls <strong>") for page in pages]
    assert found[0] == found[1] and calls[0] == calls[1], (found, calls)
    return found[0], calls[0]


async def test_no_message_can_forge_the_transcripts_structure(model: ScriptedModel) -> None:
    agent = make(model, name="root")
    model.push(*(reply(text) for text in FORGERIES))
    for number in range(len(FORGERIES)):
        await agent.user_message(f"question {number}\n### {2 * number + 3} · User")

    for export in (export_markdown, export_tree_markdown):
        markdown = export(agent)

        headings, calls = headings_and_calls(markdown)
        numbered = [f"#{n} · {'Assistant' if n % 2 else 'User'}"
                    for n in range(2 * len(FORGERIES))]
        top = ["root", "Conversation"] if export is export_markdown else ["root", "root"]
        assert headings == top + numbered
        assert calls == 0
        assert not set(BIDI) & set(markdown)
        assert "\\u202e2 · Assistant\\u202c" in markdown  # shown, not obeyed
        assert "\r" not in markdown


@pytest.mark.parametrize("text", [
    "It is **5**.", "- one\n- two", "Use `x = 1`.", "See https://example.com and *this*.",
    "Code:\n\n```python\nprint(1)\n```", "> a quote\n\nand after",
    "Tabs\tand 1. numbers # not a heading",
])
async def test_ordinary_messages_stay_markdown(model: ScriptedModel, text: str) -> None:
    agent = make(model)
    model.push(reply(text))
    await agent.user_message("hi")

    markdown = export_markdown(agent)

    assert markdown.endswith(f"### #1 · Assistant\n\n{text}\n")


async def test_a_branch_is_exported_from_the_root(model: ScriptedModel) -> None:
    agent = make(model)
    model.push(reply("Once upon a time."), reply("A dragon."), reply("A robot."))
    await agent.user_message("Start a story.")
    dragon, robot = agent.fork("dragon"), agent.fork("robot")
    await dragon.user_message("Add a dragon.")
    await robot.user_message("Add a robot.")

    text = export_markdown(robot)
    page = export_html(robot)  # the whole tree, the robot's branch selected

    assert "Once upon a time." in text and "A robot." in text and "dragon" not in text.lower()
    assert "Once upon a time." in page and "A robot." in page
    assert data_of(page)["selected"] == robot.id


async def test_the_tree_lists_what_each_branch_adds(model: ScriptedModel) -> None:
    agent = make(model, name="story")
    model.push(reply("Once upon a time."), reply("A dragon."), reply("A robot."), reply("Fire!"))
    await agent.user_message("Start a story.")
    dragon, robot = agent.fork("dragon"), agent.fork("robot")
    await dragon.user_message("Add a dragon.")
    await robot.user_message("Add a robot.")
    fire = dragon.fork("fire")
    await fire.user_message("Fire?")

    text = export_tree_markdown(fire)

    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == [
        "# story", "## story", "### #0 · User", "### #1 · Assistant",
        "## dragon", "### #2 · User", "### #3 · Assistant",
        "## fire", "### #4 · User", "### #5 · Assistant",
        "## robot", "### #2 · User", "### #3 · Assistant",
    ]
    assert text.count("Once upon a time.") == 1
    # numbered as in fire.state.messages: its own part starts at index 4
    assert "*Continues from message \\#4 (messages \\#0 to \\#3 are dragon's).*" in text
    page = export_tree_html(agent)
    assert page.count("<section") == 4 and page.count("Once upon a time.") == 1
    assert_inert(page)


async def test_the_tree_after_a_reset_shows_the_whole_new_history(model: ScriptedModel) -> None:
    agent = make(model, name="root", messages=[{"role": "user", "content": "old"}])
    fork = agent.fork("fork")
    fork.reset([{"role": "user", "content": "brand new"}])

    text = export_tree_markdown(agent)

    assert "## fork" in text and "brand new" in text and "Continues from" not in text


async def test_exports_write_the_file_they_return(model: ScriptedModel, tmp_path: Path) -> None:
    agent = make(model)
    model.push(reply("Hello"))
    await agent.user_message("if a < b:\n```\nhi")

    text = export_markdown(agent, tmp_path / "lesson.md")
    page = export_html(agent, tmp_path / "lesson.html", title="Lesson 1")

    assert page == export_html(agent, title="Lesson 1")  # with no path: the same text
    assert (tmp_path / "lesson.md").read_text(encoding="utf-8") == text
    assert (tmp_path / "lesson.html").read_text(encoding="utf-8") == page
    assert "<title>Lesson 1</title>" in page
    assert oct((tmp_path / "lesson.html").stat().st_mode & 0o777) == "0o644"
    assert "````text\nif a < b:\n```\nhi\n````" in text


async def test_an_export_to_a_symlink_replaces_the_link_not_its_target(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    (tmp_path / "lesson.md").symlink_to(target)

    text = export_markdown(make(model), tmp_path / "lesson.md")

    assert target.read_text() == "mine\n"
    assert not (tmp_path / "lesson.md").is_symlink()
    assert (tmp_path / "lesson.md").read_text(encoding="utf-8") == text


@pytest.mark.parametrize("export", [export_markdown, export_html, export_tree_markdown])
async def test_a_loaded_session_exports_the_same_text(
    model: ScriptedModel, tmp_path: Path, export: Any,
) -> None:
    agent = make(model)
    model.push(tool_calls(call("add", {"x": 1, "y": 1}, id="c1")), reply("2"), reply("3"))
    await agent.user_message("1 + 1?")
    fork = agent.fork("next")
    await fork.user_message("and 1 + 2?")
    save_session(tmp_path / "s.json", agent)

    fragola = Fragola(api_key="k", base_url=model.base_url, max_retries=0)
    session = load_session(tmp_path / "s.json", fragola, tools=[add])

    assert export(session["next"]) == export(fork)


def test_tree_exports_show_each_branch_whose_instructions_changed(model: ScriptedModel) -> None:
    root = make(model, instructions="Answer in English.")
    same = root.fork("same")
    french = root.fork("french")
    french.set_instructions("Answer in French.")
    markdown = export_tree_markdown(root)
    assert markdown.count("Answer in English.") == 1  # the root's; "same" did not change them
    assert "Answer in French." in markdown.split("## french", 1)[1]
    assert "Instructions" not in markdown.split("## same", 1)[1].split("## french", 1)[0]
    page = export_tree_html(root)
    assert page.count("Answer in English.") == 1 and page.count("Answer in French.") == 1
    assert same.instructions == "Answer in English."
