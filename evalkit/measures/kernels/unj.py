"""Unjudged: the share of the first k results that the judgments do not speak for, the complement of ``judged@k``.

Shown beside a score, it says how much of the top k the score guesses at: the plain measures count an unjudged
document as not relevant.
"""

from __future__ import annotations

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels import judged
from evalkit.measures.ranked import Ranked

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``1 - judged@k``: ``|unjudged documents in dedupe(ranking)[:k]| / min(k, |dedupe(ranking)|)``, computed as
    ``1.0 - judged@k`` so that the two add up to exactly 1 on every query where ``judged@k`` is defined (the
    answerable ones). The denominator is the number of results in the first k, as ``judged@k``'s.

    trec_eval's counterpart, ``unj`` (``m_unjudged.c``; not in pytrec_eval), divides by k instead (missing results
    count as judged); ``unj@k`` equals trec_eval's ``unj`` at cutoff k on every query that returns at least k
    results. Both count a document with a negative grade as unjudged. evalkit does not read
    trec_eval's name, so neither is taken for the other.

    Unjudged documents (absent from the judgments) are what it measures: they stay in the ranking and are the
    results it does not count.

    Edge cases: no relevant document -> ``ValueError`` (defined on answerable queries, as ``judged@k``); empty
    ranking -> 1 (``judged@k`` gives 0 there; trec_eval's ``unj`` would give 0); duplicates removed before the
    cutoff; a document with a negative grade counts as unjudged, as ``judged@k`` and trec_eval read it.
    """
    return 1.0 - judged.reference(case, m)


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once."""
    values: FloatArray = 1.0 - judged.kernel(ranked, m)
    return values
