"""Issue 34: a fast turn's streamed replies ride in the panel's paced messages.

Each step of a streamed turn streams its tool call ("→ add(...)") before the call is stored.
The panel sent that preview, its last text and its clear as messages of their own, outside the
pace: two or three a step, most of what a long turn cost the kernel. Now, while the panel's
outbox waits for the pace, the stream waits with it, and the clear of a stored reply goes in
the message that brings its row. In-process, against the scripted model; what the kernel sends
is read from a recording comm and replayed as ``panel.js`` keeps it (``comm_log``).
"""

from __future__ import annotations

import itertools
import re
import time
from typing import Any

import pytest
from support.comm_log import Sent, Wire, record_comms, stream_states
from support.helpers import add, steps_brain

from fragola_nb import Fragola
from fragola_nb.core.agent import Agent
from fragola_nb.models.scripted import ScriptedModel
from fragola_nb.notebook.panel.view import AgentPanel
from fragola_nb.notebook.stream import Stream

STEPS = 40
PREVIEW = re.compile(r'"x":\s*(\d+)')  # the call a streamed preview shows


brain = steps_brain(STEPS)


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    return record_comms(monkeypatch)


def streamed_agent(model: ScriptedModel) -> Agent:
    model.brain = brain
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=0)
    return fragola.agent(name="steps", tools=[add], max_step=STEPS + 5,
                         model_settings={"stream": True})


def sent_by(wire: Wire, panel: AgentPanel) -> list[Sent]:
    return [s for s in wire.log if s.kind == "comm_msg" and s.comm_id == panel.comm.comm_id]


async def test_a_fast_streamed_turn_sends_a_few_messages_an_interval_not_a_few_a_step(
        model: ScriptedModel, wire: Wire) -> None:
    agent = streamed_agent(model)
    panel = AgentPanel(agent, since=0)  # a turn panel, as %%fragola shows
    wire.clear()
    started = time.monotonic()
    await agent.user_message("go")
    elapsed = time.monotonic() - started
    sent = sent_by(wire, panel)
    # the whole turn is shown: every call with its result, then the answer
    calls = [c for row in panel.rows for c in row["calls"]]
    assert [c["args"] for c in calls] == [f"x={n}" for n in range(STEPS)]
    assert all(c["state"] == "ran" for c in calls)
    assert "all done" in panel.rows[-1]["html"] and panel.stream_text == ""
    # a few messages per update interval (rows, header and strip, waterfall, a stream
    # update at most), however many steps it holds: each step's preview, last text and
    # clear went on their own (about 2.3 messages a step, 12 or more an interval)
    intervals = elapsed / Stream.interval
    assert len(sent) <= 5 * intervals + 8, (len(sent), round(intervals, 1))
    customs = [s.data["content"] for s in sent if s.data.get("method") == "custom"]
    alone = [m for m in customs if m["t"] == "stream" and m.get("text") == ""]
    assert alone == []  # a stored reply's clear comes with its row, never on its own


async def test_the_view_never_shows_a_stored_call_beside_its_preview_nor_neither(
        model: ScriptedModel, wire: Wire) -> None:
    agent = streamed_agent(model)
    # each step's call streams over a few paced intervals (its frames 15 ms apart), so the
    # view is sent previews whatever the machine's speed (a fast machine streamed a whole
    # step within one interval, and the test saw no preview at all)
    model.chunk_delay = 0.015
    panel = AgentPanel(agent, since=0)
    wire.clear()
    await agent.user_message("go")
    customs = [s.data["content"] for s in sent_by(wire, panel)
               if s.data.get("method") == "custom"]
    stored: set[int] = set()  # the calls whose rows the view has
    shown, previews = "", 0
    for message in customs:
        for row in message.get("rows", ()) if message["t"] == "rows" else ():
            stored |= {int(c["args"].removeprefix("x=")) for c in row["calls"]}
        states = stream_states([message])
        if not states:
            continue
        before, (shown, _) = shown, states[0]
        showing = {int(n) for n in PREVIEW.findall(shown)}
        previews += bool(showing)
        assert not showing & stored, (shown, message)  # never the row and its preview
        if before and not shown:  # cleared: by the message that brings the stored reply
            assert message["t"] == "rows"
            assert any(row["role"] == "assistant" for row in message["rows"]), message
    assert len(stored) == STEPS and shown == ""
    assert previews >= 5, previews  # the calls did stream into the view


async def test_a_paced_update_is_one_message_its_rows_carrying_the_header_and_strip(
        model: ScriptedModel, wire: Wire) -> None:
    # A paced update sent its rows, then the header and the strip in a state update of their
    # own: two comm messages where one does (issue 34). Now the rows message carries them
    # (``state``, set on the model by panel.js); a state update goes alone only when no row
    # changed.
    agent = streamed_agent(model)
    panel = AgentPanel(agent, since=0)
    wire.clear()
    await agent.user_message("go")
    sent = [s.data for s in sent_by(wire, panel)]
    carried = [m["content"]["state"] for m in sent if m.get("method") == "custom"
               and m["content"]["t"] == "rows" and "state" in m["content"]]
    assert carried and all(set(state) <= {"head", "strip"} for state in carried)
    # never a rows message followed by a state update of the paced traits (the pair is one)
    for before, after in itertools.pairwise(sent):
        if before.get("method") == "custom" and before["content"]["t"] == "rows":
            assert not (after.get("method") == "update"
                        and set(after["state"]) & {"head", "strip"}), after
    # what a view ends with, replaying the messages as panel.js does, is the panel's own
    shown: dict[str, Any] = {}
    for message in sent:
        if message.get("method") == "update":
            shown.update({k: v for k, v in message["state"].items() if k in ("head", "strip")})
        elif message.get("method") == "custom" and message["content"]["t"] == "rows":
            shown.update(message["content"].get("state", {}))
    assert shown == {"head": panel.head, "strip": panel.strip}
    assert shown["head"]["steps"] == STEPS + 1 and shown["strip"]["kind"] == "finished"
