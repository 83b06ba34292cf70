"""Agents on the real local model: SmolLM2-135M-Instruct behind llama.cpp's server.

What the server does that a scripted model would not tell us: it streams without usage, its
forced tool calls are held to the tool's schema by a grammar, it keeps generating for a client
that left until it notices, and its chat template cannot read every message we store.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.helpers import until, until_async

from fragola_nb import Fragola, tool
from fragola_nb.core.agent import Agent

QUESTION = "What is the capital of France?"
PIRATE_WORDS = re.compile(r"\b(?:aye|arr+|matey|captain|pirates?|me name be|ye)\b", re.I)
SETTINGS = {"temperature": 0, "max_tokens": 80}
"""The model settings of most agents here: greedy (repeatable), and short answers."""


def chunks_of(agent: Agent) -> list[str]:
    pieces: list[str] = []
    agent.on_model_chunk(lambda event: pieces.append(event.content))
    return pieces


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie: dead, waiting for whoever adopted it to read its status.
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "\nState:\tZ" in status.read_text()


async def test_a_plain_turn(local: Fragola) -> None:
    agent = local.agent(name="plain", model_settings=SETTINGS)

    state = await agent.user_message(QUESTION)

    assert state.outcome == "finished" and state.step_count == 1
    user, answer = state.messages
    assert user == {"role": "user", "content": QUESTION}
    assert set(answer) == {"role", "content"} and answer["role"] == "assistant"
    assert "France" in answer["content"]


async def test_a_streamed_turn_stores_what_it_streamed_in_the_same_shape(
    local: Fragola
) -> None:
    plain = local.agent(name="plain", model_settings=SETTINGS)
    streamed = local.agent(name="streamed", model_settings={**SETTINGS, "stream": True})
    pieces = chunks_of(streamed)

    expected = (await plain.user_message(QUESTION)).messages
    state = await streamed.user_message(QUESTION)

    assert len([p for p in pieces if p]) > 3  # it really streamed, piece by piece
    assert "".join(pieces) == state.messages[-1]["content"]
    assert state.messages == expected  # greedy: the same words, and the same message shape


async def test_the_instructions_change_the_answer(local: Fragola) -> None:
    question = "Who are you?"
    plain = local.agent(name="plain", model_settings=SETTINGS)
    pirate = local.agent(name="pirate", model_settings=SETTINGS,
                         instructions="You are a pirate. Talk like a pirate.")

    plain_answer = (await plain.user_message(question)).messages[-1]["content"]
    pirate_answer = (await pirate.user_message(question)).messages[-1]["content"]

    assert not PIRATE_WORDS.search(plain_answer), plain_answer
    assert len(PIRATE_WORDS.findall(pirate_answer)) >= 2, pirate_answer


@tool
def add(x: int, y: int) -> int:
    """Add two whole numbers.

    Args:
        x: the first number
        y: the second number
    """
    return x + y


FORCE_ADD = {"tool_choice": {"type": "function", "function": {"name": "add"}}}


async def test_a_forced_tool_call_runs_the_tool_with_valid_arguments(local: Fragola) -> None:
    calls: list[dict[str, Any]] = []
    agent = local.agent(name="calculator", tools=[add], model_settings={**SETTINGS, **FORCE_ADD})
    agent.on_tool_call(lambda event: calls.append({"name": event.name, "result": event.result}))

    state = await agent.user_message("What is 2 plus 3?", by=1)

    assert state.outcome == "step_limit"
    _question, asked, result = state.messages
    [call] = asked["tool_calls"]
    assert call["function"]["name"] == "add"
    assert result == {"role": "tool", "tool_call_id": call["id"], "content": "5"}
    assert calls == [{"name": "add", "result": 5}]


async def test_a_forced_tool_call_streamed_is_stored_as_one_not_streamed(
    local: Fragola
) -> None:
    # The server repeats the tool's name in every chunk of the call (OpenAI sends it once).
    plain = local.agent(name="calculator", tools=[add], model_settings={**SETTINGS, **FORCE_ADD})
    streamed = local.agent(name="calculator", tools=[add],
                           model_settings={**SETTINGS, **FORCE_ADD, "stream": True})

    expected = (await plain.user_message("What is 2 plus 3?", by=1)).messages
    state = await streamed.user_message("What is 2 plus 3?", by=1)

    def without_ids(messages: list[dict[str, Any]]) -> str:  # each completion has its own
        return re.sub(r'"call_[^"]*"', '"ID"', json.dumps(messages))

    assert state.messages[2]["content"] == "5"
    assert without_ids(state.messages) == without_ids(expected)


async def test_the_turn_goes_on_after_a_tool_call(local: Fragola) -> None:
    agent = local.agent(name="calculator", tools=[add], model_settings={**SETTINGS, **FORCE_ADD})
    await agent.user_message("What is 2 plus 3?", by=1)
    agent.options.model_settings = dict(SETTINGS)

    state = await agent.step(by=1)

    assert state.outcome == "finished"
    assert state.messages[-1]["role"] == "assistant" and state.messages[-1]["content"]


async def test_stop_sync_in_a_long_generation_leaves_a_valid_history(local: Fragola) -> None:
    agent = local.agent(name="storyteller",
                        model_settings={"temperature": 0, "max_tokens": 2000, "stream": True})
    pieces = chunks_of(agent)
    turn = asyncio.create_task(agent.user_message("Tell me a very long story about a ship."))
    await until_async(lambda: len(pieces) > 5, timeout=60)

    agent.stop_sync()
    state = await turn

    assert state.outcome == "stopped" and state.status == "idle"
    assert state.messages == [{"role": "user",
                               "content": "Tell me a very long story about a ship."}]
    agent.options.model_settings = dict(SETTINGS)
    state = await asyncio.wait_for(agent.user_message(QUESTION), 60)  # the server is free
    assert state.outcome == "finished" and state.messages[-1]["content"]


async def test_usage_counts_for_a_call_and_what_a_stream_reports(local: Fragola) -> None:
    plain = local.agent(name="plain", model_settings=SETTINGS)
    streamed = local.agent(name="streamed", model_settings={**SETTINGS, "stream": True})

    await plain.user_message(QUESTION)
    await streamed.user_message(QUESTION)

    usage = plain.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert (usage.requests, usage.unreported) == (1, 0)
    # llama-cpp-python 0.3.36 sends no usage in a stream, even with include_usage: the call
    # is counted, its tokens are unknown (not zero).
    usage = streamed.usage
    assert (usage.requests, usage.unreported, usage.total_tokens) == (1, 1, 0)


async def test_aclose_stops_a_server_of_its_own(local: Fragola) -> None:
    other = Fragola.local(n_ctx=1024)  # other settings: not the session's server
    server = other.local_server
    assert server is not None and local.local_server is not None
    assert server.pid != local.local_server.pid
    answer = await other.agent(name="a", model_settings=SETTINGS).user_message("Hi")
    assert answer.messages[-1]["content"]

    await other.aclose()

    assert not server.running and gone(server.pid)
    assert local.local_server.running


STARTER = textwrap.dedent("""
    import sys
    from fragola_nb import Fragola
    fragola = Fragola.local(n_ctx=512)
    print(fragola.local_server.pid, flush=True)
    sys.stdin.read()
""")


@pytest.mark.parametrize("how", ["exits", "is killed"])
def test_the_server_is_gone_when_the_python_that_started_it_ends(how: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", STARTER], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    pid = int(child.stdout.readline())
    assert not gone(pid)

    if how == "exits":
        child.stdin.close()
    else:
        child.send_signal(signal.SIGKILL)
    child.wait(30)

    until(lambda: gone(pid), timeout=30)
