"""Random play: random model outputs and random user actions, and after every action the
invariants of ``invariants.py`` hold for every agent.

Hypothesis draws, step by step: which agent acts (the first one or a fork), what it does
(``user_message``, ``step`` with ``by``, ``approve``/``reject``/``inject``, ``stop``,
``stop_sync``, ``fork``, ``reset``), what the model answers to the requests of a run (text,
one or several tool calls, bad or truncated arguments, unknown tools, HTTP errors, dropped
connections, streams cut short) and whether the run is interrupted (``stop()`` or
``stop_sync()`` from a listener at the k-th event of a kind, or ``stop()``, ``stop_sync()`` or
task cancellation from outside after some turns of the event loop).

After every action, for every agent: status is idle or waiting; every tool call is answered
exactly once, except while waiting, when exactly the pending calls are open; roles come in a
valid order; the history is a valid ``CreateChatCompletionRequest``. The acting agent's
previous history is a prefix of its new one (except after ``reset``), and every other agent is
exactly as it was: forks never affect each other.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support.helpers import make_fragola
from support.invariants import check_agent, check_history, snapshot

from fragola_nb import (
    EVENT_NAMES,
    Agent,
    AgentState,
    BadUsage,
    Fragola,
    InvalidArguments,
    ModelError,
    create_store,
    tool,
)
from fragola_nb.models.scripted import Item, ScriptedModel, call, drop, fail, reply, tool_calls

# -- the agents' tools --------------------------------------------------------------------


@tool
def add(a: int, b: int, context: Any) -> int:
    """Add two numbers (and count the additions in the agent's own store)."""
    context.get_store("tally").update(lambda n: n + 1)
    return a + b


@tool(require_approval=True)
def ask(question: str) -> str:
    """Needs a person's approval first."""
    return f"asked: {question}"


@tool
def broken() -> str:
    """Always raises."""
    raise RuntimeError("this tool is broken")


@tool
def halt(context: Any) -> str:
    """Stops the run gracefully from inside."""
    context.stop()
    return "halted"


ext = tool(name="ext", description="Answered from outside (dynamic).", handler="dynamic")

TOOLS = [add, ask, broken, halt, ext]

# -- what the model may answer ------------------------------------------------------------

# The calls that pause come first: Hypothesis leans towards the first entries.
CALLS = [
    ("ask", '{"question": "may I?"}'),
    ("ext", "{}"),
    ("add", '{"a": 1, "b": 2}'),
    ("add", '{"a": 1, "b'),  # truncated arguments
    ("add", "[1, 2]"),  # not an object
    ("add", '{"a": "one"}'),  # fails the schema
    ("ask", '{"question": 3}'),  # invalid: reported, never pauses
    ("broken", "{}"),
    ("halt", "{}"),
    ("no_such_tool", "{}"),
]

TEXT = st.sampled_from(["Done.", "Here you go", ""]).map(reply)
CALLING = st.lists(st.sampled_from(CALLS), min_size=1, max_size=3).map(
    lambda calls: tool_calls(*(call(name, args) for name, args in calls))
)
FAILING = st.sampled_from([
    fail(500, "scripted outage"),
    fail(429, headers={"retry-after-ms": "1"}),
    drop(),
    reply("a reply cut in the middle", stream_cut_after=2),  # cut only when streamed
    tool_calls(call("add", '{"a": 1, "b": 2}'), stream_cut_after=3),
])
# Mostly tool calls, so that runs go several steps deep and pause; failures now and then.
MODEL_OUTPUTS: st.SearchStrategy[Item] = st.one_of(CALLING, TEXT, CALLING, CALLING, FAILING)

# The model's next answers, consumed by the scripted model's brain as requests arrive; once
# empty, the model says "ok" (so every run ends).
OUTPUTS: deque[Item] = deque()


def brain(request: dict[str, Any]) -> Item:
    try:
        return OUTPUTS.popleft()
    except IndexError:
        return reply("ok")


# -- interruptions ------------------------------------------------------------------------

INSIDE_EVENTS = list(EVENT_NAMES)


@dataclass
class Trigger:
    """Stop ``agent`` (``kind``: ``stop`` or ``stop_sync``) when ``event`` fires the
    ``at``-th time during the current run."""

    agent: Agent
    kind: str
    event: str
    at: int
    seen: int = 0


TRIGGER: list[Trigger] = []


def _listener(event_name: str) -> Any:
    def listen(event: Any) -> None:
        for trigger in TRIGGER:
            if trigger.event == event_name and trigger.agent is event.context.agent:
                trigger.seen += 1
                if trigger.seen == trigger.at:
                    getattr(trigger.agent, trigger.kind)()

    listen.__qualname__ = f"interrupt_on_{event_name}"
    return listen


INTERRUPTS = st.one_of(
    st.none(),  # most runs go undisturbed, so that agents get to pause and be decided
    st.none(),
    st.none(),
    st.tuples(st.sampled_from(["stop", "stop_sync"]), st.sampled_from(INSIDE_EVENTS),
              st.integers(1, 4)),
    st.tuples(st.sampled_from(["outside_stop", "outside_stop_sync", "cancel"]),
              st.integers(0, 120)),
)

# -- the play -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One move. Drawn whole, whatever the agents' state, so that the data Hypothesis draws
    never depends on timing; ``Play.act`` reads it against the state of the moment."""

    who: int  # the acting agent: an index into the agents so far, modulo their number
    what: str  # a "decide" on an idle agent sends a user message, and vice versa
    by: int | None
    outputs: tuple[Item, ...]  # the model's answers to this run's requests
    interrupt: tuple[Any, ...] | None
    which: int  # which undecided pending call a "decide" takes, modulo their number
    decision: str


ACTIONS = st.builds(
    Action,
    who=st.integers(0, 5),
    what=st.sampled_from(["user_message", "decide", "step", "fork", "reset", "stop",
                          "stop_sync"]),
    by=st.sampled_from([None, None, 0, 1, 2, 3]),
    outputs=st.lists(MODEL_OUTPUTS, min_size=1, max_size=4).map(tuple),
    interrupt=INTERRUPTS,
    which=st.integers(0, 2),
    decision=st.sampled_from(["approve", "approve_edited", "approve_invalid", "reject",
                              "inject"]),
)


class Play:
    def __init__(self, fragola: Fragola, stream: bool) -> None:
        settings_ = {"stream": True} if stream else {}
        root = fragola.agent("root", tools=TOOLS, model_settings=settings_,
                             stores=[create_store(0, "tally")])
        for name in EVENT_NAMES:
            root.on(name, _listener(name))  # forks get copies, bound to themselves
        self.agents = [root]
        self.turns = 0

    async def act(self, move: Action) -> None:
        agent = self.agents[move.who % len(self.agents)]
        what = move.what
        if what == "user_message" and agent.status == "waiting":
            what = "decide"
        elif what == "decide" and agent.status == "idle":
            what = "user_message"
        before = {other: snapshot(other) for other in self.agents}
        event(f"{what} on a {agent.status} {'fork' if agent.fork_of else 'agent'}")

        if what in ("user_message", "step"):
            await self.run(agent, what, move)
        elif what == "decide":
            self.decide(agent, move)
        elif what == "fork" and len(self.agents) < 6:
            fork = agent.fork()
            assert fork.state.messages == agent.state.messages
            assert fork.state.pending == agent.state.pending
            self.agents.append(fork)
        elif what == "reset":
            agent.reset()
            assert (agent.state.messages, agent.status, agent.step_count) == ([], "idle", 0)
        elif what in ("stop", "stop_sync"):
            getattr(agent, what)()
            assert agent.status == "idle"

        for other in self.agents:
            check_agent(other)
            if other not in before:
                continue  # the new fork
            if other is not agent:
                assert snapshot(other) == before[other], f"{agent.name}'s {what} changed " \
                                                         f"{other.name}"
            elif what != "reset":
                old = before[agent].messages
                assert agent.state.messages[: len(old)] == old, "stored messages were lost"

    async def run(self, agent: Agent, what: str, move: Action) -> None:
        if what == "step" and not agent.state.messages:
            with pytest.raises(BadUsage):  # nothing to send: the API would refuse it
                await agent.step()
            return
        self.turns += 1
        interrupt = move.interrupt
        OUTPUTS.clear()
        OUTPUTS.extend(move.outputs)
        TRIGGER.clear()
        if interrupt is not None and len(interrupt) == 3:
            TRIGGER.append(Trigger(agent, *interrupt))
        if what == "user_message":
            coro = agent.user_message(f"{agent.name} turn {self.turns}", by=move.by)
        else:
            coro = agent.step(by=move.by)
        task = asyncio.ensure_future(coro)
        returned_first = False  # the interruption came after the call had returned
        if interrupt is not None and len(interrupt) == 2:
            kind, turns_of_the_loop = interrupt
            for _ in range(turns_of_the_loop):
                if task.done():
                    break
                await asyncio.sleep(0)
            returned_first = task.done()
            if kind == "cancel":
                task.cancel()
            elif kind == "outside_stop":
                agent.stop()
            else:
                agent.stop_sync()
        done, _ = await asyncio.wait({task}, timeout=20)
        assert done, f"{agent.name}'s {what} never returned: {agent!r}, {agent.state!r}"
        try:
            state = task.result()
        except ModelError as exc:
            event(f"run raised {type(exc).__name__}")
            assert agent.status == "idle"
        except asyncio.CancelledError:
            event("run cancelled")
            assert interrupt is not None and interrupt[0] == "cancel"
            assert agent.status == "idle"
        else:
            event(f"run {state.outcome}")
            assert isinstance(state, AgentState)
            if state.status != agent.status:
                # An outside stop()/stop_sync() that came once the turn had paused, before the
                # awaiting task resumed, cancelled the pending calls of the waiting agent.
                assert interrupt is not None
                assert returned_first or interrupt[0] in ("outside_stop", "outside_stop_sync")
                assert (state.status, agent.status) == ("waiting", "idle")
            assert state.status == ("waiting" if state.outcome == "paused" else "idle")
        finally:
            TRIGGER.clear()

    def decide(self, agent: Agent, move: Action) -> None:
        undecided = [p for p in agent.state.pending if p.decision is None]
        if not undecided:
            return
        pending = undecided[move.which % len(undecided)]
        state = agent.state
        if move.decision == "reject":
            agent.reject(pending.id, "not now")
        elif move.decision == "inject":
            agent.inject(pending.id, {"answer": 42})
        elif pending.reason == "dynamic":
            with pytest.raises(BadUsage):  # a dynamic call is answered with inject only
                agent.approve(pending.id)
            assert agent.state == state
        elif move.decision == "approve":
            agent.approve(pending.id)
        elif move.decision == "approve_edited":
            agent.approve(pending.id, {"question": "edited?"})
        else:
            with pytest.raises(InvalidArguments):
                agent.approve(pending.id, {"question": ["not", "text"]})
            assert agent.state == state


@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(moves=st.lists(ACTIONS, min_size=4, max_size=16), stream=st.booleans())
async def test_random_play_keeps_every_history_valid_and_forks_apart(
    model: ScriptedModel, client: openai.AsyncOpenAI, moves: list[Action], stream: bool
) -> None:
    # One scripted model and one client for every example; each example drains what it left.
    model.brain = brain
    play = Play(Fragola(model="m", client=client), stream)
    try:
        for move in moves:
            await play.act(move)
    finally:
        OUTPUTS.clear()
        TRIGGER.clear()


# -- the checks themselves, and what random play found ----------------------------------------


def _calling(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "add", "arguments": "{}"}}
        for i in ids]}


def _result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


@pytest.mark.parametrize("history", [
    pytest.param([{"role": "user", "content": "hi"}, _calling("a")], id="unanswered-call"),
    pytest.param([{"role": "user", "content": "hi"}, _calling("a"), _result("a"), _result("a")],
                 id="answered-twice"),
    pytest.param([{"role": "user", "content": "hi"}, _result("a")], id="orphan-result"),
    pytest.param([{"role": "user", "content": "hi"}, _calling("a", "b"), _result("a"),
                  {"role": "user", "content": "and?"}, _result("b")], id="answer-too-late"),
    pytest.param([{"role": "user", "content": "hi"}, _calling("a", "a"), _result("a")],
                 id="duplicate-ids"),
    pytest.param([{"role": "system", "content": "stored instructions"}], id="stored-system"),
    pytest.param([{"role": "user", "content": 3}], id="not-a-request"),
])
def test_the_history_check_rejects_what_could_not_be_sent(history: list[dict[str, Any]]
                                                          ) -> None:
    with pytest.raises(AssertionError):
        check_history(history)


def test_the_history_check_accepts_a_waiting_agents_open_calls() -> None:
    history = [{"role": "user", "content": "hi"}, _calling("a", "b"), _result("a")]
    check_history(history, open_calls=("b",))
    with pytest.raises(AssertionError):
        check_history(history, open_calls=("a", "b"))


async def test_step_with_nothing_to_send_is_bad_usage(model: ScriptedModel) -> None:
    # Found by random play: step() on an empty history sent `messages: []`, which the API
    # always refuses. With instructions there is a message to send.
    fragola = make_fragola(model)
    bare = fragola.agent("bare")
    instructed = fragola.agent("instructed", instructions="Say hello first.")
    model.push(reply("Hello!"))

    with pytest.raises(BadUsage, match="no message to send"):
        await bare.step()
    state = await instructed.step()

    assert bare.state.status == "idle"
    assert model.requests[0]["messages"] == [{"role": "system", "content": "Say hello first."}]
    assert state.messages == [{"role": "assistant", "content": "Hello!"}]
    await fragola.aclose()
