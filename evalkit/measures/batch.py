"""Batch kernels: the standard measures for many queries at once, equal to the per-query reference functions.

The per-query functions of :mod:`evalkit.measures.metrics` are the definitions; this module computes the same
values for every query of a run in one pass over numpy arrays. One Python pass per query takes the first ``depth``
chunks of its deduplicated ranking (the only part any cutoff or the context can see) and looks up their grades,
span characters and lengths; everything after that is array arithmetic over all queries at once:

- recall@k = (grades >= 1 in the first k) / |relevant|, an integer ratio as in :func:`recall_at_k`;
- reciprocal rank@k = 1 / (first rank with grade >= 1), 0 when none, as in :func:`reciprocal_rank_at_k`;
- nDCG@k = DCG / IDCG with the same gains, the same ``math.log2`` discounts and an error-free (double-double)
  accumulation of the terms, so the sums equal ``math.fsum``'s correctly rounded ones;
- context precision and recall from integer character counts, as in :func:`context_overlap`.

``tests/test_batch.py`` checks every value against the reference functions on random runs with duplicates,
short and empty rankings, unjudged chunks and grades 0 to 3.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from evalkit.measures.metrics import STANDARD_MEASURES, Measure, merge_intervals

__all__ = ["Judged", "RankedQueries", "judged_query", "rank_queries", "standard_values"]

IntMatrix = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class Judged(NamedTuple):
    """What the kernels need of one answerable query: positive grades and gold-span characters by chunk.

    A named tuple, not a model: a run of a million queries builds a million of them.
    """

    grades: Mapping[str, int]
    span_chars: Mapping[str, int]
    total_span_chars: int


def judged_query(
    grades: Mapping[str, int],
    spans: Mapping[str, Sequence[tuple[int, int]]],
) -> Judged:
    """A query's judgments in kernel form: grades >= 1 (raising when none, as the reference does), and the
    characters of the union of each chunk's spans (checked against chunk lengths later, when they are used)."""
    positive = {chunk_id: grade for chunk_id, grade in grades.items() if grade >= 1}
    if not positive:
        raise ValueError(
            "relevant has no chunk with grade >= 1: ranking measures are defined only on answerable queries"
        )
    if not spans:
        return Judged(positive, {}, 0)
    covered = {chunk_id: sum(e - s for s, e in merge_intervals(chunk_spans)) for chunk_id, chunk_spans in spans.items()}
    return Judged(positive, covered, sum(covered.values()))


@dataclass(frozen=True)
class RankedQueries:
    """The first ``depth`` deduplicated results of many queries, as aligned integer matrices (one row a query).

    ``grades``, ``span_chars`` and ``lengths`` hold the grade (0 when unjudged), the gold-span characters and the
    length of the chunk at each rank, 0 past the end of a short ranking; ``ideal`` holds each query's positive
    grades sorted descending, 0-padded; ``relevant`` counts them and ``total_span_chars`` sums its gold spans.
    """

    grades: IntMatrix
    span_chars: IntMatrix
    lengths: IntMatrix
    ideal: IntMatrix
    relevant: IntMatrix
    total_span_chars: IntMatrix


def _first_unique(ranking: Sequence[str], depth: int) -> Sequence[str]:
    top = ranking[:depth]
    if len(set(top)) == len(top):
        return top
    return tuple(dict.fromkeys(ranking))[:depth]


def rank_queries(
    rankings: Sequence[Sequence[str]],
    judged: Sequence[Judged],
    chunk_lengths: Mapping[str, int] | None,
    depth: int,
    context_depth: int = 0,
) -> RankedQueries:
    """Gather the kernels' inputs in one pass per query.

    ``chunk_lengths`` is needed only for context measures (``context_depth > 0``): a returned chunk within the
    first ``context_depth`` that it does not list raises ``ValueError`` naming the chunk, as the reference does.
    """
    if depth < 1 or not 0 <= context_depth <= depth:
        raise ValueError(f"need depth >= 1 and 0 <= context_depth <= depth, got {depth} and {context_depth}")
    if len(rankings) != len(judged):
        raise ValueError(f"{len(rankings)} rankings for {len(judged)} judged queries")
    n = len(rankings)
    width = max(context_depth, 1)
    grades: list[int] = []
    ideal: list[int] = []
    span_chars: list[int] = []
    lengths: list[int] = []
    pad = [0] * depth
    for ranking, query in zip(rankings, judged, strict=True):
        top = _first_unique(ranking, depth)
        positive = query.grades
        grades += [positive.get(chunk_id, 0) for chunk_id in top]
        grades += pad[len(top) :]
        ordered = sorted(positive.values(), reverse=True)[:depth]
        ideal += ordered
        ideal += pad[len(ordered) :]
        if context_depth:
            context = top[:context_depth]
            span_chars += [query.span_chars.get(c, 0) for c in context]
            lengths += [_length(chunk_lengths, c) for c in context]
            span_chars += pad[len(context) : width]
            lengths += pad[len(context) : width]
    if not context_depth:
        span_chars = lengths = [0] * n
    relevant = np.fromiter((len(q.grades) for q in judged), dtype=np.int64, count=n)
    total = np.fromiter((q.total_span_chars for q in judged), dtype=np.int64, count=n)
    return RankedQueries(
        _matrix(grades, n, depth),
        _matrix(span_chars, n, width),
        _matrix(lengths, n, width),
        _matrix(ideal, n, depth),
        relevant,
        total,
    )


def _matrix(values: list[int], rows: int, columns: int) -> IntMatrix:
    matrix: IntMatrix = np.array(values, dtype=np.int64).reshape(rows, columns)
    return matrix


def _length(chunk_lengths: Mapping[str, int] | None, chunk_id: str) -> int:
    if chunk_lengths is None or chunk_id not in chunk_lengths:
        raise ValueError(f"chunk {chunk_id!r} has no entry in chunk_lengths")
    return chunk_lengths[chunk_id]


def recall(ranked: RankedQueries, k: int) -> FloatArray:
    """recall@k of every query."""
    found = (ranked.grades[:, :k] >= 1).sum(axis=1)
    values: FloatArray = found / ranked.relevant
    return values


def reciprocal_rank(ranked: RankedQueries, k: int) -> FloatArray:
    """Reciprocal rank@k of every query (0 when no relevant chunk is within k)."""
    hits = ranked.grades[:, :k] >= 1
    first = hits.argmax(axis=1) + 1
    values: FloatArray = np.where(hits.any(axis=1), 1.0 / first, 0.0)
    return values


def _terms(grades: IntMatrix, k: int) -> FloatArray:
    """``(2**grade - 1) / log2(rank + 1)`` over the first k ranks, with the reference's ``math.log2`` discounts."""
    width = min(k, grades.shape[1])
    discounts = np.array([math.log2(rank + 1) for rank in range(1, width + 1)], dtype=np.float64)
    terms: FloatArray = (np.exp2(grades[:, :width].astype(np.float64)) - 1.0) / discounts
    return terms


def _exact_sums(terms: FloatArray) -> FloatArray:
    """Row sums accumulated error-free: each partial sum is a double-double (TwoSum, Knuth), so the final rounding
    equals that of the exact sum, as :func:`math.fsum` gives it (the terms are non-negative: no cancellation)."""
    high = np.zeros(terms.shape[0], dtype=np.float64)
    low = np.zeros(terms.shape[0], dtype=np.float64)
    for column in range(terms.shape[1]):
        term = terms[:, column]
        total = high + term
        back = total - high
        low += (high - (total - back)) + (term - back)
        high = total
    sums: FloatArray = high + low
    return sums


def _sequential_sums(terms: FloatArray) -> FloatArray:
    """Row sums added one term at a time in rank order, in double precision, as trec_eval adds them."""
    sums = np.zeros(terms.shape[0], dtype=np.float64)
    for column in range(terms.shape[1]):
        sums += terms[:, column]
    return sums


Summation = Literal["exact", "sequential"]
SUMMATIONS: dict[str, Callable[[FloatArray], FloatArray]] = {"exact": _exact_sums, "sequential": _sequential_sums}
"""How DCG terms are added: ``exact`` (the default, equal to the reference's ``math.fsum``) or ``sequential`` (one
by one, trec_eval's arithmetic, used under the ``trec_eval`` tie policy so that nDCG equals pytrec_eval's exactly)."""


def _discounted_sums(grades: IntMatrix, k: int, summation: str = "exact") -> FloatArray:
    """Row sums of the DCG terms of the first k ranks; an unknown summation raises ``ValueError``."""
    add = SUMMATIONS.get(summation)
    if add is None:
        raise ValueError(f"unknown summation {summation!r}; valid: {', '.join(SUMMATIONS)}")
    return add(_terms(grades, k))


def ndcg(ranked: RankedQueries, k: int, summation: str = "exact") -> FloatArray:
    """nDCG@k (exponential gain) of every query, its sums added as ``summation`` says (see :data:`SUMMATIONS`)."""
    values: FloatArray = _discounted_sums(ranked.grades, k, summation) / _discounted_sums(ranked.ideal, k, summation)
    return values


def _require_spans(ranked: RankedQueries) -> None:
    if np.any(ranked.total_span_chars == 0):
        raise ValueError("gold spans cover no characters: context metrics need at least one non-empty span")


def context_precision(ranked: RankedQueries) -> FloatArray:
    """Character-level context precision of every query (0 when the context has no characters)."""
    _require_spans(ranked)
    found = ranked.span_chars.sum(axis=1)
    returned = ranked.lengths.sum(axis=1)
    values: FloatArray = np.divide(found, returned, out=np.zeros(len(found)), where=returned > 0)
    return values


def context_recall(ranked: RankedQueries) -> FloatArray:
    """Character-level context recall of every query."""
    _require_spans(ranked)
    values: FloatArray = ranked.span_chars.sum(axis=1) / ranked.total_span_chars
    return values


def _value(measure: Measure, ranked: RankedQueries, summation: str) -> FloatArray:
    k = measure.cutoff or 0
    kernels = {
        "recall": lambda: recall(ranked, k),
        "mrr": lambda: reciprocal_rank(ranked, k),
        "ndcg": lambda: ndcg(ranked, k, summation),
        "context_precision": lambda: context_precision(ranked),
        "context_recall": lambda: context_recall(ranked),
    }
    return kernels[measure.name]()


def standard_values(
    rankings: Sequence[Sequence[str]],
    judged: Sequence[Judged],
    chunk_lengths: Mapping[str, int] | None,
    context_k: int,
    measures: Sequence[Measure] = STANDARD_MEASURES,
    summation: str = "exact",
) -> dict[Measure, FloatArray]:
    """Every measure's value for every query, in the order of ``rankings``.

    Context measures need ``chunk_lengths`` and ``context_k`` (the returned context is the first ``context_k``
    deduplicated results); leave them out of ``measures`` for judgments without spans.
    """
    depth = max([m.cutoff or 1 for m in measures] + [context_k, 1])
    needs_context = any(m.name.startswith("context_") for m in measures)
    ranked = rank_queries(rankings, judged, chunk_lengths, depth, context_k if needs_context else 0)
    return {measure: _value(measure, ranked, summation) for measure in measures}
