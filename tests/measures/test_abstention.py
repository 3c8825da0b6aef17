"""Tests for evalkit.measures.abstention: hand-computed curve points, the choice rule, the seeded split, edge cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.measures.abstention import (
    abstention_curve,
    calibrate_floor,
    calibration_mask,
    candidate_floors,
    choose_floor,
    outcome_at,
)

# Four answerable queries (confidence 5, 4, 2, NaN; recall 1, 1, 0.5, 0) and three no-answer ones (3, 1, 0.5).
CONFIDENCE = [5.0, 4.0, 2.0, math.nan, 3.0, 1.0, 0.5]
ANSWERABLE = [True, True, True, True, False, False, False]
RECALL = [1.0, 1.0, 0.5, 0.0, 0.0, 0.0, 0.0]


def test_outcome_hand_computed() -> None:
    none = outcome_at(None, CONFIDENCE, ANSWERABLE, RECALL)
    assert none.no_answer_fpr == 1.0
    assert none.recall_at_10 == pytest.approx(2.5 / 4)
    assert none.recall_loss == 0.0
    at_two = outcome_at(2.0, CONFIDENCE, ANSWERABLE, RECALL)
    assert at_two.no_answer_fpr == pytest.approx(1 / 3)  # only 3.0 passes
    assert at_two.recall_at_10 == pytest.approx(2.5 / 4)
    at_four = outcome_at(4.0, CONFIDENCE, ANSWERABLE, RECALL)
    assert at_four.no_answer_fpr == 0.0
    assert at_four.recall_at_10 == pytest.approx(2 / 4)
    assert at_four.recall_loss == pytest.approx(0.5 / 4)


def test_curve_covers_every_decision_in_order() -> None:
    assert candidate_floors(CONFIDENCE) == [None, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0]
    curve = abstention_curve(CONFIDENCE, ANSWERABLE, RECALL)
    assert [p.floor for p in curve] == candidate_floors(CONFIDENCE)
    fprs = [p.no_answer_fpr for p in curve]
    recalls = [p.recall_at_10 for p in curve]
    assert fprs == sorted(fprs, reverse=True)
    assert recalls == sorted(recalls, reverse=True)


def test_choose_floor_lowest_fpr_within_budget_then_lowest_floor() -> None:
    curve = abstention_curve(CONFIDENCE, ANSWERABLE, RECALL)
    assert choose_floor(curve, 0.0).floor == 2.0  # FPR 1/3 without losing recall (3.0 would lose 0.125)
    assert choose_floor(curve, 0.125).floor == 4.0  # FPR 0 at a loss of 0.125
    assert choose_floor(curve[:1], 0.0).floor is None
    with pytest.raises(ValueError, match="no abstention points"):
        choose_floor([], 0.05)


def test_no_queries_of_a_kind() -> None:
    only_answerable = outcome_at(1.0, [2.0, 0.5], [True, True], [1.0, 1.0])
    assert only_answerable.no_answer_fpr == 0.0
    assert only_answerable.recall_loss == pytest.approx(0.5)
    only_negative = outcome_at(1.0, [2.0, 0.5], [False, False], [0.0, 0.0])
    assert only_negative.no_answer_fpr == 0.5
    assert only_negative.recall_at_10 == 0.0


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="equal-length"):
        outcome_at(None, [1.0], [True, False], [1.0])
    with pytest.raises(ValueError, match="confidence: infinite"):
        outcome_at(None, [math.inf], [True], [1.0])
    with pytest.raises(ValueError, match=r"recall: every value must be in \[0, 1\]"):
        outcome_at(None, [1.0], [True], [1.5])
    with pytest.raises(ValueError, match="calibration fraction"):
        calibration_mask([True], 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="max_recall_loss"):
        calibrate_floor([1.0], [True], [1.0], max_recall_loss=2.0)


def test_split_is_stratified_seeded_and_reproducible() -> None:
    answerable = [True] * 10 + [False] * 4
    mask = calibration_mask(answerable, 0.5, np.random.default_rng(7))
    assert mask[:10].sum() == 5 and mask[10:].sum() == 2
    again = calibration_mask(answerable, 0.5, np.random.default_rng(7))
    assert (mask == again).all()
    other = [calibration_mask(answerable, 0.5, np.random.default_rng(s)) for s in range(5)]
    assert any((m != mask).any() for m in other)


def test_calibration_reports_held_out_queries_it_was_not_chosen_on() -> None:
    rng = np.random.default_rng(0)
    answerable = [True] * 200 + [False] * 60
    # answerable queries are more confident on average; recall 1 for all of them
    confidence = np.concatenate([rng.normal(3.0, 1.0, 200), rng.normal(1.0, 1.0, 60)])
    calibrated = calibrate_floor(confidence, answerable, [1.0] * 200 + [0.0] * 60, seed=3, max_recall_loss=0.05)
    assert calibrated.calibration_queries == 130 and calibrated.held_out_queries == 130
    assert calibrated.calibration.recall_loss <= 0.05
    assert calibrated.floor is not None
    expected = outcome_at(calibrated.floor, confidence, answerable, [1.0] * 200 + [0.0] * 60)
    # the held-out half and the whole set agree roughly; the held-out point is measured at the same floor
    assert calibrated.held_out.floor == calibrated.floor
    assert abs(calibrated.held_out.no_answer_fpr - expected.no_answer_fpr) < 0.2
    assert calibrated.held_out.no_answer_fpr < 0.6
    assert calibrate_floor(confidence, answerable, [1.0] * 200 + [0.0] * 60, seed=3) == calibrated


@given(
    st.lists(
        st.tuples(st.floats(-5, 5, allow_nan=False), st.booleans(), st.floats(0, 1, allow_nan=False)),
        min_size=1,
        max_size=30,
    )
)
def test_curve_is_monotone_and_loss_never_negative(rows: list[tuple[float, bool, float]]) -> None:
    confidence, answerable, recall = zip(*rows, strict=True)
    curve = abstention_curve(list(confidence), list(answerable), list(recall))
    assert curve[0].floor is None
    for before, after in itertools.pairwise(curve):
        assert after.no_answer_fpr <= before.no_answer_fpr
        assert after.recall_at_10 <= before.recall_at_10 + 1e-12
    assert all(p.recall_loss >= -1e-12 for p in curve)


@given(
    st.lists(
        st.tuples(
            st.one_of(st.floats(-5, 5, allow_nan=False), st.just(math.nan)),
            st.booleans(),
            st.floats(0, 1, allow_nan=False),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_curve_equals_outcome_at_every_floor(rows: list[tuple[float, bool, float]]) -> None:
    confidence, answerable, recall = (list(column) for column in zip(*rows, strict=True))
    curve = abstention_curve(confidence, answerable, recall)
    for point in curve:
        expected = outcome_at(point.floor, confidence, answerable, recall)
        assert point.floor == expected.floor
        assert point.no_answer_fpr == pytest.approx(expected.no_answer_fpr, abs=1e-12)
        assert point.recall_at_10 == pytest.approx(expected.recall_at_10, abs=1e-12)
        assert point.recall_loss == pytest.approx(expected.recall_loss, abs=1e-12)
