"""``%%fragola`` in a real kernel: the cell runs as a coroutine on the kernel's loop, widget
clicks get through during and after it, an interrupt stops it gracefully, and a notebook of
``%%fragola`` cells runs top to bottom headless.

The scripted model runs in the test process (the ``model`` fixture, schema-checked), so a test
can wait for a request to arrive while the kernel is busy with the cell that sent it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from support.helpers import until
from support.kernel_harness import CONFIG, Kernel, startup_profile

from fragola_nb.models.scripted import (
    ScriptedModel,
    call,
    demo_brain,
    fail,
    hang,
    reply,
    tool_calls,
)

WIDGET = "application/vnd.jupyter.widget-view+json"
SECRET = "sk-test-SECRET-123"
SHORT_503 = ["ModelHTTPError: the model API answered HTTP 503: overloaded, try later",
             "(%tb shows the full traceback)"]

SETUP = """
import asyncio, threading
from fragola_nb import Fragola, tool

@tool(require_approval=True)
def add(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b

def where(event):
    # the thread and loop each model call of a turn is made from
    seen.append([threading.current_thread().name,
                 asyncio.get_running_loop() is get_ipython().kernel.io_loop.asyncio_loop])
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """A kernel that loads fragola_nb through the opt-in startup file: no %load_ext."""
    with Kernel(env=startup_profile(tmp_path_factory.mktemp("ipython"))) as running:
        running.execute(SETUP)
        yield running


def new_agent(kernel: Kernel, model: ScriptedModel, name: str, **options: str) -> None:
    """``name`` in the kernel: an agent on this test's scripted model."""
    extra = "".join(f", {key}={value}" for key, value in options.items())
    kernel.execute(
        f"fragola = Fragola(api_key='k', base_url={model.base_url!r}, max_retries=0)\n"
        f"{name} = fragola.agent(name={name!r}{extra})\nseen = []\n{name}.on_before_step(where)"
    )


def panel_state(kernel: Kernel) -> dict[str, Any]:
    """The newest panel's synced traits, as the browser has them now ({} if none yet)."""
    kernel.drain(0.1)
    try:
        return kernel.widgets[kernel.panel()]
    except LookupError:
        return {}


def updates(kernel: Kernel, display_id: str, mime: str = "text/html") -> list[str]:
    """The ``mime`` form of each update of one display, in order."""
    kernel.drain()
    return [m["content"]["data"][mime] for m in kernel.iopub_log
            if m["msg_type"] == "update_display_data"
            and m["content"]["transient"]["display_id"] == display_id]


def test_a_cell_runs_on_the_kernel_loop_and_leaves_a_static_copy(
    kernel: Kernel, model: ScriptedModel
) -> None:
    assert kernel.eval("'fragola' in get_ipython().magics_manager.magics['cell']")
    new_agent(kernel, model, "helper")
    model.push(reply("Hello from the model"))
    result = kernel.execute("%%fragola helper --out st\nHi <b>there</b>")
    assert kernel.eval("seen") == [["MainThread", True]]  # the transformer path, not run_sync
    assert kernel.eval("st.messages[-1]['content']") == "Hello from the model"
    shown, copy, *rest = result.outputs
    # Two outputs: the live view (its text form beside it), and its static copy, which a
    # saved notebook shows wherever the widget cannot draw (nbconvert, no kernel, GitHub).
    assert WIDGET in shown["data"] and "text/html" not in shown["data"]
    assert list(copy["data"]) == ["text/html"] and 'class="fragola-static-copy"' in \
        copy["data"]["text/html"]
    assert shown["transient"]["display_id"] != copy["transient"]["display_id"]
    # both updated in place at the end of the turn: the copy shows the turn as it ended
    final = [o for o in rest if o["transient"] == copy["transient"]][-1]
    assert "Hello from the model" in final["data"]["text/html"]
    assert "Hi &lt;b&gt;there&lt;/b&gt;" in final["data"]["text/html"]
    assert "<b>there" not in final["data"]["text/html"]
    assert any(o["transient"] == shown["transient"] and WIDGET in o["data"] for o in rest)
    assert result.stdout == result.stderr == ""


def test_a_paused_turn_ends_the_cell_and_a_click_resumes_it_in_place(
    kernel: Kernel, model: ScriptedModel
) -> None:
    new_agent(kernel, model, "calc", tools="[add]")
    model.push(tool_calls(call("add", {"a": 2, "b": 3})), reply("It is 5."))
    result = kernel.execute("%%fragola calc --model gpt-careful\nAdd 2 and 3")
    assert kernel.eval("calc.status") == "waiting"
    display_id = result.outputs[0]["transient"]["display_id"]
    copy_id = result.outputs[1]["transient"]["display_id"]  # the panel's static copy
    # the waiting line: plain text (what nbconvert and GitHub show), a display of its own
    # that the kernel updates once the run goes on, not printed text that would stay
    note = result.outputs[-1]
    assert note["data"] == {
        "text/plain": "fragola_nb: 'calc' is waiting on 1 tool call(s): use the controls above"
    }
    assert result.stdout == "" and note["transient"]["display_id"] != display_id
    call_id = kernel.eval("calc.pending[0].id")
    kernel.act("approve", id=call_id)  # while the kernel is idle, as after a real cell
    kernel.wait_for("calc.status == 'idle'")
    assert kernel.eval("[m['content'] for m in calc.state.messages[-2:]]") == ["5", "It is 5."]
    assert [r["model"] for r in model.requests] == ["gpt-careful", "gpt-careful"]
    until(lambda: any("It is 5." in html for html in updates(kernel, copy_id)))
    assert updates(kernel, note["transient"]["display_id"], "text/plain") == [
        "fragola_nb: 'calc' went on after the decisions: finished"
    ]


def test_stop_clicked_while_the_cell_runs_gets_through(
    kernel: Kernel, model: ScriptedModel
) -> None:
    new_agent(kernel, model, "slow")
    model.push(hang())
    msg_id = kernel.start("%%fragola slow\nTake your time")
    assert model.wait_for_requests(1, timeout=20)
    until(lambda: panel_state(kernel).get("head", {}).get("status") == "generating")
    kernel.act("stop")
    result = kernel.collect(msg_id, timeout=30, allow_error=True)
    assert result.error is None and "Traceback" not in result.stderr
    assert kernel.eval("[slow.status, slow.state.outcome, slow.state.messages]") == [
        "idle", "stopped", [{"role": "user", "content": "Take your time"}]
    ]


def test_interrupting_the_kernel_stops_the_turn_and_fails_the_cell_in_one_line(
    kernel: Kernel, model: ScriptedModel
) -> None:
    new_agent(kernel, model, "sleepy")
    model.push(hang(), reply("awake"))
    msg_id = kernel.start("%%fragola sleepy\nWait for me")
    assert model.wait_for_requests(1, timeout=20)
    kernel.km.interrupt_kernel()
    result = kernel.collect(msg_id, timeout=30, allow_error=True)
    assert kernel.reply(msg_id)["status"] == "error"  # Run All stops here
    assert result.error is not None and result.error["ename"] == "TurnInterrupted"
    assert result.error["traceback"] == [
        "TurnInterrupted: 'sleepy' stopped by the interrupt; its history is kept valid",
        "(%tb shows the full traceback)",
    ]
    assert "Traceback" not in result.stdout + result.stderr
    copies = [o for o in result.outputs if "text/html" in o["data"]]
    assert "stopped" in copies[-1]["data"]["text/html"]  # the static copy's final form
    assert kernel.eval("[sleepy.status, sleepy.state.outcome, sleepy.state.messages]") == [
        "idle", "stopped", [{"role": "user", "content": "Wait for me"}]
    ]
    kernel.execute("%%fragola sleepy\nStill there?")
    assert kernel.eval("sleepy.state.messages[-1]['content']") == "awake"


def test_mistakes_and_api_errors_fail_the_cell_in_one_line(
    kernel: Kernel, model: ScriptedModel
) -> None:
    new_agent(kernel, model, "fragile")
    msg_id = kernel.start("%%fragola fragile --by lots\nhi")
    bad = kernel.collect(msg_id, allow_error=True)
    assert bad.stderr.startswith("UsageError: argument --by: --by takes a whole number")
    assert len(bad.stderr.strip().splitlines()) == 1 and bad.error is None
    assert kernel.reply(msg_id)["status"] == "error"
    model.push(fail(503, "overloaded, try later"))
    failing = kernel.start("%%fragola fragile\nhi")
    queued = kernel.start("print('the next cell ran')")  # Run All: waiting behind it
    failed = kernel.collect(failing, allow_error=True)
    assert kernel.reply(failing)["status"] == "error"
    assert kernel.reply(queued)["status"] == "aborted"
    assert failed.error is not None and failed.error["ename"] == "ModelHTTPError"
    assert failed.error["traceback"] == SHORT_503
    assert failed.stdout == failed.stderr == ""
    kernel.drain()
    assert "overloaded, try later" in panel_state(kernel)["notice"]["text"]
    assert panel_state(kernel)["strip"] == {"kind": "error", "text": "failed"}
    assert kernel.eval("[fragile.status, fragile.state.messages]") == [
        "idle", [{"role": "user", "content": "hi"}]
    ]


def test_a_fragola_error_in_a_code_cell_is_one_line_and_tb_shows_the_chain(
    kernel: Kernel, model: ScriptedModel
) -> None:
    new_agent(kernel, model, "direct")
    model.push(fail(503, "overloaded, try later"))
    msg_id = kernel.start("await direct.user_message('hi')")
    failed = kernel.collect(msg_id, allow_error=True)
    assert kernel.reply(msg_id)["status"] == "error"
    assert failed.error is not None and failed.error["traceback"] == SHORT_503
    full = kernel.execute("%tb", allow_error=True).error
    assert full is not None and full["ename"] == "ModelHTTPError"
    text = "\n".join(full["traceback"])
    assert "InternalServerError" in text and "direct cause" in text


def test_a_notebook_stops_at_a_cell_whose_turn_failed(
    tmp_path: Path, model: ScriptedModel
) -> None:
    model.push(fail(401, "Incorrect API key provided"))
    cells = [
        "%load_ext fragola_nb",
        "from fragola_nb import Fragola\n"
        f"fragola = Fragola(api_key='sk-bad', base_url={model.base_url!r}, max_retries=0)",
        "%%fragola\nHello",
        "print('the next cell ran')",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(CellExecutionError) as failed:
        client.execute()
    assert "ModelHTTPError: the model API answered HTTP 401" in str(failed.value)
    [error] = [o for o in notebook.cells[2].outputs if o.output_type == "error"]
    assert error.traceback == [
        "ModelHTTPError: the model API answered HTTP 401: Incorrect API key provided",
        "(%tb shows the full traceback)",
    ]
    assert notebook.cells[3].outputs == [] and notebook.cells[3].execution_count is None


def test_the_plain_cell_magic_runs_the_same_turn_with_run_sync(
    kernel: Kernel, model: ScriptedModel
) -> None:
    new_agent(kernel, model, "plain")
    model.push(reply("from the background loop"))
    model.push(reply("from a nested cell"))
    result = kernel.execute("get_ipython().run_cell_magic('fragola', 'plain', 'Hello')")
    assert WIDGET in result.outputs[0]["data"]
    # a cell run from inside a cell (as %run x.ipynb does) cannot await: the magic takes it
    nested = kernel.execute("get_ipython().run_cell('%%fragola plain\\nAgain')")
    assert nested.error is None and "Error" not in nested.stderr
    assert kernel.eval("seen") == [["fragola_nb-loop", False]] * 2
    assert kernel.eval("[m['content'] for m in plain.state.messages]") == [
        "Hello", "from the background loop", "Again", "from a nested cell"
    ]


def test_no_api_key_in_any_output_or_widget_state(
    tmp_path: Path, model: ScriptedModel
) -> None:
    """The real-API path (a key set, the default agent from ``Fragola.from_env``), loaded by
    the per-environment kernel config, with every kind of output the magics make."""
    model.brain = demo_brain
    profile = tmp_path / "profile_default"
    profile.mkdir()
    shutil.copy(CONFIG / "ipython_kernel_config.json", profile)
    env = {"IPYTHONDIR": str(tmp_path), "OPENAI_API_KEY": SECRET,
           "OPENAI_BASE_URL": model.base_url}
    with Kernel(env=env) as kernel:
        first = kernel.execute("%%fragola\nWhat is my key?")
        assert "model gpt-4o-mini" in first.stdout and "offline" not in first.stdout + first.stderr
        kernel.execute("%%fragola --fork other\nAnd in a fork?")
        for line in ("%fragola_agents", "%fragola_panel", "%fragola_tree other", "agent",
                     "fragola = agent.fragola\nfragola", "%fragola_reset other"):
            kernel.execute(line)
        kernel.drain()
        assert kernel.eval("agent.message_count") == 2
        everything = json.dumps(kernel.iopub_log, default=str)
        assert SECRET not in everything and "SECRET" not in json.dumps(kernel.widgets)
    assert len(model.requests) == 2


def test_a_notebook_of_fragola_cells_runs_headless_top_to_bottom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    cells = [
        "%load_ext fragola_nb",
        "%%fragola\nHello notebook",
        "import pydantic\n\nclass City(pydantic.BaseModel):\n    name: str\n    population: int",
        "%%fragola --json City --out city\nA city, please",
        "%%fragola --fork other --by 1\nAnd in a fork?",
        "%fragola_agents",
        "assert city.success and other.fork_of == agent.id and agent.status == 'idle'",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    path = tmp_path / "fragola.ipynb"
    nbformat.write(notebook, path)
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [cell.outputs for cell in notebook.cells]
    assert not [o for out in outputs for o in out if o.output_type == "error"]
    hello = outputs[1]
    assert "running offline on the scripted demo model" in "".join(
        o.get("text", "") for o in hello
    )
    [panel, copy] = [o for o in hello if o.output_type == "display_data"]
    assert WIDGET in panel.data  # nbclient applied the end-of-turn updates to the outputs
    assert "You said: Hello notebook" in copy.data["text/html"]
    assert "other" in "".join(o.get("data", {}).get("text/plain", "") for o in outputs[5])
