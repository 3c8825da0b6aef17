"""A local heuristic reranker: no model, no network, deterministic.

The score of a candidate chunk is a weighted sum of features in [0, 1]:

- coverage: the IDF mass of the query's units found in the chunk over the IDF mass of the query's units that
  occur anywhere in the corpus. Units are the query's content terms plus, when the provider names concepts (the
  alias provider does), the concepts it mentions, so an English query can cover a Chinese chunk through shared
  concepts. IDF is BM25's ln(1 + (N - df + 0.5) / (df + 0.5)). A unit no chunk contains cannot tell chunks
  apart, so it is left out of the ratio rather than lowering every candidate alike;
- semantic: the cosine similarity of query and chunk embeddings, clipped at 0;
- proximity: the fraction of adjacent query-term pairs that also stand next to each other in the chunk. Word
  order means nothing across languages, so for a chunk in another language this feature is left out and the
  other two weights are rescaled to sum as before. When the provider names no concepts (a real embedding model),
  coverage is left out across languages too (only shared numbers or names could match, and they are not
  evidence: on XQuAD they pulled cross-lingual hits down), and the cosine alone scores the chunk.

The score is multiplied by ``missing_key_factor`` when the chunk lacks the query's most specific unit (the one
with the lowest non-zero document frequency; across languages, the most specific concept): a chunk about the
right topic that misses the one detail asked about is a near miss.

Candidates whose embedding similarity is under ``min_similarity``, or whose score is under ``min_score``, are
dropped: that is how a query without a good match returns nothing. Ties are broken by chunk ID.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from evalkit.data.settings import RerankerSettings
from evalkit.retrieval.database import Hit, order_hits

CONCEPT_PREFIX = "§"
"""Marks a concept unit (tokens are word characters only, so they can never collide)."""


def idf(document_frequency: int, chunk_count: int) -> float:
    """BM25's non-negative IDF: ln(1 + (N - df + 0.5) / (df + 0.5))."""
    return math.log(1.0 + (chunk_count - document_frequency + 0.5) / (document_frequency + 0.5))


def coverage(units: Sequence[str], chunk_units: frozenset[str], weights: Mapping[str, float]) -> float:
    """IDF-weighted fraction of the query's units present in the chunk (0 when the query has no units)."""
    total = sum(weights[u] for u in units)
    if total <= 0:
        return 0.0
    return sum(weights[u] for u in units if u in chunk_units) / total


def proximity(terms: Sequence[str], chunk_tokens: Sequence[str]) -> float:
    """Fraction of adjacent query-term pairs that are adjacent, in order, in the chunk (0 with < 2 terms)."""
    pairs = list(pairwise(terms))
    if not pairs:
        return 0.0
    adjacent = set(pairwise(chunk_tokens))
    return sum(1 for pair in pairs if pair in adjacent) / len(pairs)


@dataclass(frozen=True)
class Candidate:
    """What the reranker knows of one candidate chunk."""

    same_language: bool
    tokens: Sequence[str]
    units: frozenset[str]
    similarity: float


class HeuristicReranker:
    """Scores candidates from term statistics and similarities the service hands it."""

    def __init__(self, settings: RerankerSettings) -> None:
        self.settings = settings

    def rerank(
        self,
        units: Sequence[str],
        terms: Sequence[str],
        candidates: Mapping[str, Candidate],
        document_frequencies: Mapping[str, int],
        chunk_count: int,
    ) -> list[Hit]:
        """Score every candidate and keep those at or above the threshold, best first."""
        s = self.settings
        weights = {u: idf(document_frequencies[u], chunk_count) for u in units}
        seen = sorted((document_frequencies[u], u) for u in units if document_frequencies[u] > 0)
        key_any = seen[0][1] if seen else None
        key_concept = next((u for _, u in seen if u.startswith(CONCEPT_PREFIX)), None)
        scored: list[Hit] = []
        matchable = [u for u in units if document_frequencies[u] > 0]
        concepts = [u for u in matchable if u.startswith(CONCEPT_PREFIX)]
        total = s.coverage_weight + s.semantic_weight + s.proximity_weight
        for chunk_id, candidate in candidates.items():
            if candidate.similarity < s.min_similarity:
                continue
            semantic = max(candidate.similarity, 0.0)
            if candidate.same_language:
                key = key_any
                score = (
                    s.coverage_weight * coverage(matchable, candidate.units, weights)
                    + s.semantic_weight * semantic
                    + s.proximity_weight * proximity(terms, candidate.tokens)
                )
            elif concepts:
                # Concepts can match across languages; the query's terms stay in the ratio (they rarely match in
                # another language), which keeps a cross-language chunk from looking complete on a concept alone.
                key = key_concept
                kept = s.coverage_weight + s.semantic_weight
                weighted = (
                    s.coverage_weight * coverage(matchable, candidate.units, weights) + s.semantic_weight * semantic
                )
                score = weighted * (total / kept if kept else 0.0)
            else:
                # A provider that names no concepts: only shared numbers or Latin names could match across languages,
                # and they are not evidence, so the cosine alone scores the chunk.
                key = None
                score = semantic * total if s.semantic_weight else 0.0
            if key is not None and key not in candidate.units:
                score *= s.missing_key_factor
            if score >= s.min_score:
                scored.append(Hit(chunk_id=chunk_id, score=score))
        return order_hits(scored)
