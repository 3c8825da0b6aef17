"""Tests for evalkit.retrieval.vector_index: the choice by corpus size and provider, refusals before indexing,
sparse search equal to exact search, the hnsw index's recall and determinism, and the recall record."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalkit.app.cli import main
from evalkit.common.output import ENV_VAR
from evalkit.data.fixture import Chunk, Document, LoadedFixture
from evalkit.data.schema import Matrix
from evalkit.data.settings import HnswSettings, RetrievalSettings, VectorIndexRecord
from evalkit.reporting.build import build_report, evaluation_source
from evalkit.reporting.report import Report
from evalkit.retrieval import vector_index
from evalkit.retrieval.database import KnowledgeDatabase
from evalkit.retrieval.embeddings import ProviderUnavailableError, TokenHashProvider, fingerprint, l2_normalize
from evalkit.retrieval.service import KnowledgeService
from evalkit.retrieval.shards import local_store
from evalkit.retrieval.vector_index import (
    AUTO_EXACT_BELOW,
    ExactIndex,
    HnswIndex,
    IndexPlan,
    SparseIndex,
    exact_top,
    plan_index,
    planned_index,
    recall_at,
    recall_of,
    recall_sample,
    row_scores,
)
from evalkit.runs import evaluation as evaluation_module
from evalkit.runs.ablations import ABLATION_IDS, select_ablations
from evalkit.runs.evaluation import Evaluation, evaluate, index_notes

ALL = select_ablations(list(ABLATION_IDS))
TINY_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
WORDS = ["river", "bridge", "library", "museum", "station", "北京", "上海", "大学", "河流", "公园", "garden", "tower"]


class DenseProvider:
    """A provider with dense rows (no ``sparse_rows``), as a neural model's."""

    definition: Mapping[str, Any] = {"kind": "dense-test"}
    dimensions = 16

    def embed(self, texts: Sequence[str]) -> Matrix:
        rows = [np.random.default_rng(sum(map(ord, t))).standard_normal(self.dimensions) for t in texts]
        return l2_normalize(np.array(rows).reshape(len(texts), self.dimensions))


def _sparse_rows(seed: int, rows: int = 400, width: int = 64, nonzeros: int = 5) -> Matrix:
    rng = np.random.default_rng(seed)
    matrix = np.zeros((rows, width), dtype=np.float32)
    for row in matrix:
        row[rng.choice(width, size=nonzeros, replace=False)] = rng.standard_normal(nonzeros)
    return l2_normalize(matrix)


def test_default_settings_dump_as_before_and_choices_are_recorded() -> None:
    assert "vector_index" not in RetrievalSettings().model_dump(mode="json")  # the definition hash is unchanged
    assert "hnsw" not in RetrievalSettings().model_dump(mode="json")
    assert RetrievalSettings(vector_index="exact").model_dump(mode="json")["vector_index"] == "exact"
    assert RetrievalSettings(hnsw=HnswSettings(expansion_search=64)).model_dump(mode="json")["hnsw"]


def test_auto_is_exact_for_a_small_corpus_and_by_provider_for_a_large_one(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = RetrievalSettings()
    assert plan_index(settings, AUTO_EXACT_BELOW - 1, TokenHashProvider(64)).kind == "exact"
    assert plan_index(settings, AUTO_EXACT_BELOW, TokenHashProvider(64)).kind == "sparse"
    assert plan_index(settings, AUTO_EXACT_BELOW, DenseProvider()).kind == "hnsw"
    monkeypatch.setattr(vector_index, "usearch_installed", lambda: False)
    fallback = plan_index(settings, AUTO_EXACT_BELOW, DenseProvider())
    assert (fallback.kind, fallback.reason) == ("exact", "usearch-missing")
    assert "pip install 'evalkit[ann]'" in fallback.note
    with pytest.raises(ProviderUnavailableError, match="vector_index 'hnsw' needs usearch"):
        plan_index(RetrievalSettings(vector_index="hnsw"), 10, DenseProvider())


def test_a_setting_the_provider_cannot_serve_is_refused() -> None:
    with pytest.raises(ValueError, match="vector_index 'sparse' needs a provider with sparse rows"):
        plan_index(RetrievalSettings(vector_index="sparse"), 10, DenseProvider())


def test_a_budget_too_small_for_the_corpus_is_refused_naming_the_setting() -> None:
    texts = [f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]} {i}" for i in range(1000)]
    exact = RetrievalSettings(vector_index="exact", vector_memory_mib=1)
    with pytest.raises(ValueError, match=r"vector_memory_mib 1: the exact vector index of 300,000 chunks needs about"):
        planned_index(exact, texts * 300, TokenHashProvider(1024))
    # A sparse index of the same corpus is far smaller: the estimate reads the rows' nonzeros on a sample.
    sparse = RetrievalSettings(vector_index="sparse", vector_memory_mib=100)
    assert planned_index(sparse, texts * 300, TokenHashProvider(1024)).kind == "sparse"


def test_sparse_search_gives_exact_search_ids_and_scores_to_float_rounding() -> None:
    matrix = _sparse_rows(0)
    exact, index = ExactIndex(matrix), SparseIndex([matrix[:150], matrix[150:]])
    queries = _sparse_rows(1, rows=30)
    for query in queries:
        for limit in (1, 10, 390):  # 390: fewer rows score above zero than asked for, so zeros compete
            want, want_scores = exact.search(query, limit)
            got, got_scores = index.search(query, limit)
            np.testing.assert_allclose(got_scores, want_scores, atol=1e-6)
            assert set(got[want_scores > 1e-5].tolist()) == set(want[want_scores > 1e-5].tolist())
    assert np.array_equal(index.rows([3, 1]), matrix[[3, 1]])
    assert np.array_equal(np.concatenate(list(index.blocks())), matrix)


def test_hnsw_recall_against_exact_and_the_same_graph_in_every_process() -> None:
    pytest.importorskip("usearch")
    matrix = l2_normalize(np.random.default_rng(0).standard_normal((2000, 24)))
    queries = l2_normalize(np.random.default_rng(1).standard_normal((40, 24)))
    index = HnswIndex([matrix[:1000], matrix[1000:]], 24, HnswSettings())
    exact = [scores for _, scores in exact_top([matrix], queries, 10)]
    assert recall_at(index, exact, queries) >= 0.99
    found, scores = index.search(queries[0], 10)
    assert np.array_equal(scores, row_scores(matrix[found], queries[0]))  # rescored from the stored rows
    script = (
        "import numpy as np; from evalkit.data.settings import HnswSettings; "
        "from evalkit.retrieval.embeddings import l2_normalize; from evalkit.retrieval.vector_index import HnswIndex; "
        "m = l2_normalize(np.random.default_rng(0).standard_normal((2000, 24))); "
        "q = l2_normalize(np.random.default_rng(1).standard_normal((40, 24))); "
        "i = HnswIndex([m[:1000], m[1000:]], 24, HnswSettings()); "
        "print([i.search(x, 10)[0].tolist() for x in q])"
    )
    here = str([index.search(query, 10)[0].tolist() for query in queries])
    for seed in ("0", "99"):
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env={"PYTHONHASHSEED": seed}, check=True
        )
        assert out.stdout.strip() == here
    assert IndexPlan("hnsw", "set", HnswSettings()).deterministic
    assert not IndexPlan("hnsw", "set", HnswSettings(build_threads=2)).deterministic


def test_recall_sample_is_seeded_and_sorted() -> None:
    assert recall_sample(5) == [0, 1, 2, 3, 4]
    sample = recall_sample(1000, seed=3, size=20)
    assert sample == recall_sample(1000, seed=3, size=20) == sorted(sample)
    assert len(set(sample)) == 20


def _database() -> KnowledgeDatabase:
    database = KnowledgeDatabase(":memory:")
    database.add_documents(
        [Document(doc_id="en", language="en", title="en"), Document(doc_id="zh", language="zh", title="zh")]
    )
    rng = np.random.default_rng(5)
    chunks = [
        Chunk(chunk_id=f"c{i:03d}", doc_id="zh" if i % 2 else "en", text=" ".join(rng.choice(WORDS, size=6)))
        for i in range(120)
    ]
    database.add_chunks(chunks)
    return database


@pytest.mark.parametrize("kind", ["sparse", "hnsw"])
def test_service_with_an_index_records_its_recall_and_agrees_with_exact(kind: str) -> None:
    if kind == "hnsw":
        pytest.importorskip("usearch")
    queries = ["river bridge museum", "北京 大学", "garden tower station", "河流 公园 library"]
    provider = TokenHashProvider(64)
    database = _database()
    exact = KnowledgeService(database, RetrievalSettings(vector_min_similarity=0.0), provider)
    want = {q: exact.search(q, "vector") for q in queries}
    assert exact.vector_index_record(queries).recall_at_10 is None  # exact search is the reference
    indexed = KnowledgeService(database, RetrievalSettings(vector_min_similarity=0.0, vector_index=kind), provider)
    indexed.index_embeddings()
    for query in queries:
        got = indexed.search(query, "vector")
        assert [h.chunk_id for h in got] == [h.chunk_id for h in want[query]]
        np.testing.assert_allclose([h.score for h in got], [h.score for h in want[query]], atol=1e-6)
    record = indexed.vector_index_record(queries)
    assert (record.index, record.chunks, record.sample_queries, record.recall_at_10) == (kind, 120, 4, 1.0)
    key = fingerprint(provider)
    assert np.array_equal(database.vectors(key, ["c003", "c001"]), exact.database.vectors(key, ["c003", "c001"]))


def test_sharded_sparse_index_answers_as_the_single_database() -> None:
    database = _database()
    settings = RetrievalSettings(vector_min_similarity=0.0, vector_index="sparse")
    provider = TokenHashProvider(64)
    single = KnowledgeService(database, settings, provider)
    sharded = KnowledgeService(local_store(database, 3), settings, provider)
    for query in ["river bridge museum", "北京 大学", "garden tower"]:
        assert sharded.search(query, "vector") == single.search(query, "vector")
    assert sharded.vector_index_record(["river", "大学"]).recall_at_10 == 1.0


def test_recall_counts_a_row_tied_at_the_cut_off_as_found() -> None:
    assert recall_of([[0.9, 0.5]], [[0.9, 0.5]]) == 1.0
    assert recall_of([[0.9, 0.5 - 1e-7]], [[0.9, 0.5]]) == 1.0  # the last bit of a sparse sum
    assert recall_of([[0.9, 0.4]], [[0.9, 0.5]]) == 0.5
    assert recall_of([[]], [[]]) == 1.0


def test_an_evaluation_with_an_index_records_its_recall_in_the_report_and_hash(
    tiny: LoadedFixture, tiny_evaluation: Evaluation, capsys: pytest.CaptureFixture[str]
) -> None:
    sparse = evaluate(tiny, ALL, RetrievalSettings(vector_index="sparse"), runs=1)
    assert sparse.evaluation_definition_hash != tiny_evaluation.evaluation_definition_hash
    records = {pid: (r.index, r.recall_at_10) for pid, r in sparse.vector_indexes.items()}
    assert records and all(record == ("sparse", 1.0) for record in records.values())
    assert "recall@10 1.0000 against exact search" in capsys.readouterr().err
    report = build_report(evaluation_source(sparse))
    assert report.vector_indexes is not None and set(report.vector_indexes) == set(records)
    assert Report.model_validate_json(report.model_dump_json()) == report
    assert build_report(evaluation_source(tiny_evaluation)).vector_indexes is None  # small corpus: as before


def test_an_unservable_setting_is_refused_before_indexing(tiny: LoadedFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("indexing started")

    monkeypatch.setattr(evaluation_module, "run_once", never)
    monkeypatch.setattr(vector_index, "usearch_installed", lambda: False)
    with pytest.raises(ProviderUnavailableError, match="vector_index 'hnsw' needs usearch"):
        evaluate(tiny, ALL, RetrievalSettings(vector_index="hnsw"), runs=1)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"vector_index": "hnsw"}, "vector_index 'hnsw' needs usearch"),
        ({"vector_index": "flat"}, "vector_index"),
        ({"hnsw": {"connectivity": 1}}, "connectivity"),
        ({"hnsw": {"dtype": "b1"}}, "dtype"),
        ({"hnsw": {"graph_rows": 0}}, "graph_rows"),
        ({"hnsw": {"rescored": 0}}, "rescored"),
        ({"hnsw": {"rescored": 100_000_000_000}}, "rescored"),  # refused, not "Unable to allocate 745 GiB"
        ({"hnsw": {"expansion_search": 10**12}}, "expansion_search"),  # refused, not usearch's "Out of memory!"
        ({"hnsw": {"expansion_add": 10**12}}, "expansion_add"),
        ({"hnsw": {"build_threads": 1_000_000}}, "build_threads"),
        ({"candidate_k": 100_000_000_000}, "candidate_k"),
        ({"top_k": 100_001}, "top_k"),
    ],
)
def test_cli_refuses_an_index_setting_with_exit_2_and_writes_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    settings: dict[str, object],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr(vector_index, "usearch_installed", lambda: False)
    (tmp_path / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    argv = ["run", "--fixture", str(TINY_DIR), "--runs", "1", "--no-cache", "--settings", "settings.json"]
    assert main([*argv, "--output", "r.json"]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_a_recall_below_the_bar_is_said_with_what_to_do() -> None:
    plans = {"p": IndexPlan("hnsw", "dense-rows", HnswSettings())}
    record = VectorIndexRecord(
        index="hnsw", chunks=10, deterministic=True, recall_at_10=0.9, sample_queries=5, chosen_by="dense-rows"
    )
    (note,) = index_notes(plans, {"p": record})
    assert "recall@10 0.9000" in note and "raise hnsw.expansion_search" in note
    good = record.model_copy(update={"recall_at_10": 0.995})
    assert "raise" not in index_notes(plans, {"p": good})[0]
