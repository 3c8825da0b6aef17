"""Tests for evalkit.retrieval.shards: stable assignment, corpus-wide BM25 statistics, merge with the tie rule, and
sharded stores that answer exactly as the single database (no Ray here)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from evalkit.data.fixture import Chunk, Document, LoadedFixture
from evalkit.retrieval import shards as shards_module
from evalkit.retrieval.database import Hit, KnowledgeDatabase, KnowledgeStore
from evalkit.retrieval.shards import (
    ShardIndex,
    local_store,
    merge_hits,
    shard_of,
    split_corpus,
    stored_corpus,
)
from evalkit.retrieval.sparse_index import CorpusStatistics, SparseBm25Index
from evalkit.retrieval.text import query_terms
from evalkit.runs.ablations import ABLATION_IDS, select_ablations
from evalkit.runs.evaluation import Evaluation, StoreFactory, evaluate

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "北京", "上海", "大学", "河流"]


def _corpus(seed: int, size: int = 60) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    ids = sorted(f"c{i:03d}" for i in range(size))
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 12)))) for _ in ids]
    return ids, texts


def test_shard_of_is_the_same_in_every_process_and_hash_seed() -> None:
    ids = [f"chunk-{i}" for i in range(40)]
    here = [shard_of(c, 3) for c in ids]
    script = f"from evalkit.retrieval.shards import shard_of; print([shard_of(c, 3) for c in {ids!r}])"
    for seed in ("0", "12345"):
        env = {"PYTHONHASHSEED": seed, "PATH": ""}
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
        assert out.stdout.strip() == str(here)
    assert set(here) == {0, 1, 2}  # 40 IDs reach every shard
    assert all(shard_of(c, 1) == 0 for c in ids)


def test_shard_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="shard count must be >= 1, got 0"):
        shard_of("a", 0)


def test_split_corpus_puts_every_chunk_in_its_shard_once_in_id_order() -> None:
    ids, texts = _corpus(0)
    parts = split_corpus(list(reversed(ids)), list(reversed(texts)), 3)
    assert sorted(c for part_ids, _ in parts for c in part_ids) == ids
    text_of = dict(zip(ids, texts, strict=True))
    for shard, (part_ids, part_texts) in enumerate(parts):
        assert part_ids == sorted(part_ids)
        assert all(shard_of(c, 3) == shard for c in part_ids)
        assert part_texts == [text_of[c] for c in part_ids]


def test_corpus_statistics_count_rows_tokens_and_document_frequencies() -> None:
    statistics = CorpusStatistics.of(["a b a", "b c", ""])
    assert (statistics.rows, statistics.total_tokens) == (3, 5)
    assert dict(statistics.frequencies) == {"a": 1, "b": 2, "c": 1}


@pytest.mark.parametrize("shards", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", range(3))
def test_shard_bm25_scores_equal_the_whole_index_bit_for_bit(shards: int, seed: int) -> None:
    ids, texts = _corpus(seed)
    whole = SparseBm25Index.build(ids, texts)
    statistics = CorpusStatistics.of(texts)
    indexes = [
        ShardIndex(part_ids, part_texts, statistics) for part_ids, part_texts in split_corpus(ids, texts, shards)
    ]
    rng = np.random.default_rng(seed + 100)
    for _ in range(20):
        terms = list(rng.choice(WORDS, size=int(rng.integers(1, 4))))
        for limit in (1, 5, 60):
            expected = whole.search(terms, limit)
            assert expected is not None
            found = [index.lexical(terms, limit) for index in indexes]
            assert merge_hits([f for f in found if f is not None], limit) == [Hit(c, s) for c, s in expected]


def test_a_shard_index_without_corpus_statistics_would_score_differently() -> None:
    ids, texts = _corpus(1)
    part_ids, part_texts = split_corpus(ids, texts, 2)[0]
    local = SparseBm25Index.build(part_ids, part_texts).search(["alpha"], 5)
    shared = ShardIndex(part_ids, part_texts, CorpusStatistics.of(texts)).lexical(["alpha"], 5)
    assert local is not None and shared is not None
    assert [s for _, s in local] != [s for _, s in shared]  # the test above can fail


def test_statistics_that_miss_a_term_of_the_shard_are_refused() -> None:
    with pytest.raises(ValueError, match="corpus statistics do not cover"):
        SparseBm25Index.build(["a"], ["x y"], statistics=CorpusStatistics.of(["x"]))


def test_merge_hits_orders_by_score_then_chunk_id_and_cuts() -> None:
    lists = [(("b", 2.0), ("d", 1.0)), (("a", 2.0), ("c", 1.0)), ()]
    assert merge_hits(lists, 3) == [Hit("a", 2.0), Hit("b", 2.0), Hit("c", 1.0)]
    assert merge_hits(lists, 0) == []


def _database(ids: list[str], texts: list[str]) -> KnowledgeDatabase:
    database = KnowledgeDatabase(":memory:")
    database.add_documents([Document(doc_id="d", language="en", title="t")])
    database.add_chunks([Chunk(chunk_id=c, doc_id="d", text=t) for c, t in zip(ids, texts, strict=True)])
    return database


@pytest.mark.parametrize("shards", [1, 2, 3])
def test_sharded_store_answers_as_the_database(shards: int) -> None:
    ids, texts = _corpus(2, size=80)
    database = _database(ids, texts)
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((len(ids), 48)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    database.store_embeddings("p", ids, matrix)
    store = local_store(database, shards)
    store.store_embeddings("p", ids, matrix)
    for _ in range(15):
        query = rng.standard_normal(48).astype(np.float32)
        text = " ".join(rng.choice(WORDS, size=2))
        for limit in (1, 10, 80):
            assert store.vector_search("p", query, limit) == database.vector_search("p", query, limit)
            terms = query_terms(text)
            assert store.lexical_search(terms, limit) == database.lexical_search(terms, limit)
    picked = [ids[5], ids[0], ids[33]]
    assert np.array_equal(store.vectors("p", picked), database.vectors("p", picked))
    assert store.vector_search("unknown", matrix[0], 5) == []


def test_sharded_store_asks_fts5_where_the_database_does() -> None:
    ids, texts = _corpus(3)
    database = _database(ids, texts)
    store = local_store(database, 2)
    odd = ["café", "alpha"]  # not plain and not in the corpus: only FTS5 can say what it matches
    assert store.lexical_search(odd, 5) == database.fts5_search(odd, 5) == database.lexical_search(odd, 5)


def test_stored_corpus_is_the_analyzed_text_in_id_order() -> None:
    database = _database(["b", "a"], ["Rivers flowing", "北京大学"])
    ids, texts = stored_corpus(database)
    assert ids == ["a", "b"]
    assert texts[1] == " ".join(database.chunk_tokens(["b"])["b"])


def test_stored_corpus_asks_for_the_tokens_in_batches_sqlite_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    ids, texts = _corpus(4, size=50)
    database = _database(ids, texts)
    whole = stored_corpus(database)
    monkeypatch.setattr(shards_module, "TOKENS_BATCH", 7)  # SQLite refuses more than 32,766 IDs in one statement
    assert stored_corpus(database) == whole
    assert whole[0] == ids


def _sharded(shards: int) -> StoreFactory:
    @contextmanager
    def stores(database: KnowledgeDatabase) -> Iterator[KnowledgeStore]:
        yield local_store(database, shards)

    return stores


@pytest.mark.parametrize("shards", [1, 2, 3])
def test_sharded_evaluation_has_the_single_process_projection(
    synthetic: LoadedFixture, synthetic_evaluation: Evaluation, shards: int
) -> None:
    sharded = evaluate(synthetic, select_ablations(list(ABLATION_IDS)), runs=1, stores=_sharded(shards))
    assert sharded.projection_sha256 == synthetic_evaluation.projection_sha256
    assert sharded.evaluation_definition_hash == synthetic_evaluation.evaluation_definition_hash
