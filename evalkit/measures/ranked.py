"""Rankings in the form every measure kernel reads: flat arrays, one entry per (query, rank), deduplicated.

A :class:`Ranked` holds ``n`` queries. Position ``i`` is rank ``rank[i]`` (from 1) of query ``row[i]``; positions
are grouped by query and in rank order, so a per-query sum accumulated over the positions in array order adds the
terms rank by rank. Beside each position: the grade of its document (0 when unjudged) and whether it was judged.
Per query: its positive grades sorted descending (the ideal ranking), and, for the fixture path, gold-span
characters and chunk lengths for the context measures.

Two builders, one per door: :func:`evalkit.measures.run_order.rank_run` orders a columnar run under a tie policy
and joins it to the qrels, block by block, with numpy sorts and searches (no Python loop over lines);
:func:`rank_lists` takes rankings already in order (the fixture path, and the reference functions' inputs).

How additive measures (nDCG, AP) add their terms is :data:`SUMMATIONS`: ``exact`` (correctly rounded, equal to
``math.fsum``) under the evalkit tie policy, ``sequential`` (one by one in rank order, as trec_eval adds them, so
values equal pytrec_eval's bit for bit) under the trec_eval policy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from evalkit.data.columns import IntArray

__all__ = [
    "SUMMATIONS",
    "Ranked",
    "SpanContext",
    "dedupe_ranking",
    "group_ranks",
    "ideal_arrays",
    "rank_lists",
    "segment_sums",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def dedupe_ranking(ranking: Sequence[str]) -> tuple[str, ...]:
    """Keep the first occurrence of each chunk ID, preserving order."""
    return tuple(dict.fromkeys(ranking))


@dataclass(frozen=True)
class SpanContext:
    """What the context measures read of a fixture, in the columnar core's terms: per qrels row, the gold-span
    characters of its chunk (merged spans); per known chunk ID, its length (a chunk the fixture does not know has
    length 0, as on the fixture path); and the depth of the context."""

    span_chars: IntArray
    chunk_ids: pa.Array
    lengths: IntArray
    context_k: int


@dataclass(frozen=True)
class Ranked:
    """Flat deduplicated rankings of ``n`` queries (see the module docstring)."""

    n: int
    row: IntArray
    rank: IntArray
    grade: IntArray
    judged: BoolArray
    ideal_row: IntArray
    ideal_rank: IntArray
    ideal_grade: IntArray
    summation: str = "exact"
    doc_ids: Sequence[str] | None = None
    judgments: Sequence[Mapping[str, int]] | None = None
    span_chars: IntArray | None = None
    lengths: IntArray | None = None
    total_span_chars: IntArray | None = None
    qrels_row: IntArray | None = None
    """Per position, the qrels row of its judgment (-1: unjudged); columnar rankings only."""
    nonrelevant: IntArray | None = None
    """Per query, the number of its judgments of grade 0 (judged, not relevant; negative grades are trec_eval's
    pooled, not judged), which bpref reads; both builders set it."""

    def judged_nonrelevant(self) -> IntArray:
        """:attr:`nonrelevant`, ``ValueError`` when the builder did not set it."""
        if self.nonrelevant is None:
            raise ValueError("these rankings do not carry the count of grade-0 judgments")
        return self.nonrelevant

    def count(self, mask: BoolArray) -> IntArray:
        """Per query, the number of positions where ``mask`` holds."""
        counts: IntArray = np.bincount(self.row[mask], minlength=self.n).astype(np.int64)
        return counts

    def relevant(self, level: int = 1) -> IntArray:
        """Per query, the number of judged documents with grade >= ``level``."""
        counts: IntArray = np.bincount(self.ideal_row[self.ideal_grade >= level], minlength=self.n).astype(np.int64)
        return counts

    def returned(self) -> IntArray:
        """Per query, the number of (deduplicated) results."""
        counts: IntArray = np.bincount(self.row, minlength=self.n).astype(np.int64)
        return counts

    def sums(self, mask: BoolArray, terms: FloatArray) -> FloatArray:
        """Per query, the sum of ``terms`` at the positions of ``mask``, added as :attr:`summation` says."""
        return segment_sums(self.row[mask], self.rank[mask], terms, self.n, self.summation)

    def ideal_sums(self, mask: BoolArray, terms: FloatArray) -> FloatArray:
        """:meth:`sums` over the ideal ranking."""
        return segment_sums(self.ideal_row[mask], self.ideal_rank[mask], terms, self.n, self.summation)


def _sequential(row: IntArray, rank: IntArray, terms: FloatArray, n: int) -> FloatArray:
    """Added one by one in array order (rank order within a query): ``np.bincount`` accumulates sequentially."""
    sums: FloatArray = np.asarray(np.bincount(row, weights=terms, minlength=n), dtype=np.float64)
    return sums


def _exact(row: IntArray, rank: IntArray, terms: FloatArray, n: int) -> FloatArray:
    """Error-free accumulation rank by rank (TwoSum, Knuth): each query's rounding errors are kept and added back
    once, so the sum is :func:`math.fsum`'s, but for a sum within a hair of half-way between two floats, whose last
    bit may differ (three terms, one of them 5e-324, gave one).

    Each step adds one term to each query that has one left, in rank order within the query. Positions grouped by
    query with ranks ascending (how :class:`Ranked` holds them) take the j-th term of every query at step j: as
    many steps as the longest query has terms, not one per rank (whole rankings of judged positions at ranks up
    to 100 took 100 steps for a few terms each). Other orders are grouped by rank first. Either way each query's
    terms are added in the same order, so the sums are the same bits."""
    high = np.zeros(n, dtype=np.float64)
    low = np.zeros(n, dtype=np.float64)
    if len(terms) == 0:
        return high
    for rows, at in _steps(row, rank):
        term = terms[at]
        old = high[rows]
        total = old + term
        back = total - old
        low[rows] += (old - (total - back)) + (term - back)
        high[rows] = total
    sums: FloatArray = high + low
    return sums


def _steps(row: IntArray, rank: IntArray) -> Iterator[tuple[IntArray, IntArray]]:
    """(rows, positions) of each step of :func:`_exact`: at most one position per row, rows' positions in rank
    order from one step to the next."""
    same = row[1:] == row[:-1]
    if bool(np.all(row[1:] >= row[:-1])) and bool(np.all(rank[1:][same] > rank[:-1][same])):
        starts = np.flatnonzero(np.concatenate(([True], ~same)))
        sizes = np.diff(starts, append=len(row))
        longest_first = np.argsort(-sizes, kind="stable")
        starts, sizes, rows = starts[longest_first], sizes[longest_first], row[starts[longest_first]]
        live = len(sizes)
        for step in range(int(sizes[0])):
            while sizes[live - 1] <= step:  # the rows with a term left are a prefix
                live -= 1
            yield rows[:live], starts[:live] + step
        return
    order = np.argsort(rank, kind="stable")
    bounds = np.flatnonzero(np.diff(rank[order])) + 1
    for level in np.split(order, bounds):
        yield row[level], level


SUMMATIONS: Final[dict[str, Callable[[IntArray, IntArray, FloatArray, int], FloatArray]]] = {
    "exact": _exact,
    "sequential": _sequential,
}
"""How additive measures add their terms: ``exact`` (``math.fsum``'s sum but in half-way cases, see :func:`_exact`) or
``sequential`` (trec_eval's)."""


def segment_sums(row: IntArray, rank: IntArray, terms: FloatArray, n: int, summation: str) -> FloatArray:
    """Per query, the sum of its terms; an unknown summation raises ``ValueError`` naming the valid ones."""
    add = SUMMATIONS.get(summation)
    if add is None:
        raise ValueError(f"unknown summation {summation!r}; valid: {', '.join(SUMMATIONS)}")
    return add(row, rank, terms, n)


def group_ranks(row: IntArray, n: int) -> IntArray:
    """1-based rank of each position, for positions grouped by row in ascending row order."""
    starts = np.concatenate(([0], np.cumsum(np.bincount(row, minlength=n))[:-1]))
    ranks: IntArray = np.arange(len(row), dtype=np.int64) - starts[row] + 1
    return ranks


def ideal_arrays(query: IntArray, grades: IntArray, n: int) -> tuple[IntArray, IntArray, IntArray]:
    """The ideal rankings: each query's positive grades sorted descending, as (row, rank, grade) arrays."""
    positive = grades >= 1
    q, g = query[positive], grades[positive]
    if len(g) == 0:
        return q, group_ranks(q, n), g
    low, high = int(g.min()), int(g.max())
    if (high - low + 1) * (int(q.max()) + 1) < 2**62:  # one int64 key, query then grade descending: a stable sort
        order = np.argsort(q.astype(np.int64) * (high - low + 1) + (high - g), kind="stable")
    else:
        order = np.lexsort((-g, q))
    q, g = q[order], g[order]
    return q, group_ranks(q, n), g


def rank_lists(
    rankings: Sequence[Sequence[str]],
    grades: Sequence[Mapping[str, int]],
    summation: str = "exact",
    depth: int | None = None,
    spans: Sequence[Mapping[str, int]] | None = None,
    chunk_lengths: Mapping[str, int] | None = None,
    context_k: int = 0,
) -> Ranked:
    """Rankings given in order (duplicates removed here, first kept) with each query's grades.

    ``spans`` (per query, gold-span characters by chunk) and ``chunk_lengths`` feed the context measures, whose
    context is the first ``context_k`` results; a chunk in a context without a length raises ``ValueError``.
    """
    if len(rankings) != len(grades):
        raise ValueError(f"{len(rankings)} rankings for {len(grades)} judged queries")
    n = len(rankings)
    rows: list[int] = []
    ids: list[str] = []
    for index, ranking in enumerate(rankings):
        top = dedupe_ranking(ranking)
        if depth is not None:
            top = top[:depth]
        ids += top
        rows += [index] * len(top)
    row = np.array(rows, dtype=np.int64)
    rank = group_ranks(row, n)
    grade_list: list[int] = []
    judged_list: list[bool] = []
    for index, chunk_id in zip(rows, ids, strict=True):
        value = grades[index].get(chunk_id)
        judged_list.append(value is not None)
        grade_list.append(0 if value is None else value)
    judged_query = np.array([i for i, g in enumerate(grades) for _ in g], dtype=np.int64)
    judged_grades = np.array([v for g in grades for v in g.values()], dtype=np.int64)
    ideal_row, ideal_rank, ideal_grade = ideal_arrays(judged_query, judged_grades, n)
    nonrelevant = np.bincount(judged_query[judged_grades == 0], minlength=n).astype(np.int64)
    span_chars = lengths = total = None
    if spans is not None:
        span_chars, lengths, total = _context(rows, ids, rank, spans, chunk_lengths, context_k, n)
    return Ranked(
        n,
        row,
        rank,
        np.array(grade_list, dtype=np.int64),
        np.array(judged_list, dtype=bool),
        ideal_row,
        ideal_rank,
        ideal_grade,
        summation,
        tuple(ids),
        grades,
        span_chars,
        lengths,
        total,
        nonrelevant=nonrelevant,
    )


def _context(
    rows: list[int],
    ids: list[str],
    rank: IntArray,
    spans: Sequence[Mapping[str, int]],
    chunk_lengths: Mapping[str, int] | None,
    context_k: int,
    n: int,
) -> tuple[IntArray, IntArray, IntArray]:
    chars: list[int] = []
    lengths: list[int] = []
    for index, chunk_id, position in zip(rows, ids, rank.tolist(), strict=True):
        if position > context_k:
            chars.append(0)
            lengths.append(0)
            continue
        if chunk_lengths is None or chunk_id not in chunk_lengths:
            raise ValueError(f"chunk {chunk_id!r} has no entry in chunk_lengths")
        chars.append(spans[index].get(chunk_id, 0))
        lengths.append(chunk_lengths[chunk_id])
    total = np.array([sum(s.values()) for s in spans], dtype=np.int64)
    return np.array(chars, dtype=np.int64), np.array(lengths, dtype=np.int64), total
