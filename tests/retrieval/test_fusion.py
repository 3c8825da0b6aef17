"""Tests for evalkit.retrieval.fusion: exact RRF and max-normalized arithmetic, weights, ties and method lookup."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.retrieval.database import Hit, order_hits
from evalkit.retrieval.fusion import (
    FUSION_METHODS,
    Contribution,
    fusion_method,
    max_normalized_fusion,
    reciprocal_rank_fusion,
)

# Hand case: a lexical list a > b > c with weights 1, 0.5, 1 and a vector list c > d with weight 2.
LEXICAL = Contribution([Hit("a", 5.0), Hit("b", 3.0), Hit("c", 1.0)], [1.0, 0.5, 1.0])
VECTOR = Contribution([Hit("c", 0.9), Hit("d", 0.8)], [2.0, 2.0])


def test_rrf_hand_computed() -> None:
    fused = reciprocal_rank_fusion([LEXICAL, VECTOR], k=60)
    # c: 1/(60+3) + 2/(60+1); d: 2/(60+2); a: 1/(60+1); b: 0.5/(60+2)
    assert fused == [
        Hit("c", 1 / 63 + 2 / 61),
        Hit("d", 2 / 62),
        Hit("a", 1 / 61),
        Hit("b", 0.5 / 62),
    ]


def test_rrf_k_changes_the_constant() -> None:
    fused = reciprocal_rank_fusion([LEXICAL], k=1)
    assert fused == [Hit("a", 1 / 2), Hit("c", 1 / 4), Hit("b", 0.5 / 3)]


def test_max_normalized_hand_computed() -> None:
    fused = max_normalized_fusion([LEXICAL, VECTOR], k=60)
    # lexical best 5: a 1*5/5, b 0.5*3/5, c 1*1/5; vector best 0.9: c += 2*0.9/0.9, d 2*0.8/0.9
    assert fused == [
        Hit("c", 1.0 * 1.0 / 5.0 + 2.0 * 0.9 / 0.9),
        Hit("d", 2.0 * 0.8 / 0.9),
        Hit("a", 1.0),
        Hit("b", 0.5 * 3.0 / 5.0),
    ]
    assert fused[0].score == pytest.approx(2.2, rel=1e-15)


def test_max_normalized_ignores_k() -> None:
    assert max_normalized_fusion([LEXICAL, VECTOR], k=1) == max_normalized_fusion([LEXICAL, VECTOR], k=1000)


def test_max_normalized_clips_negative_scores_and_skips_non_positive_lists() -> None:
    mixed = Contribution([Hit("a", 2.0), Hit("b", -1.0)], [1.0, 1.0])
    negative = Contribution([Hit("c", -0.5), Hit("d", -0.7)], [1.0, 1.0])
    assert max_normalized_fusion([mixed, negative], k=60) == [Hit("a", 1.0)]


def test_chunk_absent_from_a_list_gets_only_the_other_list() -> None:
    fused = {hit.chunk_id: hit.score for hit in reciprocal_rank_fusion([LEXICAL, VECTOR], k=60)}
    assert fused["a"] == 1 / 61  # never retrieved by the vector list
    assert fused["d"] == 2 / 62  # never retrieved by the lexical list


@pytest.mark.parametrize("method", sorted(FUSION_METHODS))
def test_zero_weight_drops_a_hit(method: str) -> None:
    lexical = Contribution([Hit("a", 3.0), Hit("b", 2.0)], [0.0, 1.0])
    fused = fusion_method(method)([lexical, Contribution([], [])], 60)
    assert [hit.chunk_id for hit in fused] == ["b"]


@pytest.mark.parametrize("method", sorted(FUSION_METHODS))
def test_ties_broken_by_chunk_id(method: str) -> None:
    # Mirror-image lists give b and a the same fused score; a comes first whatever the input order.
    first = Contribution([Hit("b", 1.0), Hit("a", 0.5)], [1.0, 1.0])
    second = Contribution([Hit("a", 1.0), Hit("b", 0.5)], [1.0, 1.0])
    fused = fusion_method(method)([first, second], 60)
    assert [hit.chunk_id for hit in fused] == ["a", "b"]
    assert fused[0].score == fused[1].score


@pytest.mark.parametrize("method", sorted(FUSION_METHODS))
def test_no_contributions_fuse_to_nothing(method: str) -> None:
    assert fusion_method(method)([], 60) == []
    assert fusion_method(method)([Contribution([], []), Contribution([], [])], 60) == []


def test_unknown_method_lists_valid_names() -> None:
    with pytest.raises(ValueError, match=r"'combmnz'; valid: margin-weighted, max-normalized, rrf"):
        fusion_method("combmnz")
    assert fusion_method("rrf") is reciprocal_rank_fusion
    assert fusion_method("max-normalized") is max_normalized_fusion


def test_contribution_length_mismatch() -> None:
    with pytest.raises(ValueError, match="2 hits but 1 weights"):
        Contribution([Hit("a", 1.0), Hit("b", 1.0)], [1.0])


@pytest.mark.parametrize("k", [0, -5])
def test_rrf_k_below_one(k: int) -> None:
    with pytest.raises(ValueError, match=f"rrf k must be >= 1, got {k}"):
        reciprocal_rank_fusion([LEXICAL], k=k)


# ---------------------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------------------

_ids = st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=6)
_weights = st.floats(min_value=0.0, max_value=3.0, allow_nan=False)


@st.composite
def _contribution(draw: st.DrawFn) -> Contribution:
    ids = draw(_ids)
    scores = sorted(draw(st.lists(st.floats(-1.0, 10.0), min_size=len(ids), max_size=len(ids))), reverse=True)
    weights = draw(st.lists(_weights, min_size=len(ids), max_size=len(ids)))
    return Contribution([Hit(c, s) for c, s in zip(ids, scores, strict=True)], weights)


@given(st.lists(_contribution(), max_size=3), st.sampled_from(sorted(FUSION_METHODS)), st.integers(1, 100))
def test_fused_output_is_ordered_positive_and_from_inputs(
    contributions: list[Contribution], method: str, k: int
) -> None:
    fused = fusion_method(method)(contributions, k)
    assert fused == order_hits(fused)
    assert all(hit.score > 0 for hit in fused)
    ids = [hit.chunk_id for hit in fused]
    assert len(ids) == len(set(ids))
    assert set(ids) <= {hit.chunk_id for c in contributions for hit in c.hits}


@given(_ids, st.integers(1, 100))
def test_rrf_of_one_unit_weight_list_keeps_its_order(ids: list[str], k: int) -> None:
    hits = [Hit(c, float(len(ids) - i)) for i, c in enumerate(ids)]
    fused = reciprocal_rank_fusion([Contribution(hits, [1.0] * len(hits))], k)
    assert [hit.chunk_id for hit in fused] == ids
    assert [hit.score for hit in fused] == [1 / (k + rank) for rank in range(1, len(ids) + 1)]


def test_max_normalized_scale_ignores_zero_weight_hits() -> None:
    # a (3.0) carries no weight, so b (2.0) is the list's best: 1.0 * 2.0 / 2.0 = 1.0, not 2.0 / 3.0.
    lexical = Contribution([Hit("a", 3.0), Hit("b", 2.0)], [0.0, 1.0])
    assert max_normalized_fusion([lexical], 60) == [Hit("b", 1.0)]


def test_fusion_vocabulary_matches_the_registry() -> None:
    from typing import get_args

    from evalkit.data.settings import FusionName

    assert sorted(get_args(FusionName)) == sorted(FUSION_METHODS)
