"""The retrieval settings' schema: every knob of the built-in retrieval path, as presets, settings files and reports
hold it.

The knowledge service (:mod:`evalkit.retrieval.service`), the reranker and the fusion methods run with these
settings; the report records them (``retrieval_settings``) and a calibrated run records the fusion it chose, so the
schema lives with the other inputs, below the retrieval code and the report alike.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evalkit.data.schema import NonNegativeFloat, PositiveInt, StrictModel, UnitFloat

__all__ = ["FusionName", "RerankerSettings", "RetrievalSettings"]

FusionName = Literal["rrf", "max-normalized", "margin-weighted"]
"""The closed vocabulary of fusion methods (the keys of :data:`evalkit.retrieval.fusion.FUSION_METHODS`)."""


class RerankerSettings(StrictModel):
    """Weights and threshold of the heuristic reranker."""

    coverage_weight: UnitFloat = Field(default=0.4, description="weight of IDF-weighted query-unit coverage")
    semantic_weight: UnitFloat = Field(default=0.4, description="weight of embedding cosine similarity")
    proximity_weight: UnitFloat = Field(default=0.2, description="weight of adjacent query-term pairs")
    missing_key_factor: UnitFloat = Field(
        default=0.8, description="score multiplier when the chunk lacks the query's most specific unit"
    )
    min_similarity: float = Field(
        default=0.35, ge=-1.0, le=1.0, description="candidates with a lower embedding cosine are dropped"
    )
    min_score: UnitFloat = Field(default=0.3, description="candidates scoring below this are dropped")


class RetrievalSettings(StrictModel):
    """Every knob of the retrieval path; all of it is hashed into the evaluation definition."""

    top_k: PositiveInt = Field(default=10, description="results returned per query")
    candidate_k: PositiveInt = Field(default=30, description="candidates per retriever before fusion/rerank")
    lexical_min_score: NonNegativeFloat = Field(default=0.0, description="minimum BM25 score (-bm25())")
    vector_min_similarity: float = Field(default=0.2, ge=-1.0, le=1.0, description="minimum cosine")
    fusion: FusionName = Field(default="max-normalized", description="fusion method (see fusion.py)")
    rrf_k: PositiveInt = Field(default=60, description="RRF rank constant")
    lexical_weight: NonNegativeFloat = Field(default=0.3, description="fusion weight of lexical hits")
    vector_weight: NonNegativeFloat = Field(default=0.7, description="fusion weight of vector hits")
    cross_language_lexical_weight: NonNegativeFloat = Field(
        default=0.0,
        description="multiplier on a lexical hit's weight when its language differs from the query's",
    )
    reranker: RerankerSettings = Field(default_factory=RerankerSettings, description="heuristic reranker")
