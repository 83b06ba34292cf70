"""The evaluation matrix in-process (its data, live and coalesced; a click opening a row's
panel; a baseline's changes), ``%%fragola --evaluate`` in a terminal IPython, and both in a
real kernel (what the browser gets, read from iopub; a click is the state update the view
sends)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from support.helpers import make_agent, until

from fragola_nb import Fragola
from fragola_nb.experiments.evaluate.evaluation import EVALUATION_WATCHERS, Evaluation
from fragola_nb.graders import contains
from fragola_nb.models.scripted import Item, ScriptedModel, reply
from fragola_nb.notebook.evaluate.view import INTERVAL, EvalView, matrix_cells
from fragola_nb.notebook.panel.view import AgentPanel

HOSTILE = "<img src=x onerror=alert(1)> file\u202egnp.exe"
SHOWN = "<img src=x onerror=alert(1)> file\\u202egnp.exe"  # as the view sends it


def brain(request: dict[str, Any]) -> Item:
    """Paris, unless told to be wrong; the user's text is echoed (hostile text included)."""
    first = request["messages"][0]
    wrong = first["role"] in ("system", "developer") and "wrong" in first["content"]
    said = request["messages"][-1]["content"]
    return reply(("London" if wrong else "Paris") + " says " + said)


class Matrices:
    """A watcher making an EvalView for each evaluation, as the notebook layer does."""

    def __init__(self) -> None:
        self.views: list[EvalView] = []
        self.sent: list[float] = []  # when each `cells` value was sent

    def started(self, evaluation: Evaluation) -> None:
        view = EvalView(evaluation)
        view.matrix.observe(lambda _: self.sent.append(time.monotonic()), names="cells")
        self.views.append(view)


@pytest.fixture
def matrices() -> Iterator[Matrices]:
    watcher = Matrices()
    EVALUATION_WATCHERS.append(watcher)
    try:
        yield watcher
    finally:
        EVALUATION_WATCHERS.remove(watcher)
        for view in watcher.views:
            view.close()


VARIANTS = {"right": {}, "wrong": {"instructions": "be wrong"}}


async def test_the_matrix_has_a_cell_per_case_and_variant_and_a_head_per_variant(
        model: ScriptedModel, matrices: Matrices) -> None:
    model.brain = brain
    agent = make_agent(model, name="geo")
    evaluation = await agent.evaluate(["Capital of France?", HOSTILE], VARIANTS,
                                      [contains("Paris")], repeat=2, progress=True)
    [view] = matrices.views
    matrix = view.matrix
    assert matrix.cases == ["Capital of France?", SHOWN]
    # case 0 on right, on wrong, case 1 on right, on wrong: a letter per repeat, the score
    assert matrix.cells == [["pp", 1.0, ""], ["ff", 0.0, ""], ["pp", 1.0, ""], ["ff", 0.0, ""]]
    assert matrix.cells == matrix_cells(evaluation)
    head = matrix.head
    assert head["done"] is True and head["baseline"] is None and head["repeat"] == 2
    assert [(v["name"], v["rate"], v["ran"], v["rows"]) for v in head["variants"]] == [
        ("right", 1.0, 4, 4), ("wrong", 0.0, 4, 4)]
    assert head["title"].startswith("2 cases × 2 variants × 2 repeats: right 100% passed")


async def test_a_click_on_a_cell_shows_its_row_and_opens_its_forks_panel(
        model: ScriptedModel, matrices: Matrices) -> None:
    model.brain = brain
    agent = make_agent(model, name="geo")
    evaluation = await agent.evaluate(["Capital of France?", HOSTILE], VARIANTS,
                                      [contains("Paris")], repeat=2, progress=True)
    [view] = matrices.views
    view.matrix.selected = [1, 1, 1]  # case 1, variant "wrong", repeat 1: what a click sends
    [row] = [r for r in evaluation if (r.case, r.variant, r.repeat) == (1, "wrong", 1)]
    [panel] = view.branch.children
    assert isinstance(panel, AgentPanel) and panel.agent is row.fork
    detail = view.matrix.detail
    assert (detail["input"], detail["variant"], detail["repeat"], detail["passed"]) == (
        SHOWN, "wrong", 1, False)
    assert detail["answer"] == "London says " + SHOWN
    assert detail["grades"] == [{"name": "contains('Paris')", "passed": False, "score": None,
                                 "reason": "answer does not contain 'Paris'"}]
    view.matrix.selected = []  # the same cell clicked again
    assert view.branch.children == () and view.matrix.detail == {}
    assert panel.comm is None  # closed


async def test_updates_are_coalesced_to_a_few_a_second(model: ScriptedModel,
                                                       matrices: Matrices) -> None:
    model.brain = brain
    agent = make_agent(model, name="geo")
    changes: list[int | None] = []

    class Counter:
        def started(self, evaluation: Evaluation) -> None:
            evaluation.subscribe(changes.append)

    EVALUATION_WATCHERS.append(Counter())
    try:
        started = time.monotonic()
        evaluation = await agent.evaluate([f"case {i}" for i in range(150)], VARIANTS,
                                          [contains("Paris")], concurrency=16, progress=True)
        seconds = time.monotonic() - started
    finally:
        EVALUATION_WATCHERS.pop()
    # each of the 300 rows changed twice (running, then done): one message each would be 600
    assert len([c for c in changes if c is not None]) >= 600
    sent = matrices.sent
    assert len(sent) <= seconds / INTERVAL + 3, (len(sent), seconds)
    gaps = [b - a for a, b in itertools.pairwise(sent[:-1])]  # the end is sent at once
    assert all(gap >= INTERVAL * 0.9 for gap in gaps), gaps
    [view] = matrices.views
    assert view.matrix.cells == matrix_cells(evaluation)  # the last update holds everything
    assert {cell[0] for cell in view.matrix.cells} == {"p", "f"}


async def test_a_baseline_marks_the_cells_that_changed(model: ScriptedModel,
                                                       matrices: Matrices) -> None:
    model.brain = brain
    agent = make_agent(model, name="geo")
    before = await agent.evaluate(["a", "b"], {"right": {"instructions": "be wrong"}},
                                  [contains("Paris")], progress=True)
    now = await agent.evaluate(["a", "c"], {"right": {}}, [contains("Paris")],
                               progress=True)
    view = matrices.views[-1]
    assert [cell[2] for cell in view.matrix.cells] == ["", ""]
    now.diff(before)
    assert view.matrix.cells == [["p", 1.0, "improved"], ["p", 1.0, "new"]]
    assert view.matrix.head["baseline"] == {"improved": 1, "regressed": 0, "unchanged": 0,
                                            "new": 1, "gone": 1}


# -- %%fragola --evaluate in a terminal IPython -----------------------------------------------


@pytest.fixture
def shell(model: ScriptedModel) -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.extension_manager.load_extension("fragola_nb")
    model.brain = brain
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=0)
    ip.user_ns.update(agent=fragola.agent("geo"), cases=["Capital of France?", HOSTILE],
                      variants=dict(VARIANTS), checks=[contains("Paris")])
    try:
        yield ip
    finally:
        ip.extension_manager.unload_extension("fragola_nb")
        ip.reset(new_session=False)


def test_the_magic_evaluates_and_binds_the_evaluation(
        shell: InteractiveShell, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    result = shell.run_cell("%%fragola agent --evaluate cases --variants variants "
                            "--graders checks --repeat 2 --out ev\n# geography",
                            store_history=False)
    assert result.success, result.error_in_exec
    evaluation = shell.user_ns["ev"]
    assert isinstance(evaluation, Evaluation) and len(evaluation) == 8
    assert [(r.case, r.variant, r.repeat, r.passed) for r in evaluation][:4] == [
        (0, "right", 0, True), (0, "right", 1, True), (0, "wrong", 0, False),
        (0, "wrong", 1, False)]
    assert len(model.requests) == 8
    assert "2 cases × 2 variants × 2 repeats: right 100% passed" in capsys.readouterr().out


def test_without_variants_or_graders_the_agent_itself_runs(
        shell: InteractiveShell, model: ScriptedModel) -> None:
    result = shell.run_cell("%%fragola agent --evaluate cases --out ev\n# plain",
                            store_history=False)
    assert result.success, result.error_in_exec
    assert shell.user_ns["ev"].variants == ("base",) and len(model.requests) == 2


@pytest.mark.parametrize(("line", "body", "error"), [
    ("--evaluate nowhere", "", "UsageError: --evaluate: 'nowhere' is not defined"),
    ("--evaluate cases --variants nowhere", "", "UsageError: --variants: 'nowhere' is not "
     "defined"),
    ("--evaluate cases --graders nowhere", "", "UsageError: --graders: 'nowhere' is not "
     "defined"),
    ("--evaluate cases --variants cases", "", "UsageError: --variants takes a dict"),
    ("--evaluate variants", "", "UsageError: --evaluate variants: "),
    ("--evaluate cases --graders cases", "", "UsageError: --graders cases: "),
    ("--evaluate cases --variants bad", "", "UsageError: --variants bad: variant 'x': unknown"),
    ("--evaluate cases --repeat 0", "", "UsageError: argument --repeat: --repeat takes a "
     "whole number >= 1"),
    ("--evaluate cases --model m", "", "UsageError: --model does not apply with --evaluate"),
    ("--evaluate cases --compare variants", "", "UsageError: --compare does not apply"),
    ("--variants variants", "hi", "UsageError: --variants goes with --evaluate"),
    ("--evaluate cases", "# a note\nhi", "UsageError: --evaluate takes its inputs from the "
     "cases"),
    ("--evaluate 'a b'", "", "UsageError: --evaluate must be a variable name"),
])
def test_evaluate_mistakes_are_one_line_usage_errors_and_send_nothing(
        shell: InteractiveShell, model: ScriptedModel, capsys: pytest.CaptureFixture[str],
        line: str, body: str, error: str) -> None:
    shell.user_ns["bad"] = {"ok": {}, "x": {"temp": 1}}
    result = shell.run_cell(f"%%fragola agent {line}\n{body or '# a note'}",
                            store_history=False)
    assert isinstance(result.error_in_exec, UsageError)
    [printed] = capsys.readouterr().err.strip().splitlines()
    assert printed.startswith(error), printed
    assert model.requests == [] and "ev" not in shell.user_ns


# -- in a real kernel ---------------------------------------------------------------------------

KERNEL_SETUP = f"""
%load_ext fragola_nb
from fragola_nb import Fragola
from fragola_nb.graders import contains
from fragola_nb.models.scripted import reply

def brain(request):
    first = request["messages"][0]
    wrong = first["role"] == "system" and "wrong" in first["content"]
    return reply(("London" if wrong else "Paris") + " says " + request["messages"][-1]["content"])

agent = Fragola.scripted(brain=brain).agent("geo")
cases = ["Capital of France?", {HOSTILE!r}]
variants = {VARIANTS!r}
checks = [contains("Paris")]
"""


@pytest.fixture(scope="module")
def kernel() -> Iterator[Any]:
    from support.kernel_harness import Kernel

    with Kernel() as running:
        running.execute(KERNEL_SETUP)
        yield running


def matrix_ids(kernel: Any) -> list[str]:
    kernel.drain(0.05)
    return [cid for cid, state in kernel.widgets.items()
            if str(state.get("_anywidget_id", "")).endswith(".EvalMatrix")]


def widget_views(result: Any) -> list[str]:
    return [d["application/vnd.jupyter.widget-view+json"]["model_id"] for d in result.data
            if "application/vnd.jupyter.widget-view+json" in d]


def test_await_evaluate_in_a_kernel_shows_the_matrix_once_and_a_click_opens_a_panel(
        kernel: Any) -> None:
    before = set(matrix_ids(kernel))
    result = kernel.execute("await agent.evaluate(cases, variants, checks)")
    [matrix] = [m for m in matrix_ids(kernel) if m not in before]
    # shown, then updated in place; the matrix is the progress (no tqdm bar beside it)
    assert len(set(widget_views(result))) == 1 and not result.stderr
    line = "Evaluation of 4 run(s): the matrix above"
    assert {"text/plain": line, "text/html": f"<small>{line}</small>"} in result.data
    # the static copy, updated right after the run returns (with its verdicts, worked out
    # once for the matrix and it): what nbconvert and a kernel-less notebook show
    static = next(o["data"]["text/html"] for o in reversed(result.outputs)
                  if 'class="fragola-static-copy"' in o["data"].get("text/html", ""))
    rule, static = static.split("</style>", 1)
    assert ".fragola-eval" in rule
    assert "&lt;img src=x onerror=alert(1)&gt;" in static and "<img" not in static
    assert "\u202e" not in static and "✓" in static and "✗" in static
    assert "wrong vs right: −100 pts" in static
    assert kernel.widgets[matrix]["verdicts"]["lines"][0]["text"].startswith(
        "wrong vs right: −100 pts")
    state = kernel.widgets[matrix]
    assert state["cells"] == [["p", 1.0, ""], ["f", 0.0, ""], ["p", 1.0, ""], ["f", 0.0, ""]]
    assert state["cases"][1] == SHOWN and state["head"]["done"] is True

    kernel.send_state(matrix, {"selected": [1, 0, 0]})  # a click on case 1, variant right
    kernel.wait_for("any(type(w).__name__ == 'AgentPanel' and w.agent.name == 'geo-right-"
                    "case1-r0' for w in __import__('ipywidgets').Widget.widgets.values())")
    kernel.drain(0.1)
    assert kernel.widgets[matrix]["detail"]["answer"] == "Paris says " + SHOWN


def test_progress_false_in_a_kernel_shows_no_matrix_and_no_bar(kernel: Any) -> None:
    before = set(matrix_ids(kernel))
    result = kernel.execute("quiet = await agent.evaluate(cases, variants, checks, "
                            "progress=False)")
    assert set(matrix_ids(kernel)) == before and widget_views(result) == []
    assert not result.stderr and result.outputs == []
    shown = kernel.execute("quiet")  # displayed afterwards: its matrix
    assert len(set(widget_views(shown))) == 1


def test_the_magic_in_a_kernel_shows_the_matrix_and_binds_the_evaluation(kernel: Any) -> None:
    before = set(matrix_ids(kernel))
    result = kernel.execute("%%fragola agent --evaluate cases --variants variants "
                            "--graders checks --repeat 2 --out ev\n")
    assert len(set(widget_views(result))) == 1
    [matrix] = [m for m in matrix_ids(kernel) if m not in before]
    assert kernel.eval("[len(ev), ev.repeat]") == [8, 2]
    assert kernel.widgets[matrix]["cells"][0] == ["pp", 1.0, ""]
    assert not any("evaluate geo" in o.get("text", "") for o in result.outputs)  # no bar

    before = set(matrix_ids(kernel))
    shown = kernel.execute("ev")  # displayed later: a matrix again
    assert len(set(widget_views(shown))) == 1 and set(matrix_ids(kernel)) - before


def test_an_interrupt_fails_the_evaluate_cell_in_one_line_and_the_next_one_runs(
        kernel: Any) -> None:
    kernel.execute("from fragola_nb.models.scripted import hang\n"
                   "def slow_brain(request):\n"
                   "    said = request['messages'][-1]['content']\n"
                   "    return hang(60) if 'HANG' in said else reply('Paris says ' + said)\n"
                   "sleepy = Fragola.scripted(brain=slow_brain).agent('sleepy')\n"
                   "slow_cases = ['quick', 'HANG']")
    before = set(matrix_ids(kernel))
    msg_id = kernel.start("%%fragola sleepy --evaluate slow_cases --graders checks --out never\n")

    def quick_done() -> bool:  # what the browser sees while the cell still runs
        new = [m for m in matrix_ids(kernel) if m not in before]
        return bool(new) and kernel.widgets[new[0]]["cells"][0][0] == "p"

    until(quick_done)
    kernel.km.interrupt_kernel()
    result = kernel.collect(msg_id, timeout=30, allow_error=True)
    assert kernel.reply(msg_id)["status"] == "error"  # Run All stops here
    assert result.error is not None and result.error["traceback"] == [
        "TurnInterrupted: evaluate on 'sleepy' stopped by the interrupt",
        "(%tb shows the full traceback)"]
    assert kernel.eval("'never' in globals()") is False
    assert kernel.eval("sleepy.status") == "idle"
    [matrix] = [m for m in matrix_ids(kernel) if m not in before]
    assert kernel.widgets[matrix]["cells"][0][0] == "p"  # the finished row stays shown
    # the next cell runs: the interrupt left nothing behind
    kernel.execute("quick_only = slow_cases[:1]")
    kernel.execute("%%fragola sleepy --evaluate quick_only --graders checks --out again\n")
    assert kernel.eval("[(r['status'], r['passed']) for r in again.table()]") == [["done", True]]


async def test_a_cells_detail_shows_the_trajectory_calls_and_turns_as_safe_text(
        model: ScriptedModel, matrices: Matrices) -> None:
    from fragola_nb import tool
    from fragola_nb.models.scripted import demo_brain

    model.brain = demo_brain
    key = "sk-proj-viewkey0123456789abcdef"

    def temperature(city: str) -> str:
        """Current temperature of a city."""
        return f"{HOSTILE} in {city} ({key})"

    lab = Fragola(api_key=key, base_url=model.base_url, max_retries=0)
    agent = lab.agent("wx", tools=[tool(temperature)])
    evaluation = await agent.evaluate(
        [{"turns": ["How warm is it in Oslo?", "Say hi"]}], progress=True)
    [view] = matrices.views
    view.matrix.selected = [0, 0, 0]
    trajectory = view.matrix.detail["trajectory"]
    (row,) = evaluation
    assert trajectory["ended"] == "all turns" and trajectory["model_calls"] == 3
    assert trajectory["calls"] == [{"name": "temperature", "arguments": '{"city": "Oslo"}',
                                    "result": SHOWN + " in Oslo ([redacted])"}]
    assert [t["user"] for t in trajectory["turns"]] == ["How warm is it in Oslo?", "Say hi"]
    assert trajectory["turns"][1]["reply"] == row.answers[1] and trajectory["more"] == 0
