"""Issue 34: what a turn panel sends a step does not grow with the steps that exist. In a real
kernel, ``%%fragola`` turns of 20 and of 200 tool steps; the panel's comm messages read from
iopub as a front end reads them: bytes and messages a step alike at both sizes, every bar of
the waterfall sent once while the turn runs (its new bars only; its last ones in the trait's
update at the end), a row at most once a message, each step's streamed call cleared with its
row, and the widget state at the end holding the whole turn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.kernel_harness import Kernel

SETUP = """
%load_ext fragola_nb
from fragola_nb import Fragola, tool
from fragola_nb.models.scripted import call, reply, tool_calls

@tool
def add(x: int) -> int:
    \"\"\"Add one.\"\"\"
    return x + 1

def brain(request):
    steps = int(next(m["content"] for m in request["messages"] if m["role"] == "user").split()[1])
    done = sum(1 for m in request["messages"] if m["role"] == "tool")
    return tool_calls(call("add", {"x": done})) if done < steps else reply("done")

fragola = Fragola.scripted(brain=brain)
"""


@pytest.fixture(scope="module")
def kernel() -> Iterator[Kernel]:
    with Kernel() as running:
        running.execute(SETUP)
        yield running


def turn(kernel: Kernel, steps: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The panel's comm messages of a turn of ``steps`` tool steps (its opening included),
    and its widget state at the end."""
    kernel.execute(f"a{steps} = fragola.agent(name='a{steps}', tools=[add], "
                   f"max_step={steps + 5})")
    first = len(kernel.iopub_log)
    kernel.execute(f"%%fragola a{steps}\nsteps {steps}")
    kernel.drain(0.5)
    comm_id = kernel.panel()
    sent = [m["content"] for m in kernel.iopub_log[first:]
            if m["msg_type"] in ("comm_open", "comm_msg") and m["content"]["comm_id"] == comm_id]
    return sent, kernel.widgets[comm_id]


def size(message: dict[str, Any]) -> int:
    return len(json.dumps(message["data"], separators=(",", ":")))


def test_what_a_step_sends_does_not_grow_with_the_turn(kernel: Kernel) -> None:
    turns = {steps: turn(kernel, steps) for steps in (20, 200)}
    per_step = {steps: (len(sent) / steps, sum(map(size, sent)) / steps)
                for steps, (sent, _) in turns.items()}
    (messages_20, bytes_20), (messages_200, bytes_200) = per_step[20], per_step[200]
    assert bytes_200 <= 1.5 * bytes_20, per_step
    assert messages_200 <= 1.5 * messages_20, per_step
    for steps, (sent, state) in turns.items():
        customs = [m["data"]["content"] for m in sent if m["data"].get("method") == "custom"]
        # the waterfall while the turn runs: each bar once, never the bars sent before; the
        # last ones come with the trait's update at the turn's end (the whole waterfall)
        fed = [bar for c in customs if c["t"] == "timeline" for bar in c["bars"]]
        bars = state["timeline"]["bars"]
        assert len(bars) == 2 * steps + 1 and fed == bars[:len(fed)]
        starts = [c["from"] for c in customs if c["t"] == "timeline"]
        assert starts == sorted(starts) and len(set(starts)) == len(starts)
        for c in customs:
            if c["t"] == "rows":
                ks = [row["k"] for row in c["rows"]]
                assert len(ks) == len(set(ks)), ks  # each row once a message
        # each step's streamed call is cleared by the message that brings its row, never by
        # a message of its own (two a step went outside the pace: its last text, its clear)
        assert not [c for c in customs if c["t"] == "stream" and c.get("text") == ""]
        assert state["head"]["steps"] == steps + 1 and state["head"]["status"] == "idle"
        assert state["strip"]["kind"] == "finished"
