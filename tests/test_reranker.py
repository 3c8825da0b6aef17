"""Tests for evalkit.reranker: exact feature arithmetic, cross-language scoring, the key-unit rule, threshold, ties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from evalkit.database import Hit
from evalkit.reranker import (
    CONCEPT_PREFIX,
    Candidate,
    HeuristicReranker,
    RerankerSettings,
    coverage,
    idf,
    proximity,
)

N = 10
# Query units: two terms and one concept; 'alpha' is the rarest unit seen in the corpus (the key unit).
CONCEPT = CONCEPT_PREFIX + "topic"
TERMS = ("alpha", "beta")
UNITS = (*TERMS, CONCEPT)
DF = {"alpha": 1, "beta": 4, CONCEPT: 2}
W_ALPHA = math.log(1 + 9.5 / 1.5)
W_BETA = math.log(1 + 6.5 / 4.5)
W_CONCEPT = math.log(1 + 8.5 / 2.5)
W_TOTAL = W_ALPHA + W_BETA + W_CONCEPT


def _candidate(
    tokens: tuple[str, ...], similarity: float, same_language: bool = True, concepts: frozenset[str] = frozenset()
) -> Candidate:
    return Candidate(
        same_language=same_language, tokens=tokens, units=frozenset(tokens) | concepts, similarity=similarity
    )


def _assert_hits(hits: list[Hit], expected: list[Hit]) -> None:
    """Same IDs in the same order; scores equal up to float rounding of the summation order."""
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in expected]
    assert [h.score for h in hits] == pytest.approx([h.score for h in expected], rel=1e-12, abs=1e-15)


def _rerank(candidates: dict[str, Candidate], **settings: float) -> list[Hit]:
    reranker = HeuristicReranker(RerankerSettings(**{"min_score": 0.0, **settings}))
    return reranker.rerank(UNITS, TERMS, candidates, DF, N)


# ---------------------------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------------------------


def test_idf_formula() -> None:
    assert idf(1, 10) == math.log(1.0 + (10 - 1 + 0.5) / (1 + 0.5))
    assert idf(0, 10) == math.log(1.0 + 10.5 / 0.5)
    assert idf(10, 10) == math.log(1.0 + 0.5 / 10.5)


@given(st.integers(1, 10_000), st.data())
def test_idf_positive_and_decreasing(chunk_count: int, data: st.DataObject) -> None:
    df = data.draw(st.integers(0, chunk_count - 1))
    assert idf(df + 1, chunk_count) < idf(df, chunk_count)
    assert idf(chunk_count, chunk_count) > 0


def test_coverage_is_idf_weighted() -> None:
    weights = {"a": 1.0, "b": 2.0, "c": 0.5}
    assert coverage(["a", "b", "c"], frozenset({"a", "c", "z"}), weights) == 1.5 / 3.5
    assert coverage(["a", "b", "c"], frozenset({"a", "b", "c"}), weights) == 1.0
    assert coverage(["a", "b", "c"], frozenset(), weights) == 0.0
    assert coverage([], frozenset({"a"}), weights) == 0.0


def test_coverage_unseen_unit_keeps_its_weight_in_the_denominator() -> None:
    weights = {"seen": idf(1, N), "never": idf(0, N)}
    assert coverage(["seen", "never"], frozenset({"seen"}), weights) == idf(1, N) / (idf(1, N) + idf(0, N))


def test_proximity_counts_adjacent_ordered_pairs() -> None:
    assert proximity(["a", "b", "c"], ["a", "b", "x", "c"]) == 0.5  # (a, b) adjacent, (b, c) not
    assert proximity(["a", "b", "c"], ["x", "a", "b", "c"]) == 1.0
    assert proximity(["a", "b"], ["b", "a"]) == 0.0  # order matters
    assert proximity(["a"], ["a", "a"]) == 0.0
    assert proximity([], ["a"]) == 0.0


# ---------------------------------------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------------------------------------


def test_same_language_score_hand_computed() -> None:
    hits = _rerank({"x": _candidate(("alpha", "beta", "gamma"), 0.5)})
    cover = (W_ALPHA + W_BETA) / W_TOTAL
    _assert_hits(hits, [Hit("x", 0.55 * cover + 0.3 * 0.5 + 0.15 * 1.0)])


def test_same_language_score_with_concept_and_no_adjacency() -> None:
    hits = _rerank({"x": _candidate(("beta", "gamma", "alpha"), 0.2, concepts=frozenset({CONCEPT}))})
    _assert_hits(hits, [Hit("x", 0.55 * (W_ALPHA + W_BETA + W_CONCEPT) / W_TOTAL + 0.3 * 0.2 + 0.15 * 0.0)])
    assert hits[0].score == pytest.approx(0.55 + 0.06, rel=1e-12)


def test_cross_language_drops_proximity_and_rescales() -> None:
    # The tokens stand next to each other, but proximity is left out across languages; the other two weights
    # are scaled by (0.55 + 0.3 + 0.15) / (0.55 + 0.3).
    candidate = _candidate(("alpha", "beta"), 0.8, same_language=False, concepts=frozenset({CONCEPT}))
    hits = _rerank({"y": candidate})
    _assert_hits(hits, [Hit("y", (0.55 * 1.0 + 0.3 * 0.8) * ((0.55 + 0.3 + 0.15) / (0.55 + 0.3)))])


def test_cross_language_concept_only_candidate() -> None:
    candidate = _candidate(("年度",), 0.6, same_language=False, concepts=frozenset({CONCEPT}))
    hits = _rerank({"y": candidate})
    _assert_hits(hits, [Hit("y", (0.55 * (W_CONCEPT / W_TOTAL) + 0.3 * 0.6) * ((0.55 + 0.3 + 0.15) / (0.55 + 0.3)))])


def test_cross_language_with_semantic_weight_only_is_the_cosine() -> None:
    candidate = _candidate(("年度",), 0.6, same_language=False)
    hits = _rerank({"y": candidate}, coverage_weight=0.0, semantic_weight=1.0, proximity_weight=0.0)
    _assert_hits(hits, [Hit("y", 0.6)])


def test_cross_language_without_coverage_or_semantic_weight_scores_zero() -> None:
    candidate = _candidate(("alpha", "beta"), 0.9, same_language=False, concepts=frozenset({CONCEPT}))
    hits = _rerank({"y": candidate}, coverage_weight=0.0, semantic_weight=0.0, proximity_weight=1.0)
    _assert_hits(hits, [Hit("y", 0.0)])


def test_negative_similarity_is_clipped() -> None:
    hits = _rerank({"x": _candidate(("gamma",), -0.7)})
    _assert_hits(hits, [Hit("x", 0.0)])


def test_missing_key_unit_multiplies_the_score() -> None:
    # Same language: the key is the rarest seen unit, 'alpha' (df 1). 'b' lacks it and is scaled by 0.5.
    candidates = {"a": _candidate(("alpha",), 0.0), "b": _candidate(("beta",), 0.0)}
    hits = _rerank(candidates, missing_key_factor=0.5)
    _assert_hits(hits, [Hit("a", 0.55 * W_ALPHA / W_TOTAL), Hit("b", 0.5 * 0.55 * W_BETA / W_TOTAL)])
    _assert_hits(_rerank(candidates)[1:], [Hit("b", 0.55 * W_BETA / W_TOTAL)])  # default factor 1: unchanged


def test_cross_language_key_is_the_rarest_concept() -> None:
    # Across languages only concepts count as the key: a chunk with 'alpha' but without the concept is scaled.
    rescale = (0.55 + 0.3 + 0.15) / (0.55 + 0.3)
    with_concept = _candidate((), 0.0, same_language=False, concepts=frozenset({CONCEPT}))
    without = _candidate(("alpha",), 0.0, same_language=False)
    hits = _rerank({"c": with_concept, "t": without}, missing_key_factor=0.0)
    _assert_hits(hits, [Hit("c", 0.55 * W_CONCEPT / W_TOTAL * rescale), Hit("t", 0.0)])


def test_min_score_threshold_is_inclusive() -> None:
    candidate = {"x": _candidate(("gamma",), 1.0)}
    score = 0.3 * 1.0
    assert _rerank(candidate, min_score=score) == [Hit("x", score)]
    assert _rerank(candidate, min_score=math.nextafter(score, 1.0)) == []


def test_default_threshold_drops_weak_candidates() -> None:
    reranker = HeuristicReranker(RerankerSettings())
    candidates = {"weak": _candidate(("gamma",), 0.9), "strong": _candidate(("alpha", "beta"), 0.9)}
    assert [h.chunk_id for h in reranker.rerank(UNITS, TERMS, candidates, DF, N)] == ["strong"]


def test_ties_broken_by_chunk_id() -> None:
    same = _candidate(("alpha", "beta"), 0.4)
    hits = _rerank({"b": same, "c": _candidate(("beta",), 0.4), "a": same})
    assert [h.chunk_id for h in hits] == ["a", "b", "c"]
    assert hits[0].score == hits[1].score


def test_no_candidates() -> None:
    assert _rerank({}) == []


def test_settings_are_strict_unit_floats() -> None:
    with pytest.raises(ValidationError):
        RerankerSettings(min_score=1.5)
    with pytest.raises(ValidationError):
        RerankerSettings(coverage_weight=-0.1)
    with pytest.raises(ValidationError):
        RerankerSettings(unknown=1.0)  # type: ignore[call-arg]
    assert RerankerSettings() == RerankerSettings(
        coverage_weight=0.55, semantic_weight=0.3, proximity_weight=0.15, missing_key_factor=1.0, min_score=0.35
    )
