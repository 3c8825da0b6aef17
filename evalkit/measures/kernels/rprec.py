"""R-precision: precision at rank R, R the number of relevant documents (trec_eval's ``Rprec``)."""

from __future__ import annotations

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import ratio, relevant_grades, top
from evalkit.measures.ranked import Ranked

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``|R in dedupe(ranking)[:|R|]| / |R|``, ``R`` the documents of grade >= 1 (trec_eval's ``Rprec``).

    Unjudged documents (absent from the judgments) count as not relevant: they stay in the ranking and add nothing
    (no condensed list).

    Edge cases: no relevant document -> ``ValueError`` (evalkit's names; trec_eval's score 0); empty ranking -> 0;
    duplicates removed before the cutoff.
    """
    relevant = relevant_grades(case)
    return sum(1 for c in top(case, len(relevant)) if c in relevant) / len(relevant)


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once."""
    relevant = ranked.relevant()
    found = (ranked.grade >= 1) & (ranked.rank <= relevant[ranked.row])
    return ratio(ranked.count(found), relevant)
