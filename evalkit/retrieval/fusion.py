"""Rank fusion for hybrid retrieval: named methods chosen from :data:`FUSION_METHODS`.

Each retriever contributes a ranked list of hits and a weight per hit (the service lowers the weight of lexical
hits whose language differs from the query's, so that shared numbers and Latin names cannot outrank dense hits
across languages). Fused scores are ordered by score descending, then chunk ID.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evalkit.retrieval.database import Hit, order_hits


@dataclass(frozen=True)
class Contribution:
    """One retriever's ranked hits (best first) and the weight of each hit in the fusion."""

    hits: Sequence[Hit]
    weights: Sequence[float]

    def __post_init__(self) -> None:
        if len(self.hits) != len(self.weights):
            raise ValueError(f"{len(self.hits)} hits but {len(self.weights)} weights")


def reciprocal_rank_fusion(contributions: Sequence[Contribution], k: int) -> list[Hit]:
    """Weighted RRF (Cormack, Clarke and Büttcher, SIGIR 2009): score(d) = sum_i w_i(d) / (k + rank_i(d)).

    Ranks start at 1. A chunk absent from a list contributes nothing for it.
    """
    if k < 1:
        raise ValueError(f"rrf k must be >= 1, got {k}")
    scores: dict[str, float] = defaultdict(float)
    for contribution in contributions:
        for rank, (hit, weight) in enumerate(zip(contribution.hits, contribution.weights, strict=True), 1):
            scores[hit.chunk_id] += weight / (k + rank)
    return order_hits(Hit(chunk_id, score) for chunk_id, score in scores.items() if score > 0)


def max_normalized_fusion(contributions: Sequence[Contribution], k: int) -> list[Hit]:
    """Convex combination of max-normalized scores: score(d) = sum_i w_i(d) * s_i(d) / max_j s_i(j).

    With weights summing to 1 this is the convex combination that Bruch, Gai and Ingber ("An Analysis of Fusion
    Functions for Hybrid Retrieval", TOIS 2023) found more effective than RRF: a retriever's confidence survives
    fusion instead of being flattened to ranks. Each list is divided by its best score among the hits that carry
    weight (hits with zero weight, e.g. gated cross-language lexical hits, neither count nor set the scale);
    negative scores count as 0 and lists whose best score is not positive contribute nothing. ``k`` is unused.
    """
    del k
    scores: dict[str, float] = defaultdict(float)
    for contribution in contributions:
        weighted = [(h, w) for h, w in zip(contribution.hits, contribution.weights, strict=True) if w > 0]
        best = max((hit.score for hit, _ in weighted), default=0.0)
        if best <= 0:
            continue
        for hit, weight in weighted:
            # Normalized first: weight * score would underflow for subnormal scores and break the [0, 1] bound.
            scores[hit.chunk_id] += weight * (max(hit.score, 0.0) / best)
    return order_hits(Hit(chunk_id, score) for chunk_id, score in scores.items() if score > 0)


def top_margin(contribution: Contribution) -> float:
    """A retriever's confidence for this query: the relative margin of its best score over its second.

    Over the hits that carry weight: ``(s1 - max(s2, 0)) / s1`` in [0, 1]; 1 when one hit has a positive score, 0 when
    none does. Scale-free, so BM25 scores and cosines are comparable: a list whose top hit stands out from the rest is
    more likely right about it than a list of near-ties.
    """
    weighted = zip(contribution.hits, contribution.weights, strict=True)
    scores = sorted((h.score for h, w in weighted if w > 0), reverse=True)
    if not scores or scores[0] <= 0:
        return 0.0
    if len(scores) == 1:
        return 1.0
    return min(max((scores[0] - max(scores[1], 0.0)) / scores[0], 0.0), 1.0)


def margin_weighted_fusion(contributions: Sequence[Contribution], k: int) -> list[Hit]:
    """Max-normalized convex combination whose weights follow each retriever's confidence for the query.

    score(d) = sum_i c_i * w_i(d) * s_i(d) / max_j s_i(j), with c_i = (1 + m_i) / sum_l (1 + m_l) over the lists that
    have a positive score and m_i the list's :func:`top_margin`. A retriever that separates its top hit sharply gets
    up to twice the say of one that does not; with equal margins this is :func:`max_normalized_fusion`. There is no
    tuned parameter (the ``1 +`` keeps the fixed weights as the prior); it adapts per query, not per data set, so a
    dense model that is weak on a corpus but unsure of itself on a query cannot drag a confident BM25 ranking down.
    ``k`` is unused.
    """
    del k
    confidences = [1.0 + top_margin(c) if _has_positive(c) else 0.0 for c in contributions]
    total = sum(confidences)
    if total <= 0:
        return []
    scaled = [
        Contribution(c.hits, [w * confidence / total for w in c.weights])
        for c, confidence in zip(contributions, confidences, strict=True)
    ]
    return max_normalized_fusion(scaled, k=1)


def _has_positive(contribution: Contribution) -> bool:
    return any(h.score > 0 for h, w in zip(contribution.hits, contribution.weights, strict=True) if w > 0)


FUSION_METHODS: dict[str, Callable[[Sequence[Contribution], int], list[Hit]]] = {
    "rrf": reciprocal_rank_fusion,
    "max-normalized": max_normalized_fusion,
    "margin-weighted": margin_weighted_fusion,
}


def fusion_method(name: str) -> Callable[[Sequence[Contribution], int], list[Hit]]:
    """Look a fusion method up by name; unknown names raise ValueError listing the valid ones."""
    try:
        return FUSION_METHODS[name]
    except KeyError:
        raise ValueError(f"unknown fusion method {name!r}; valid: {', '.join(sorted(FUSION_METHODS))}") from None
