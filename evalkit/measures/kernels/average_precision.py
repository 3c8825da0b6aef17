"""Average precision: the precision at the rank of each relevant result within k, summed over every relevant
document (trec_eval's ``map`` and ``map_cut_k``)."""

from __future__ import annotations

import math

import numpy as np

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import hits, ratio, relevant_grades, top
from evalkit.measures.ranked import Ranked

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``sum over relevant d in dedupe(ranking)[:k] of (precision at d's rank) / |R|``, ``R`` the documents of grade
    >= 1: the denominator is every relevant document, retrieved or not (trec_eval's ``map``, ``map_cut_k``).

    Unjudged documents (absent from the judgments) count as not relevant: they stay in the ranking and add nothing
    (no condensed list).

    Edge cases: no relevant document -> ``ValueError`` (evalkit's names; trec_eval's score 0); empty ranking -> 0;
    duplicates removed before the cutoff. Terms are summed exactly (``math.fsum``).
    """
    relevant = relevant_grades(case)
    found, terms = 0, []
    for rank, c in enumerate(top(case, m.cutoff), 1):
        if c in relevant:
            found += 1
            terms.append(found / rank)
    return math.fsum(terms) / len(relevant)


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once, terms added as the rankings' summation says."""
    found = hits(ranked, m.cutoff)
    rows = ranked.row[found]
    starts = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=ranked.n))[:-1]))
    so_far = np.arange(len(rows), dtype=np.int64) - starts[rows] + 1
    total = ranked.sums(found, so_far / ranked.rank[found])
    return ratio(total, ranked.relevant())
