"""The benchmark's second data set (CMRC 2018 trial), skipping missing data, abstention inputs and the new targets."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from evalkit.data.fixture import Fixture
from evalkit.measures.abstention import AbstentionPoint, CalibratedFloor
from evalkit.measures.results import QueryResult
from evalkit.runs.benchmark_views import benchmark_targets
from evalkit.runs.evaluation import Evaluation
from evalkit.runs.real_data import (
    BenchmarkConfig,
    abstention_curves,
    abstention_inputs,
    build_setting_fixture,
    format_benchmark,
    parse_setting,
    run_benchmark,
)

from ..conftest import ROOT
from .summaries import benchmark_summary, setting_summary

DATA = ROOT.parent / "shared" / "data"
CMRC = DATA / "cmrc2018-trial" / "cmrc2018_trial.json"
needs_cmrc = pytest.mark.skipif(not CMRC.is_file(), reason=f"needs the CMRC 2018 trial set at {CMRC}")


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
    fixture = build_setting_fixture(setting, _config(DATA, [], []), Path("/"))
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
    queries = sorted(evaluation.fixture.queries, key=lambda q: q.query_id)
    # The values themselves are checked by hand on a four-chunk corpus below; here, that they are shares.
    assert len(inputs.confidence) == len(queries)
    assert all(math.isnan(c) or 0.0 <= c <= 1.0 for c in inputs.confidence)
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


def test_abstention_inputs_by_hand(tiny_evaluation: Evaluation) -> None:
    """Four chunks, three queries, rankings set by hand. With N = 4, a term in two chunks has
    idf = ln(1 + 2.5 / 2.5) = ln 2 and a term in none idf = ln(1 + 4.5 / 0.5) = ln 10."""
    chunks = {"c1": "apple banana", "c2": "apple cherry", "c3": "grape", "c4": "banana cherry"}
    fixture = Fixture.model_validate_json(
        json.dumps(
            {
                "fixture_id": "fruit",
                "fixture_version": "1.0.0",
                "license": "CC0-1.0",
                "attribution": "Hand-written for this test.",
                "documents": [{"doc_id": "d", "language": "en", "title": "Fruit"}],
                "chunks": [{"chunk_id": c, "doc_id": "d", "text": text} for c, text in chunks.items()],
                "queries": [
                    {"query_id": "q1", "language": "en", "text": "banana cherry", "judgments": [_judged("c4", chunks)]},
                    {"query_id": "q2", "language": "en", "text": "apple kiwi"},
                    {"query_id": "q3", "language": "en", "text": "grape", "judgments": [_judged("c3", chunks)]},
                ],
            }
        )
    )
    rankings = {"q1": ("c1", "c3", "c2", "c4"), "q2": ("c3", "c2"), "q3": ()}
    lexical = dataclasses.replace(
        tiny_evaluation.ablations["lexical"],
        results=tuple(QueryResult(q, r, tuple(1.0 for _ in r), 1.0) for q, r in rankings.items()),
        per_query={"q1": {"recall@10": 1.0}, "q2": {"recall@10": 0.75}, "q3": {"recall@10": 0.5}},
    )
    evaluation = dataclasses.replace(tiny_evaluation, fixture=fixture, ablations={"lexical": lexical})
    inputs = abstention_inputs(parse_setting("en/paragraph"), evaluation)
    assert inputs is not None
    assert (inputs.system, inputs.signal, inputs.query_language) == ("lexical", "term coverage@3 of lexical", "en")
    # q1: c1 holds banana, c2 cherry (half the weight each); c4 holds both but is fourth, past the depth of 3.
    # q2: c2 holds apple (ln 2) of apple and kiwi (ln 2 + ln 10 = ln 20). q3: an empty ranking, no evidence.
    assert inputs.confidence == pytest.approx([0.5, math.log(2) / math.log(20), math.nan], rel=1e-12, nan_ok=True)
    assert inputs.answerable == [True, False, True]
    assert inputs.recall == [1.0, 0.0, 0.5]  # a no-answer query's recall is 0, whatever its per-query value


def _judged(chunk_id: str, chunks: dict[str, str]) -> dict[str, object]:
    return {"chunk_id": chunk_id, "grade": 3, "spans": [{"start": 0, "text": chunks[chunk_id]}]}


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

    settings = ("cmrc/paragraph", "zh->en/paragraph", "en/sentence")
    summary = benchmark_summary(
        *(setting_summary(s, {"lexical": 0.9}, abstention=calibrated) for s in settings), wall_seconds=95.0
    )
    outcomes = [(t.target, t.setting_id, t.value, t.met) for t in benchmark_targets(summary)]
    assert outcomes == [
        ("calibrated floor: no-answer FPR at most 0.2 (held-out queries)", "cmrc/paragraph", 0.25, False),
        ("calibrated floor: recall@10 loss at most 0.05 (held-out queries)", "cmrc/paragraph", 0.03, True),
        ("benchmark wall time under 90 s (cache warm)", "all", 95.0, False),
    ]
