"""The compare grid in-process (its data, live; the click that opens a branch's panel),
``%%fragola --compare`` in a terminal IPython, and both in a real kernel (what the browser
gets, read from iopub; a click is the state update the view sends)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from support.comm_log import Wire, record_comms
from support.compare_world import add, by_instructions
from support.helpers import make_agent, until
from support.html_checks import assert_inert

from fragola_nb import Comparison, Fragola
from fragola_nb.experiments.compare.comparison import WATCHERS
from fragola_nb.models.scripted import Item, ScriptedModel, reply
from fragola_nb.notebook.compare.view import (
    SIMILAR,
    CompareView,
    column,
    diff_segments,
    word_overlap,
)
from fragola_nb.notebook.panel.view import AgentPanel

HOSTILE = "<script>alert(1)</script> file\u202egnp.exe"


def test_diff_is_word_by_word_against_the_first_answer() -> None:
    assert diff_segments("The cat sat on the mat.", "The dog sat on the red mat.") == [
        ["same", "The "], ["gone", "cat "], ["new", "dog "], ["same", "sat on the "],
        ["new", "red "], ["same", "mat."]]
    # words match whatever spaces follow them; the new text's spaces are shown
    assert diff_segments("one\ntwo  three", "one two three") == [["same", "one two three"]]
    assert diff_segments("same", "same") == [["same", "same"]]
    assert diff_segments("", "all new") == [["new", "all new"]]
    assert diff_segments("a \u202eb", "a \u202ec") == [["same", "a "], ["gone", "\\u202eb"],
                                                      ["new", "\\u202ec"]]


SMOL_FIRST = ("DNS, the Domain Name System, is like the phonebook of the internet. When you "
              "type a website name, your computer asks a DNS server for its IP address.")
SMOL_OTHER = ("Arr matey! Ye be askin' about them name-lookin' seas: every ship hath a "
              "harbour number, and the harbourmaster tells ye which one.")


async def test_answers_that_share_little_are_shown_plain_not_struck_through(
        model: ScriptedModel) -> None:
    # Two free answers of a real model (SmolLM2 in the teaching notebook) share a few words:
    # a word diff would strike the first answer through inside the second.
    assert word_overlap(SMOL_FIRST, SMOL_OTHER) < SIMILAR
    assert word_overlap("I was told: be brief. DNS maps names.",
                        "I was told: talk like a pirate. DNS maps names.") >= SIMILAR
    answers = {"plain": SMOL_FIRST, "pirate": SMOL_OTHER,
               "close": SMOL_FIRST.replace("phonebook", "address book")}

    def brain(request: dict[str, Any]) -> Item:
        first = request["messages"][0]
        told = first["content"] if first["role"] in ("system", "developer") else "plain"
        return reply(answers[told])

    model.brain = brain
    agent = make_agent(model)
    comparison = await agent.compare("What is DNS?", {
        "plain": {}, "pirate": {"instructions": "pirate"}, "close": {"instructions": "close"}})
    view = CompareView(comparison)
    try:
        first, pirate, close = view.grid.columns
        assert first["diff"] is None and not first["apart"]
        # little in common: no word diff, the answer as it is, marked apart
        assert (pirate["diff"], pirate["apart"], pirate["answer"]) == (None, True, SMOL_OTHER)
        # much in common: the word diff, and the plain answer for the grid's "plain" toggle
        assert close["apart"] is False and close["answer"] == answers["close"]
        assert [k for k, _ in close["diff"]] == ["same", "gone", "new", "same"]
    finally:
        view.close()


class Grids:
    """A watcher making a CompareView for each comparison, as the notebook layer does."""

    def __init__(self) -> None:
        self.views: list[CompareView] = []
        self.seen: list[list[dict[str, Any]]] = []  # every columns value sent

    def started(self, comparison: Comparison) -> None:
        view = CompareView(comparison)
        view.grid.observe(lambda change: self.seen.append(change["new"]), names="columns")
        self.views.append(view)

    def mimebundle(self, comparison: Comparison) -> None:
        return None


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    return record_comms(monkeypatch)


@pytest.fixture
def grids() -> Iterator[Grids]:
    watcher = Grids()
    WATCHERS.append(watcher)
    try:
        yield watcher
    finally:
        WATCHERS.remove(watcher)
        for view in watcher.views:
            view.close()


async def test_the_grid_follows_each_variant_as_it_streams(model: ScriptedModel,
                                                           grids: Grids, wire: Wire) -> None:
    model.brain = by_instructions
    model.chunk_size, model.chunk_delay = 2, 0.02  # longer than the grid's 80 ms throttle
    agent = make_agent(model, name="base", model_settings={"stream": True})
    task = asyncio.ensure_future(agent.compare("go", {
        "plain": {"instructions": "answer plainly"},
        "slow": {"instructions": "HANG then answer plainly"},
        "evil": {"instructions": HOSTILE},
    }))
    assert await asyncio.to_thread(model.wait_for_requests, 3)
    [view] = grids.views
    while [c["status"] for c in view.grid.columns] != ["finished", "running", "finished"]:
        await asyncio.sleep(0.01)  # the loop runs the variants meanwhile
    model.release()
    comparison = await task

    # live: the first answer streamed in pieces, only the new text each time, before it was
    # final (to the grid's own comm, as custom messages, not as the whole columns again)
    final = "[gpt-4o-mini] following: answer plainly"
    sent = [m["cols"]["plain"] for m in wire.custom("stream", view.grid.comm.comm_id)
            if "plain" in m["cols"]]
    shown, seen = "", []
    for piece in sent:
        shown = shown + piece["add"] if "add" in piece else piece["text"]
        seen.append(shown)
    assert len([s for s in seen if s and s != final]) >= 2, seen
    assert all(final.startswith(s) for s in seen) and seen[-1] == ""  # cleared once stored
    columns = view.grid.columns
    assert [c["name"] for c in columns] == ["plain", "slow", "evil"]
    first, slow, evil = columns
    assert first["diff"] is None and first["answer"] == "[gpt-4o-mini] following: answer plainly"
    # 2 of their 9 words shared: too little for a word diff, shown as it is
    assert (slow["diff"], slow["apart"]) == (None, True)
    assert slow["answer"] == "late: HANG then answer plainly"
    assert diff_segments(first["answer"], slow["answer"]) == [
        ["gone", "[gpt-4o-mini] following: "], ["new", "late: HANG then "],
        ["same", "answer plainly"]]
    assert slow["seconds"] > 0 and not slow["streaming"]
    assert slow["tokens"] == comparison["slow"].usage.total_tokens > 0
    # hostile text is data the view draws as text, its invisible characters written out
    assert "<script>" in evil["answer"] and "\u202e" not in str(columns)
    assert view.grid.title == {"agent": "base", "message": "go", "done": True}
    assert comparison["slow"] is agent.forks[1]


async def test_a_click_on_a_header_opens_that_branchs_panel(model: ScriptedModel,
                                                           grids: Grids) -> None:
    model.brain = by_instructions
    agent = make_agent(model)
    comparison = await agent.compare("go", {"a": {}, "b": {"instructions": "bee"}})
    [view] = grids.views

    view.grid.selected = "b"  # what the view sets on a click
    [panel] = view.branch.children
    assert isinstance(panel, AgentPanel) and panel.agent is comparison["b"]
    view.grid.selected = "a"
    assert view.branch.children[0].agent is comparison["a"]
    view.grid.selected = ""  # the same header clicked again
    assert view.branch.children == ()
    view.grid.selected = "no such variant"
    assert view.branch.children == ()


async def test_a_waiting_column_says_so_and_follows_the_fork_after_approval(
        model: ScriptedModel, grids: Grids) -> None:
    model.brain = by_instructions
    agent = make_agent(model, add, instructions="TOOL")
    comparison = await agent.compare("add", {"asks": {}})
    [view] = grids.views
    [col] = view.grid.columns
    assert (col["status"], col["calls"]) == ("waiting", ['add({"a": 2, "b": 3})'])
    assert col["note"].startswith("waiting for your decision")

    fork = comparison["asks"]
    fork.approve(fork.pending[0].id)
    await fork.step()
    [col] = view.grid.columns
    assert (col["status"], col["answer"], col["note"]) == (
        "finished", "[gpt-4o-mini] following: TOOL", "")


async def test_a_failed_column_shows_its_error_line(model: ScriptedModel) -> None:
    model.brain = by_instructions
    agent = make_agent(model)
    comparison = await agent.compare("go", {"bad": {"instructions": "FAIL"}})
    col = column(comparison.runs["bad"], "", None)
    assert col["status"] == "failed" and col["error"].startswith("ModelHTTPError: ")
    assert col["answer"] == "" and col["diff"] is None


# -- %%fragola --compare in a terminal IPython ----------------------------------------------------


@pytest.fixture
def shell(model: ScriptedModel) -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.extension_manager.load_extension("fragola_nb")
    model.brain = by_instructions
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=0)
    ip.user_ns.update(agent=fragola.agent("base"), variants={
        "short": {"instructions": "be short"}, "long": {"instructions": "be long"}})
    try:
        yield ip
    finally:
        ip.extension_manager.unload_extension("fragola_nb")
        ip.reset(new_session=False)


def test_the_magic_compares_and_binds_the_comparison(
        shell: InteractiveShell, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.user_ns["topic"] = "DNS"
    result = shell.run_cell("%%fragola agent --compare variants --out cmp\nExplain {topic}.",
                            store_history=False)
    assert result.success, result.error_in_exec
    comparison = shell.user_ns["cmp"]
    assert isinstance(comparison, Comparison) and list(comparison) == ["short", "long"]
    assert [r["answer"] for r in comparison.table()] == [
        "[gpt-4o-mini] following: be short", "[gpt-4o-mini] following: be long"]
    assert [r["messages"][-1]["content"] for r in model.requests] == ["Explain DNS."] * 2
    assert all(r.get("stream") is True for r in model.requests)  # the magic streams
    out = capsys.readouterr().out
    assert "Comparison of 2 variant(s) on 'base'" in out and "- long (finished" in out


def test_no_stream_and_a_variants_own_setting_are_kept(
        shell: InteractiveShell, model: ScriptedModel) -> None:
    shell.user_ns["variants"]["long"]["model_settings"] = {"stream": True}
    result = shell.run_cell("%%fragola agent --compare variants --no-stream\nhi",
                            store_history=False)
    assert result.success
    sent = sorted((r["messages"][0]["content"], r.get("stream")) for r in model.requests)
    assert sent == [("be long", True), ("be short", False)]


@pytest.mark.parametrize(("line", "error"), [
    ("--compare variants --by 2", "UsageError: --by does not apply with --compare"),
    ("--compare variants --model m", "UsageError: --model does not apply with --compare"),
    ("--compare nowhere", "UsageError: --compare: 'nowhere' is not defined in the notebook"),
    ("--compare topic", "UsageError: --compare takes a dict of variants"),
    ("--compare bad", "UsageError: --compare bad: variant 'x': unknown key(s) 'temp'"),
    ("--compare 'a b'", "UsageError: --compare must be a variable name"),
])
def test_compare_mistakes_are_one_line_usage_errors_and_make_no_fork(
        shell: InteractiveShell, model: ScriptedModel, capsys: pytest.CaptureFixture[str],
        line: str, error: str) -> None:
    shell.user_ns.update(topic="DNS", bad={"ok": {}, "x": {"temp": 1}})
    result = shell.run_cell(f"%%fragola agent {line}\nhi", store_history=False)
    assert isinstance(result.error_in_exec, UsageError)
    [printed] = capsys.readouterr().err.strip().splitlines()
    assert printed.startswith(error), printed
    assert shell.user_ns["agent"].forks == () and model.requests == []


# -- in a real kernel ------------------------------------------------------------------------------

KERNEL_SETUP = f"""
%load_ext fragola_nb
from fragola_nb import Fragola
from fragola_nb.models.scripted import reply

def brain(request):
    first = request["messages"][0]
    told = first["content"] if first["role"] == "system" else "nothing"
    return reply("I was told: " + told)

fragola = Fragola.scripted(brain=brain)
agent = fragola.agent("base", model_settings={{"stream": True}})
variants = {{"evil": {{"instructions": {HOSTILE!r}}}, "plain": {{}}}}
"""


@pytest.fixture(scope="module")
def kernel() -> Iterator[Any]:
    from support.kernel_harness import Kernel

    with Kernel() as running:
        running.execute(KERNEL_SETUP)
        yield running


def grid_ids(kernel: Any) -> list[str]:
    kernel.drain(0.05)
    return [cid for cid, state in kernel.widgets.items()
            if str(state.get("_anywidget_id", "")).endswith(".CompareGrid")]


def widget_views(result: Any) -> list[str]:
    return [d["application/vnd.jupyter.widget-view+json"]["model_id"] for d in result.data
            if "application/vnd.jupyter.widget-view+json" in d]


def test_await_compare_in_a_kernel_shows_the_grid_once_and_opens_a_panel(kernel: Any) -> None:
    before = set(grid_ids(kernel))
    result = kernel.execute('await agent.compare("hi", variants)')
    [grid] = [g for g in grid_ids(kernel) if g not in before]
    # the live grid, then the cell's value as one line rather than a second grid
    assert len(set(widget_views(result))) == 1  # shown, then updated in place
    line = "Comparison of 2 variant(s): the grid above"
    assert result.data[-1] == {"text/plain": line, "text/html": f"<small>{line}</small>"}
    # the live display's static table, an output of its own updated when the comparison
    # ended (what nbconvert and a notebook without a kernel show); its rule hides it beside
    # the live grid
    static = next(o["data"]["text/html"] for o in reversed(result.outputs)
                  if 'class="fragola-static-copy"' in o["data"].get("text/html", ""))
    rule, static = static.split("</style>", 1)
    assert ".fragola-compare" in rule
    assert "finished" in static
    assert "&lt;script&gt;" in static and "<script" not in static
    assert_inert(static.replace("<table", "<div").replace("</table>", "</div>")
                 .replace("<caption", "<div").replace("</caption>", "</div>")
                 .replace("thead", "div").replace("tbody", "div")
                 .replace("<tr", "<div").replace("</tr>", "</div>")
                 .replace("<th", "<div").replace("</th>", "</div>")
                 .replace("<td", "<div").replace("</td>", "</div>"))
    columns = kernel.widgets[grid]["columns"]
    assert [(c["name"], c["status"], c["answer"]) for c in columns] == [
        ("evil", "finished", "I was told: <script>alert(1)</script> file\\u202egnp.exe"),
        ("plain", "finished", "I was told: nothing")]
    assert columns[1]["diff"][0] == ["same", "I was told: "]
    assert columns[0]["tokens"] > 0

    kernel.send_state(grid, {"selected": "plain"})  # a click on the column's name
    kernel.wait_for("[k for k in agent.forks if k.name == 'plain'] and "
                    "any(type(w).__name__ == 'AgentPanel' and w.agent.name == 'plain' "
                    "for w in __import__('ipywidgets').Widget.widgets.values())")


def test_a_comparison_displayed_later_is_a_grid_and_the_magic_binds_it(kernel: Any) -> None:
    kernel.execute('c = await agent.compare("again", variants)')
    before = set(grid_ids(kernel))
    shown = kernel.execute("c")
    assert len(set(widget_views(shown))) == 1 and set(grid_ids(kernel)) - before

    before = set(grid_ids(kernel))
    result = kernel.execute("%%fragola agent --compare variants --out cmp\nWhat is {c.message}?")
    assert len(set(widget_views(result))) == 1
    [grid] = [g for g in grid_ids(kernel) if g not in before]
    assert kernel.eval("[r['answer'] for r in cmp.table()]") == [
        "I was told: <script>alert(1)</script> file\u202egnp.exe", "I was told: nothing"]
    assert kernel.eval("[k.state.messages[0]['content'] for k in cmp.values()]") == [
        "What is again?"] * 2
    assert kernel.widgets[grid]["title"]["done"] is True


def test_an_interrupt_fails_the_cell_and_keeps_the_finished_forks(
        kernel: Any, model: ScriptedModel) -> None:
    model.brain = by_instructions
    kernel.execute(f"from fragola_nb import Fragola\n"
                   f"sleepy = Fragola(api_key='k', base_url={model.base_url!r}, max_retries=0)"
                   f".agent('sleepy')\n"
                   "slow = {'quick': {'instructions': 'fast'}, 'stuck': {'instructions': 'HANG'}}")
    before = set(grid_ids(kernel))
    msg_id = kernel.start("%%fragola sleepy --compare slow --out never\nWait for me")
    assert model.wait_for_requests(2, timeout=20)

    def quick_done() -> bool:
        grids = [g for g in grid_ids(kernel) if g not in before]
        return bool(grids) and kernel.widgets[grids[0]]["columns"][0]["status"] == "finished"

    until(quick_done)  # what the browser sees while the cell still runs
    kernel.km.interrupt_kernel()
    result = kernel.collect(msg_id, timeout=30, allow_error=True)
    assert kernel.reply(msg_id)["status"] == "error"  # Run All stops here
    assert result.error is not None and result.error["traceback"] == [
        "TurnInterrupted: compare on 'sleepy' stopped by the interrupt; the variants that "
        "finished are kept in sleepy.forks", "(%tb shows the full traceback)"]
    assert kernel.eval("[(f.name, f.status, f.state.outcome, len(f.state.messages)) "
                       "for f in sleepy.forks]") == [["quick", "idle", "finished", 2],
                                                     ["stuck", "idle", "stopped", 1]]
    assert kernel.eval("'never' in globals()") is False
    [grid] = [g for g in grid_ids(kernel) if g not in before]
    assert [c["status"] for c in kernel.widgets[grid]["columns"]] == ["finished", "cancelled"]


async def test_a_variant_stopped_mid_reply_keeps_what_had_streamed_marked_unsaved(
        model: ScriptedModel, grids: Grids) -> None:
    from fragola_nb.models.scripted import reply

    model.chunk_size, model.chunk_delay = 4, 0.02
    model.brain = lambda request: reply("one two three four five six seven eight " * 20)
    agent = make_agent(model, name="base", model_settings={"stream": True})
    task = asyncio.ensure_future(agent.compare("go", {"long": {}}))
    assert await asyncio.to_thread(model.wait_for_requests, 1)
    [view] = grids.views
    while len(view.streamed("long")) < 16:
        await asyncio.sleep(0.01)
    agent.stop_sync()
    comparison = await task
    [column] = view.grid.columns
    assert column["status"] == "stopped" and comparison["long"].state.outcome == "stopped"
    assert column["answer"].startswith("one two three") and not column["streaming"]
    assert column["note"] == "stopped mid-reply: this text was not saved"
    assert comparison.table()[0]["answer"] is None  # the partial reply is not in the history


async def test_eight_streaming_columns_go_out_together_as_new_text_only(
        model: ScriptedModel, grids: Grids, wire: Wire) -> None:
    # 8 long replies streaming at once: one message carries every column's news, at most once
    # per GROUP_INTERVAL, and only what is new (never a column's whole text again)
    from fragola_nb.models.scripted import reply
    from fragola_nb.notebook.stream import GROUP_INTERVAL

    text = "word " * 400
    model.chunk_size, model.chunk_delay = 5, 0.002
    model.brain = lambda request: reply(text)
    agent = make_agent(model, name="base", model_settings={"stream": True})
    started = time.monotonic()
    await agent.compare("go", {f"v{i}": {"instructions": f"v{i}"} for i in range(8)})
    elapsed = time.monotonic() - started
    [view] = grids.views
    sent = [s for s in wire.log if s.comm_id == view.grid.comm.comm_id and s.kind == "comm_msg"
            and s.data.get("method") == "custom" and s.data["content"].get("t") == "stream"]
    assert len(sent) <= elapsed / GROUP_INTERVAL + 2 * 8 + 2, (len(sent), elapsed)
    shown = {f"v{i}": "" for i in range(8)}
    adds = dict.fromkeys(shown, 0)
    for s in sent:
        for name, piece in s.data["content"]["cols"].items():
            if "add" in piece:
                shown[name] += piece["add"]
                adds[name] += 1
            elif piece["text"]:
                shown[name] = piece["text"]
            assert text.startswith(shown[name]), (name, shown[name])  # a prefix, in order
    # each column grew by adds (the stored reply then replaces the streamed text)
    assert min(adds.values()) >= 2 and min(map(len, shown.values())) > len(text) / 2, adds
    assert max(s.size for s in sent) < len(text) * 2  # never the eight columns' texts
