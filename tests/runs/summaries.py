"""Benchmark summaries for the target tests: a setting whose identity fields are placeholders, with nDCG@10 per
ablation, and a summary of such settings under the benchmark preset."""

from __future__ import annotations

from typing import Any

from evalkit.measures.metrics import LatencySummary
from evalkit.runs.real_data import BENCHMARK_RETRIEVAL, BenchmarkOptions, BenchmarkSummary, SettingSummary

LATENCY = LatencySummary(count=1, min_ms=1.0, median_ms=1.0, p95_ms=1.0, max_ms=1.0, mean_ms=1.0)


def setting_summary(setting_id: str, ndcg: dict[str, float], **fields: Any) -> SettingSummary:
    """The setting ``setting_id`` with ``ndcg@10`` per ablation as given; ``fields`` adds or overrides the rest."""
    values: dict[str, Any] = {
        "setting_id": setting_id,
        "fixture_id": "x",
        "corpus_sha256": "0" * 64,
        "evaluation_definition_hash": "1" * 64,
        "chunks": 1,
        "answerable_queries": 1,
        "no_answer_queries": 1,
        "metrics": {a: {"ndcg@10": v} for a, v in ndcg.items()},
        "latency_ms": {a: LATENCY for a in ndcg},
        "wall_seconds": 0.0,
    }
    return SettingSummary(**{**values, **fields})


def benchmark_summary(*settings: SettingSummary, wall_seconds: float = 0.0) -> BenchmarkSummary:
    """A benchmark summary of ``settings`` (empty options, the benchmark preset)."""
    config = BenchmarkOptions(settings=[], ablations=[], held_out_fraction=0.1, seed=0, max_articles=None, runs=1)
    return BenchmarkSummary(
        data_sha256={}, config=config, retrieval=BENCHMARK_RETRIEVAL, settings=list(settings), wall_seconds=wall_seconds
    )
