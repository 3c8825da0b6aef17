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
from typing import Protocol

import numpy as np

from evalkit.data.runs import Ranking
from evalkit.data.schema import Matrix
from evalkit.retrieval.database import Hit, KnowledgeDatabase, StoredChunk, order_hits, row_scores
from evalkit.retrieval.sparse_index import CorpusStatistics, SparseBm25Index, is_plain, top_positions


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
        self._matrices: dict[str, tuple[tuple[str, ...], Matrix]] = {}

    def lexical(self, terms: Sequence[str], limit: int) -> Ranking | None:
        """This shard's best ``limit`` BM25 hits; None when only FTS5 can answer (see ``SparseBm25Index.search``)."""
        hits = self._lexical.search(terms, limit)
        return None if hits is None else tuple(hits)

    def store_embeddings(self, provider: str, chunk_ids: Sequence[str], matrix: Matrix) -> None:
        """Hold these rows (this shard's chunks) under a provider fingerprint, in chunk ID order."""
        if matrix.shape[0] != len(chunk_ids):
            raise ValueError(f"{len(chunk_ids)} chunk IDs but {matrix.shape[0]} embedding rows")
        order = sorted(range(len(chunk_ids)), key=list(chunk_ids).__getitem__)
        rows = np.ascontiguousarray(np.asarray(matrix, dtype=np.float32)[order])
        self._matrices[provider] = (tuple(chunk_ids[i] for i in order), rows)

    def providers(self) -> tuple[str, ...]:
        """The provider fingerprints whose rows this shard holds."""
        return tuple(sorted(self._matrices))

    def vector(self, provider: str, query: Matrix, limit: int) -> Ranking:
        """This shard's best ``limit`` inner-product hits (every row, as ``KnowledgeDatabase.vector_search``)."""
        if provider not in self._matrices:
            raise KeyError(f"this shard holds no rows of provider {provider[:12]}")
        ids, matrix = self._matrices[provider]
        if not ids or limit < 1:
            return ()
        scores = row_scores(matrix, query)
        return tuple((ids[i], float(scores[i])) for i in top_positions(scores, limit, floor=-np.inf))

    def vectors(self, provider: str, chunk_ids: Sequence[str]) -> Matrix:
        """The rows of these chunks of this shard, in the order given."""
        ids, matrix = self._matrices[provider]
        position = {chunk_id: index for index, chunk_id in enumerate(ids)}
        missing = [c for c in chunk_ids if c not in position]
        if missing:
            raise KeyError(f"no embedding for chunk(s) {', '.join(missing)} under this provider")
        rows: Matrix = matrix[[position[c] for c in chunk_ids]]
        return rows


class Shards(Protocol):
    """The shards of one corpus, wherever they run; every call goes to every shard, answers in shard order."""

    @property
    def count(self) -> int:
        """Number of shards."""

    def lexical(self, terms: Sequence[str], limit: int) -> list[Ranking | None]:
        """Every shard's :meth:`ShardIndex.lexical`."""

    def vector(self, provider: str, query: Matrix, limit: int) -> list[Ranking]:
        """Every shard's :meth:`ShardIndex.vector`."""

    def store_embeddings(self, provider: str, parts: Sequence[tuple[Sequence[str], Matrix]]) -> None:
        """Give each shard its rows (``parts[i]`` to shard i)."""

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

    def store_embeddings(self, provider: str, parts: Sequence[tuple[Sequence[str], Matrix]]) -> None:
        """Give each shard its rows."""
        for shard, (ids, matrix) in zip(self.shards, parts, strict=True):
            shard.store_embeddings(provider, ids, matrix)

    def vectors(self, provider: str, requests: Sequence[Sequence[str]]) -> list[Matrix]:
        """Each shard's rows of the chunks asked of it."""
        return [shard.vectors(provider, ids) for shard, ids in zip(self.shards, requests, strict=True)]


def stored_corpus(database: KnowledgeDatabase) -> tuple[list[str], list[str]]:
    """Chunk IDs (ascending) and the analyzed text FTS5 indexed for each."""
    ids = [c.chunk_id for c in database.chunks()]
    tokens = database.chunk_tokens(ids) if ids else {}
    return ids, [" ".join(tokens[c]) for c in ids]


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

    def chunks(self) -> list[StoredChunk]:
        """Every chunk with its language, in chunk ID order."""
        return self.database.chunks()

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

    def document_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        """Corpus-wide document frequencies."""
        return self.database.document_frequencies(terms)

    def chunk_count(self) -> int:
        """Number of chunks in the whole corpus."""
        return self.database.chunk_count()

    def has_embeddings(self, provider: str) -> bool:
        """True once rows for this provider were handed to the shards."""
        return provider in self._providers

    def store_embeddings(self, provider: str, chunk_ids: Sequence[str], matrix: Matrix) -> None:
        """Split the rows by shard and hand each shard its part."""
        if matrix.shape[0] != len(chunk_ids):
            raise ValueError(f"{len(chunk_ids)} chunk IDs but {matrix.shape[0]} embedding rows")
        positions: list[list[int]] = [[] for _ in range(self.shards.count)]
        for index, chunk_id in enumerate(chunk_ids):
            positions[shard_of(chunk_id, self.shards.count)].append(index)
        rows = np.asarray(matrix, dtype=np.float32)
        self.shards.store_embeddings(
            provider, [([chunk_ids[i] for i in part], np.ascontiguousarray(rows[part])) for part in positions]
        )
        self._providers.add(provider)


def local_store(database: KnowledgeDatabase, shards: int) -> ShardedStore:
    """The seeded database's corpus split into ``shards`` in-process shards, as a store."""
    ids, texts = stored_corpus(database)
    statistics = CorpusStatistics.of(texts)
    parts = split_corpus(ids, texts, shards)
    return ShardedStore(database, LocalShards(parts, statistics), agrees_with_fts5(database, texts))
