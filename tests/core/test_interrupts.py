"""Interrupting a run at each of its await points (the model request, the stream, the
client's retry back-off, a tool handler, each listener): by task cancellation, by
``stop_sync()`` from outside, by a ``KeyboardInterrupt`` raised inside the run, and by Ctrl-C
(SIGINT) in a plain script, with ``asyncio.run`` and with ``run_sync``. Each time the agent
ends idle with a valid history, and the next call works.

``test_stop.py`` covers ``stop()``/``stop_sync()`` called from inside the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from support.helpers import make_fragola, user
from support.invariants import check_agent, loopback_http_client

from fragola_nb import Agent, Fragola, ModelHTTPError, run_sync, tool
from fragola_nb.core.run.loop import CANCELLED, INTERRUPTED
from fragola_nb.models.scripted import (
    ScriptedModel,
    ScriptEntry,
    call,
    fail,
    hang,
    reply,
    tool_calls,
)

TESTS = Path(__file__).resolve().parents[1]  # on sys.path: the support package (helpers...)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def calls(name: str) -> dict[str, Any]:
    arguments = '{"a": 1, "b": 2}' if name == "add" else "{}"
    return {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}]}


def answer(content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "c1", "content": content}


# What the history holds when the run is cut at a given point.
USER_ONLY = [user("go")]
CALL_CANCELLED = [user("go"), calls("add"), answer(CANCELLED)]
CALL_INTERRUPTED = [user("go"), calls("add"), answer(INTERRUPTED)]  # cut inside its handler
CALL_ANSWERED = [user("go"), calls("add"), answer("3")]
TURN_DONE = [*CALL_ANSWERED, {"role": "assistant", "content": "done"}]

ADD_CALL = tool_calls(call("add", {"a": 1, "b": 2}, id="c1"))


async def forever(reached: asyncio.Event) -> None:
    reached.set()
    await asyncio.Event().wait()


@dataclass(frozen=True)
class Point:
    """An await point of a run: the script that leads there, how to get stuck there (a
    listener on ``event`` that waits forever, or nothing when the model itself hangs) and
    the history left when the run is cut there."""

    name: str
    script: tuple[ScriptEntry, ...]
    expected: list[dict[str, Any]]
    event: str | None = None
    modes: tuple[bool, ...] = (False, True)
    outcome: str = "stopped"


LISTENER_POINTS = [
    Point("user_message", (ADD_CALL,), USER_ONLY, "user_message"),
    Point("before_step", (ADD_CALL,), USER_ONLY, "before_step"),
    Point("before_model_invocation", (ADD_CALL,), USER_ONLY, "before_model_invocation"),
    Point("model_chunk", (ADD_CALL,), USER_ONLY, "model_chunk", modes=(True,)),
    Point("ai_message", (ADD_CALL,), USER_ONLY, "ai_message"),
    Point("after_model_invocation", (ADD_CALL,), CALL_CANCELLED, "after_model_invocation"),
    Point("before_tool_call", (ADD_CALL,), CALL_CANCELLED, "before_tool_call"),
    # The handler ran: its result is kept, never recorded as "did not run".
    Point("tool_call", (ADD_CALL,), CALL_ANSWERED, "tool_call"),
    Point("after_tool_call", (ADD_CALL,), CALL_ANSWERED, "after_tool_call"),
    Point("after_step", (ADD_CALL,), CALL_ANSWERED, "after_step"),
]
# Async observers run as tasks the turn awaits once it has settled: cut there, the turn is
# complete and finished.
OBSERVER_POINTS = [
    Point("after_state_update", (ADD_CALL, reply("done")), TURN_DONE, "after_state_update",
          outcome="finished"),
    Point("status_change", (ADD_CALL, reply("done")), TURN_DONE, "status_change",
          outcome="finished"),
]
MODEL_POINTS = [
    Point("model_request", (hang(),), USER_ONLY),
    Point("retry_backoff", (fail(503, headers={"retry-after-ms": "60000"}),), USER_ONLY),
    Point("stream", (reply("one two three four five six seven"),), USER_ONLY, modes=(True,)),
    Point("tool_handler", (tool_calls(call("slow", {}, id="c1")),),
          [user("go"), calls("slow"), answer(INTERRUPTED)]),
]


def point_params(points: list[Point], hows: tuple[str, ...]) -> list[Any]:
    return [
        pytest.param(point, stream, how,
                     id=f"{point.name}-{'stream' if stream else 'plain'}-{how}")
        for point in points
        for stream in point.modes
        for how in hows
    ]


class Answers:
    """The model's answers for a test, as a brain: ``script`` first, then "next". What a cut
    run left unasked is dropped with ``clear()``, so the next call gets "next"."""

    def __init__(self, model: ScriptedModel) -> None:
        self.script: deque[ScriptEntry] = deque()
        model.brain = self

    def __call__(self, request: dict[str, Any]) -> Any:
        return self.script.popleft() if self.script else reply("next")

    def clear(self) -> None:
        self.script.clear()


@pytest_asyncio.fixture
async def fragola(model: ScriptedModel) -> AsyncIterator[Fragola]:
    made = Fragola(api_key="test-key", base_url=model.base_url, max_retries=1,
                   http_client=loopback_http_client())
    yield made
    await made.aclose()


def make_agent(fragola: Fragola, stream: bool, reached: asyncio.Event) -> Agent:
    async def slow() -> str:
        await forever(reached)
        return "unreachable"

    tools = [add, tool(name="slow", description="Never finishes.", handler=slow)]
    return fragola.agent("agent", tools=tools,
                         model_settings={"stream": True} if stream else {})


def reach(point: Point, agent: Agent, model: ScriptedModel, answers: Answers,
          reached: asyncio.Event) -> Callable[[], None]:
    """Arrange for the run to get stuck at ``point``; returns what undoes the arrangement."""
    answers.script.extend(point.script)
    if point.event is not None:
        async def stuck(event: Any) -> None:
            await forever(reached)

        return agent.on(point.event, stuck)
    if point.name == "stream":
        model.chunk_delay = 60.0  # the first chunks arrive, the next one never does

        def first_chunk(event: Any) -> None:
            reached.set()

        return agent.on_model_chunk(first_chunk)
    return lambda: None


async def wait_until_stuck(point: Point, agent: Agent, model: ScriptedModel,
                           reached: asyncio.Event) -> None:
    if point.name in ("model_request", "retry_backoff"):
        assert await asyncio.to_thread(model.wait_for_requests, 1)
        return
    await asyncio.wait_for(reached.wait(), 10)
    if point in OBSERVER_POINTS:
        # The observer hangs from its first event on; the turn goes on without it until it
        # has settled, then waits for it.
        deadline = time.monotonic() + 10
        while agent.status != "idle" and time.monotonic() < deadline:
            await asyncio.sleep(0.01)


async def assert_next_call_works(agent: Agent, model: ScriptedModel, answers: Answers,
                                 history: list[dict[str, Any]]) -> None:
    model.chunk_delay = 0.0
    answers.clear()
    sent = len(model.requests)
    state = await asyncio.wait_for(agent.step(), 10)
    assert model.requests[sent]["messages"] == history
    assert state.messages == [*history, {"role": "assistant", "content": "next"}]
    assert state.outcome == "finished"
    check_agent(agent)


@pytest.mark.parametrize(("point", "stream", "how"), [
    *point_params(LISTENER_POINTS + MODEL_POINTS, ("cancel", "stop_sync")),
    *point_params(OBSERVER_POINTS, ("cancel",)),
])
async def test_an_interrupted_run_leaves_the_agent_idle_with_a_valid_history(
    model: ScriptedModel, fragola: Fragola, point: Point, stream: bool, how: str
) -> None:
    reached = asyncio.Event()
    answers = Answers(model)
    agent = make_agent(fragola, stream, reached)
    undo = reach(point, agent, model, answers, reached)
    task = asyncio.create_task(agent.user_message("go"))
    await wait_until_stuck(point, agent, model, reached)

    if how == "cancel":
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        agent.stop_sync()
        state = await asyncio.wait_for(task, 10)  # stop_sync(): the call returns the state
        assert state == agent.state

    assert agent.status == "idle"
    assert agent.state.messages == point.expected
    assert agent.state.outcome == point.outcome
    check_agent(agent)
    undo()
    # An observer still hanging from the cut turn must not hold up the next one.
    await assert_next_call_works(agent, model, answers, point.expected)


@pytest.mark.parametrize("how", ["cancel", "stop_sync"])
async def test_a_run_interrupted_before_its_first_step_is_settled(
    model: ScriptedModel, fragola: Fragola, how: str
) -> None:
    # The call has set the status to "generating" and made its turn task, which has not run
    # yet: cancelled now, that task never gets to settle the agent itself.
    answers = Answers(model)
    agent = make_agent(fragola, False, asyncio.Event())
    task = asyncio.create_task(agent.user_message("go"))
    await asyncio.sleep(0)
    assert agent.status == "generating"

    if how == "cancel":
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        kept: list[dict[str, Any]] = []  # cancelled before anything ran
    else:
        agent.stop_sync()
        state = await asyncio.wait_for(task, 10)
        assert state.outcome == "stopped"
        kept = USER_ONLY  # stop_sync() keeps the user message that started the turn

    assert model.requests == []
    assert agent.status == "idle"
    assert agent.state.messages == kept
    check_agent(agent)
    state = await agent.user_message("again")
    assert state.messages == [*kept, user("again"), {"role": "assistant", "content": "next"}]
    assert answers.script == deque()


async def test_stop_sync_as_the_run_starts_stops_before_the_model_is_called(
    model: ScriptedModel, fragola: Fragola
) -> None:
    Answers(model)
    agent = make_agent(fragola, False, asyncio.Event())

    @agent.on_status_change
    def stop_at_once(event: Any) -> None:
        if event.status == "generating":
            agent.stop_sync()

    state = await agent.user_message("go")

    assert model.requests == []
    assert (state.outcome, state.status, state.messages) == ("stopped", "idle", USER_ONLY)


@pytest.mark.parametrize("how", ["cancel", "stop_sync", "model_error"])
async def test_observers_of_a_cut_turn_neither_hold_up_nor_fail_the_next_one(
    model: ScriptedModel, fragola: Fragola, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    # An async observer still running (or failed) when its turn is cut belongs to that turn:
    # the next turn must not wait for it, nor raise its error as its own.
    answers = Answers(model)
    reached = asyncio.Event()
    agent = make_agent(fragola, False, reached)

    async def hanging(event: Any) -> None:
        await forever(reached)

    async def failing(event: Any) -> None:
        raise ValueError("an observer of the cut turn failed")

    off_hanging = agent.on_after_state_update(hanging)
    off_failing = agent.on_after_state_update(failing)
    failure = fail(500, headers={"retry-after-ms": "1"})
    answers.script.extend([failure, failure] if how == "model_error" else [hang()])
    task = asyncio.create_task(agent.user_message("go"))
    assert await asyncio.to_thread(model.wait_for_requests, 1)
    await reached.wait()

    if how == "cancel":
        task.cancel()
    elif how == "stop_sync":
        agent.stop_sync()
    with pytest.raises((asyncio.CancelledError, ModelHTTPError)) if how != "stop_sync" else \
            contextlib.nullcontext():
        await task

    off_hanging()
    off_failing()
    state = await asyncio.wait_for(agent.step(), 10)
    assert state.outcome == "finished"
    assert state.messages == [user("go"), {"role": "assistant", "content": "next"}]
    # Not raised by the next turn, the cut turn's observer error is logged.
    assert "an observer of the cut turn failed" in caplog.text


def test_keyboard_interrupt_while_cancelled_calls_are_answered_still_settles(
    model: ScriptedModel,
) -> None:
    # The listener interrupts on each tool result: on the first, then on every "cancelled"
    # answer that repairs the history. The repair must go to the end all the same.
    agent = make_fragola(model).agent("agent", tools=[add])

    @agent.on_after_state_update
    def interrupt_on_results(event: Any) -> None:
        if event.message and event.message["role"] == "tool":
            raise KeyboardInterrupt

    model.push(tool_calls(*(call("add", {"a": 1, "b": n}, id=f"c{n}") for n in (1, 2, 3))))

    with pytest.raises(KeyboardInterrupt):
        run_in_a_fresh_loop(agent, agent.user_message("go"))

    assert agent.status == "idle"
    assert [m.get("content") for m in agent.state.messages[2:]] == ["2", CANCELLED, CANCELLED]
    check_agent(agent)


# -- KeyboardInterrupt raised inside the run -------------------------------------------------

KEYBOARD_POINTS = [
    *((p.event, p.expected, p.modes) for p in LISTENER_POINTS),
    ("after_state_update", USER_ONLY, (False, True)),  # raised as the user message is stored
    ("status_change", [], (False, True)),  # raised as the turn starts: nothing ran
    ("handler", CALL_INTERRUPTED, (False, True)),
]


def interrupt(event: Any = None) -> None:
    raise KeyboardInterrupt


@pytest.fixture
def fresh_loop_agent(model: ScriptedModel) -> Callable[..., Agent]:
    """Agents for tests that run their own event loops (``asyncio.run``, ``run_sync``):
    ``fresh_loop_agent(stream, interrupting=False)``, whose ``add`` tool raises
    ``KeyboardInterrupt`` when ``interrupting``."""

    def make(stream: bool, interrupting: bool = False) -> Agent:
        fragola = make_fragola(model)
        broken = tool(name="add", description="Interrupts.", handler=interrupt)
        return fragola.agent("agent", tools=[broken if interrupting else add],
                             model_settings={"stream": True} if stream else {})

    return make


def run_in_a_fresh_loop(agent: Agent, coro: Any) -> Any:
    async def main() -> Any:
        try:
            return await coro
        finally:
            await agent.fragola.aclose()  # this loop's HTTP client, before the loop closes

    return asyncio.run(main())


@pytest.mark.parametrize(("where", "expected", "stream"), [
    pytest.param(where, expected, stream, id=f"{where}-{'stream' if stream else 'plain'}")
    for where, expected, modes in KEYBOARD_POINTS
    for stream in modes
])
def test_keyboard_interrupt_raised_inside_the_run_leaves_the_agent_idle(
    model: ScriptedModel, fresh_loop_agent: Callable[..., Agent], where: str,
    expected: list[dict[str, Any]], stream: bool,
) -> None:
    agent = fresh_loop_agent(stream, interrupting=where == "handler")
    if where != "handler":
        agent.on(where, interrupt)
    model.push(ADD_CALL)

    with pytest.raises(KeyboardInterrupt):
        run_in_a_fresh_loop(agent, agent.user_message("go"))

    assert agent.status == "idle"
    assert agent.state.messages == expected
    check_agent(agent)
    if where != "handler":
        agent.off(where, interrupt)
    model.push(reply("next"))
    state = run_in_a_fresh_loop(agent, agent.step() if expected else agent.user_message("go"))
    assert state.outcome == "finished"
    assert state.messages[-1] == {"role": "assistant", "content": "next"}
    check_agent(agent)


def test_keyboard_interrupt_from_a_handler_reaches_the_run_sync_caller(
    model: ScriptedModel, fresh_loop_agent: Callable[..., Agent]
) -> None:
    # The handler runs on run_sync's background loop: the interrupt must reach the caller,
    # and must not stop that loop, which every later run_sync call needs.
    agent = fresh_loop_agent(False, interrupting=True)
    model.push(ADD_CALL)

    with pytest.raises(KeyboardInterrupt):
        run_sync(agent.user_message("go"), timeout=10)

    assert agent.status == "idle"
    assert agent.state.messages == CALL_INTERRUPTED
    check_agent(agent)
    model.push(reply("next"))
    assert run_sync(agent.step(), timeout=10).messages[-1] == {"role": "assistant",
                                                              "content": "next"}


# -- Ctrl-C in a plain script ----------------------------------------------------------------

# A plain script: for each point (argv[2], comma-separated) it starts a call that gets stuck
# there, prints READY, and once interrupted prints a JSON report on the agent and on the call
# after it. argv[1] says how the call runs: asyncio.run or run_sync.
SCRIPT = r"""
import asyncio, json, sys, threading
sys.path.insert(0, sys.argv[3])
from support.invariants import check_agent, loopback_http_client
from fragola_nb import Fragola, run_sync, tool
from fragola_nb.models.scripted import ScriptedModel, call, hang, reply, tool_calls

runner = sys.argv[1]

async def slow_handler() -> str:
    print("READY", flush=True)
    await asyncio.Event().wait()
    return "unreachable"

def announce_request(model) -> None:
    if model.wait_for_requests(1, 60):
        print("READY", flush=True)

def announce_first_chunk(event) -> None:
    if not announced:
        announced.append(True)
        print("READY", flush=True)

for point in sys.argv[2].split(","):
    script = {
        "request": [hang()],
        "stream": [reply("one two three four five six seven eight")],
        "handler": [tool_calls(call("slow", {}, id="c1"))],
    }[point]
    model = ScriptedModel(script, chunk_delay=60.0 if point == "stream" else 0.0).start()
    fragola = Fragola(api_key="k", base_url=model.base_url, max_retries=0)
    slow = tool(name="slow", description="Never finishes.", handler=slow_handler)
    agent = fragola.agent("agent", tools=[slow], model_settings={"stream": point == "stream"})
    announced = []
    if point == "request":
        threading.Thread(target=announce_request, args=(model,), daemon=True).start()
    elif point == "stream":
        agent.on_model_chunk(announce_first_chunk)

    async def closing(coro):
        try:
            return await coro
        finally:
            await fragola.aclose()  # this loop's HTTP client, before asyncio.run closes it

    def call_agent(coro):
        return asyncio.run(closing(coro)) if runner == "asyncio" else run_sync(coro)

    try:
        call_agent(agent.user_message("go"))
        ended = "returned"
    except KeyboardInterrupt:
        ended = "KeyboardInterrupt"
    state = agent.state
    try:
        check_agent(agent)
        problem = None
    except AssertionError as exc:
        problem = str(exc)
    agent.off("model_chunk", announce_first_chunk)
    model.chunk_delay = 0.0
    model.push(reply("next"))
    after = call_agent(agent.step())
    print(json.dumps({"point": point, "ended": ended, "status": state.status,
                      "outcome": state.outcome, "messages": state.messages,
                      "problem": problem, "next": after.messages[-1]}), flush=True)
    model.stop()
"""

RUNNERS = ("asyncio", "run_sync")
SCRIPT_POINTS = ("request", "stream", "handler")
Reports = dict[tuple[str, str], dict[str, Any]]


@pytest.fixture(scope="module")
def ctrl_c_reports() -> tuple[Reports, dict[str, str]]:
    """Run the script once per runner, both at once (each pays for a cold start), send
    SIGINT each time one says READY; return the reports by (runner, point), and stderr."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = {
        runner: subprocess.Popen(
            [sys.executable, "-c", SCRIPT, runner, ",".join(SCRIPT_POINTS), str(TESTS)],
            cwd=TESTS.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )
        for runner in RUNNERS
    }
    reports: Reports = {}
    errors = dict.fromkeys(RUNNERS, "")
    reading = {proc.stdout: runner for runner, proc in procs.items() if proc.stdout}
    deadline = time.monotonic() + 120
    try:
        while reading and time.monotonic() < deadline:
            ready, _, _ = select.select(list(reading), [], [], 1.0)
            for stream in ready:
                runner, line = reading[stream], stream.readline()
                if not line:
                    del reading[stream]  # the script ended
                elif line.strip() == "READY":
                    procs[runner].send_signal(signal.SIGINT)
                elif line.startswith("{"):
                    report = json.loads(line)
                    reports[runner, report["point"]] = report
        for runner, proc in procs.items():
            if proc.poll() is None:
                proc.kill()
            errors[runner] = proc.communicate()[1]
        return reports, errors
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("point", SCRIPT_POINTS)
def test_ctrl_c_in_a_plain_script_leaves_the_agent_idle_with_a_valid_history(
    ctrl_c_reports: tuple[Reports, dict[str, str]], runner: str, point: str
) -> None:
    reports, errors = ctrl_c_reports
    report = reports.get((runner, point))

    assert report is not None, errors[runner]
    assert report["ended"] == "KeyboardInterrupt"
    assert (report["status"], report["outcome"], report["problem"]) == ("idle", "stopped", None)
    if point == "handler":
        assert report["messages"] == [user("go"), calls("slow"), answer(INTERRUPTED)]
    else:
        assert report["messages"] == USER_ONLY
    assert report["next"] == {"role": "assistant", "content": "next"}
    assert "Traceback" not in errors[runner], errors[runner]


# -- Jupyter: a plain `await` cell, without the extension ------------------------------------


@pytest.mark.parametrize("call", ["user_message('hi')", "compare('hi', {'a': {}, 'b': {}})",
                                  "batch(['hi', 'ho'], progress=False)"])
def test_the_kernels_interrupt_reaches_a_cell_awaiting_a_silent_server(call: str) -> None:
    # ipykernel answers an interrupt by scheduling the cell's cancellation without waking its
    # loop (ipython/ipykernel#881): a cell awaiting a server that never answers stayed busy for
    # good. The run keeps its loop awake, so the cell ends as an error, and the agent is usable.
    from support.kernel_harness import Kernel

    with ScriptedModel(brain=lambda request: hang()) as model, Kernel() as kernel:
        kernel.execute("from fragola_nb import Fragola\n"
                       f"a = Fragola(api_key='k', base_url={model.base_url!r}, "
                       "max_retries=0).agent('a')")
        msg_id = kernel.start(f"result = await a.{call}")
        assert model.wait_for_requests(1, timeout=20)
        kernel.km.interrupt_kernel()
        kernel.collect(msg_id, timeout=15, allow_error=True)
        assert kernel.reply(msg_id)["status"] == "error"  # Run All stops here
        model.release()
        model.brain = lambda request: reply("back")
        assert kernel.eval("(a.status, 'result' in globals())") == ["idle", False]
        again = kernel.execute("print((await a.user_message('again')).messages[-1]['content'])")
        assert again.stdout.strip() == "back"


async def test_one_ticker_keeps_a_loop_awake_for_every_call_in_flight() -> None:
    from fragola_nb.base.interrupt_ticker import _tickers, kept_awake

    loop = asyncio.get_running_loop()
    with kept_awake():
        holders, ticker = _tickers[loop]
        assert holders == 1
        with kept_awake():
            assert _tickers[loop] == (2, ticker)  # shared, not one per call
        assert _tickers[loop] == (1, ticker) and not ticker.done()
    await asyncio.sleep(0)
    assert loop not in _tickers and ticker.cancelled()

    def off_the_main_thread() -> bool:
        async def inside() -> bool:
            with kept_awake():  # no signal is handled there: nothing to keep awake for
                return asyncio.get_running_loop() in _tickers
        return asyncio.run(inside())

    assert await asyncio.to_thread(off_the_main_thread) is False


def test_with_the_extension_an_interrupted_await_cell_ends_in_one_line() -> None:
    # Jupyter's convention: an interrupt ends the cell as an error with a short message, the
    # full chain reachable with %tb. An interrupt elsewhere keeps IPython's own traceback.
    from support.kernel_harness import Kernel

    with ScriptedModel(brain=lambda request: hang()) as model, Kernel() as kernel:
        kernel.execute("%load_ext fragola_nb\nfrom fragola_nb import Fragola\n"
                       f"a = Fragola(api_key='k', base_url={model.base_url!r}, "
                       "max_retries=0).agent('tutor')")
        msg_id = kernel.start("await a.user_message('hi')")
        assert model.wait_for_requests(1, timeout=20)
        kernel.km.interrupt_kernel()
        result = kernel.collect(msg_id, timeout=15, allow_error=True)
        assert kernel.reply(msg_id)["status"] == "error"
        assert result.error is not None
        assert result.error["traceback"] == [
            "Interrupted: 'tutor' stopped; its history is kept valid",
            "(%tb shows the full traceback)"]
        full = kernel.execute("%tb", allow_error=True)
        shown = full.stdout + str(full.error)
        assert "CancelledError" in shown and "drive" in shown  # the whole chain, on asking

        model.release()
        other = kernel.start("import time\ntime.sleep(30)")
        time.sleep(1.0)
        kernel.km.interrupt_kernel()
        plain = kernel.collect(other, timeout=15, allow_error=True)
        assert plain.error is not None and plain.error["ename"] == "KeyboardInterrupt"
        assert len(plain.error["traceback"]) > 2  # IPython's own, whole
        kernel.execute("%unload_ext fragola_nb")
        assert kernel.eval("get_ipython().custom_exceptions == ()") is True


# -- a stop between the model's reply and the tool's start -----------------------------------
# From the reply to the tool the turn need not pause (sync listeners, a sync tool): a stop
# that comes through the event loop must still land before the tool starts, not after it.

TRANSFER_CALL = {"role": "assistant", "tool_calls": [
    {"id": "c1", "type": "function",
     "function": {"name": "transfer", "arguments": '{"amount": 5}'}}]}


def transfer_agent(fragola: Fragola, made: list[int]) -> Agent:
    @tool
    def transfer(amount: int) -> str:
        """Send money."""
        made.append(amount)
        return "sent"

    return fragola.agent("bank", tools=[transfer])


def when_the_call_is_stored(act: Callable[[], None]) -> Callable[[Any], Any]:
    """An async observer (a notebook panel's kind) that acts once the assistant message with
    the tool call is stored, in its own task, as a Stop button's click does."""
    async def observer(event: Any) -> None:
        if event.message is not None and event.message.get("tool_calls"):
            act()
    return observer


async def test_stop_sync_as_the_reply_is_stored_cancels_the_tool_before_it_starts(
    model: ScriptedModel, fragola: Fragola
) -> None:
    made: list[int] = []
    agent = transfer_agent(fragola, made)
    agent.on_after_state_update(when_the_call_is_stored(agent.stop_sync))
    model.push(tool_calls(call("transfer", {"amount": 5}, id="c1")))

    state = await asyncio.wait_for(agent.user_message("pay"), 10)

    assert made == []
    assert state.messages == [user("pay"), TRANSFER_CALL, answer(CANCELLED)]
    assert (agent.status, state.outcome) == ("idle", "stopped")
    check_agent(agent)
    model.push(reply("next"))
    assert (await agent.step()).messages[-1] == {"role": "assistant", "content": "next"}
    assert made == []


async def _interrupted_before_the_tool(
    model: ScriptedModel, fragola: Fragola,
    interrupt: Callable[[asyncio.AbstractEventLoop, asyncio.Task[Any]], None],
) -> None:
    """The cell of a transfer turn, cancelled by what ``interrupt(loop, cell)`` schedules
    when the reply with the call is stored: the call is cancelled, the tool never starts."""
    made: list[int] = []
    agent = transfer_agent(fragola, made)
    cell = asyncio.create_task(agent.user_message("pay"))
    loop = asyncio.get_running_loop()

    def interrupt_the_cell(event: Any) -> None:  # returns nothing: it observes
        interrupt(loop, cell)

    agent.on_ai_message(interrupt_the_cell)
    model.push(tool_calls(call("transfer", {"amount": 5}, id="c1")))

    with pytest.raises(asyncio.CancelledError):
        await cell

    assert made == []
    assert agent.state.messages == [user("pay"), TRANSFER_CALL, answer(CANCELLED)]
    assert agent.status == "idle"
    check_agent(agent)


async def test_an_interrupt_scheduled_as_the_reply_is_stored_cancels_the_tool(
    model: ScriptedModel, fragola: Fragola
) -> None:
    """Jupyter's interrupt (and asyncio.run's Ctrl-C) cancel the cell's task from a
    callback: the call is cancelled, and the tool never starts."""
    await _interrupted_before_the_tool(
        model, fragola, lambda loop, cell: loop.call_soon(cell.cancel))


async def test_an_interrupt_three_hops_away_as_the_reply_is_stored_cancels_the_tool(
    model: ScriptedModel, fragola: Fragola
) -> None:
    """A stop that takes passes of the loop to land (Jupyter's: a callback completes a future
    whose done-callback cancels the cell) still lands before the tool starts, however few
    passes a run with nothing else due waits."""

    def three_hops(loop: asyncio.AbstractEventLoop, cell: asyncio.Task[Any]) -> None:
        sigint = loop.create_future()
        sigint.add_done_callback(lambda _: cell.cancel())  # hop 3
        # hop 1, then hop 2 completes the future
        loop.call_soon(lambda: loop.call_soon(sigint.set_result, 1))

    await _interrupted_before_the_tool(model, fragola, three_hops)


async def test_a_stop_from_an_observer_a_few_steps_away_stops_before_the_tool(
    model: ScriptedModel, fragola: Fragola
) -> None:
    """An async observer (a panel's) that yields twice before it calls ``stop()``: its task
    is due at each pass, so the run waits for it and the tool never starts."""
    made: list[int] = []
    agent = transfer_agent(fragola, made)

    async def observer(event: Any) -> None:
        if event.message is not None and event.message.get("tool_calls"):
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            agent.stop()

    agent.on_after_state_update(observer)
    model.push(tool_calls(call("transfer", {"amount": 5}, id="c1")))

    state = await asyncio.wait_for(agent.user_message("pay"), 10)

    assert made == []
    assert state.messages == [user("pay"), TRANSFER_CALL, answer(CANCELLED)]
    assert (agent.status, state.outcome) == ("idle", "stopped")
    check_agent(agent)


async def test_a_stop_heard_through_the_selector_as_the_reply_is_stored_stops_the_tool(
    model: ScriptedModel, fragola: Fragola
) -> None:
    """A signal handled by the loop (``loop.add_signal_handler``) reaches it through its
    selector, not as a callback due: the pass before a tool polls the selector, so such a
    stop, sent as the reply is stored, still lands before the tool starts."""
    made: list[int] = []
    agent = transfer_agent(fragola, made)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, agent.stop)
    try:
        agent.on_ai_message(lambda event: os.kill(os.getpid(), signal.SIGUSR1))
        model.push(tool_calls(call("transfer", {"amount": 5}, id="c1")))

        state = await asyncio.wait_for(agent.user_message("pay"), 10)
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)

    assert made == []
    assert state.messages == [user("pay"), TRANSFER_CALL, answer(CANCELLED)]
    assert (agent.status, state.outcome) == ("idle", "stopped")
    check_agent(agent)

CTRL_C_AT_THE_REPLY = """
import asyncio, json, os, signal, sys
sys.path.insert(0, sys.argv[1])
from support.invariants import check_agent
from fragola_nb import Fragola, tool
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls

made = []

@tool
def transfer(amount: int) -> str:
    \"\"\"Send money.\"\"\"
    made.append(amount)
    return "sent"

model = ScriptedModel([tool_calls(call("transfer", {"amount": 5}, id="c1")), reply("paid")])
model.start()
fragola = Fragola(api_key="k", base_url=model.base_url, max_retries=0)
agent = fragola.agent("bank", tools=[transfer])
# Ctrl-C pressed the moment the reply arrives (a signal, handled by asyncio.run's handler).
agent.on_ai_message(lambda event: os.kill(os.getpid(), signal.SIGINT))
try:
    asyncio.run(agent.user_message("pay"))
    ended = "returned"
except KeyboardInterrupt:
    ended = "KeyboardInterrupt"
check_agent(agent)
print(json.dumps({"ended": ended, "made": made, "status": agent.status,
                  "messages": agent.state.messages}))
model.stop()
"""


def test_ctrl_c_as_the_reply_arrives_cancels_the_tool_in_a_plain_script() -> None:
    result = subprocess.run([sys.executable, "-c", CTRL_C_AT_THE_REPLY, str(TESTS)],
                            capture_output=True, text=True, timeout=120, cwd=TESTS.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report == {"ended": "KeyboardInterrupt", "made": [], "status": "idle",
                      "messages": [user("pay"), TRANSFER_CALL, answer(CANCELLED)]}


def test_the_kernels_interrupt_as_the_reply_arrives_cancels_the_tool() -> None:
    """A real Jupyter interrupt (the kernel's SIGINT), at the moment the reply arrives: the
    cell ends as an error and the tool never ran."""
    from support.kernel_harness import Kernel

    with ScriptedModel(brain=lambda request: tool_calls(call("transfer", {"amount": 5},
                                                             id="c1"))) as model, \
            Kernel() as kernel:
        kernel.execute(
            "import os, signal\n"
            "from fragola_nb import Fragola, tool\n"
            "made = []\n"
            "@tool\n"
            "def transfer(amount: int) -> str:\n"
            "    '''Send money.'''\n"
            "    made.append(amount)\n"
            "    return 'sent'\n"
            f"a = Fragola(api_key='k', base_url={model.base_url!r}, max_retries=0).agent(\n"
            "    'bank', tools=[transfer])\n"
            "a.on_ai_message(lambda event: os.kill(os.getpid(), signal.SIGINT))")
        msg_id = kernel.start("result = await a.user_message('pay')")
        kernel.collect(msg_id, timeout=30, allow_error=True)
        assert kernel.reply(msg_id)["status"] == "error"  # Run All stops here
        assert kernel.eval("(made, a.status, a.state.messages[-1]['content'])") == [
            [], "idle", CANCELLED]
