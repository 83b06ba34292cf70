"""What the kernel sends the tree, the diff, the compare grid and the evaluation matrix is what
each view declares (issue 35, item 5), as test_panel_commands.py checks for the panel: every
custom message each widget sends on a real run (a streamed comparison, an evaluation whose rows
finish, a fold unfolded, a view's hello) is one of the commands its ``.js`` module lists in its
``COMMANDS`` table; the tree gets no custom message, and its table lists the traits the kernel
sets on it (the browser side: tests/browser/test_browser_js_units.py)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.comm_log import Wire, record_comms
from support.helpers import make_agent

import fragola_nb
from fragola_nb import Comparison
from fragola_nb.experiments.compare.comparison import WATCHERS
from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.evaluate.evaluation import Evaluation
from fragola_nb.models.scripted import ScriptedModel, reply
from fragola_nb.notebook.compare.view import CompareView
from fragola_nb.notebook.diff.view import DiffView
from fragola_nb.notebook.evaluate.view import EvalView
from fragola_nb.notebook.tree.view import ForkTree, TreeView

PACKAGE = Path(__file__).resolve().parents[2] / "fragola_nb"
MARKERS = {"tree": "function pickBox(", "diff": "function pairRow(",
           "compare": "function gridNodes(", "evaluation": "function matrixNodes("}


def declared(view: str) -> set[str]:
    """The keys of the COMMANDS table of ``view``'s module (found by what only it defines)."""
    [source] = [p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.js")
                if MARKERS[view] in p.read_text(encoding="utf-8")]
    table = re.search(r"export const COMMANDS = Object\.freeze\(\{\n(.*?)\n\}\);", source, re.S)
    assert table is not None, f"no COMMANDS table in the {view} module"
    return set(re.findall(r"^  (\w+): \{ by: \"\w+\"", table.group(1), re.M))


def kind(message: dict[str, Any]) -> str:
    """A message's command as the views' ``commandOf`` tells it."""
    if "fold" in message:
        return "fold"
    return "live" if message.get("live") else str(message.get("t") or message.get("do"))


def from_browser(widget: Any, content: dict[str, Any]) -> None:
    """What reaches the kernel when the browser's view calls ``model.send(content)``."""
    widget.comm.handle_msg({"content": {"data": {"method": "custom", "content": content}},
                            "buffers": []})


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    return record_comms(monkeypatch)


def test_the_tables_are_read_from_the_modules() -> None:
    assert declared("tree") == {"nodes", "selected", "picked"}
    assert declared("diff") == {"fold"}
    assert declared("compare") == {"live", "stream"}
    assert declared("evaluation") == {"live", "patch"}


async def test_the_tree_gets_no_custom_message_and_declares_the_traits_it_is_set(
        model: ScriptedModel, wire: Wire) -> None:
    model.push(reply("one"), reply("two"))
    agent = make_agent(model, name="root")
    await agent.user_message("hi")
    fork = agent.fork(name="other")
    await fork.user_message("again")
    tree = ForkTree(agent)
    try:
        tree.compare(agent, fork)
        tree.select(fork)
        from_browser(tree.view, {"do": "hello"})
        assert wire.custom(comm_id=tree.view.comm.comm_id) == []
        synced = set(TreeView.class_own_traits(sync=True))
        assert synced == declared("tree")
        sent = [s.data for s in wire.log if s.comm_id == tree.view.comm.comm_id]
        assert [m for m in sent if m.get("method") == "update"]  # it was set, not sent
    finally:
        tree.close()


def test_every_message_the_diff_sends_is_declared(wire: Wire) -> None:
    same = [{"role": "user", "content": f"q{i}"} for i in range(30)]
    changed = [*same[:5], {"role": "user", "content": "edited"}, *same[6:]]
    view = DiffView(fragola_nb.diff(same, changed))
    try:
        folds = [at for at, row in enumerate(view.rows) if row["k"] == "fold"]
        assert folds
        for at in folds:
            from_browser(view, {"unfold": at})
        from_browser(view, {"do": "hello"})
        kinds = [kind(m) for m in wire.custom(comm_id=view.comm.comm_id)]
        assert kinds == ["fold"] * len(folds)
        assert set(kinds) <= declared("diff")
    finally:
        view.close()


def test_every_message_the_evaluation_sends_is_declared(wire: Wire) -> None:
    rows = [EvalRow(case=c, input=f"case {c}", variant=v) for c in range(3) for v in "ab"]
    evaluation = Evaluation(rows, variants=("a", "b"), graders=[], repeat=1)
    evaluation.done = False  # as evaluate leaves it while rows run
    view = EvalView(evaluation)
    try:
        from_browser(view.matrix, {"do": "hello"})
        evaluation.set_row(3, replace(evaluation[3], status="done", answer="yes"))
        kinds = {kind(m) for m in wire.custom(comm_id=view.matrix.comm.comm_id)}
        assert kinds == {"live", "patch"}
        assert kinds <= declared("evaluation")
    finally:
        view.close()


class Grids:
    """A watcher making a CompareView for each comparison, as the notebook layer does."""

    def __init__(self) -> None:
        self.views: list[CompareView] = []

    def started(self, comparison: Comparison) -> bool:
        self.views.append(CompareView(comparison))
        return True

    def mimebundle(self, comparison: Comparison) -> None:
        return None


async def test_every_message_the_compare_grid_sends_is_declared(model: ScriptedModel,
                                                                wire: Wire) -> None:
    model.chunk_size, model.chunk_delay = 2, 0.02  # longer than the grid's 80 ms pace
    model.push(reply("the first answer, streamed"), reply("the second answer, streamed"))
    agent = make_agent(model, name="base", model_settings={"stream": True})
    grids = Grids()
    WATCHERS.append(grids)
    try:
        task = asyncio.ensure_future(agent.compare("go", {"a": {}, "b": {}}))
        while not grids.views:
            await asyncio.sleep(0.01)
        from_browser(grids.views[0].grid, {"do": "hello"})
        await task
        kinds = {kind(m) for m in wire.custom(comm_id=grids.views[0].grid.comm.comm_id)}
        assert kinds == {"live", "stream"}
        assert kinds <= declared("compare")
    finally:
        WATCHERS.remove(grids)
        for view in grids.views:
            view.close()
