"""Tests for the embedding store: one float32 matrix per provider in blocks, and exact argpartition search."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from evalkit.data.fixture import Chunk, Document
from evalkit.retrieval import hashing as hashing_module
from evalkit.retrieval import stored_vectors as stored_vectors_module
from evalkit.retrieval.database import Hit, KnowledgeDatabase
from evalkit.retrieval.embeddings import TokenHashProvider

IDS = ["e", "a", "d", "b", "c"]


def _database(path: Path | str = ":memory:", ids: list[str] = IDS) -> KnowledgeDatabase:
    database = KnowledgeDatabase(path)
    database.add_documents([Document(doc_id="doc", language="en", title="t")])
    database.add_chunks(Chunk(chunk_id=cid, doc_id="doc", text=f"text {cid}") for cid in ids)
    return database


def _rows(count: int, width: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, width)).astype(np.float32)


def test_rows_are_stored_in_blocks_and_read_back_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stored_vectors_module, "EMBEDDING_BLOCK_ROWS", 2)
    path = tmp_path / "kb.sqlite3"
    database = _database(path)
    rows = _rows(5)
    database.store_embeddings("p", IDS, rows)
    with sqlite3.connect(path) as connection:
        blocks = connection.execute("SELECT block, chunk_ids FROM embeddings ORDER BY block").fetchall()
    assert blocks == [(0, '["a", "b"]'), (1, '["c", "d"]'), (2, '["e"]')]
    assert database.vectors("p", IDS).tobytes() == rows.tobytes()
    database.close()


def test_storing_again_replaces_only_the_given_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stored_vectors_module, "EMBEDDING_BLOCK_ROWS", 2)
    database = _database()
    rows = _rows(5)
    database.store_embeddings("p", IDS, rows)
    assert database.vectors("p", ["d"]).tobytes() == rows[IDS.index("d")].tobytes()
    new = _rows(1, seed=1)
    database.store_embeddings("p", ["d"], new)
    expected = rows.copy()
    expected[IDS.index("d")] = new[0]
    assert database.vectors("p", IDS).tobytes() == expected.tobytes()


def test_a_repeated_chunk_id_keeps_its_last_row() -> None:
    database = _database()
    rows = _rows(2)
    database.store_embeddings("p", ["a", "a"], rows)
    assert database.vectors("p", ["a"]).tobytes() == rows[1:].tobytes()


def test_unknown_chunks_and_other_widths_are_refused() -> None:
    database = _database()
    with pytest.raises(ValueError, match="unknown chunk"):
        database.store_embeddings("p", ["a", "zz"], _rows(2))
    assert not database.has_embeddings("p")
    database.store_embeddings("p", ["a"], _rows(1))
    with pytest.raises(ValueError, match="4 dimensions, but this provider's rows have 3"):
        database.store_embeddings("p", ["b"], _rows(1, width=4))


@pytest.mark.parametrize("seed", range(6))
def test_vector_search_equals_a_full_sort_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = [f"c{i:03d}" for i in rng.permutation(60)]
    database = _database(ids=ids)
    rows = rng.integers(-2, 3, size=(60, 4)).astype(np.float32)  # many exactly tied scores
    database.store_embeddings("p", ids, rows)
    query = rng.integers(-2, 3, size=4).astype(np.float32)
    ordered = sorted(ids)
    matrix = database.vectors("p", ordered)
    scores = matrix @ query
    for limit in (1, 7, 60, 100):
        full = np.lexsort((np.arange(60), -scores))[:limit]
        assert database.vector_search("p", query, limit) == [Hit(ordered[i], float(scores[i])) for i in full]


def test_token_hash_rows_do_not_depend_on_their_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = ["recall and precision", "召回率 评估", "", "index vectors 向量 index", "precision"]
    provider = TokenHashProvider(dimensions=16)
    together = provider.embed(texts)
    monkeypatch.setattr(hashing_module, "_EMBED_BLOCK_ROWS", 2)
    assert provider.embed(texts).tobytes() == together.tobytes()
    assert np.vstack([provider.embed([t]) for t in texts]).tobytes() == together.tobytes()
    assert together.dtype == np.float32
    assert provider.embed([]).shape == (0, 16)


def _sparse_rows(count: int, width: int = 40, seed: int = 0) -> np.ndarray:
    """Rows with a few values each, one of them -0.0 (a zero with a bit set, kept as stored)."""
    rng = np.random.default_rng(seed)
    rows = np.zeros((count, width), dtype=np.float32)
    for row in rows:
        row[rng.choice(width, size=4, replace=False)] = rng.standard_normal(4)
    rows[1, 0] = np.float32(-0.0)
    return rows


def _layouts(database: KnowledgeDatabase) -> list[bool]:
    """Whether each stored block keeps its nonzero values only."""
    rows = database._connection.execute("SELECT nonzeros IS NOT NULL FROM embeddings ORDER BY block").fetchall()
    return [bool(r[0]) for r in rows]


def test_mostly_zero_blocks_keep_their_nonzeros_and_read_back_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stored_vectors_module, "EMBEDDING_BLOCK_ROWS", 2)
    database = _database()
    rows = _sparse_rows(5)
    rows[IDS.index("e")] = 1.0  # blocks in chunk ID order: a b, c d, then e alone and dense
    database.store_embeddings("p", IDS, rows)
    assert _layouts(database) == [True, True, False]
    assert database.vectors("p", IDS).tobytes() == rows.tobytes()
    assert np.signbit(database.vectors("p", ["a"])[0, 0])  # row 1 (chunk a) holds the -0.0
    database.store_embeddings("p", ["c"], _rows(1, width=40))  # merged: read back and stored again
    assert database.vectors("p", ["a", "b", "d", "e"]).tobytes() == rows[[1, 3, 2, 0]].tobytes()


@pytest.mark.parametrize("kind", ["sparse", "hnsw", "exact"])
def test_every_index_reads_the_stored_rows_of_either_layout(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.data.settings import HnswSettings
    from evalkit.retrieval.vector_index import IndexPlan, SparseIndex

    if kind == "hnsw":
        pytest.importorskip("usearch")
    monkeypatch.setattr(stored_vectors_module, "EMBEDDING_BLOCK_ROWS", 7)
    ids = [f"c{i:02d}" for i in range(30)]
    database = _database(ids=ids)
    rows = _sparse_rows(30, seed=3)
    rows[14:21] = _rows(7, width=40, seed=4)  # one dense block among sparse ones
    database.store_embeddings("p", ids, rows)
    assert _layouts(database) == [True, True, False, True, True]
    database.use_vector_index("p", IndexPlan(kind, "set", HnswSettings(dtype="f32")))  # type: ignore[arg-type]
    reference = SparseIndex([rows])  # from the dense rows, as before blocks kept their nonzeros
    # A sparse index holds no zeros, so its rows give the stored -0.0 as 0.0, as it always has.
    expected = reference.rows(range(30)) if kind == "sparse" else rows
    assert database.vectors("p", ids).tobytes() == expected.tobytes()
    built = database._index("p")
    if kind == "sparse":
        assert built is not None and isinstance(built[1], SparseIndex)
        for mine, theirs in [(built[1].by_row, reference.by_row), (built[1].by_column, reference.by_column)]:
            for name in ("data", "indices", "indptr"):
                assert getattr(mine, name).tobytes() == getattr(theirs, name).tobytes(), name
    query = _rows(1, width=40, seed=5)[0]
    exact = rows @ query
    hits = database.vector_search("p", query, 10)
    assert [h.chunk_id for h in hits] == [ids[i] for i in np.lexsort((np.arange(30), -exact))[:10]]
