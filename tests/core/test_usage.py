"""Usage and cost: every model call's reported usage is kept on the agent that made it.

Agents run against the scripted model (schema-checked by the ``model`` fixture), whose
answers report deterministic counts (``model.responses``, the last of ``model.chunks``).
"""

from __future__ import annotations

import json
from typing import Any

import genai_prices
import pytest
from support.helpers import make_fragola

from fragola_nb import BadUsage, Usage, tree_usage
from fragola_nb.core.tools import tool
from fragola_nb.core.usage import CallUsage, format_cost
from fragola_nb.models.scripted import ScriptedModel, call, raw, reply, tool_calls

STREAM = {"stream": True}


def reported(body: dict[str, Any]) -> tuple[int, int, int]:
    usage = body["usage"]
    return usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]


def counts(usage: Usage) -> tuple[int, int, int]:
    return usage.prompt_tokens, usage.completion_tokens, usage.total_tokens


def completion(text: str, usage: dict[str, Any] | None) -> bytes:
    """A plain completion body, with ``usage`` or without any."""
    body: dict[str, Any] = {
        "id": "chatcmpl-u", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": text, "refusal": None}}],
    }
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode()


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


# -- counting -----------------------------------------------------------------------------------


async def test_plain_calls_count_what_the_server_reported(model: ScriptedModel) -> None:
    model.push(tool_calls(call("add", {"a": 2, "b": 3})), reply("It is five, friend."))
    agent = make_fragola(model).agent("bot", tools=[add])

    await agent.user_message("What is two plus three?")

    first, second = (reported(body) for body in model.responses)
    assert counts(agent.usage) == tuple(a + b for a, b in zip(first, second, strict=True))
    assert agent.usage.requests == 2 and agent.usage.unreported == 0
    assert agent.usage.total_tokens > 0


async def test_a_stream_asks_for_usage_and_counts_its_usage_chunk(model: ScriptedModel) -> None:
    model.push(reply("Streamed words, counted all the same."))
    agent = make_fragola(model).agent("bot", model_settings=STREAM)
    heard: list[Usage | None] = []
    agent.on_after_model_invocation(lambda event: heard.append(event.usage))

    state = await agent.user_message("Say something.")

    assert model.requests[0]["stream_options"] == {"include_usage": True}
    last = model.chunks[-1]
    assert last["choices"] == []
    assert counts(agent.usage) == reported(last)
    assert agent.usage.requests == 1
    # the stored message is the same as ever: usage is kept beside it, not in it
    assert state.messages[-1] == {"role": "assistant",
                                  "content": "Streamed words, counted all the same."}
    assert heard == [agent.usage]  # after_model_invocation carries the call's usage


@pytest.mark.parametrize("settings", [
    {"stream": True, "stream_options": {"include_usage": False}},
    {"stream": True, "stream_options": None},
])
async def test_the_callers_own_stream_options_are_kept(
    model: ScriptedModel, settings: dict[str, Any]
) -> None:
    model.push(reply("No usage asked for."))
    agent = make_fragola(model).agent("bot", model_settings=settings)

    await agent.user_message("hi")

    sent = model.requests[0]
    if settings["stream_options"] is None:
        assert "stream_options" not in sent  # None: ask nothing
    else:
        assert sent["stream_options"] == {"include_usage": False}
    assert all(chunk.get("usage") is None for chunk in model.chunks)
    # one request, its tokens unknown: no count is made up, and no cost
    assert (agent.usage.requests, agent.usage.unreported, agent.usage.total_tokens) == (1, 1, 0)
    assert agent.usage.cost is None


async def test_a_turns_settings_stream_options_win_too(model: ScriptedModel) -> None:
    model.push(reply("ok"))
    agent = make_fragola(model).agent("bot", model_settings=STREAM)
    agent.on_before_model_invocation(
        lambda event: {**event.config, "stream_options": {"include_usage": False}})

    await agent.user_message("hi")

    assert model.requests[0]["stream_options"] == {"include_usage": False}


async def test_a_plain_request_sends_no_stream_options(model: ScriptedModel) -> None:
    model.push(reply("ok"))
    agent = make_fragola(model).agent("bot")

    await agent.user_message("hi")

    assert "stream_options" not in model.requests[0]


@pytest.mark.parametrize("usage", [
    None,                                                        # no usage at all
    {"prompt_tokens": "12", "completion_tokens": 3, "total_tokens": 15},  # not counts
    {"prompt_tokens": -1, "completion_tokens": 3, "total_tokens": 2},
    {"prompt_tokens": True, "completion_tokens": 3, "total_tokens": 4},
])
async def test_a_server_without_usage_leaves_the_counts_at_what_is_known(
    model: ScriptedModel, usage: dict[str, Any] | None
) -> None:
    model.push(reply("Counted."), raw(completion("Not counted.", usage)))
    fragola = make_fragola(model, prices={"gpt-4o-mini": {"input": 1, "output": 2}})
    agent = fragola.agent("bot")

    await agent.user_message("one")
    known = counts(agent.usage)
    assert agent.usage.cost is not None
    state = await agent.user_message("two")

    assert state.messages[-1]["content"] == "Not counted."
    assert counts(agent.usage) == known == reported(model.responses[0])
    assert (agent.usage.requests, agent.usage.unreported) == (2, 1)
    assert agent.usage.cost is None  # never a guess
    assert "1 of 2 calls without usage" in agent.usage.summary()


async def test_cached_prompt_tokens_are_kept(model: ScriptedModel) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010,
             "prompt_tokens_details": {"cached_tokens": 600}}
    model.push(raw(completion("cached", usage)))
    agent = make_fragola(model).agent("bot")

    await agent.user_message("hi")

    assert (agent.usage.prompt_tokens, agent.usage.cached_tokens) == (1000, 600)
    listed = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1000, cache_read_tokens=600, output_tokens=10),
        "gpt-4o-mini")
    assert agent.usage.cost == float(listed.total_price)


# -- forks and trees ----------------------------------------------------------------------------


async def test_a_fork_counts_its_own_calls_and_the_tree_sums_them(model: ScriptedModel) -> None:
    model.push(reply("root answer"), reply("fork answer here"), reply("deeper fork answer"),
               reply("root again"))
    root = make_fragola(model).agent("root")
    await root.user_message("first")
    before_fork = root.usage

    fork = root.fork("child")
    assert fork.usage == Usage() and fork.usage.requests == 0
    await fork.user_message("fork question")
    grandchild = fork.fork("grandchild")
    await grandchild.user_message("deeper question")
    await root.user_message("again")

    bodies = [reported(body) for body in model.responses]
    assert counts(fork.usage) == bodies[1]
    assert counts(grandchild.usage) == bodies[2]
    assert counts(root.usage) == tuple(a + b for a, b in zip(bodies[0], bodies[3], strict=True))
    assert root.usage.since(before_fork).requests == 1
    total = tree_usage(root)
    assert total.requests == 4
    assert counts(total) == tuple(sum(column) for column in zip(*bodies, strict=True))
    assert counts(tree_usage(fork)) == counts(fork.usage + grandchild.usage)


# -- cost ---------------------------------------------------------------------------------------


def listed_cost(usage: Usage, model: str) -> float:
    total = sum(
        genai_prices.calc_price(
            genai_prices.Usage(input_tokens=c.prompt_tokens, output_tokens=c.completion_tokens),
            model).total_price
        for c in usage.calls)
    return float(total)


async def test_cost_of_a_listed_model_is_genai_prices_own(model: ScriptedModel) -> None:
    model.push(reply("One answer with several words."), reply("Another one."))
    agent = make_fragola(model, model="gpt-4o-mini").agent("bot")

    await agent.user_message("a question")
    await agent.user_message("and another")

    assert agent.usage.cost is not None and agent.usage.cost > 0
    assert agent.usage.cost == pytest.approx(listed_cost(agent.usage, "gpt-4o-mini"), rel=1e-12)
    assert agent.usage.summary().startswith(f"{agent.usage.total_tokens:,} tokens · $")


async def test_cost_from_the_users_prices_per_million_tokens(model: ScriptedModel) -> None:
    prices = {"my-model": {"input": 0.15, "output": 0.60}}
    model.push(reply("Priced by the user."))
    agent = make_fragola(model, model="my-model", prices=prices).agent("bot")

    await agent.user_message("price me")

    usage = agent.usage
    assert usage.cost == pytest.approx(
        (usage.prompt_tokens * 0.15 + usage.completion_tokens * 0.60) / 1_000_000)


async def test_an_unknown_model_has_no_cost(model: ScriptedModel) -> None:
    model.push(reply("Who knows what I cost."))
    agent = make_fragola(model, model="my-own-finetune-xyz").agent("bot")

    await agent.user_message("hi")

    assert agent.usage.total_tokens > 0
    assert agent.usage.cost is None
    assert agent.usage.summary() == f"{agent.usage.total_tokens:,} tokens"


async def test_mixed_models_are_priced_per_model_and_summed(model: ScriptedModel) -> None:
    model.push(reply("from the mini model"), reply("from the user's model"),
               reply("from an unknown one"))
    fragola = make_fragola(model, model="gpt-4o-mini",
                           prices={"house-model": {"input": 1.0, "output": 3.0}})
    root = fragola.agent("root")
    await root.user_message("first")
    fork = root.fork("house")
    fork.options.model_settings["model"] = "house-model"
    await fork.user_message("second")

    total = tree_usage(root)
    assert list(total.by_model) == ["gpt-4o-mini", "house-model"]
    house = total.by_model["house-model"]
    assert house.cost == pytest.approx((house.prompt_tokens + 3 * house.completion_tokens) / 1e6)
    mini = total.by_model["gpt-4o-mini"].cost
    assert mini is not None and house.cost is not None
    assert total.cost == pytest.approx(mini + house.cost)

    other = root.fork("other")
    other.options.model_settings["model"] = "nobody-knows-this-model"
    await other.user_message("third")
    assert tree_usage(root).cost is None  # one model without a price: no total


@pytest.mark.parametrize(("prices", "said"), [
    (["gpt-4o"], "prices must be a dict"),
    ({"m": 0.15}, "prices['m'] must be a dict"),
    ({"m": {"input": 1}}, "takes input, output and cached_input"),
    ({"m": {"input": 1, "output": -2}}, "prices['m']['output'] must be a number >= 0"),
    ({"m": {"input": "1", "output": 2}}, "prices['m']['input'] must be a number >= 0"),
    ({"m": {"input": 1, "output": 2, "cache": 1}}, "takes input, output and cached_input"),
    ({"": {"input": 1, "output": 2}}, "a model name must be a non-empty string"),
])
def test_bad_prices_are_one_clear_error(model: ScriptedModel, prices: Any, said: str) -> None:
    with pytest.raises(BadUsage, match=said.replace("[", r"\[").replace("]", r"\]")):
        make_fragola(model, prices=prices)


def test_cached_input_price_applies_to_cached_tokens() -> None:
    from fragola_nb.core.usage import ModelPrice

    usage = Usage((CallUsage("m", 1000, 100, 1100, 400),),
                  {"m": ModelPrice(input=1.0, output=2.0, cached_input=0.5)})
    assert usage.cost == pytest.approx((600 * 1.0 + 400 * 0.5 + 100 * 2.0) / 1e6)


# -- shown in the notebook ----------------------------------------------------------------------


async def test_the_panel_header_shows_the_agents_usage(model: ScriptedModel) -> None:
    from fragola_nb.notebook.panel.view import AgentPanel

    agent = make_fragola(model, model="gpt-4o-mini").agent("bot", model_settings=STREAM)
    panel = AgentPanel(agent)
    assert panel.head["usage"]["requests"] == 0 and panel.head["usage"]["text"] == ""
    model.push(reply("A streamed answer to count."), reply("And a second one."))
    await agent.user_message("first")
    await agent.user_message("second")

    shown = panel.head["usage"]
    usage = agent.usage
    assert (shown["prompt_tokens"], shown["completion_tokens"], shown["total_tokens"],
            shown["requests"], shown["cost"]) == (*counts(usage), 2, usage.cost)
    assert shown["text"] == f"{usage.total_tokens:,} tokens · {format_cost(usage.cost)}"
    assert shown["text"] in panel._repr_mimebundle_()["text/html"]


async def test_a_turn_panel_shows_the_tokens_of_its_turn_only(model: ScriptedModel) -> None:
    from fragola_nb.notebook.panel.view import AgentPanel

    agent = make_fragola(model, model="unpriced-model").agent("bot")
    model.push(reply("An earlier turn, with many words in its answer."), reply("Short."))
    await agent.user_message("earlier")
    panel = AgentPanel(agent, since=agent.message_count)

    await agent.user_message("now")

    turn = reported(model.responses[1])
    shown = panel.head["usage"]
    assert (shown["prompt_tokens"], shown["completion_tokens"], shown["total_tokens"]) == turn
    assert shown["requests"] == 1 and shown["cost"] is None  # an unpriced model: no cost
    assert shown["text"] == f"{turn[2]:,} tokens"
    assert f"this turn: {turn[2]:,} tokens" in panel._repr_mimebundle_()["text/html"]
    whole = AgentPanel(agent).head["usage"]  # the agent's panel counts both turns
    assert (whole["requests"], whole["total_tokens"]) == (2, agent.usage.total_tokens)
    assert agent.usage.total_tokens > turn[2]


# -- sessions and exports -----------------------------------------------------------------------


async def test_a_session_keeps_each_agents_usage(model: ScriptedModel, tmp_path: Any) -> None:
    from fragola_nb import load_session, save_session

    prices = {"house": {"input": 2.0, "output": 4.0}}
    model.push(reply("root reply"), reply("fork reply, longer"),
               raw(completion("unreported reply", None)))
    root = make_fragola(model, model="house", prices=prices).agent("root")
    await root.user_message("first")
    fork = root.fork("child")
    await fork.user_message("second")
    quiet = root.fork("quiet")
    await quiet.user_message("third")
    idle = root.fork("idle")
    path = tmp_path / "s.json"

    save_session(path, root)
    saved = json.loads(path.read_text())
    session = load_session(path, make_fragola(model, model="house", prices=prices))

    for agent in (root, fork, quiet, idle):
        loaded = session.by_id[agent.id]
        assert loaded.usage == agent.usage
        assert loaded.usage.cost == agent.usage.cost
    assert session["quiet"].usage.cost is None and session["child"].usage.cost is not None
    records = {record["options"]["name"]: record for record in saved["agents"]}
    # the counts as they were; since issue 24 the call's timing too (fragola_nb.core.timing)
    unreported = dict(records["quiet"]["usage"][0])
    assert {unreported.pop(name) >= 0 for name in ("started", "ttft", "seconds")} == {True}
    assert unreported == {"model": "house", "reported": False}
    assert "usage" not in records["idle"]  # no call, nothing written
    # the fork loaded counts its own calls still, and goes on counting
    model.push(reply("more"))
    await session["child"].user_message("more")
    assert session["child"].usage.requests == 2 and tree_usage(session["root"]).requests == 4


async def test_a_session_without_usage_still_loads(model: ScriptedModel, tmp_path: Any) -> None:
    from fragola_nb import load_session, save_session

    model.push(reply("hello"))
    agent = make_fragola(model).agent("old")
    await agent.user_message("hi")
    path = tmp_path / "old.json"
    save_session(path, agent)
    document = json.loads(path.read_text())
    del document["agents"][0]["usage"]  # as a file written before usage was kept
    path.write_text(json.dumps(document))

    loaded = load_session(path, make_fragola(model))["old"]

    assert loaded.usage == Usage() and loaded.usage.cost == 0.0
    assert loaded.state.messages == agent.state.messages


async def test_a_session_with_broken_usage_is_refused(model: ScriptedModel, tmp_path: Any) -> None:
    from fragola_nb import SessionError, load_session, save_session

    model.push(reply("hello"))
    agent = make_fragola(model).agent("bot")
    await agent.user_message("hi")
    path = tmp_path / "s.json"
    save_session(path, agent)
    document = json.loads(path.read_text())
    document["agents"][0]["usage"] = [{"model": "m", "reported": False, "total_tokens": 3}]
    path.write_text(json.dumps(document))

    with pytest.raises(SessionError, match="agents/0/usage/0"):
        load_session(path, make_fragola(model))


async def test_exports_show_tokens_and_cost(model: ScriptedModel) -> None:
    from fragola_nb import export_html, export_markdown, export_tree_markdown

    model.push(reply("Priced answer."), reply("Fork answer."))
    fragola = make_fragola(model, model="house", prices={"house": {"input": 10, "output": 20}})
    agent = fragola.agent("bot")
    await agent.user_message("hi")
    fork = agent.fork("branch")
    await fork.user_message("and you?")

    line = agent.usage.summary()
    assert line.startswith(f"{agent.usage.total_tokens:,} tokens · $")
    assert line.replace("$", "\\$") in export_markdown(agent)
    assert line in export_html(agent)
    tree = export_tree_markdown(agent)
    assert fork.usage.summary().replace("$", "\\$") in tree
    assert fork.usage.summary() != line  # each branch its own calls

    unpriced = make_fragola(model, model="unpriced").agent("free")
    model.push(reply("Free?"))
    await unpriced.user_message("hi")
    assert f"step 1 of 5 · {unpriced.usage.total_tokens:,} tokens · 2 messages*" in (
        export_markdown(unpriced))
    assert "$" not in export_markdown(unpriced)


def test_usages_add_up_with_sum() -> None:
    one = Usage((CallUsage("a", 1, 2, 3),))
    two = Usage((CallUsage("b", 10, 20, 30), CallUsage("b", reported=False)))
    total = sum([one, two])
    assert isinstance(total, Usage)
    assert (counts(total), total.requests, total.unreported) == ((11, 22, 33), 3, 1)
    assert list(total.by_model) == ["a", "b"] and total.by_model["b"].requests == 2


LAZY = """
import asyncio, sys
{block}
from fragola_nb import Fragola
from support.helpers import make_fragola
from fragola_nb.models.scripted import ScriptedModel, reply

async def main():
    model = ScriptedModel([reply("one two three")]).start()
    agent = make_fragola(model, model="gpt-4o-mini").agent("bot")
    await agent.user_message("hi")
    model.stop()
    print(agent.usage.total_tokens > 0, sys.modules.get("genai_prices") is not None)
    print(agent.usage.cost is None, sys.modules.get("genai_prices") is not None)

asyncio.run(main())
"""


@pytest.mark.parametrize(("block", "expected"), [
    ("", ["True False", "False True"]),  # imported when the cost is asked, not before
    ("sys.modules['genai_prices'] = None", ["True False", "True False"]),  # not installed
])
def test_genai_prices_is_imported_only_for_a_cost(block: str, expected: list[str]) -> None:
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1]  # the script imports helpers from there
    done = subprocess.run([sys.executable, "-c", LAZY.format(block=block)], cwd=tests,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == expected


async def test_reset_keeps_the_usage(model: ScriptedModel) -> None:
    model.push(reply("spent"))
    agent = make_fragola(model).agent("bot")
    await agent.user_message("hi")
    spent = agent.usage

    agent.reset()

    assert agent.message_count == 0
    assert agent.usage == spent and agent.usage.requests == 1  # the tokens were spent


async def test_a_scripted_fragola_takes_prices() -> None:
    from fragola_nb import Fragola

    with pytest.raises(BadUsage, match="prices must be a dict"):
        Fragola.scripted(prices=[1])
    fragola = Fragola.scripted(model="lesson-model",
                               prices={"lesson-model": {"input": 1.0, "output": 1.0}})
    try:
        agent = fragola.agent("bot")
        await agent.user_message("What does this cost?")
        # offline: priced as the lesson says, paid by nobody (issue 33, item 9)
        assert agent.usage.unpaid == pytest.approx(agent.usage.total_tokens / 1e6)
        assert agent.usage.cost == 0.0 and agent.usage.offline_calls == 1
    finally:
        await fragola.aclose()
