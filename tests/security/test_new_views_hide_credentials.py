"""Issue 32, class 1, for the writers and views added after it: the verdict lines, the
setup changes and diff texts, the header facts, labels and their notes (and ``human(path)``),
``judge_pairs``, the trajectory detail of a conversation and a simulated user's turns, the
rows' reprs and their ``tool_calls``/``answers``/``turns`` in ``table``, ``to_pandas`` and
``save``. The server quotes back the agent's key, a variant's ``extra_headers`` key, a judge's,
a simulated user's and a pairwise judge's (``quoting_api``); no whole key nor its first
half is shown or written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.quoting_api import AGENT_KEY, JUDGE_KEY, KEYS, VARIANTS, QuotingAPI, fragola_on

from fragola_nb import SimulatedUser
from fragola_nb.experiments.evaluate.evaluation import Evaluation
from fragola_nb.experiments.evaluate.htmlview import head_facts, verdicts_html
from fragola_nb.experiments.evaluate.setups import setup_changes
from fragola_nb.experiments.evaluate.versus import verdict_lines
from fragola_nb.graders import human, judge
from fragola_nb.notebook.evaluate.verdicts import verdict_data
from fragola_nb.notebook.evaluate.view import EvalView

SIM_KEY = "simuser-gw-8Rk2Vb6Np3Yq"
PAIR_KEY = "pair-gw-5Jm9Tc2Lx7Wd"
ALL = (*KEYS, SIM_KEY, PAIR_KEY)


def leaks(where: str, text: str) -> list[str]:
    """Each key found whole, or its first half (a view that cut a key in two)."""
    return [f"{where}: {key}" for key in ALL if key[:len(key) // 2] in text]


async def evaluated(api: QuotingAPI) -> tuple[Evaluation, Evaluation]:
    agent = fragola_on(api, AGENT_KEY).agent("evaluated")
    graders = [judge("polite?", fragola=fragola_on(api, JUDGE_KEY))]
    # 95 "#": the reply's key starts 107 characters in, where the detail cuts a turn (120).
    cases: list[Any] = ["hi", {"turns": ["#" * 95 + " long", "hi again"]},
                        {"user": SimulatedUser("say hi", fragola=fragola_on(api, SIM_KEY),
                                               max_turns=2)}]
    baseline = await agent.evaluate(cases[:1], VARIANTS, graders=graders, progress=False)
    evaluation = await agent.evaluate(cases, VARIANTS, graders=graders, progress=False)
    return baseline, evaluation


async def test_new_texts_files_and_reprs_hold_no_key_the_server_quoted(
        api: QuotingAPI, tmp_path: Path) -> None:
    baseline, evaluation = await evaluated(api)
    assert AGENT_KEY in "".join(str(a) for row in evaluation for a in row.answers)
    assert JUDGE_KEY not in json.dumps(evaluation.table(), default=str)
    evaluation.label(1, False, note=f"it said {AGENT_KEY}")
    versus = await evaluation.judge_pairs("plain", "proxied", "better?",
                                          fragola=fragola_on(api, PAIR_KEY))
    diff = evaluation.diff(baseline)
    saved = evaluation.save(tmp_path / "e.json")
    labels = human(saved)
    found = leaks("rows", "".join(repr(row) + repr(row.label) for row in evaluation))
    found += leaks("verdicts", "\n".join(verdict_lines(evaluation))
                   + verdicts_html(evaluation) + repr(evaluation.verdicts()))
    found += leaks("facts", json.dumps(head_facts(evaluation), default=str))
    found += leaks("diff", "\n".join(diff.lines()) + repr(diff) + diff._repr_html_()
                   + "\n".join(setup_changes(baseline, evaluation)))
    assert "fx-eval-trail" in evaluation._repr_html_()  # the turns, replies quoting keys
    found += leaks("evaluation", repr(evaluation) + evaluation._repr_html_())
    found += leaks("judge_pairs", repr(versus) + versus.line())
    found += leaks("table", json.dumps(evaluation.table(), default=str)
                   + evaluation.to_pandas().to_csv())
    found += leaks("save", saved.read_text())
    assert labels.book
    found += leaks("human", repr(dict(labels.book)))
    found += leaks("verdict view", json.dumps(verdict_data(evaluation), default=str))
    assert found == []


async def test_the_trajectory_detail_cuts_no_key_in_half(api: QuotingAPI) -> None:
    _, evaluation = await evaluated(api)
    view = EvalView(evaluation)
    try:
        found = []
        for case in range(evaluation.cases):
            for variant in range(len(VARIANTS)):
                view.matrix.selected = [case, variant, 0]
                found += leaks(f"cell {case} {variant}",
                               json.dumps(view.get_state(), default=repr, ensure_ascii=False)
                               + json.dumps(view.matrix.get_state(), default=repr,
                                            ensure_ascii=False))
        assert found == []
    finally:
        view.close()


HOSTILE = ("\u202e</script><script>alert(1)</script><img src=x onerror=alert(1)> "
           "[x](javascript:alert(1)) a\u200bb")
UNSEEN = ("\u202e", "\u200b", "\ud800")
"""Written out by every view and text repr (``render.visible``): a bidi override, a zero-width
space, half an emoji (which no UTF-8 message to the browser can carry)."""


async def test_hostile_names_notes_and_answers_are_escaped_and_visible(api: QuotingAPI) -> None:
    agent = fragola_on(api, AGENT_KEY).agent("evaluated")
    variants: dict[str, Any] = {"plain": {}, "x\ud800" + HOSTILE[:30]: {}}
    graders = [judge("polite?", fragola=fragola_on(api, JUDGE_KEY))]
    baseline = await agent.evaluate([HOSTILE], variants, graders=graders, progress=False)
    evaluation = await agent.evaluate([HOSTILE, {"turns": [HOSTILE, "again " + HOSTILE]}],
                                      variants, graders=graders, progress=False)
    evaluation.label(0, False, note=HOSTILE + "\ud800")
    versus = await evaluation.judge_pairs("plain", list(variants)[1], "better? " + HOSTILE,
                                          fragola=fragola_on(api, PAIR_KEY))
    diff = evaluation.diff(baseline)
    pages = {"evaluation html": evaluation._repr_html_(), "diff html": diff._repr_html_()}
    for where, page in pages.items():
        assert not any(bad in page for bad in ("<script", "<img", 'href="javascript')), where
    texts = {**pages, "evaluation repr": repr(evaluation), "diff repr": repr(diff),
             "versus repr": repr(versus), "rows": repr(list(evaluation)),
             "verdict view": json.dumps(verdict_data(evaluation), ensure_ascii=False)}
    view = EvalView(evaluation)
    try:
        for case in range(evaluation.cases):
            for variant in range(len(variants)):
                view.matrix.selected = [case, variant, 0]
                texts[f"cell {case} {variant}"] = json.dumps(
                    [view.get_state(), view.matrix.get_state()], default=repr, ensure_ascii=False)
    finally:
        view.close()
    assert [(where, bad) for where, text in texts.items() for bad in UNSEEN if bad in text] == []
    assert all(text.encode("utf-8") for text in texts.values())
