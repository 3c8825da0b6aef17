"""Judged: the share of the first k results that the judgments speak for, as ir_measures' ``Judged@k``.

Shown beside a score, it says how much of that score rests on judged documents: the plain measures count an
unjudged document as not relevant, so a low judged share means the score may be an underestimate.
"""

from __future__ import annotations

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import ratio, relevant_grades, top, within
from evalkit.measures.ranked import Ranked

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``|judged documents in dedupe(ranking)[:k]| / min(k, |dedupe(ranking)|)``: of the results in the first k, the
    share judged with a grade of 0 or more. A negative grade is read as trec_eval reads it, "pooled, not judged"
    (``-1``), so such a document is unjudged here, as in the condensed lists, ``infAP``, ``bpref`` and
    ``evalkit pool``; ir_measures' ``Judged@k`` counts it as judged, and is otherwise the same. The denominator is
    the number of results in the first k, not k, as ir_measures' (its ``judged`` provider): a ranking of 3 judged
    results has ``judged@10`` 1.

    Unjudged documents (absent from the judgments) are what it measures: they stay in the ranking and are the
    results it does not count.

    Edge cases: no relevant document -> ``ValueError`` (defined on answerable queries, as evalkit's other names);
    empty ranking -> 0 (ir_measures has no value there); duplicates removed before the cutoff.
    """
    relevant_grades(case)
    ranking = top(case, m.cutoff)
    return sum(1 for c in ranking if case.grades.get(c, -1) >= 0) / len(ranking) if ranking else 0.0


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once."""
    first_k = within(ranked, m.cutoff)
    return ratio(ranked.count(ranked.judged & (ranked.grade >= 0) & first_k), ranked.count(first_k))
