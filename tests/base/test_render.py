"""The escaped HTML and text forms of a conversation: hostile text always shows as text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.html_checks import assert_inert

from fragola_nb.base.checks import FACTS
from fragola_nb.base.render import (
    CSS,
    conversation_html,
    markdown_html,
    message_html,
    messages_html,
    transcript_text,
)

SCRIPT = "<script>alert('x')</script>"
IMG = '<img src=x onerror="alert(1)">'
HOSTILE = f"{SCRIPT} and {IMG} and <a href='javascript:alert(2)'>link</a>"

def rendered(message: dict[str, Any]) -> str:
    html = message_html(message, {"call_1": "run"})
    assert_inert(html)
    return html


def test_assistant_markdown_escapes_raw_html() -> None:
    html = rendered({"role": "assistant", "content": f"# Title\n\n{HOSTILE}\n\n<div>{IMG}</div>"})
    assert "&lt;script&gt;alert(" in html
    assert "&lt;img src=x onerror=" in html
    assert "<h1>Title</h1>" in html  # markdown still works


def test_markdown_refuses_javascript_links_and_images() -> None:
    html = markdown_html("[click](javascript:alert(1)) [ok](https://example.com) "
                         "![pic](https://evil.example/x.png)")
    assert_inert(html)
    assert 'href="javascript' not in html
    # web links open in a new tab that cannot reach back to the notebook's page
    assert '<a href="https://example.com" target="_blank" rel="noopener noreferrer">ok</a>' in html
    assert "<img" not in html
    assert "evil.example" in html  # the image shows as its source text, never fetched


@pytest.mark.parametrize("url", [
    "javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:alert(1)", "data:text/html,<b>x",
    "data:image/png;base64,AAAA", "vbscript:x", "file:///etc/passwd", "notebook.ipynb",
    "/lab/tree/x.ipynb", "#top",
])
def test_only_web_and_mail_links_become_links(url: str) -> None:
    """Anything else stays text: a data: URL, a script, or a relative path that would
    navigate JupyterLab itself away from the notebook."""
    html = markdown_html(f"[here]({url}) and <{url}>")
    assert "<a " not in html, html


def test_markdown_tables_and_strikethrough() -> None:
    html = markdown_html("| a | b |\n|---|---|\n| 1 | ~~2~~ |")
    assert "<table>" in html and "<td><s>2</s></td>" in html


def test_tool_call_name_and_arguments_are_escaped() -> None:
    html = rendered({
        "role": "assistant", "content": None,
        "tool_calls": [{"id": 'call_1"><script>', "type": "function",
                        "function": {"name": IMG, "arguments": f'{{"q": "{SCRIPT}"}}'}}],
    })
    assert "<script" not in html and "<img" not in html
    assert "&lt;img src=x" in html
    assert "&lt;script&gt;" in html
    assert 'data-call-id="call_1&quot;&gt;&lt;script&gt;"' in html


def test_tool_result_is_escaped_with_its_tool_name() -> None:
    html = message_html({"role": "tool", "tool_call_id": "call_1", "content": HOSTILE},
                        {"call_1": SCRIPT})
    assert_inert(html)
    assert "result of <b>&lt;script&gt;" in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html


def test_user_multi_part_content_is_escaped() -> None:
    html = rendered({"role": "user", "content": [
        {"type": "text", "text": HOSTILE},
        {"type": "image_url", "image_url": {"url": 'javascript:alert(1)"><img src=x>'}},
        {"type": "input_audio", "input_audio": {"data": "..."}},
    ]})
    assert "&lt;script&gt;" in html
    assert "[image: javascript:alert(1)&quot;&gt;&lt;img src=x&gt;]" in html
    assert "[input_audio]" in html


def test_system_and_unknown_roles_are_escaped() -> None:
    html = rendered({"role": "system", "content": SCRIPT})
    assert "&lt;script&gt;" in html
    html = rendered({"role": f'x"{IMG}', "content": "hi"})
    assert "fragola-msg-x&quot;&lt;img" in html


def test_messages_html_names_results_across_the_slice_it_renders() -> None:
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c9", "content": "found"},
    ]
    # Rendering only the result still names its tool when given the map from earlier blocks.
    html = messages_html(messages[1:], start=1, tool_names={"c9": "lookup"})
    assert 'data-index="1"' in html and "result of <b>lookup</b>" in html
    assert "result of <b>lookup</b>" in messages_html(messages)


def test_conversation_html_escapes_its_title_and_has_the_css_once() -> None:
    html = conversation_html([{"role": "user", "content": SCRIPT}], title=IMG,
                             status="waiting", subtitle=SCRIPT)
    assert_inert(html)
    assert html.count(CSS) == 1
    assert "fragola-status-waiting" in html
    assert "<b>&lt;img src=x" in html


def test_transcript_text() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "add 1 and 2"}]},
        {"role": "assistant", "content": "Let me add.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
        {"role": "assistant", "content": SCRIPT},
    ]
    # each line starts with its message's number: its index, from ``start`` (0 by default)
    assert transcript_text(messages, 4).splitlines() == [
        "#4 [user] add 1 and 2",
        "#5 [assistant] Let me add.",
        '#5 [assistant calls add] {"a": 1, "b": 2}',
        "#6 [tool add] 3",
        f"#7 [assistant] {SCRIPT}",  # text for a terminal: shown as typed, nothing to escape
    ]
    edited = {**messages[2], FACTS: {"edited": True}}
    assert transcript_text([edited]) == "#0 [tool tool, edited by hand] 3"


DISGUISED = {
    "right-to-left override": ("file\u202egnp.exe", "file\\u202egnp.exe"),
    "isolates": ("a\u2066b\u2069c", "a\\u2066b\\u2069c"),
    "zero-width space": ("pay\u200bpal", "pay\\u200bpal"),
    "terminal escape": ("\x1b[2Jcleared", "\\u001b[2Jcleared"),
}


@pytest.mark.parametrize("text, shown", DISGUISED.values(), ids=DISGUISED.keys())
def test_text_cannot_disguise_itself_in_html_or_transcripts(text: str, shown: str) -> None:
    messages = [
        {"role": "user", "content": text},
        {"role": "assistant", "content": f"**{text}**", "tool_calls": [{
            "id": "c1", "type": "function",
            "function": {"name": text, "arguments": json.dumps({"path": text}, ensure_ascii=False)},
        }]},
        {"role": "tool", "tool_call_id": "c1", "content": text},
    ]
    page = conversation_html(messages, title=text)
    plain = transcript_text(messages)

    for out in (page, plain):
        assert text not in out
        assert shown in out
    assert page.count(shown) >= 6  # title, user, markdown, tool name, arguments, result
    assert "\u202e" not in page + plain and "\u200b" not in page + plain


def test_arguments_python_cannot_read_still_render() -> None:
    arguments = '{"n": ' + "9" * 5000 + "}"
    page = conversation_html([{"role": "assistant", "tool_calls": [{
        "id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}]}])
    assert "9" * 5000 in page


@pytest.mark.parametrize(("text", "html"), [
    # a line that is only a number and a dot is the number, not an empty list item from 30
    ("30.", "<p>30.</p>\n"),
    ("1.", "<p>1.</p>\n"),
    ("30)", "<p>30)</p>\n"),
    ("The sum:\n\n30.", "<p>The sum:</p>\n<p>30.</p>\n"),
    ("> 30.", "<blockquote>\n<p>30.</p>\n</blockquote>\n"),
    # a numbered item with text stays a list; code stays code
    ("30. apples", '<ol start="30">\n<li>apples</li>\n</ol>\n'),
    ("```\n30.\n```", "<pre><code>30.\n</code></pre>\n"),
])
def test_a_lone_number_with_a_dot_shows_as_the_number(text: str, html: str) -> None:
    assert markdown_html(text) == html


def test_a_short_text_made_visible_before_a_credential_is_known_hides_it_once_known() -> None:
    # visible() remembers the short texts it made (a view writes the same names at every
    # update, issue 34); a key learnt later (a server quoting it back) must still be hidden
    # in a text made visible before.
    from fragola_nb.base.inuse import remember
    from fragola_nb.base.render import visible

    key = "corp-gw-9Vt4kR7mQ2xZ"
    text = f"proxy {key}\u202e"
    assert visible(text) == f"proxy {key}\\u202e"  # not a credential yet: shown as it is
    remember([key])
    assert visible(text) == "proxy [redacted]\\u202e"
    assert visible(text * 30) == "proxy [redacted]\\u202e" * 30  # a long text: the same rule


@pytest.mark.parametrize("arguments", [
    '{"x": 1}', '{"q": "é \\u202e \\"quoted\\"\\n", "n": -0.0, "big": 1e300, "ok": true, '
    '"none": null, "i": 12345678901234567890}', '{"NaN": NaN, "inf": -Infinity}',
    '{}', '[1, 2]', '{"nested": {"a": [1]}}', '"text"', "not json", '{"a": 1, "a": 2}'])
def test_pretty_arguments_writes_what_json_dumps_with_indent_writes(arguments: str) -> None:
    # Flat objects take a faster path (the C encoder, issue 34): the text must not change.
    from fragola_nb.base.render import pretty_arguments

    try:
        want = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        want = arguments
    assert pretty_arguments(arguments) == want
