"""Power of the regression gate: the minimum detectable effect checked by simulation, the p floor of few discordant
queries, A/A false alarms under the gated family and the one-sided test, and `--require-power`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import evalkit
from evalkit.app.cli import main
from evalkit.measures.statistics import (
    StatisticsSettings,
    minimum_detectable_effect,
    queries_needed,
    sign_flip_p_floor,
    sign_flip_p_values,
)
from evalkit.reporting.comparison import compare_reports
from evalkit.reporting.comparison_views import comparison_frame, format_comparison, plot_forest
from evalkit.reporting.gates import GateFailure
from evalkit.reporting.regression import check_regressions, find_regressions
from evalkit.reporting.report import Report, report_json


def test_minimum_detectable_effect_and_queries_needed_are_the_normal_formula() -> None:
    # z_0.95 = 1.6449, z_0.8 = 0.8416: (1.6449 + 0.8416) * 0.3 / sqrt(36) = 0.12432
    assert minimum_detectable_effect(0.3, 36, 0.05) == pytest.approx(0.124324, abs=1e-6)
    assert minimum_detectable_effect(0.0, 36, 0.05) == 0.0
    # The queries that bring that MDE down to 0.05: ceil((2.4865 * 0.3 / 0.05)^2) = ceil(222.58) = 223.
    assert queries_needed(0.3, 0.05, 0.05) == 223
    assert minimum_detectable_effect(0.3, 223, 0.05) <= 0.05 < minimum_detectable_effect(0.3, 222, 0.05)
    assert queries_needed(0.3, 0.0, 0.05) is None and queries_needed(0.0, 0.01, 0.05) == 1
    with pytest.raises(ValueError, match="alpha"):
        minimum_detectable_effect(0.3, 36, 1.0)


def test_p_floor_of_few_discordant_queries() -> None:
    exact = StatisticsSettings(resamples=1_000)
    assert sign_flip_p_floor(5, 8, exact) == 2**-5 and sign_flip_p_floor(5, 8, exact, one_sided=False) == 2**-4
    assert sign_flip_p_floor(0, 8, exact) == 1.0
    # Drawn resamples: never below 1 / (resamples + 1) either.
    assert sign_flip_p_floor(30, 35, exact) == 1 / 1_001
    # The floor is attained: 5 losses and 3 ties, the exact one-sided test.
    assert sign_flip_p_values([-1.0] * 5 + [0.0] * 3, exact, "less")[0] == 2**-5


def test_the_mde_is_detected_with_about_80_percent_power() -> None:
    """400 simulated comparisons of n = 200 normal differences whose true mean drop is the MDE at alpha 0.05."""
    n, sd, alpha, simulations = 200, 0.25, 0.05, 400
    mde = minimum_detectable_effect(sd, n, alpha)
    differences = np.random.default_rng(20).normal(-mde, sd, size=(n, simulations))
    p = sign_flip_p_values(differences, StatisticsSettings(resamples=200, seed=3), "less")
    power = float((p < alpha).mean())
    assert 0.7 <= power <= 0.9, power
    # Half the effect is detected far less often: the MDE is not a trivially small number.
    half = sign_flip_p_values(differences + mde / 2, StatisticsSettings(resamples=200, seed=3), "less")
    assert float((half < alpha).mean()) < 0.45


def _reports(base_hits: list[bool], head_hits: list[bool], languages: list[str]) -> tuple[Report, Report]:
    """Two reports of system `sys` over one-relevant-document queries: a hit ranks it first, a miss not at all."""
    qrels = {f"q{i:03d}": {f"d{i}": 1} for i in range(len(base_hits))}
    by_query = {f"q{i:03d}": lang for i, lang in enumerate(languages)}

    def run(hits: list[bool]) -> dict[str, dict[str, float]]:
        return {f"q{i:03d}": {f"d{i}" if hit else "other": 1.0} for i, hit in enumerate(hits)}

    measures = ["ndcg@10", "recall@10", "mrr@10"]
    return (
        evalkit.score(qrels, {"sys": run(base_hits)}, measures, languages=by_query).to_report(),
        evalkit.score(qrels, {"sys": run(head_hits)}, measures, languages=by_query).to_report(),
    )


@pytest.fixture
def small_drop() -> tuple[Report, Report]:
    """35 queries (en): the head loses 5 of them, ties on 30. A real drop of 0.143 on too few discordant queries."""
    base_hits = [True] * 35
    head_hits = [i >= 5 for i in range(35)]
    return _reports(base_hits, head_hits, ["en"] * 35)


def test_a_real_drop_on_few_discordant_queries_is_underpowered(small_drop: tuple[Report, Report]) -> None:
    comparison = compare_reports(*small_drop)
    # All queries are English: the en rows test what the all rows test, so the family holds two hypotheses.
    assert comparison.gate_measures == ("ndcg@10", "recall@10") and comparison.family_size == 2
    assert sum(r.gated for r in comparison.rows) == 4
    row = next(r for r in comparison.rows if r.measure == "recall@10" and r.slice == "en")
    assert (row.difference, row.losses, row.ties) == (pytest.approx(-5 / 35), 5, 30)
    assert row.power is not None and row.power.alpha == 0.05 / 2
    assert row.power.p_floor == 2**-5 and row.power.underpowered
    assert "5 discordant queries cannot reach p < 0.025" in row.power.reason
    # The interval excludes 0 but the two-sided test cannot reach 0.05: the table says why.
    assert row.ci_high < 0 and row.p_value >= 0.05
    assert row.disagreement is not None and "only 5 queries differ" in row.disagreement
    assert "* sys recall@10 [en]: interval excludes 0" in format_comparison(comparison)
    frame = comparison_frame(comparison.rows)
    assert frame.loc[("sys", "recall@10", "en"), "disagreement"].startswith("interval excludes 0")
    assert frame.loc[("sys", "recall@10", "en"), "underpowered"] and frame.loc[("sys", "recall@10", "en"), "mde"] > 0.1
    mrr = next(r for r in comparison.rows if r.measure == "mrr@10" and r.slice == "en")
    assert not mrr.gated and mrr.power is None
    verdict = find_regressions(comparison)
    assert verdict.passed, "no evidence of a drop..."
    assert len(verdict.underpowered) == 4 and verdict.queries_needed is not None and verdict.queries_needed > 35
    assert "4 of 4 gated rows underpowered" in verdict.describe()
    assert "underpowered  sys recall@10 [en]" in verdict.describe()
    check_regressions(verdict)
    with pytest.raises(GateFailure, match="sys recall@10 \\[en\\] minimum detectable effect"):
        check_regressions(verdict, require_power=True)


def test_require_power_fails_the_cli_naming_the_rows(
    small_drop: tuple[Report, Report],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("base.json").write_bytes(report_json(small_drop[0]))
    Path("head.json").write_bytes(report_json(small_drop[1]))
    assert main(["compare", "base.json", "head.json", "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "underpowered  sys ndcg@10 [all]" in out
    assert main(["compare", "base.json", "head.json", "--require-power", "--output", "c.json"]) == 1
    out, err = capsys.readouterr()
    assert "sys ndcg@10 [all] minimum detectable effect" in err and "sys recall@10 [en] minimum" in err
    assert "underpowered: " in err and "queries needed" in err and "Traceback" not in err
    assert '"underpowered": true' in Path("c.json").read_text(encoding="utf-8")


def test_many_queries_make_the_same_drop_powered_and_failing() -> None:
    """350 queries, 50 lost (the same rate): the drop is seen and the gate fails; nothing is underpowered."""
    base, head = _reports([True] * 350, [i >= 50 for i in range(350)], ["en", "zh"] * 175)
    verdict = find_regressions(compare_reports(base, head))
    assert {r.label() for r in verdict.regressions} == {
        f"sys {m} [{s}]" for m in ("ndcg@10", "recall@10") for s in ("all", "en", "zh")
    }
    assert verdict.underpowered == ()


def test_aa_false_alarm_rate_under_the_gated_family_and_the_one_sided_test() -> None:
    """A/A: base and head are exchangeable (a query's difficulty plus independent noise), no true difference."""
    rng = np.random.default_rng(2027)
    settings = StatisticsSettings(resamples=500, seed=1)
    template, _ = _reports([True] * 80, [True] * 80, ["en", "zh"] * 40)
    template = template.model_copy(update={"statistics": settings})
    alpha, simulations, alarms, raw, tests = 0.05, 200, 0, 0, 0
    for _ in range(simulations):
        difficulty = rng.uniform(0.0, 1.0, size=80)
        sides = []
        for _ in range(2):
            noisy = np.clip(difficulty + rng.normal(0.0, 0.2, size=(3, 80)), 0.0, 1.0).round(2)
            columns = {m: tuple(map(float, v)) for m, v in zip(("ndcg@10", "recall@10", "mrr@10"), noisy, strict=True)}
            ablation = template.ablations["sys"].model_copy(update={"per_query": columns})
            sides.append(template.model_copy(update={"ablations": {"sys": ablation}}))
        comparison = compare_reports(sides[0], sides[1])
        gated = [r for r in comparison.rows if r.gated]
        raw += sum(r.p_one_sided < alpha for r in gated)
        tests += len(gated)
        alarms += not find_regressions(comparison, max_drop=0.0).passed
    # At most alpha, with a Monte Carlo margin of two binomial standard errors (0.015 each at n = 200).
    assert alarms / simulations <= alpha + 0.03
    # The one-sided test alone is calibrated: it rejects about alpha of the time per row.
    assert 0.025 <= raw / tests <= 0.075, raw / tests


def test_a_one_language_fixture_counts_each_gated_hypothesis_once() -> None:
    """30 Chinese queries, 6 lost and none won: one-sided p about 2**-6 for ndcg@10 and recall@10. The zh rows hold
    the all rows' queries, so Holm adjusts over two hypotheses (2 x 0.014 = 0.028 < 0.05), not four (0.056), and
    the gate sees the drop that it missed while it counted each twice."""
    base_hits = [True] * 30
    head_hits = [i >= 6 for i in range(30)]
    comparison = compare_reports(*_reports(base_hits, head_hits, ["zh"] * 30))
    gated = {(r.measure, r.slice): r for r in comparison.rows if r.gated}
    assert set(gated) == {(m, s) for m in ("ndcg@10", "recall@10") for s in ("all", "zh")}
    assert comparison.family_size == 2
    for measure in ("ndcg@10", "recall@10"):
        whole, chinese = gated[(measure, "all")], gated[(measure, "zh")]
        assert whole.p_one_sided == chinese.p_one_sided == pytest.approx(2**-6, abs=0.003)  # drawn sign flips
        assert whole.p_holm == chinese.p_holm == pytest.approx(2 * whole.p_one_sided)
        assert 2 * whole.p_holm >= 0.05  # what counting each hypothesis twice gave
    verdict = find_regressions(comparison)
    assert not verdict.passed and len(verdict.regressions) == 4
    with pytest.raises(GateFailure, match=r"sys recall@10 \[zh\]"):
        check_regressions(verdict)
    # Beside English queries the zh slice is a hypothesis of its own: six gated hypotheses.
    bilingual = compare_reports(*_reports(base_hits * 2, head_hits * 2, ["zh"] * 30 + ["en"] * 30))
    assert bilingual.family_size == 6 == sum(r.gated for r in bilingual.rows)


def test_a_row_with_enough_queries_but_too_few_differing_is_not_told_to_add_queries() -> None:
    """1,000 queries, 2 lost: the spread gives an MDE below max drop, and only the p floor of 2 discordant queries
    makes the row underpowered; advising about 160 queries (fewer than it has) would be false."""
    base_hits = [True] * 1000
    head_hits = [i >= 2 for i in range(1000)]
    comparison = compare_reports(*_reports(base_hits, head_hits, ["en"] * 1000))
    row = next(r for r in comparison.rows if r.measure == "recall@10" and r.slice == "all")
    assert row.power is not None and row.power.mde < 0.01 and row.power.underpowered
    assert row.power.queries_needed is not None and row.power.queries_needed < 1000
    verdict = find_regressions(comparison)
    text = verdict.describe()
    assert "its 1000 queries are enough for MDE <= max drop; more of them would have to differ" in text
    assert "queries needed for MDE" not in text and verdict.queries_needed is None


def test_a_gated_measure_given_as_a_string_is_one_name() -> None:
    """As evalkit.score reads measures="ndcg@10": one name, not its characters (which were refused as unknown
    measures 0, 1, @, c ...)."""
    pair = _reports([True] * 10, [True] * 10, ["en"] * 10)
    comparison = compare_reports(*pair, gated="ndcg@10")  # type: ignore[arg-type]
    assert comparison.gate_measures == ("ndcg@10",)
    with pytest.raises(ValueError, match="unknown gated measure"):
        compare_reports(*pair, gated="nope@10")  # type: ignore[arg-type]


def test_a_forest_of_reports_without_languages_draws_the_all_slice() -> None:
    """Score reports without topics hold the all slice only: the forest drew no point (it read en and zh only)."""
    base, head = (
        evalkit.score({f"q{i}": {f"d{i}": 1} for i in range(12)}, run, ["ndcg@10"]).to_report()
        for run in (
            {f"q{i}": {"x": 1.0} for i in range(12)},
            {f"q{i}": {f"d{i}": 1.0} for i in range(12)},
        )
    )
    forest = plot_forest(compare_reports(base, head).rows, ["ndcg@10"])
    drawn = [line for axis in forest.axes for line in axis.lines if len(line.get_xdata())]
    assert any(np.isfinite(np.asarray(line.get_xdata(), dtype=float)).any() for line in drawn)
    assert [t.get_text() for t in forest.legends[0].get_texts()] == ["all"]
