"""A diff that knows noise from change (``versus``, ``flaky``, ``setup_changes``), human labels
(``label``, ``agreement``, ``graders.human()``) and the pairwise judge (``judge_pairs``), on
the scripted model behind the real client."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from scipy import stats
from support.eval_world import KEY, VARIANTS, brain, eval_agent, last_user

from fragola_nb import BadUsage, Fragola
from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.evaluate.evaluation import Evaluation
from fragola_nb.experiments.evaluate.labels import Label
from fragola_nb.experiments.graders.apply import graded_row
from fragola_nb.graders import Grade, contains, human
from fragola_nb.models.scripted import Item, ScriptedModel, reply

# -- the diff -------------------------------------------------------------------------------------


async def test_setup_changes_say_in_words_what_changed_and_survive_save(
        model: ScriptedModel, tmp_path: Path) -> None:
    agent = eval_agent(model)
    first = await agent.evaluate(["one", {"input": "two", "expected": "2"}], VARIANTS,
                                 graders=[contains("calm")], progress=False)
    path = first.save(tmp_path / "run0.json")
    assert Evaluation.load(path).setup == first.setup
    assert set(first.setup or {}) == {"cases", "repeat", "variants"}

    changed = {"calm": {"instructions": "calm"},
               "loud": {"instructions": "LOUD and proud", "model_settings": {
                   "temperature": 0.5, "extra_headers": {"X-Key": "sk-secret-header-1234"}}}}
    second = await agent.evaluate(["one", {"input": "two", "expected": "two"}, "three", "four"],
                                  changed, graders=[contains("calm"), contains("LOUD")],
                                  progress=False)
    diff = second.diff(path)
    assert diff.setup_changes == [
        "2 cases added",
        "1 case changed (expected answer or tags)",
        "variant 'calm': grader \"contains('LOUD')\" added",
        "variant 'loud': instructions changed: LOUD {+and proud+}",
        "variant 'loud': setting temperature: unset → 0.5",
        "variant 'loud': grader \"contains('LOUD')\" added",
    ]
    assert "setup: variant 'loud': instructions changed" in repr(diff)
    assert "sk-secret-header" not in json.dumps(second.setup)
    assert "instructions changed: LOUD {+and proud+}" in diff._repr_html_()
    assert second.diff(second).setup_changes == []


async def test_a_key_in_the_instructions_is_hidden_in_the_setup_and_its_changes(
        model: ScriptedModel) -> None:
    model.brain = brain
    keyed = Fragola(api_key=KEY, base_url=model.base_url, max_retries=0).agent(name="k")
    first = await keyed.evaluate(["one"], {"v": {"instructions": f"use {KEY}"}},
                                 progress=False)
    second = await keyed.evaluate(["one"], {"v": {"instructions": f"use {KEY} now"}},
                                  progress=False)
    diff = second.diff(first)

    assert diff.setup_changes == ["variant 'v': instructions changed: use [redacted] {+now+}"]
    for shown in (json.dumps(second.setup), repr(diff), diff._repr_html_(), repr(second)):
        assert KEY not in shown


async def test_a_file_without_a_setup_says_so(model: ScriptedModel, tmp_path: Path) -> None:
    agent = eval_agent(model)
    first = await agent.evaluate(["one"], VARIANTS, progress=False)
    path = first.save(tmp_path / "old.json")
    data = json.loads(path.read_text())
    del data[0]["run"]["setup"]
    path.write_text(json.dumps(data))

    assert first.diff(path).setup_changes == [
        "the baseline has no setup recorded (saved before setups were kept): its "
        "instructions, models and tools cannot be compared"]


async def test_cells_whose_repeats_disagree_are_flaky_in_the_diff_and_the_table(
        model: ScriptedModel) -> None:
    agent = eval_agent(model)
    brain.asked = 0  # type: ignore[attr-defined]
    cases = ["flaky", "steady"]
    first = await agent.evaluate(cases, {"calm": {}}, graders=[contains("right")], repeat=2,
                                 concurrency=1, progress=False)
    assert [r.answer for r in first if r.case == 0] == ["right", "wrong"]
    assert [(t["case"], t["flaky"]) for t in first.table()] == [(0, True), (0, True),
                                                                (1, False), (1, False)]
    brain.asked = 1  # type: ignore[attr-defined]
    second = await agent.evaluate(cases, {"calm": {}}, graders=[contains("right")], repeat=2,
                                  concurrency=1, progress=False)
    diff = second.diff(first)
    flaky = diff.of(0, "calm")
    assert flaky is not None and flaky.flaky and flaky.change == "unchanged"
    steady = diff.of(1, "calm")
    assert steady is not None and not steady.flaky
    assert [c.input for c in diff.flaky] == ["flaky"]


def rows(variant: str, verdicts: str, prefix: str = "q") -> list[EvalRow]:
    return [EvalRow(case=i, input=f"{prefix}{i}", variant=variant, status="done", answer="x",
                    grades=(Grade("g", v == "1"),)) for i, v in enumerate(verdicts)]


def test_the_diff_compares_each_variant_with_its_baseline_over_the_shared_cases() -> None:
    before = Evaluation(rows("v", "0001010010") + rows("w", "1111111111"), variants=["v", "w"],
                        graders=["g"], repeat=1)
    # one case gone, one added: the test runs on the 9 cases both ran
    after = Evaluation([r for r in rows("v", "1111110101") if r.case != 9]
                       + rows("v", "1", prefix="new") + rows("w", "1111111111"),
                       variants=["v", "w"], graders=["g"], repeat=1)
    diff = after.diff(before)

    versus = diff.versus["v"]
    assert (versus.a, versus.b, versus.n) == ("v before", "v now", 9)
    assert (versus.wins, versus.ties, versus.losses) == (5, 3, 1)
    assert versus.test == "exact McNemar"
    assert versus.p_value == pytest.approx(stats.binomtest(5, 6).pvalue)
    assert diff.versus["w"].delta == 0 and diff.versus["w"].verdict == "not distinguishable"
    assert repr(diff).splitlines()[1].strip() == diff.versus["v"].line()
    assert "v now vs v before: +44 pts" in diff._repr_html_()


# -- labels ---------------------------------------------------------------------------------------


async def test_labels_show_on_rows_are_saved_and_refuse_bad_input(model: ScriptedModel,
                                                                  tmp_path: Path) -> None:
    agent = eval_agent(model)
    run = await agent.evaluate(["one", "two"], VARIANTS, graders=[contains("calm")],
                               progress=False)
    seen: list[int | None] = []
    run.subscribe(seen.append)

    done = run.label(run[1], False, note="  shouts <b>too</b> much ")
    assert done is run[1] and run[1].label == Label(False, "shouts <b>too</b> much")
    assert run.label(0, True).label == Label(True, "") and seen == [1, None, 0, None]
    assert run.table()[1]["label"] == {"passed": False, "note": "shouts <b>too</b> much"}
    loaded = Evaluation.load(run.save(tmp_path / "labelled.json"))
    assert [r.label for r in loaded] == [r.label for r in run]
    assert run.label(0, None).label is None

    with pytest.raises(BadUsage, match=r"no row 9 \(the evaluation has 4 rows\)"):
        run.label(9, True)
    with pytest.raises(BadUsage, match="passed is True, False or None"):
        run.label(0, "yes")  # type: ignore[arg-type]
    with pytest.raises(BadUsage, match="takes an EvalRow or its index"):
        run.label("one", True)  # type: ignore[arg-type]
    with pytest.raises(BadUsage, match="no grader named 'judge'"):
        run.agreement("judge")
    assert run[1].label == Label(False, "shouts <b>too</b> much")  # untouched by the errors


async def test_labels_given_after_the_run_are_kept_by_its_resume_file(
        model: ScriptedModel, tmp_path: Path) -> None:
    """A label given once the run ended is appended to the run's resume file: the resumed
    rows come back with it (the last given wins, ``None`` takes it off), nothing sent."""
    agent = eval_agent(model)
    path = tmp_path / "r.jsonl"
    run = await agent.evaluate(["one", "two"], VARIANTS, graders=[contains("calm")],
                               resume=path, progress=False)
    run.label(0, True)
    run.label(0, False, note="on second thought")
    run.label(2, True)
    run.label(2, None)
    run.label(3, True, note="fine")
    sent = len(model.requests)
    again = await agent.evaluate(["one", "two"], VARIANTS, graders=[contains("calm")],
                                 resume=path, progress=False)
    assert len(model.requests) == sent and all(row.resumed for row in again)
    assert [row.label for row in again] == [Label(False, "on second thought"), None, None,
                                            Label(True, "fine")]


async def test_a_label_leaves_a_resume_file_that_is_gone_or_in_use_alone(
        model: ScriptedModel, tmp_path: Path) -> None:
    from fragola_nb.experiments.batch.resume import open_resume

    agent = eval_agent(model)
    path = tmp_path / "r.jsonl"
    run = await agent.evaluate(["one"], VARIANTS, resume=path, progress=False)
    run.label(0, None)  # no label for this answer in this session (another test's)
    held = open_resume(path, "an evaluation")  # another run of the same file
    try:
        with pytest.raises(BadUsage, match="cannot keep the label in the resume file"):
            run.label(0, True)
    finally:
        os.close(held)
    assert run[0].label is None  # refused: nothing changed, human() sees no label either
    assert human()(graded_row(run[0].input, run[0].answer, None, None, None)) is None
    path.unlink()  # deleted to start over: a label does not make it again
    assert run.label(0, True).label == Label(True, "")
    assert not path.exists()


def test_agreement_is_cohens_kappa_over_the_labelled_rows() -> None:
    # human / grader: 4 both pass, 1 only the human, 2 only the grader, 3 both fail, and
    # two labelled rows the grader did not grade, one graded row not labelled
    pairs = [(True, True)] * 4 + [(True, False)] + [(False, True)] * 2 + [(False, False)] * 3
    made = [EvalRow(case=i, input=f"q{i}", variant="v", status="done", answer="a",
                    grades=(Grade("judge", g),), label=Label(h))
            for i, (h, g) in enumerate(pairs)]
    made += [EvalRow(case=10, input="q10", variant="v", status="done", answer="a",
                     label=Label(True)),
             EvalRow(case=11, input="q11", variant="v", status="done", answer="a",
                     grades=(Grade("judge", True),))]
    run = Evaluation(made, variants=["v"], graders=["judge"], repeat=1)

    found = run.agreement("judge")
    # po = 7/10; pe = (5·6 + 5·4)/100 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    assert (found.n, found.agreed) == (10, 0.7)
    assert found.kappa == pytest.approx(0.4, abs=1e-12)
    assert found.counts == [[4, 1], [2, 3]]
    assert repr(found) == ("Agreement(judge: 10 labelled rows, kappa 0.40; both passed 4, "
                           "both failed 3, only the human passed 1, only the grader passed 2)")
    same = Evaluation([EvalRow(case=0, input="q", variant="v", status="done", answer="a",
                               grades=(Grade("judge", True),), label=Label(True))],
                      variants=["v"], graders=["judge"], repeat=1).agreement("judge")
    assert same.kappa is None and same.agreed == 1.0  # one verdict throughout: no kappa


async def test_the_human_grader_keeps_the_labels_on_a_rerun(model: ScriptedModel,
                                                           tmp_path: Path) -> None:
    agent = eval_agent(model)
    cases = ["human one", "human two"]
    first = await agent.evaluate(cases, VARIANTS, progress=False)
    first.label(0, False, note="not calm enough")
    first.label(3, True)
    saved = first.save(tmp_path / "labels.json")

    again = await agent.evaluate(cases, VARIANTS, graders=[human()], progress=False)
    assert [r.grade("human") for r in again] == [
        Grade("human", False, reason="not calm enough"), None, None,
        Grade("human", True, reason="labelled by hand")]
    assert [r.passed for r in again] == [False, True, True, True]
    only_file = await agent.evaluate(cases[:1], VARIANTS, graders=[human(saved)],
                                     progress=False)
    assert only_file[0].grade("human") == Grade("human", False, reason="not calm enough")
    with pytest.raises(BadUsage, match="takes an Evaluation or a file"):
        human(42)  # type: ignore[arg-type]


# -- the pairwise judge ---------------------------------------------------------------------------


async def test_judge_pairs_on_the_scripted_model_is_deterministic_and_counted_apart(
        model: ScriptedModel) -> None:
    agent = eval_agent(model)
    run = await agent.evaluate(["be calm", "stay calm", "hello"], VARIANTS, progress=False)
    graded_requests = len(model.requests)
    judge = Fragola.scripted()
    try:
        versus = await run.judge_pairs("loud", "calm", 'The answer is "calm".', fragola=judge)
        again = await run.judge_pairs("loud", "calm", 'The answer is "calm".', fragola=judge)
    finally:
        await judge.aclose()

    # "calm: be calm" has the phrase, "LOUD: be calm" too; "hello" only on calm
    assert (versus.metric, versus.n, versus.wins, versus.ties, versus.losses) == (
        "preference", 3, 1, 2, 0)
    assert versus.position_flips == 0 and versus.test == "exact sign test"
    assert versus.p_value == pytest.approx(stats.binomtest(1, 1).pvalue) == 1.0
    assert versus.delta == pytest.approx(1 / 3)
    assert versus == again and versus.picks == again.picks
    assert versus.picks[2]["picks"] == ["b", "b"]
    assert versus.picks[2]["reasons"][0] == ('scripted pairwise judge: looking for 1 phrase '
                                             'of the rubric, A has 0, B has 1 ("calm"): B')
    assert versus.usage is not None and versus.usage.requests == 6  # 3 cases × 2 orders
    assert len(model.requests) == graded_requests  # the graded model was not asked
    assert run.judge_usage.requests == 12 and run.usage.requests == 6  # both calls' judges
    assert "calm vs loud: +0.33" in versus.line()


async def test_judge_pairs_calls_are_kept_by_save_and_counted_after_load(
        model: ScriptedModel, tmp_path: Path) -> None:
    """What ``judge_pairs`` paid is in the title's total; ``save``/``load`` keep it, so the
    loaded evaluation says the same total, and a hand-edited header is refused clearly."""
    agent = eval_agent(model)
    run = await agent.evaluate(["be calm", "hello"], VARIANTS, progress=False)
    judge = Fragola.scripted()
    try:
        await run.judge_pairs("loud", "calm", 'The answer is "calm".', fragola=judge)
    finally:
        await judge.aclose()
    assert run.pairs_usage.requests == 4
    path = run.save(tmp_path / "pairs.json")
    loaded = Evaluation.load(path)
    assert loaded.pairs_usage.calls == run.pairs_usage.calls
    assert loaded.judge_usage.total_tokens == run.judge_usage.total_tokens > 0
    assert loaded.overview().split(";")[1] == run.overview().split(";")[1]  # tokens, cost

    data = json.loads(path.read_text())
    data[0]["run"]["pairs_usage"] = [{"model": "m"}]
    path.write_text(json.dumps(data))
    with pytest.raises(BadUsage, match=r"pairs\.json is not an evaluation file: its header's "
                                       r"pairs_usage holds a call that is not one"):
        Evaluation.load(path)
    del data[0]["run"]["pairs_usage"]  # a file written before it: no calls
    path.write_text(json.dumps(data))
    assert Evaluation.load(path).pairs_usage.requests == 0


def pair_brain(request: dict[str, Any]) -> Item:
    """The answers of ``brain``; a judge that always picks the first answer it is shown."""
    if "pairwise judge" in str(request["messages"][0]["content"]):
        return reply('{"winner": "A", "reason": "the first one"}')
    return brain(request)


async def test_a_judge_swayed_by_the_order_gives_ties_and_position_flips(
        model: ScriptedModel) -> None:
    agent = eval_agent(model)
    run = await agent.evaluate(["one", "two"], VARIANTS, repeat=2, progress=False)
    model.brain = pair_brain
    versus = await run.judge_pairs("calm", "loud", "Which is better?")

    assert (versus.n, versus.ties, versus.position_flips) == (2, 2, 2)
    assert versus.test == "exact sign-flip permutation" and versus.delta == 0
    assert versus.picks[0]["picks"] == ["a", "b"]
    one_way = await run.judge_pairs("calm", "loud", "Which is better?", both_orders=False)
    assert (one_way.losses, one_way.position_flips) == (2, None)
    assert one_way.usage is not None and one_way.usage.requests == 4  # 2 cases × 2 repeats

    loaded = Evaluation(list(run)[:0] + [r.__class__(**{**r.__dict__, "fork": None})
                                         for r in run], variants=run.variants,
                        graders=run.graders, repeat=2)
    with pytest.raises(BadUsage, match="needs fragola= here"):
        await loaded.judge_pairs("calm", "loud", "x")
    with pytest.raises(BadUsage, match="no variant named 'nope'"):
        await run.judge_pairs("calm", "nope", "x")
    with pytest.raises(BadUsage, match="a rubric"):
        await run.judge_pairs("calm", "loud", " ")
    # the 4 one-way asks ran at once, in no set order: each case's question is shown
    asked = sorted(last_user(r).split("\n")[1] for r in model.requests[-4:])
    assert asked == ["one", "one", "two", "two"]
