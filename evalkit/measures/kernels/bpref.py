"""Binary preference: how many judged non-relevant documents each judged relevant document is ranked above, read
from judged documents only (Buckley and Voorhees 2004; trec_eval's ``bpref``, its corrected version 8.0 form)."""

from __future__ import annotations

import math

import numpy as np

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import ratio, relevant_grades, running_count
from evalkit.measures.ranked import Ranked, dedupe_ranking

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``(1 / |R|) * sum over relevant d in dedupe(ranking) of (1 - min(n_d, |R|) / min(|N|, |R|))``, ``R`` the
    documents of grade >= 1, ``N`` those of grade 0 (judged, not relevant) and ``n_d`` the documents of ``N`` ranked
    above ``d``; a term is 1 when ``n_d`` is 0. A relevant document not returned adds 0.

    Reference: Buckley and Voorhees, "Retrieval Evaluation with Incomplete Information", SIGIR 2004; trec_eval's
    ``bpref`` (``m_bpref.c``, the version 8.0 form, whose denominator is ``min(|N|, |R|)`` whatever was returned).

    Unjudged documents (absent from the judgments, or with a negative grade: trec_eval's pooled, not judged) are
    skipped: only the order of judged relevant and judged non-relevant documents counts.

    Edge cases: no relevant document -> ``ValueError`` under evalkit's names; ``bpref`` is trec_eval's name, which
    scores such a query 0 (as trec_eval); empty ranking -> 0; duplicates removed (first occurrence kept); no cutoff.
    Terms are summed exactly (``math.fsum``).
    """
    relevant = relevant_grades(case)
    nonrelevant = sum(1 for grade in case.grades.values() if grade == 0)
    size, above, terms = len(relevant), 0, []
    for c in dedupe_ranking(case.ranking):
        grade = case.grades.get(c, -1)
        if grade >= 1:
            terms.append(1.0 - min(above, size) / min(nonrelevant, size) if above else 1.0)
        elif grade == 0:
            above += 1
    return math.fsum(terms) / size


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once, terms added as the rankings' summation says."""
    found = ranked.grade >= 1
    above = running_count(ranked, ranked.judged & (ranked.grade == 0))[found]
    relevant = ranked.relevant()
    size = relevant[ranked.row[found]]
    cap = np.minimum(ranked.judged_nonrelevant()[ranked.row[found]], size)
    share = np.divide(np.minimum(above, size), cap, out=np.zeros(len(above)), where=above > 0)
    return ratio(ranked.sums(found, 1.0 - share), relevant)
