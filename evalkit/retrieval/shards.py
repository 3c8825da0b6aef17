"""The corpus split into shards that answer queries together exactly as one index does (no cluster code here).

A chunk belongs to shard ``blake2b(chunk ID) mod N`` (:func:`shard_of`), the same in every process and on every
machine (never Python's salted ``hash``). Each shard holds the sparse BM25 index of its chunks, built with the
statistics of the whole corpus (:class:`~evalkit.retrieval.sparse_index.CorpusStatistics`: rows, average length and
document frequencies), so a chunk's BM25 score is bit for bit the single-process one, and its rows of every
embedding matrix, scored by :func:`~evalkit.retrieval.database.row_scores` whose value for a row does not depend on
the other rows. A query goes to every shard; each returns its best ``limit`` hits with the one tie rule (score
descending, then chunk ID), and :func:`merge_hits` keeps the best ``limit`` of their union with the same rule, which
is the single-process top ``limit``.

:class:`ShardedStore` is a :class:`~evalkit.retrieval.database.KnowledgeStore`: the knowledge service runs on it
unchanged. It keeps the seeded database for what is per chunk (languages, tokens, FTS5's answers to the rare query
the sparse index cannot vouch for) and sends what scans the corpus (lexical and vector search) to the shards.
:class:`LocalShards` runs the shards in this process; :mod:`evalkit.runs.cluster` runs them as Ray actors.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeAlias

import numpy as np
from scipy import sparse

from evalkit.data.runs import Ranking
from evalkit.data.schema import Matrix
from evalkit.retrieval.database import Hit, KnowledgeDatabase, StoredChunk, order_hits
from evalkit.retrieval.sparse_index import CorpusStatistics, SparseBm25Index, is_plain
from evalkit.retrieval.vector_index import (
    EXACT_PLAN,
    RECALL_K,
    IndexPlan,
    VectorIndex,
    build_index,
    exact_top,
    recall_of,
)

ShardRows: TypeAlias = Matrix | sparse.csr_matrix
"""A shard's rows of one provider: dense float32, or CSR when its index is sparse (only nonzeros travel)."""


def shard_of(chunk_id: str, shards: int) -> int:
    """The shard of a chunk: its ID's 64-bit BLAKE2b digest modulo the shard count."""
    if shards < 1:
        raise ValueError(f"shard count must be >= 1, got {shards}")
    digest = hashlib.blake2b(chunk_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def split_corpus(
    chunk_ids: Sequence[str], analyzed_texts: Sequence[str], shards: int
) -> list[tuple[list[str], list[str]]]:
    """Each shard's chunk IDs (ascending) and stored texts."""
    if len(chunk_ids) != len(analyzed_texts):
        raise ValueError(f"{len(chunk_ids)} chunk IDs but {len(analyzed_texts)} texts")
    parts: list[tuple[list[str], list[str]]] = [([], []) for _ in range(shards)]
    for chunk_id, text in sorted(zip(chunk_ids, analyzed_texts, strict=True)):
        ids, texts = parts[shard_of(chunk_id, shards)]
        ids.append(chunk_id)
        texts.append(text)
    return parts


def merge_hits(lists: Iterable[Ranking], limit: int) -> list[Hit]:
    """The best ``limit`` hits of every shard's list, score descending then chunk ID (the single-process order)."""
    return order_hits(Hit(chunk_id, score) for hits in lists for chunk_id, score in hits)[: max(limit, 0)]


class ShardIndex:
    """One shard's search indexes: sparse BM25 with corpus-wide statistics, and embedding rows per provider."""

    def __init__(self, chunk_ids: Sequence[str], analyzed_texts: Sequence[str], statistics: CorpusStatistics) -> None:
        self.chunk_ids = tuple(chunk_ids)
        self._lexical = SparseBm25Index.build(chunk_ids, analyzed_texts, statistics=statistics)
        self._vectors: dict[str, tuple[tuple[str, ...], VectorIndex]] = {}
        self._plans: dict[str, IndexPlan] = {}

    def lexical(self, terms: Sequence[str], limit: int) -> Ranking | None:
        """This shard's best ``limit`` BM25 hits; None when only FTS5 can answer (see ``SparseBm25Index.search``)."""
        hits = self._lexical.search(terms, limit)
        return None if hits is None else tuple(hits)

    def use_vector_index(self, provider: str, plan: IndexPlan) -> None:
        """Index this provider's rows (given next, by :meth:`store_embeddings`) as planned."""
        self._plans[provider] = plan

    def store_embeddings(self, provider: str, chunk_ids: Sequence[str], matrix: ShardRows) -> None:
        """Index these rows (this shard's chunks) under a provider fingerprint, in chunk ID order."""
        if matrix.shape[0] != len(chunk_ids):
            raise ValueError(f"{len(chunk_ids)} chunk IDs but {matrix.shape[0]} embedding rows")
        order = sorted(range(len(chunk_ids)), key=list(chunk_ids).__getitem__)
        rows = matrix[order] if sparse.issparse(matrix) else np.asarray(matrix, dtype=np.float32)[order]
        index = build_index(self._plans.get(provider, EXACT_PLAN), [rows], matrix.shape[1])
        self._vectors[provider] = (tuple(chunk_ids[i] for i in order), index)

    def providers(self) -> tuple[str, ...]:
        """The provider fingerprints whose rows this shard holds."""
        return tuple(sorted(self._vectors))

    def _held(self, provider: str) -> tuple[tuple[str, ...], VectorIndex]:
        if provider not in self._vectors:
            raise KeyError(f"this shard holds no rows of provider {provider[:12]}")
        return self._vectors[provider]

    def vector(self, provider: str, query: Matrix, limit: int) -> Ranking:
        """This shard's best ``limit`` inner-product hits from its index (exact: every row, as the database)."""
        ids, index = self._held(provider)
        if not ids or limit < 1:
            return ()
        found, scores = index.search(query, limit)
        return tuple((ids[i], float(s)) for i, s in zip(found.tolist(), scores.tolist(), strict=True))

    def exact_vector(self, provider: str, query: Matrix, limit: int) -> Ranking:
        """This shard's exact float32 top ``limit`` (the reference an approximate index is measured against)."""
        ids, index = self._held(provider)
        if not ids or limit < 1:
            return ()
        found, scores = exact_top(index.blocks(), np.asarray(query, dtype=np.float32).reshape(1, -1), limit)[0]
        return tuple((ids[i], float(s)) for i, s in zip(found.tolist(), scores.tolist(), strict=True))

    def vectors(self, provider: str, chunk_ids: Sequence[str]) -> Matrix:
        """The rows of these chunks of this shard, in the order given."""
        ids, index = self._held(provider)
        position = {chunk_id: index for index, chunk_id in enumerate(ids)}
        missing = [c for c in chunk_ids if c not in position]
        if missing:
            raise KeyError(f"no embedding for chunk(s) {', '.join(missing)} under this provider")
        return index.rows([position[c] for c in chunk_ids])


class Shards(Protocol):
    """The shards of one corpus, wherever they run; every call goes to every shard, answers in shard order."""

    @property
    def count(self) -> int:
        """Number of shards."""

    def lexical(self, terms: Sequence[str], limit: int) -> list[Ranking | None]:
        """Every shard's :meth:`ShardIndex.lexical`."""

    def vector(self, provider: str, query: Matrix, limit: int) -> list[Ranking]:
        """Every shard's :meth:`ShardIndex.vector`."""

    def store_embeddings(self, provider: str, parts: Sequence[tuple[Sequence[str], ShardRows]]) -> None:
        """Give each shard its rows (``parts[i]`` to shard i)."""

    def use_vector_index(self, provider: str, plan: IndexPlan) -> None:
        """Every shard's :meth:`ShardIndex.use_vector_index`."""

    def exact_vector(self, provider: str, query: Matrix, limit: int) -> list[Ranking]:
        """Every shard's :meth:`ShardIndex.exact_vector`."""

    def vectors(self, provider: str, requests: Sequence[Sequence[str]]) -> list[Matrix]:
        """Each shard's rows of the chunks asked of it (``requests[i]`` of shard i)."""


class LocalShards:
    """The shards as :class:`ShardIndex` objects in this process (the reference for :mod:`evalkit.runs.cluster`)."""

    def __init__(self, parts: Sequence[tuple[Sequence[str], Sequence[str]]], statistics: CorpusStatistics) -> None:
        self.shards = [ShardIndex(ids, texts, statistics) for ids, texts in parts]

    @property
    def count(self) -> int:
        """Number of shards."""
        return len(self.shards)

    def lexical(self, terms: Sequence[str], limit: int) -> list[Ranking | None]:
        """Every shard's lexical hits."""
        return [shard.lexical(terms, limit) for shard in self.shards]

    def vector(self, provider: str, query: Matrix, limit: int) -> list[Ranking]:
        """Every shard's vector hits."""
        return [shard.vector(provider, query, limit) for shard in self.shards]

    def store_embeddings(self, provider: str, parts: Sequence[tuple[Sequence[str], ShardRows]]) -> None:
        """Give each shard its rows."""
        for shard, (ids, matrix) in zip(self.shards, parts, strict=True):
            shard.store_embeddings(provider, ids, matrix)

    def use_vector_index(self, provider: str, plan: IndexPlan) -> None:
        """Plan every shard's index."""
        for shard in self.shards:
            shard.use_vector_index(provider, plan)

    def exact_vector(self, provider: str, query: Matrix, limit: int) -> list[Ranking]:
        """Every shard's exact hits."""
        return [shard.exact_vector(provider, query, limit) for shard in self.shards]

    def vectors(self, provider: str, requests: Sequence[Sequence[str]]) -> list[Matrix]:
        """Each shard's rows of the chunks asked of it."""
        return [shard.vectors(provider, ids) for shard, ids in zip(self.shards, requests, strict=True)]


TOKENS_BATCH = 30_000
"""Chunk IDs asked of SQLite at once (it refuses more than 32,766 parameters in one statement)."""


def stored_corpus(database: KnowledgeDatabase) -> tuple[list[str], list[str]]:
    """Chunk IDs (ascending) and the analyzed text FTS5 indexed for each."""
    ids = [c.chunk_id for c in database.chunks()]
    texts: list[str] = []
    for start in range(0, len(ids), TOKENS_BATCH):
        batch = ids[start : start + TOKENS_BATCH]
        tokens = database.chunk_tokens(batch)
        texts += [" ".join(tokens[c]) for c in batch]
    return ids, texts


def agrees_with_fts5(database: KnowledgeDatabase, analyzed_texts: Sequence[str]) -> bool:
    """Whether FTS5 holds every token that is not plain with the same rows and occurrences as the analyzed text.

    The single-process index makes the same check (``SparseBm25Index.build``); when it fails, every lexical query
    is answered by FTS5, and so it is here.
    """
    rows: Counter[str] = Counter()
    occurrences: Counter[str] = Counter()
    for text in analyzed_texts:
        unusual = [t for t in text.split() if not is_plain(t)]
        occurrences.update(unusual)
        rows.update(set(unusual))
    if not rows:
        return True
    found = database.vocabulary(sorted(rows))
    return all(found.get(term) == (rows[term], occurrences[term]) for term in rows)


class ShardedStore:
    """A :class:`~evalkit.retrieval.database.KnowledgeStore` whose searches run on shards and are merged."""

    def __init__(self, database: KnowledgeDatabase, shards: Shards, exact: bool = True) -> None:
        self.database = database
        self.shards = shards
        self.exact = exact
        self._providers: set[str] = set()
        self._plans: dict[str, IndexPlan] = {}

    def chunks(self) -> list[StoredChunk]:
        """Every chunk with its language, in chunk ID order."""
        return self.database.chunks()

    def chunk_texts(self) -> tuple[list[str], list[str]]:
        """Every chunk's ID and text, in chunk ID order."""
        return self.database.chunk_texts()

    def lexical_search(self, terms: Sequence[str], limit: int) -> list[Hit]:
        """The merged shard BM25 hits; FTS5's own answer where the single process would ask FTS5 too."""
        if not terms or limit < 1:
            return []
        found = self.shards.lexical(terms, limit) if self.exact else [None]
        lists = [hits for hits in found if hits is not None]
        if len(lists) < len(found):
            return self.database.fts5_search(terms, limit)
        return merge_hits(lists, limit)

    def vector_search(self, provider: str, query: Matrix, limit: int) -> list[Hit]:
        """The merged shard inner-product hits."""
        if provider not in self._providers or limit < 1:
            return []
        return merge_hits(self.shards.vector(provider, query, limit), limit)

    def vectors(self, provider: str, chunk_ids: Sequence[str]) -> Matrix:
        """Stored rows for these chunks, in the order given, each fetched from its shard."""
        requests: list[list[str]] = [[] for _ in range(self.shards.count)]
        for chunk_id in dict.fromkeys(chunk_ids):
            requests[shard_of(chunk_id, self.shards.count)].append(chunk_id)
        row_of: dict[str, Matrix] = {}
        for ids, rows in zip(requests, self.shards.vectors(provider, requests), strict=True):
            row_of.update(zip(ids, rows, strict=True))
        if not chunk_ids:
            return np.zeros((0, 0), dtype=np.float32)
        matrix: Matrix = np.stack([row_of[c] for c in chunk_ids])
        return matrix

    def chunk_tokens(self, chunk_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """The analyzed tokens indexed for each chunk."""
        return self.database.chunk_tokens(chunk_ids)

    def content_tokens(self, chunk_ids: Sequence[str]) -> list[str]:
        """Each chunk's content tokens joined by spaces, in the order given."""
        return self.database.content_tokens(chunk_ids)

    def document_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        """Corpus-wide document frequencies."""
        return self.database.document_frequencies(terms)

    def chunk_count(self) -> int:
        """Number of chunks in the whole corpus."""
        return self.database.chunk_count()

    def has_embeddings(self, provider: str) -> bool:
        """True once rows for this provider were handed to the shards."""
        return provider in self._providers

    def use_vector_index(self, provider: str, plan: IndexPlan) -> None:
        """Index every shard's rows of this provider as planned."""
        self._plans[provider] = plan
        self.shards.use_vector_index(provider, plan)

    def store_embeddings(self, provider: str, chunk_ids: Sequence[str], matrix: Matrix) -> None:
        """Split the rows by shard and hand each shard its part."""
        self.store_embedding_blocks(provider, [(chunk_ids, matrix)])

    def store_embedding_blocks(self, provider: str, blocks: Iterable[tuple[Sequence[str], Matrix]]) -> None:
        """Split each block's rows by shard as it comes (as CSR for a sparse index), then hand each shard its part."""
        compact = self._plans.get(provider, EXACT_PLAN).kind == "sparse"
        ids: list[list[str]] = [[] for _ in range(self.shards.count)]
        pieces: list[list[ShardRows]] = [[] for _ in range(self.shards.count)]
        for chunk_ids, matrix in blocks:
            if matrix.shape[0] != len(chunk_ids):
                raise ValueError(f"{len(chunk_ids)} chunk IDs but {matrix.shape[0]} embedding rows")
            rows = np.asarray(matrix, dtype=np.float32)
            positions: list[list[int]] = [[] for _ in range(self.shards.count)]
            for index, chunk_id in enumerate(chunk_ids):
                positions[shard_of(chunk_id, self.shards.count)].append(index)
            for shard, part in enumerate(positions):
                ids[shard] += [chunk_ids[i] for i in part]
                pieces[shard].append(sparse.csr_matrix(rows[part]) if compact else rows[part])
        self.shards.store_embeddings(provider, [_joined(i, p) for i, p in zip(ids, pieces, strict=True)])
        self._providers.add(provider)

    def index_recall(self, provider: str, queries: Matrix, k: int = RECALL_K) -> float:
        """Mean recall@k of the shards' merged answers against their merged exact float32 answers."""
        found = [[h.score for h in self.vector_search(provider, query, k)] for query in queries]
        exact = [[h.score for h in merge_hits(self.shards.exact_vector(provider, query, k), k)] for query in queries]
        return recall_of(found, exact)


def _joined(ids: list[str], pieces: list[ShardRows]) -> tuple[list[str], ShardRows]:
    """One shard's rows from its pieces of every block."""
    if pieces and sparse.issparse(pieces[0]):
        return ids, sparse.vstack(pieces, format="csr", dtype=np.float32)
    return ids, np.ascontiguousarray(np.concatenate(pieces)) if pieces else np.zeros((0, 0), dtype=np.float32)


def local_store(database: KnowledgeDatabase, shards: int) -> ShardedStore:
    """The seeded database's corpus split into ``shards`` in-process shards, as a store."""
    ids, texts = stored_corpus(database)
    statistics = CorpusStatistics.of(texts)
    parts = split_corpus(ids, texts, shards)
    return ShardedStore(database, LocalShards(parts, statistics), agrees_with_fts5(database, texts))
