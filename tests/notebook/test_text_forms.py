"""What a notebook shows where a live view cannot draw: its ``text/plain`` says what the view
is and how to see it ("fragola_nb panel of 'calculator', 8 messages: run the cell, or trust
the notebook"), never a raw repr, and the static copy below it says what it is a copy of.

That is what JupyterLab shows for an executed notebook someone else shared (untrusted: the
safe forms of each output only; the browser test is tests/browser/test_browser_untrusted.py).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from support.helpers import make_agent

from fragola_nb.graders import contains
from fragola_nb.models.scripted import ScriptedModel, reply
from fragola_nb.notebook.compare.view import CompareView
from fragola_nb.notebook.evaluate.view import EvalView
from fragola_nb.notebook.panel.view import AgentPanel
from fragola_nb.notebook.static.copy import COPY_CLASS, SEE_LIVE
from fragola_nb.notebook.tree.view import ForkTree

WIDGET = "application/vnd.jupyter.widget-view+json"
SEE = f": {SEE_LIVE}"  # ": run the cell, or trust the notebook"


def text(view: Any) -> str:
    bundle = view._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert WIDGET in data  # the live view, for a front end that draws it
    return str(data["text/plain"])


async def test_a_panel_says_what_it_is_and_how_to_see_it(model: ScriptedModel) -> None:
    agent = make_agent(model, name="calc\u202e")
    model.push(reply("one"), reply("two"))
    await agent.user_message("first")
    await agent.user_message("second")
    # the name as text nobody can be fooled by (a bidi override written out)
    assert text(AgentPanel(agent)) == f"fragola_nb panel of 'calc\\u202e', 4 messages{SEE}"
    # a turn's panel names its messages as the history numbers them
    assert text(AgentPanel(agent, since=2)) == (
        f"fragola_nb turn panel of 'calc\\u202e', messages #2 to #3{SEE}")
    assert text(AgentPanel(agent, since=4)) == (
        f"fragola_nb turn panel of 'calc\\u202e', no message yet{SEE}")


async def test_a_tree_a_grid_and_a_matrix_say_what_they_are(model: ScriptedModel) -> None:
    agent = make_agent(model, name="geo")
    model.push(reply("Paris"))
    await agent.user_message("Capital of France?")
    agent.fork("other")
    tree = ForkTree(agent, namespace={})
    comparison = await agent.compare("Again?", {"plain": {}, "terse": {"instructions": "t"}})
    grid = CompareView(comparison)
    evaluation = await agent.evaluate(["Capital of France?"], {"a": {}}, [contains("Paris")],
                                      progress=False)
    matrix = EvalView(evaluation)
    try:
        first, *rest = text(tree).split("\n")
        assert first == f"fragola_nb fork tree of 'geo', {len(rest)} agents{SEE}"
        first, *rest = text(grid).split("\n")
        assert first == f"fragola_nb compare grid of 'geo', 2 variants{SEE}"
        assert rest[0].startswith("Comparison of 2 variant(s)")  # then the text form
        first, *rest = text(matrix).split("\n")
        assert first == f"fragola_nb evaluation matrix, 1 cases × 1 variants{SEE}"
        assert rest[0].startswith("Evaluation(")
    finally:
        for view in (tree, grid, matrix):
            view.close()


@pytest.fixture
def shell(model: ScriptedModel) -> Iterator[InteractiveShell]:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "fragola_nb")
    shell._fragola_nb.widgets = True  # as in a kernel: live views and their copies
    shell.user_ns["agent"] = make_agent(model, name="calculator")
    try:
        yield shell
    finally:
        shell.run_line_magic("unload_ext", "fragola_nb")
        InteractiveShell.clear_instance()


def test_the_static_copy_says_what_it_is_a_copy_of(
    shell: InteractiveShell, model: ScriptedModel,
) -> None:
    from IPython.utils.capture import capture_output

    model.push(reply("It is 4."))
    with capture_output() as captured:
        shell.run_cell("%%fragola agent\nWhat is 2 + 2?")
    views = [o.data for o in captured.outputs if WIDGET in o.data]
    copies = [o.data["text/html"] for o in captured.outputs
              if COPY_CLASS in o.data.get("text/html", "")]
    # shown as the turn starts, then replaced by its final form (display_id)
    assert len(views) == len(copies) == 2
    lines = [view["text/plain"].split("\n") for view in views]
    assert [first for first, *_ in lines] == [
        f"fragola_nb turn panel of 'calculator', no message yet{SEE}",
        f"fragola_nb turn panel of 'calculator', messages #0 to #1{SEE}"]
    # the turn done, a line says where its time went, in the copy too (issue 34)
    assert len(lines[0]) == 1 and len(lines[1]) == 2
    timed = lines[1][1]
    assert re.fullmatch(r"timeline · turn \S+ m?s · model \S+ m?s \(\d+%\) · tools \S+ m?s "
                        r"\(\d+%\) · between calls \S+ m?s \(\d+%\)( · [\d,]+ tokens/s)?",
                        timed), timed
    assert f'<p class="fragola-timeline"><small>{html.escape(timed)}</small></p>' in copies[1]
    for (first, *_), copy in zip(lines, copies, strict=True):
        what = first.removeprefix("fragola_nb ").removesuffix(SEE)
        note = html.escape(f"static copy of the {what}, as saved")
        assert f'<p class="fragola-static-note"><small>{note}</small></p>' in copy
