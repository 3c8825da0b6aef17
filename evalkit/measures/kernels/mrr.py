"""Reciprocal rank: one over the rank of the first relevant result within k; its mean is MRR (trec_eval's
``recip_rank``, which has no cutoff)."""

from __future__ import annotations

import numpy as np

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import hits, relevant_grades, top
from evalkit.measures.ranked import Ranked

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``1 / r`` for the rank ``r`` (from 1) of the first document of grade >= 1 in ``dedupe(ranking)[:k]``, 0 when
    there is none (``mrr``: the whole ranking).

    Reference: Voorhees, "The TREC-8 Question Answering Track Report" (1999); trec_eval's ``recip_rank`` on a run
    truncated to k.

    Unjudged documents (absent from the judgments) count as not relevant: they stay in the ranking and add nothing
    (no condensed list).

    Edge cases: no relevant document -> ``ValueError`` (evalkit's names; trec_eval's score 0); empty ranking -> 0;
    duplicates removed before the cutoff.
    """
    relevant = relevant_grades(case)
    return next((1.0 / rank for rank, c in enumerate(top(case, m.cutoff), 1) if c in relevant), 0.0)


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once."""
    found = hits(ranked, m.cutoff)
    rows, first = np.unique(ranked.row[found], return_index=True)
    values = np.zeros(ranked.n, dtype=np.float64)
    values[rows] = 1.0 / ranked.rank[found][first]
    return values
