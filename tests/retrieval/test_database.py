"""Tests for retrieval.database: FTS5 lexical search, vocabulary statistics, embedding storage and vector search."""

from __future__ import annotations

import gc
import math
import sqlite3
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import bm25s
import numpy as np
import pytest

from evalkit.data.fixture import Chunk, Document, LoadedFixture
from evalkit.retrieval.database import Hit, KnowledgeDatabase, StoredChunk, order_hits
from evalkit.retrieval.text import query_terms, tokenize


def _database(rows: Sequence[tuple[str, str, str]], path: Path | str = ":memory:") -> KnowledgeDatabase:
    """A database with one document per language and the given (chunk_id, language, text) chunks."""
    database = KnowledgeDatabase(path)
    database.add_documents(
        [
            Document(doc_id="doc-en", language="en", title="English"),
            Document(doc_id="doc-zh", language="zh", title="中文"),
        ]
    )
    database.add_chunks(Chunk(chunk_id=cid, doc_id=f"doc-{lang}", text=text) for cid, lang, text in rows)
    return database


@pytest.fixture
def tiny_db(tiny: LoadedFixture) -> Iterator[KnowledgeDatabase]:
    database = KnowledgeDatabase(":memory:")
    database.add_documents(tiny.fixture.documents)
    database.add_chunks(tiny.fixture.chunks)
    yield database
    database.close()


def _ids(hits: Sequence[Hit]) -> list[str]:
    return [hit.chunk_id for hit in hits]


# ---------------------------------------------------------------------------------------------------------
# Schema and chunk access
# ---------------------------------------------------------------------------------------------------------


def test_schema_creates_fts5_and_vocab_tables(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite3"
    _database([("c1", "en", "alpha")], path).close()
    with sqlite3.connect(path) as connection:
        sql = dict(connection.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
    assert "USING fts5(tokens" in sql["chunks_fts"]
    assert "USING fts5vocab(chunks_fts, 'row')" in sql["chunks_vocab"]
    assert {"documents", "chunks", "chunk_tokens", "embeddings"} <= set(sql)
    assert "chunks_fts_content" not in sql  # FTS5 keeps its index only: the tokens are stored once


def test_fts5_indexes_the_stored_tokens_of_every_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("evalkit.retrieval.database._ANALYZE_BLOCK_ROWS", 2)  # several blocks, a short last one
    monkeypatch.setattr("evalkit.retrieval.database._INDEX_BLOCKS", 2)  # the first two in one statement, then alone
    rows = [(f"c{i:02d}", "en", f"word{i} shared shared") for i in range(8)] + [("z1", "zh", "导出笔记，导出")]
    database = _database(rows)
    database.add_chunks([Chunk(chunk_id="b0", doc_id="doc-en", text="word0 later")])  # into a filled database
    ids = [c.chunk_id for c in database.chunks()]
    stored = database.chunk_tokens(ids)
    expected: dict[str, tuple[int, int]] = {}
    for tokens in stored.values():
        for term in set(tokens):
            rows_with, occurrences = expected.get(term, (0, 0))
            expected[term] = (rows_with + 1, occurrences + tokens.count(term))
    assert len(expected) == 12 and expected["share"] == (8, 16) and expected["word0"] == (2, 2)
    assert database.vocabulary(sorted(expected)) == expected
    for term in ("word7", "导出", "later"):  # the first, the short last block and the second add
        hits = database.fts5_search([term], 10)
        assert [h.chunk_id for h in hits] == [c for c in ids if term in stored[c]]


def test_chunks_in_id_order_with_language() -> None:
    database = _database([("b", "zh", "导出笔记"), ("a", "en", "Export notes")])
    assert database.chunks() == [
        StoredChunk(chunk_id="a", text="Export notes", language="en"),
        StoredChunk(chunk_id="b", text="导出笔记", language="zh"),
    ]
    assert database.chunk_count() == 2
    assert database.chunk_texts() == (["a", "b"], ["Export notes", "导出笔记"])
    assert database.get_chunks(["b"]) == {"b": StoredChunk(chunk_id="b", text="导出笔记", language="zh")}
    assert database.get_chunks([]) == {}


def test_chunk_tokens_are_the_analyzed_text(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    ids = [c.chunk_id for c in tiny.fixture.chunks]
    tokens = tiny_db.chunk_tokens(ids)
    assert tokens == {c.chunk_id: tokenize(c.text) for c in tiny.fixture.chunks}
    assert tokens["en-trash-01"][:4] == ("delet", "note", "stay", "in")
    assert tiny_db.chunk_tokens([]) == {}


def test_tokens_read_stopped_by_a_signal_leave_nothing_to_finalize(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM while the reranker reads tokens stops the read part-way; the connection is closed on the way out.
    Nothing suspended may touch it afterwards: a generator left inside the cursor printed a traceback at exit."""
    database = _database([("a", "en", "Export notes"), ("b", "zh", "导出笔记"), ("c", "en", "Delete notes")])
    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    stopped = iter(database._tokens_of("tokens", ["a", "b", "c"]))
    assert next(stopped)[0] in {"a", "b", "c"}  # the read stops here, as a signal would stop it
    database.close()
    del stopped
    gc.collect()
    assert unraisable == []


def test_chunk_with_unknown_document_is_refused() -> None:
    database = _database([])
    with pytest.raises(sqlite3.IntegrityError):
        database.add_chunks([Chunk(chunk_id="x", doc_id="nowhere", text="alpha")])


# ---------------------------------------------------------------------------------------------------------
# Lexical search
# ---------------------------------------------------------------------------------------------------------


def test_lexical_bm25_hand_computed() -> None:
    # N = 3 chunks of 2, 3 and 4 tokens: avgdl = 3. 'alpha' occurs once, in the 2-token chunk (n = 1).
    # FTS5: idf = ln((N - n + 0.5) / (n + 0.5)) = ln(2.5 / 1.5);
    # tf part = f (k1 + 1) / (f + k1 (1 - b + b D / avgdl)) = 2.2 / (1 + 1.2 (0.25 + 0.75 * 2/3)) = 2.2 / 1.9.
    database = _database(
        [("c1", "en", "alpha beta"), ("c2", "en", "gamma delta epsilon"), ("c3", "en", "zeta eta theta iota")]
    )
    hits = database.lexical_search(["alpha"], 10)
    assert _ids(hits) == ["c1"]
    assert hits[0].score == pytest.approx(math.log(2.5 / 1.5) * 2.2 / 1.9, rel=1e-12)


def test_lexical_search_finds_chinese_words(tiny_db: KnowledgeDatabase) -> None:
    # Both export chunks hold 导出 twice; the shorter chunk ranks first (BM25 length normalization).
    tokens = tiny_db.chunk_tokens(["zh-export-01", "zh-export-02"])
    assert tokens["zh-export-01"].count("导出") == tokens["zh-export-02"].count("导出") == 2
    by_length = sorted(tokens, key=lambda cid: len(tokens[cid]))
    assert _ids(tiny_db.lexical_search(["导出"], 10)) == by_length
    assert _ids(tiny_db.lexical_search(query_terms("退款"), 10)) == ["zh-billing-02", "zh-billing-01"]


def test_lexical_search_matches_english_stems(tiny_db: KnowledgeDatabase) -> None:
    # 'deleting' and the indexed 'Deleted' share the stem 'delet'.
    assert query_terms("deleting") == ("delet",)
    assert _ids(tiny_db.lexical_search(query_terms("deleting"), 10)) == ["en-trash-01"]
    assert _ids(tiny_db.lexical_search(query_terms("SYNCING"), 10)) == ["en-sync-01"]


def test_lexical_scores_descend(tiny_db: KnowledgeDatabase) -> None:
    hits = tiny_db.lexical_search(query_terms("deleted notes in the trash"), 10)
    assert len(hits) >= 3
    assert hits == order_hits(hits)
    assert all(hit.score > 0 for hit in hits)


def test_lexical_ties_broken_by_chunk_id_not_insertion_order() -> None:
    database = _database([("other-1", "en", "gamma delta"), ("other-2", "en", "epsilon zeta")])
    # Inserted in reverse ID order (two calls, because add_chunks sorts within a call): dup-b gets the lower rowid.
    database.add_chunks([Chunk(chunk_id="dup-b", doc_id="doc-en", text="alpha beta")])
    database.add_chunks([Chunk(chunk_id="dup-a", doc_id="doc-en", text="alpha beta")])
    hits = database.lexical_search(["alpha"], 10)
    assert _ids(hits) == ["dup-a", "dup-b"]
    assert hits[0].score == hits[1].score > 0


def test_lexical_limit_and_empty_terms(tiny_db: KnowledgeDatabase) -> None:
    terms = query_terms("deleted notes trash")
    assert len(tiny_db.lexical_search(terms, 10)) == 3
    assert tiny_db.lexical_search(terms, 2) == tiny_db.lexical_search(terms, 10)[:2]
    assert tiny_db.lexical_search(terms, 0) == []
    assert tiny_db.lexical_search([], 10) == []
    assert tiny_db.lexical_search(["unseen"], 10) == []


@pytest.mark.parametrize("term", ['"', 'a"b', '""', "", "*", ")", "^x", "NEAR(", "OR"])
def test_lexical_terms_are_quoted_safely(tiny_db: KnowledgeDatabase, term: str) -> None:
    assert tiny_db.lexical_search([term], 10) == []
    # An unusable term beside a real one changes nothing.
    assert tiny_db.lexical_search(["trash", term], 10) == tiny_db.lexical_search(["trash"], 10)


def test_fts_operator_words_are_plain_terms() -> None:
    database = _database([("c1", "en", "not or and near"), ("c2", "en", "alpha")])
    for word in ("not", "or", "and", "near"):
        assert _ids(database.lexical_search([word], 10)) == ["c1"], word


def test_lexical_ranking_agrees_with_bm25s(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    # bm25s 'lucene' uses idf = ln(1 + (N - n + 0.5) / (n + 0.5)), FTS5 uses ln((N - n + 0.5) / (n + 0.5)), so the
    # scores differ; on this corpus no query term is in more than half the chunks, both idfs are increasing in
    # 1 / n, and the orderings agree.
    chunks = sorted(tiny.fixture.chunks, key=lambda c: c.chunk_id)
    retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    retriever.index([list(tokenize(c.text)) for c in chunks], show_progress=False)
    texts = [q.text for q in tiny.fixture.queries] + ["trash notes", "导出笔记", "edit the note", "订阅 退款 PDF"]
    compared = 0
    for text in texts:
        terms = query_terms(text)
        known = [t for t in terms if t in retriever.vocab_dict]
        scores = retriever.get_scores(known) if known else np.zeros(len(chunks))
        expected = sorted((-float(s), c.chunk_id) for s, c in zip(scores, chunks, strict=True) if s > 0)
        gaps = np.diff([s for s, _ in expected])
        assert all(gap > 1e-4 for gap in gaps), f"near tie in bm25s scores for {text!r}"
        hits = tiny_db.lexical_search(terms, 10)
        assert _ids(hits) == [cid for _, cid in expected], text
        compared += bool(hits)
    assert compared >= 8


# ---------------------------------------------------------------------------------------------------------
# Document frequencies
# ---------------------------------------------------------------------------------------------------------


def test_document_frequencies_count_chunks_not_occurrences(tiny_db: KnowledgeDatabase) -> None:
    # '导出' occurs twice in each export chunk, 'day' twice in one chunk.
    assert tiny_db.document_frequencies(["导出", "trash", "day", "unseen"]) == {
        "导出": 2,
        "trash": 2,
        "day": 1,
        "unseen": 0,
    }
    assert tiny_db.document_frequencies([]) == {}


# ---------------------------------------------------------------------------------------------------------
# Embeddings and vector search
# ---------------------------------------------------------------------------------------------------------


def _vector_db() -> KnowledgeDatabase:
    return _database([("a", "en", "alpha"), ("b", "en", "beta"), ("c", "en", "gamma")])


def test_has_embeddings_per_provider() -> None:
    database = _vector_db()
    assert not database.has_embeddings("p")
    database.store_embeddings("p", ["a"], np.array([[1.0, 0.0]], dtype=np.float32))
    assert database.has_embeddings("p")
    assert not database.has_embeddings("q")


def test_vector_search_scores_and_id_ties() -> None:
    database = _vector_db()
    # Stored in reverse ID order; a and c are identical rows.
    rows = np.array([[0.6, 0.8], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
    database.store_embeddings("p", ["c", "b", "a"], rows)
    query = np.array([0.6, 0.8], dtype=np.float32)
    hits = database.vector_search("p", query, 10)
    assert _ids(hits) == ["a", "c", "b"]
    expected_same = float(np.float32(0.6) * np.float32(0.6) + np.float32(0.8) * np.float32(0.8))
    assert hits[0].score == hits[1].score == pytest.approx(expected_same, abs=1e-7)
    assert hits[2].score == pytest.approx(0.8, abs=1e-7)
    assert _ids(database.vector_search("p", query, 2)) == ["a", "c"]
    assert database.vector_search("p", query, 0) == []
    assert database.vector_search("unknown", query, 10) == []


def test_float32_rows_round_trip_exactly() -> None:
    database = _vector_db()
    rows = np.random.default_rng(7).standard_normal((3, 5)).astype(np.float32)
    database.store_embeddings("p", ["a", "b", "c"], rows)
    assert database.vectors("p", ["a", "b", "c"]).tobytes() == rows.tobytes()
    back = database.vectors("p", ["c", "a"])
    assert back.dtype == np.float32
    assert back.tobytes() == rows[[2, 0]].tobytes()


def test_float64_input_is_stored_as_float32() -> None:
    database = _vector_db()
    rows = np.array([[1 / 3, 2 / 3]], dtype=np.float64)
    database.store_embeddings("p", ["a"], rows)  # type: ignore[arg-type]
    assert database.vectors("p", ["a"]).tobytes() == rows.astype(np.float32).tobytes()


def test_store_embeddings_replaces_rows_and_refreshes_search() -> None:
    database = _vector_db()
    database.store_embeddings("p", ["a", "b"], np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32))
    query = np.array([1.0, 0.0], dtype=np.float32)
    assert _ids(database.vector_search("p", query, 1)) == ["a"]
    database.store_embeddings("p", ["a", "b"], np.array([[0.0, 1.0], [1.0, 0.0]], dtype=np.float32))
    assert _ids(database.vector_search("p", query, 1)) == ["b"]


def test_store_embeddings_length_mismatch() -> None:
    database = _vector_db()
    with pytest.raises(ValueError, match="2 chunk IDs but 1 embedding rows"):
        database.store_embeddings("p", ["a", "b"], np.zeros((1, 2), dtype=np.float32))


def test_vectors_missing_id_raises_key_error() -> None:
    database = _vector_db()
    database.store_embeddings("p", ["a"], np.zeros((1, 2), dtype=np.float32))
    with pytest.raises(KeyError, match="no embedding for chunk"):
        database.vectors("p", ["a", "b"])


# ---------------------------------------------------------------------------------------------------------
# Temporary databases
# ---------------------------------------------------------------------------------------------------------


def test_temporary_removes_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with KnowledgeDatabase.temporary() as database:
        files = sorted(tmp_path.glob("evalkit-db-*/knowledge.sqlite3"))
        assert len(files) == 1
        assert files[0].stat().st_size > 0
        assert database.chunk_count() == 0
    assert not files[0].exists()
    assert list(tmp_path.iterdir()) == []


def test_temporary_removes_its_file_on_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(RuntimeError, match="boom"), KnowledgeDatabase.temporary():
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_order_hits_score_then_id() -> None:
    hits = [Hit("b", 1.0), Hit("c", 2.0), Hit("a", 1.0)]
    assert order_hits(hits) == [Hit("c", 2.0), Hit("a", 1.0), Hit("b", 1.0)]


def test_a_refused_chunk_leaves_no_chunk_or_token_stored() -> None:
    database = _database([("a", "en", "alpha beta")])
    many = [Chunk(chunk_id=f"b{i:05d}", doc_id="doc-en", text="gamma") for i in range(5000)]
    with pytest.raises(sqlite3.IntegrityError):
        database.add_chunks([*many, Chunk(chunk_id="z", doc_id="nowhere", text="delta")])
    assert database.chunk_count() == 1
    assert database.vocabulary(["gamma", "delta", "alpha"]) == {"alpha": (1, 1)}


def test_content_tokens_are_the_text_without_stopwords(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    chunks = sorted(tiny.fixture.chunks, key=lambda c: c.chunk_id, reverse=True)
    expected = [" ".join(tokenize(c.text, drop_stopwords=True)) for c in chunks]
    assert tiny_db.content_tokens([c.chunk_id for c in chunks]) == expected
    assert tiny_db.content_tokens([]) == []
