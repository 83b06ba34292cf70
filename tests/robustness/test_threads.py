"""``run_sync`` called where it cannot work, Ctrl-C at every moment of it, and ``stop()`` from
another thread racing a ``step()`` (issue 10, B.1-B.3)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.helpers import answered, make_agent
from support.invariants import check_agent

from fragola_nb import BadUsage, run_sync, tool
from fragola_nb.core.run.loop import CANCELLED
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls

# -- B.1: run_sync from code running on run_sync's own loop -----------------------------------

REENTRANT = textwrap.dedent('''
    import sys
    from fragola_nb import Fragola, run_sync, tool
    from fragola_nb.models.scripted import call, reply, tool_calls

    fragola = Fragola.scripted([
        tool_calls(call("ask_other", {}, id="c1")), reply("outer done"),
        reply("later call works"),
    ])
    other = fragola.agent("other")

    @tool
    def ask_other() -> str:
        """A sync tool that calls another agent the sync way."""
        return run_sync(other.user_message("hi"), timeout=5).messages[-1]["content"]

    outer = fragola.agent("outer", tools=[ask_other])
    state = run_sync(outer.user_message("go"), timeout=20)
    print(state.messages[2]["content"])
    print(run_sync(other.user_message("again"), timeout=20).messages[-1]["content"])
''')


def test_run_sync_from_a_sync_tool_run_by_run_sync_is_bad_usage_and_nothing_hangs() -> None:
    done = subprocess.run([sys.executable, "-c", REENTRANT], capture_output=True, text=True,
                          timeout=60)

    assert done.returncode == 0, done.stderr
    told, later = done.stdout.splitlines()
    assert told.startswith("Error: the tool 'ask_other' raised BadUsage: run_sync() was called "
                           "from code running on fragola_nb's own loop")
    assert "make that tool or listener async" in told
    assert later == "later call works"  # the background loop still serves calls
    assert "never awaited" not in done.stderr


async def test_an_async_tool_awaiting_another_agent_works(model: ScriptedModel) -> None:
    other = make_agent(model, name="other")

    @tool
    async def ask_other() -> str:
        """Ask the other agent."""
        return str((await other.user_message("hi")).messages[-1]["content"])

    outer = make_agent(model, ask_other, name="outer")
    model.push(tool_calls(call("ask_other", {}, id="c1")), reply("inner"), reply("outer"))

    state = await outer.user_message("go")

    assert state.messages[2]["content"] == "inner"


# -- B.3: Ctrl-C at the moment run_sync hands the call over -----------------------------------


@contextmanager
def ctrl_c_after(function: str) -> Iterator[None]:
    """Raise KeyboardInterrupt in this thread the moment ``function`` returns, as a SIGINT
    arriving right then would."""

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code.co_name == function:
            sys.setprofile(None)
            raise KeyboardInterrupt

    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(None)


def test_ctrl_c_as_run_sync_hands_the_call_over_cancels_it(model: ScriptedModel) -> None:
    ran: list[str] = []
    transfer = tool(name="transfer", description="", handler=lambda: ran.append("sent") or "ok")
    agent = make_agent(model, transfer)
    model.push(tool_calls(call("transfer", {}, id="c1")), reply("sent it"))

    with pytest.raises(KeyboardInterrupt), ctrl_c_after("call_soon_threadsafe"):
        run_sync(agent.user_message("send the money"), timeout=10)

    assert ran == [] and agent.status == "idle"
    check_agent(agent)
    if model.requests:
        # On a loaded machine the cancellation can land after the request went out: its
        # reply (the call to transfer) is dropped with the turn, and never runs.
        state = run_sync(agent.user_message("what happened?"), timeout=10)
        assert ran == [] and state.messages[-1]["content"] == "sent it"
        check_agent(agent)
        return
    # The interrupted call may have stored its user message (a stopped turn keeps it), but it
    # went no further: the transfer runs once, in the next call, after its message.
    state = run_sync(agent.user_message("what happened?"), timeout=10)
    users = [m["content"] for m in state.messages if m["role"] == "user"]
    assert users in (["what happened?"], ["send the money", "what happened?"])
    asked_at = state.messages.index({"role": "user", "content": "what happened?"})
    answered_at = state.messages.index(answered("c1", "ok"))
    assert asked_at < answered_at
    assert ran == ["sent"]
    check_agent(agent)


# -- B.2: stop from another thread on a waiting agent -----------------------------------------


def guarded_agent(model: ScriptedModel, calls: int = 2) -> tuple[Any, list[str]]:
    """An agent whose first request is answered with ``calls`` calls that need approval,
    and every later one with "done"."""
    ran: list[str] = []
    guarded = tool(name="guarded", description="", handler=lambda: ran.append("ran") or "ok",
                   require_approval=True)
    agent = make_agent(model, guarded)

    def brain(request: dict[str, Any]) -> Any:
        if request["messages"][-1]["role"] == "user":
            return tool_calls(*(call("guarded", {}, id=f"c{n}") for n in range(calls)))
        return reply("done")

    model.brain = brain
    return agent, ran


@pytest.mark.parametrize("how", ["stop", "stop_sync"])
async def test_stopping_a_waiting_agent_from_another_thread_settles_on_its_loop(
    model: ScriptedModel, how: str
) -> None:
    agent, _ = guarded_agent(model)
    await agent.user_message("go")
    assert agent.status == "waiting"
    heard: list[int] = []
    agent.on_after_state_update(lambda event: heard.append(threading.get_ident()))

    await asyncio.to_thread(getattr(agent, how))

    assert agent.status == "idle" and agent.outcome == "stopped"
    assert [m["content"] for m in agent.state.messages[2:]] == [CANCELLED, CANCELLED]
    assert set(heard) == {threading.get_ident()}  # the listeners ran on the agent's loop
    check_agent(agent)


async def test_stop_sync_from_another_thread_racing_step_never_answers_a_call_twice(
    model: ScriptedModel,
) -> None:
    for _ in range(30):
        agent, ran = guarded_agent(model, calls=3)
        await agent.user_message("go")
        for pending in agent.pending:
            agent.approve(pending.id)
        stopper = asyncio.ensure_future(asyncio.to_thread(agent.stop_sync))
        try:
            await agent.step()
        except BadUsage:
            pass  # the stop won: step() found nothing to resume... or it was generating
        await stopper
        assert agent.status == "idle"

        messages = agent.state.messages
        answers = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
        assert sorted(answers) == ["c0", "c1", "c2"]  # each call answered exactly once
        assert len(ran) == sum(m["content"] == "ok" for m in messages if m["role"] == "tool")
        check_agent(agent)


def test_run_sync_inside_a_running_loop_still_works(model: ScriptedModel) -> None:
    agent = make_agent(model)
    model.push(reply("from a loop"))

    async def main() -> str:
        # A sync call from code that runs in an event loop (a notebook cell, say).
        return str(run_sync(agent.user_message("hi"), timeout=10).messages[-1]["content"])

    assert asyncio.run(main()) == "from a loop"


SYNC_SCRIPT = textwrap.dedent('''
    from fragola_nb import Fragola, run_sync
    from fragola_nb.models.scripted import reply

    fragola = Fragola.scripted([reply(f"answer {n}") for n in range(20)])
    agent = fragola.agent("script")
    for n in range(20):
        state = run_sync(agent.user_message(f"question {n}"), timeout=20)
    print(state.messages[-1]["content"])
''')


def test_a_script_of_run_sync_calls_exits_clean_under_dev_mode() -> None:
    done = subprocess.run([sys.executable, "-X", "dev", "-W", "error", "-c", SYNC_SCRIPT],
                          capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "answer 19"
    noise = [line for line in done.stderr.splitlines() if "took" not in line]
    assert noise == [], done.stderr
