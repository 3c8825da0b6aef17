"""The knowledge database: documents, chunks and embeddings in SQLite, FTS5 lexical search, numpy vector search.

Chunk text is analyzed by :mod:`~evalkit.retrieval.text` (Chinese segmented by rjieba, English case-folded and
stemmed) and the space-joined tokens are stored once (``chunk_tokens``) and indexed by a contentless FTS5 table, so
both languages share one BM25 index; queries are answered from a sparse index of the same tokens that reproduces
FTS5's scores (:mod:`.sparse_index`). Embeddings
are stored per provider fingerprint in blocks of rows and searched as :mod:`.stored_vectors` describes. Every
ranking breaks ties by chunk ID, so results never depend on insertion order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Protocol

from evalkit.data.fixture import Chunk, Document
from evalkit.data.schema import Matrix
from evalkit.retrieval.hits import Hit, order_hits
from evalkit.retrieval.sparse_index import IndexMismatchError, SparseBm25Index, TermCounter, TermCounts
from evalkit.retrieval.stored_vectors import EMBEDDINGS_SCHEMA, StoredVectors
from evalkit.retrieval.text import analyze
from evalkit.retrieval.vector_index import RECALL_K, IndexPlan, row_scores

__all__ = ["Hit", "KnowledgeDatabase", "KnowledgeStore", "StoredChunk", "order_hits", "row_scores"]

_SCHEMA = (
    """
CREATE TABLE documents (
    doc_id TEXT PRIMARY KEY,
    language TEXT NOT NULL CHECK (language IN ('en', 'zh')),
    title TEXT NOT NULL
);
CREATE TABLE chunks (
    rowid INTEGER PRIMARY KEY,
    chunk_id TEXT NOT NULL UNIQUE,
    doc_id TEXT NOT NULL REFERENCES documents(doc_id),
    text TEXT NOT NULL
);
CREATE TABLE chunk_tokens (rowid INTEGER PRIMARY KEY, tokens TEXT NOT NULL, content TEXT NOT NULL);
CREATE VIRTUAL TABLE chunks_fts USING fts5(tokens, content = '', tokenize = 'unicode61 remove_diacritics 0');
CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row');
"""
    + EMBEDDINGS_SCHEMA
)

_FTS5_HASH_BYTES = 64 << 20
"""FTS5's in-memory buffer of pending terms (its ``hashsize``; 1 MiB by default): a larger buffer writes fewer,
larger segments, so building a large index merges less (about half the insert time at 100,000 chunks)."""
_ANALYZE_BLOCK_ROWS = 4096
"""Chunks analyzed together (and counted, and their tokens joined for storing) at a time."""
_INDEX_BLOCKS = 8
"""Analyzed blocks whose stored tokens FTS5 indexes in one statement. FTS5 writes its pending terms out as a new
segment at the start of every statement (its savepoint), whatever ``hashsize`` allows, and merges the segments:
filling it with 100,000 chunks' tokens took 1.6 to 2.1 s of CPU in statements of one block (25 segments), 1.1 s in
statements of 8. The last 8 to 15 blocks are indexed one at a time, so that the writer finishes the last whole group
while they are analyzed and only one block's statement is left when the analysis ends (100,000 chunks: two
statements of 8 blocks, then 9 of one). The grouping depends on the number of chunks only."""
_INSERT_CHUNKS = "INSERT INTO chunks (rowid, chunk_id, doc_id, text) VALUES (?, ?, ?, ?)"
_INSERT_TOKENS = "INSERT INTO chunk_tokens (rowid, tokens, content) VALUES (?, ?, ?)"
_INDEX_TOKENS = (
    "INSERT INTO chunks_fts (rowid, tokens) SELECT rowid, tokens FROM chunk_tokens WHERE rowid BETWEEN ? AND ?"
)
"""One statement indexes a block's stored tokens: SQLite runs it without the GIL from start to end (a row at a
time from Python would take the GIL back after every row, and wait for the analyzer to give it up)."""


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as stored: ID, text and its document's language."""

    chunk_id: str
    text: str
    language: str


def _fts_query(terms: Sequence[str]) -> str:
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


class KnowledgeDatabase(StoredVectors):
    """SQLite store with an FTS5 index and embedding blocks (:class:`.stored_vectors.StoredVectors`)."""

    def __init__(self, path: Path | str) -> None:
        # The connection is used by one thread at a time; add_chunks hands inserts to a writer thread.
        self._connection = sqlite3.connect(str(path), check_same_thread=False)
        self._connection.execute("PRAGMA foreign_keys = ON")
        self._connection.executescript(_SCHEMA)
        self._connection.execute(
            "INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('hashsize', ?)", (_FTS5_HASH_BYTES,)
        )
        self._connection.commit()
        self._init_vectors()
        self._lexical_index: SparseBm25Index | IndexMismatchError | None = None
        self._counted: tuple[list[str], TermCounts] | None = None

    @classmethod
    @contextmanager
    def temporary(cls) -> Iterator[KnowledgeDatabase]:
        """A database in a fresh temporary file, removed with its directory on exit."""
        with TemporaryDirectory(prefix="evalkit-db-") as directory:
            database = cls(Path(directory) / "knowledge.sqlite3")
            try:
                yield database
            finally:
                database.close()

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()

    def add_documents(self, documents: Iterable[Document]) -> None:
        """Insert documents."""
        with self._connection:
            self._connection.executemany(
                "INSERT INTO documents (doc_id, language, title) VALUES (?, ?, ?)",
                [(d.doc_id, d.language, d.title) for d in documents],
            )

    def add_chunks(self, chunks: Iterable[Chunk]) -> None:
        """Insert chunks and index their analyzed text in FTS5 (in chunk ID order, for a stable layout).

        The text is analyzed a block at a time; each block's tokens and content tokens (stopwords removed, for
        :meth:`content_tokens`) are stored in one row per chunk, and a writer thread indexes a group of blocks
        (:data:`_INDEX_BLOCKS`) in FTS5 with one statement while the next blocks are analyzed, so the analyzer and
        FTS5 use a core each. One pass of the analyzer serves FTS5 and a provider that embeds the content tokens.
        Into an empty database, the tokens' counts are kept as well, so that the sparse BM25 index is computed without
        reading the stored tokens back.
        """
        ordered = sorted(chunks, key=lambda c: c.chunk_id)
        self._lexical_index = self._counted = None
        with self._connection, ThreadPoolExecutor(max_workers=1) as writer:
            first = int(self._connection.execute("SELECT coalesce(max(rowid), 0) + 1 FROM chunks").fetchone()[0])
            counter = TermCounter() if first == 1 else None  # chunk ID order is the stored order
            self._connection.executemany(
                _INSERT_CHUNKS, [(first + i, c.chunk_id, c.doc_id, c.text) for i, c in enumerate(ordered)]
            )
            group = _ANALYZE_BLOCK_ROWS * _INDEX_BLOCKS
            grouped = max(len(ordered) - group, 0) // group * group  # the chunks indexed in whole groups
            indexing: Future[object] | None = None
            rows: list[tuple[int, str, str]] = []
            for start in range(0, len(ordered), _ANALYZE_BLOCK_ROWS):
                block = [analyze(c.text) for c in ordered[start : start + _ANALYZE_BLOCK_ROWS]]
                rows += [
                    (first + start + i, " ".join(tokens), " ".join(content))
                    for i, (tokens, content) in enumerate(block)
                ]
                end = start + len(block)
                if end % group == 0 or end > grouped:
                    indexing, rows = self._store_tokens(writer, indexing, rows), []
                if counter is not None and not any("" in tokens for tokens, _ in block):
                    counter.add([tokens for tokens, _ in block])  # FTS5 stores the tokens joined by spaces
                else:
                    counter = None
            if indexing is not None:
                indexing.result()
        if counter is not None:
            self._counted = ([c.chunk_id for c in ordered], counter.counts())

    def _store_tokens(
        self, writer: ThreadPoolExecutor, indexing: Future[object] | None, rows: Sequence[tuple[int, str, str]]
    ) -> Future[object]:
        """Store token rows (rowid, tokens, content; rowids consecutive) once the writer thread's statement in flight
        (``indexing``) is done with the connection, and hand their FTS5 indexing to the writer thread."""
        if indexing is not None:
            indexing.result()
        self._connection.executemany(_INSERT_TOKENS, rows)
        return writer.submit(self._connection.execute, _INDEX_TOKENS, (rows[0][0], rows[-1][0]))

    def content_tokens(self, chunk_ids: Sequence[str]) -> list[str]:
        """Each chunk's ``tokenize(text, drop_stopwords=True)`` joined by spaces, as analyzed when it was added."""
        found = dict(self._tokens_of("content", chunk_ids))
        return [found[chunk_id] for chunk_id in chunk_ids]

    def _tokens_of(self, column: str, chunk_ids: Sequence[str]) -> list[tuple[str, str]]:
        """(chunk ID, stored tokens) from ``column`` of ``chunk_tokens`` for these chunks, asked 30,000 at a time
        (SQLite's limit). A list, not a generator: a generator left suspended by a signal (SIGTERM while the reranker
        reads tokens) was finalized after the connection closed and printed a traceback on the way out."""
        found: list[tuple[str, str]] = []
        for start in range(0, len(chunk_ids), 30_000):
            batch = tuple(chunk_ids[start : start + 30_000])
            found += self._connection.execute(
                f"SELECT c.chunk_id, t.{column} FROM chunks c JOIN chunk_tokens t ON t.rowid = c.rowid "
                f"WHERE c.chunk_id IN ({','.join('?' * len(batch))})",
                batch,
            ).fetchall()
        return found

    def chunks(self) -> list[StoredChunk]:
        """Every chunk with its language, in chunk ID order."""
        rows = self._connection.execute(
            "SELECT c.chunk_id, c.text, d.language FROM chunks c JOIN documents d USING (doc_id) ORDER BY c.chunk_id"
        )
        return [StoredChunk(chunk_id=r[0], text=r[1], language=r[2]) for r in rows]

    def chunk_texts(self) -> tuple[list[str], list[str]]:
        """Every chunk's ID and text, in chunk ID order: :meth:`chunks` without the languages, and without an object
        per chunk (a tenth of embedding 100,000 token-hash chunks was making them)."""
        rows = self._connection.execute("SELECT chunk_id, text FROM chunks ORDER BY chunk_id").fetchall()
        return [r[0] for r in rows], [r[1] for r in rows]

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The stored chunks with these IDs."""
        marks = ",".join("?" * len(chunk_ids))
        rows = self._connection.execute(
            "SELECT c.chunk_id, c.text, d.language FROM chunks c JOIN documents d USING (doc_id) "
            f"WHERE c.chunk_id IN ({marks})",
            tuple(chunk_ids),
        )
        return {r[0]: StoredChunk(chunk_id=r[0], text=r[1], language=r[2]) for r in rows}

    def lexical_search(self, terms: Sequence[str], limit: int) -> list[Hit]:
        """BM25 (FTS5, k1 = 1.2, b = 0.75) over analyzed chunk text for any of ``terms``; score = -bm25().

        Answered from the sparse index (:mod:`~evalkit.retrieval.sparse_index`, built on first use after the
        chunks change), which gives FTS5's ranking and scores bit for bit; FTS5 answers the queries the index
        cannot vouch for, and all of them if the index could not be made exact.
        """
        if not terms or limit < 1:
            return []
        index = self.lexical_index()
        found = index.search(terms, limit) if isinstance(index, SparseBm25Index) else None
        if found is None:
            return self.fts5_search(terms, limit)
        return [Hit(chunk_id=chunk_id, score=score) for chunk_id, score in found]

    def fts5_search(self, terms: Sequence[str], limit: int) -> list[Hit]:
        """The same search as :meth:`lexical_search`, asked of FTS5 directly (the reference definition)."""
        if not terms or limit < 1:
            return []
        rows = self._connection.execute(
            "SELECT c.chunk_id, -bm25(chunks_fts) AS score FROM chunks_fts "
            "JOIN chunks c ON c.rowid = chunks_fts.rowid WHERE chunks_fts MATCH ? "
            "ORDER BY score DESC, c.chunk_id ASC LIMIT ?",
            (_fts_query(terms), limit),
        )
        return [Hit(chunk_id=r[0], score=float(r[1])) for r in rows]

    def lexical_index(self) -> SparseBm25Index | IndexMismatchError:
        """The sparse BM25 index of the stored tokens, or the error that kept it from being exact (from the counts
        :meth:`add_chunks` kept when it filled an empty database, else from the stored tokens)."""
        if self._lexical_index is None:
            counted, self._counted = self._counted, None
            if counted is None:
                rows = self._connection.execute(
                    "SELECT c.chunk_id, t.tokens FROM chunks c JOIN chunk_tokens t ON t.rowid = c.rowid "
                    "ORDER BY c.chunk_id"
                ).fetchall()
                counted = ([r[0] for r in rows], TermCounter.of([r[1] for r in rows]))
            try:
                self._lexical_index = SparseBm25Index.of_counts(*counted, check=self.vocabulary)
            except IndexMismatchError as error:
                self._lexical_index = error
        return self._lexical_index

    def vocabulary(self, terms: Sequence[str]) -> dict[str, tuple[int, int]]:
        """FTS5's (rows, occurrences) for each of these terms that it holds."""
        found: dict[str, tuple[int, int]] = {}
        for start in range(0, len(terms), 500):
            batch = tuple(terms[start : start + 500])
            marks = ",".join("?" * len(batch))
            rows = self._connection.execute(f"SELECT term, doc, cnt FROM chunks_vocab WHERE term IN ({marks})", batch)
            found.update({r[0]: (int(r[1]), int(r[2])) for r in rows})
        return found

    def chunk_count(self) -> int:
        """Number of chunks."""
        return int(self._connection.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def document_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        """Number of chunks containing each analyzed term (0 for unseen terms), from the FTS5 vocabulary."""
        found = self.vocabulary(terms)
        return {term: found[term][0] if term in found else 0 for term in terms}

    def chunk_tokens(self, chunk_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """The analyzed tokens indexed for each chunk."""
        return {chunk_id: tuple(tokens.split()) for chunk_id, tokens in self._tokens_of("tokens", chunk_ids)}


class KnowledgeStore(Protocol):
    """What the knowledge service asks of its store: a :class:`KnowledgeDatabase`, or a sharded one."""

    def chunks(self) -> list[StoredChunk]:
        """Every chunk with its language, in chunk ID order."""

    def chunk_texts(self) -> tuple[list[str], list[str]]:
        """Every chunk's ID and text, in chunk ID order."""

    def lexical_search(self, terms: Sequence[str], limit: int) -> list[Hit]:
        """BM25 hits for any of ``terms``, score descending then chunk ID."""

    def vector_search(self, provider: str, query: Matrix, limit: int) -> list[Hit]:
        """Exact inner-product hits, score descending then chunk ID."""

    def vectors(self, provider: str, chunk_ids: Sequence[str]) -> Matrix:
        """Stored rows for these chunks, in the order given."""

    def chunk_tokens(self, chunk_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """The analyzed tokens indexed for each chunk."""

    def content_tokens(self, chunk_ids: Sequence[str]) -> list[str]:
        """Each chunk's content tokens (stopwords removed) joined by spaces, in the order given."""

    def document_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        """Number of chunks containing each analyzed term."""

    def chunk_count(self) -> int:
        """Number of chunks."""

    def has_embeddings(self, provider: str) -> bool:
        """True when embeddings are stored for this provider fingerprint."""

    def store_embeddings(self, provider: str, chunk_ids: Sequence[str], matrix: Matrix) -> None:
        """Store one row per chunk under a provider fingerprint."""

    def store_embedding_blocks(self, provider: str, blocks: Iterable[tuple[Sequence[str], Matrix]]) -> None:
        """Store a provider's rows for the first time, a block at a time, in chunk ID order."""

    def use_vector_index(self, provider: str, plan: IndexPlan) -> None:
        """Search this provider's rows with the planned index."""

    def index_recall(self, provider: str, queries: Matrix, k: int = RECALL_K) -> float:
        """Mean recall@k of the planned index against exact search for these query rows."""
