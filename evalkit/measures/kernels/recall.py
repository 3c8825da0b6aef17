"""Recall: the share of a query's relevant documents found in its first k results (trec_eval's ``recall_k``)."""

from __future__ import annotations

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import hits, ratio, relevant_grades, top
from evalkit.measures.ranked import Ranked

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``|R in dedupe(ranking)[:k]| / |R|`` with ``R`` the documents of grade >= 1 (``recall``: the whole ranking).

    Reference: Manning, Raghavan and Schütze, *Introduction to Information Retrieval* (2008), §8.3; trec_eval
    ``recall_k``.

    Unjudged documents (absent from the judgments) count as not relevant: they stay in the ranking and add nothing
    (no condensed list).

    Edge cases: no relevant document -> ``ValueError`` (evalkit's names; trec_eval's score 0); empty ranking -> 0;
    duplicates removed before the cutoff.
    """
    relevant = relevant_grades(case)
    return sum(1 for c in top(case, m.cutoff) if c in relevant) / len(relevant)


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once."""
    return ratio(ranked.count(hits(ranked, m.cutoff)), ranked.relevant())
