"""``agent.batch(..., backend="ray")`` against a real local Ray instance (2 CPUs) and the
scripted model: the same rows as the local backend, forks rebuilt here, progress, stop,
stop_sync, resume, a worker killed mid-batch, and what cannot be sent to workers refused
before anything starts. Ray is a required component: these tests fail, never skip, without it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import ray
from support.helpers import assert_valid_history, user

from fragola_nb import (
    Agent,
    BadUsage,
    Budget,
    Fragola,
    RayBackend,
    create_store,
    guardrail,
    tool,
)
from fragola_nb.core.hooks import preset
from fragola_nb.core.timing import Timeline
from fragola_nb.experiments.ray.backend import definition_of
from fragola_nb.models.scripted import Item, ScriptedModel, call, fail, hang, reply, tool_calls

# The tools and brains below are defined in this test module, which Ray's workers cannot
# import (pytest puts tests/ and tests/experiments/ on the path of this process only): they
# are sent by value, as a notebook's own functions are.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("ray_instance")]

FEW_SHOT = [user("2 + 2?"), {"role": "assistant", "content": "4"}]


@tool
def double(x: int) -> int:
    """Double a whole number."""
    return 2 * x


@tool(require_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (a person approves it)."""
    return f"deleted {path}"


def last_user(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


def brain(request: dict[str, Any]) -> Item:
    """Answers from the input alone (so every worker's scripted model answers alike): tool
    call ids are made from the input too, as a server's numbering would differ per worker."""
    text, last = last_user(request), request["messages"][-1]
    system = request["messages"][0]["content"]
    if last["role"] == "tool":
        return reply(f"{text} -> {last['content']} ({system})")
    words = text.split()
    if words[0] == "double":
        return tool_calls(call("double", {"x": int(words[1])}, id=f"call-{words[1]}"))
    if words[0] == "delete":
        return tool_calls(call("delete_file", {"path": words[1]}, id=f"call-{words[1]}"))
    if words[0] == "fail":
        return fail(500, f"the server broke on {text}")
    if words[0] == "slow":
        return hang(float(words[1]), then=reply(f"late: {text} from pid {os.getpid()}"))
    return reply(f"echo: {text} ({system})")


def shouted(event: Any) -> Any:
    """A user_message listener: part of the agent's definition, sent to the workers."""
    message = dict(event.message)
    message["content"] = str(message["content"]).upper() if str(
        message["content"]).startswith("shout") else message["content"]
    return message


def make_agent(**fragola_options: Any) -> Agent:
    fragola = Fragola.scripted(brain=brain, **fragola_options)
    agent = fragola.agent(name="calc", instructions="Be brief.", tools=[double, delete_file],
                          messages=FEW_SHOT)
    agent.on_user_message(shouted)
    return agent


def row_key(row: Any) -> tuple[Any, ...]:
    return (row.index, row.input, row.answer, row.error, row.status, row.tokens)


INPUTS = ([f"double {i}" for i in range(40)] + [f"hello {i}" for i in range(40)]
          + [f"shout {i}" for i in range(20)] + [f"fail {i}" for i in range(10)]
          + [[{"type": "text", "text": f"parts {i}"}] for i in range(10)])


async def test_the_ray_backend_gives_the_rows_of_the_local_one() -> None:
    agent = make_agent()
    before = agent.state.messages

    local = await agent.batch(INPUTS, progress=False)
    remote = await agent.batch(INPUTS, backend="ray", progress=False)

    assert [row_key(row) for row in remote] == [row_key(row) for row in local]
    assert (remote.done, remote.failed) == (local.done, local.failed) == (110, 10)
    assert remote.usage == local.usage and remote.usage.total_tokens > 0
    assert remote[3].answer == "double 3 -> 6 (Be brief.)"  # the tool ran on the worker
    assert remote[80].answer == "echo: SHOUT 0 (Be brief.)"  # the listener ran on the worker
    assert remote[100].error == local[100].error and "the server broke on fail 0" in str(
        remote[100].error)
    for mine, theirs in zip(remote, local, strict=True):
        # Each row's fork is rebuilt here, holding what the worker's fork held.
        assert mine.fork is not None and theirs.fork is not None
        assert mine.fork.state.messages == theirs.fork.state.messages
        assert mine.fork.usage == theirs.fork.usage
        assert (mine.fork.name, mine.fork.fork_of, mine.fork.step_count, mine.fork.status) == (
            theirs.fork.name, agent.id, theirs.fork.step_count, "idle")
        assert mine.fork.parent is None and mine.fork.fragola is agent.fragola
        assert_valid_history(mine.fork.state.messages)
    assert agent.state.messages == before and not agent.forks
    # A rebuilt fork goes on here, on this kernel's Fragola.
    state = await remote[1].fork.user_message("hello again")
    assert state.messages[-1]["content"] == "echo: hello again (Be brief.)"


async def test_a_ray_rows_tool_calls_come_back_timed_as_a_local_rows_do() -> None:
    agent = make_agent()
    inputs = ["double 4", "hello 5", "double 6"]
    local = await agent.batch(inputs, progress=False)
    began = time.time()
    remote = await agent.batch(inputs, backend="ray", progress=False)
    ended = time.time()

    def tools(row: Any) -> list[tuple[str, str]]:
        return [(timed.name, timed.call_id) for timed in row.fork.usage.tools]

    assert [tools(row) for row in remote] == [tools(row) for row in local] == [
        [("double", "call-4")], [], [("double", "call-6")]]
    for row in remote:
        assert row.usage.tools == row.fork.usage.tools
        for timed in row.fork.usage.tools:  # timed on the worker, between the batch's ends
            assert began <= timed.started <= timed.started + timed.seconds <= ended
        # With the model calls' timing, the row's turn draws as a local one: tool bars too.
        kinds = [bar.kind for bar in Timeline.of(row.fork.usage).bars]
        assert kinds == [bar.kind for bar in Timeline.of(local[row.index].fork.usage).bars]
    assert len(remote.usage.tools) == 2


def no_secrets(text: str) -> str | None:
    """A guard: refuses a message that gives a password."""
    return "gives a password" if "password" in text else None


def listening(process: psutil.Process) -> list[tuple[str, str, int]]:
    """The TCP sockets a process listens on: (its name, address, port)."""
    try:
        return [(process.name(), conn.laddr.ip, conn.laddr.port)
                for conn in process.net_connections(kind="inet")
                if conn.status == psutil.CONN_LISTEN]
    except psutil.NoSuchProcess:
        return []


def on_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1, a dual-stack socket
    return (mapped or address).is_loopback


async def test_the_ray_it_starts_listens_on_loopback_only() -> None:
    """Every server of the Ray the backend started (GCS, raylet, object manager, the
    runtime-env agent, the autoscaler's metrics, this driver's and each worker's gRPC
    server) listens on loopback: a Ray reachable from the network runs anyone's code."""
    agent = make_agent()
    result = await agent.batch([f"double {i}" for i in range(4)], backend="ray",
                               progress=False)  # the workers are up and listening too
    assert result.done == 4
    me = psutil.Process()
    sockets = [s for p in [me, *me.children(recursive=True)] for s in listening(p)]
    names = {name for name, _, _ in sockets}
    assert {"gcs_server", "raylet"} <= names and len(sockets) >= 5, sockets
    assert [s for s in sockets if not on_loopback(s[1])] == []
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")


async def test_guardrails_guard_the_workers_inputs_as_the_local_ones() -> None:
    agent = make_agent()
    guardrail(agent, no_secrets)
    inputs = ["hello", "my password is hunter2", "bye"]

    local = await agent.batch(inputs, progress=False)
    remote = await agent.batch(inputs, backend="ray", progress=False)

    assert [row_key(row) for row in remote] == [row_key(row) for row in local]
    assert remote[1].error == "GuardrailRejected: rejected by no_secrets: gives a password"
    assert remote[1].fork is not None and local[1].fork is not None
    # The rejected message is kept, marked, on the rebuilt fork as on the local one.
    assert remote[1].fork.state.messages == local[1].fork.state.messages
    assert remote[1].fork.usage.requests == 0


async def test_a_guardrail_used_as_a_hook_guards_the_workers_inputs_as_locally() -> None:
    """A hook's listeners are saved as the hook: the workers are sent the hook and put it
    on again, so its guard runs there (before, loading the agent on a worker failed)."""
    agent = make_agent()
    agent.use(preset(guardrail, no_secrets))  # unnamed: saved and sent by its __qualname__
    inputs = ["hello", "my password is hunter2", "shout bye"]

    local = await agent.batch(inputs, progress=False)
    remote = await agent.batch(inputs, backend="ray", progress=False)

    assert [row_key(row) for row in remote] == [row_key(row) for row in local]
    assert remote[1].error == "GuardrailRejected: rejected by no_secrets: gives a password"
    assert remote[2].answer == "echo: SHOUT BYE (Be brief.)"  # the agent's own listener too
    assert remote[1].fork is not None and local[1].fork is not None
    assert remote[1].fork.state.messages == local[1].fork.state.messages


def test_a_hook_that_cannot_be_sent_is_named() -> None:
    agent = make_agent()
    handle = socket.socket()
    try:
        def audit(agent: Any) -> None:
            agent.on_after_step(lambda event: handle.send(b"step"))

        agent.use(audit, name="audit")
        with pytest.raises(BadUsage, match=r"^hook 'audit' cannot be sent to Ray workers"):
            asyncio.run(agent.batch(["hello"], backend="ray"))
    finally:
        handle.close()


async def test_workers_that_cannot_start_are_left_out_and_named(
        caplog: pytest.LogCaptureFixture) -> None:
    """Three workers asked of a 2-CPU cluster: the batch runs on the two that start, and a
    warning names the third; a worker that could start nowhere is one clear line."""
    agent = make_agent()
    await cpus_free()  # an earlier test's workers give their CPUs back

    result = await agent.batch([f"slow 0.2 {i}" for i in range(40)], progress=False,
                               backend=RayBackend(workers=3, ready_timeout=5))

    assert result.done == 40
    assert re.search(r"1 of 3 Ray workers never started \(the cluster has \d CPUs free, each "
                     r"worker asks num_cpus=1\); the batch ran on the others",
                     caplog.text), caplog.text
    with pytest.raises(BadUsage, match=r"^1 of 1 Ray workers did not start within 5 s \(the "
                       r"cluster has \d CPUs free, each worker asks num_cpus=3\): ask for "
                       r"fewer workers= or a smaller num_cpus="):
        await agent.batch(["hello"], progress=False,
                          backend=RayBackend(workers=1, num_cpus=3, ready_timeout=5))
    await cpus_free()  # every worker that was started is gone again


async def test_a_waiting_row_comes_back_waiting_and_is_decided_here() -> None:
    agent = make_agent()

    result = await agent.batch(["delete a.txt", "hello"], backend="ray", progress=False)

    row = result[0]
    assert row.status == "failed" and row.error is not None and row.error.startswith("waiting")
    fork = row.fork
    assert fork is not None and fork.status == "waiting"
    assert [call.id for call in fork.state.pending] == ["call-a.txt"]
    fork.approve("call-a.txt")
    state = await fork.step()
    assert state.messages[-1]["content"] == "delete a.txt -> deleted a.txt (Be brief.)"
    assert result[1].answer == "echo: hello (Be brief.)"


async def test_rows_arrive_one_by_one_and_the_progress_bar_follows(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    agent = make_agent()
    inputs = [f"slow 0.2 {i}" for i in range(60)]
    file = tmp_path / "rows.jsonl"
    seen: list[int] = []

    async def watch() -> None:
        while True:
            seen.append(len(file.read_text().splitlines()) if file.exists() else 0)
            await asyncio.sleep(0.05)

    watcher = asyncio.ensure_future(watch())
    try:
        result = await agent.batch(inputs, concurrency=3, backend="ray", resume=file)
    finally:
        watcher.cancel()

    assert result.done == 60
    # Rows were written as they came, not all at the end.
    assert len({count for count in seen if 0 < count < 60}) >= 5, seen
    bar = capsys.readouterr().err
    assert "batch calc" in bar and "60/60" in bar and "done=60, failed=0" in bar
    shown = {int(count) for count in re.findall(r"\| *(\d+)/60 ", bar)}
    assert len(shown) >= 3, bar  # the bar advanced more than once


async def test_stop_starts_nothing_more_and_resume_runs_the_rest(tmp_path: Path) -> None:
    agent = make_agent()
    inputs = [f"slow 0.1 {i}" for i in range(80)]
    file = tmp_path / "rows.jsonl"
    task = asyncio.ensure_future(agent.batch(inputs, concurrency=2, backend="ray",
                                             resume=file, progress=False))
    await wait_for_lines(file, 6)

    agent.stop()
    first = await task

    assert first.stopped and 6 <= first.done < 80 and first.failed == 0
    assert {row.status for row in first} == {"done", "not run"}
    done = {row.index for row in first if row.status == "done"}
    assert len(file.read_text().splitlines()) == len(done)

    second = await agent.batch(inputs, concurrency=4, backend="ray", resume=file,
                               progress=False)

    assert second.done == 80 and not second.stopped
    assert {row.index for row in second if row.resumed} == done
    assert all(row.answer is not None and row.answer.startswith(f"late: slow 0.1 {row.index}")
               for row in second)


async def test_stop_sync_cancels_the_running_inputs_and_keeps_the_finished_ones(
        tmp_path: Path) -> None:
    agent = make_agent()
    inputs = [f"slow 0.1 {i}" for i in range(20)] + [f"slow 60 {i}" for i in range(20)]
    file = tmp_path / "rows.jsonl"
    task = asyncio.ensure_future(agent.batch(inputs, concurrency=4, backend="ray",
                                             resume=file, progress=False))
    await wait_for_lines(file, 20)  # the quick ones are done; the slow ones wait a minute

    started = time.monotonic()
    agent.stop_sync()
    result = await task

    assert time.monotonic() - started < 15
    assert result.stopped and result.done == 20 and result.failed == 0
    assert {row.status for row in result[20:]} <= {"stopped", "not run"}
    assert any(row.status == "stopped" for row in result[20:])
    for row in result:
        if row.status == "stopped":
            assert row.fork is not None and row.fork.status == "idle"
            assert_valid_history(row.fork.state.messages)
    # The agent is usable at once, Ray too.
    again = await agent.batch(["hello"], backend="ray", progress=False)
    assert again[0].answer == "echo: hello (Be brief.)"


async def test_cancelling_the_batch_raises_and_frees_the_workers(tmp_path: Path) -> None:
    """A kernel interrupt cancels the task awaiting the batch: it raises, the workers go
    (their CPUs come back), and the rows finished by then are in the resume file."""
    agent = make_agent()
    inputs = [f"slow 0.1 {i}" for i in range(10)] + [f"slow 60 {i}" for i in range(10)]
    file = tmp_path / "rows.jsonl"
    task = asyncio.ensure_future(agent.batch(inputs, concurrency=4, backend="ray",
                                             resume=file, progress=False))
    await wait_for_lines(file, 10)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert len(file.read_text().splitlines()) == 10 and agent.status == "idle"
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert ray.available_resources().get("CPU", 0) == 2
    again = await agent.batch(inputs[:10], backend="ray", resume=file, progress=False)
    assert again.done == 10 and all(row.resumed for row in again)


async def test_a_worker_killed_mid_batch_has_its_inputs_run_again(tmp_path: Path) -> None:
    agent = make_agent()
    inputs = [f"slow 0.1 {i}" for i in range(120)]
    file = tmp_path / "rows.jsonl"
    task = asyncio.ensure_future(agent.batch(inputs, concurrency=4, backend="ray",
                                             resume=file, progress=False))
    victim = await kill_a_worker(file)

    result = await task

    assert len(result) == 120 and result.done == 120 and result.failed == 0
    for row in result:
        assert row.answer is not None and row.answer.startswith(f"late: slow 0.1 {row.index} ")
    pids = {row.answer.rsplit(" ", 1)[1] for row in result if row.answer}
    assert str(victim) in pids  # it answered before it was killed


async def test_without_retries_a_killed_workers_inputs_are_failed_rows(tmp_path: Path) -> None:
    agent = make_agent()
    inputs = [f"slow 0.1 {i}" for i in range(120)]
    file = tmp_path / "rows.jsonl"
    task = asyncio.ensure_future(agent.batch(
        inputs, concurrency=4, backend=RayBackend(retries=0), resume=file, progress=False))
    await kill_a_worker(file)

    result = await task

    assert len(result) == 120 and result.done + result.failed == 120  # none lost
    assert result.failed >= 1
    for row in result:
        if row.status == "failed":
            assert row.error is not None and row.error.startswith(
                "worker lost: the Ray worker running this input died (1 time)")
        else:
            assert row.answer is not None and row.answer.startswith(f"late: slow 0.1 {row.index} ")
    # Failed rows are not kept as answered: resume runs exactly those again.
    again = await agent.batch(inputs, concurrency=4, backend="ray", resume=file,
                              progress=False)
    assert again.done == 120
    assert {row.index for row in again if not row.resumed} == {
        row.index for row in result if row.status == "failed"}


async def test_when_no_worker_is_left_the_inputs_not_sent_are_failed_rows(
        tmp_path: Path) -> None:
    agent = make_agent()
    inputs = [f"slow 0.1 {i}" for i in range(80)]
    file = tmp_path / "rows.jsonl"
    task = asyncio.ensure_future(agent.batch(
        inputs, concurrency=2, backend=RayBackend(workers=1, retries=0, chunk_size=4),
        resume=file, progress=False))
    await kill_a_worker(file)

    result = await task

    assert len(result) == 80 and result.done + result.failed == 80
    errors = [row.error or "" for row in result if row.status == "failed"]
    lost = [e for e in errors if e.startswith("worker lost: the Ray worker running this input")]
    never = [e for e in errors if e.startswith("not run: no Ray worker was left to run it "
                                               "(the last died: ")]
    assert lost and never and len(lost) + len(never) == len(errors)
    assert len(lost) <= 2 * 4  # at most the two chunks the worker held


@tool
def bump(by: int, context: Any) -> int:
    """Add to the agent's counter store."""
    return context.get_store("counter").update(lambda value: value + by)


async def test_what_tools_leave_in_the_forks_stores_comes_back_with_the_row() -> None:
    fragola = Fragola.scripted(brain=lambda request: tool_calls(call(
        "bump", {"by": int(last_user(request).split()[1])}, id="b"))
        if request["messages"][-1]["role"] == "user" else reply("bumped"))
    agent = fragola.agent(name="counter", tools=[bump], stores=[create_store(10, "counter")])

    local = await agent.batch(["bump 5", "bump 7"], progress=False)
    remote = await agent.batch(["bump 5", "bump 7"], backend="ray", progress=False)

    def counters(result: Any) -> list[int]:
        return [row.fork.conversation.stores["counter"].get() for row in result]

    assert counters(remote) == counters(local) == [15, 17]
    assert agent.conversation.stores["counter"].get() == 10  # the agent's own is left as it was


def test_what_cannot_work_on_workers_says_why(tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    # A replayed recording is held by this process: each worker must open it itself.

    lesson = Path(__file__).resolve().parents[3] / "notebooks" / "recordings" / "lesson.jsonl"
    replayed = Fragola.replay(lesson).agent(name="tutor")
    with pytest.raises(BadUsage, match=r"it replays a recording held in this process\); pass "
                                       r"RayBackend\(fragola=lambda: Fragola.replay\(PATH\)\)"):
        asyncio.run(replayed.batch(["x"], backend="ray"))

    # A key a tool holds in what it refers to would travel with it.
    secret = "sk-proj-INATOOL1234567890abcd"

    @tool
    def uses_a_key(q: str) -> str:
        """Looks something up with a key."""
        return f"{q} with {secret}"

    holder = Fragola.scripted(brain=brain).agent(name="a", tools=[uses_a_key])
    with pytest.raises(BadUsage, match=r"^tool 'uses_a_key' would carry a credential to the "
                                       r"Ray workers .*read it from os.environ where it runs"):
        asyncio.run(holder.batch(["x"], backend="ray"))

    # Options for ray.init once Ray runs are not silently dropped.
    result = asyncio.run(make_agent().batch(["hello"], backend=RayBackend(
        address="127.0.0.1:9", init={"runtime_env": {"env_vars": {"REGION": "eu"}}}),
        progress=False))
    assert result.done == 1
    assert ("RayBackend(address=..., init=...) is not used: this process already runs Ray"
            in caplog.text)


def test_an_address_nothing_answers_on_is_one_line_at_once(tmp_path: Path) -> None:
    """Not minutes of Ray retrying with the kernel frozen (a process of its own: this
    module's Ray is running, and a running Ray is used as it is)."""
    script = textwrap.dedent('''
        import asyncio, time
        from fragola_nb import BadUsage, Fragola, RayBackend
        agent = Fragola.scripted().agent(name="a")
        started = time.monotonic()
        try:
            asyncio.run(agent.batch(["hi"], backend=RayBackend(address="127.0.0.1:9"),
                                    progress=False))
        except BadUsage as exc:
            print(exc)
        print(time.monotonic() - started < 10, agent.status)
    ''')
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    line, after = result.stdout.splitlines()
    assert line.startswith("nothing answers at the Ray address '127.0.0.1:9' (")
    assert line.endswith("): is the cluster's head running?")
    assert after == "True idle"


async def test_mcp_tools_are_refused_with_the_reason() -> None:
    from fragola_nb import mcp_tools

    server = Path(__file__).resolve().parents[2] / "mcp_servers" / "demo_server.py"
    connection = await mcp_tools([sys.executable, str(server), "stdio"])
    try:
        agent = Fragola.scripted(brain=brain).agent(name="m", tools=connection.tools)
        with pytest.raises(BadUsage, match=r"comes from an MCP connection of this process "
                                           r"\(mcp_tools\): Ray workers cannot use it"):
            await agent.batch(["x"], backend="ray", progress=False)
        assert agent.status == "idle"
    finally:
        await connection.aclose()


def test_a_tool_that_cannot_be_sent_is_refused_before_anything_starts(tmp_path: Path) -> None:
    lock = threading.Lock()

    @tool
    def locked(x: int) -> int:
        """Uses a lock, which cannot be pickled."""
        with lock:
            return x

    fragola = Fragola.scripted(brain=brain)
    agent = fragola.agent(name="calc", tools=[locked])
    file = tmp_path / "rows.jsonl"

    with pytest.raises(BadUsage, match=r"^tool 'locked' cannot be sent to Ray workers "
                       r"\(TypeError: cannot pickle '_thread.lock' object\): define it"):
        asyncio.run(agent.batch(["hello"], backend="ray", resume=file))

    assert not file.exists() and agent.status == "idle"


def test_a_listener_that_cannot_be_sent_is_named() -> None:
    agent = make_agent()
    handle = socket.socket()
    try:
        def log(event: Any) -> None:
            handle.send(str(event).encode())

        agent.on_after_step(log)
        with pytest.raises(BadUsage, match=r"^listener '.*log' cannot be sent to Ray workers"):
            asyncio.run(agent.batch(["hello"], backend="ray"))
    finally:
        handle.close()


async def test_a_tool_the_workers_cannot_import_is_one_clear_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "private_tools.py").write_text(textwrap.dedent('''
        from fragola_nb import tool

        def louder(text):
            return text.upper()

        @tool
        def shout(text: str) -> str:
            """Shout."""
            return louder(text)
    '''))
    # This process finds the module, the workers do not. The tool itself is sent by value
    # (its name in the module is the Tool, not the function), but the helper it calls is
    # sent by import path.
    monkeypatch.syspath_prepend(str(tmp_path))
    from private_tools import shout  # type: ignore[import-not-found]

    agent = Fragola.scripted(brain=brain).agent(name="calc", tools=[shout])
    with pytest.raises(BadUsage) as caught:
        await agent.batch(["hello"], backend="ray", progress=False)

    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith("the Ray workers could not set up the agent: ")
    assert "No module named 'private_tools'" in line and "register_pickle_by_value" in line


async def test_a_worker_that_cannot_make_its_fragola_is_one_clear_line() -> None:
    def no_key() -> Fragola:
        return Fragola(api_key=os.environ.get("NO_SUCH_VARIABLE_HERE"))

    agent = make_agent()
    with pytest.raises(BadUsage) as caught:
        await agent.batch(["hello"], backend=RayBackend(fragola=no_key), progress=False)

    assert str(caught.value).startswith(
        "the Ray workers could not set up the agent: BadUsage: no API key: "
        "pass api_key= or set OPENAI_API_KEY")
    assert str(caught.value).endswith(
        "(each worker reads OPENAI_API_KEY from its own environment; no key is ever sent to "
        "the workers)")


async def test_a_factory_makes_each_workers_fragola() -> None:
    def workers_model() -> Fragola:
        return Fragola.scripted(brain=lambda request: reply(f"worker {last_user(request)}"))

    agent = make_agent()
    result = await agent.batch(["a", "b", "c"], backend=RayBackend(fragola=workers_model),
                               progress=False)

    assert result.answers == ["worker a", "worker b", "worker c"]


def test_fragolas_that_cannot_be_rebuilt_on_a_worker_are_refused() -> None:
    scripted = Fragola.scripted([reply("one"), reply("two")])
    with pytest.raises(BadUsage, match="a scripted model with a script answers in order"):
        asyncio.run(scripted.agent(name="a").batch(["x"], backend="ray"))
    import openai

    own = Fragola(client=openai.AsyncOpenAI(api_key="sk-x", base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(BadUsage, match=r"its client= or http_client= cannot be made again "
                                       r"elsewhere\); pass RayBackend\(fragola=\.\.\.\)"):
        asyncio.run(own.agent(name="a").batch(["x"], backend="ray"))


async def test_credentials_are_never_sent_to_workers(
        caplog: pytest.LogCaptureFixture) -> None:
    secret, header_secret, setting_secret = ("sk-proj-KEY1234567890abcdef", "hdr-SECRET-42",
                                             "Bearer set-SECRET-77")
    with ScriptedModel(brain=brain) as server:
        fragola = Fragola(api_key=secret, base_url=server.base_url, max_retries=0,
                          default_headers={"X-Api-Key": header_secret, "X-Team": "blue"})
        agent = fragola.agent(name="calc", instructions="Be brief.", model_settings={
            "extra_headers": {"Authorization": setting_secret}, "temperature": 0})

        definition = definition_of(agent.detached_fork("snapshot"), "calc", RayBackend())
        sent = ray.cloudpickle.dumps(definition)
        for text in (secret, header_secret, setting_secret, "set-SECRET-77"):
            assert text.encode() not in sent
        assert b"X-Team" in sent and b"temperature" in sent
        assert "X-Api-Key" in caplog.text and "extra_headers.Authorization" in caplog.text
        # The key given by hand stays here too, and the warning says the workers use theirs.
        assert "not sent to Ray workers (credentials are never sent): the Fragola's api_key" \
            in caplog.text

        # The workers' Fragola reads its key from their environment (none here: the local
        # server gets the placeholder), and answers as the local backend does.
        result = await agent.batch(["hello"], backend="ray", progress=False)
        assert result[0].answer == "echo: hello (Be brief.)"
        # The row's fork, made here, keeps the settings the workers were not sent.
        fork = result[0].fork
        assert fork is not None
        assert fork.options.model_settings["extra_headers"] == {"Authorization": setting_secret}
        assert all(secret not in json.dumps(headers) for headers in server.headers)


def test_a_backends_repr_shows_no_credential() -> None:
    backend = RayBackend(address="ray://admin:hunter2secret@head:10001", init={
        "runtime_env": {"env_vars": {"OPENAI_API_KEY": "sk-proj-abcdef1234567890",
                                     "REGION": "eu"}}})

    shown = repr(backend)

    assert "hunter2secret" not in shown and "sk-proj-abcdef1234567890" not in shown
    assert "'REGION': 'eu'" in shown and "head:10001" in shown and "retries=2" in shown


def test_bad_backends_are_refused() -> None:
    agent = make_agent()
    with pytest.raises(BadUsage, match=r'^backend must be "local", "ray" or a RayBackend'):
        asyncio.run(agent.batch(["x"], backend="spark"))
    for options, message in [({"workers": 0}, "workers must be a whole number >= 1"),
                             ({"retries": -1}, "retries must be a whole number >= 0"),
                             ({"num_cpus": 0}, "num_cpus must be a number > 0"),
                             ({"fragola": "Fragola()"}, "fragola must be a function")]:
        with pytest.raises(BadUsage, match=message):
            RayBackend(**options)


def test_a_local_batch_imports_no_ray_and_ray_missing_is_one_line() -> None:
    script = textwrap.dedent('''
        import asyncio, sys
        from fragola_nb import Fragola, BadUsage
        agent = Fragola.scripted().agent(name="a")
        asyncio.run(agent.batch(["hi"], progress=False))
        print("ray loaded:", "ray" in sys.modules)
        sys.modules["ray"] = None  # as if the extra were not installed
        try:
            asyncio.run(agent.batch(["hi"], backend="ray", progress=False))
        except BadUsage as exc:
            print(exc)
    ''')
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=True)
    assert result.stdout.splitlines() == [
        "ray loaded: False", 'backend="ray" needs Ray: pip install "fragola_nb[ray]"']


def test_with_no_ray_running_a_batch_starts_a_local_instance(tmp_path: Path) -> None:
    """``ray.init()`` with no address, from the batch itself, as on a laptop (a process of
    its own: this module's Ray is already running), then from run_sync's thread."""
    script = textwrap.dedent('''
        import asyncio, ray
        from fragola_nb import Fragola, RayBackend, run_sync
        agent = Fragola.scripted().agent(name="a")
        assert not ray.is_initialized()
        backend = RayBackend(init={"num_cpus": 2, "include_dashboard": False,
                                   "object_store_memory": 80 * 1024 * 1024})
        result = asyncio.run(agent.batch(["hi", "there"], backend=backend, progress=False))
        print(result.answers, ray.is_initialized(), ray.cluster_resources()["CPU"])
        ray.shutdown()
        result = run_sync(agent.batch(["again"], backend=backend, progress=False))
        print(result.answers)
    ''')
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=200, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    said = "(scripted model) You said: "
    assert lines[0] == f"['{said}hi', '{said}there'] True 2.0"
    assert lines[1] == f"['{said}again']"


def test_init_options_refused_by_a_cluster_ray_joins_are_one_line(tmp_path: Path) -> None:
    """No address, but RAY_ADDRESS names a cluster (this module's): Ray joins it and refuses
    the options of a new instance; the user reads why and what to do, in one line."""
    script = textwrap.dedent('''
        import asyncio
        from fragola_nb import BadUsage, Fragola, RayBackend
        agent = Fragola.scripted().agent(name="a")
        try:
            asyncio.run(agent.batch(["hi"], backend=RayBackend(init={"num_cpus": 2}),
                                    progress=False))
        except BadUsage as exc:
            print(exc)
        print(agent.status)
    ''')
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    line, status = result.stdout.splitlines()
    assert line.startswith("Ray joined a running cluster (RAY_ADDRESS, or the last `ray start` "
                           "on this machine) and refused RayBackend(init=...): ")
    assert line.endswith("pass RayBackend(address='local') to start a Ray of its own")
    assert status == "idle"


def test_an_address_joins_a_running_cluster(tmp_path: Path) -> None:
    """A Ray head started apart (``ray start --head``, as on a cluster's head node) and a
    batch given its address: the batch joins it rather than starting Ray itself."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ray_cli = Path(sys.executable).with_name("ray")
    # A temp dir of its own: `ray start` records its address in the temp dir's
    # ray_current_cluster, which every later ray.init() without an address would join
    # (after this head is gone, too). Short: Ray's socket paths must fit in 107 bytes.
    temp = tempfile.mkdtemp(prefix="rayhead-", dir="/tmp")
    head = subprocess.Popen(
        [str(ray_cli), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
         f"--temp-dir={temp}",
         "--include-dashboard=false", "--node-ip-address=127.0.0.1",
         "--object-store-memory=80000000", "--disable-usage-stats"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    script = textwrap.dedent(f'''
        import asyncio, ray
        from fragola_nb import BadUsage, Fragola, RayBackend
        agent = Fragola.scripted().agent(name="a")
        backend = RayBackend(address="127.0.0.1:{port}")
        for attempt in range(60):  # the head takes a few seconds to come up
            try:
                result = asyncio.run(agent.batch(["hi"], backend=backend, progress=False))
                break
            except (BadUsage, ConnectionError):  # "nothing answers at the Ray address"
                import time; time.sleep(1)
        print(result.answers, ray.get_runtime_context().gcs_address)
    ''')
    try:
        result = subprocess.run([sys.executable, "-c", script], capture_output=True,
                                text=True, timeout=200, cwd=tmp_path)
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(60)
        shutil.rmtree(temp, ignore_errors=True)
    recorded = Path("/tmp/ray/ray_current_cluster")  # what ray.init() would join
    assert f":{port}" not in (recorded.read_text() if recorded.exists() else "")
    assert result.returncode == 0, result.stderr[-3000:]
    answers, gcs = result.stdout.splitlines()[-1].rsplit(" ", 1)
    assert answers == "['(scripted model) You said: hi']"
    assert gcs.endswith(f":{port}")  # the head started apart, not a Ray of its own


# -- helpers ----------------------------------------------------------------------------------

async def cpus_free(timeout: float = 30) -> None:
    """Wait until the module's Ray has both its CPUs free: no worker of a batch is left."""
    deadline = time.monotonic() + timeout
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert ray.available_resources().get("CPU", 0) == 2, ray.available_resources()


async def wait_for_lines(file: Path, count: int, timeout: float = 60) -> list[dict[str, Any]]:
    """The resume file's rows, once it has ``count`` of them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if file.exists():
            rows = [json.loads(line) for line in file.read_text().splitlines()]
            if len(rows) >= count:
                return rows
        await asyncio.sleep(0.02)
    raise AssertionError(f"{file} never had {count} rows")


async def kill_a_worker(file: Path) -> int:
    """SIGKILL the worker process that answered the latest row, mid-batch."""
    rows = await wait_for_lines(file, 10)
    pid = int(rows[-1]["answer"].rsplit(" ", 1)[1])
    os.kill(pid, signal.SIGKILL)
    return pid


async def test_a_budget_on_ray_sends_no_chunk_once_spent() -> None:
    agent = make_agent()
    inputs = [f"hello {i}" for i in range(40)]
    # One worker, chunks of 2, two chunks in flight: at most 4 inputs run before the first
    # rows come back and are counted against the budget.
    result = await agent.batch(inputs, concurrency=1, progress=False, budget=Budget(tokens=1),
                               backend=RayBackend(workers=1, chunk_size=2))

    done = [row for row in result if row.status == "done"]
    assert 1 <= len(done) <= 4
    assert all(row.error == "not run: budget" for row in result if row.status != "done")
    assert result.usage.total_tokens > 1
