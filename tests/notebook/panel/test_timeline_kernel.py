"""The turn panel's timeline in a real kernel: a ``%%fragola`` turn whose model calls the
scripted server delays and whose tools sleep sends the browser (the widget state read from
iopub) a waterfall of those calls, in order, with their durations as text and the turn's
totals; a hostile argument stays text. A panel of the whole agent sends none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
from support.kernel_harness import Kernel, startup_profile

from fragola_nb.models.scripted import ScriptedModel, call, hang, reply, tool_calls

HOSTILE = '<img src=x onerror="alert(1)">\u202egnp.exe'

SETUP = """
import asyncio
from fragola_nb import Fragola, tool

@tool(name="nap", description="Sleep a little.")
async def nap(q: str) -> str:
    await asyncio.sleep(0.2)
    return "rested " + q
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    with Kernel(env=startup_profile(tmp_path_factory.mktemp("ipython"))) as running:
        running.execute(SETUP)
        yield running


def test_a_turn_panel_sends_the_waterfall_of_its_calls(kernel: Kernel) -> None:
    script = [hang(0.3, then=tool_calls(call("nap", {"q": HOSTILE}, id="c1"),
                                        call("nap", {"q": "b"}, id="c2"))),
              reply("done")]
    with ScriptedModel(script) as model:
        kernel.execute(f"fragola = Fragola(api_key='k', base_url={model.base_url!r}, "
                       "max_retries=0)\nsleeper = fragola.agent(name='sleeper', tools=[nap])")
        kernel.execute("%%fragola sleeper\nNap twice")
        kernel.drain(0.2)
        state: dict[str, Any] = kernel.widgets[kernel.panel()]
    timeline = state["timeline"]
    bars = timeline["bars"]
    assert [(b["kind"], b["label"]) for b in bars] == [
        ("model", "model"), ("tool", "nap"), ("tool", "nap"), ("model", "model")]
    assert bars[0]["start"] == 0 and bars[0]["seconds"] >= 0.3 and bars[0]["ttft"] >= 0.3
    assert all(b["seconds"] >= 0.2 for b in bars[1:3])
    for earlier, later in pairwise(bars):  # one after the other
        assert later["start"] >= earlier["start"] + earlier["seconds"] - 0.01
    assert timeline["span"] >= bars[-1]["start"] + bars[-1]["seconds"] - 1e-6
    assert all(b["text"].endswith(("ms", " s")) for b in bars)
    assert timeline["summary"].startswith("turn ") and " · tools " in timeline["summary"]
    # the turn split by its own timestamps: model, tools, between calls, summing to it
    parts = timeline["parts"]
    assert [p["kind"] for p in parts] == ["model", "tool", "between"]
    assert sum(p["seconds"] for p in parts) == pytest.approx(timeline["span"])
    assert sum(p["share"] for p in parts) == 100 and parts[1]["seconds"] >= 0.4
    assert parts[2]["seconds"] == pytest.approx(sum(b["gap"] for b in bars))
    # the hostile argument: in the tooltip as text, its override written out
    assert "<img" in bars[1]["title"] and "\\u202e" in bars[1]["title"]
    assert "\u202e" not in json.dumps(timeline, ensure_ascii=False)
    # the whole agent's panel: no timeline (thousands of bars would be sent on every event)
    kernel.execute("from fragola_nb.notebook.panel.view import AgentPanel\n"
                   "whole = AgentPanel(sleeper)\ndisplay(whole)")
    assert kernel.widgets[kernel.panel()]["timeline"] == {}
