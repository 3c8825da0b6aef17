"""Precision: the share of the first k results that are relevant, over k (trec_eval's ``P_k``)."""

from __future__ import annotations

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import hits, relevant_grades, top
from evalkit.measures.ranked import Ranked

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``|R in dedupe(ranking)[:k]| / k`` with ``R`` the documents of grade >= 1: k, not the number returned, as
    trec_eval's ``P_k``.

    Unjudged documents (absent from the judgments) count as not relevant: they stay in the ranking and add nothing
    (no condensed list).

    Edge cases: no relevant document -> ``ValueError`` (evalkit's names; trec_eval's score 0); empty ranking -> 0;
    duplicates removed before the cutoff.
    """
    relevant = relevant_grades(case)
    return sum(1 for c in top(case, m.cutoff) if c in relevant) / (m.cutoff or 1)


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once."""
    values: FloatArray = ranked.count(hits(ranked, m.cutoff)) / float(m.cutoff or 1)
    return values
