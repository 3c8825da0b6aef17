"""Inferred average precision: average precision estimated when only a sample of the pool was judged (Yilmaz and
Aslam 2006; trec_eval's ``infAP``), documents with a negative grade being pooled but not judged."""

from __future__ import annotations

import math
from typing import Final

import numpy as np

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import ratio, relevant_grades, running_count
from evalkit.measures.ranked import Ranked, dedupe_ranking

__all__ = ["EPSILON", "kernel", "reference"]

EPSILON: Final = 0.00001
"""trec_eval's ``INFAP_EPSILON``: keeps the estimated precision above a relevant document defined when nothing
above it was judged."""


def _term(j: int, rel: int, nonrel: int, pooled: int) -> float:
    """The estimated precision at the relevant document at 0-based position ``j``, ``rel`` the relevant documents up
    to and including it, ``nonrel`` and ``pooled`` the judged non-relevant and pooled-unjudged ones above it."""
    if j == 0:
        return 1.0
    fj = float(j)
    return 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((rel - 1 + nonrel + pooled) / fj) * (
        (rel - 1 + EPSILON) / (rel - 1 + nonrel + 2 * EPSILON)
    )


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``(1 / |R|) * sum over relevant d in dedupe(ranking) of E[precision at d]``, ``R`` the documents of grade
    >= 1. For ``d`` at rank ``k`` (from 1), with ``p`` the documents above it that the judgments name (any grade,
    negative ones included), ``r`` the relevant and ``n`` the judged non-relevant (grade 0) ones above it:
    ``E = 1/k + ((k - 1)/k) * (p / (k - 1)) * ((r + eps) / (r + n + 2 eps))``, ``eps`` = :data:`EPSILON`, and
    ``E = 1`` at rank 1. A relevant document not returned adds 0.

    Reference: Yilmaz and Aslam, "Estimating Average Precision with Incomplete and Imperfect Judgments", CIKM 2006;
    trec_eval's ``infAP`` (``m_infap.c``), whose arithmetic this follows term by term.

    Unjudged documents absent from the judgments count as not relevant where they stand; documents with a negative
    grade (trec_eval's pooled, not judged) are taken to be relevant in the proportion of the judged documents above
    them.

    Edge cases: no relevant document -> ``ValueError`` under evalkit's name ``infap``; trec_eval's ``infAP`` scores
    such a query 0 (as trec_eval); empty ranking -> 0; duplicates removed (first occurrence kept); no cutoff. Terms
    are summed exactly (``math.fsum``).
    """
    relevant = relevant_grades(case)
    rel = nonrel = pooled = 0
    terms = []
    for j, c in enumerate(dedupe_ranking(case.ranking)):
        grade = case.grades.get(c)
        if grade is None:
            continue
        if grade < 0:
            pooled += 1
        elif grade == 0:
            nonrel += 1
        else:
            rel += 1
            terms.append(_term(j, rel, nonrel, pooled))
    return math.fsum(terms) / len(relevant)


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once, terms added as the rankings' summation says."""
    found = ranked.grade >= 1
    rel = running_count(ranked, found)[found] - 1
    nonrel = running_count(ranked, ranked.judged & (ranked.grade == 0))[found]
    pooled = running_count(ranked, ranked.judged & (ranked.grade < 0))[found]
    fj = (ranked.rank[found] - 1).astype(np.float64)
    first = fj == 0
    safe = np.where(first, 1.0, fj)  # rank 1 scores 1, below; no division by 0 on the way
    terms = 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((rel + nonrel + pooled) / safe) * (
        (rel + EPSILON) / (rel + nonrel + 2 * EPSILON)
    )
    return ratio(ranked.sums(found, np.where(first, 1.0, terms)), ranked.relevant())
