"""``agent.evaluate``: cases × variants × repeats on forks, graded; summary, pass@k/pass^k,
save/load, diff against a baseline, resume, stop, and no credential in what it writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.eval_world import KEY, VARIANTS, brain, eval_agent, last_user
from support.helpers import assert_valid_history

from fragola_nb import BadUsage, Fragola
from fragola_nb.experiments.evaluate.evaluation import Evaluation
from fragola_nb.graders import Grade, GradedRow, contains, tool_called
from fragola_nb.models.scripted import Item, ScriptedModel, reply


async def test_cases_variants_repeats_each_on_its_own_fork_in_order(model: ScriptedModel) -> None:
    agent = eval_agent(model)
    before = list(agent.state.messages)
    cases = ["one", {"input": "capital of {country}?", "expected": "Paris", "country": "France"}]
    evaluation = await agent.evaluate(cases, VARIANTS, graders=[contains("calm")], repeat=2,
                                      progress=False)
    assert [(r.case, r.variant, r.repeat) for r in evaluation] == [
        (c, v, r) for c in (0, 1) for v in ("calm", "loud") for r in (0, 1)]
    assert evaluation[2].input == "one" and evaluation[4].input == "capital of France?"
    assert evaluation[4].expected == "Paris" and evaluation[4].vars == {"country": "France"}
    assert {r.answer for r in evaluation if r.variant == "loud"} == {"LOUD: one",
                                                                     "LOUD: capital of France?"}
    assert [r.passed for r in evaluation] == [True, True, False, False] * 2
    # the agent is left as it was, its forks are kept by the rows and are in no tree
    assert agent.state.messages == before and not agent.forks and agent.usage.requests == 0
    for row in evaluation:
        assert row.fork is not None and row.fork.fork_of == agent.id
        assert row.fork.state.messages[:len(before)] == before
        assert_valid_history(row.fork.state.messages)
    assert len(model.requests) == 8
    summary = {line["variant"]: line for line in evaluation.summary()}
    assert summary["calm"]["pass_rate"] == 1.0 and summary["loud"]["pass_rate"] == 0.0
    assert summary["calm"]["graders"] == {"contains('calm')": 1.0}
    assert summary["calm"]["tokens"] == sum(r.tokens or 0 for r in evaluation
                                            if r.variant == "calm")
    assert "2 cases × 2 variants × 2 repeats: calm 100% passed, loud 0% passed" in repr(
        evaluation)


async def test_pass_at_k_and_pass_all_k_over_repeats(model: ScriptedModel) -> None:
    agent = eval_agent(model)
    brain.asked = 0  # type: ignore[attr-defined]
    evaluation = await agent.evaluate(["flaky", "plain"], graders=[contains("right")],
                                      repeat=2, concurrency=1, progress=False)
    (line,) = evaluation.summary()
    assert line["variant"] == "base"
    # flaky: right then wrong (passed at least once, not always); plain: never
    assert [r.passed for r in evaluation] == [True, False, False, False]
    assert line["pass_at_k"] == 0.5 and line["pass_all_k"] == 0.0
    assert line["pass_rate"] == 0.25


async def test_graders_read_the_row_and_a_raising_one_is_a_failed_grade(
        model: ScriptedModel) -> None:
    agent = eval_agent(model)
    seen: list[GradedRow] = []

    async def judge_len(row: GradedRow) -> float:
        seen.append(row)
        return 0.25

    def broken(row: GradedRow) -> Grade:
        raise RuntimeError(f"grader broke with {KEY}")

    evaluation = await agent.evaluate(
        [{"input": "weather please", "expected": 3, "tag": "w"}],
        graders=[tool_called("forecast", city="Oslo"), judge_len, broken,
                 lambda row: None], progress=False)
    (row,) = evaluation
    assert row.status == "done" and row.answer == "calm: it is sunny"
    assert [(g.name, g.passed) for g in row.grades] == [
        ("tool_called('forecast', city='Oslo')", True), ("judge_len", False), ("broken", False)]
    assert row.grade("broken") is not None
    assert row.grade("broken").reason == "RuntimeError: grader broke with [redacted]"  # type: ignore[union-attr]
    assert row.score == pytest.approx((1 + 0.25 + 0) / 3)
    (graded,) = seen
    assert graded.tool_calls == ({"name": "forecast", "arguments": {"city": "Oslo"},
                                  "result": "sun in {'city': 'Oslo'}"},)
    assert graded.expected == 3 and graded.vars == {"tag": "w"} and graded.fork is row.fork
    assert graded.usage.requests == 2 and graded.seconds is not None


async def test_bad_cases_and_options_fail_before_anything_is_sent(model: ScriptedModel) -> None:
    agent = eval_agent(model)
    for cases, message in [
        ("one", "cases must be a list"), ([], "cases is empty"),
        ([{"expected": 1}], "case 0: a dict case needs an 'input' key"),
        ([{"input": "hi {name}"}], "case 0: the input names {name}"),
        (["ok", 3], "case 1: a case is a string or a dict"),
    ]:
        with pytest.raises(BadUsage, match=message.replace("{", r"\{").replace("}", r"\}")):
            await agent.evaluate(cases, progress=False)
    with pytest.raises(BadUsage, match="repeat must be a whole number"):
        await agent.evaluate(["a"], repeat=0, progress=False)
    with pytest.raises(BadUsage, match="variant 'x': unknown key"):
        await agent.evaluate(["a"], {"x": {"temperature": 1}}, progress=False)
    with pytest.raises(BadUsage):
        await agent.evaluate(["a"], graders=["not a grader"], progress=False)
    assert model.requests == [] and not agent.forks


async def test_a_dataframe_of_cases(model: ScriptedModel) -> None:
    pandas = pytest.importorskip("pandas")
    agent = eval_agent(model)
    frame = pandas.DataFrame({"input": ["say {word}", "plain"], "word": ["hi", None]})
    evaluation = await agent.evaluate(frame, progress=False)
    assert [r.input for r in evaluation] == ["say hi", "plain"]
    table = evaluation.to_pandas()
    assert list(table["status"]) == ["done", "done"] and list(table["passed"]) == [True, True]


async def test_save_load_and_diff_against_a_baseline(model: ScriptedModel, tmp_path: Path
                                                     ) -> None:
    agent = eval_agent(model)
    first = await agent.evaluate(["one", "two", "three"], VARIANTS,
                                 graders=[contains("calm")], progress=False)
    path = first.save(tmp_path / "run0.json")
    again = Evaluation.load(path)
    assert again.variants == ("calm", "loud") and again.graders == ("contains('calm')",)
    assert [(r.case, r.variant, r.passed, r.answer, r.tokens) for r in again] == [
        (r.case, r.variant, r.passed, r.answer, r.tokens) for r in first]
    assert all(r.resumed and r.fork is None for r in again)
    pandas = pytest.importorskip("pandas")
    assert len(pandas.read_json(path)) == 6  # the file is a list of rows pandas reads

    # the prompt changes: "loud" now passes, "calm" fails; a case is gone, one is new
    second = await agent.evaluate(["two", "three", "four"],
                                  {"calm": {"instructions": "LOUD"},
                                   "loud": {"instructions": "calm"}},
                                  graders=[contains("calm")], progress=False)
    diff = second.diff(path)
    assert diff.totals == {"improved": 2, "regressed": 2, "unchanged": 0, "new": 2, "gone": 2}
    assert {(c.input, c.variant) for c in diff.regressed} == {("two", "calm"),
                                                             ("three", "calm")}
    change = diff.of(0, "loud")
    assert change is not None and (change.before, change.after, change.change) == (
        0.0, 1.0, "improved")
    assert second.baseline is diff
    assert "improved" in second._repr_html_()


async def test_load_refuses_what_is_not_an_evaluation(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"a": 1}')
    with pytest.raises(BadUsage, match="is not an evaluation file"):
        Evaluation.load(bad)
    bad.write_text("[not json")
    with pytest.raises(BadUsage, match="is not an evaluation file"):
        Evaluation.load(bad)
    assert bad.read_text() == "[not json"
    with pytest.raises(BadUsage, match="no evaluation file"):
        Evaluation.load(tmp_path / "missing.json")


async def test_no_credential_in_rows_files_or_html(model: ScriptedModel, tmp_path: Path
                                                  ) -> None:
    model.brain = brain
    keyed = Fragola(api_key=KEY, base_url=model.base_url, max_retries=0).agent(name="k")
    evaluation = await keyed.evaluate(["leak", {"input": "x", "api_key": KEY}],
                                      graders=[contains("key")], resume=tmp_path / "r.jsonl",
                                      progress=False)
    assert evaluation[0].answer == f"the key is {KEY}"  # the row holds what the model said
    saved = evaluation.save(tmp_path / "e.json").read_text()
    for text in (saved, (tmp_path / "r.jsonl").read_text(), evaluation._repr_html_(),
                 repr(evaluation)):
        assert KEY not in text
    assert "[redacted]" in saved


async def test_resume_never_runs_a_done_row_again(model: ScriptedModel, tmp_path: Path) -> None:
    agent = eval_agent(model)
    path = tmp_path / "rows.jsonl"
    first = await agent.evaluate(["one", "two"], VARIANTS, graders=[contains("calm")],
                                 resume=path, progress=False)
    sent = len(model.requests)
    assert sent == 4 and len(path.read_text().splitlines()) == 5  # the run's line + 4 rows
    again = await agent.evaluate(["one", "two"], VARIANTS, graders=[contains("calm")],
                                 resume=path, progress=False)
    assert len(model.requests) == sent
    assert [(r.passed, r.answer) for r in again] == [(r.passed, r.answer) for r in first]
    assert all(r.resumed for r in again)
    more = await agent.evaluate(["one", "two"], VARIANTS, graders=[contains("calm")],
                                repeat=2, resume=path, progress=False)
    assert len(model.requests) == sent + 4 and [r.resumed for r in more] == [
        True, False] * 4
    with pytest.raises(BadUsage, match="other graders"):
        await agent.evaluate(["one", "two"], VARIANTS, graders=[contains("x")], resume=path,
                             progress=False)
    with pytest.raises(BadUsage, match="other cases"):
        await agent.evaluate(["one"], VARIANTS, graders=[contains("calm")], resume=path,
                             progress=False)
    torn = path.read_bytes()
    path.write_bytes(torn + b'{"case": 0, "inp')  # a crash in the middle of a row
    await agent.evaluate(["one", "two"], VARIANTS, graders=[contains("calm")], repeat=2,
                         resume=path, progress=False)
    assert path.read_bytes() == torn
    path.write_bytes(torn + b"garbage\n")
    with pytest.raises(BadUsage, match="line 10, is not JSON"):
        await agent.evaluate(["one", "two"], VARIANTS, graders=[contains("calm")], repeat=2,
                             resume=path, progress=False)
    assert path.read_bytes() == torn + b"garbage\n"


async def test_stop_starts_nothing_more_and_the_rest_is_not_run(model: ScriptedModel) -> None:
    agent = eval_agent(model)
    stopped: list[str] = []

    def stop_after_first(row: GradedRow) -> bool:
        if not stopped:
            stopped.append(row.input if isinstance(row.input, str) else "")
            agent.stop()
        return True

    evaluation = await agent.evaluate([f"q{i}" for i in range(6)], graders=[stop_after_first],
                                      concurrency=1, progress=False)
    assert [r.status for r in evaluation] == ["done"] + ["not run"] * 5
    assert evaluation[1].error is not None and evaluation[1].error.startswith("not run")
    assert evaluation.stopped and len(model.requests) == 1
    assert json.loads(json.dumps(evaluation.table()))[0]["passed"] is True


async def test_repeats_through_a_cache_pay_once_then_replay(model: ScriptedModel, tmp_path: Path
                                                           ) -> None:
    model.brain = brain
    path = tmp_path / "cache.jsonl"

    async def run() -> Evaluation:
        fragola = Fragola.cached(path, model="m", api_key="k-test", base_url=model.base_url,
                                 max_retries=0)
        return await fragola.agent(name="c", instructions="calm").evaluate(
            ["one", "two"], graders=[contains("calm")], repeat=3, progress=False)

    first = await run()
    assert len(model.requests) == 6  # three real samples of each case
    assert not any(row.cached for row in first)
    again = await run()
    assert len(model.requests) == 6  # all six replayed
    assert all(row.cached for row in again)
    assert [r.answer for r in again] == [r.answer for r in first]
    assert again.summary()[0]["cached_calls"] == 6


async def test_batch_and_compare_take_graders_and_repeat(model: ScriptedModel) -> None:
    agent = eval_agent(model)
    result = await agent.batch(["a", "b"], graders=[contains("calm: a")], repeat=2,
                               progress=False)
    assert [(row.input, row.repeat, row.passed) for row in result] == [
        ("a", 0, True), ("a", 1, True), ("b", 0, False), ("b", 1, False)]
    assert result[2].grades[0].reason and result[0].score == 1.0
    assert "2/4 passed" in result.summary()
    assert list(result.to_pandas().columns) == [
        "input", "repeat", "answer", "error", "status", "tokens", "seconds", "passed",
        "score", "fork"]

    comparison = await agent.compare("q", VARIANTS, graders=[contains("LOUD")], repeat=2)
    rows = comparison.table()
    assert [(row["variant"], row["repeat"], row["passed"]) for row in rows] == [
        ("calm", 0, False), ("calm#2", 1, False), ("loud", 0, True), ("loud#2", 1, True)]
    assert rows[0]["grades"]["contains('LOUD')"]["reason"]
    assert set(comparison) == {"calm", "calm#2", "loud", "loud#2"}
    with pytest.raises(BadUsage, match="repeat"):
        await agent.compare("q", VARIANTS, repeat=-1)


async def test_a_budget_stops_the_evaluation_and_the_rest_is_not_run(model: ScriptedModel
                                                                     ) -> None:
    from fragola_nb import Budget

    agent = eval_agent(model)
    evaluation = await agent.evaluate([f"q{i}" for i in range(6)], graders=[contains("calm")],
                                      concurrency=1, budget=Budget(tokens=15), progress=False)
    statuses = [row.status for row in evaluation]
    ran = statuses.count("done")
    assert 1 <= ran < 6 and statuses == ["done"] * ran + ["not run"] * (6 - ran)
    assert len(model.requests) == ran
    spent = evaluation.usage.total_tokens
    assert spent >= 15 and spent - (evaluation[ran - 1].tokens or 0) < 15  # the last run crossed it
    assert evaluation[ran].error is not None
    assert evaluation[ran].error.startswith("not run: budget (budget spent: ")
    assert evaluation.stopped and evaluation.why_stopped is not None
    assert "stopped (budget: budget spent" in repr(evaluation)
    with pytest.raises(BadUsage, match="no known price"):
        await agent.evaluate(["q"], {"odd": {"model": "model-without-a-price"}},
                             budget=Budget(usd=0.01), progress=False)
    assert len(model.requests) == ran


def hanging(request: dict[str, Any]) -> Item:
    """``hang`` waits for a release that never comes; anything else is answered at once."""
    from fragola_nb.models.scripted import hang

    text = last_user(request)
    return hang(then=reply(f"late {text}")) if "hang" in text else reply(f"calm: {text}")


async def test_stop_sync_stops_the_running_runs_and_keeps_the_finished(
        model: ScriptedModel) -> None:
    import asyncio

    agent = eval_agent(model)
    model.brain = hanging
    task = asyncio.ensure_future(agent.evaluate(["quick", "hang 1", "hang 2", "never"],
                                                graders=[contains("calm")], concurrency=2,
                                                progress=False))
    assert await asyncio.to_thread(model.wait_for_requests, 3)
    agent.stop_sync()
    evaluation = await task
    assert [row.status for row in evaluation] == ["done", "stopped", "stopped", "not run"]
    assert evaluation[0].passed is True and evaluation[1].passed is None
    for row in evaluation[1:3]:
        assert row.fork is not None and row.fork.status == "idle" and row.grades == ()
        assert row.error is not None and row.error.startswith("stopped")
        assert_valid_history(row.fork.state.messages)
    assert evaluation.stopped and len(model.requests) == 3
    assert agent.experiments == () and agent.status == "idle"


async def test_an_interrupt_raises_and_the_finished_rows_are_in_the_resume_file(
        model: ScriptedModel, tmp_path: Path) -> None:
    import asyncio

    agent = eval_agent(model)
    model.brain = hanging
    path = tmp_path / "rows.jsonl"
    cases = ["quick", "hang 1", "hang 2", "never"]
    task = asyncio.ensure_future(agent.evaluate(cases, graders=[contains("calm")],
                                                concurrency=2, resume=path, progress=False))
    assert await asyncio.to_thread(model.wait_for_requests, 3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    rows = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert [(row["case"], row["status"]) for row in rows] == [(0, "done")]
    assert agent.experiments == () and agent.status == "idle"
    model.brain = brain
    sent = len(model.requests)
    again = await agent.evaluate(cases, graders=[contains("calm")], concurrency=2,
                                 resume=path, progress=False)
    assert len(model.requests) == sent + 3 and again[0].resumed
    assert [row.status for row in again] == ["done"] * 4
