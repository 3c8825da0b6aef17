"""A provider's embedding rows in the knowledge database's SQLite file, and the vector indexes built from them.

Rows are stored per provider fingerprint as one float32 matrix in chunk ID order, in blocks of
:data:`EMBEDDING_BLOCK_ROWS` consecutive rows: each block is a row of the ``embeddings`` table with its chunk IDs
(JSON), its row count and width, and its values. A block whose values are mostly zeros (fewer than half of them
have a bit set, as token hashing's rows) keeps only the values with a bit set, in row-major order, with their
positions in the block (``row * dimensions + column``, int32) in ``nonzeros``: a tenth of the bytes at 1,024
dimensions. Any other block keeps every value and no ``nonzeros``. Either way the rows read back are the bytes
stored (a -0.0 is kept as a value), and a sparse index is built from a sparse block's values without making the
dense rows.

Rows are held in memory as one contiguous matrix and searched by exact inner product (rows are unit length, so this
is cosine similarity), or by the index planned for the provider (:mod:`~evalkit.retrieval.vector_index`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
from scipy import sparse

from evalkit.data.schema import Matrix
from evalkit.retrieval.hits import Hit
from evalkit.retrieval.sparse_index import top_positions
from evalkit.retrieval.vector_index import (
    RECALL_K,
    IndexPlan,
    VectorIndex,
    build_index,
    exact_top,
    merged_rows,
    recall_at,
    row_scores,
)

__all__ = ["EMBEDDINGS_SCHEMA", "EMBEDDING_BLOCK_ROWS", "StoredVectors"]

EMBEDDINGS_SCHEMA = """
CREATE TABLE embeddings (
    provider TEXT NOT NULL,
    block INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    dimensions INTEGER NOT NULL,
    chunk_ids TEXT NOT NULL,
    vectors BLOB NOT NULL,
    nonzeros BLOB,
    PRIMARY KEY (provider, block)
);
"""

EMBEDDING_BLOCK_ROWS = 4096
"""Rows per stored embedding block: one float32 matrix per provider, kept in blocks of consecutive rows."""


def _encoded(rows: Matrix) -> tuple[bytes, bytes | None]:
    """A block's stored values and, when fewer than half of them have a bit set, their int32 positions."""
    flat = np.ascontiguousarray(rows, dtype=np.float32).reshape(-1)
    if flat.size >= 1 << 31:
        return flat.tobytes(), None
    positions = np.flatnonzero(flat.view(np.uint32) != 0)  # a boolean mask is scanned faster than the values
    if 2 * len(positions) >= flat.size:
        return flat.tobytes(), None
    return flat[positions].tobytes(), positions.astype(np.int32).tobytes()


def _decoded(count: int, width: int, vectors: bytes, nonzeros: bytes | None) -> Matrix:
    """A stored block's dense float32 rows."""
    values = np.frombuffer(vectors, dtype=np.float32)
    if nonzeros is None:
        return values.reshape(count, width)
    block = np.zeros(count * width, dtype=np.float32)
    block[np.frombuffer(nonzeros, dtype=np.int32)] = values
    return block.reshape(count, width)


def _sparse(count: int, width: int, vectors: bytes, nonzeros: bytes) -> sparse.csr_matrix:
    """A stored sparse block as CSR, its zeros (-0.0) left out, as ``csr_matrix`` of the dense rows has it."""
    values = np.frombuffer(vectors, dtype=np.float32)
    positions = np.frombuffer(nonzeros, dtype=np.int32)
    kept = values != 0
    values, positions = values[kept], positions[kept]
    rows, columns = np.divmod(positions, np.int32(width))
    indptr = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=count), out=indptr[1:])
    return sparse.csr_matrix((values, columns.astype(np.int32), indptr), shape=(count, width))


class StoredVectors:
    """The embedding half of :class:`~evalkit.retrieval.database.KnowledgeDatabase`: storing rows per provider,
    reading them back, and searching them with the planned index (a mixin over the database's connection)."""

    _connection: sqlite3.Connection

    def _init_vectors(self) -> None:
        self._matrices: dict[str, tuple[tuple[str, ...], Matrix]] = {}
        self._row_positions: dict[str, dict[str, int]] = {}
        self._plans: dict[str, IndexPlan] = {}
        self._indexes: dict[str, tuple[tuple[str, ...], VectorIndex]] = {}

    def _chunk_ids(self) -> set[str]:
        return {r[0] for r in self._connection.execute("SELECT chunk_id FROM chunks")}

    def store_embeddings(self, provider: str, chunk_ids: Sequence[str], matrix: Matrix) -> None:
        """Store one float32 row per chunk under a provider fingerprint (a chunk given again replaces its row)."""
        rows = self._checked_rows(chunk_ids, matrix, self._chunk_ids())
        ids = list(chunk_ids)
        stored = self._matrix(provider) if self.has_embeddings(provider) else None
        if len(set(ids)) != len(ids) or stored is not None:
            ids, rows = merged_rows(stored, ids, rows)
        order = sorted(range(len(ids)), key=ids.__getitem__)
        ordered_ids = tuple(ids[i] for i in order)
        # Rows already in chunk ID order (the service stores them so) are written without a copy.
        ordered = rows if order == list(range(len(ids))) else rows[order]
        with self._connection:
            self._connection.execute("DELETE FROM embeddings WHERE provider = ?", (provider,))
            self._insert_blocks(provider, ordered_ids, ordered, 0)
        self._forget(provider)

    def _insert_blocks(self, provider: str, ids: Sequence[str], rows: Matrix, first: int) -> int:
        """Write rows in chunk ID order as stored blocks numbered from ``first``; the next free block number."""
        starts = range(0, len(ids), EMBEDDING_BLOCK_ROWS)
        self._connection.executemany(
            "INSERT INTO embeddings (provider, block, rows, dimensions, chunk_ids, vectors, nonzeros) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    provider,
                    first + number,
                    len(ids[start : start + EMBEDDING_BLOCK_ROWS]),
                    rows.shape[1],
                    json.dumps(list(ids[start : start + EMBEDDING_BLOCK_ROWS])),
                    *_encoded(rows[start : start + EMBEDDING_BLOCK_ROWS]),
                )
                for number, start in enumerate(starts)
            ),
        )
        return first + len(starts)

    def store_embedding_blocks(self, provider: str, blocks: Iterable[tuple[Sequence[str], Matrix]]) -> None:
        """Store a provider's rows for the first time, a block at a time, so no call holds every row at once.

        Blocks come in chunk ID order (each block's IDs ascending and after the previous block's); a provider that
        has rows already is stored through :meth:`store_embeddings`, which merges.
        """
        if self.has_embeddings(provider):
            raise ValueError("this provider has stored rows already; store_embeddings merges new ones")
        known = self._chunk_ids()
        stored = 0
        last = ""
        with self._connection:
            for chunk_ids, matrix in blocks:
                ids = list(chunk_ids)
                rows = self._checked_rows(ids, matrix, known)
                if any(b <= a for a, b in zip([last, *ids], ids, strict=False)):
                    raise ValueError("embedding blocks must come in ascending chunk ID order, each ID once")
                stored = self._insert_blocks(provider, ids, rows, stored)
                last = ids[-1] if ids else last
        self._forget(provider)

    @staticmethod
    def _checked_rows(chunk_ids: Sequence[str], matrix: Matrix, known: set[str]) -> Matrix:
        """The rows as float32, refused unless there is one per chunk ID and every ID is a stored chunk's."""
        if matrix.shape[0] != len(chunk_ids):
            raise ValueError(f"{len(chunk_ids)} chunk IDs but {matrix.shape[0]} embedding rows")
        unknown = sorted(set(chunk_ids) - known)
        if unknown:
            raise ValueError(f"embeddings for unknown chunk(s) {', '.join(unknown[:5])}")
        return np.asarray(matrix, dtype=np.float32)

    def _forget(self, provider: str) -> None:
        """Drop what was built from the provider's stored rows (they changed)."""
        self._matrices.pop(provider, None)
        self._row_positions.pop(provider, None)
        self._indexes.pop(provider, None)

    def use_vector_index(self, provider: str, plan: IndexPlan) -> None:
        """Search this provider's rows with the planned index (exact search when never called)."""
        if self._plans.get(provider) != plan:
            self._plans[provider] = plan
            self._indexes.pop(provider, None)

    def _stored(self, provider: str) -> sqlite3.Cursor:
        """(chunk IDs, rows, width, values, nonzeros) of the provider's stored blocks, in chunk ID order."""
        return self._connection.execute(
            "SELECT chunk_ids, rows, dimensions, vectors, nonzeros FROM embeddings WHERE provider = ? ORDER BY block",
            (provider,),
        )

    def _blocks(self, provider: str) -> Iterator[tuple[list[str], Matrix]]:
        """The provider's stored rows, a stored block at a time, in chunk ID order."""
        for block_ids, count, width, vectors, nonzeros in self._stored(provider):
            yield json.loads(block_ids), _decoded(count, width, vectors, nonzeros)

    def _index(self, provider: str) -> tuple[tuple[str, ...], VectorIndex] | None:
        """The provider's planned index, built on first use from the stored blocks (None: exact search)."""
        plan = self._plans.get(provider)
        if plan is None or plan.kind == "exact":
            return None
        if provider not in self._indexes:
            ids: list[str] = []

            def rows() -> Iterator[Matrix | sparse.csr_matrix]:
                for block_ids, count, width, vectors, nonzeros in self._stored(provider):
                    ids.extend(json.loads(block_ids))
                    if plan.kind == "sparse" and nonzeros is not None:
                        yield _sparse(count, width, vectors, nonzeros)
                    else:
                        yield _decoded(count, width, vectors, nonzeros)

            width = self._connection.execute(
                "SELECT coalesce(max(dimensions), 0) FROM embeddings WHERE provider = ?", (provider,)
            ).fetchone()[0]
            index = build_index(plan, rows(), int(width))
            self._indexes[provider] = (tuple(ids), index)
        return self._indexes[provider]

    def index_recall(self, provider: str, queries: Matrix, k: int = RECALL_K) -> float:
        """Mean recall@k of the provider's planned index against exact float32 search, for these query rows."""
        built = self._index(provider)
        if built is None:
            return 1.0
        exact = exact_top((block for _, block in self._blocks(provider)), queries, k)
        return recall_at(built[1], [scores for _, scores in exact], queries, k)

    def has_embeddings(self, provider: str) -> bool:
        """True when any embedding is stored for this provider fingerprint."""
        row = self._connection.execute("SELECT 1 FROM embeddings WHERE provider = ? LIMIT 1", (provider,))
        return row.fetchone() is not None

    def _matrix(self, provider: str) -> tuple[tuple[str, ...], Matrix]:
        """The provider's rows as one contiguous float32 matrix in chunk ID order, read block by block once."""
        if provider not in self._matrices:
            count, width = self._connection.execute(
                "SELECT coalesce(sum(rows), 0), coalesce(max(dimensions), 0) FROM embeddings WHERE provider = ?",
                (provider,),
            ).fetchone()
            matrix = np.empty((int(count), int(width)), dtype=np.float32)
            ids: list[str] = []
            for block_ids, block in self._blocks(provider):
                matrix[len(ids) : len(ids) + len(block)] = block
                ids += block_ids
            self._matrices[provider] = (tuple(ids), matrix)
        return self._matrices[provider]

    def vectors(self, provider: str, chunk_ids: Sequence[str]) -> Matrix:
        """Stored rows for these chunks, in the order given."""
        built = self._index(provider)
        ids = built[0] if built is not None else self._matrix(provider)[0]
        if provider not in self._row_positions:
            self._row_positions[provider] = {chunk_id: index for index, chunk_id in enumerate(ids)}
        position = self._row_positions[provider]
        missing = [c for c in chunk_ids if c not in position]
        if missing:
            raise KeyError(f"no embedding for chunk(s) {', '.join(missing)} under this provider")
        positions = [position[c] for c in chunk_ids]
        return built[1].rows(positions) if built is not None else self._matrix(provider)[1][positions]

    def vector_search(self, provider: str, query: Matrix, limit: int) -> list[Hit]:
        """Inner-product search of one query row against the provider's stored rows, with the planned index
        (:meth:`use_vector_index`; exact when none was planned)."""
        built = self._index(provider)
        if built is not None:
            if not built[0] or limit < 1:
                return []
            found, values = built[1].search(query, limit)
            return [
                Hit(chunk_id=built[0][i], score=float(v)) for i, v in zip(found.tolist(), values.tolist(), strict=True)
            ]
        ids, matrix = self._matrix(provider)
        if not ids or limit < 1:
            return []
        scores = row_scores(matrix, query)
        # Score descending, then position (= chunk ID order) ascending, found without sorting every row.
        best = top_positions(scores, limit, floor=-np.inf)
        return [Hit(chunk_id=ids[i], score=float(scores[i])) for i in best]
