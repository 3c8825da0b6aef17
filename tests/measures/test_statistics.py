"""Bootstrap intervals, the sign-flip test and Holm's adjustment: hand-computed cases and scipy as the peer."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evalkit.measures.statistics import (
    StatisticsSettings,
    bootstrap_mean_intervals,
    holm_adjust,
    paired_bootstrap_intervals,
    sign_flip_p_values,
)

FAST = StatisticsSettings(resamples=2_000, seed=7)


def test_two_point_bootstrap_interval_is_hand_computed() -> None:
    # Resampled means of (0, 1) are 0, 0.5, 1 with chances 1/4, 1/2, 1/4: the 2.5% and 97.5% quantiles are 0 and 1.
    assert bootstrap_mean_intervals([0.0, 1.0]).tolist() == [[0.0, 1.0]]


def test_constant_and_single_query_columns_give_degenerate_intervals() -> None:
    assert bootstrap_mean_intervals([[0.25, 1.0], [0.25, 1.0], [0.25, 1.0]]).tolist() == [[0.25, 0.25], [1.0, 1.0]]
    assert bootstrap_mean_intervals([0.7]).tolist() == [[0.7, 0.7]]


def test_bootstrap_interval_agrees_with_scipy() -> None:
    values = np.random.default_rng(3).beta(2.0, 3.0, size=300)
    ours = bootstrap_mean_intervals(values)[0]
    theirs = stats.bootstrap(
        (values,), np.mean, method="percentile", n_resamples=10_000, random_state=np.random.default_rng(11)
    ).confidence_interval
    # Both are Monte Carlo estimates of the same quantiles (interval width about 0.05).
    assert ours[0] == pytest.approx(theirs.low, abs=0.002)
    assert ours[1] == pytest.approx(theirs.high, abs=0.002)
    assert ours[0] < values.mean() < ours[1]


def test_bootstrap_is_seeded_and_columns_do_not_interact() -> None:
    matrix = np.random.default_rng(5).random((50, 3))
    together = bootstrap_mean_intervals(matrix, FAST)
    alone = bootstrap_mean_intervals(matrix[:, 1], FAST)
    assert together[1].tolist() == alone[0].tolist()
    assert bootstrap_mean_intervals(matrix, FAST).tolist() == together.tolist()
    other_seed = bootstrap_mean_intervals(matrix, StatisticsSettings(resamples=2_000, seed=8))
    assert other_seed.tolist() != together.tolist()


def test_paired_interval_is_the_interval_of_the_differences() -> None:
    rng = np.random.default_rng(9)
    base, head = rng.random(40), rng.random(40)
    assert paired_bootstrap_intervals(base, head, FAST).tolist() == bootstrap_mean_intervals(head - base, FAST).tolist()
    with pytest.raises(ValueError, match="same shape"):
        paired_bootstrap_intervals(base, head[:-1])


@pytest.mark.parametrize(
    ("differences", "expected"),
    [([1.0, 1.0, 1.0], 0.25), ([1.0, 2.0], 0.5), ([0.5, -0.5], 1.0), ([3.0, 1.0, 1.0, 1.0], 0.125)],
)
def test_exact_sign_flip_p_values_are_hand_computed(differences: list[float], expected: float) -> None:
    # [3, 1, 1, 1]: of the 16 sign vectors only (+,+,+,+) and (-,-,-,-) reach |sum| >= 6, so p = 2/16.
    assert sign_flip_p_values(differences).tolist() == [expected]


def test_all_zero_differences_give_p_one() -> None:
    assert sign_flip_p_values(np.zeros((20_000, 2))).tolist() == [1.0, 1.0]
    assert sign_flip_p_values(np.zeros(5)).tolist() == [1.0]


def test_exact_test_equals_scipy_exact_test() -> None:
    differences = np.random.default_rng(1).normal(0.1, 0.3, size=11)
    ours = sign_flip_p_values(differences)[0]
    theirs = stats.permutation_test((differences,), np.mean, permutation_type="samples", n_resamples=10_000)
    assert ours == pytest.approx(theirs.pvalue, rel=1e-12)


def test_randomized_test_agrees_with_scipy() -> None:
    differences = np.random.default_rng(2).normal(0.04, 0.3, size=120)
    ours = sign_flip_p_values(differences)[0]
    theirs = stats.permutation_test(
        (differences,), np.mean, permutation_type="samples", n_resamples=50_000, random_state=np.random.default_rng(4)
    ).pvalue
    assert 0.05 < theirs < 0.5, "the case should be neither trivial nor hopeless"
    assert ours == pytest.approx(theirs, abs=0.015)


def test_randomized_p_value_is_never_zero() -> None:
    p = sign_flip_p_values(np.full(200, 0.5), StatisticsSettings(resamples=999))[0]
    assert p == pytest.approx(1 / 1000)


def test_holm_adjustment_is_hand_computed() -> None:
    # Sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, max(0.06, 0.04*1)=0.06.
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([0.5, 0.9]).tolist() == [1.0, 1.0]
    assert holm_adjust([]).tolist() == []


def test_holm_never_lowers_a_p_value_and_keeps_the_order() -> None:
    p = np.random.default_rng(6).random(50) ** 3
    adjusted = holm_adjust(p)
    assert (adjusted >= p).all()
    order = np.argsort(p, kind="stable")
    assert (np.diff(adjusted[order]) >= 0).all()


@pytest.mark.parametrize("bad", [[np.nan, 1.0], [np.inf]])
def test_non_finite_values_are_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="NaN or infinite"):
        bootstrap_mean_intervals(bad)
    with pytest.raises(ValueError, match="NaN or infinite"):
        sign_flip_p_values(bad)


def test_empty_and_out_of_range_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="no queries"):
        bootstrap_mean_intervals([])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm_adjust([0.5, 1.5])


def test_one_sided_exact_test_equals_scipy_and_halves_a_symmetric_two_sided_p() -> None:
    differences = np.random.default_rng(5).normal(-0.1, 0.3, size=11)
    ours = sign_flip_p_values(differences, alternative="less")[0]
    theirs = stats.permutation_test(
        (differences,), np.mean, permutation_type="samples", n_resamples=10_000, alternative="less"
    ).pvalue
    assert ours == pytest.approx(theirs, rel=1e-12)
    # Differences -1, -1, -1: one of the 8 sign patterns has a sum <= -3 (one-sided), two have |sum| >= 3.
    assert sign_flip_p_values([-1.0, -1.0, -1.0], alternative="less").tolist() == [1 / 8]
    assert sign_flip_p_values([-1.0, -1.0, -1.0]).tolist() == [2 / 8]
    assert sign_flip_p_values([1.0, 1.0, 1.0], alternative="less").tolist() == [1.0]
    assert sign_flip_p_values([0.0, 0.0], alternative="less").tolist() == [1.0]


def test_one_sided_randomized_test_uses_the_same_resamples_as_the_two_sided_one() -> None:
    differences = np.random.default_rng(6).normal(-0.05, 0.3, size=150)
    one_sided = sign_flip_p_values(differences, FAST, "less")[0]
    two_sided = sign_flip_p_values(differences, FAST)[0]
    assert one_sided == sign_flip_p_values(differences, FAST, "less")[0], "seeded: the same p in every call"
    assert one_sided < two_sided and two_sided == pytest.approx(2 * one_sided, abs=0.02)
    with pytest.raises(ValueError, match="unknown alternative"):
        sign_flip_p_values(differences, FAST, "greater")  # type: ignore[arg-type]
