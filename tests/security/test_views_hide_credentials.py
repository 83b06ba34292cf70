"""Issue 32, class 1, the views: a panel, a fork tree, an evaluation's matrix (and the panel
of a cell clicked) and a comparison's grid send no credential to the browser, though the
server quoted the agent's key, a variant's ``extra_headers`` key and a judge's key into its
answers (``quoting_api``). What is read is each widget's synced state, as the front end
gets it."""

from __future__ import annotations

import json
from typing import Any

from support.quoting_api import AGENT_KEY, JUDGE_KEY, KEYS, VARIANTS, QuotingAPI, fragola_on

from fragola_nb.graders import judge
from fragola_nb.notebook.compare.view import CompareView
from fragola_nb.notebook.evaluate.view import EvalView
from fragola_nb.notebook.panel.view import AgentPanel
from fragola_nb.notebook.tree.view import ForkTree


def state_of(widget: Any) -> str:
    """A widget's state as sent to the browser, its children's too."""
    state = widget.get_state()
    children = [state_of(child) for child in getattr(widget, "children", ())]
    return json.dumps([state, children], default=repr, ensure_ascii=False)


def found(where: str, text: str) -> list[str]:
    return [f"{where}: {key}" for key in KEYS if key in text]


async def test_a_panel_and_a_fork_tree_show_no_key_the_server_quoted(api: QuotingAPI) -> None:
    agent = fragola_on(api, AGENT_KEY).agent("talked", model_settings=VARIANTS["proxied"][
        "model_settings"])
    panel, tree = AgentPanel(agent), ForkTree(agent)
    try:
        await agent.user_message("hi")
        agent.fork("branch")
        assert AGENT_KEY in str(agent.state.messages[-1]["content"])
        rows = json.dumps(panel.rows, ensure_ascii=False)  # what the panel sends as messages
        assert "thanks" in rows  # the answer is there, its keys hidden
        assert found("panel", state_of(panel) + rows) + found("tree", state_of(tree)) == []
    finally:
        panel.close()
        tree.close()


async def test_an_evaluation_matrix_and_a_comparison_grid_show_no_key(api: QuotingAPI) -> None:
    agent = fragola_on(api, AGENT_KEY).agent("evaluated")
    graders = [judge("polite?", fragola=fragola_on(api, JUDGE_KEY))]
    evaluation = await agent.evaluate(["hi"], VARIANTS, graders=graders, progress=False)
    comparison = await agent.compare("hi", VARIANTS, graders=graders)
    matrix, grid = EvalView(evaluation), CompareView(comparison)
    try:
        leaks = found("matrix", state_of(matrix)) + found("grid", state_of(grid))
        for variant in range(len(VARIANTS)):
            matrix.matrix.selected = [0, variant, 0]  # a click on the cell
            leaks += found(f"matrix cell {variant}", state_of(matrix))
        assert matrix.panel is not None  # the fork's panel is shown too
        assert leaks == []
    finally:
        matrix.close()
        grid.close()
