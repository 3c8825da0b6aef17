"""A local heuristic reranker: no model, no network, deterministic.

For a candidate chunk in the query's language the score is a weighted sum of three features in [0, 1]:

- coverage: the IDF mass of the query's content terms found in the chunk over the IDF mass of all of them,
  with IDF = ln(1 + (N - df + 0.5) / (df + 0.5)) as in BM25; a query term that no chunk contains keeps its
  full weight in the denominator, so questions about things the corpus never mentions score low;
- semantic: the cosine similarity of query and chunk embeddings, clipped at 0;
- proximity: the fraction of adjacent query-term pairs that also stand next to each other in the chunk.

Lexical features mean nothing across languages, so a chunk in another language is scored on the semantic
feature alone. Candidates under ``min_score`` are dropped: that is how a query without a good match returns
nothing. Ties are broken by chunk ID.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise

from pydantic import Field

from evalkit.database import Hit, order_hits
from evalkit.schema import StrictModel, UnitFloat


class RerankerSettings(StrictModel):
    """Weights and threshold of the heuristic reranker."""

    coverage_weight: UnitFloat = Field(default=0.55, description="weight of IDF-weighted query-term coverage")
    semantic_weight: UnitFloat = Field(default=0.3, description="weight of embedding cosine similarity")
    proximity_weight: UnitFloat = Field(default=0.15, description="weight of adjacent query-term pairs")
    min_score: UnitFloat = Field(default=0.35, description="candidates scoring below this are dropped")


def idf(document_frequency: int, chunk_count: int) -> float:
    """BM25's non-negative IDF: ln(1 + (N - df + 0.5) / (df + 0.5))."""
    return math.log(1.0 + (chunk_count - document_frequency + 0.5) / (document_frequency + 0.5))


def coverage(terms: Sequence[str], chunk_tokens: frozenset[str], weights: Mapping[str, float]) -> float:
    """IDF-weighted fraction of the query's terms present in the chunk (0 when the query has no terms)."""
    total = sum(weights[t] for t in terms)
    if total <= 0:
        return 0.0
    return sum(weights[t] for t in terms if t in chunk_tokens) / total


def proximity(terms: Sequence[str], chunk_tokens: Sequence[str]) -> float:
    """Fraction of adjacent query-term pairs that are adjacent, in order, in the chunk (0 with < 2 terms)."""
    pairs = list(pairwise(terms))
    if not pairs:
        return 0.0
    adjacent = set(pairwise(chunk_tokens))
    return sum(1 for pair in pairs if pair in adjacent) / len(pairs)


class HeuristicReranker:
    """Scores candidates from term statistics and similarities the service hands it."""

    def __init__(self, settings: RerankerSettings) -> None:
        self.settings = settings

    def rerank(
        self,
        terms: Sequence[str],
        same_language: Mapping[str, bool],
        tokens: Mapping[str, Sequence[str]],
        similarity: Mapping[str, float],
        term_weights: Mapping[str, float],
    ) -> list[Hit]:
        """Score every candidate in ``same_language`` and keep those at or above the threshold."""
        s = self.settings
        scored: list[Hit] = []
        for chunk_id, same in same_language.items():
            semantic = max(similarity.get(chunk_id, 0.0), 0.0)
            if same:
                chunk_tokens = tokens[chunk_id]
                score = (
                    s.coverage_weight * coverage(terms, frozenset(chunk_tokens), term_weights)
                    + s.semantic_weight * semantic
                    + s.proximity_weight * proximity(terms, chunk_tokens)
                )
            else:
                score = semantic
            if score >= s.min_score:
                scored.append(Hit(chunk_id=chunk_id, score=score))
        return order_hits(scored)
