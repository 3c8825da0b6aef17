"""Context precision: the share of the returned context's characters that lie in gold answer spans."""

from __future__ import annotations

import numpy as np

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels.shared import context_inputs
from evalkit.measures.ranked import Ranked
from evalkit.measures.spans import context_overlap, span_columns

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``found / returned_chars`` (:func:`~evalkit.measures.spans.context_overlap`): gold-span characters in the
    returned context over all its characters. The ranking given is the returned context (the scoring core passes the
    first ``CONTEXT_K`` deduplicated results).

    Reference: the token-wise precision of Chroma's "Evaluating Chunking Strategies for Retrieval" (2024), here over
    characters, which suits mixed zh/en text without a tokenizer.

    Unjudged documents (absent from the judgments) count as not relevant: they stay in the ranking and add nothing
    (no condensed list). (A chunk without gold spans adds its characters to the denominator only.)

    Edge cases: as :func:`~evalkit.measures.spans.context_overlap`; no returned chunk, or returned chunks of zero
    total length -> 0.
    """
    found, returned_chars, _ = context_overlap(case.ranking, *context_inputs(case))
    return found / returned_chars if returned_chars else 0.0


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once."""
    found, returned, _ = span_columns(ranked)
    values: FloatArray = np.divide(found, returned, out=np.zeros(ranked.n), where=returned > 0)
    return values
