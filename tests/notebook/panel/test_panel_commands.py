"""What the kernel sends a panel's view is what the view declares (issue 35, item 5): every
custom message of a streamed turn with a tool call, a view's hello and the editor of "edit and
run" (its text read, refused, and its fork refused) is one of the commands panel.js lists in
its ``COMMANDS`` table (the browser side: tests/browser/test_browser_js_units.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.comm_log import Wire, record_comms
from support.helpers import add_tool, make_fragola

from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls
from fragola_nb.notebook.panel.view import AgentPanel

PACKAGE = Path(__file__).resolve().parents[3] / "fragola_nb"


def declared(marker: str) -> set[str]:
    """The keys of the COMMANDS table of the view module holding ``marker``."""
    [source] = [p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.js")
                if marker in p.read_text(encoding="utf-8")]
    table = re.search(r"export const COMMANDS = Object\.freeze\(\{\n(.*?)\n\}\);", source, re.S)
    assert table is not None, "no COMMANDS table"
    return set(re.findall(r"^  (\w+): \{ by: \"\w+\"", table.group(1), re.M))


def from_browser(panel: Any, content: dict[str, Any]) -> None:
    """What reaches the kernel when the browser's view calls ``model.send(content)``."""
    panel.comm.handle_msg({"content": {"data": {"method": "custom", "content": content}},
                           "buffers": []})


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    return record_comms(monkeypatch)


def test_the_table_is_read_from_the_module() -> None:
    assert declared("function renderView(") == {"rows", "stream", "timeline", "source", "edited"}


async def test_every_message_the_panel_sends_is_declared(model: ScriptedModel,
                                                         wire: Wire) -> None:
    agent = make_fragola(model).agent(name="told", tools=[add_tool(require_approval=False)],
                                      model_settings={"stream": True})
    panel = AgentPanel(agent)
    from_browser(panel, {"do": "hello"})
    # the reply streams for about a second, nothing else changing: its text goes out in
    # "stream" messages of its own (a fast turn's stream rides in the paced "rows" message)
    model.chunk_size, model.chunk_delay = 8, 0.01
    model.push(tool_calls(call("add", {"a": 2, "b": 3})), reply("It is " + "five " * 200))
    await agent.user_message("add")
    from_browser(panel, {"do": "source", "i": 1, "call": ""})
    from_browser(panel, {"do": "source", "i": 99, "call": ""})
    from_browser(panel, {"do": "rerun", "i": 99, "call": "", "text": "other"})
    sent = wire.custom(comm_id=panel.comm.comm_id)
    kinds = {message.get("t") for message in sent}
    assert {"rows", "stream", "source", "edited"} <= kinds
    assert kinds <= declared("function renderView(")
