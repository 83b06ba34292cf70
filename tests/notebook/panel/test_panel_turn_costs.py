"""Issue 34: what a turn panel costs once a turn, whatever its length. A 20-step turn in a
``%%fragola`` cell paid for its panel about a quarter of its time, most of it messages sent
once a turn that said nothing new: the header, strip and tools as updates right after the
widget opened (the opening could carry them), and the waterfall's last bars twice at the
turn's end (as new bars, then in the ``timeline`` trait's update just after). In-process,
against the scripted model; what the kernel sends is read from a recording comm and replayed
as ``panel.js`` keeps it (``comm_log``)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from support.comm_log import Wire, record_comms
from support.helpers import add, steps_brain

from fragola_nb import Agent, Fragola, tool
from fragola_nb.models.scripted import ScriptedModel
from fragola_nb.notebook.panel.outbox import INTERVAL
from fragola_nb.notebook.panel.view import AgentPanel

STEPS = 20



@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    return record_comms(monkeypatch)


def streamed_turn(model: ScriptedModel, steps: int) -> tuple[Agent, AgentPanel]:
    """An agent whose next turn takes ``steps`` streamed steps of ``add``, and its turn
    panel."""
    model.brain = steps_brain(steps)
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=0)
    agent = fragola.agent(name="steps", tools=[add], max_step=steps + 5,
                          model_settings={"stream": True})
    return agent, AgentPanel(agent, since=0)


def test_a_panel_opens_in_one_message_holding_its_header_strip_and_tools(
        model: ScriptedModel, wire: Wire) -> None:
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=0)
    agent = fragola.agent(name="calc", tools=[add], messages=[
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    panel = AgentPanel(agent, since=2)
    mine = [s for s in wire.log if s.comm_id == panel.comm.comm_id]
    assert [s.kind for s in mine] == ["comm_open"]  # no update after it: nothing changed
    state = mine[0].data["state"]
    assert state["head"] == panel.head and state["head"]["name"] == "calc"
    assert state["head"]["steps"] == 0 and state["head"]["turn"] is True
    assert state["strip"] == panel.strip == {"kind": "idle", "text": "ready"}
    assert state["tools"] == panel.tools and [t["name"] for t in state["tools"]] == ["add"]
    # the view is made from it as before: a hello gets the rows, none yet for this turn
    wire.clear()
    panel._on_browser(None, {"do": "hello"}, [])
    [hello] = [s.data["content"] for s in wire.log if s.kind == "comm_msg"]
    assert hello["t"] == "rows" and hello["reset"] is True and hello["rows"] == []


async def test_the_waterfall_ends_in_the_trait_alone_and_the_view_has_every_bar(
        model: ScriptedModel, wire: Wire) -> None:
    agent, panel = streamed_turn(model, STEPS)
    await agent.user_message("go")
    panel.sync_now()  # as the cell's end does
    sent = [s.data for s in wire.log if s.kind == "comm_msg"
            and s.comm_id == panel.comm.comm_id]
    # the view's waterfall, replayed as panel.js keeps it: the trait's updates set it,
    # a message of new bars keeps the bars before ``from`` and adds its own
    shown: dict[str, Any] = {}
    updates = 0
    for before, message in zip([{}, *sent], sent, strict=False):
        if message.get("method") == "update" and "timeline" in message["state"]:
            updates += 1
            shown = message["state"]["timeline"]
            # never the same bars just before, as a message of new bars
            assert not (before.get("method") == "custom"
                        and before["content"]["t"] == "timeline"), before
        elif message.get("method") == "custom" and message["content"]["t"] == "timeline":
            content = dict(message["content"])
            kept = list(shown.get("bars", []))[:content.pop("from")]
            content.pop("t")
            shown = {**content, "bars": kept + content.pop("bars")}
    assert updates == 1  # the turn's end, once
    assert shown == panel.timeline and len(panel.timeline["bars"]) == 2 * STEPS + 1


async def test_what_streams_just_after_a_paced_update_waits_for_the_next_one(
        model: ScriptedModel, wire: Wire) -> None:
    # In a fast run, each paced update brought rows, and the next step's call then streamed
    # at once in a message of its own, the outbox being idle for an instant: about as many
    # stream messages as updates (issue 34). Now what streams within the interval after rows
    # went rides in the next update.
    steps = 200
    agent, panel = streamed_turn(model, steps)
    wire.clear()
    started = time.monotonic()
    await agent.user_message("go")
    elapsed = time.monotonic() - started
    customs = [s.data["content"] for s in wire.log if s.kind == "comm_msg"
               and s.comm_id == panel.comm.comm_id and s.data.get("method") == "custom"]
    updates = [m for m in customs if m["t"] == "rows"]
    alone = [m for m in customs if m["t"] == "stream"]
    # paced at the outbox's interval (about 7 a second), not the stream's 17: one update an
    # interval at most, and those of the run's start and end, which go at once
    assert len(updates) <= elapsed / INTERVAL + 3, (len(updates), round(elapsed, 2))
    # a machine that stalls past an interval may let one go alone; not one an update
    assert len(updates) >= 3 and len(alone) <= len(updates) // 4, (len(updates), len(alone))
    # what the view ends with is the turn: every call's row, the answer, no stream left
    assert len(panel.rows) == steps + 2 and panel.stream_text == ""
    # the calls did stream, and the stream's state rode in the updates (its text only when an
    # update went mid-stream, which a step streamed in one read of the socket never lets be)
    assert sum(1 for c in model.chunks if c["choices"] and c["choices"][0]["delta"].get(
        "tool_calls")) >= steps
    assert any("stream" in m for m in updates)


async def test_a_short_turn_gets_its_waterfall_once_at_its_end(
        model: ScriptedModel, wire: Wire) -> None:
    # The waterfall's first bars went at once, just after the turn began, then the whole of
    # it in the trait when it ended: a message each turn that said nothing lasting. The first
    # interval (a quarter of a second) counts from the panel's making now.
    model.brain = steps_brain(2)
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=0)
    agent = fragola.agent(name="short", tools=[add])
    panel = AgentPanel(agent, since=0)
    await agent.user_message("go")
    sent = [s.data for s in wire.log if s.kind == "comm_msg"
            and s.comm_id == panel.comm.comm_id]
    assert not [m for m in sent if m.get("method") == "custom"
                and m["content"]["t"] == "timeline"]
    [update] = [m["state"]["timeline"] for m in sent
                if m.get("method") == "update" and "timeline" in m["state"]]
    assert update == panel.timeline and len(update["bars"]) == 5  # 3 model calls, 2 tools


async def test_a_fast_turn_s_rows_wait_for_the_outbox_yet_what_reads_them_sees_them_all(
        model: ScriptedModel, wire: Wire) -> None:
    # While the outbox waits, a step's messages are only marked unread (their rows are made
    # in one go when it goes): a fast turn made its rows and counted its cards twice a step.
    # What reads the rows meanwhile reads them first: a tool's body sees every message.
    steps = 40
    model.brain = steps_brain(steps)
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=0)
    seen: list[tuple[int, int, int]] = []

    def look(x: int) -> int:
        """Add one, looking at the panel."""
        sent = sum(len(s.data["content"].get("rows", ())) for s in wire.log
                   if s.kind == "comm_msg" and s.comm_id == panel.comm.comm_id
                   and s.data.get("method") == "custom")
        seen.append((len(panel.rows), agent.message_count, sent))
        return x + 1

    agent = fragola.agent(name="fast", tools=[tool(look, name="add")], max_step=steps + 5)
    panel = AgentPanel(agent, since=0)
    await agent.user_message("go")
    # at the n-th call: the user's row and n + 1 calls' rows (a result folds into its call)
    assert [rows for rows, _, _ in seen] == [n + 2 for n in range(steps)]
    assert [count for _, count, _ in seen] == [2 + 2 * n for n in range(steps)]
    # and the views did wait: most steps' rows were not sent when the next call ran
    assert sum(1 for rows, _, sent in seen if sent < rows) > steps // 2, seen
    assert len(panel.rows) == steps + 2 and panel.rows[-1]["html"]


async def test_a_call_s_row_never_reaches_the_view_beside_its_streamed_preview(
        model: ScriptedModel, wire: Wire) -> None:
    # The rows that wait for the outbox are read as it goes; a stored reply's last text goes
    # as it is stored, and may make the outbox go: the rows it brings then must stop before
    # that reply, whose row comes with the clear of its streamed text (never both on screen).
    steps = 80
    agent, panel = streamed_turn(model, steps)
    await agent.user_message("go")
    rows: dict[int, dict[str, Any]] = {}
    stream, both = "", []
    for message in wire.custom(comm_id=panel.comm.comm_id):  # as panel.js keeps them
        if message["t"] == "rows":
            rows.update({row["k"]: row for row in message["rows"]})
            stream = message.get("stream", stream)
        elif message["t"] == "stream":
            stream = stream + message["add"] if "add" in message else message.get("text", "")
        previewed = re.search(r'"x":\s*(\d+)', stream)
        if previewed and any(call["args"] == f"x={previewed[1]}"
                             for row in rows.values() for call in row["calls"]):
            both.append(previewed[1])
    assert both == [], both
    assert len(rows) == steps + 2 and stream == ""
