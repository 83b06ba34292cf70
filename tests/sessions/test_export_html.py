"""``export_html``: a run (an agent's fork tree, a comparison, a batch) as one self-contained
HTML file: its data safe inside the page, hostile text inert, no credential, nothing fetched.
(What a browser makes of the file: tests/browser/test_browser_export_html.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.html_checks import assert_page_is_closed, data_of
from support.html_export_world import (
    ARG_SECRET,
    HALF_EMOJI,
    HEADER_SECRET,
    IMAGE,
    KEY,
    LEAKS,
    SCRIPT,
    SEPARATORS,
    ZERO_WIDTH,
    batch,
    comparison,
    tree_agent,
)

from fragola_nb import BadUsage, export_html
from fragola_nb.models.scripted import ScriptedModel


def all_text(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in all_text(v)]
    if isinstance(value, list):
        return [t for v in value for t in all_text(v)]
    return []


async def test_an_agent_exports_its_whole_tree_with_this_agent_selected(
        model: ScriptedModel, tmp_path: Path) -> None:
    root = await tree_agent(model)
    fork = root.forks[0]
    deeper = fork.forks[0]

    written = export_html(deeper, tmp_path / "run.html")

    page = (tmp_path / "run.html").read_text(encoding="utf-8")
    assert written == page  # the text written, as every export returns
    assert page == export_html(deeper)  # with no path: the same page, nothing written
    assert oct((tmp_path / "run.html").stat().st_mode & 0o777) == "0o644"
    data = data_of(page)
    assert data["kind"] == "agent" and data["selected"] == deeper.id
    nodes = {node["id"]: node for node in data["nodes"]}
    assert list(nodes) == [root.id, fork.id, deeper.id, root.forks[1].id]  # parents first
    assert [nodes[n.id]["depth"] for n in (root, fork, deeper)] == [0, 1, 2]
    # Each node holds only what it adds; its history is its parent's first `start` messages.
    assert nodes[root.id]["start"] == 0 and len(nodes[root.id]["messages"]) == 6
    assert nodes[fork.id]["start"] == 6 and nodes[fork.id]["fork_point"] == 6
    assert nodes[fork.id]["fork_of"] == nodes[root.id]["name"]  # by name: "fork of X at N"
    assert [m["t"] for m in nodes[fork.id]["messages"] if m["r"] == "user"] == ["fork question"]
    assert nodes[deeper.id]["start"] == 8 and nodes[deeper.id]["parent"] == fork.id
    assert nodes[root.forks[1].id]["messages"] == []  # a fork that added nothing
    # The tool call: its name, its arguments as indented JSON, and its result message.
    call_message = nodes[root.id]["messages"][1]
    assert call_message["c"][0]["n"] == "login" and call_message["c"][0]["id"] == "call_login"
    assert call_message["c"][0]["a"].startswith('{\n  "user": "bob file\\u202egnp.exe",\n')
    result = nodes[root.id]["messages"][2]
    assert result["r"] == "tool" and result["id"] == "call_login"
    assert result["t"].startswith("logged in as bob")
    assert nodes[root.id]["instructions"] == f"Be careful {SCRIPT}"
    assert deeper.usage.summary() in nodes[deeper.id]["about"]


async def test_hostile_text_is_data_never_markup(model: ScriptedModel) -> None:
    root = await tree_agent(model)

    page = export_html(root)

    assert_page_is_closed(page)
    # Nothing a model or a person wrote closes the data block or opens markup...
    body = page.split('<script type="application/json" id="fx-data">', 1)[1]
    block = body.split("</script>", 1)[0]
    assert not set("<>&\u2028\u2029") & set(block)
    # ...and it reads back as the very text, invisible controls written out.
    texts = all_text(data_of(page))
    assert f"Log me in {IMAGE}" in texts
    assert "and file\\u202egnp.exe" in texts
    assert not {"\u202e", "\u200b", "\u2028", "\u2029"} & set("".join(texts))
    # Assistant Markdown is render.py's escaped HTML: the script sets it, never runs it.
    answers = [m["h"] for node in data_of(page)["nodes"] for m in node["messages"] if "h" in m]
    assert any("&lt;/script&gt;&lt;script&gt;alert(1)" in h for h in answers)
    assert any("pay\\u200bpal line\\u2028para\\u2029end" in h for h in answers)
    assert not any(re.search(r"<(img|script)|href=\"(?!https?:)", h) for h in answers)
    # The page's heading and title are escaped HTML.
    assert "<title>&lt;b&gt;root&lt;/b&gt;&lt;img src=x onerror=alert(2)&gt;</title>" in page
    assert ZERO_WIDTH not in page and SEPARATORS not in page


async def test_half_an_emoji_is_written_out_and_the_file_is_utf8(
        model: ScriptedModel, tmp_path: Path) -> None:
    root = await tree_agent(model)
    deeper = root.forks[0].forks[0]
    # The server sent a lone surrogate; it was stored as U+FFFD (a history stays sendable).
    assert deeper.state.messages[-1]["content"].endswith(HALF_EMOJI.replace("\ud83d", "\ufffd"))

    export_html(root, tmp_path / "half.html")

    text = (tmp_path / "half.html").read_bytes().decode("utf-8")  # strict: the file is valid UTF-8
    last = data_of(text)["nodes"][2]["messages"][-1]
    assert HALF_EMOJI.replace("\ud83d", "\ufffd") in last["h"]


async def test_no_credential_reaches_the_file(model: ScriptedModel, tmp_path: Path) -> None:
    root = await tree_agent(model)
    result = await batch(model)  # a failed row's error quotes the key the server was sent
    compared = await comparison(model)

    for obj in (root, compared, result):
        export_html(obj, tmp_path / "x.html")
        page = (tmp_path / "x.html").read_text(encoding="utf-8")
        for secret in (*LEAKS, KEY, HEADER_SECRET, ARG_SECRET, "SECRET"):
            assert secret not in page, (type(obj).__name__, secret)
    # The tool argument is there, by its name, hidden; ordinary settings are not written.
    page = export_html(root)
    assert '\\"api_key\\": \\"[redacted]\\"' in page
    assert "trace-7" not in page and "temperature" not in page
    assert "[redacted]" in export_html(result)  # the error is kept, the key hidden in it


async def test_a_comparison_exports_its_variants_side_by_side(model: ScriptedModel) -> None:
    compared = await comparison(model)

    data = data_of(export_html(compared))

    assert data["kind"] == "comparison"
    assert data["message"] == f"Which? {SCRIPT}"
    assert [m.get("t") or m.get("h") for m in data["shared"]] == [
        "context first", "<p>shared answer</p>\n"]
    assert [v["name"] for v in data["variants"]] == ["short", f"long {IMAGE}"]
    assert [v["status"] for v in data["variants"]] == ["finished", "finished"]
    assert data["variants"][0]["answer"] == f"short {IMAGE}"
    assert data["variants"][1]["answer"] == "long answer file\\u202egnp.exe"
    first = data["variants"][0]["messages"]
    assert [m["r"] for m in first] == ["user", "assistant"] and first[0]["t"] == f"Which? {SCRIPT}"
    assert all(isinstance(v["tokens"], int) for v in data["variants"])


async def test_a_batch_exports_its_rows(model: ScriptedModel) -> None:
    result = await batch(model)

    data = data_of(export_html(result))

    assert data["kind"] == "batch" and data["title"] == "batch of 4 inputs"
    assert data["summary"].startswith("4 inputs: 3 done, 1 failed")
    rows = data["rows"]
    assert [(r["index"], r["status"]) for r in rows] == [
        (0, "done"), (1, "failed"), (2, "done"), (3, "done")]
    assert rows[0]["answer"] == "answer to 2 + 2?" and rows[0]["error"] is None
    assert rows[1]["input"] == f"fail {IMAGE}" and "HTTP 500" in rows[1]["error"]
    assert rows[3]["input"] == "find file\\u202egnp.exe"
    assert [m["r"] for m in rows[0]["messages"]] == ["user", "assistant"]


@pytest.mark.parametrize("obj", [None, "agent", 42, ["rows"], {"a": 1}])
def test_anything_else_is_bad_usage(obj: Any, tmp_path: Path) -> None:
    with pytest.raises(BadUsage, match="exports an Agent, a Comparison or a BatchResult"):
        export_html(obj, tmp_path / "x.html")
    assert list(tmp_path.iterdir()) == []


async def test_a_path_that_cannot_be_written_is_bad_usage(model: ScriptedModel,
                                                          tmp_path: Path) -> None:
    root = await tree_agent(model)
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o500)
    try:
        for bad, words in [(tmp_path, "is a folder"), (tmp_path / "no" / "x.html", "folder"),
                           (42, "needs a file path"), ("", "needs a file path")]:
            with pytest.raises(BadUsage, match=words):
                export_html(root, bad)  # type: ignore[arg-type]
        import os
        if os.geteuid() != 0:  # root writes anywhere
            with pytest.raises(BadUsage, match="cannot write"):
                export_html(root, tmp_path / "ro" / "x.html")
    finally:
        (tmp_path / "ro").chmod(0o700)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ro"]


def test_the_data_block_escapes_what_could_end_it() -> None:
    from fragola_nb.sessions.htmlexport import script_json

    text = script_json({"x": "</script><!-- & \u2028\u2029 >"})

    assert text == '{"x":"\\u003c/script\\u003e\\u003c!-- \\u0026 \\u2028\\u2029 \\u003e"}'
    assert json.loads(text) == {"x": "</script><!-- & \u2028\u2029 >"}
