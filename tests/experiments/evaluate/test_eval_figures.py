"""Issue 33 (items 2, 5, 9, 10): an evaluation's figures say the same everywhere. One
rounding for every percentage (title, header, static table, diff); one cost, the judges'
calls included; "x% of N run" when rows did not run; cache hits filling in after a budget
is spent; no dollar figure for calls nobody paid for (the scripted model, a replay); and a
diff that says when answers changed though the verdicts did not."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.helpers import make_fragola

from fragola_nb import Budget, Fragola, RateLimit, SimulatedUser
from fragola_nb.base.figures import percent
from fragola_nb.core.usage import format_cost
from fragola_nb.experiments.evaluate.htmlview import evaluation_html, head_facts
from fragola_nb.graders import contains, judge
from fragola_nb.models.scripted import Item, ScriptedModel, demo_brain, reply
from fragola_nb.notebook.evaluate.view import EvalView, matrix_cells

PRICES = {"priced-model": {"input": 1.0, "output": 2.0}}


def said(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


def odd_fails(request: dict[str, Any]) -> Item:
    """Case ``n`` passes (says "Paris") unless ``n`` is one of 1, 3, 5 (of 0..7): 5 of 8."""
    if "[fragola_nb judge]" in str(request["messages"][0]["content"]):
        return demo_brain(request)  # type: ignore[no-any-return]
    number = int(said(request).split()[-1])
    system = str(request["messages"][0]["content"])
    mood = "formal" if "formal" in system else "plain"
    return reply(f"{'London' if number in (1, 3, 5) else 'Paris'} ({mood}) {number}")


def test_one_rounding_for_every_percentage() -> None:
    # 0.625: Python's format rounds it to 62%, JavaScript's Math.round to 63%: one rule now
    assert [percent(r) for r in (0.625, 0.285, 5 / 8, 2 / 3, 1.0, 0.0, None)] == [
        "63%", "29%", "63%", "67%", "100%", "0%", "–"]


async def test_title_header_static_table_and_diff_round_a_pass_rate_alike(
        model: ScriptedModel) -> None:
    model.brain = odd_fails
    agent = make_fragola(model).agent("geo")
    cases = [f"capital of France, case {n}" for n in range(8)]
    evaluation = await agent.evaluate(cases, graders=[contains("Paris")], progress=False)
    assert evaluation.summary()[0]["pass_rate"] == 0.625
    assert "base 63% passed" in repr(evaluation)
    view = EvalView(evaluation)
    try:
        assert view.matrix.head["variants"][0]["rate_text"] == "63% passed"
        assert "base 63% passed" in view.matrix.head["title"]
    finally:
        view.close()
    html = evaluation_html(evaluation)
    assert "63%" in html and "62%" not in html
    diff = evaluation.diff(evaluation)
    assert head_facts(evaluation)[0]["rate"] == "63% → 63% passed"
    assert "62%" not in diff._repr_html_() + evaluation_html(evaluation)


@pytest.mark.parametrize(("usd", "shown"), [
    (0.00010094, "$0.0001"), (0.000435, "$0.00044"), (0.05, "$0.05"), (0.5, "$0.50"),
    (12.345, "$12.35"), (1234.4, "$1,234"), (0.0, "$0.00"), (1e-9, "<$0.000001")])
def test_costs_of_any_magnitude_read_short(usd: float, shown: str) -> None:
    assert format_cost(usd) == shown


async def test_one_cost_in_the_title_the_judges_included_the_split_in_the_summary(
        model: ScriptedModel) -> None:
    model.brain = odd_fails
    fragola = make_fragola(model, prices=PRICES, model="priced-model")
    agent = fragola.agent("geo")
    evaluation = await agent.evaluate(
        [f"capital of France, case {n}" for n in range(4)],
        graders=[contains("Paris"), judge('Names "Paris".')], progress=False)
    [line] = evaluation.summary()
    assert line["cost"] > 0 and line["judge_cost"] > 0
    assert line["total_cost"] == pytest.approx(line["cost"] + line["judge_cost"])
    total = (evaluation.usage + evaluation.judge_usage).cost
    assert total == pytest.approx(line["total_cost"])
    title = repr(evaluation)
    assert f", {format_cost(total)};" in title  # the one figure: what was paid
    assert len(re.findall(r"\$[\d.,]+", title)) == 1, title
    assert line["cost_text"] == format_cost(total)
    assert head_facts(evaluation)[0]["cost"] == format_cost(total)


async def test_pass_rates_over_the_rows_that_ran_say_so_after_a_budget_stop(
        model: ScriptedModel) -> None:
    model.brain = odd_fails
    agent = make_fragola(model).agent("geo")
    evaluation = await agent.evaluate([f"capital of France, case {n}" for n in range(8)],
                                      graders=[contains("Paris")], concurrency=1,
                                      budget=Budget(tokens=40), progress=False)
    [line] = evaluation.summary()
    assert 0 < line["ran"] < 8
    rate = f"{percent(line['pass_rate'])} of {line['ran']} run"
    assert f"base {rate}" in repr(evaluation)
    facts = head_facts(evaluation)[0]
    assert facts["rate"] == rate and facts["left"] == f"{8 - line['ran']} not run"
    html = evaluation_html(evaluation)
    assert rate in html and f"{8 - line['ran']} not run" in html


async def test_cache_hits_keep_filling_in_after_the_budget_is_spent(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.brain = odd_fails
    cases = [f"capital of France, case {n}" for n in range(6)]
    variants = {"plain": {}, "formal": {"instructions": "Be formal."}}
    path = tmp_path / "cache.jsonl"
    first = Fragola.cached(path, "priced-model", api_key="k", base_url=model.base_url,
                           max_retries=0)
    await first.agent("geo").evaluate(cases, {"plain": {}}, progress=False)  # plain cached
    sent = len(model.requests)
    again = Fragola.cached(path, "priced-model", api_key="k", base_url=model.base_url,
                           max_retries=0)
    evaluation = await again.agent("geo").evaluate(
        cases, variants, graders=[contains("Paris")], concurrency=1,
        budget=Budget(tokens=1), progress=False)
    plain = [row for row in evaluation if row.variant == "plain"]
    formal = [row for row in evaluation if row.variant == "formal"]
    assert all(row.status == "done" and row.cached for row in plain), plain
    assert [row.status for row in formal] == ["done"] + ["not run"] * 5
    assert all((row.error or "").startswith("not run: budget") for row in formal[1:])
    assert len(model.requests) == sent + 1  # the one paid call; the misses were not sent
    assert evaluation.summary()[0]["pass_rate"] == 3 / 6  # cases 1, 3, 5 fail
    assert "formal 100% of 1 run" in repr(evaluation)


async def test_no_dollar_figure_for_offline_calls_priced_as_when_given_a_price() -> None:
    # gpt-4o-mini has a listed price: before, the scripted model's calls showed "$0.000011"
    offline = Fragola.scripted(model="gpt-4o-mini")
    priced = Fragola.scripted(model="priced-model", prices=PRICES)
    try:
        for fragola in (offline, priced):
            agent = fragola.agent("tutor")
            await agent.user_message("hello")
            assert agent.usage.cost == 0.0 and agent.usage.offline_calls == 1
            assert agent.usage.unpaid is not None and agent.usage.unpaid > 0
            results = await agent.batch(["a", "b"], progress=False)
            evaluation = await agent.evaluate(["a"], progress=False)
            shown = [agent.usage.summary(), results.summary(), repr(evaluation),
                     evaluation_html(evaluation), evaluation.summary()[0]["cost_text"]]
            if fragola is offline:
                assert not any("$" in text for text in shown), shown
            else:
                unpaid = format_cost(agent.usage.unpaid)
                assert f"priced as {unpaid}, not paid" in agent.usage.summary()
                assert all("$" not in text or "not paid" in text for text in shown), shown
    finally:
        await offline.aclose()
        await priced.aclose()


async def test_a_usd_budget_still_stops_an_offline_run() -> None:
    fragola = Fragola.scripted(model="priced-model", prices=PRICES)
    try:
        agent = fragola.agent("tutor")
        evaluation = await agent.evaluate([f"q{n}" for n in range(6)], concurrency=1,
                                          budget=Budget(usd=0.00001), progress=False)
        assert evaluation.stopped and "budget" in (evaluation.why_stopped or "")
        assert evaluation.usage.cost == 0.0  # rehearsed at its price, nothing paid
    finally:
        await fragola.aclose()


async def test_a_diff_says_answers_changed_though_every_verdict_held(
        model: ScriptedModel) -> None:
    model.brain = odd_fails
    agent = make_fragola(model).agent("geo")
    cases = [f"capital of France, case {n}" for n in (0, 2, 4)]
    before = await agent.evaluate(cases, {"v": {}}, graders=[contains("Paris")],
                                  progress=False)
    after = await agent.evaluate(cases, {"v": {"instructions": "Be formal."}},
                                 graders=[contains("Paris")], progress=False)
    diff = after.diff(before)
    assert diff.totals["unchanged"] == 3 and diff.answers_changed == 3
    assert "3 unchanged (other answers in 3)" in repr(diff)
    assert all(c.answers_changed for c in diff.changes)
    assert "unchanged, other answers" in diff._repr_html_()
    assert [cell[2] for cell in matrix_cells(after)] == ["other answers"] * 3
    assert head_facts(after)[0]["rate"] == "100% → 100% passed"
    same = (await agent.evaluate(cases, {"v": {}}, graders=[contains("Paris")],
                                 progress=False)).diff(before)
    assert same.answers_changed == 0 and "other answers" not in repr(same)


async def test_the_header_shows_the_pass_rate_before_and_after(model: ScriptedModel) -> None:
    model.brain = odd_fails
    agent = make_fragola(model).agent("geo")
    good = await agent.evaluate(["capital of France, case 0"], graders=[contains("Paris")],
                                progress=False)
    bad = await agent.evaluate(["capital of France, case 0"], graders=[contains("London")],
                               progress=False)
    bad.diff(good)
    assert head_facts(bad)[0]["rate"] == "100% → 0% passed"
    assert "100% → 0% passed" in evaluation_html(bad)


async def test_a_replay_costs_nothing_and_shows_no_dollar_figure(model: ScriptedModel,
                                                                 tmp_path: Path) -> None:
    model.brain = odd_fails
    path = tmp_path / "lesson.jsonl"
    recorder = Fragola.record(path, model="gpt-4o-mini", api_key="k", base_url=model.base_url,
                              max_retries=0)
    paid = recorder.agent("tutor")
    await paid.user_message("capital of France, case 0")
    assert paid.usage.cost is not None and paid.usage.cost > 0  # recorded on a "real" API
    assert "$" in paid.usage.summary()
    replayed = Fragola.replay(path)
    try:
        agent = replayed.agent("tutor")
        await agent.user_message("capital of France, case 0")
        assert agent.usage.calls[0].offline and agent.usage.cost == 0.0
        assert agent.usage.unpaid == pytest.approx(paid.usage.cost)
        assert "$" not in agent.usage.summary()
    finally:
        await replayed.aclose()


async def test_a_saved_offline_session_loads_back_unpaid(tmp_path: Path) -> None:
    from fragola_nb import load_session, save_session

    fragola = Fragola.scripted(model="priced-model", prices=PRICES)
    try:
        agent = fragola.agent("tutor")
        await agent.user_message("hello")
        save_session(tmp_path / "s.json", agent)
        loaded = load_session(tmp_path / "s.json", fragola)["tutor"]
        assert loaded.usage == agent.usage and loaded.usage.calls[0].offline
        assert loaded.usage.cost == 0.0 and loaded.usage.unpaid == agent.usage.unpaid
        assert "not paid" in loaded.usage.summary()
    finally:
        await fragola.aclose()


async def test_hits_waiting_their_turn_under_a_rate_limit_fill_in_once_the_budget_is_spent(
        model: ScriptedModel, tmp_path: Path) -> None:
    # One request a second: the two cached cases wait their turn while the new one (a miss,
    # sent first) spends the budget; as they go out they are hits, answered at no cost.
    model.brain = odd_fails
    path = tmp_path / "cache.jsonl"
    cached = [f"capital of France, case {n}" for n in (2, 4)]
    first = Fragola.cached(path, "priced-model", api_key="k", base_url=model.base_url,
                           max_retries=0)
    await first.agent("geo").evaluate(cached, progress=False)
    sent = len(model.requests)
    again = Fragola.cached(path, "priced-model", api_key="k", base_url=model.base_url,
                           max_retries=0, rate_limit=RateLimit(rpm=60))
    evaluation = await again.agent("geo").evaluate(
        ["capital of France, case 0", *cached], concurrency=3, budget=Budget(tokens=1),
        progress=False)
    assert [row.status for row in evaluation] == ["done"] * 3, list(evaluation)
    assert [row.cached for row in evaluation] == [False, True, True]
    assert len(model.requests) == sent + 1  # the one paid call


async def test_a_simulated_user_cut_by_the_budget_leaves_its_row_not_run(
        model: ScriptedModel, tmp_path: Path) -> None:
    # The first case spends the budget; on Fragola.cached the next rows still start (hits
    # cost nothing), and the simulated user's first call is a miss, not sent: the row did
    # not run (it runs on resume), rather than "failed" as if the user had nothing to say.
    model.brain = demo_brain
    fragola = Fragola.cached(tmp_path / "cache.jsonl", "priced-model", api_key="k",
                             base_url=model.base_url, max_retries=0)
    evaluation = await fragola.agent("geo").evaluate(
        ["capital of France?", {"user": SimulatedUser('Ask "hi" then "ho"')}],
        graders=[contains("Paris")], concurrency=1, budget=Budget(tokens=1), progress=False)
    first, talked = evaluation
    assert first.status == "done" and len(model.requests) == 1
    assert talked.status == "not run" and talked.grades == ()
    assert (talked.error or "").startswith("not run: budget (budget spent: ")
    assert "0% of 1 run" in repr(evaluation)
