"""Comparing two reports: identical runs, a worse language, refusals, notes, and the gate's false-alarm rate."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest

from evalkit.data.fixture import LoadedFixture
from evalkit.data.settings import RetrievalSettings
from evalkit.measures.metrics import LatencySummary
from evalkit.measures.statistics import StatisticsSettings
from evalkit.reporting.build import build_report
from evalkit.reporting.comparison import (
    ComparisonError,
    compare_ablations,
    compare_many,
    compare_reports,
)
from evalkit.reporting.comparison_views import (
    comparison_frame,
    comparison_json,
    format_comparison,
    interval_frame,
    parse_comparison,
    per_query_difference_frame,
    plot_forest,
    plot_per_query_differences,
)
from evalkit.reporting.figures import figure_bytes, plot_language_metrics
from evalkit.reporting.gates import GateFailure
from evalkit.reporting.per_query import ANSWERABLE_MEASURES, NO_ANSWER_MEASURES, QueryIndex
from evalkit.reporting.regression import check_regressions, find_regressions
from evalkit.reporting.report import AblationReport, QueryCounts, Report, parse_report, report_json
from evalkit.retrieval.database import Hit
from evalkit.retrieval.service import KnowledgeService
from evalkit.runs.ablations import select_ablations
from evalkit.runs.evaluation import Evaluation, evaluate

PAIR = ["hybrid", "hybrid-rerank"]


@pytest.fixture(scope="module")
def same_code(synthetic: LoadedFixture) -> Report:
    return build_report(evaluate(synthetic, select_ablations(PAIR), runs=1))


@pytest.fixture(scope="module")
def same_code_again(synthetic: LoadedFixture) -> Report:
    return build_report(evaluate(synthetic, select_ablations(PAIR), runs=1))


@pytest.fixture(scope="module")
def worse_chinese(synthetic: LoadedFixture) -> Report:
    """The same suite with a deliberately worse Chinese retrieval: the best hit of every zh query is dropped."""
    original = KnowledgeService.search

    def search(self: KnowledgeService, text: str, mode: str, language: str | None = None) -> list[Hit]:
        hits = original(self, text, mode, language)  # type: ignore[arg-type]
        return hits[1:] if language == "zh" else hits

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(KnowledgeService, "search", search)
        return build_report(evaluate(synthetic, select_ablations(PAIR), runs=1))


def test_two_runs_of_the_same_code_differ_by_exactly_zero(same_code: Report, same_code_again: Report) -> None:
    comparison = compare_reports(same_code, same_code_again)
    assert comparison.rows, "hybrid and hybrid-rerank are in both reports"
    assert {r.ablation for r in comparison.rows} == set(PAIR)
    for row in comparison.rows:
        assert (row.difference, row.ci_low, row.ci_high, row.p_value, row.p_holm) == (0.0, 0.0, 0.0, 1.0, 1.0)
        assert row.wins == row.losses == 0 and row.ties == row.queries
    # The gated family: ndcg@10 and recall@10 x the two ablations x all, en, zh; every other row is exploratory.
    assert comparison.gate_measures == ("ndcg@10", "recall@10")
    assert comparison.family_size == len(PAIR) * 2 * 3 == sum(r.gated for r in comparison.rows)
    total = len(PAIR) * (len(ANSWERABLE_MEASURES) + len(NO_ANSWER_MEASURES)) * 3
    assert comparison.exploratory_family_size == total - comparison.family_size
    assert comparison.notes == () and comparison.only_in_base == comparison.only_in_head == ()
    verdict = find_regressions(comparison, max_drop=0.0)
    assert verdict.passed and verdict.not_significant == () and verdict.within_tolerance == ()
    # Identical values: nothing differs, so nothing is hidden (MDE 0, no discordant query to limit the p floor).
    assert verdict.underpowered == () and all(r.power and r.power.mde == 0.0 for r in comparison.rows if r.gated)
    check_regressions(verdict, require_power=True)


def test_a_worse_language_fails_the_gate_on_that_language_only(same_code_again: Report, worse_chinese: Report) -> None:
    comparison = compare_reports(same_code_again, worse_chinese)
    assert comparison.notes == (), "a monkeypatched search changes no hash: only the results differ"
    english = [r for r in comparison.rows if r.slice == "en"]
    assert all(r.difference == 0.0 and r.p_value == 1.0 for r in english)
    verdict = find_regressions(comparison)
    assert verdict.regressions, "dropping every Chinese query's best hit must be caught"
    # zh on its own, and all queries together (half of them lost), fail; en does not.
    assert {r.slice for r in verdict.regressions} == {"zh", "all"}
    assert {r.ablation for r in verdict.regressions} == set(PAIR)
    assert {r.measure for r in verdict.regressions} <= {"ndcg@10", "recall@10"}
    ndcg = next(r for r in verdict.regressions if r.ablation == "hybrid" and r.measure == "ndcg@10" and r.slice == "zh")
    assert ndcg.difference < -0.1 and ndcg.ci_high < 0 and ndcg.losses > ndcg.wins
    assert ndcg.p_one_sided <= ndcg.p_value, "the gate's one-sided p of a drop is at most the two-sided one"
    with pytest.raises(GateFailure) as failure:
        check_regressions(verdict)
    message = str(failure.value)
    assert "hybrid ndcg@10 [zh] difference" in message
    assert f"{ndcg.difference:.4f}" in message and "95% CI [" in message and "one-sided p = " in message
    assert "Holm p = " in message and "[en]" not in message and "recall@1 " not in message


def _report(base: Report, columns: dict[str, dict[str, Sequence[float | None]]]) -> Report:
    ablations = {
        name: base.ablations[name].model_copy(update={"per_query": {m: tuple(v) for m, v in cols.items()}})  # type: ignore[index]
        for name, cols in columns.items()
    }
    return base.model_copy(update={"ablations": ablations})


def _small_report(values: np.ndarray, no_answer: np.ndarray, settings: StatisticsSettings) -> Report:
    """A report over len(values) answerable queries (half en, half zh) and len(no_answer) no-answer ones."""
    n, k = len(values), len(no_answer)
    ids = tuple(f"q{i:05d}" for i in range(n + k))
    languages = tuple("en" if i % 2 == 0 else "zh" for i in range(n + k))
    index = QueryIndex(query_ids=ids, languages=languages, answerable=tuple([True] * n + [False] * k))  # type: ignore[arg-type]
    per_query = {m: tuple([*map(float, values), *([None] * k)]) for m in ANSWERABLE_MEASURES}
    per_query.update({m: tuple([*([None] * n), *map(float, no_answer)]) for m in NO_ANSWER_MEASURES})
    latency = LatencySummary(count=1, min_ms=0.0, median_ms=0.0, p95_ms=0.0, max_ms=0.0, mean_ms=0.0)
    counts = QueryCounts(answerable=n, no_answer=k)
    ablation = AblationReport(
        mode="hybrid",
        metrics={},
        query_counts={"all": counts},
        latency_ms=latency,
        failures=(),
        per_query=per_query,
    )
    return Report(
        fixture_id="fx",
        fixture_version="1",
        corpus_sha256="0" * 64,
        evaluation_definition_hash="1" * 64,
        provider_definitions_hash="2" * 64,
        deterministic_projection_sha256="3" * 64,
        runs=1,
        retrieval_settings=RetrievalSettings(),
        ablations={"hybrid": ablation},
        judgments_sha256="4" * 64,
        statistics=settings,
        queries=index,
    )


def test_hand_computed_row_and_win_tie_loss_counts() -> None:
    settings = StatisticsSettings(resamples=1_000)
    base = _small_report(np.array([1.0, 0.0, 0.5, 0.5]), np.array([1.0, 0.0]), settings)
    head = _small_report(np.array([1.0, 1.0, 0.0, 1.0]), np.array([0.0, 0.0]), settings)
    rows = {(r.measure, r.slice): r for r in compare_reports(base, head).rows}
    row = rows[("ndcg@10", "all")]
    # Differences 0, +1, -0.5, +0.5: mean 0.25; |±1 ±0.5 ±0.5| >= 1 for 6 of the 8 sign patterns (exact test).
    assert (row.base_mean, row.head_mean, row.difference) == (0.5, 0.75, 0.25)
    assert (row.wins, row.ties, row.losses) == (2, 1, 1)
    assert row.p_value == 0.75
    fpr = rows[("no_answer_fpr", "all")]
    # Lower is better: the head returned nothing for the no-answer query the base answered, a win.
    assert (fpr.difference, fpr.wins, fpr.ties, fpr.losses, fpr.drop) == (-0.5, 1, 1, 0, -0.5)
    assert rows[("ndcg@10", "en")].queries == 2


def test_reports_over_other_judgments_are_refused(synthetic_evaluation: Evaluation) -> None:
    report = build_report(synthetic_evaluation)
    other = report.model_copy(update={"judgments_sha256": "f" * 64})
    with pytest.raises(ComparisonError, match="judgments_sha256 differs"):
        compare_reports(report, other)
    with pytest.raises(ComparisonError, match="base report has no judgments_sha256"):
        compare_reports(report.model_copy(update={"judgments_sha256": None}), report)


def test_reports_that_share_no_ablation_or_run_are_refused_not_passed(synthetic_evaluation: Evaluation) -> None:
    report = build_report(synthetic_evaluation)
    lexical = report.model_copy(update={"ablations": {"lexical": report.ablations["lexical"]}})
    renamed = report.model_copy(update={"ablations": {"bm25-tuned": report.ablations["lexical"]}})
    with pytest.raises(ComparisonError, match=r"share no ablation or run.*\(base lexical; head bm25-tuned\)"):
        compare_reports(lexical, renamed)
    with pytest.raises(ComparisonError, match=r"\(a lexical; b lexical; c bm25-tuned\)"):
        compare_many([lexical, lexical, renamed], ["a", "b", "c"])
    assert [row.ablation for row in compare_reports(lexical, lexical).rows][:1] == ["lexical"]


def test_other_settings_providers_and_metric_versions_are_named(
    synthetic_evaluation: Evaluation, same_code: Report
) -> None:
    """Also: a subset of ablations is another evaluation definition with other providers in use."""
    report = build_report(synthetic_evaluation)
    head = report.model_copy(
        update={"evaluation_definition_hash": "a" * 64, "provider_definitions_hash": "b" * 64, "metrics_version": "9"}
    )
    notes = " | ".join(compare_reports(report, head).notes)
    assert "evaluation definition differs" in notes and "retrieval settings" in notes
    assert "embedding providers differ" in notes
    assert "metrics_version base 2, head 9" in notes
    assert "note: the embedding providers differ" in format_comparison(compare_reports(report, head))
    subset = compare_reports(report, same_code)
    assert len(subset.notes) == 2 and "embedding providers differ" in subset.notes[0]
    assert subset.only_in_base == ("lexical", "token-hash-vector", "alias-vector")


def test_drops_that_are_not_significant_pass_and_are_named(synthetic_evaluation: Evaluation) -> None:
    report = build_report(synthetic_evaluation)
    column = list(report.ablations["hybrid"].per_query["ndcg@10"])
    first = next(i for i, v in enumerate(column) if v is not None and v > 0.5 and report.queries.languages[i] == "zh")
    column[first] = 0.0  # one Chinese query much worse: a drop of about 0.02 in the zh mean, far from significant
    head = _report(report, {"hybrid": {**report.ablations["hybrid"].per_query, "ndcg@10": column}})
    verdict = find_regressions(compare_reports(report, head))
    assert verdict.passed
    assert "hybrid ndcg@10 [zh]" in [r.label() for r in verdict.not_significant]
    assert {r.measure for r in verdict.not_significant} == {"ndcg@10"} and len(verdict.not_significant) <= 2
    assert "seen, not significant  hybrid ndcg@10 [zh]" in verdict.describe()
    assert find_regressions(compare_reports(report, head), max_drop=0.5).not_significant == ()


def test_gate_arguments_are_checked(synthetic_evaluation: Evaluation) -> None:
    comparison = compare_reports(build_report(synthetic_evaluation), build_report(synthetic_evaluation))
    with pytest.raises(ValueError, match="alpha"):
        find_regressions(comparison, alpha=0.0)
    with pytest.raises(ValueError, match="max_drop"):
        find_regressions(comparison, max_drop=-0.1)
    report = build_report(synthetic_evaluation)
    with pytest.raises(ValueError, match="unknown gated measure"):
        compare_reports(report, report, ["ndcg@11"])
    with pytest.raises(ValueError, match="alpha"):
        compare_reports(report, report, alpha=1.5)


def test_comparison_json_round_trips_with_stable_bytes(same_code_again: Report, worse_chinese: Report) -> None:
    data = comparison_json(compare_reports(same_code_again, worse_chinese))
    assert data == comparison_json(compare_reports(same_code_again, worse_chinese))
    assert parse_comparison(data) == compare_reports(same_code_again, worse_chinese)
    rows = json.loads(data)["rows"]
    assert data.isascii() and "zh" in rows[2]["slice"]
    assert {"gated", "p_one_sided", "power", "disagreement"} <= set(rows[0])


def test_report_round_trip_keeps_the_comparison(same_code_again: Report, worse_chinese: Report) -> None:
    reread = parse_report(report_json(worse_chinese))
    assert compare_reports(same_code_again, reread) == compare_reports(same_code_again, worse_chinese)


def test_aa_false_alarm_rate_is_at_most_alpha() -> None:
    """A/A: base and head drawn from the same distribution; the gate (no tolerance) must rarely fail."""
    rng = np.random.default_rng(2026)
    settings = StatisticsSettings(resamples=500)
    alpha, simulations, alarms, raw_rejections, raw_tests = 0.05, 200, 0, 0, 0
    for _ in range(simulations):
        draws = [rng.choice([0.0, 0.5, 1.0], p=[0.3, 0.2, 0.5], size=60) for _ in range(2)]
        no_answer = [rng.integers(0, 2, size=16).astype(float) for _ in range(2)]
        comparison = compare_reports(
            _small_report(draws[0], no_answer[0], settings), _small_report(draws[1], no_answer[1], settings)
        )
        distinct = [r for r in comparison.rows if r.measure == "ndcg@10"]
        raw_rejections += sum(r.p_value < alpha for r in distinct)
        raw_tests += len(distinct)
        alarms += not find_regressions(comparison, alpha=alpha, max_drop=0.0).passed
    assert alarms / simulations <= alpha
    # The unadjusted test is calibrated (neither broken nor trivially conservative): about alpha per comparison.
    assert 0.02 <= raw_rejections / raw_tests <= 0.08


def test_inside_one_evaluation_rerank_is_tested_against_hybrid(synthetic_evaluation: Evaluation) -> None:
    report = build_report(synthetic_evaluation)
    rows = compare_ablations(report, "hybrid", "hybrid-rerank")
    assert {r.ablation for r in rows} == {"hybrid-rerank vs hybrid"} and len(rows) == 24
    assert sum(r.gated for r in rows) == 6
    ndcg = next(r for r in rows if r.measure == "ndcg@10" and r.slice == "all")
    expected = synthetic_evaluation.ablations["hybrid-rerank"].aggregates["all"]["ndcg@10"]
    expected -= synthetic_evaluation.ablations["hybrid"].aggregates["all"]["ndcg@10"]
    assert ndcg.difference == pytest.approx(expected, abs=1e-6)
    assert ndcg.ci_low < ndcg.difference < ndcg.ci_high and ndcg.wins > 0 and ndcg.losses > 0
    with pytest.raises(ValueError, match="'bm25s' is not in the report"):
        compare_ablations(report, "bm25s", "hybrid")


def test_views_of_a_comparison(same_code: Report, worse_chinese: Report) -> None:
    comparison = compare_reports(same_code, worse_chinese)
    frame = comparison_frame(comparison.rows)
    assert len(frame) == comparison.family_size + comparison.exploratory_family_size
    assert frame.loc[("hybrid", "recall@1", "zh"), "difference"] < 0
    assert frame.loc[("hybrid", "recall@1", "en"), "difference"] == 0
    differences = per_query_difference_frame(same_code, worse_chinese, "hybrid", "ndcg@10")
    assert set(differences.language[differences.difference != 0]) == {"zh"}
    forest = plot_forest(comparison.rows)
    assert len(forest.axes) == 6 and forest.axes[0].get_title() == "recall@1"
    assert figure_bytes(forest, "svg") == figure_bytes(plot_forest(comparison.rows), "svg")
    chart = plot_per_query_differences(differences, "hybrid", "ndcg@10")
    gained, lost = int((differences.difference > 0).sum()), int((differences.difference < 0).sum())
    assert chart.axes[0].get_title() == f"hybrid ndcg@10 per query: {gained} better, {lost} worse" and lost > gained
    with pytest.raises(ValueError, match="not in both reports"):
        per_query_difference_frame(same_code, worse_chinese, "lexical", "ndcg@10")


def test_language_chart_draws_the_intervals_as_error_bars(synthetic_evaluation: Evaluation) -> None:
    report = build_report(synthetic_evaluation)
    figure = plot_language_metrics(report)
    bars = [c for c in figure.axes[0].containers if getattr(c, "errorbar", None) is not None]
    assert len(bars) == 2, "en and zh bars both carry error bars"
    segments = bars[0].errorbar.lines[2][0].get_segments()
    low, high = report.ablations["lexical"].intervals["en"]["recall@10"]
    assert segments[0][0][1] == pytest.approx(low) and segments[0][1][1] == pytest.approx(high)
    table = interval_frame(report)
    assert (
        table.loc[("lexical", "en"), "recall@10"]
        == f"{report.ablations['lexical'].metrics['en']['recall@10']:.3f} [{low:.3f}, {high:.3f}]"
    )
