"""Normalised discounted cumulative gain: the gain of the first k results, discounted by rank, over the best the
judgments allow. evalkit's ``ndcg@k`` gains 2^grade - 1; trec_eval's ``ndcg_cut_k`` and ``ndcg`` gain the grade."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

import numpy as np
import numpy.typing as npt

from evalkit.measures.declaration import FloatArray, Gain, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import hits, relevant_grades, top
from evalkit.measures.ranked import Ranked

__all__ = ["GAINS", "kernel", "reference"]


def _exponential(grade: int) -> float:
    return 2.0**grade - 1.0


def _linear(grade: int) -> float:
    return float(grade)


GAINS: Final[dict[Gain, Callable[[int], float]]] = {"exponential": _exponential, "linear": _linear}
"""Gain functions by name: ``exponential`` is ``2**grade - 1``, ``linear`` is ``grade``."""


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``DCG@k / IDCG@k``. ``DCG@k = sum over i <= k of g(grade_i) / log2(i + 1)`` over ``dedupe(ranking)[:k]``;
    ``IDCG@k`` is the DCG of the ideal ranking: every grade >= 1 of the judgments sorted descending, cut at k.

    Gains (:data:`GAINS`): ``exponential`` ``g = 2**grade - 1`` (Burges et al., "Learning to Rank using Gradient
    Descent", ICML 2005; evalkit's ``ndcg@k``, as ranx's ``ndcg_burges``), ``linear`` ``g = grade`` (Järvelin and
    Kekäläinen, "Cumulated Gain-based Evaluation of IR Techniques", TOIS 2002; trec_eval's ``ndcg_cut_k``).

    Unjudged documents (absent from the judgments) count as not relevant: they stay in the ranking and add nothing
    (no condensed list).

    Edge cases: no relevant document -> ``ValueError`` (evalkit's names; trec_eval's score 0); empty ranking -> 0;
    duplicates removed before the cutoff; a grade of 0 or below gives no gain (never a negative one). Terms are
    summed exactly (``math.fsum``).
    """
    relevant = relevant_grades(case)
    gain = GAINS[m.gain or "exponential"]
    ranking = top(case, m.cutoff)
    dcg = math.fsum(gain(relevant[c]) / math.log2(r + 1) for r, c in enumerate(ranking, 1) if c in relevant)
    ideal = sorted(relevant.values(), reverse=True)[: m.cutoff]
    return dcg / math.fsum(gain(g) / math.log2(r + 1) for r, g in enumerate(ideal, 1))


def _discounts(ranks: npt.NDArray[np.int64]) -> FloatArray:
    """``log2(rank + 1)`` with ``math.log2`` (the reference's and trec_eval's libm log2, not numpy's)."""
    deepest = int(ranks.max()) if len(ranks) else 0
    table = np.array([math.log2(rank + 1) for rank in range(1, deepest + 1)], dtype=np.float64)
    values: FloatArray = table[ranks - 1] if len(ranks) else np.zeros(0)
    return values


def _gains(grades: npt.NDArray[np.int64], gain: Gain | None) -> FloatArray:
    values: FloatArray = grades.astype(np.float64) if gain == "linear" else np.exp2(grades.astype(np.float64)) - 1.0
    return values


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once, terms added as the rankings' summation says."""
    found = hits(ranked, m.cutoff)
    dcg = ranked.sums(found, _gains(ranked.grade[found], m.gain) / _discounts(ranked.rank[found]))
    ideal = ranked.ideal_rank <= (m.cutoff or np.iinfo(np.int64).max)
    idcg = ranked.ideal_sums(ideal, _gains(ranked.ideal_grade[ideal], m.gain) / _discounts(ranked.ideal_rank[ideal]))
    values: FloatArray = np.divide(dcg, idcg, out=np.zeros(ranked.n), where=idcg > 0)
    return values
