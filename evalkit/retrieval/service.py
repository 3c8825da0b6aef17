"""The knowledge service: lexical, vector, hybrid and hybrid+rerank retrieval over a knowledge database.

Modes are small functions chosen from :data:`MODES`. Every mode applies its score threshold, so a query without a
good match returns nothing, and every ranking is ordered by score descending, then chunk ID.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Literal

from evalkit.data.language import detect_language
from evalkit.data.schema import Language, Matrix
from evalkit.data.settings import RetrievalSettings, VectorIndexRecord
from evalkit.retrieval.database import Hit, KnowledgeStore
from evalkit.retrieval.embeddings import AnalyzedTextProvider, ConceptProvider, EmbeddingProvider, fingerprint
from evalkit.retrieval.fusion import Contribution, fusion_method
from evalkit.retrieval.reranker import CONCEPT_PREFIX, Candidate, HeuristicReranker
from evalkit.retrieval.text import query_terms, stopword_tokens
from evalkit.retrieval.vector_index import IndexPlan, planned_index, recall_sample

Mode = Literal["lexical", "vector", "hybrid", "hybrid-rerank"]

EMBED_BLOCK_ROWS = 16_384
"""Chunks embedded and stored together while the corpus is indexed, so no step holds every row of a large corpus
(a smaller corpus is one block: one call to the provider, as the embedding cache expects)."""


class KnowledgeService:
    """Retrieval over a :class:`KnowledgeStore` with an optional embedding provider and the heuristic reranker."""

    def __init__(
        self,
        database: KnowledgeStore,
        settings: RetrievalSettings,
        provider: EmbeddingProvider | None = None,
    ) -> None:
        self.database = database
        self.settings = settings
        self.provider = provider
        self._provider_key = fingerprint(provider) if provider is not None else None
        self._reranker = HeuristicReranker(settings.reranker)
        self._languages = {c.chunk_id: c.language for c in database.chunks()}
        self._concepts: dict[str, frozenset[str]] | None = None
        self._concept_frequencies: Counter[str] = Counter()
        self._last_query: tuple[str, Matrix] | None = None
        self._indexed = False
        self._indexing = threading.Lock()  # the first vector searches of several threads embed the corpus once
        self._plan: IndexPlan | None = None

    def index_embeddings(self) -> None:
        """Embed every chunk with the provider and store the rows (once per provider fingerprint).

        Concept units of the chunks (for the reranker) are derived here too, so no query pays for indexing.
        Vector modes call this on first use, so a forgotten call costs time on the first query, not results.
        The vector index is planned first (``vector_index``, ``vector_memory_mib``): a choice the provider cannot
        serve, or a corpus too large for the budget, is refused before anything is embedded. Chunks are embedded
        and stored :data:`EMBED_BLOCK_ROWS` at a time.
        """
        provider, key = self._require_provider()
        ids, texts = self.database.chunk_texts()
        plan = self.vector_plan(chunks=texts)
        self._chunk_concepts()
        self.database.use_vector_index(key, plan)
        if not self.database.has_embeddings(key):
            starts = range(0, len(ids), EMBED_BLOCK_ROWS)
            parts = (
                (ids[start : start + EMBED_BLOCK_ROWS], texts[start : start + EMBED_BLOCK_ROWS]) for start in starts
            )
            self.database.store_embedding_blocks(key, (self._embedded(provider, *part) for part in parts))
        self._indexed = True

    def _embedded(self, provider: EmbeddingProvider, ids: list[str], texts: list[str]) -> tuple[list[str], Matrix]:
        """Stored chunks' IDs and rows; a provider that embeds analyzed text gets the tokens the store kept."""
        if isinstance(provider, AnalyzedTextProvider):
            return ids, provider.embed_analyzed(texts, self.database.content_tokens(ids))
        return ids, provider.embed(texts)

    def vector_plan(self, chunks: Sequence[str] | None = None) -> IndexPlan:
        """The vector index of this provider over the stored corpus (planned and checked once)."""
        if self._plan is None:
            provider, _ = self._require_provider()
            texts = chunks if chunks is not None else [c.text for c in self.database.chunks()]
            self._plan = planned_index(self.settings, texts, provider)
        return self._plan

    def vector_index_record(self, queries: Sequence[str], seed: int = 0) -> VectorIndexRecord:
        """The index this provider's searches use and, for an approximate one, its recall@10 against exact search
        on a seeded sample of ``queries`` (:func:`~evalkit.retrieval.vector_index.recall_sample`)."""
        provider, key = self._require_index()
        plan = self.vector_plan()
        record = VectorIndexRecord(
            index=plan.kind, chunks=len(self._languages), deterministic=plan.deterministic, chosen_by=plan.reason
        )
        if plan.kind == "exact":
            return record
        sample = [queries[i] for i in recall_sample(len(queries), seed)]
        recall = self.database.index_recall(key, provider.embed(sample)) if sample else 1.0
        return record.model_copy(update={"recall_at_10": round(recall, 4), "sample_queries": len(sample)})

    def search(self, text: str, mode: Mode, language: Language | None = None) -> list[Hit]:
        """The top ``top_k`` hits for a query in a mode; the query language is detected when not given
        (:func:`evalkit.data.language.detect_language`)."""
        try:
            run = MODES[mode]
        except KeyError:
            raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(sorted(MODES))}") from None
        return run(self, text, language or detect_language(text))[: self.settings.top_k]

    def _require_provider(self) -> tuple[EmbeddingProvider, str]:
        if self.provider is None or self._provider_key is None:
            raise ValueError("this mode needs an embedding provider; the service was created without one")
        return self.provider, self._provider_key

    def _require_index(self) -> tuple[EmbeddingProvider, str]:
        """The provider and its key, after making sure the corpus is embedded under that key."""
        if not self._indexed:
            with self._indexing:
                if not self._indexed:
                    self.index_embeddings()
        return self._require_provider()

    def _lexical(self, text: str, language: Language) -> list[Hit]:
        del language
        hits = self.database.lexical_search(query_terms(text), self.settings.candidate_k)
        return [h for h in hits if h.score >= self.settings.lexical_min_score]

    def _vector(self, text: str, language: Language) -> list[Hit]:
        del language
        _, key = self._require_index()
        query = self._query_vector(text)
        hits = self.database.vector_search(key, query, self.settings.candidate_k)
        return [h for h in hits if h.score >= self.settings.vector_min_similarity]

    def _lexical_weight(self, chunk_id: str, language: Language) -> float:
        weight = self.settings.lexical_weight
        if self._languages[chunk_id] != language:
            weight *= self.settings.cross_language_lexical_weight
        return weight

    def contributions(self, text: str, language: Language) -> list[Contribution]:
        """What hybrid retrieval fuses for a query: the lexical and the vector candidates with their weights.

        Calibration fuses these under several declared methods and weights without searching again.
        """
        lexical = self._lexical(text, language)
        vector = self._vector(text, language)
        return [
            Contribution(lexical, [self._lexical_weight(h.chunk_id, language) for h in lexical]),
            Contribution(vector, [self.settings.vector_weight] * len(vector)),
        ]

    def _hybrid(self, text: str, language: Language) -> list[Hit]:
        return fusion_method(self.settings.fusion)(self.contributions(text, language), self.settings.rrf_k)

    def _query_vector(self, text: str) -> Matrix:
        """The query's embedding, kept for the last query so hybrid-rerank embeds it once, not twice."""
        if self._last_query is None or self._last_query[0] != text:
            provider, _ = self._require_provider()
            self._last_query = (text, provider.embed([text])[0])
        return self._last_query[1]

    def _chunk_concepts(self) -> dict[str, frozenset[str]]:
        """Concept units of every chunk (empty without a concept-naming provider), computed once."""
        if self._concepts is None:
            provider = self.provider
            if isinstance(provider, ConceptProvider):
                self._concepts = {
                    c.chunk_id: frozenset(CONCEPT_PREFIX + g for g in provider.concepts(c.text))
                    for c in self.database.chunks()
                }
            else:
                self._concepts = dict.fromkeys(self._languages, frozenset())
            self._concept_frequencies = Counter(c for units in self._concepts.values() for c in units)
        return self._concepts

    def _unit_frequencies(self, terms: Sequence[str], concepts: frozenset[str]) -> dict[str, int]:
        self._chunk_concepts()
        frequencies = self.database.document_frequencies(terms)
        frequencies.update({concept: self._concept_frequencies[concept] for concept in concepts})
        return frequencies

    def _hybrid_rerank(self, text: str, language: Language) -> list[Hit]:
        provider, key = self._require_index()
        candidates = [h.chunk_id for h in self._hybrid(text, language)[: self.settings.candidate_k]]
        if not candidates:
            return []
        terms = query_terms(text)
        concepts = (
            frozenset(CONCEPT_PREFIX + g for g in provider.concepts(text))
            if isinstance(provider, ConceptProvider)
            else frozenset()
        )
        units = (*terms, *sorted(concepts))
        similarity = self.database.vectors(key, candidates) @ self._query_vector(text)
        tokens = self.database.chunk_tokens(candidates)
        chunk_concepts = self._chunk_concepts()
        stop = stopword_tokens()
        return self._reranker.rerank(
            units=units,
            terms=terms,
            candidates={
                c: Candidate(
                    same_language=self._languages[c] == language,
                    tokens=tuple(t for t in tokens[c] if t not in stop),
                    units=frozenset(tokens[c]) | chunk_concepts[c],
                    similarity=float(sim),
                )
                for c, sim in zip(candidates, similarity, strict=True)
            },
            document_frequencies=self._unit_frequencies(terms, concepts),
            chunk_count=self.database.chunk_count(),
        )


MODES: dict[str, Callable[[KnowledgeService, str, Language], list[Hit]]] = {
    "lexical": KnowledgeService._lexical,
    "vector": KnowledgeService._vector,
    "hybrid": KnowledgeService._hybrid,
    "hybrid-rerank": KnowledgeService._hybrid_rerank,
}
