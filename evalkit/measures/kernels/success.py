"""Success: whether a relevant document is among the first k results (trec_eval's ``success_k``)."""

from __future__ import annotations

import numpy as np

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import hits, relevant_grades, top
from evalkit.measures.ranked import Ranked

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """1 when a document of grade >= 1 is in ``dedupe(ranking)[:k]``, else 0 (trec_eval's ``success_k``).

    Unjudged documents (absent from the judgments) count as not relevant: they stay in the ranking and add nothing
    (no condensed list).

    Edge cases: no relevant document -> ``ValueError`` (evalkit's names; trec_eval's score 0); empty ranking -> 0;
    duplicates removed before the cutoff.
    """
    relevant = relevant_grades(case)
    return 1.0 if any(c in relevant for c in top(case, m.cutoff)) else 0.0


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once."""
    values: FloatArray = (ranked.count(hits(ranked, m.cutoff)) > 0).astype(np.float64)
    return values
