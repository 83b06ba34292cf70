"""An evaluation's error bars and paired comparisons, each figure checked against scipy (or a
formula worked out by hand) on fixed data: Wilson and clustered intervals, ``versus`` (exact
McNemar, exact and sampled sign-flip permutation tests, the paired t interval, cases
needed), ``verdicts`` with Holm's correction, and ``summary(by="tag")``."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pytest
from scipy import stats

from fragola_nb import BadUsage
from fragola_nb.experiments.evaluate.evalrow import EvalRow
from fragola_nb.experiments.evaluate.evaluation import Evaluation
from fragola_nb.experiments.evaluate.verdicts import holm
from fragola_nb.graders import Grade


def row(case: int, variant: str, passed: bool, repeat: int = 0, score: float | None = None,
        tags: tuple[str, ...] = ()) -> EvalRow:
    return EvalRow(case=case, input=f"question {case}", variant=variant, repeat=repeat,
                   status="done", answer="an answer", tags=tags,
                   grades=(Grade("check", passed, score),))


def evaluation(table: dict[str, Sequence[Sequence[bool]]], scores: dict[str, Sequence[
        Sequence[float]]] | None = None) -> Evaluation:
    """Per variant, per case, the verdict of each repeat (and its score)."""
    rows = []
    cases = len(next(iter(table.values())))
    for case in range(cases):
        for variant, verdicts in table.items():
            for repeat, passed in enumerate(verdicts[case]):
                score = scores[variant][case][repeat] if scores else None
                rows.append(row(case, variant, passed, repeat, score))
    repeat = max(len(v) for verdicts in table.values() for v in verdicts)
    return Evaluation(rows, variants=list(table), graders=["check"], repeat=repeat)


def ones(bits: str) -> list[list[bool]]:
    return [[bit == "1"] for bit in bits]


# -- intervals ----------------------------------------------------------------------------------

def test_the_pass_rate_interval_with_one_run_per_case_is_wilsons() -> None:
    run = evaluation({"brief": ones("1110111011")})
    [line] = run.summary()

    low, high = line["pass_rate_ci"]
    z = stats.norm.ppf(0.975)
    p, n = 0.8, 10
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert (low, high) == pytest.approx((centre - half, centre + half), abs=1e-12)
    wilson = stats.binomtest(8, 10).proportion_ci(0.95, method="wilson")
    assert (low, high) == pytest.approx((wilson.low, wilson.high), abs=1e-12)
    assert round(low, 4) == 0.4902 and round(high, 4) == 0.9433
    assert line["cases"] == 10 and line["pass_rate"] == 0.8


def test_with_repeats_the_interval_is_clustered_by_case_and_clipped() -> None:
    verdicts = [[True, True, False], [True, False, False], [True, True, True],
                [False, False, False], [True, True, False], [False, True, False]]
    run = evaluation({"brief": verdicts})
    [line] = run.summary()

    means = [sum(v) / 3 for v in verdicts]
    expected = stats.t.interval(0.95, len(means) - 1, loc=np.mean(means),
                                scale=stats.sem(means))
    assert line["pass_rate_ci"] == pytest.approx(expected, abs=1e-12)
    assert line["cases"] == 6 and line["pass_rate"] == pytest.approx(9 / 18)
    # a case that always passes beside one that never does: the interval is cut at 0 and 1
    [wide] = evaluation({"x": [[True, True], [False, False], [True, True]]}).summary()
    raw = stats.t.interval(0.95, 2, loc=2 / 3, scale=stats.sem([1, 0, 1]))
    assert raw[0] < 0 and raw[1] > 1 and wide["pass_rate_ci"] == (0.0, 1.0)


def test_the_mean_score_interval_is_the_t_interval_on_the_case_means() -> None:
    scores = [[0.2, 0.4], [0.9, 0.7], [0.5, 0.5], [0.1, 0.3], [0.8, 1.0]]
    run = evaluation({"v": [[s >= 0.5 for s in case] for case in scores]}, {"v": scores})
    [line] = run.summary()

    means = [sum(case) / 2 for case in scores]
    expected = stats.t.interval(0.95, 4, loc=np.mean(means), scale=stats.sem(means))
    assert line["mean_score_ci"] == pytest.approx(expected, abs=1e-12)
    assert line["mean_score"] == pytest.approx(np.mean(means))


def test_rows_not_run_are_left_out_of_the_intervals() -> None:
    rows = [row(c, "v", c % 2 == 0) for c in range(5)]
    rows.append(EvalRow(case=5, input="question 5", variant="v", status="not run"))
    [line] = Evaluation(rows, variants=["v"], graders=["check"], repeat=1).summary()

    wilson = stats.binomtest(3, 5).proportion_ci(0.95, method="wilson")
    assert line["pass_rate_ci"] == pytest.approx((wilson.low, wilson.high), abs=1e-12)
    assert line["cases"] == 5


# -- versus ---------------------------------------------------------------------------------------

def test_the_paired_interval_of_few_cases_stays_within_what_a_difference_can_be() -> None:
    """Two cases, one lost: scipy's paired t interval is -0.5 +- 6.35, far past -1 and +1,
    which no difference of two pass rates can reach; the interval is clipped there."""
    run = evaluation({"plain": ones("11"), "formal": ones("01")})
    versus = run.versus("plain", "formal")
    interval = stats.ttest_rel([0, 1], [1, 1]).confidence_interval(0.95)
    assert interval.low < -6 and interval.high > 5  # what the bare t interval says
    assert versus.delta == pytest.approx(-0.5)
    assert versus.ci == (-1.0, 1.0)
    assert "[−100, +100]" in versus.line()


def test_versus_with_one_run_per_case_is_an_exact_mcnemar_test() -> None:
    brief, formal = "010100110100", "111101111101"
    run = evaluation({"brief": ones(brief), "formal": ones(formal)})
    versus = run.versus("brief", "formal")

    a = np.array([int(c) for c in brief])
    b = np.array([int(c) for c in formal])
    d = b - a
    assert (versus.a, versus.b, versus.metric, versus.n) == ("brief", "formal", "pass", 12)
    assert (versus.wins, versus.ties, versus.losses) == (5, 7, 0)
    assert versus.test == "exact McNemar"
    assert versus.p_value == pytest.approx(stats.binomtest(5, 5, 0.5).pvalue, abs=1e-15)
    assert versus.p_value == pytest.approx(0.0625)
    assert versus.delta == pytest.approx(5 / 12)
    interval = stats.ttest_rel(b, a).confidence_interval(0.95)
    assert versus.ci == pytest.approx((interval.low, interval.high), abs=1e-12)
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert versus.cases_needed == math.ceil((z * np.std(d, ddof=1) / d.mean()) ** 2) == 12
    assert versus.verdict == "not distinguishable"
    assert repr(versus) == (
        "Versus(formal vs brief: +42 pts [+9, +74], p = 0.062, not distinguishable (about "
        "12 cases would tell))")


def test_a_clear_difference_is_a_verdict_for_the_better_variant() -> None:
    run = evaluation({"a": ones("0" * 9 + "1"), "b": ones("1" * 10)})

    there, back = run.versus("a", "b"), run.versus("b", "a")
    assert there.p_value == pytest.approx(stats.binomtest(9, 9).pvalue) == pytest.approx(2 / 512)
    assert there.verdict == "b better" and back.verdict == "b better"
    assert back.delta == pytest.approx(-0.9) and (back.wins, back.losses) == (0, 9)


def test_with_repeats_the_test_is_an_exact_sign_flip_permutation() -> None:
    a = [[True, False, False], [True, True, False], [False, False, False], [True, True, True],
         [False, True, False], [True, False, False], [False, False, True]]
    b = [[True, True, False], [True, True, True], [True, False, False], [True, True, True],
         [True, True, False], [False, False, False], [True, True, False]]
    run = evaluation({"a": a, "b": b})
    versus = run.versus("a", "b")

    d = np.array([sum(y) / 3 - sum(x) / 3 for x, y in zip(a, b, strict=True)])
    flips = [np.mean(np.array(signs) * d) for signs in itertools.product((1, -1), repeat=len(d))]
    exact = np.mean([abs(f) >= abs(d.mean()) - 1e-12 for f in flips])
    assert versus.test == "exact sign-flip permutation"
    assert versus.p_value == pytest.approx(exact, abs=1e-12)
    # by hand: six differences of ±1/3 and a zero; |sum| >= 4/3 for all six signs alike
    # (2 ways) or five alike (2 × 6 ways): 14 of 64, times 2 for the zero's sign
    assert exact == pytest.approx(28 / 128)
    found = stats.permutation_test((d,), np.mean, permutation_type="samples",
                                   n_resamples=np.inf)
    assert versus.p_value == pytest.approx(found.pvalue, abs=1e-12)
    assert (versus.wins, versus.ties, versus.losses) == (5, 1, 1)
    interval = stats.ttest_1samp(d, 0).confidence_interval(0.95)
    assert versus.ci == pytest.approx((interval.low, interval.high), abs=1e-12)


def test_above_sixteen_cases_the_permutation_test_takes_seeded_resamples() -> None:
    rng = np.random.default_rng(7)
    a = [[bool(x) for x in rng.integers(0, 2, 2)] for _ in range(20)]
    b = [[bool(x) for x in rng.integers(0, 2, 2)] for _ in range(20)]
    run = evaluation({"a": a, "b": b})
    versus = run.versus("a", "b")

    d = np.array([sum(y) / 2 - sum(x) / 2 for x, y in zip(a, b, strict=True)])
    found = stats.permutation_test((d,), np.mean, permutation_type="samples",
                                   n_resamples=10_000, rng=np.random.default_rng(0))
    assert versus.test == "sign-flip permutation, 10,000 resamples"
    assert versus.p_value == found.pvalue  # the same seed, the same resamples
    assert run.versus("a", "b").p_value == versus.p_value


def test_a_thousand_cases_in_batches_give_scipys_p_value_in_one_batch() -> None:
    """1,000 cases × 3 repeats: the test works its 10,000 resamples out 2,000 at a time
    (``verdicts.BATCH``); scipy's p-value, all resamples at once, is the same float."""
    rng = np.random.default_rng(11)
    a = [[bool(x) for x in rng.integers(0, 2, 3)] for _ in range(1000)]
    b = [[bool(x) for x in rng.random(3) < 0.53] for _ in range(1000)]
    versus = evaluation({"a": a, "b": b}).versus("a", "b")

    d = np.array([sum(y) / 3 - sum(x) / 3 for x, y in zip(a, b, strict=True)])
    found = stats.permutation_test((d,), np.mean, permutation_type="samples",
                                   n_resamples=10_000, rng=np.random.default_rng(0))
    assert versus.p_value == found.pvalue


def test_the_t_quantile_is_scipys_t_ppf_to_the_last_bit() -> None:
    from fragola_nb.experiments.evaluate.intervals import t_quantile

    for df in [*range(1, 400), 999, 1999, 5999, 100_000]:
        assert t_quantile(df) == float(stats.t.ppf(0.975, df)), df


def test_scores_are_compared_by_the_permutation_test_even_with_one_run_per_case() -> None:
    a = [0.2, 0.5, 0.4, 0.9, 0.3]
    b = [0.6, 0.5, 0.7, 0.8, 0.9]
    run = evaluation({"a": [[x >= 0.5] for x in a], "b": [[x >= 0.5] for x in b]},
                     {"a": [[x] for x in a], "b": [[x] for x in b]})
    versus = run.versus("a", "b", metric="score")

    d = np.array(b) - np.array(a)
    found = stats.permutation_test((d,), np.mean, permutation_type="samples",
                                   n_resamples=np.inf)
    assert versus.metric == "score" and versus.test == "exact sign-flip permutation"
    assert versus.p_value == pytest.approx(found.pvalue, abs=1e-12)
    # by hand: d = 0.4, 0, 0.3, -0.1, 0.6 (sum 1.2); |±0.4 ± 0.3 ± 0.1 ± 0.6| >= 1.2 for
    # 1.4 and 1.2 and their negatives: 4 of 16, times 2 for the zero's sign
    assert versus.p_value == pytest.approx(8 / 32)
    assert versus.delta == pytest.approx(0.24) and (versus.wins, versus.ties) == (3, 1)
    assert versus.line().startswith("b vs a: +0.24 [")


def test_no_difference_needs_no_number_of_cases() -> None:
    run = evaluation({"a": ones("1010"), "b": ones("1010")})
    versus = run.versus("a", "b")

    assert versus.delta == 0 and versus.cases_needed is None and versus.p_value == 1.0
    assert versus.verdict == "not distinguishable"
    assert versus.line() == "b vs a: 0 pts [0, 0], p = 1, not distinguishable"


def test_versus_refuses_unknown_variants_and_metrics() -> None:
    run = evaluation({"a": ones("10"), "b": ones("11")})

    with pytest.raises(BadUsage, match=r"no variant named 'c'.*'a', 'b'"):
        run.versus("a", "c")
    with pytest.raises(BadUsage, match="same variant"):
        run.versus("a", "a")
    with pytest.raises(BadUsage, match="'pass' or 'score'"):
        run.versus("a", "b", metric="speed")
    with pytest.raises(BadUsage, match="between 0 and 1"):
        run.verdicts(alpha=2)
    assert run.versus("a", "b").n == 2  # the next call works


# -- verdicts, Holm -------------------------------------------------------------------------------

def test_holm_adjusts_step_down_on_a_worked_example() -> None:
    # sorted 0.01, 0.03, 0.04: × 3, × 2, × 1 = 0.03, 0.06, 0.04 -> made non-decreasing: 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.2]) == pytest.approx([0.5, 0.4])
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_verdicts_compare_each_variant_with_the_first_and_take_the_holm_adjusted_p() -> None:
    run = evaluation({"base": ones("000000" "1111"), "x": ones("111111" "1111"),
                      "y": ones("111111" "1111")})
    raw = run.versus("base", "x")
    assert raw.p_value == pytest.approx(stats.binomtest(6, 6).pvalue)  # 0.03125
    assert raw.verdict == "x better"

    found = run.verdicts()
    assert [(v.a, v.b) for v in found] == [("base", "x"), ("base", "y")]
    assert [v.p_adjusted for v in found] == pytest.approx([0.0625, 0.0625])
    assert [v.verdict for v in found] == ["not distinguishable"] * 2
    assert "p = 0.031 (Holm: 0.062), not distinguishable" in found[0].line()
    assert [v.verdict for v in run.verdicts(alpha=0.1)] == ["x better", "y better"]


# -- tags -----------------------------------------------------------------------------------------

def test_summary_by_tag_gives_a_line_per_tag_and_variant() -> None:
    rows = [row(0, "a", True, tags=("geo",)), row(0, "b", False, tags=("geo",)),
            row(1, "a", False, tags=("geo", "hard")), row(1, "b", True, tags=("geo", "hard")),
            row(2, "a", True), row(2, "b", True)]
    run = Evaluation(rows, variants=["a", "b"], graders=["check"], repeat=1)

    lines = run.summary(by="tag")
    assert [(line["tag"], line["variant"], line["pass_rate"], line["cases"])
            for line in lines] == [("geo", "a", 0.5, 2), ("geo", "b", 0.5, 2),
                                   ("hard", "a", 0.0, 1), ("hard", "b", 1.0, 1),
                                   (None, "a", 1.0, 1), (None, "b", 1.0, 1)]
    wilson = stats.binomtest(1, 2).proportion_ci(0.95, method="wilson")
    assert lines[0]["pass_rate_ci"] == pytest.approx((wilson.low, wilson.high))
    with pytest.raises(BadUsage, match="None or 'tag'"):
        run.summary(by="variant")


def test_the_line_never_says_fewer_than_six_cases_would_tell() -> None:
    # four cases, b far above a: the normal approximation says 1 case, but an exact
    # two-sided test on 4 cases cannot go below p = 2/16
    run = evaluation({"a": [[False, False, False]] * 4,
                      "b": [[True, True, False], [True, True, True], [True, False, True],
                            [True, True, True]]})
    versus = run.versus("a", "b")

    d = np.array([2 / 3, 1, 2 / 3, 1])
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert versus.cases_needed == math.ceil((z * np.std(d, ddof=1) / d.mean()) ** 2) == 1
    assert versus.p_value == pytest.approx(2 / 16)
    assert versus.line().endswith("not distinguishable (about 6 cases would tell)")


def test_one_case_with_repeats_is_compared_without_an_error() -> None:
    run = evaluation({"a": [[False, True]], "b": [[True, True]]})
    versus = run.versus("a", "b")

    assert (versus.n, versus.delta, versus.ci, versus.p_value) == (1, 0.5, None, 1.0)
    assert versus.test == "exact sign-flip permutation" and versus.cases_needed is None
    assert versus.line() == ("b vs a: +50 pts, p = 1, not distinguishable (about 6 cases would "
                             "tell)")
    assert "b vs a: +50 pts" in repr(run)
