"""The retrieval settings' schema: every knob of the built-in retrieval path, as presets, settings files and reports
hold it.

The knowledge service (:mod:`evalkit.retrieval.service`), the reranker and the fusion methods run with these
settings; the report records them (``retrieval_settings``) and a calibrated run records the fusion it chose, so the
schema lives with the other inputs, below the retrieval code and the report alike.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from evalkit.data.schema import NonNegativeFloat, PositiveInt, StrictModel, UnitFloat, absent

__all__ = [
    "FusionName",
    "HnswDtype",
    "HnswSettings",
    "RerankerSettings",
    "RetrievalSettings",
    "VectorIndexName",
    "VectorIndexRecord",
]

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


VectorIndexName = Literal["auto", "exact", "sparse", "hnsw"]
"""How vector search finds its candidates (:mod:`evalkit.retrieval.vector_index`): ``exact`` reads every float32
row (the reference), ``sparse`` is exact over the nonzero entries of sparse rows, ``hnsw`` an approximate graph
(usearch, extra ``ann``), ``auto`` chooses by corpus size and provider."""


GRAPH_ROWS = 100_000
"""Default rows per hnsw graph (:class:`HnswSettings`)."""
MAX_CANDIDATES = 100_000
"""The most hits, candidates or graph candidate lists a setting may ask for per query: beyond it a query's buffers
alone run to gigabytes, and a larger value is refused naming the setting instead of failing for want of memory."""
MAX_BUILD_THREADS = 256
"""The most threads an hnsw build may ask for."""
Candidates = Annotated[int, Field(ge=1, le=MAX_CANDIDATES)]
RESCORED = 100
"""Default candidates per graph and query rescored with the float32 rows (:class:`HnswSettings`)."""


def _written_when_set(default: object, description: str) -> Any:
    """A field written only when it differs from its default, so settings that leave it alone keep the bytes (and
    the evaluation definition hash) they had before the field existed."""
    return Field(default=default, exclude_if=lambda value: value == default, description=description)


HnswDtype = Literal["f32", "f16", "i8"]
"""How a graph stores its rows (usearch's ``dtype``); the candidates are rescored with the float32 rows anyway."""


class HnswSettings(StrictModel):
    """The approximate graph index's parameters (usearch's names, and evalkit's own for how graphs are cut and
    their candidates rescored).

    ``expansion_search`` left to the corpus and the last three fields are written only when set, so settings that
    leave the graph at its defaults keep the bytes (and the evaluation definition hash) they had before.
    """

    connectivity: Annotated[int, Field(ge=2, le=256)] = Field(default=32, description="graph edges per node")
    expansion_add: Candidates = Field(default=128, description="candidate list while a row is added")
    expansion_search: Candidates | None = Field(
        default=None,
        exclude_if=absent,
        description="candidate list while a query searches each graph; None: by the number of graphs (512 up to "
        "five, then 2,560 shared among them, at least 256)",
    )
    build_threads: Annotated[int, Field(ge=1, le=MAX_BUILD_THREADS)] = Field(
        default=1, description="threads that add rows; more than one builds faster but not deterministically"
    )
    graph_rows: PositiveInt = _written_when_set(
        GRAPH_ROWS,
        "rows per graph: a larger corpus is cut into graphs of at most this many consecutive rows, each searched and "
        "their candidates merged",
    )
    dtype: HnswDtype = _written_when_set(
        "i8", "how a graph stores its rows: i8 (a quarter of float32's bytes, the fastest to compare), f16 or f32"
    )
    rescored: Candidates = _written_when_set(
        RESCORED,
        "candidates each graph hands on per query, rescored with the float32 rows (at least the hits asked for)",
    )


def _default_hnsw(value: object) -> bool:
    return value == HnswSettings()


class RetrievalSettings(StrictModel):
    """Every knob of the retrieval path; all of it is hashed into the evaluation definition."""

    top_k: Candidates = Field(default=10, description="results returned per query")
    candidate_k: Candidates = Field(default=30, description="candidates per retriever before fusion/rerank")
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
    # The vector index fields are written only when set, so settings that leave them at their defaults keep the
    # bytes (and the evaluation definition hash) they had before the fields existed.
    vector_index: VectorIndexName = _written_when_set(
        "auto",
        "vector search: auto (exact below 200,000 chunks; above it sparse for sparse-row providers, "
        "else hnsw when usearch is installed), exact, sparse or hnsw",
    )
    hnsw: HnswSettings = Field(
        default_factory=HnswSettings, exclude_if=_default_hnsw, description="the hnsw index's parameters"
    )
    vector_memory_mib: PositiveInt | None = Field(
        default=None,
        exclude_if=absent,
        description="memory budget of each provider's vector index, in MiB; a corpus whose index would not fit is "
        "refused before indexing (None: no budget)",
    )


class VectorIndexRecord(StrictModel):
    """The vector index one provider's searches used, and how closely it agrees with exact search."""

    index: Literal["exact", "sparse", "hnsw"] = Field(description="the index that answered (auto resolved)")
    chunks: Annotated[int, Field(ge=0)] = Field(description="rows indexed")
    deterministic: bool = Field(description="whether the same chunks and settings build the same index")
    recall_at_10: UnitFloat | None = Field(
        default=None,
        exclude_if=absent,
        description="mean recall@10 of the index against exact float32 search on a seeded sample of the queries; "
        "absent for exact search",
    )
    sample_queries: Annotated[int, Field(ge=0)] = Field(default=0, description="queries in the recall sample")
    chosen_by: Literal["small-corpus", "sparse-rows", "dense-rows", "usearch-missing", "set"] = Field(
        description="why this index: the setting named it (set), or what auto saw (corpus size, the provider's rows, "
        "usearch missing)"
    )
