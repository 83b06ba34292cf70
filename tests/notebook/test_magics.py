"""The magics in a real IPython ``InteractiveShell``, in-process (a terminal IPython: no kernel).

Agents talk to the scripted model of the ``model`` fixture (its traffic is schema-checked), so
each test can look at the exact requests a cell produced.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pydantic
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import ExecutionResult, InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output
from support.helpers import until

from fragola_nb import (
    BadUsage,
    Budget,
    Fragola,
    JsonModeError,
    JsonResult,
    ListenerError,
    ModelHTTPError,
    Tool,
    run_sync,
    tool,
)
from fragola_nb.core.agent import Agent
from fragola_nb.models.scripted import ScriptedModel, call, fail, hang, reply, tool_calls
from fragola_nb.notebook.panel.view import AgentPanel
from fragola_nb.notebook.tree.view import ForkTree


class City(pydantic.BaseModel):
    name: str
    population: int


class AddArgs(pydantic.BaseModel):
    a: int
    b: int


def add_tool(*, approval: bool = False) -> Tool:
    return tool(name="add", description="Add.", schema=AddArgs, handler=lambda p: p.a + p.b,
                require_approval=approval)


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.extension_manager.load_extension("fragola_nb")
    try:
        yield ip
    finally:
        ip.extension_manager.unload_extension("fragola_nb")
        ip.reset(new_session=False)


@pytest.fixture
def fragola(shell: InteractiveShell, model: ScriptedModel) -> Fragola:
    """``fragola`` in the notebook, on the scripted model."""
    instance = Fragola(model="base-model", api_key="test-key", base_url=model.base_url,
                       max_retries=0)
    shell.user_ns["fragola"] = instance
    return instance


def run(shell: InteractiveShell, cell: str) -> ExecutionResult:
    return shell.run_cell(cell, store_history=False)


def usage_error(shell: InteractiveShell, cell: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run a cell that must fail with a one-line UsageError; return that line."""
    result = run(shell, cell)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("UsageError: "), err
    return lines[0]


SHORT_500 = ["ModelHTTPError: the model API answered HTTP 500: the server is on fire",
             "(%tb shows the full traceback)"]
INTERRUPTED = ["TurnInterrupted: 'a' stopped by the interrupt; its history is kept valid",
               "(%tb shows the full traceback)"]


# -- loading --------------------------------------------------------------------------------


def test_loading_registers_the_magics_and_one_transformer_even_when_loaded_twice(
    shell: InteractiveShell,
) -> None:
    from fragola_nb.notebook import load_ipython_extension

    load_ipython_extension(shell)
    magics = shell.magics_manager.magics
    assert "fragola" in magics["cell"]
    assert {"fragola_panel", "fragola_tree", "fragola_agents", "fragola_reset"} <= set(
        magics["line"]
    )
    ours = [t for t in shell.input_transformers_cleanup
            if getattr(t, "__self__", None) is shell._fragola_nb]
    assert len(ours) == 1


def test_unloading_removes_everything_and_detaches_live_panels(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel
) -> None:
    shell._fragola_nb.widgets = True  # as in a kernel: live panels
    model.push(reply("hi"))
    run(shell, "%%fragola\nhello")
    run(shell, "%fragola_panel agent")
    panels = [v for v in shell._fragola_nb.views if isinstance(v, AgentPanel)]
    assert len(panels) == 2 and not any(p.detached for p in panels)
    shell.extension_manager.unload_extension("fragola_nb")
    assert all(p.detached for p in panels)  # detached: controls off
    assert "fragola" not in shell.magics_manager.magics["cell"]
    assert not hasattr(shell, "_fragola_nb")
    assert shell.transform_cell("%%fragola\nhi").startswith("get_ipython().run_cell_magic")
    assert isinstance(run(shell, "%%fragola\nhi").error_in_exec, UsageError)  # not found
    shell.extension_manager.load_extension("fragola_nb")  # for the fixture's unload


# -- the default agent ----------------------------------------------------------------------


def test_a_default_agent_runs_offline_and_says_so(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = run(shell, "%%fragola\nHello there")
    assert result.success
    out, err = capsys.readouterr()
    assert "no OPENAI_API_KEY set, running offline on the scripted demo model" in err
    assert "made a default agent 'assistant', bound to `agent`, offline" in out
    assert "[user] Hello there" in out
    assert "[assistant] (scripted model) You said: Hello there" in out
    agent = shell.user_ns["agent"]
    assert isinstance(agent, Agent) and agent.name == "assistant" and agent.fragola.offline
    run(shell, "%%fragola\nAgain")
    out, err = capsys.readouterr()
    assert "default agent" not in out and not err
    assert shell.user_ns["agent"] is agent and agent.message_count == 4
    agent.fragola.scripted_model.stop()


def test_the_default_agent_uses_fragola_from_the_notebook(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model.push(reply("Hi!"))
    run(shell, "%%fragola\nHello")
    assert "made a default agent 'assistant', bound to `agent`, model base-model" in (
        capsys.readouterr().out
    )
    assert shell.user_ns["agent"].fragola is fragola
    assert model.requests[0]["model"] == "base-model"


def test_an_agent_named_on_the_line_gets_the_message(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
) -> None:
    writer = fragola.agent(name="writer")
    shell.user_ns["team"] = type("Team", (), {"writer": writer})()
    model.push(reply("one"), reply("two"))
    run(shell, "%%fragola team.writer\nFirst")
    shell.user_ns["writer"] = writer
    run(shell, "%%fragola writer\nSecond")
    assert [m["content"] for m in writer.state.messages] == ["First", "one", "Second", "two"]
    assert "agent" not in shell.user_ns


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("%%fragola nobody\nhi", "agent: 'nobody' is not defined in the notebook"),
        ("%%fragola text\nhi", "text is a str, not an Agent"),
        ("%%fragola 3d\nhi", "AGENT must be a variable name"),
        ("%%fragola --by many\nhi", "--by takes a whole number >= 0, not 'many'"),
        ("%%fragola --by -1\nhi", "--by takes a whole number >= 0, not '-1'"),
        ("%%fragola --temperature hot\nhi", "--temperature takes a number, not 'hot'"),
        ("%%fragola --fork 1st\nhi", "--fork takes a variable name, not '1st'"),
        ("%%fragola --out a.b\nhi", "--out takes a variable name, not 'a.b'"),
        ("%%fragola --json Missing\nhi", "--json: 'Missing' is not defined in the notebook"),
        ("%%fragola --json text\nhi", "--json: the schema string is not valid JSON"),
        ("%%fragola --json number\nhi", "--json takes a pydantic model class or a JSON Schema, "
         "not int"),
        ("%%fragola --json City --by 2\nhi", "--by does not apply with --json"),
        ("%%fragola --bogus\nhi", "unrecognized arguments: --bogus (usage: %%fragola [AGENT]"),
        ("%%fragola --model\nhi", "argument --model: expected one argument"),
        ("%%fragola 'open\nhi", "cannot read the %%fragola line: No closing quotation"),
        ("%%fragola\n   \n", "the cell is empty"),
        ("%%fragola\nTell me about {nothing}", "{nothing}: 'nothing' is not defined"),
        ("%%fragola\nTell me about {text.missing}", "{text.missing}: text.missing: "
         "AttributeError"),
    ],
)
def test_mistakes_are_one_line_usage_errors_and_send_nothing(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str], cell: str, message: str,
) -> None:
    shell.user_ns.update(agent=fragola.agent(name="a"), text="words", number=3, City=City)
    capsys.readouterr()
    assert message in usage_error(shell, cell, capsys)
    assert model.requests == [] and shell.user_ns["agent"].message_count == 0


def test_a_variable_called_agent_that_is_no_agent_is_not_overwritten(
    shell: InteractiveShell, fragola: Fragola, capsys: pytest.CaptureFixture[str],
) -> None:
    shell.user_ns["agent"] = "007"
    assert "`agent` is a str, not an Agent" in usage_error(shell, "%%fragola\nhi", capsys)
    assert shell.user_ns["agent"] == "007"


# -- options ----------------------------------------------------------------------------------


def test_interpolation_from_the_namespace_leaves_other_braces_alone(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
) -> None:
    shell.user_ns.update(agent=fragola.agent(name="a"), city="Paris",
                         trip=type("Trip", (), {"days": 3})())
    model.push(reply("ok"))
    run(shell, '%%fragola\n{trip.days} days in {city}; literal {{city}}; '
               'JSON {"a": {"b": 1}} and {not a name}')
    assert model.requests[0]["messages"][-1]["content"] == (
        '3 days in Paris; literal {city}; JSON {"a": {"b": 1}} and {not a name}'
    )


def test_options_on_the_line_are_interpolated_too(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
) -> None:
    shell.user_ns.update(agent=fragola.agent(name="a"), chosen="gpt-special")
    model.push(reply("ok"))
    run(shell, "%%fragola --model {chosen}\nhi")
    assert model.requests[0]["model"] == "gpt-special"


def test_model_and_temperature_apply_to_one_turn_only(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
) -> None:
    agent = shell.user_ns["agent"] = fragola.agent(name="a", model_settings={"temperature": 1})
    model.push(reply("one"), reply("two"))
    run(shell, "%%fragola --model gpt-other --temperature 0.25\nfirst")
    run(shell, "%%fragola\nsecond")
    first, second = model.requests
    assert (first["model"], first["temperature"]) == ("gpt-other", 0.25)
    assert (second["model"], second["temperature"]) == ("base-model", 1)
    assert agent.options.model_settings == {"temperature": 1}


def test_the_magic_streams_unless_told_not_to(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
) -> None:
    agent = shell.user_ns["agent"] = fragola.agent(name="a", model_settings={"stream": True})
    model.push(reply("streamed"), reply("whole"))
    run(shell, "%%fragola\nfirst")
    run(shell, "%%fragola --no-stream\nsecond")
    assert model.requests[0]["stream"] is True
    assert "stream" not in model.requests[1]
    assert [m["content"] for m in agent.state.messages] == ["first", "streamed", "second",
                                                             "whole"]
    assert agent.options.model_settings == {"stream": True}


def test_by_caps_the_model_calls_of_the_turn(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = shell.user_ns["agent"] = fragola.agent(name="a", tools=[add_tool()])
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("never asked"))
    assert run(shell, "%%fragola --by 1 --out st\nadd").success  # the budget is no error
    assert len(model.requests) == 1
    assert agent.state.outcome == "step_limit" and agent.state.messages[-1]["content"] == "3"
    assert "'a' used its step budget" in capsys.readouterr().out
    assert shell.user_ns["st"] == agent.state


def test_a_turn_ended_by_a_budget_ends_the_cell_with_one_line(
    shell: InteractiveShell, model: ScriptedModel, capsys: pytest.CaptureFixture[str],
) -> None:
    limited = Fragola(model="base-model", api_key="test-key", base_url=model.base_url,
                      max_retries=0, budget=Budget(tokens=1))
    agent = shell.user_ns["agent"] = limited.agent(name="a", tools=[add_tool()])
    model.push(tool_calls(call("add", {"a": 1, "b": 2})), reply("never asked"))
    assert run(shell, "%%fragola\nadd").success  # a budget spent is no error
    assert len(model.requests) == 1 and agent.state.outcome == "budget"
    lines = [line for line in capsys.readouterr().out.splitlines() if "fragola_nb:" in line]
    assert lines == [f"fragola_nb: 'a' stopped before its next model call: {agent.state.spent}"]


def test_the_panel_strip_says_when_a_throttled_request_is_retried(
    shell: InteractiveShell, model: ScriptedModel,
) -> None:
    patient = Fragola(model="base-model", api_key="test-key", base_url=model.base_url,
                      max_retries=1)
    agent = patient.agent(name="a")
    panel = AgentPanel(agent)
    strips: list[dict[str, Any]] = []
    panel.observe(lambda change: strips.append(change["new"]), names="strip")
    model.push(fail(429, "slow down", headers={"Retry-After": "1"}), reply("ok"))
    asyncio.run(agent.user_message("hi"))
    throttled = [s for s in strips if s.get("kind") == "throttled"]
    assert [s["text"] for s in throttled] == ["throttled, retrying in 1 s"]
    assert panel.strip["kind"] == "finished"


def test_fork_sends_to_a_new_fork_bound_to_the_name(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
) -> None:
    agent = shell.user_ns["agent"] = fragola.agent(name="a")
    model.push(reply("base"), reply("branch reply"))
    run(shell, "%%fragola\nbase question")
    run(shell, "%%fragola --fork idea --out st\nwhat if?")
    idea = shell.user_ns["idea"]
    assert isinstance(idea, Agent) and idea.name == "idea" and idea.fork_of == agent.id
    assert agent.message_count == 2
    assert [m["content"] for m in idea.state.messages] == ["base question", "base", "what if?",
                                                            "branch reply"]
    assert shell.user_ns["st"] == idea.state


def test_json_with_a_pydantic_model_shows_and_binds_the_result(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shell.user_ns.update(agent=fragola.agent(name="a"), City=City)
    model.push(reply('{"name": "Lyon", "population": 522000}'))
    run(shell, "%%fragola --json City --out result\nA French city")
    result = shell.user_ns["result"]
    assert isinstance(result, JsonResult) and result.success
    assert result.data == City(name="Lyon", population=522000)
    assert "City(name='Lyon', population=522000)" in capsys.readouterr().out
    assert model.requests[0]["response_format"]["json_schema"]["name"] == "City"


def test_json_mode_asks_this_turn_the_chosen_way(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
) -> None:
    shell.user_ns.update(agent=fragola.agent(name="a"), City=City)
    model.push(tool_calls(call("City", {"name": "Lyon", "population": 522000})))
    run(shell, "%%fragola --json City --json-mode tool --out result\nA French city")
    result = shell.user_ns["result"]
    assert result.success and result.json_mode == "tool"
    assert result.data == City(name="Lyon", population=522000)
    (request,) = model.requests
    assert request["tool_choice"] == {"type": "function", "function": {"name": "City"}}
    assert "response_format" not in request
    assert fragola.json_mode == "auto"  # the Fragola's own is unchanged


def test_json_with_a_json_schema_and_a_reply_that_does_not_match(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    shell.user_ns.update(agent=fragola.agent(name="a"), schema=schema)
    model.push(reply('{"n": "many"}'))
    result = run(shell, "%%fragola --json schema --out r\ncount")
    assert result.success
    assert "the reply does not match the schema: n: 'many' is not of type 'integer'" in (
        capsys.readouterr().err
    )
    assert shell.user_ns["r"].success is False


def test_an_api_error_fails_the_cell_in_one_line_and_the_agent_stays_usable(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = shell.user_ns["agent"] = fragola.agent(name="a")
    model.push(fail(500, "the server is on fire"), reply("better now"))
    result = run(shell, "%%fragola --out st\nhello")
    # the cell fails (a queue of cells stops here), shown in one line, not a traceback
    assert isinstance(result.error_in_exec, ModelHTTPError) and "st" not in shell.user_ns
    out, err = capsys.readouterr()
    assert out.splitlines()[-2:] == SHORT_500 and "Traceback" not in out + err
    assert isinstance(result.error_in_exec.__cause__, openai.InternalServerError)
    assert agent.status == "idle" and agent.state.messages == [
        {"role": "user", "content": "hello"}
    ]
    run(shell, "%tb")  # asked for, the whole chain, down to the openai error
    full = capsys.readouterr().out
    assert "InternalServerError" in full and "Traceback" in full and "loop.py" in full
    assert run(shell, "%%fragola\nagain").success
    assert agent.state.messages[-1]["content"] == "better now"


def test_a_fragola_error_in_a_code_cell_is_one_line_and_tb_shows_the_chain(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shell.user_ns["agent"] = fragola.agent(name="a")
    shell.user_ns["run_sync"] = run_sync
    model.push(fail(500, "the server is on fire"))
    result = run(shell, "x = 1\nrun_sync(agent.user_message('hello'))")
    assert isinstance(result.error_in_exec, ModelHTTPError)
    assert capsys.readouterr().out.splitlines() == SHORT_500
    run(shell, "%tb")
    assert "InternalServerError" in capsys.readouterr().out
    result = run(shell, "agent.approve('call_nope')")  # misuse: one line too
    assert isinstance(result.error_in_exec, BadUsage)
    [line, hint] = capsys.readouterr().out.splitlines()
    assert line.startswith("BadUsage: ") and hint == "(%tb shows the full traceback)"
    # an exception of the user's own that wraps ours keeps IPython's full traceback
    result = run(shell, "try:\n    agent.approve('call_nope')\n"
                        "except Exception as exc:\n    raise RuntimeError('mine') from exc")
    assert isinstance(result.error_in_exec, RuntimeError)
    assert "Traceback" in capsys.readouterr().out


def test_json_mode_errors_fail_the_cell_and_a_reply_off_the_schema_does_not(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shell.user_ns.update(agent=fragola.agent(name="a"), City=City)
    model.push(reply("no JSON here, sorry"))
    result = run(shell, "%%fragola --json City --out r\nA city")
    assert isinstance(result.error_in_exec, JsonModeError) and "r" not in shell.user_ns
    line, hint = capsys.readouterr().out.splitlines()[-2:]
    assert line.startswith("JsonModeError: ") and hint == "(%tb shows the full traceback)"
    model.push(reply('{"name": "Lyon", "population": "many"}'))
    assert run(shell, "%%fragola --json City --out r\nA city").success  # a reply arrived
    assert shell.user_ns["r"].success is False


def test_a_paused_turn_lists_the_calls_and_keeps_its_settings_until_it_ends(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = shell.user_ns["agent"] = fragola.agent(name="a", tools=[add_tool(approval=True)])
    model.push(tool_calls(call("add", {"a": 2, "b": 3}, id="call_9")), reply("5"),
               reply("next"))
    assert run(shell, "%%fragola --model gpt-careful\nadd 2 and 3").success  # not an error
    out = capsys.readouterr().out
    assert "'a' is waiting on 1 tool call(s): decide each with agent.approve(id)" in out
    assert "call_9: add({'a': 2, 'b': 3}) [approval]" in out
    agent.approve("call_9")
    state = run_sync(agent.step())
    assert state.outcome == "finished" and state.messages[-1]["content"] == "5"
    run(shell, "%%fragola\nnext one")
    assert [r["model"] for r in model.requests] == ["gpt-careful", "gpt-careful", "base-model"]


def test_a_busy_agent_is_a_usage_error(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shell.user_ns["agent"] = fragola.agent(name="a", tools=[add_tool(approval=True)])
    model.push(tool_calls(call("add", {"a": 2, "b": 3})))
    run(shell, "%%fragola\nadd")
    capsys.readouterr()
    line = usage_error(shell, "%%fragola\nmore", capsys)
    assert "agent 'a' is waiting: decide its pending calls or stop it first" in line


def test_ctrl_c_stops_the_turn_and_fails_the_cell_in_one_line(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = shell.user_ns["agent"] = fragola.agent(name="a")
    model.push(hang(), reply("after the interrupt"))

    def interrupt() -> None:
        assert model.wait_for_requests(1, timeout=10)
        os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C in a terminal IPython sends

    threading.Thread(target=interrupt, daemon=True).start()
    result = run(shell, "%%fragola\nwait for it")
    # the cell ends as interrupted (Run All stops there), in one line
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    out, err = capsys.readouterr()
    assert out.splitlines()[-2:] == INTERRUPTED and "Traceback" not in out + err
    assert agent.status == "idle" and agent.state.outcome == "stopped"
    assert agent.state.messages == [{"role": "user", "content": "wait for it"}]
    run(shell, "%tb")  # asked for, the traceback of the interrupt
    assert "Traceback" in capsys.readouterr().out
    assert run(shell, "%%fragola\nagain").success
    assert agent.state.messages[-1]["content"] == "after the interrupt"


def test_the_lines_a_cell_prints_cannot_disguise_themselves(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A listener's error quoting a file name with a right-to-left override, and a model's
    # arguments with one, as the cell prints them: written out, never reordered.
    agent = shell.user_ns["agent"] = fragola.agent(name="a\u202eb")

    def refuse(event: Any) -> None:
        raise ValueError("will not open file\u202egnp.exe pay\u200bpal")

    unsubscribe = agent.on_before_model_invocation(refuse)
    result = run(shell, "%%fragola\nopen it")
    assert isinstance(result.error_in_exec, ListenerError)
    out, err = capsys.readouterr()
    assert "file\\u202egnp.exe pay\\u200bpal" in out.splitlines()[-2]
    unsubscribe()
    guarded = tool(name="open_file", description="", handler=lambda path: path,
                   schema={"type": "object", "properties": {"path": {"type": "string"}}},
                   require_approval=True)
    agent.options.tools = [guarded]
    model.push(tool_calls(call("open_file", {"path": "file\u202egnp.exe"}, id="c1")))
    assert run(shell, "%%fragola\nopen it").success
    out, err = capsys.readouterr()
    assert "'a\\u202eb' is waiting on 1 tool call" in out
    assert "file\\u202egnp.exe" in out
    for text in (out, err):
        assert "\u202e" not in text and "\u200b" not in text
    agent.stop()
    agent.fork("fork\u202egnp")
    for line in ("%fragola_agents", "%fragola_tree agent", "agent"):
        run(shell, line)
        out = capsys.readouterr().out
        assert "\\u202e" in out and "\u202e" not in out, line


# -- the transformer path, in-process ---------------------------------------------------------


def test_with_a_running_loop_the_cell_becomes_an_await_on_that_loop(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = shell.user_ns["agent"] = fragola.agent(name="a")
    seen: list[Any] = []
    agent.on_before_step(lambda event: seen.append(asyncio.get_running_loop()))
    assert "run_cell_magic" in shell.transform_cell("%%fragola\nhi")  # no loop runs here
    model.push(reply("on the loop"))
    raw = "%%fragola --out st\nhi"

    async def as_ipykernel_does() -> tuple[Any, ExecutionResult]:
        transformed = shell.transform_cell(raw)
        assert transformed.startswith("await get_ipython()._fragola_nb.run_cell(")
        assert shell.should_run_async(raw, transformed_cell=transformed)
        result = await shell.run_cell_async(raw, transformed_cell=transformed)
        return asyncio.get_running_loop(), result

    loop, result = asyncio.run(as_ipykernel_does())
    assert result.success and seen == [loop]
    assert shell.user_ns["st"].messages[-1]["content"] == "on the loop"
    assert "[assistant] on the loop" in capsys.readouterr().out
    # the console's "is this cell complete?" still sees a cell magic, complete at a blank line
    assert shell.check_complete("%%fragola\nhi\n")[0] == "incomplete"


def test_on_the_await_path_errors_and_interrupts_fail_the_cell_in_one_line(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = shell.user_ns["agent"] = fragola.agent(name="a")
    model.push(fail(500, "the server is on fire"), hang())

    async def cell(raw: str, interrupt: bool = False) -> ExecutionResult:
        transformed = shell.transform_cell(raw)
        assert transformed.startswith("await get_ipython()._fragola_nb.run_cell(")
        task = asyncio.ensure_future(shell.run_cell_async(raw, transformed_cell=transformed))
        if interrupt:  # as ipykernel does on an interrupt: cancel the cell's task
            await asyncio.to_thread(model.wait_for_requests, 2, 10)
            task.cancel()
        return await task

    result = asyncio.run(cell("%%fragola\nhello"))
    assert isinstance(result.error_in_exec, ModelHTTPError)
    out, err = capsys.readouterr()
    assert out.splitlines()[-2:] == SHORT_500 and "Traceback" not in out + err
    result = asyncio.run(cell("%%fragola\nwait for it", interrupt=True))
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    out, err = capsys.readouterr()
    assert out.splitlines()[-2:] == INTERRUPTED and "Traceback" not in out + err
    assert agent.status == "idle" and agent.state.outcome == "stopped"
    assert [m["content"] for m in agent.state.messages] == ["hello", "wait for it"]


def test_the_transformer_leaves_alone_what_it_cannot_await(shell: InteractiveShell) -> None:
    async def check() -> None:
        def transformed(cell: str) -> str:
            return shell.transform_cell(cell)

        assert transformed("\n%%fragola  --by 2\nhi").startswith(
            "await get_ipython()._fragola_nb.run_cell('--by 2', 'hi\\n')"
        )
        assert "run_cell_magic('fragolas'" in transformed("%%fragolas\nhi")
        assert "await" not in transformed("%%fragola?")
        shell.autoawait = False
        try:
            assert "run_cell_magic('fragola'" in transformed("%%fragola\nhi")
        finally:
            shell.autoawait = True
        with shell.display_trap:  # inside a running cell: shell.run_cell from user code
            assert "run_cell_magic('fragola'" in transformed("%%fragola\nhi")

    asyncio.run(check())


# -- outside a notebook: what a terminal shows -----------------------------------------------


def test_a_terminal_shows_the_turn_as_a_transcript(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = shell.user_ns["agent"] = fragola.agent(name="calc", tools=[add_tool()])
    model.push(reply("earlier"), tool_calls(call("add", {"a": 2, "b": 3}, id="c1")),
               reply("It is 5."))
    run(shell, "%%fragola\nwarm up")
    capsys.readouterr()
    run(shell, "%%fragola\nadd 2 and 3")
    out = capsys.readouterr().out
    # The turn's two calls, as the server counted them (the warm-up's call is not the turn's).
    sent = [c["usage"]["total_tokens"] for c in model.chunks if c.get("usage")]
    assert len(sent) == 3
    assert out == (
        f"── calc (idle, id {agent.id} · step 2/5 · outcome finished · "
        f"this turn: {sent[1] + sent[2]:,} tokens) ──\n"
        "#2 [user] add 2 and 3\n"  # numbered as agent.state.messages[2]
        '#3 [assistant calls add] {"a": 2, "b": 3}\n'
        "#4 [tool add] 5\n"
        "#5 [assistant] It is 5.\n"
    )


def test_line_magics_in_a_terminal(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent = shell.user_ns["agent"] = fragola.agent(name="main")
    model.push(reply("hello back"))
    run(shell, "%%fragola\nhello")
    branch = shell.user_ns["branch"] = agent.fork("branch")
    shell.user_ns["_hidden"] = agent
    capsys.readouterr()
    run(shell, "%fragola_agents")
    assert capsys.readouterr().out.splitlines() == [
        "variable  name    id        status  messages  fork_of",
        f"agent     main    {agent.id}  idle    2",
        f"branch    branch  {branch.id}  idle    2         {agent.id}",
    ]
    run(shell, "%fragola_tree branch")
    assert capsys.readouterr().out.splitlines() == [
        f"  main [{agent.id}] idle, 2 messages",
        f"*   └ branch [{branch.id}] idle, 2 messages, +0 since fork",
    ]
    run(shell, "%fragola_panel")
    assert "[assistant] hello back" in capsys.readouterr().out
    run(shell, "%fragola_reset agent")
    assert "fragola_nb: 'main' reset" in capsys.readouterr().out
    assert agent.message_count == 0 and branch.message_count == 2
    assert "'ghost' is not defined" in usage_error(shell, "%fragola_tree ghost", capsys)
    del shell.user_ns["agent"]
    assert "name the agent" in usage_error(shell, "%fragola_panel", capsys)
    run(shell, "%fragola_agents")
    assert "branch" in capsys.readouterr().out



@pytest.mark.parametrize(("line", "message"), [
    ("--port eighty", "argument --port: invalid int value: 'eighty'"),
    ("--json-mode yaml", "argument --json-mode: invalid choice: 'yaml'"),
    ("--out 1st", "--out must be a variable name, not '1st'"),
    ("model.gguf other.gguf", "unrecognized arguments: other.gguf"),
    ("'model.gguf", "%fragola_local: No closing quotation"),
])
def test_fragola_local_mistakes_are_one_line_usage_errors_and_start_nothing(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], line: str, message: str,
) -> None:
    # (the magic starting a server: tests/models/test_local.py, on a stand-in llama.cpp server)
    error = usage_error(shell, f"%fragola_local {line}", capsys)

    assert message in error and "usage: %fragola_local [MODEL_FILE]" in error
    assert "agent" not in shell.user_ns

# -- live panels (what a kernel gets), in-process --------------------------------------------


def test_each_turn_gets_a_live_panel_and_older_ones_are_detached(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ext = shell._fragola_nb
    ext.widgets = True
    agent = shell.user_ns["agent"] = fragola.agent(name="a")
    model.push(reply("one"), reply("two"))
    run(shell, "%%fragola\nfirst")
    [first] = ext.views
    run(shell, "%%fragola\nsecond")
    [second] = ext.views
    assert (first.since, second.since) == (0, 2)
    assert first.detached == "a newer panel follows this agent"
    assert second.detached == ""
    out = capsys.readouterr().out
    assert "fragola_nb turn panel of 'a'" in out and "[assistant]" not in out
    run(shell, "%fragola_tree")
    assert isinstance(ext.views[-1], ForkTree)
    run(shell, "%fragola_reset")
    assert agent.message_count == 0
    # the turn panel keeps its turn: the reset does not empty what it shows
    assert second.detached.startswith("the agent's history was reset")
    assert [row["i"] for row in second.rows] == [2, 3] and "two" in second.html()
    assert ext.views == [ext.views[-1]]  # only the tree is still live


def notes(captured: CapturedIO) -> list[tuple[bool, str]]:
    """The plain-text-only displays of a cell: (is an update, the text), in order."""
    return [(o.update, o.data["text/plain"]) for o in captured.outputs
            if list(o.data) == ["text/plain"] and o.transient.get("display_id")]


def test_the_waiting_line_of_a_turn_with_a_panel_follows_the_decisions(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
) -> None:
    shell._fragola_nb.widgets = True
    agent = shell.user_ns["agent"] = fragola.agent(name="a", tools=[add_tool(approval=True)])
    model.push(tool_calls(call("add", {"a": 1, "b": 2}, id="call_1")),
               tool_calls(call("add", {"a": 3, "b": 4}, id="call_2"),
                          call("add", {"a": 5, "b": 6}, id="call_3")),
               reply("done"),
               tool_calls(call("add", {"a": 7, "b": 8}, id="call_4")))
    with capture_output() as captured:
        run(shell, "%%fragola\nadd")
        assert captured.stdout == ""  # a display that can be updated, not printed text
        panel = shell._fragola_nb.views[-1]
        panel.do("approve", id="call_1")
        until(lambda: len(notes(captured)) == 2)  # it paused again
        for call_id in ("call_2", "call_3"):
            panel.do("approve", id=call_id)
        until(lambda: len(notes(captured)) == 3)
        run(shell, "%%fragola\nonce more")
        shell._fragola_nb.views[-1].do("stop")  # stopped while waiting
        until(lambda: len(notes(captured)) == 5)
    assert agent.status == "idle"
    assert agent.state.messages[-1]["content"].startswith("Cancelled: this tool call did not")
    assert notes(captured) == [
        (False, "fragola_nb: 'a' is waiting on 1 tool call(s): use the controls above"),
        (True, "fragola_nb: 'a' went on after the decisions and waits again, on 2 tool "
               "call(s): use the controls above"),
        (True, "fragola_nb: 'a' went on after the decisions: finished"),
        (False, "fragola_nb: 'a' is waiting on 1 tool call(s): use the controls above"),
        (True, "fragola_nb: 'a' was stopped: no longer waiting"),
    ]
    ids = [o.transient["display_id"] for o in captured.outputs if list(o.data) == ["text/plain"]]
    assert ids[0] == ids[1] == ids[2] != ids[3] == ids[4]  # each cell updates its own line


def test_a_turn_panel_names_the_model_the_turn_really_uses(
    shell: InteractiveShell, fragola: Fragola, model: ScriptedModel,
) -> None:
    """The header and the strip name the ``--model`` override (approvals included), not the
    agent's model; a run started later from the panel names the agent's model again."""
    ext = shell._fragola_nb
    ext.widgets = True
    agent = shell.user_ns["agent"] = fragola.agent(name="a", tools=[add_tool(approval=True)])
    model.push(tool_calls(call("add", {"a": 1, "b": 2}, id="call_1")), reply("3"),
               reply("plain"))
    run(shell, "%%fragola --model gpt-other\nadd")
    panel = ext.views[-1]
    assert panel.head["model"] == "gpt-other" and agent.model != "gpt-other"
    panel.do("approve", id="call_1")
    until(lambda: agent.status == "idle")
    assert [r["model"] for r in model.requests] == ["gpt-other", "gpt-other"]
    assert panel.head["model"] == "gpt-other"
    panel.do("send", text="again")
    until(lambda: agent.status == "idle" and agent.message_count == 6)
    assert model.requests[-1]["model"] == agent.model == panel.head["model"]
