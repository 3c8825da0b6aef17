"""Quality gates: the seed gates of gates.json, thresholds, committed baselines and the gate exception."""

from __future__ import annotations

import json

import pytest

from evalkit.data.fixture import LoadedFixture
from evalkit.data.settings import RetrievalSettings
from evalkit.measures.metrics import LatencySummary
from evalkit.reporting.build import build_report
from evalkit.reporting.gate_specs import GateThresholds, load_gate_file, merge_gates
from evalkit.reporting.gates import (
    Baselines,
    GateFailure,
    assess,
    baseline_gates,
    baselines_from_report,
    baselines_json,
    check_gates,
    collect_gates,
    evaluate_gates,
    format_gates,
)
from evalkit.reporting.report import AblationReport, GateOutcome, QueryCounts, Report
from evalkit.runs.evaluation import Evaluation

from ..conftest import SYNTHETIC_DIR

LATENCY = LatencySummary(count=1, min_ms=1.0, median_ms=1.0, p95_ms=1.0, max_ms=1.0, mean_ms=1.0)
COUNTS = QueryCounts(answerable=1, no_answer=1)
SEED_FILE = load_gate_file(SYNTHETIC_DIR)
assert SEED_FILE is not None
SEED = SEED_FILE.gates
"""The four seed gates, as the synthetic fixture's gates.json declares them."""


def _ablation(mode: str, **metrics: float) -> AblationReport:
    row = {key.replace("_at_", "@"): value for key, value in metrics.items()}
    table = {name: dict(row) for name in ("all", "en", "zh")}
    return AblationReport(
        mode=mode,
        metrics=table,  # type: ignore[arg-type]
        query_counts={"all": COUNTS, "en": COUNTS, "zh": COUNTS},
        latency_ms=LATENCY,
        failures=(),
    )


def _report(hybrid_ndcg: float, rerank_mrr: float, rerank_ndcg: float, fpr: float) -> Report:
    return Report(
        fixture_id="fx",
        fixture_version="1.0.0",
        corpus_sha256="0" * 64,
        evaluation_definition_hash="1" * 64,
        provider_definitions_hash="2" * 64,
        deterministic_projection_sha256="3" * 64,
        runs=2,
        retrieval_settings=RetrievalSettings(),
        ablations={
            "hybrid": _ablation("hybrid", ndcg_at_10=hybrid_ndcg, context_precision=0.5, context_recall=0.5),
            "hybrid-rerank": _ablation(
                "hybrid-rerank", mrr_at_10=rerank_mrr, ndcg_at_10=rerank_ndcg, no_answer_fpr=fpr
            ),
        },
    )


def _by_name(outcomes: tuple[GateOutcome, ...]) -> dict[str, GateOutcome]:
    return {g.gate: g for g in outcomes}


def test_seed_gates_pass_at_their_bounds() -> None:
    # Bounds are inclusive: exactly at the threshold passes.
    outcomes = evaluate_gates(_report(0.80, 0.78, 0.75, 0.34), SEED)
    assert [g.passed for g in outcomes] == [True, True, True, True]
    assert _by_name(outcomes)["rerank ndcg@10 drop vs hybrid"].value == pytest.approx(0.05, abs=1e-12)


def test_each_seed_gate_fails_on_its_own() -> None:
    cases = {
        "hybrid-rerank mrr@10": _report(0.76, 0.77, 0.76, 0.0),
        "hybrid-rerank ndcg@10": _report(0.74, 0.9, 0.74, 0.0),
        "hybrid-rerank no_answer_fpr": _report(0.8, 0.9, 0.8, 0.35),
        "rerank ndcg@10 drop vs hybrid": _report(0.9, 0.9, 0.8, 0.0),
    }
    for gate, report in cases.items():
        failed = [g.gate for g in evaluate_gates(report, SEED) if not g.passed]
        assert failed == [gate]


def test_gate_failure_lists_every_failed_gate_with_value_and_threshold() -> None:
    outcomes = evaluate_gates(_report(0.9, 0.5, 0.6, 0.5), SEED)
    with pytest.raises(GateFailure) as info:
        check_gates(outcomes)
    message = str(info.value)
    assert message.startswith("4 quality gate(s) failed:")
    assert "hybrid-rerank mrr@10 = 0.5000, required >= 0.7800" in message
    assert "hybrid-rerank ndcg@10 = 0.6000, required >= 0.7500" in message
    assert "hybrid-rerank no_answer_fpr = 0.5000, required <= 0.3400" in message
    assert "rerank ndcg@10 drop vs hybrid = 0.3000, required <= 0.0500" in message
    assert len(info.value.failed) == 4


def test_a_failed_value_that_rounds_to_its_bound_is_shown_with_the_digits_that_differ() -> None:
    """0.74996 against >= 0.75 fails; at four decimals both print 0.7500, which reads as a pass."""
    outcomes = evaluate_gates(_report(0.9, 0.9, 0.74996, 0.0), SEED)
    failed = [g for g in outcomes if not g.passed]
    with pytest.raises(GateFailure) as info:
        check_gates(failed)
    assert "hybrid-rerank ndcg@10 = 0.74996, required >= 0.75000" in str(info.value)
    passed = format_gates([g for g in outcomes if g.passed])
    assert "= 0.9000, required >= 0.7800" in passed  # a passed gate keeps four decimals


def test_check_gates_is_quiet_when_all_pass() -> None:
    outcomes = evaluate_gates(_report(0.8, 0.9, 0.8, 0.0), SEED)
    assert check_gates(outcomes) is None
    assert format_gates(outcomes).count("PASS") == 4


def test_missing_requested_ablation_fails_as_not_evaluated() -> None:
    report = _report(0.8, 0.9, 0.8, 0.0)
    partial = report.model_copy(update={"ablations": {"hybrid": report.ablations["hybrid"]}})
    outcomes = _by_name(evaluate_gates(partial, SEED, requested=["hybrid-rerank"]))
    assert list(outcomes) == [g.label for g in SEED]
    assert all(g.passed is False and g.detail == "not evaluated" for g in outcomes.values())
    with pytest.raises(GateFailure, match="missing"):
        check_gates(tuple(outcomes.values()))


def test_gates_on_systems_not_run_are_skipped() -> None:
    report = _report(0.8, 0.9, 0.8, 0.0)
    partial = report.model_copy(update={"ablations": {"hybrid": report.ablations["hybrid"]}})
    assert evaluate_gates(partial, SEED) == ()


def test_impossible_threshold_is_a_failed_gate_not_an_error() -> None:
    gates = merge_gates(SEED, GateThresholds(min_reranked_mrr_at_10=1.01).gates())
    outcomes = evaluate_gates(_report(0.8, 1.0, 0.8, 0.0), gates)
    assert not _by_name(outcomes)["hybrid-rerank mrr@10"].passed


def test_thresholds_must_be_finite() -> None:
    with pytest.raises(ValueError):
        GateThresholds(max_no_answer_fpr=float("nan"))


def test_baseline_gates_use_floor_minus_tolerance() -> None:
    report = _report(0.8, 0.9, 0.8, 0.0)
    baselines = Baselines(
        fixture_id="fx",
        fixture_version="1.0.0",
        tolerance=0.01,
        ablations={"hybrid": {"en": {"context_precision": 0.505, "context_recall": 0.52}}},
    )
    outcomes = _by_name(evaluate_gates(report, baseline_gates(baselines)))
    precision = outcomes["hybrid context_precision [en] baseline"]
    recall = outcomes["hybrid context_recall [en] baseline"]
    assert (precision.passed, precision.threshold) == (True, pytest.approx(0.495))
    assert (recall.passed, recall.threshold) == (False, pytest.approx(0.51))


def test_baselines_of_another_fixture_version_are_refused(tiny_evaluation: Evaluation) -> None:
    baselines = Baselines(fixture_id="tiny-bilingual", fixture_version="0.9.0", ablations={})
    with pytest.raises(ValueError, match="regenerate it with `evalkit baseline --write`"):
        assess(tiny_evaluation, SEED, baselines)


def test_baselines_round_trip(tiny_evaluation: Evaluation) -> None:
    report = build_report(tiny_evaluation)
    baselines = baselines_from_report(report)
    assert set(baselines.ablations) == {"lexical", "token-hash-vector", "alias-vector", "hybrid"}
    expected = round(tiny_evaluation.ablations["hybrid"].aggregates["zh"]["context_recall"], 6)
    assert baselines.ablations["hybrid"]["zh"]["context_recall"] == expected
    assert Baselines.model_validate_json(baselines_json(baselines)) == baselines
    assert all(g.passed for g in evaluate_gates(report, baseline_gates(baselines)))


def test_baselines_need_every_baseline_ablation(tiny_evaluation: Evaluation) -> None:
    report = build_report(tiny_evaluation)
    partial = report.model_copy(update={"ablations": {"lexical": report.ablations["lexical"]}})
    with pytest.raises(ValueError, match="token-hash-vector"):
        baselines_from_report(partial)


def test_committed_fixture_passes_every_gate(synthetic: LoadedFixture, synthetic_evaluation: Evaluation) -> None:
    outcomes = evaluate_gates(build_report(synthetic_evaluation), collect_gates(SYNTHETIC_DIR, synthetic.fixture))
    assert len(outcomes) == 4 + 4 * 3 * 2
    check_gates(outcomes)


def test_committed_baselines_cover_every_ablation_and_language() -> None:
    data = json.loads((SYNTHETIC_DIR / "baselines.json").read_text(encoding="utf-8"))
    for ablation in ("lexical", "token-hash-vector", "alias-vector", "hybrid"):
        for slice_name in ("all", "en", "zh"):
            assert set(data["ablations"][ablation][slice_name]) == {"context_precision", "context_recall"}


def test_assess_puts_every_gate_in_the_report(tiny_evaluation: Evaluation) -> None:
    gates = merge_gates(SEED, GateThresholds(min_reranked_mrr_at_10=1.01).gates())
    report = assess(tiny_evaluation, gates)
    assert report.gates == evaluate_gates(build_report(tiny_evaluation), gates)
    assert [g.gate for g in report.gates if not g.passed] == ["hybrid-rerank mrr@10"]
    assert len(report.gates) == 4


def test_assess_takes_thresholds_as_the_seed_gates_they_set(tiny_evaluation: Evaluation) -> None:
    thresholds = GateThresholds(min_reranked_mrr_at_10=1.01, max_rerank_ndcg_drop=0.05)
    report = assess(tiny_evaluation, thresholds)
    assert [(g.gate, g.passed) for g in report.gates] == [
        ("hybrid-rerank mrr@10", False),
        ("rerank ndcg@10 drop vs hybrid", True),
    ]
