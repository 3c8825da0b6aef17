"""A precomputed sparse BM25 index that reproduces SQLite FTS5's ``bm25()`` ranking and scores bit for bit.

FTS5 scores a row for a query of single-term phrases ``q_1 .. q_n`` (``fts5_aux.c``, ``fts5Bm25Function``) as

    score = sum_i idf_i * (f_i * (k1 + 1)) / (f_i + k1 * (1 - b + b * D / avgdl)),   k1 = 1.2, b = 0.75

with ``idf_i = ln((N - n_i + 0.5) / (n_i + 0.5))`` (raised to 1e-6 when not positive), ``f_i`` the term's count in
the row, ``D`` the row's token count, ``avgdl`` the mean token count and the sum taken in query order. Everything
but the query order is fixed once the corpus is, so this index stores each (chunk, term) contribution
``idf * (...)`` in a CSC matrix (one column per term), computed with the same IEEE double operations in the same
order as FTS5's C code (``idf`` with libm's ``log`` through :func:`math.log`). A query adds its terms' columns into
a dense score vector in query order, which repeats FTS5's sums exactly, so rankings and scores are identical, not
merely close (the approach of bm25s: precompute, then a query is a few sparse column reads).

The index is built from the tokens FTS5 itself stores, and it is only exact while every stored token is one
``unicode61`` token equal to itself. Tokens made of ASCII lower-case letters, digits and common Han ideographs are
(see :func:`is_plain`); every other token is checked against FTS5's own vocabulary when the index is built, and a
query term that is neither known nor plain makes :meth:`SparseBm25Index.search` return ``None`` so that the caller
asks FTS5 (such a term may be several FTS5 tokens and match as a phrase).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import numpy.typing as npt
from scipy import sparse

from evalkit.retrieval.hashing import first_seen_codes

FTS5_K1 = 1.2
"""FTS5's ``k1`` (fixed in ``fts5Bm25Function``)."""
FTS5_B = 0.75
"""FTS5's ``b`` (fixed in ``fts5Bm25Function``)."""
FTS5_MIN_IDF = 1e-6
"""FTS5's floor for a non-positive IDF (terms in more than half of the rows)."""

_PLAIN = re.compile(r"[a-z0-9\u4e00-\u9fa5]+")

_BUILD_BLOCK_ROWS = 8192
"""Chunks whose tokens are split and mapped to columns together while the index is built (a memory bound)."""

VocabularyCheck = Callable[[Sequence[str]], Mapping[str, tuple[int, int]]]
"""Looks terms up in FTS5's vocabulary: term -> (rows containing it, occurrences); absent terms are left out."""


def is_plain(term: str) -> bool:
    """True when ``unicode61`` certainly keeps the term as one token equal to itself.

    ASCII lower-case letters and digits are token characters that case folding leaves alone, and U+4E00 to U+9FA5
    (the ideographs of Unicode 1.1) are letters in every Unicode version SQLite has shipped.
    """
    return _PLAIN.fullmatch(term) is not None


def fts5_idf(rows: int, hits: int) -> float:
    """FTS5's IDF: ln((N - n + 0.5) / (n + 0.5)), or 1e-6 when that is not positive."""
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0.0 else FTS5_MIN_IDF


class IndexMismatchError(ValueError):
    """The analyzed tokens and FTS5's vocabulary disagree, so the sparse index could not be exact."""


@dataclass(frozen=True)
class CorpusStatistics:
    """The corpus-wide numbers BM25 needs: rows N, total tokens (for avgdl) and each term's row count n.

    An index built over part of the corpus with the whole corpus's statistics scores its chunks exactly as the
    index of the whole corpus does (the sharded evaluation shares one of these with every shard).
    """

    rows: int
    total_tokens: int
    frequencies: Mapping[str, int]

    @classmethod
    def of(cls, analyzed_texts: Sequence[str]) -> CorpusStatistics:
        """The statistics of these stored texts (analyzed tokens joined by spaces)."""
        frequencies: dict[str, int] = {}
        total = 0
        for text in analyzed_texts:
            tokens = text.split()
            total += len(tokens)
            for term in set(tokens):
                frequencies[term] = frequencies.get(term, 0) + 1
        return cls(rows=len(analyzed_texts), total_tokens=total, frequencies=frequencies)


@dataclass(frozen=True)
class SparseBm25Index:
    """BM25 contributions of every (chunk, term) pair, chunks in chunk ID order, searched without SQL."""

    chunk_ids: tuple[str, ...]
    vocabulary: dict[str, int]
    contributions: sparse.csc_matrix

    @classmethod
    def build(
        cls,
        chunk_ids: Sequence[str],
        analyzed_texts: Sequence[str],
        check: VocabularyCheck | None = None,
        statistics: CorpusStatistics | None = None,
    ) -> SparseBm25Index:
        """Index chunks given in chunk ID order with their stored text (analyzed tokens joined by spaces).

        ``check`` (FTS5's vocabulary) is asked about every token that is not plain; a disagreement in rows or
        occurrences raises :class:`IndexMismatchError`. ``statistics`` of a larger corpus that holds these chunks
        (one shard's index) replace the chunks' own in the IDF and avgdl.
        """
        if len(chunk_ids) != len(analyzed_texts):
            raise ValueError(f"{len(chunk_ids)} chunk IDs but {len(analyzed_texts)} texts")
        return cls.of_counts(chunk_ids, TermCounter.of(analyzed_texts), check, statistics)

    @classmethod
    def of_counts(
        cls,
        chunk_ids: Sequence[str],
        counted: TermCounts,
        check: VocabularyCheck | None = None,
        statistics: CorpusStatistics | None = None,
    ) -> SparseBm25Index:
        """:meth:`build` from the chunks' term counts (a :class:`TermCounter`'s, chunks in chunk ID order)."""
        if len(chunk_ids) != len(counted.lengths):
            raise ValueError(f"{len(chunk_ids)} chunk IDs but {len(counted.lengths)} counted chunks")
        if list(chunk_ids) != sorted(chunk_ids):
            raise ValueError("chunk IDs must be given in ascending order (the tie-breaking order)")
        vocabulary, counts, lengths = counted.vocabulary, counted.counts, counted.lengths
        hits = np.diff(counts.indptr)
        if check is not None:
            _check_vocabulary(vocabulary, hits, counts, check)
        if statistics is None:
            contributions = _contributions(counts, hits, lengths, len(lengths), int(lengths.sum()))
        else:
            frequencies = np.array([statistics.frequencies.get(term, 0) for term in vocabulary], dtype=np.int64)
            if (frequencies < hits).any():
                raise ValueError("corpus statistics do not cover this index's chunks")
            contributions = _contributions(counts, frequencies, lengths, statistics.rows, statistics.total_tokens)
        return cls(tuple(chunk_ids), vocabulary, contributions)

    def search(self, terms: Sequence[str], limit: int) -> list[tuple[str, float]] | None:
        """The best ``limit`` (chunk ID, score) pairs for any of ``terms``, score descending then chunk ID.

        ``None`` when a term is unknown and not plain: only FTS5 can say what it matches.
        """
        if not terms or limit < 1 or not self.chunk_ids:
            return []
        scores = np.zeros(len(self.chunk_ids))
        matrix = self.contributions
        for term in terms:
            column = self.vocabulary.get(term)
            if column is None:
                if not is_plain(term):
                    return None
                continue  # a term in no row adds idf * 0 = +0.0 to every score in FTS5
            start, end = matrix.indptr[column], matrix.indptr[column + 1]
            scores[matrix.indices[start:end]] += matrix.data[start:end]
        best = top_positions(scores, limit)
        return [(self.chunk_ids[i], float(scores[i])) for i in best]


def top_positions(scores: npt.NDArray[np.floating], limit: int, floor: float = 0.0) -> npt.NDArray[np.intp]:
    """Positions of the ``limit`` best scores above ``floor``, score descending then position ascending.

    ``argpartition`` finds the cut-off score; every position tied with it is kept before the final sort, so the
    result is the same as a full sort with the same tie rule.
    """
    candidates = np.flatnonzero(scores > floor)
    if len(candidates) > limit:
        values = scores[candidates]
        cutoff = values[np.argpartition(-values, limit - 1)[limit - 1]]
        candidates = candidates[values >= cutoff]
    order = np.lexsort((candidates, -scores[candidates]))[:limit]
    return candidates[order]


@dataclass(frozen=True)
class TermCounts:
    """Each (chunk, term) pair's count (int32 CSC, one column per term in first-seen order), the columns' terms
    and each chunk's token count: what a :class:`SparseBm25Index` is computed from."""

    vocabulary: dict[str, int]
    counts: sparse.csc_matrix
    lengths: npt.NDArray[np.int64]


class TermCounter:
    """Counts the (chunk, term) pairs of chunks given a block at a time, in chunk ID order.

    Each block's tokens are mapped to columns and its repeated pairs counted with ``np.unique``, so only the
    distinct pairs of the whole corpus are ever held, never an entry per token.
    """

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = {}
        self._lengths: list[npt.NDArray[np.int64]] = []
        self._rows: list[npt.NDArray[np.int32]] = []
        self._columns: list[npt.NDArray[np.int32]] = []
        self._counts: list[npt.NDArray[np.int32]] = []
        self._chunks = 0

    def add(self, block: Sequence[Sequence[str]]) -> None:
        """Count the next chunks' tokens (each chunk's tokens as FTS5 stores them, in order)."""
        vocabulary = self.vocabulary
        block_lengths = np.fromiter(map(len, block), dtype=np.int64, count=len(block))
        codes, distinct = first_seen_codes(block, int(block_lengths.sum()))
        # Each distinct token's column, a new term getting the next one: setdefault's default is the size before
        # the call.
        found = map(vocabulary.setdefault, distinct, map(len, repeat(vocabulary)))
        columns = np.fromiter(found, dtype=np.int64, count=len(distinct))[codes]
        width = max(len(vocabulary), 1)
        keys = np.repeat(np.arange(len(block), dtype=np.int64) * width, block_lengths) + columns
        pairs, repeats = np.unique(keys, return_counts=True)
        self._lengths.append(block_lengths)
        self._rows.append((pairs // width + self._chunks).astype(np.int32))
        self._columns.append((pairs % width).astype(np.int32))
        self._counts.append(repeats.astype(np.int32))
        self._chunks += len(block)

    @classmethod
    def of(cls, analyzed_texts: Sequence[str]) -> TermCounts:
        """The term counts of stored texts (analyzed tokens joined by spaces), a block of texts at a time."""
        counter = cls()
        for start in range(0, len(analyzed_texts), _BUILD_BLOCK_ROWS):
            counter.add([text.split() for text in analyzed_texts[start : start + _BUILD_BLOCK_ROWS]])
        return counter.counts()

    def counts(self) -> TermCounts:
        """The counts of every chunk added (the counter is emptied)."""
        shape = (self._chunks, len(self.vocabulary))
        empty = [np.zeros(0, dtype=np.int32)]
        triples = (
            np.concatenate(empty + self._counts),
            (np.concatenate(empty + self._rows), np.concatenate(empty + self._columns)),
        )
        lengths = np.concatenate([np.zeros(0, dtype=np.int64), *self._lengths])
        self._rows, self._columns, self._counts, self._lengths = [], [], [], []
        # The pairs come by chunk, so each column lists its chunks in ascending order.
        return TermCounts(self.vocabulary, sparse.csc_matrix(triples, shape=shape), lengths)


_CONTRIBUTION_SLICE = 1 << 22
"""Stored pairs whose BM25 contributions are computed together (bounds the float64 temporaries)."""


def _contributions(
    counts: sparse.csc_matrix,
    frequencies: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    rows: int,
    total: int,
) -> sparse.csc_matrix:
    """idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl)) per stored pair, in fts5Bm25Function's order.

    ``frequencies`` (each column's rows), ``rows`` and ``total`` are the corpus's (the index's own unless it holds
    one shard of the corpus). Computed a slice of pairs at a time into one float64
    array (each value is the same IEEE operations whatever the slice), sharing ``counts``' index arrays.
    """
    avgdl = float(total) / float(rows) if rows else 0.0
    idf = np.array([fts5_idf(rows, int(n)) for n in frequencies.tolist()], dtype=np.float64)
    data = np.empty(counts.nnz, dtype=np.float64)
    for start in range(0, counts.nnz, _CONTRIBUTION_SLICE):
        end = min(start + _CONTRIBUTION_SLICE, counts.nnz)
        frequency = counts.data[start:end].astype(np.float64)
        length = lengths[counts.indices[start:end]].astype(np.float64)
        saturation = (frequency * (FTS5_K1 + 1.0)) / (frequency + FTS5_K1 * (1 - FTS5_B + FTS5_B * length / avgdl))
        data[start:end] = _column_values(idf, counts.indptr, start, end) * saturation
    return sparse.csc_matrix((data, counts.indices, counts.indptr), shape=counts.shape)


def _column_values(
    values: npt.NDArray[np.float64], indptr: npt.NDArray[np.integer], start: int, end: int
) -> npt.NDArray[np.float64]:
    """Each stored pair's column's value, for the pairs ``start`` to ``end`` of a CSC matrix: the columns that hold
    them, found from their bounds, each repeated over its pairs in the slice (not a search per pair)."""
    first, last = np.searchsorted(indptr, [start, end - 1], side="right") - 1
    bounds = np.clip(indptr[first : last + 2], start, end)
    return np.repeat(values[first : last + 1], np.diff(bounds))


def _check_vocabulary(
    vocabulary: Mapping[str, int],
    hits: npt.NDArray[np.int64],
    counts: sparse.csc_matrix,
    check: VocabularyCheck,
) -> None:
    unusual = [term for term in vocabulary if not is_plain(term)]
    if not unusual:
        return
    found = check(unusual)
    occurrences = np.asarray(counts.sum(axis=0)).ravel()
    for term in unusual:
        column = vocabulary[term]
        expected = (int(hits[column]), int(occurrences[column]))
        if found.get(term) != expected:
            raise IndexMismatchError(
                f"token {term!r}: {expected[0]} rows and {expected[1]} occurrences in the analyzed text, "
                f"{found.get(term, (0, 0))} in FTS5's vocabulary"
            )
