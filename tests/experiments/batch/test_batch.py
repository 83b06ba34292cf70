"""``agent.batch``: inputs on forks, bounded and in order; failures as rows; stop, stop_sync and
cancellation keep what finished; the resume file; progress; the table forms."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from support.helpers import assert_valid_history, make_agent, make_fragola, user

from fragola_nb import Agent, BadUsage, BatchResult, tool
from fragola_nb.core.events import StatusChangeEvent
from fragola_nb.models.scripted import Item, ScriptedModel, call, fail, hang, reply, tool_calls

KEY = "sk-proj-abcdefgh12345678"
FEW_SHOT = [user("2 + 2?"), {"role": "assistant", "content": "4"}]


def last_user_text(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


def answers(request: dict[str, Any]) -> Item:
    """The model's rule in these tests, from the input: ``slow`` answers after a while, ``hang``
    waits for ``model.release()``, ``fail`` fails (its message holds a key), ``ask`` calls the
    approval tool, ``loop`` calls a tool forever; anything else is answered at once."""
    text = last_user_text(request)
    if request["messages"][-1]["role"] == "tool":
        return tool_calls(call("free", {})) if "loop" in text else reply(f"done: {text}")
    if "slow" in text:
        return hang(0.3, then=reply(f"late answer to {text}"))
    if "hang" in text:
        return hang(then=reply(f"released: {text}"))
    if "fail" in text:
        return fail(500, f"the server broke, key {KEY}")
    if "ask" in text:
        return tool_calls(call("guarded", {}))
    if "loop" in text:
        return tool_calls(call("free", {}))
    return reply(f"answer to {text}")


def batch_agent(model: ScriptedModel, **options: Any) -> Agent:
    """An agent with instructions and a few-shot pair (the shared prefix), on ``answers``."""
    model.brain = answers
    guarded = tool(name="guarded", description="", handler=lambda: "ok", require_approval=True)
    free = tool(name="free", description="", handler=lambda: "again")
    options.setdefault("instructions", "Answer with a number.")
    return make_agent(model, guarded, free, name="calc", messages=FEW_SHOT, **options)


async def wait_for_requests(model: ScriptedModel, n: int) -> None:
    assert await asyncio.to_thread(model.wait_for_requests, n), f"{n} request(s) never came"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_rows_come_in_input_order_though_they_finish_out_of_order(model: ScriptedModel
                                                                        ) -> None:
    agent = batch_agent(model)
    finished: list[str] = []
    agent.on_ai_message(lambda event: finished.append(last_user_text(
        {"messages": event.context.agent.state.messages})))
    inputs = ["slow 0", "fast 1", "slow 2", "fast 3", "fast 4"]

    result = await agent.batch(inputs, concurrency=5, progress=False)

    assert isinstance(result, BatchResult)
    assert finished.index("fast 1") < finished.index("slow 0")  # out of order...
    assert [row.input for row in result] == inputs  # ...but the rows are in input order
    assert [row.index for row in result] == [0, 1, 2, 3, 4]
    assert result.answers == ["late answer to slow 0", "answer to fast 1",
                              "late answer to slow 2", "answer to fast 3", "answer to fast 4"]
    assert len(result) == 5 and result[1].answer == "answer to fast 1"
    assert result[-1]["answer"] == "answer to fast 4"
    assert all(row.status == "done" and row.error is None for row in result)
    assert result.done == 5 and result.failed == 0 and not result.stopped
    assert result[0].seconds is not None and result[0].seconds > result[1].seconds  # type: ignore[operator]


async def test_each_input_runs_on_a_fork_after_the_shared_prefix_and_the_agent_is_unchanged(
        model: ScriptedModel) -> None:
    agent = batch_agent(model)
    before = agent.state

    result = await agent.batch(["one", [{"type": "text", "text": "two"}]], concurrency=1,
                               progress=False)

    system = {"role": "system", "content": "Answer with a number."}
    assert [r["messages"] for r in model.requests] == [
        [system, *FEW_SHOT, user("one")],
        [system, *FEW_SHOT, {"role": "user", "content": [{"type": "text", "text": "two"}]}],
    ]
    assert agent.state == before and agent.status == "idle"
    assert agent.forks == ()  # the forks are not in the tree...
    for row in result:  # ...but each row has its own
        fork = row.fork
        assert fork is not None and fork.parent is None and fork.fork_of == agent.id
        assert fork.state.messages == [*FEW_SHOT, {"role": "user", "content": row.input},
                                       {"role": "assistant", "content": row.answer}]
        assert fork.fork_point == len(FEW_SHOT)
    assert result[0].answer == "answer to one"


async def test_tokens_are_each_forks_usage_and_the_result_sums_them(model: ScriptedModel
                                                                   ) -> None:
    agent = batch_agent(model)

    result = await agent.batch(["one", "two words", "fail"], progress=False)

    for row in result:
        assert row.fork is not None and row.usage is row.fork.usage
        assert row.tokens == row.fork.usage.total_tokens
    assert result[0].tokens is not None and result[0].tokens > 0
    assert result[2].tokens == 0  # the failed call reported nothing, and cost nothing
    assert result.usage.total_tokens == sum(row.tokens or 0 for row in result)
    assert result.usage.requests == sum(row.fork.usage.requests for row in result
                                        if row.fork is not None) >= 2
    assert agent.usage.requests == 0  # the agent made no call of its own


async def test_a_failing_input_is_a_row_with_its_error_and_the_others_go_on(
        model: ScriptedModel) -> None:
    agent = batch_agent(model, max_step=2)
    agent.on_user_message(lambda event: 1 / 0 if "listener" in str(
        event.message["content"]) else None)

    result = await agent.batch(["fine", "fail", "ask", "loop", "listener", "also fine"],
                               concurrency=3, progress=False)

    by_input = {row.input: row for row in result}
    assert by_input["fine"].answer == "answer to fine"
    assert by_input["also fine"].answer == "answer to also fine"
    failed = by_input["fail"]
    assert failed.status == "failed" and failed.answer is None
    assert failed.error is not None and "the server broke" in failed.error
    assert KEY not in failed.error and "[redacted]" in failed.error
    asked = by_input["ask"]
    assert asked.status == "failed" and asked.error is not None
    assert asked.error.startswith("waiting: guarded")
    assert asked.fork is not None and asked.fork.status == "waiting"  # to approve by hand
    looped = by_input["loop"]
    assert looped.error is not None and looped.error.startswith("step limit")
    assert by_input["listener"].error is not None
    assert "ZeroDivisionError" in by_input["listener"].error
    assert all("\n" not in (row.error or "") for row in result)
    assert (result.done, result.failed, result.unfinished) == (2, 4, 0)
    assert set(result.errors) == {1, 2, 3, 4}
    assert agent.status == "idle" and agent.state.messages == FEW_SHOT


async def test_at_most_concurrency_inputs_run_at_once(model: ScriptedModel) -> None:
    agent = batch_agent(model)
    running: set[str] = set()
    peak = 0

    def count(event: StatusChangeEvent) -> None:
        nonlocal peak
        name = event.context.agent.name
        if event.status == "generating":
            running.add(name)
        else:
            running.discard(name)
        peak = max(peak, len(running))

    agent.on_status_change(count)

    result = await agent.batch([f"slow {i}" for i in range(7)], concurrency=3, progress=False)

    assert peak == 3  # the server holds each request, so three overlap, never four
    assert result.done == 7


async def test_stop_starts_nothing_more_and_keeps_what_finishes(model: ScriptedModel) -> None:
    agent = batch_agent(model)
    task = asyncio.ensure_future(
        agent.batch([f"hang {i}" for i in range(6)], concurrency=2, progress=False))
    await wait_for_requests(model, 2)

    agent.stop()
    model.release()
    result = await task

    assert [row.status for row in result] == ["done", "done", *["not run"] * 4]
    assert result[0].answer == "released: hang 0"
    assert result[2].error is not None and result[2].error.startswith("not run")
    assert result[2].fork is None
    assert len(model.requests) == 2 and result.stopped
    assert agent.experiments == ()  # the stopper is gone with the batch
    assert agent.state.messages == FEW_SHOT and agent.status == "idle"


async def test_stop_sync_stops_the_running_inputs_and_keeps_the_finished(
        model: ScriptedModel) -> None:
    agent = batch_agent(model)
    task = asyncio.ensure_future(
        agent.batch(["quick", "hang 1", "hang 2", "never"], concurrency=2, progress=False))
    await wait_for_requests(model, 3)  # "quick" answered, so "hang 2" could start

    agent.stop_sync()
    result = await task

    assert [row.status for row in result] == ["done", "stopped", "stopped", "not run"]
    assert result[0].answer == "answer to quick"
    for row in result[1:3]:
        assert row.fork is not None and row.fork.status == "idle"
        assert row.error is not None and row.error.startswith("stopped")
        assert_valid_history(row.fork.state.messages)
    assert len(model.requests) == 3
    assert result.unfinished == 3
    assert "1 done, 0 failed, 2 stopped, 1 not run" in repr(result)


async def test_cancelling_the_task_keeps_the_finished_rows_in_the_file_and_raises(
        model: ScriptedModel, tmp_path: Path) -> None:
    agent = batch_agent(model)
    path = tmp_path / "rows.jsonl"
    inputs = ["quick", "hang 1", "hang 2", "never"]
    task = asyncio.ensure_future(agent.batch(inputs, concurrency=2, resume=path,
                                             progress=False))
    await wait_for_requests(model, 3)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert [(row["index"], row["status"]) for row in lines(path)] == [(0, "done")]
    assert agent.experiments == () and agent.status == "idle"
    model.brain = lambda request: reply(f"second run: {last_user_text(request)}")
    sent = len(model.requests)

    again = await agent.batch(inputs, concurrency=2, resume=path, progress=False)

    assert len(model.requests) == sent + 3  # "quick" is not sent again
    assert again[0].resumed and again[0].answer == "answer to quick"
    assert again.answers[1:] == [f"second run: {text}" for text in inputs[1:]]


async def test_resume_skips_the_inputs_done_and_runs_the_failed_again(
        model: ScriptedModel, tmp_path: Path) -> None:
    agent = batch_agent(model)
    path = tmp_path / "rows.jsonl"
    first = await agent.batch(["a", "fail b", "c"], resume=path, progress=False)
    written = sorted((row["index"], row["status"]) for row in lines(path))  # finishing order
    assert written == [(0, "done"), (1, "failed"), (2, "done")]
    assert KEY not in path.read_text()  # the error was redacted before it was written
    assert os.stat(path).st_mode & 0o777 == 0o600
    model.brain = lambda request: reply("fixed")
    sent = len(model.requests)

    second = await agent.batch(["a", "fail b", "c"], resume=path, progress=False)

    assert len(model.requests) == sent + 1
    assert last_user_text(model.requests[-1]) == "fail b"
    assert second[1].answer == "fixed" and second[1].fork is not None
    for index in (0, 2):
        row, earlier = second[index], first[index]
        assert row.resumed and row.fork is None
        assert (row.answer, row.error, row.tokens) == (earlier.answer, None, earlier.tokens)
        assert row.seconds == pytest.approx(earlier.seconds)
    assert second.usage.total_tokens == sum(row.tokens or 0 for row in second)
    assert second.done == 3


async def test_a_last_line_cut_short_by_a_crash_is_ignored(model: ScriptedModel,
                                                           tmp_path: Path) -> None:
    agent = batch_agent(model)
    path = tmp_path / "rows.jsonl"
    await agent.batch(["a", "b"], concurrency=1, resume=path, progress=False)
    text = path.read_text()
    path.write_text(text[: text.index("\n") + 20])  # the second row cut in the middle
    sent = len(model.requests)

    result = await agent.batch(["a", "b"], resume=path, progress=False)

    assert len(model.requests) == sent + 1 and last_user_text(model.requests[-1]) == "b"
    assert result.answers == ["answer to a", "answer to b"]
    assert [row["index"] for row in lines(path)] == [0, 1]  # every line whole again


async def test_a_resume_file_of_other_inputs_is_refused(model: ScriptedModel,
                                                         tmp_path: Path) -> None:
    agent = batch_agent(model)
    path = tmp_path / "rows.jsonl"
    await agent.batch(["a", "b"], resume=path, progress=False)
    before, sent = path.read_bytes(), len(model.requests)

    with pytest.raises(BadUsage, match=r"other inputs \(line \d: input 1 there is 'b', here 'B'"):
        await agent.batch(["a", "B"], resume=path, progress=False)
    with pytest.raises(BadUsage, match="input 0 there is 'a', here 'b'"):
        await agent.batch(["b"], resume=path, progress=False)
    other = tmp_path / "notes.jsonl"
    other.write_text('{"note": "mine"}\n')
    with pytest.raises(BadUsage, match="line 1, is not a row of a batch resume file"):
        await agent.batch(["a"], resume=other, progress=False)
    link = tmp_path / "link.jsonl"
    link.symlink_to(other)
    with pytest.raises(BadUsage, match="symbolic link"):
        await agent.batch(["a"], resume=link, progress=False)

    assert path.read_bytes() == before and len(model.requests) == sent
    assert other.read_text() == '{"note": "mine"}\n'
    shorter = await agent.batch(["a"], resume=path, progress=False)  # the first of the same
    assert shorter.answers == ["answer to a"] and shorter[0].resumed
    assert len(model.requests) == sent and path.read_bytes() == before


async def test_bad_calls_are_refused_before_anything_runs(model: ScriptedModel) -> None:
    agent = batch_agent(model)
    with pytest.raises(BadUsage, match="inputs must be a list"):
        await agent.batch("one input", progress=False)  # type: ignore[arg-type]
    with pytest.raises(BadUsage, match="input 1: content must be"):
        await agent.batch(["fine", 42], progress=False)
    with pytest.raises(BadUsage, match="concurrency must be"):
        await agent.batch(["fine"], concurrency=0, progress=False)
    assert model.requests == []
    await agent.user_message("ask")
    assert agent.status == "waiting"
    with pytest.raises(BadUsage, match="is waiting"):
        await agent.batch(["fine"], progress=False)
    assert len(model.requests) == 1 and agent.forks == ()


async def test_no_inputs_is_an_empty_result(model: ScriptedModel) -> None:
    result = await batch_agent(model).batch([], progress=False)
    assert len(result) == 0 and list(result) == [] and model.requests == []


async def test_progress_shows_the_counts_on_stderr_and_can_be_turned_off(
        model: ScriptedModel, capsys: pytest.CaptureFixture[str]) -> None:
    agent = batch_agent(model)

    result = await agent.batch(["a", "fail", "c"], concurrency=2)

    err = capsys.readouterr().err
    tokens = result.usage.total_tokens
    assert "batch calc" in err and "3/3" in err
    assert f"done=2, failed=1, tokens={tokens:,}" in err
    await agent.batch(["a"], progress=False)
    assert capsys.readouterr().err == ""


async def test_to_pandas_has_a_row_per_input(model: ScriptedModel,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    result = await batch_agent(model).batch(["a", "fail"], progress=False)

    frame = result.to_pandas()

    assert list(frame.columns) == ["input", "answer", "error", "status", "tokens", "seconds",
                                   "fork"]
    assert frame["answer"].tolist()[0] == "answer to a"
    assert frame["status"].tolist() == ["done", "failed"]
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install fragola_nb\[pandas\]"):
        result.to_pandas()


async def test_repr_and_html_are_a_summary_with_the_text_escaped(model: ScriptedModel) -> None:
    result = await batch_agent(model).batch(["<script>alert(1)</script>", "fail"],
                                            progress=False)

    assert repr(result).startswith("BatchResult(2 inputs: 1 done, 1 failed; ")
    page = result._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "1 done, 1 failed" in page and KEY not in page


async def test_a_timeout_is_a_row_with_its_error(model: ScriptedModel) -> None:
    model.brain = answers
    agent = make_fragola(model, timeout=0.5).agent("calc")

    result = await agent.batch(["hang here", "quick"], progress=False)

    assert result[0].status == "failed" and result[0].error is not None
    assert result[0].error.startswith("ModelTimeout")
    assert result[1].answer == "answer to quick"


async def test_stop_sync_from_another_thread_reaches_the_batch(model: ScriptedModel) -> None:
    agent = batch_agent(model)
    task = asyncio.ensure_future(
        agent.batch(["hang 0", "hang 1", "never"], concurrency=2, progress=False))
    await wait_for_requests(model, 2)

    await asyncio.to_thread(agent.stop_sync)
    result = await task

    assert [row.status for row in result] == ["stopped", "stopped", "not run"]
    assert len(model.requests) == 2 and agent.status == "idle"


def test_a_kernel_interrupt_fails_the_cell_and_keeps_the_finished_rows_in_the_file(
        model: ScriptedModel, tmp_path: Path) -> None:
    from support.kernel_harness import Kernel

    model.brain = answers
    path = tmp_path / "rows.jsonl"
    with Kernel() as kernel:
        kernel.execute(f"from fragola_nb import Fragola\n"
                       f"calc = Fragola(api_key='k', base_url={model.base_url!r}, "
                       f"max_retries=0).agent('calc')")
        msg_id = kernel.start(f"result = await calc.batch(['quick', 'hang 1', 'hang 2'], "
                              f"concurrency=2, resume={str(path)!r})")
        assert model.wait_for_requests(3, timeout=20)  # "quick" answered, "hang 2" sent

        kernel.km.interrupt_kernel()
        result = kernel.collect(msg_id, timeout=30, allow_error=True)

        assert kernel.reply(msg_id)["status"] == "error"  # Run All stops here
        assert result.error is not None
        assert [(row["index"], row["answer"]) for row in lines(path)] == [
            (0, "answer to quick")]
        assert kernel.eval("(calc.status, len(calc.forks), len(calc._experiments), "
                           "'result' in globals())") == ["idle", 0, 0, False]
        model.brain = lambda request: reply("second run")
        again = kernel.execute(f"again = await calc.batch(['quick', 'hang 1', 'hang 2'], "
                               f"resume={str(path)!r}, progress=False)\nprint(again.answers)")
        assert again.stdout.strip() == "['answer to quick', 'second run', 'second run']"


async def test_a_generating_agent_cannot_start_a_batch(model: ScriptedModel) -> None:
    agent = batch_agent(model)
    turn = asyncio.ensure_future(agent.user_message("hang on"))
    await wait_for_requests(model, 1)

    with pytest.raises(BadUsage, match="'calc' is generating"):
        await agent.batch(["fine"], progress=False)

    model.release()
    assert (await turn).outcome == "finished"
    assert len(model.requests) == 1 and agent.forks == ()
