"""Tests for retrieval.reranker: exact feature arithmetic, cross-language scoring, the key-unit rule, units absent from
the corpus, the similarity floor and score threshold, ties and the default settings."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from evalkit.data.settings import RerankerSettings
from evalkit.retrieval.database import Hit
from evalkit.retrieval.reranker import CONCEPT_PREFIX, Candidate, HeuristicReranker, coverage, idf, proximity

N = 10
# Query units: two terms and one concept; 'alpha' is the rarest unit seen in the corpus (the key unit). Every unit
# occurs in the corpus (df > 0), so all three count in the coverage denominator W_TOTAL.
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
    """Rerank with the default weights but both floors open (min_score 0, min_similarity -1), unless overridden."""
    reranker = HeuristicReranker(RerankerSettings(**{"min_score": 0.0, "min_similarity": -1.0, **settings}))
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


def test_coverage_weighs_every_unit_it_is_given() -> None:
    # The function itself filters nothing: a unit it is given counts in the denominator. Leaving out units that no
    # chunk contains is the reranker's job (see test_unit_absent_from_the_corpus_does_not_change_coverage).
    weights = {"seen": idf(1, N), "never": idf(0, N)}
    assert coverage(["seen", "never"], frozenset({"seen"}), weights) == idf(1, N) / (idf(1, N) + idf(0, N))
    assert coverage(["seen"], frozenset({"seen"}), weights) == 1.0


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
    # coverage (W_ALPHA + W_BETA) / W_TOTAL, semantic 0.5, proximity 1 ((alpha, beta) adjacent); has the key 'alpha'.
    hits = _rerank({"x": _candidate(("alpha", "beta", "gamma"), 0.5)})
    cover = (W_ALPHA + W_BETA) / W_TOTAL
    _assert_hits(hits, [Hit("x", 0.4 * cover + 0.4 * 0.5 + 0.2 * 1.0)])


def test_same_language_score_with_concept_and_no_adjacency() -> None:
    # Every unit covered (coverage 1), semantic 0.2, (alpha, beta) not adjacent (proximity 0): 0.4 + 0.08 = 0.48.
    hits = _rerank({"x": _candidate(("beta", "gamma", "alpha"), 0.2, concepts=frozenset({CONCEPT}))})
    _assert_hits(hits, [Hit("x", 0.4 * (W_ALPHA + W_BETA + W_CONCEPT) / W_TOTAL + 0.4 * 0.2 + 0.2 * 0.0)])
    assert hits[0].score == pytest.approx(0.4 + 0.08, rel=1e-12)


def test_cross_language_drops_proximity_and_rescales() -> None:
    # The tokens stand next to each other, but proximity is left out across languages; the other two weights
    # are scaled by (0.4 + 0.4 + 0.2) / (0.4 + 0.4) = 1.25. Coverage 1, semantic 0.8, key concept present:
    # (0.4 * 1 + 0.4 * 0.8) * 1.25 = 0.72 * 1.25 = 0.9.
    candidate = _candidate(("alpha", "beta"), 0.8, same_language=False, concepts=frozenset({CONCEPT}))
    hits = _rerank({"y": candidate})
    _assert_hits(hits, [Hit("y", (0.4 * 1.0 + 0.4 * 0.8) * ((0.4 + 0.4 + 0.2) / (0.4 + 0.4)))])
    assert hits[0].score == pytest.approx(0.9, rel=1e-12)


def test_cross_language_concept_only_candidate() -> None:
    # Only the concept is covered; the key across languages is the concept, so no near-miss factor.
    candidate = _candidate(("年度",), 0.6, same_language=False, concepts=frozenset({CONCEPT}))
    hits = _rerank({"y": candidate})
    _assert_hits(hits, [Hit("y", (0.4 * (W_CONCEPT / W_TOTAL) + 0.4 * 0.6) * ((0.4 + 0.4 + 0.2) / (0.4 + 0.4)))])


def test_cross_language_with_semantic_weight_only_is_the_cosine() -> None:
    # Rescale (0 + 1 + 0) / (0 + 1) = 1. The candidate lacks the key concept; factor 1 keeps the near-miss rule out
    # of it (with the default 0.8 it would be 0.8 * 0.6).
    candidate = _candidate(("年度",), 0.6, same_language=False)
    settings = {"coverage_weight": 0.0, "semantic_weight": 1.0, "proximity_weight": 0.0}
    _assert_hits(_rerank({"y": candidate}, **settings, missing_key_factor=1.0), [Hit("y", 0.6)])
    _assert_hits(_rerank({"y": candidate}, **settings), [Hit("y", 0.6 * 0.8)])


def test_cross_language_without_coverage_or_semantic_weight_scores_zero() -> None:
    candidate = _candidate(("alpha", "beta"), 0.9, same_language=False, concepts=frozenset({CONCEPT}))
    hits = _rerank({"y": candidate}, coverage_weight=0.0, semantic_weight=0.0, proximity_weight=1.0)
    _assert_hits(hits, [Hit("y", 0.0)])


def test_negative_similarity_is_clipped() -> None:
    # Reachable only with a negative floor (the helper opens it to -1): 0.4 * 0 + 0.4 * max(-0.7, 0) + 0.2 * 0 = 0;
    # unclipped it would be 0.4 * -0.7 * 0.8 < 0 and fall under min_score 0.
    hits = _rerank({"x": _candidate(("gamma",), -0.7)})
    _assert_hits(hits, [Hit("x", 0.0)])


def test_missing_key_unit_multiplies_the_score() -> None:
    # Same language: the key is the rarest seen unit, 'alpha' (df 1). 'b' lacks it and is scaled by 0.5.
    candidates = {"a": _candidate(("alpha",), 0.0), "b": _candidate(("beta",), 0.0)}
    hits = _rerank(candidates, missing_key_factor=0.5)
    _assert_hits(hits, [Hit("a", 0.4 * W_ALPHA / W_TOTAL), Hit("b", 0.5 * 0.4 * W_BETA / W_TOTAL)])
    # Default factor 0.8: 'a' unchanged, 'b' scaled by 0.8.
    _assert_hits(_rerank(candidates), [Hit("a", 0.4 * W_ALPHA / W_TOTAL), Hit("b", 0.8 * 0.4 * W_BETA / W_TOTAL)])
    # Factor 1 switches the rule off.
    _assert_hits(_rerank(candidates, missing_key_factor=1.0)[1:], [Hit("b", 0.4 * W_BETA / W_TOTAL)])


def test_cross_language_key_is_the_rarest_concept() -> None:
    # Across languages only concepts count as the key: a chunk with 'alpha' but without the concept is scaled.
    # 't' would score 0.4 * W_ALPHA / W_TOTAL * 1.25 > 0, so factor 0 shows the rule applied.
    rescale = (0.4 + 0.4 + 0.2) / (0.4 + 0.4)
    with_concept = _candidate((), 0.0, same_language=False, concepts=frozenset({CONCEPT}))
    without = _candidate(("alpha",), 0.0, same_language=False)
    hits = _rerank({"c": with_concept, "t": without}, missing_key_factor=0.0)
    _assert_hits(hits, [Hit("c", 0.4 * W_CONCEPT / W_TOTAL * rescale), Hit("t", 0.0)])


def test_unit_absent_from_the_corpus_does_not_change_coverage() -> None:
    # '§absent' has df 0: it is left out of the coverage ratio (the denominator stays W_TOTAL, not
    # W_TOTAL + idf(0, 10)) and cannot be the key unit (the key stays 'alpha', the rarest unit with df > 0).
    absent = CONCEPT_PREFIX + "absent"
    reranker = HeuristicReranker(RerankerSettings(min_score=0.0, min_similarity=-1.0))
    candidates = {
        "x": _candidate(("alpha", "beta", "gamma"), 0.5),
        "y": _candidate(("beta",), 0.5, concepts=frozenset({CONCEPT})),
    }
    hits = reranker.rerank((*UNITS, absent), TERMS, candidates, {**DF, absent: 0}, N)
    # x: 0.4 * (W_ALPHA + W_BETA) / W_TOTAL + 0.4 * 0.5 + 0.2 * 1 (has the key 'alpha');
    # y: (0.4 * (W_BETA + W_CONCEPT) / W_TOTAL + 0.4 * 0.5 + 0.2 * 0) * 0.8 (no 'alpha'; one token, no pairs).
    expected = [
        Hit("x", 0.4 * (W_ALPHA + W_BETA) / W_TOTAL + 0.4 * 0.5 + 0.2 * 1.0),
        Hit("y", (0.4 * (W_BETA + W_CONCEPT) / W_TOTAL + 0.4 * 0.5 + 0.2 * 0.0) * 0.8),
    ]
    _assert_hits(hits, expected)
    assert hits == reranker.rerank(UNITS, TERMS, candidates, DF, N)


def test_query_without_units_in_the_corpus_scores_on_similarity_alone() -> None:
    # No unit has df > 0: coverage 0 (empty ratio), no key unit (no near-miss factor), no term pairs.
    absent = CONCEPT_PREFIX + "absent"
    reranker = HeuristicReranker(RerankerSettings(min_score=0.0, min_similarity=-1.0))
    hits = reranker.rerank((absent,), (), {"x": _candidate(("alpha",), 0.5)}, {absent: 0}, N)
    _assert_hits(hits, [Hit("x", 0.4 * 0.0 + 0.4 * 0.5 + 0.2 * 0.0)])


def test_min_similarity_is_inclusive_and_applies_before_scoring() -> None:
    # 'at' sits exactly on the floor and is kept: 0.4 * (W_ALPHA + W_BETA) / W_TOTAL + 0.4 * 0.35 + 0.2 * 1.
    # 'below' (one ulp under 0.35) would outscore it (0.4 * 1 + 0.4 * 0.35 + 0.2 * 1 = 0.74) but is dropped, and so
    # is 'cross', a cross-language candidate under the floor.
    below_floor = math.nextafter(0.35, 0.0)
    candidates = {
        "at": _candidate(("alpha", "beta"), 0.35),
        "below": _candidate(("alpha", "beta"), below_floor, concepts=frozenset({CONCEPT})),
        "cross": _candidate(("alpha", "beta"), 0.3, same_language=False, concepts=frozenset({CONCEPT})),
    }
    at = Hit("at", 0.4 * (W_ALPHA + W_BETA) / W_TOTAL + 0.4 * 0.35 + 0.2 * 1.0)
    _assert_hits(_rerank(candidates, min_similarity=0.35), [at])
    # Lower the floor to 'below': it is kept (inclusive) and ranks first; 'cross' (0.3) is still under.
    hits = _rerank(candidates, min_similarity=below_floor)
    _assert_hits(hits, [Hit("below", 0.4 * 1.0 + 0.4 * below_floor + 0.2 * 1.0), at])


def test_min_similarity_compares_the_raw_cosine() -> None:
    # A negative floor is compared with the cosine before clipping: -0.5 is kept (scoring 0.4 * 0 + 0.4 * 0 + 0.2 * 0,
    # no key 'alpha' -> 0 * 0.8 = 0), one ulp under -0.5 is dropped.
    candidates = {"on": _candidate(("gamma",), -0.5), "under": _candidate(("gamma",), math.nextafter(-0.5, -1.0))}
    _assert_hits(_rerank(candidates, min_similarity=-0.5), [Hit("on", 0.0)])


def test_min_score_threshold_is_inclusive() -> None:
    # Semantic only (coverage and proximity 0), times the default near-miss factor 0.8 (no 'alpha'): 0.4 * 1.0 * 0.8,
    # multiplied in the reranker's order, so the float is bit-identical.
    candidate = {"x": _candidate(("gamma",), 1.0)}
    score = 0.4 * 1.0 * 0.8
    assert _rerank(candidate, min_score=score) == [Hit("x", score)]
    assert _rerank(candidate, min_score=math.nextafter(score, 1.0)) == []


def test_default_floors_drop_weak_candidates() -> None:
    # Default settings (min_similarity 0.35, min_score 0.3):
    # weak: 0.4 * 0 + 0.4 * 0.9 + 0.2 * 0 = 0.36, no 'alpha' -> * 0.8 = 0.288 < 0.3: dropped;
    # strong: 0.4 * (W_ALPHA + W_BETA) / W_TOTAL + 0.4 * 0.9 + 0.2 * 1 (about 0.824): kept;
    # dissimilar: would score 0.4 * 1 + 0.4 * 0.34 + 0.2 * 1 = 0.736, but its cosine 0.34 < 0.35: dropped.
    reranker = HeuristicReranker(RerankerSettings())
    candidates = {
        "weak": _candidate(("gamma",), 0.9),
        "strong": _candidate(("alpha", "beta"), 0.9),
        "dissimilar": _candidate(("alpha", "beta"), 0.34, concepts=frozenset({CONCEPT})),
    }
    hits = reranker.rerank(UNITS, TERMS, candidates, DF, N)
    _assert_hits(hits, [Hit("strong", 0.4 * (W_ALPHA + W_BETA) / W_TOTAL + 0.4 * 0.9 + 0.2 * 1.0)])


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
    # min_similarity is a cosine: [-1, 1], not a unit float.
    assert RerankerSettings(min_similarity=-0.5).min_similarity == -0.5
    for bad in (1.5, -1.5):
        with pytest.raises(ValidationError):
            RerankerSettings(min_similarity=bad)


def test_default_settings() -> None:
    # The calibrated defaults (module docstring and commit 11e9b50); every field is pinned, so a silent change fails.
    assert RerankerSettings().model_dump() == {
        "coverage_weight": 0.4,
        "semantic_weight": 0.4,
        "proximity_weight": 0.2,
        "missing_key_factor": 0.8,
        "min_similarity": 0.35,
        "min_score": 0.3,
    }


def test_cross_language_without_concepts_is_scored_by_the_cosine_alone() -> None:
    # A provider that names no concepts: the query has only term units. A chunk in another language that shares
    # the rare term 'alpha' (a number or a name, say) gets no coverage credit: its score is its cosine, 0.5, and
    # it ranks below a chunk with cosine 0.6 that shares nothing. No key unit applies across languages here.
    reranker = HeuristicReranker(RerankerSettings(min_score=0.0, min_similarity=-1.0))
    candidates = {
        "shares-a-name": _candidate(("alpha", "beta"), 0.5, same_language=False),
        "closer": _candidate(("gamma",), 0.6, same_language=False),
    }
    hits = reranker.rerank(TERMS, TERMS, candidates, {"alpha": 1, "beta": 4}, N)
    _assert_hits(hits, [Hit("closer", 0.6), Hit("shares-a-name", 0.5)])
