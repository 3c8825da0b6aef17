"""The benchmark's second data set (CMRC 2018 trial), skipping missing data, abstention inputs and the new targets."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from evalkit.benchmark import (
    BENCHMARK_RETRIEVAL,
    BenchmarkConfig,
    BenchmarkOptions,
    BenchmarkSummary,
    SettingSummary,
    abstention_curves,
    abstention_inputs,
    benchmark_targets,
    build_fixture,
    format_benchmark,
    parse_setting,
    run_benchmark,
)
from evalkit.measures.abstention import AbstentionPoint, CalibratedFloor
from evalkit.measures.metrics import LatencySummary
from evalkit.retrieval.coverage import TermCoverage

from .conftest import ROOT

DATA = ROOT.parent / "shared" / "data"
CMRC = DATA / "cmrc2018-trial" / "cmrc2018_trial.json"
needs_cmrc = pytest.mark.skipif(not CMRC.is_file(), reason=f"needs the CMRC 2018 trial set at {CMRC}")
LATENCY = LatencySummary(count=1, min_ms=1.0, median_ms=1.0, p95_ms=1.0, max_ms=1.0, mean_ms=1.0)


def _config(data_dir: Path, settings: list[str], ablations: list[str], max_articles: int | None = 6) -> BenchmarkConfig:
    return BenchmarkConfig(
        data_dir=str(data_dir),
        settings=settings,
        ablations=ablations,
        held_out_fraction=0.2,
        seed=0,
        max_articles=max_articles,
        runs=1,
    )


def test_missing_data_sets_are_skipped_with_the_reason(tmp_path: Path) -> None:
    summary, evaluations = run_benchmark(
        _config(tmp_path, ["cmrc/paragraph", "en/paragraph"], ["lexical"]), Path("/"), tmp_path / "cache"
    )
    assert summary.settings == [] and evaluations == {}
    assert set(summary.skipped) == {"cmrc/paragraph", "en/paragraph"}
    assert "cmrc2018-trial/cmrc2018_trial.json" in summary.skipped["cmrc/paragraph"]
    assert "xquad/xquad.en.json" in summary.skipped["en/paragraph"]
    assert summary.data_sha256 == {}
    assert str(tmp_path) not in format_benchmark(summary)
    assert "skipped cmrc/paragraph: data set cmrc2018-trial not found" in format_benchmark(summary)


@needs_cmrc
def test_cmrc_fixture_is_chinese_with_no_answer_queries() -> None:
    setting = parse_setting("cmrc/sentence")
    fixture = build_fixture(setting, _config(DATA, [], []), Path("/"))
    assert fixture.fixture_id == "cmrc2018-trial-cmrc-sentence"
    assert {d.language for d in fixture.documents} == {"zh"}
    assert {q.language for q in fixture.queries} == {"zh"}
    assert any(not q.answerable for q in fixture.queries) and any(q.answerable for q in fixture.queries)
    assert "CMRC 2018" in fixture.attribution


@needs_cmrc
def test_abstention_inputs_are_the_coverage_of_the_returned_chunks(tmp_path: Path) -> None:
    summary, evaluations = run_benchmark(
        _config(DATA, ["cmrc/paragraph"], ["lexical", "bm25s"], max_articles=20), Path("/"), tmp_path / "cache"
    )
    evaluation = evaluations["cmrc/paragraph"]
    inputs = abstention_inputs(parse_setting("cmrc/paragraph"), evaluation)
    assert inputs is not None
    assert (inputs.system, inputs.signal) == ("lexical", "term coverage@3 of lexical")
    coverage = TermCoverage((c.chunk_id, c.text) for c in evaluation.fixture.chunks)
    results = {r.query_id: r for r in evaluation.ablations["lexical"].results}
    queries = sorted(evaluation.fixture.queries, key=lambda q: q.query_id)
    expected = [coverage.coverage(q.text, results[q.query_id].chunk_ids) for q in queries]
    assert inputs.confidence == pytest.approx(expected, nan_ok=True)
    assert inputs.answerable == [q.answerable for q in queries]
    answerable = np.nanmean([c for c, a in zip(inputs.confidence, inputs.answerable, strict=True) if a])
    held_out = np.nanmean([c for c, a in zip(inputs.confidence, inputs.answerable, strict=True) if not a])
    assert answerable > held_out, "coverage must separate answerable from held-out questions"
    calibrated = summary.settings[0].abstention
    assert calibrated is not None
    assert calibrated.calibration_queries + calibrated.held_out_queries == len(queries)
    (curve,) = abstention_curves(evaluations)
    assert curve.calibrated == calibrated
    assert curve.points[0].floor is None and curve.chosen.floor == calibrated.floor
    assert (
        abstention_inputs(
            parse_setting("cmrc/paragraph"),
            dataclasses.replace(evaluation, ablations={"bm25s": evaluation.ablations["bm25s"]}),
        )
        is None
    )


def _point(fpr: float, loss: float) -> AbstentionPoint:
    return AbstentionPoint(floor=1.0, no_answer_fpr=fpr, recall_at_10=0.9, recall_loss=loss)


def test_abstention_targets_only_for_monolingual_paragraph_settings() -> None:
    calibrated = CalibratedFloor(
        floor=1.0,
        max_recall_loss=0.05,
        seed=0,
        calibration_queries=10,
        held_out_queries=10,
        calibration=_point(0.1, 0.04),
        held_out=_point(0.25, 0.03),
    )

    def setting(setting_id: str) -> SettingSummary:
        return SettingSummary(
            setting_id=setting_id,
            fixture_id="x",
            corpus_sha256="0" * 64,
            evaluation_definition_hash="1" * 64,
            chunks=1,
            answerable_queries=1,
            no_answer_queries=1,
            metrics={"lexical": {"ndcg@10": 0.9}},
            latency_ms={"lexical": LATENCY},
            wall_seconds=0.0,
            abstention=calibrated,
        )

    config = BenchmarkOptions(settings=[], ablations=[], held_out_fraction=0.1, seed=0, max_articles=None, runs=1)
    summary = BenchmarkSummary(
        data_sha256={},
        config=config,
        retrieval=BENCHMARK_RETRIEVAL,
        settings=[setting("cmrc/paragraph"), setting("zh->en/paragraph"), setting("en/sentence")],
        wall_seconds=95.0,
    )
    outcomes = [(t.target, t.setting_id, t.value, t.met) for t in benchmark_targets(summary)]
    assert outcomes == [
        ("calibrated floor: no-answer FPR at most 0.2 (held-out queries)", "cmrc/paragraph", 0.25, False),
        ("calibrated floor: recall@10 loss at most 0.05 (held-out queries)", "cmrc/paragraph", 0.03, True),
        ("benchmark wall time under 90 s (cache warm)", "all", 95.0, False),
    ]
