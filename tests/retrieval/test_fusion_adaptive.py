"""Tests for margin-weighted fusion: the confidence margin, hand-computed fused scores, edge cases and the preset."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.retrieval.database import Hit
from evalkit.retrieval.fusion import (
    Contribution,
    fusion_method,
    margin_weighted_fusion,
    max_normalized_fusion,
    top_margin,
)
from evalkit.retrieval.presets import PRESETS

# A confident lexical list (top 8 vs 2: margin 0.75) and an unsure vector list (0.5 vs 0.45: margin 0.1).
LEXICAL = Contribution([Hit("a", 8.0), Hit("b", 2.0)], [0.5, 0.5])
VECTOR = Contribution([Hit("b", 0.5), Hit("a", 0.45)], [0.5, 0.5])


def test_top_margin_hand_computed() -> None:
    assert top_margin(LEXICAL) == pytest.approx(0.75)
    assert top_margin(VECTOR) == pytest.approx(0.1)
    assert top_margin(Contribution([Hit("a", 3.0)], [1.0])) == 1.0
    assert top_margin(Contribution([], [])) == 0.0
    assert top_margin(Contribution([Hit("a", -1.0), Hit("b", -2.0)], [1.0, 1.0])) == 0.0
    # a negative second score counts as 0; zero-weight hits neither count nor set the margin
    assert top_margin(Contribution([Hit("a", 2.0), Hit("b", -1.0)], [1.0, 1.0])) == 1.0
    assert top_margin(Contribution([Hit("x", 9.0), Hit("a", 4.0), Hit("b", 3.0)], [0.0, 1.0, 1.0])) == pytest.approx(
        0.25
    )


def test_margin_weighted_hand_computed() -> None:
    fused = margin_weighted_fusion([LEXICAL, VECTOR], k=60)
    c_lex, c_vec = 1.75 / 2.85, 1.1 / 2.85
    a = c_lex * 0.5 * 1.0 + c_vec * 0.5 * 0.45 / 0.5
    b = c_lex * 0.5 * 2.0 / 8.0 + c_vec * 0.5 * 1.0
    assert [h.chunk_id for h in fused] == ["a", "b"]
    assert fused[0].score == pytest.approx(a)
    assert fused[1].score == pytest.approx(b)


def test_confident_retriever_wins_where_fixed_weights_tie_break_the_other_way() -> None:
    # BM25 is sure of a (margin 0.625); the dense list is unsure (0.5, 0.48, 0.1: margin 0.04). Fixed 0.5/0.5
    # weights let c, second in both, win (0.6675 vs 0.6); the margins hand the query to the confident list.
    lexical = Contribution([Hit("a", 8.0), Hit("c", 3.0)], [0.5, 0.5])
    vector = Contribution([Hit("b", 0.5), Hit("c", 0.48), Hit("a", 0.1)], [0.5, 0.5, 0.5])
    fixed = max_normalized_fusion([lexical, vector], k=60)
    assert [h.chunk_id for h in fixed] == ["c", "a", "b"]
    assert fixed[0].score == pytest.approx(0.5 * 3 / 8 + 0.5 * 0.96)
    assert margin_weighted_fusion([lexical, vector], k=60)[0].chunk_id == "a"


def test_equal_margins_reduce_to_max_normalized_ranking() -> None:
    lexical = Contribution([Hit("a", 4.0), Hit("b", 2.0)], [0.5, 0.5])
    vector = Contribution([Hit("b", 0.8), Hit("c", 0.4)], [0.5, 0.5])
    adaptive = margin_weighted_fusion([lexical, vector], k=60)
    fixed = max_normalized_fusion([lexical, vector], k=60)
    assert [h.chunk_id for h in adaptive] == [h.chunk_id for h in fixed]
    assert [h.score for h in adaptive] == pytest.approx([h.score / 2 for h in fixed])


def test_empty_and_gated_lists() -> None:
    assert margin_weighted_fusion([], k=60) == []
    assert margin_weighted_fusion([Contribution([], []), Contribution([], [])], k=60) == []
    gated = Contribution([Hit("a", 5.0)], [0.0])
    vector = Contribution([Hit("b", 0.6), Hit("c", 0.3)], [0.5, 0.5])
    fused = margin_weighted_fusion([gated, vector], k=60)
    assert [h.chunk_id for h in fused] == ["b", "c"]
    assert fused[0].score == pytest.approx(0.5)


def test_ties_break_by_chunk_id() -> None:
    lexical = Contribution([Hit("b", 1.0), Hit("a", 1.0)], [0.5, 0.5])
    assert [h.chunk_id for h in margin_weighted_fusion([lexical], k=60)] == ["a", "b"]


def test_lookup_and_presets() -> None:
    assert fusion_method("margin-weighted") is margin_weighted_fusion
    with pytest.raises(ValueError, match="valid: margin-weighted, max-normalized, rrf"):
        fusion_method("z-score")
    assert PRESETS["benchmark"].fusion == "margin-weighted"
    assert PRESETS["synthetic-v1"].fusion == "max-normalized"


scores = st.floats(min_value=-5.0, max_value=50.0, allow_nan=False)


@given(
    st.lists(st.tuples(st.sampled_from("abcdef"), scores), max_size=6, unique_by=lambda t: t[0]),
    st.lists(st.tuples(st.sampled_from("abcdef"), scores), max_size=6, unique_by=lambda t: t[0]),
)
def test_fused_scores_are_bounded_and_ordered(
    lexical: list[tuple[str, float]], vector: list[tuple[str, float]]
) -> None:
    contributions = [
        Contribution([Hit(c, s) for c, s in lexical], [1.0] * len(lexical)),
        Contribution([Hit(c, s) for c, s in vector], [1.0] * len(vector)),
    ]
    fused = margin_weighted_fusion(contributions, k=60)
    assert all(0.0 < h.score <= 1.0 + 1e-9 for h in fused)
    assert fused == sorted(fused, key=lambda h: (-h.score, h.chunk_id))
    assert 0.0 <= top_margin(contributions[0]) <= 1.0


def test_subnormal_scores_stay_within_the_bound() -> None:
    # Found by hypothesis: weight * 5e-324 rounds before the division, so a list's best hit could score above 1.
    tiny = 5e-324
    contributions = [
        Contribution([Hit("a", tiny)], [1.0]),
        Contribution([Hit("a", 1.0), Hit("b", 0.5)], [1.0, 1.0]),
    ]
    fused = margin_weighted_fusion(contributions, k=60)
    assert all(0.0 < h.score <= 1.0 + 1e-9 for h in fused), fused
