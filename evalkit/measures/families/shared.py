"""What several families read: a query's first k results and its relevant documents (reference functions), and the
same over a :class:`~evalkit.measures.ranked.Ranked` (kernels).

A document is relevant when its grade is at least 1; grades of 0 or below are judged, not relevant. Rankings are
deduplicated before any cutoff (first occurrence kept).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from evalkit.measures.declaration import QueryCase
from evalkit.measures.ranked import Ranked, dedupe_ranking

__all__ = ["context_inputs", "hits", "ratio", "relevant_grades", "top", "within"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def top(case: QueryCase, k: int | None) -> tuple[str, ...]:
    """The query's deduplicated ranking, cut at ``k`` (None: the whole ranking)."""
    ranking = dedupe_ranking(case.ranking)
    return ranking if k is None else ranking[:k]


def relevant_grades(case: QueryCase) -> dict[str, int]:
    """The judged-relevant documents (grade >= 1) and their grades; ``ValueError`` when there are none (a ranking
    measure under evalkit's names is defined only on answerable queries)."""
    positive = {c: g for c, g in case.grades.items() if g >= 1}
    if not positive:
        raise ValueError(
            "relevant has no chunk with grade >= 1: ranking measures are defined only on answerable queries"
        )
    return positive


def context_inputs(case: QueryCase) -> tuple[Mapping[str, int], Mapping[str, Sequence[tuple[int, int]]]]:
    """The chunk lengths and gold spans a context measure reads (``ValueError`` when the case has none)."""
    if case.chunk_lengths is None or case.spans is None:
        raise ValueError("context measures need chunk lengths and gold spans")
    return case.chunk_lengths, case.spans


def within(ranked: Ranked, k: int | None) -> BoolArray:
    """The positions in the first ``k`` of their query (None: every position)."""
    return np.ones(len(ranked.rank), dtype=bool) if k is None else ranked.rank <= k


def hits(ranked: Ranked, k: int | None) -> BoolArray:
    """The positions of relevant documents in the first ``k``."""
    found: BoolArray = (ranked.grade >= 1) & within(ranked, k)
    return found


def ratio(numerator: npt.NDArray[np.float64] | npt.NDArray[np.int64], denominator: npt.NDArray[np.int64]) -> FloatArray:
    """Per query ``numerator / denominator``, 0 where the denominator is 0."""
    values: FloatArray = np.divide(
        numerator.astype(np.float64),
        denominator,
        out=np.zeros(len(denominator), dtype=np.float64),
        where=denominator > 0,
    )
    return values
