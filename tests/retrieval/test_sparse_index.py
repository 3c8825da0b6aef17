"""Tests for retrieval.sparse_index: the sparse BM25 index must give FTS5's ranking and scores bit for bit.

Scores are compared with ``==`` (no tolerance): the synthetic suite's projection hash includes them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from evalkit.data.fixture import Chunk, Document, LoadedFixture
from evalkit.retrieval import sparse_index
from evalkit.retrieval.database import Hit, KnowledgeDatabase
from evalkit.retrieval.sparse_index import (
    IndexMismatchError,
    SparseBm25Index,
    TermCounter,
    fts5_idf,
    is_plain,
    top_positions,
)
from evalkit.retrieval.text import query_terms, tokenize

# ---------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------

_WORDS_EN = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda recall precision index vector".split()
_WORDS_ZH = ["召回率", "精确率", "索引", "向量", "检索", "文档", "评估", "查询", "模型", "数据"]


def _database(texts: Sequence[tuple[str, str, str]]) -> KnowledgeDatabase:
    database = KnowledgeDatabase(":memory:")
    database.add_documents(
        [
            Document(doc_id="doc-en", language="en", title="English"),
            Document(doc_id="doc-zh", language="zh", title="中文"),
        ]
    )
    database.add_chunks(Chunk(chunk_id=cid, doc_id=f"doc-{lang}", text=text) for cid, lang, text in texts)
    return database


def _random_corpus(rng: np.random.Generator, size: int) -> list[tuple[str, str, str]]:
    """Chunks of 0 to 30 words drawn with a skewed distribution, so some terms are in most chunks (IDF floor)."""
    rows = []
    for position in range(size):
        language = "zh" if rng.random() < 0.4 else "en"
        words = _WORDS_ZH if language == "zh" else _WORDS_EN
        weights = 1.0 / np.arange(1, len(words) + 1)
        picks = rng.choice(len(words), size=int(rng.integers(0, 31)), p=weights / weights.sum())
        separator = "" if language == "zh" else " "
        text = separator.join(words[i] for i in picks) or "..."  # punctuation only: a row with no tokens
        rows.append((f"c{int(rng.integers(0, 10**6)):06d}-{position}", language, text))
    return rows


def _random_query(rng: np.random.Generator) -> tuple[str, ...]:
    pool = [*_WORDS_EN, *_WORDS_ZH, "unseen", "未见"]
    terms = [str(t) for t in rng.choice(pool, size=int(rng.integers(1, 9)), replace=False)]
    return tuple(dict.fromkeys(tok for term in terms for tok in tokenize(term)))


def _sparse(database: KnowledgeDatabase) -> SparseBm25Index:
    index = database.lexical_index()
    assert isinstance(index, SparseBm25Index), index
    return index


def _sparse_hits(database: KnowledgeDatabase, terms: Sequence[str], limit: int) -> list[Hit]:
    found = _sparse(database).search(terms, limit)
    assert found is not None
    return [Hit(chunk_id, score) for chunk_id, score in found]


@pytest.fixture
def tiny_db(tiny: LoadedFixture) -> Iterator[KnowledgeDatabase]:
    database = KnowledgeDatabase(":memory:")
    database.add_documents(tiny.fixture.documents)
    database.add_chunks(tiny.fixture.chunks)
    yield database
    database.close()


# ---------------------------------------------------------------------------------------------------------
# Identity with FTS5
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tiny", "synthetic"])
def test_fixture_queries_equal_fts5_exactly(name: str, request: pytest.FixtureRequest) -> None:
    loaded: LoadedFixture = request.getfixturevalue(name)
    database = KnowledgeDatabase(":memory:")
    database.add_documents(loaded.fixture.documents)
    database.add_chunks(loaded.fixture.chunks)
    compared = 0
    for query in loaded.fixture.queries:
        terms = query_terms(query.text)
        for limit in (1, 10, 1000):
            expected = database.fts5_search(terms, limit)
            assert _sparse_hits(database, terms, limit) == expected, query.query_id
            compared += len(expected)
    assert compared > 0
    database.close()


@pytest.mark.parametrize("seed", range(8))
def test_random_corpora_equal_fts5_exactly(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse_index, "_BUILD_BLOCK_ROWS", 7)  # several blocks per build
    rng = np.random.default_rng(seed)
    database = _database(_random_corpus(rng, int(rng.integers(1, 120))))
    for _ in range(25):
        terms = _random_query(rng)
        limit = int(rng.integers(1, 40))
        assert _sparse_hits(database, terms, limit) == database.fts5_search(terms, limit), terms
    database.close()


def test_ties_break_by_chunk_id_like_fts5() -> None:
    database = _database([(f"c{i}", "en", "alpha beta") for i in (5, 3, 9, 1, 7)] + [("c0", "en", "gamma")])
    hits = _sparse_hits(database, ("alpha",), 3)
    assert [h.chunk_id for h in hits] == ["c1", "c3", "c5"]
    assert len({h.score for h in hits}) == 1
    assert hits == database.fts5_search(("alpha",), 3)


def test_repeated_terms_count_twice_like_fts5() -> None:
    database = _database([("a", "en", "alpha beta"), ("b", "en", "alpha alpha gamma"), ("c", "en", "delta")])
    terms = ("alpha", "beta", "alpha")
    assert _sparse_hits(database, terms, 5) == database.fts5_search(terms, 5)


def test_lexical_search_uses_the_index_and_follows_new_chunks() -> None:
    database = _database([("a", "en", "alpha beta"), ("b", "en", "gamma")])
    first = database.lexical_index()
    assert [h.chunk_id for h in database.lexical_search(("alpha",), 5)] == ["a"]
    database.add_chunks([Chunk(chunk_id="c", doc_id="doc-en", text="alpha alpha")])
    assert database.lexical_index() is not first
    assert database.lexical_search(("alpha",), 5) == database.fts5_search(("alpha",), 5)
    assert [h.chunk_id for h in database.lexical_search(("alpha",), 5)] == ["c", "a"]


def test_unknown_unusual_term_is_left_to_fts5() -> None:
    database = _database([("a", "en", "café au lait"), ("b", "en", "alpha")])
    index = _sparse(database)
    assert index.search(("naïve",), 5) is None
    assert index.search(("unseen",), 5) == []
    assert database.lexical_search(("naïve", "alpha"), 5) == database.fts5_search(("naïve", "alpha"), 5)


def test_known_unusual_terms_are_checked_against_fts5() -> None:
    database = _database([("a", "en", "café crème"), ("b", "en", "café alpha")])
    assert "café" in _sparse(database).vocabulary
    assert _sparse_hits(database, ("café", "alpha"), 5) == database.fts5_search(("café", "alpha"), 5)


def test_vocabulary_mismatch_refuses_to_build() -> None:
    with pytest.raises(IndexMismatchError, match="'é-x'"):
        SparseBm25Index.build(["a"], ["é-x"], check=lambda terms: {})


def test_unsorted_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="ascending"):
        SparseBm25Index.build(["b", "a"], ["x", "y"])


def test_empty_query_and_limit() -> None:
    index = SparseBm25Index.build(["a"], ["alpha"])
    assert index.search((), 5) == []
    assert index.search(("alpha",), 0) == []


# ---------------------------------------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------------------------------------


def test_hand_computed_score() -> None:
    # Two rows: "alpha alpha beta" (D = 3) and "beta" (D = 1); avgdl = 2, N = 2.
    index = SparseBm25Index.build(["a", "b"], ["alpha alpha beta", "beta"])
    idf_alpha = np.log((2 - 1 + 0.5) / (1 + 0.5))  # = ln 1 = 0, floored to 1e-6
    assert idf_alpha == 0.0
    expected = 1e-6 * (2 * 2.2) / (2 + 1.2 * (0.25 + 0.75 * 3 / 2)) + 1e-6 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 3 / 2))
    found = index.search(("alpha", "beta"), 5)
    assert found is not None
    assert found[0][0] == "a"
    assert found[0][1] == pytest.approx(expected, rel=1e-12)


def test_fts5_idf_floor() -> None:
    assert fts5_idf(10, 1) == pytest.approx(np.log(9.5 / 1.5))
    assert fts5_idf(10, 5) == 1e-6
    assert fts5_idf(10, 9) == 1e-6


@pytest.mark.parametrize(
    ("term", "plain"), [("alpha", True), ("x86", True), ("召回率", True), ("café", False), ("ß", False), ("", False)]
)
def test_is_plain(term: str, plain: bool) -> None:
    assert is_plain(term) is plain


@pytest.mark.parametrize("seed", range(20))
def test_top_positions_equals_a_full_sort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(-3, 4, size=int(rng.integers(0, 60))).astype(np.float32)
    limit = int(rng.integers(1, 20))
    full = [int(i) for i in np.lexsort((np.arange(len(scores)), -scores)) if scores[i] > -2][:limit]
    assert top_positions(scores, limit, floor=-2).tolist() == full


def _same_index(one: SparseBm25Index, other: SparseBm25Index) -> None:
    assert one.chunk_ids == other.chunk_ids
    assert list(one.vocabulary.items()) == list(other.vocabulary.items())  # the same columns in the same order
    for name in ("data", "indices", "indptr"):
        left, right = getattr(one.contributions, name), getattr(other.contributions, name)
        assert left.dtype == right.dtype and left.tobytes() == right.tobytes(), name


def _index_of_stored_tokens(database: KnowledgeDatabase) -> SparseBm25Index:
    ids = [c.chunk_id for c in database.chunks()]
    stored = database.chunk_tokens(ids)
    return SparseBm25Index.build(ids, [" ".join(stored[i]) for i in ids], check=database.vocabulary)


def test_the_counts_kept_while_adding_give_the_index_of_the_stored_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("evalkit.retrieval.database._ANALYZE_BLOCK_ROWS", 7)  # many blocks, a short last one
    monkeypatch.setattr("evalkit.retrieval.database._INDEX_BLOCKS", 3)  # 3 blocks a statement, the last 6 alone
    rows = _random_corpus(np.random.default_rng(11), 120)
    rows += [("odd-1", "en", "Café ＰＤＦ ﬁnal ½ x86_64"), ("odd-2", "zh", "笔记本，召回率（Recall）是 3.5")]
    database = _database(rows)
    assert database._counted is not None  # the add kept its counts
    _same_index(_sparse(database), _index_of_stored_tokens(database))
    assert database._counted is None  # and gave them up to the index


def test_chunks_added_to_a_filled_database_are_indexed_from_the_stored_tokens() -> None:
    database = _database([("b", "en", "alpha beta"), ("d", "en", "gamma")])
    database.add_chunks([Chunk(chunk_id="a", doc_id="doc-en", text="alpha alpha delta")])
    assert database._counted is None  # chunk ID order is no longer the order of the adds
    _same_index(_sparse(database), _index_of_stored_tokens(database))
    assert [h.chunk_id for h in database.lexical_search(("alpha",), 5)] == ["a", "b"]


@pytest.mark.parametrize("seed", range(4))
def test_each_pair_gets_its_columns_value_in_any_slice(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 4, size=30)  # empty columns among them
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    values = rng.random(30)
    reference = values[np.searchsorted(indptr, np.arange(indptr[-1]), side="right") - 1]
    for start in range(int(indptr[-1])):
        for end in range(start + 1, int(indptr[-1]) + 1):
            assert np.array_equal(sparse_index._column_values(values, indptr, start, end), reference[start:end])


def test_the_contributions_are_the_same_in_slices_of_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _random_corpus(np.random.default_rng(5), 60)
    whole = _sparse(_database(rows))
    monkeypatch.setattr(sparse_index, "_CONTRIBUTION_SLICE", 7)
    _same_index(_sparse(_database(rows)), whole)


def test_term_counts_by_hand_across_blocks() -> None:
    counter = TermCounter()
    counter.add([["nan", "b", "nan"], [], ["None", "b"]])  # words pandas would read as missing, as strings, are terms
    counter.add([["b", "c", "c", "c"]])
    counted = counter.counts()
    assert list(counted.vocabulary.items()) == [("nan", 0), ("b", 1), ("None", 2), ("c", 3)]  # first seen first
    assert counted.lengths.tolist() == [3, 0, 2, 4]
    assert counted.counts.toarray().tolist() == [[2, 1, 0, 0], [0, 0, 0, 0], [0, 1, 1, 0], [0, 1, 0, 3]]
