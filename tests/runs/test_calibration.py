"""Calibration on the fixture's own calibration split: the split, the choices made on it alone, the floors applied
to the evaluation part, and what the report records."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from evalkit.data.fixture import Judgment, LoadedFixture, Query
from evalkit.reporting.build import build_report
from evalkit.reporting.report import parse_report, report_json
from evalkit.retrieval.coverage import TermCoverage
from evalkit.retrieval.presets import PRESETS
from evalkit.runs.ablations import ABLATION_IDS, select_ablations
from evalkit.runs.calibration import (
    FUSION_CHOICES,
    SIGNALS,
    CalibrationOptions,
    abstains,
    apply_floors,
    calibrated_evaluation,
    calibration_options,
    check_fraction,
    format_calibration,
    fusion_choice,
    signal,
    split_queries,
)
from evalkit.runs.evaluation import Evaluation


def _strata(queries: list[Query] | tuple[Query, ...], ids: tuple[str, ...]) -> Counter[tuple[str, bool]]:
    chosen = set(ids)
    return Counter((q.language, q.answerable) for q in queries if q.query_id in chosen)


def test_split_is_stratified_disjoint_and_covering(synthetic: LoadedFixture) -> None:
    queries = synthetic.fixture.queries
    split = split_queries(queries, 0.5, seed=0)
    assert set(split.calibration).isdisjoint(split.evaluation)
    assert set(split.calibration) | set(split.evaluation) == {q.query_id for q in queries}
    assert list(split.calibration) == sorted(split.calibration) and list(split.evaluation) == sorted(split.evaluation)
    calibration, evaluation = _strata(queries, split.calibration), _strata(queries, split.evaluation)
    # 34 en answerable, 35 zh answerable, 8 + 8 no-answer: round half up of half of each
    assert calibration == {("en", True): 17, ("zh", True): 18, ("en", False): 4, ("zh", False): 4}
    assert evaluation == {("en", True): 17, ("zh", True): 17, ("en", False): 4, ("zh", False): 4}
    small = split_queries(queries, 0.25, seed=0)
    assert _strata(queries, small.calibration) == {("en", True): 9, ("zh", True): 9, ("en", False): 2, ("zh", False): 2}


def test_split_is_seeded_and_hashed(synthetic: LoadedFixture) -> None:
    queries = synthetic.fixture.queries
    first, again = split_queries(queries, 0.5, seed=7), split_queries(tuple(reversed(queries)), 0.5, seed=7)
    assert first == again and first.sha256 == again.sha256, "the order of the queries does not matter"
    other = split_queries(queries, 0.5, seed=8)
    assert other.calibration != first.calibration and other.sha256 != first.sha256
    assert len(first.sha256) == 64


@pytest.mark.parametrize("fraction", [0, 0.0, 1, 1.0, 1.5, -0.2, math.nan, math.inf, True])
def test_fractions_outside_zero_one_are_refused_naming_the_option(fraction: float) -> None:
    with pytest.raises(ValueError, match="--calibrate must be a fraction strictly between 0 and 1"):
        check_fraction(fraction)
    with pytest.raises(ValueError, match="--calibrate"):
        calibration_options(fraction, None)


def test_a_fraction_leaving_a_stratum_empty_names_the_stratum(synthetic: LoadedFixture) -> None:
    message = r"--calibrate 0.01: the en no-answer queries \(8\) would leave the calibration part"
    with pytest.raises(ValueError, match=message):
        split_queries(synthetic.fixture.queries, 0.01)
    with pytest.raises(ValueError, match=r"no-answer queries \(8\) would leave the evaluation part"):
        split_queries(synthetic.fixture.queries, 0.99)


def test_options_need_calibrate_for_a_seed() -> None:
    assert calibration_options(None, None) is None
    assert calibration_options(0.3, None) == CalibrationOptions(fraction=0.3, seed=0)
    assert calibration_options(0.3, 5) == CalibrationOptions(fraction=0.3, seed=5)
    with pytest.raises(ValueError, match="--calibrate-seed needs --calibrate"):
        calibration_options(None, 5)


def test_unknown_fusion_choices_and_signals_list_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown fusion choice 'best'; valid: preset, lexical-only, vector-only"):
        fusion_choice("best", PRESETS["benchmark"])
    with pytest.raises(ValueError, match="unknown confidence signal 'vibes'; valid: term-coverage, top-score"):
        signal("vibes")
    own = fusion_choice("preset", PRESETS["benchmark"])
    assert (own.fusion, own.lexical_weight, own.vector_weight) == ("margin-weighted", 0.5, 0.5)
    assert {"lexical-only", "vector-only"} <= set(FUSION_CHOICES), "the single parts are in the declared set"


def test_abstains_below_the_floor_and_on_nan_only_with_a_floor() -> None:
    assert abstains(0.2, 0.3) and abstains(math.nan, 0.3)
    assert not abstains(0.3, 0.3) and not abstains(0.9, 0.3)
    assert not abstains(math.nan, None) and not abstains(-1.0, None)


@pytest.fixture(scope="module")
def calibrated(synthetic: LoadedFixture) -> Evaluation:
    ablations = select_ablations(list(ABLATION_IDS))
    return calibrated_evaluation(synthetic, ablations, PRESETS["synthetic-v1"], CalibrationOptions(fraction=0.5), 1)


def test_only_the_evaluation_part_is_evaluated(synthetic: LoadedFixture, calibrated: Evaluation) -> None:
    record = calibrated.calibration
    assert record is not None
    split = split_queries(synthetic.fixture.queries, 0.5, seed=0)
    assert record.split_sha256 == split.sha256
    assert (record.calibration_queries, record.evaluation_queries) == (43, 42)
    evaluated = {q.query_id for q in calibrated.fixture.queries}
    assert evaluated == set(split.evaluation)
    for result in calibrated.ablations.values():
        assert set(result.per_query) == evaluated
        assert {r.query_id for r in result.results} == evaluated
        assert {f.query_id for f in result.failures} <= evaluated


def test_the_chosen_fusion_is_not_below_either_part_on_the_calibration_part(calibrated: Evaluation) -> None:
    record = calibrated.calibration
    assert record is not None and record.fusion is not None
    scores = record.fusion.candidates
    assert list(scores) == list(FUSION_CHOICES)
    assert scores[record.fusion.chosen] == max(scores.values())
    assert scores[record.fusion.chosen] >= max(scores["lexical-only"], scores["vector-only"])
    chosen = record.fusion.settings
    settings = calibrated.settings
    assert (settings.fusion, settings.lexical_weight, settings.vector_weight) == (
        chosen.fusion,
        chosen.lexical_weight,
        chosen.vector_weight,
    )


def test_the_floor_is_applied_and_no_answer_fpr_measured_with_it(calibrated: Evaluation) -> None:
    record = calibrated.calibration
    assert record is not None and set(record.floors) == {"hybrid-rerank"}
    floor = record.floors["hybrid-rerank"]
    assert floor.floor is not None, "on the synthetic fixture a floor lowers the FPR within the recall budget"
    assert floor.calibration.recall_loss <= record.max_recall_loss + 1e-12
    coverage = TermCoverage((c.chunk_id, c.text) for c in calibrated.fixture.chunks)
    queries = {q.query_id: q for q in calibrated.fixture.queries}
    result = calibrated.ablations["hybrid-rerank"]
    confidence = SIGNALS[floor.signal]
    for r in result.results:
        if r.chunk_ids:
            assert confidence(coverage, queries[r.query_id], r) >= floor.floor, r.query_id
    reported = result.aggregates["all"]["no_answer_fpr"]
    assert reported == pytest.approx(floor.evaluation.no_answer_fpr, abs=1e-12)
    assert result.aggregates["all"]["recall@10"] == pytest.approx(floor.evaluation.recall_at_10, abs=1e-12)


def test_without_a_floor_nothing_is_withheld(calibrated: Evaluation) -> None:
    same, outcomes = apply_floors(calibrated, {"hybrid": ("top-score", None)})
    assert same.ablations["hybrid"].results == calibrated.ablations["hybrid"].results
    assert same.projection_sha256 == calibrated.projection_sha256
    assert outcomes["hybrid"].recall_loss == 0.0


def _relabelled(loaded: LoadedFixture, ids: tuple[str, ...]) -> LoadedFixture:
    """Judgments rotated among the answerable queries of ``ids`` (answerability kept), and every grade changed."""
    moved = [q for q in sorted(loaded.fixture.queries, key=lambda q: q.query_id) if q.query_id in ids and q.answerable]
    rotated = {q.query_id: moved[(i + 1) % len(moved)].judgments for i, q in enumerate(moved)}
    queries = []
    for query in loaded.fixture.queries:
        if query.query_id in rotated:
            judgments = tuple(
                Judgment(chunk_id=j.chunk_id, grade=4 - j.grade, spans=j.spans) for j in rotated[query.query_id]
            )
            query = query.model_copy(update={"judgments": judgments})
        queries.append(query)
    fixture = loaded.fixture.model_copy(update={"queries": tuple(queries)})
    return LoadedFixture(fixture=type(fixture).model_validate(fixture.model_dump()), aliases=loaded.aliases)


@pytest.mark.parametrize("seed", [0, 3])
def test_changing_evaluation_labels_never_changes_the_choice(synthetic: LoadedFixture, seed: int) -> None:
    options = CalibrationOptions(fraction=0.5, seed=seed)
    ablations = select_ablations(list(ABLATION_IDS))
    split = split_queries(synthetic.fixture.queries, 0.5, seed)
    relabelled = _relabelled(synthetic, split.evaluation)
    before = calibrated_evaluation(synthetic, ablations, PRESETS["synthetic-v1"], options, 1)
    after = calibrated_evaluation(relabelled, ablations, PRESETS["synthetic-v1"], options, 1)
    assert before.calibration is not None and after.calibration is not None
    assert before.ablations["hybrid"].aggregates != after.ablations["hybrid"].aggregates, "the labels did change"
    assert before.calibration.split_sha256 == after.calibration.split_sha256
    assert before.calibration.fusion == after.calibration.fusion
    chosen = {a: (f.signal, f.floor, f.calibration) for a, f in before.calibration.floors.items()}
    assert chosen == {a: (f.signal, f.floor, f.calibration) for a, f in after.calibration.floors.items()}
    assert before.settings == after.settings


def test_changing_calibration_labels_can_change_the_choice(synthetic: LoadedFixture) -> None:
    """The converse, so that the test above could fail: the choice does read the calibration labels."""
    options = CalibrationOptions(fraction=0.5, seed=0)
    ablations = select_ablations(list(ABLATION_IDS))
    split = split_queries(synthetic.fixture.queries, 0.5, 0)
    before = calibrated_evaluation(synthetic, ablations, PRESETS["synthetic-v1"], options, 1)
    relabelled = _relabelled(synthetic, split.calibration)
    after = calibrated_evaluation(relabelled, ablations, PRESETS["synthetic-v1"], options, 1)
    assert before.calibration is not None and after.calibration is not None
    assert before.calibration.fusion != after.calibration.fusion


def test_the_report_records_the_calibration_and_reads_it_back(calibrated: Evaluation) -> None:
    report = build_report(calibrated)
    assert report.calibration == calibrated.calibration
    data = report_json(report)
    assert parse_report(data) == report
    assert b'"split_sha256"' in data


def test_a_report_without_calibration_has_no_calibration_key(synthetic_evaluation: Evaluation) -> None:
    data = report_json(build_report(synthetic_evaluation))
    assert b"calibration" not in data
    assert parse_report(data).calibration is None


def test_the_printed_record_names_every_choice(calibrated: Evaluation) -> None:
    record = calibrated.calibration
    assert record is not None and record.fusion is not None
    text = format_calibration(record)
    assert f"split sha256 {record.split_sha256[:16]}" in text
    assert f"fusion chosen on hybrid: {record.fusion.chosen}" in text
    assert "floor of hybrid-rerank: " in text
    assert len(text.splitlines()) == 3


def test_seeds_give_different_splits_with_the_same_strata(synthetic: LoadedFixture) -> None:
    queries = synthetic.fixture.queries
    splits = [split_queries(queries, 0.5, seed) for seed in range(5)]
    assert len({s.sha256 for s in splits}) == 5
    counts = {tuple(sorted(_strata(queries, s.calibration).items())) for s in splits}
    assert len(counts) == 1
    assert np.isclose(len(splits[0].calibration) / len(queries), 0.5, atol=0.02)


def test_benchmark_targets_read_a_calibrated_setting_s_floor(calibrated: Evaluation) -> None:
    from evalkit.runs.benchmark_views import benchmark_targets
    from evalkit.runs.real_data import BenchmarkOptions, BenchmarkSummary, SettingSummary

    record = calibrated.calibration
    assert record is not None
    record = record.model_copy(update={"floors": {"usem3-hybrid-rerank": record.floors["hybrid-rerank"]}})
    setting = SettingSummary(
        setting_id="en/paragraph",
        fixture_id="xquad-en-paragraph",
        corpus_sha256="0" * 64,
        evaluation_definition_hash="1" * 64,
        chunks=1,
        answerable_queries=1,
        no_answer_queries=1,
        metrics={},
        latency_ms={},
        wall_seconds=0.0,
        calibration=record,
    )
    options = BenchmarkOptions(
        settings=["en/paragraph"], ablations=["lexical"], held_out_fraction=0.1, seed=0, max_articles=None, runs=1
    )
    summary = BenchmarkSummary(
        data_sha256={}, config=options, retrieval=PRESETS["benchmark"], settings=[setting], wall_seconds=1.0
    )
    targets = {t.target: t for t in benchmark_targets(summary) if t.setting_id == "en/paragraph"}
    floor = record.floors["usem3-hybrid-rerank"].evaluation
    fpr = targets["calibrated floor: no-answer FPR at most 0.2 (held-out queries)"]
    assert (fpr.value, fpr.met) == (floor.no_answer_fpr, floor.no_answer_fpr <= 0.2)
    loss = targets["calibrated floor: recall@10 loss at most 0.05 (held-out queries)"]
    assert (loss.value, loss.bound) == (floor.recall_loss, 0.05)
    assert "calibration" not in options.model_dump(mode="json")
