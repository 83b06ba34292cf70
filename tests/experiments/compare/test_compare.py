"""``agent.compare``: variants on forks, concurrently and bounded; failures, pauses, stops and
interrupts as rows; the table, pandas, text and HTML forms."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from support.compare_world import add, by_instructions, system_text
from support.helpers import assert_valid_history, make_agent, user

from fragola_nb import Agent, BadUsage, Comparison, run_sync, tool
from fragola_nb.base.errors import InvalidToolDefinition
from fragola_nb.experiments.compare.comparison import WATCHERS
from fragola_nb.models.scripted import ScriptedModel, fail

QUESTION = "What is DNS?"
VARIANTS = {
    "short": {"instructions": "Answer in one sentence."},
    "pirate": {"instructions": "Talk like a pirate.", "model": "big-model"},
    "cold": {"model_settings": {"temperature": 0}},
}


@pytest.fixture
def brainy(model: ScriptedModel) -> ScriptedModel:
    model.brain = by_instructions
    return model


async def wait_for_requests(model: ScriptedModel, n: int) -> None:
    assert await asyncio.to_thread(model.wait_for_requests, n), f"{n} request(s) never came"


async def test_each_variant_runs_on_a_fork_named_after_it(brainy: ScriptedModel) -> None:
    agent = make_agent(brainy, name="base", instructions="Be helpful.")
    comparison = await agent.compare(QUESTION, VARIANTS)

    assert isinstance(comparison, Comparison)
    assert list(comparison) == ["short", "pirate", "cold"]
    assert [fork.name for fork in agent.forks] == ["short", "pirate", "cold"]
    assert all(comparison[name] is fork for name, fork in zip(comparison, agent.forks, strict=True))
    assert [(row["variant"], row["status"], row["answer"], row["error"])
            for row in comparison.table()] == [
        ("short", "finished", "[gpt-4o-mini] following: Answer in one sentence.", None),
        ("pirate", "finished", "[big-model] following: Talk like a pirate.", None),
        ("cold", "finished", "[gpt-4o-mini] following: Be helpful.", None),
    ]
    # the agent itself is unchanged; each fork holds the question and its own answer
    assert agent.state.messages == [] and agent.instructions == "Be helpful."
    assert comparison["short"].state.messages == [
        user(QUESTION), {"role": "assistant", "content": "[gpt-4o-mini] following: Answer in "
                         "one sentence."}]
    assert comparison["pirate"].model == "big-model"
    # tokens: each fork counts its own call; the agent made none
    for row in comparison.table():
        fork = comparison[row["variant"]]
        assert row["tokens"] == fork.usage.total_tokens > 0 and fork.usage.requests == 1
    assert agent.usage.requests == 0
    temperatures = {system_text(r): r.get("temperature") for r in brainy.requests}
    assert temperatures == {"Answer in one sentence.": None, "Talk like a pirate.": None,
                            "Be helpful.": 0}
    assert agent.experiments == ()


async def test_tools_replace_the_agents_and_settings_merge_over_its(brainy: ScriptedModel
                                                                    ) -> None:
    lookup = tool(name="lookup", description="", handler=lambda: "x")
    agent = make_agent(brainy, lookup, model_settings={"temperature": 1, "top_p": 0.5})
    comparison = await agent.compare("hi", {"bare": {"tools": [], "model_settings":
                                                     {"temperature": 0.2}}, "same": {}})

    assert comparison["bare"].options.tools == [] and comparison["same"].options.tools == [lookup]
    assert agent.options.tools == [lookup]
    assert comparison["bare"].options.model_settings == {"temperature": 0.2, "top_p": 0.5}
    assert agent.options.model_settings == {"temperature": 1, "top_p": 0.5}
    sent = sorted((r.get("temperature"), "tools" in r) for r in brainy.requests)
    assert sent == [(0.2, False), (1, True)]


async def test_at_most_concurrency_variants_run_at_once(brainy: ScriptedModel) -> None:
    agent = make_agent(brainy)
    in_flight, most = 0, 0

    def began(event: Any) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)

    def ended(event: Any) -> None:
        nonlocal in_flight
        in_flight -= 1

    agent.on_before_model_invocation(began)
    agent.on_after_model_invocation(ended)
    variants = {f"v{i}": {"instructions": f"HANG {i}"} for i in range(5)}
    watched: list[Comparison] = []

    class Watch:
        def started(self, comparison: Comparison) -> None:
            watched.append(comparison)

        def mimebundle(self, comparison: Comparison) -> None:
            return None

    WATCHERS.append(Watch())
    try:
        task = asyncio.ensure_future(agent.compare("go", variants, concurrency=2))
        await wait_for_requests(brainy, 2)
        statuses = [run.status for run in watched[0].runs.values()]
        assert statuses == ["running", "running", "queued", "queued", "queued"]
        for n in (4, 5):
            brainy.release()
            await wait_for_requests(brainy, n)
        brainy.release()
        comparison = await task
    finally:
        WATCHERS.pop()
    assert most == 2 and len(brainy.requests) == 5
    assert [row["answer"] for row in comparison.table()] == [
        f"late: HANG {i}" for i in range(5)]
    assert all(row["seconds"] > 0 for row in comparison.table())


async def test_a_failing_variant_is_a_row_with_its_error(brainy: ScriptedModel) -> None:
    agent = make_agent(brainy, instructions="fine")

    def picky(event: Any) -> None:
        if event.context.agent.name == "listener":
            raise ValueError("this listener is broken")

    agent.on_ai_message(picky)
    comparison = await agent.compare("go", {
        "api": {"instructions": "FAIL"},
        "listener": {},
        "fine": {},
    })
    rows = {row["variant"]: row for row in comparison.table()}
    assert rows["api"]["status"] == "failed"
    assert rows["api"]["error"].startswith("ModelHTTPError: ")
    assert "the server broke" in rows["api"]["error"]
    assert rows["listener"]["status"] == "failed"
    assert rows["listener"]["error"].startswith("ListenerError: ")
    assert "\n" not in rows["listener"]["error"]
    assert rows["fine"] == {**rows["fine"], "status": "finished", "error": None,
                            "answer": "[gpt-4o-mini] following: fine"}
    for fork in comparison.values():
        assert fork.status == "idle"
        assert_valid_history(fork.state.messages)


async def test_a_credential_in_an_error_is_redacted_in_its_row(model: ScriptedModel) -> None:
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX0123456789"
    model.brain = lambda request: fail(401, f"Incorrect API key provided: {key}")
    agent = make_agent(model)
    comparison = await agent.compare("go", {"a": {}})
    [row] = comparison.table()
    assert row["status"] == "failed" and "[redacted]" in row["error"]
    assert key not in row["error"] and key not in repr(comparison)
    assert key not in comparison._repr_html_()


async def test_the_step_limit_is_a_row_with_its_error(brainy: ScriptedModel) -> None:
    plain = tool(name="add", description="", handler=lambda a, b: a + b,
                 schema='{"type": "object", "properties": {"a": {}, "b": {}}}')
    agent = make_agent(brainy, plain, max_step=1, instructions="TOOL")
    comparison = await agent.compare("go", {"one": {}})
    [row] = comparison.table()
    assert row["status"] == "step_limit" and row["answer"] is None
    assert row["tool_calls"] == ['add({"a": 2, "b": 3})']
    assert row["error"].startswith("StepLimit: no final answer within 1 model calls")


async def test_a_variant_paused_for_approval_waits_in_its_fork(brainy: ScriptedModel) -> None:
    agent = make_agent(brainy, add, instructions="TOOL")
    comparison = await agent.compare("add 2 and 3", {"asks": {}, "plain": {"tools": []}})

    asks = comparison["asks"]
    rows = comparison.table()
    assert [(r["status"], r["answer"], r["error"]) for r in rows] == [
        ("waiting", None, None), ("finished", "[gpt-4o-mini] following: TOOL", None)]
    assert rows[0]["tool_calls"] == ['add({"a": 2, "b": 3})']
    assert asks.status == "waiting" and [p.name for p in asks.pending] == ["add"]
    assert "waiting for a decision" in repr(comparison)

    asks.approve(asks.pending[0].id)
    await asks.step()
    assert comparison.table()[0]["answer"] == "[gpt-4o-mini] following: TOOL"
    assert comparison.table()[0]["status"] == "finished"  # as the fork is now


@pytest.mark.parametrize(("variants", "message"), [
    ({"ok": {}, "bad": {"temperature": 0}},
     "variant 'bad': unknown key(s) 'temperature'; a variant may set instructions, model, "
     "model_settings, tools"),
    ({"ok": {}, "bad": "short"}, "variant 'bad': overrides must be a dict, got str"),
    ({"ok": {}, "bad": {"model": ""}}, "variant 'bad': model must be a non-empty string"),
    ({"ok": {}, "bad": {"model_settings": {"messages": []}}},
     "variant 'bad': model_settings cannot hold messages"),
    ({"ok": {}, "bad": {"model": "a", "model_settings": {"model": "b"}}},
     "variant 'bad': two models"),
    ({"ok": {}, "bad": {"instructions": 3}}, "variant 'bad': instructions must be a string"),
    ({"ok": {}, "bad": {"tools": "add"}}, "variant 'bad': tools must be a list of tools"),
    ({"ok": {}, "bad": {"tools": [add, add]}}, "variant 'bad': two tools are named 'add'"),
    ({}, "variants is empty"),
    ({"": {}}, "a variant's name must be a non-empty string"),
    (["a"], "variants must be a dict"),
])
async def test_bad_variants_are_refused_before_any_fork(
        model: ScriptedModel, variants: Any, message: str) -> None:
    agent = make_agent(model)
    with pytest.raises(BadUsage) as info:
        await agent.compare("go", variants)
    assert str(info.value).startswith(message)
    assert agent.forks == () and model.requests == []


async def test_bad_tools_keep_their_error_class(model: ScriptedModel) -> None:
    agent = make_agent(model)
    with pytest.raises(InvalidToolDefinition):
        await agent.compare("go", {"bad": {"tools": [object()]}})


@pytest.mark.parametrize("concurrency", [0, -1, 1.5, True])
async def test_concurrency_must_be_a_whole_number(model: ScriptedModel, concurrency: Any
                                                  ) -> None:
    agent = make_agent(model)
    with pytest.raises(BadUsage, match="concurrency must be a whole number >= 1"):
        await agent.compare("go", {"a": {}}, concurrency=concurrency)
    assert agent.forks == ()


async def test_stop_sync_cancels_the_running_variant_and_starts_no_more(
        brainy: ScriptedModel) -> None:
    agent = make_agent(brainy)
    variants = {name: {"instructions": "HANG"} for name in ("a", "b", "c")}
    task = asyncio.ensure_future(agent.compare("go", variants, concurrency=1))
    await wait_for_requests(brainy, 1)
    agent.stop_sync()
    comparison = await task

    assert [(r["status"], r["error"]) for r in comparison.table()] == [
        ("stopped", "stopped before a final answer"),
        ("not_started", "stopped before it started"),
        ("not_started", "stopped before it started")]
    assert len(brainy.requests) == 1 and agent.experiments == ()
    assert comparison["a"].state.messages == [user("go")]
    assert comparison["b"].state.messages == [] and comparison["b"].status == "idle"


async def test_stop_lets_the_running_variant_finish_its_reply(brainy: ScriptedModel) -> None:
    agent = make_agent(brainy)
    variants = {name: {"instructions": "HANG"} for name in ("a", "b")}
    task = asyncio.ensure_future(agent.compare("go", variants, concurrency=1))
    await wait_for_requests(brainy, 1)
    agent.stop()
    brainy.release()
    comparison = await task

    rows = comparison.table()
    assert rows[0]["answer"] == "late: HANG" and rows[0]["status"] in ("finished", "stopped")
    assert (rows[1]["status"], rows[1]["answer"]) == ("not_started", None)
    assert len(brainy.requests) == 1


async def test_an_interrupt_cancels_the_running_keeps_the_finished_and_propagates(
        brainy: ScriptedModel) -> None:
    agent = make_agent(brainy)
    variants = {"quick": {"instructions": "one"}, "slow": {"instructions": "HANG"},
                "next": {"instructions": "two"}, "last": {"instructions": "HANG too"}}
    task = asyncio.ensure_future(agent.compare("go", variants, concurrency=2))
    await wait_for_requests(brainy, 4)  # quick and next answered; slow and last hang
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    quick, slow, following, last = (agent.forks[i] for i in range(4))
    assert quick.state.messages[-1] == {"role": "assistant",
                                        "content": "[gpt-4o-mini] following: one"}
    assert following.state.outcome == "finished"
    for fork in (slow, last):
        assert fork.status == "idle" and fork.state.messages == [user("go")]
        assert fork.outcome == "stopped"
    assert agent.experiments == ()


def test_compare_from_sync_code(brainy: ScriptedModel) -> None:
    agent = make_agent(brainy)
    comparison = run_sync(agent.compare("go", {"a": {"instructions": "x"}}))
    assert comparison.table()[0]["answer"] == "[gpt-4o-mini] following: x"


async def test_table_pandas_text_and_html(brainy: ScriptedModel) -> None:
    hostile = "<script>alert(1)</script> file\u202egnp.exe"
    agent = make_agent(brainy)
    comparison = await agent.compare("go <b>", {"evil": {"instructions": hostile}, "ok": {}})

    rows = comparison.table()
    assert list(rows[0]) == ["variant", "status", "answer", "tool_calls", "tokens", "seconds",
                             "error"]
    frame = comparison.to_pandas()
    assert list(frame.columns) == list(rows[0]) and list(frame["variant"]) == ["evil", "ok"]
    html = comparison._repr_html_()
    assert "<script" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "\\u202e" in html
    text = repr(comparison)
    assert "\u202e" not in text and "- evil (finished" in text
    assert comparison._repr_mimebundle_() is None  # no notebook layer: text and HTML


async def test_to_pandas_without_pandas_says_how_to_get_it(
        brainy: ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = make_agent(brainy)
    comparison = await agent.compare("go", {"a": {}})
    monkeypatch.setitem(sys.modules, "pandas", None)  # what a missing package looks like
    with pytest.raises(ImportError, match=r"pip install fragola_nb\[pandas\]"):
        comparison.to_pandas()


async def test_a_busy_agent_is_refused(brainy: ScriptedModel) -> None:
    agent: Agent = make_agent(brainy, add, instructions="TOOL")
    await agent.user_message("add")
    with pytest.raises(BadUsage, match="is waiting: compare it once it is idle"):
        await agent.compare("go", {"a": {}})
    assert agent.forks == ()
