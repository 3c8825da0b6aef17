"""Context recall: the share of a query's gold answer-span characters that the returned context holds."""

from __future__ import annotations

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import context_inputs, ratio
from evalkit.measures.ranked import Ranked
from evalkit.measures.spans import context_overlap, span_columns

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``found / total`` (:func:`~evalkit.measures.spans.context_overlap`): gold-span characters in the returned
    context over all gold-span characters of the query. The ranking given is the returned context (the scoring core
    passes the first ``CONTEXT_K`` deduplicated results).

    Reference: the token-wise recall of Chroma's "Evaluating Chunking Strategies for Retrieval" (2024), here over
    characters.

    Unjudged documents (absent from the judgments) count as not relevant: they stay in the ranking and add nothing
    (no condensed list). (A chunk without gold spans adds nothing.)

    Edge cases: as :func:`~evalkit.measures.spans.context_overlap` (no gold character -> ``ValueError``); no
    returned chunk -> 0.
    """
    found, _, total = context_overlap(case.ranking, *context_inputs(case))
    return found / total


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once."""
    found, _, total = span_columns(ranked)
    return ratio(found, total)
