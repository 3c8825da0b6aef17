"""No-answer false-positive rate: on a query with no relevant document, whether the system returned anything."""

from __future__ import annotations

import numpy as np

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.ranked import Ranked

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """1 when a no-answer query (no document of grade >= 1) returned any result, else 0; its mean over the no-answer
    queries is the false-positive rate of the answer/abstain decision.

    Unjudged documents (absent from the judgments) count as results like any other: only whether anything was
    returned matters.

    Edge cases: defined on no-answer queries only (the scoring core leaves it out elsewhere); empty ranking -> 0.
    """
    return 1.0 if len(case.ranking) > 0 else 0.0


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once."""
    values: FloatArray = (ranked.returned() > 0).astype(np.float64)
    return values
