"""Bootstrap intervals, the sign-flip test and Holm's adjustment: hand-computed cases and scipy as the peer."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evalkit.measures import statistics
from evalkit.measures.statistics import (
    Alternative,
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


def test_holm_counts_a_repeated_hypothesis_once() -> None:
    # Positions 1 and 3 test again what 0 and 2 test: Holm over [0.01, 0.03] (m = 2), each repeat given its first's.
    once = holm_adjust([0.01, 0.01, 0.03, 0.03], same_as=[0, 0, 2, 2])
    assert once.tolist() == pytest.approx([0.02, 0.02, 0.03, 0.03])
    assert holm_adjust([0.01, 0.01, 0.03, 0.03]).tolist() == pytest.approx([0.04, 0.04, 0.06, 0.06])  # counted twice
    assert holm_adjust([0.2, 0.01], same_as=[0, 1]).tolist() == holm_adjust([0.2, 0.01]).tolist()
    with pytest.raises(ValueError, match="one position"):
        holm_adjust([0.1, 0.2], same_as=[0, 2])
    with pytest.raises(ValueError, match="repeat no other"):
        holm_adjust([0.1, 0.2, 0.3], same_as=[0, 0, 1])


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


def test_small_samples_keep_the_numbers_they_always_had() -> None:
    # Recorded before the large-sample methods existed: below statistics._EXACT_CELLS nothing changed, to the bit.
    matrix = np.round(np.random.default_rng(21).random((60, 3)), 6)
    settings = StatisticsSettings(resamples=1_000, seed=5)
    assert bootstrap_mean_intervals(matrix, settings).tolist() == [
        [0.5015451525, 0.6437136025],
        [0.338749031667, 0.489711992083],
        [0.421092998333, 0.570100957917],
    ]
    differences = matrix[:, :2] - matrix[:, 1:]
    assert sign_flip_p_values(differences, settings).tolist() == [0.003996003996003996, 0.14985014985014986]
    assert sign_flip_p_values(differences, settings, "less").tolist() == [0.999000999000999, 0.08191808191808192]


@pytest.fixture
def large_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call takes the large-sample methods, so that they can be checked against scipy at a size scipy runs
    quickly."""
    monkeypatch.setattr(statistics, "_EXACT_CELLS", 0)


LARGE_COLUMNS = {
    # many distinct values: the Cornish-Fisher interval
    "continuous": lambda rng, n: rng.beta(2.0, 3.0, size=n),
    "mostly zero": lambda rng, n: np.where(rng.random(n) < 0.9, 0.0, rng.random(n)),
    # few distinct values: resampled over them
    "eleven levels": lambda rng, n: rng.integers(0, 11, size=n) / 10,
    "rare ones": lambda rng, n: np.where(rng.random(n) < 0.995, 0.0, 1.0),
}


@pytest.mark.usefixtures("large_samples")
@pytest.mark.parametrize("kind", sorted(LARGE_COLUMNS))
def test_large_sample_interval_agrees_with_scipy(kind: str) -> None:
    values = LARGE_COLUMNS[kind](np.random.default_rng(13), 2_000)
    ours = bootstrap_mean_intervals(values)[0]
    theirs = stats.bootstrap(
        (values,), np.mean, method="percentile", n_resamples=20_000, random_state=np.random.default_rng(17)
    ).confidence_interval
    # Both estimate the ideal bootstrap's quantiles; scipy's Monte Carlo error is about 2% of the width.
    width = theirs.high - theirs.low
    assert ours[0] == pytest.approx(theirs.low, abs=0.05 * width)
    assert ours[1] == pytest.approx(theirs.high, abs=0.05 * width)


SIGN_COLUMNS = {
    "continuous": lambda rng, n: rng.normal(0.01, 0.3, size=n),  # the Edgeworth p-value
    "lattice": lambda rng, n: rng.integers(-3, 4, size=n) / 10 + 0.02 * (rng.random(n) < 0.3),  # binomial counts
    "few differ": lambda rng, n: np.where(np.arange(n) < 12, rng.normal(0.2, 0.1, size=n), 0.0),  # exact
}


@pytest.mark.usefixtures("large_samples")
@pytest.mark.parametrize("kind", sorted(SIGN_COLUMNS))
@pytest.mark.parametrize("alternative", ["two-sided", "less"])
def test_large_sample_sign_flip_agrees_with_scipy(kind: str, alternative: Alternative) -> None:
    differences = SIGN_COLUMNS[kind](np.random.default_rng(19), 2_000)
    ours = sign_flip_p_values(differences, alternative=alternative)[0]
    differing = differences[differences != 0.0]
    theirs = stats.permutation_test(
        (differing,),
        np.mean,
        permutation_type="samples",
        n_resamples=50_000,
        alternative=alternative,
        random_state=np.random.default_rng(23),
    ).pvalue
    if kind == "few differ":
        assert ours == pytest.approx(theirs, rel=1e-12)  # both enumerate the 2**12 sign patterns
    else:
        assert ours == pytest.approx(theirs, abs=0.015)


@pytest.mark.usefixtures("large_samples")
def test_large_sample_columns_are_seeded_and_do_not_interact() -> None:
    rng = np.random.default_rng(29)
    matrix = np.column_stack([column(rng, 500) for column in LARGE_COLUMNS.values()])
    together = bootstrap_mean_intervals(matrix, FAST)
    assert bootstrap_mean_intervals(matrix[:, 2], FAST).tolist() == [together[2].tolist()]
    assert bootstrap_mean_intervals(matrix, FAST).tolist() == together.tolist()
    differences = matrix - matrix[::-1]
    p_values = sign_flip_p_values(differences, FAST)
    assert sign_flip_p_values(differences[:, 2], FAST).tolist() == [p_values[2]]
    assert sign_flip_p_values(np.zeros(100)).tolist() == [1.0]
    assert bootstrap_mean_intervals(np.full(100, 0.25)).tolist() == [[0.25, 0.25]]


@pytest.mark.usefixtures("large_samples")
def test_large_sample_p_values_keep_the_randomized_floor() -> None:
    # Every one of 5,000 queries better by a spread-out amount: the ideal p is astronomically small, and the
    # reported p is the expected Monte Carlo p-value, never below 1 / (resamples + 1).
    differences = np.random.default_rng(31).uniform(0.1, 0.2, size=5_000)
    assert sign_flip_p_values(differences, FAST).tolist() == [1 / 2_001]
