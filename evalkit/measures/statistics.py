"""Statistics over per-query values: bootstrap intervals, the paired sign-flip test and Holm's correction.

After Smucker, Allan and Carterette, "A Comparison of Statistical Significance Tests for Information Retrieval
Evaluation" (CIKM 2007) and Sakai, "Statistical reform in information retrieval" (SIGIR Forum 2014): two systems
are compared on the same queries with a paired test, every interval is reported beside its p-value, and a family of
comparisons is corrected for multiplicity.

Everything is vectorized numpy over a ``(queries, columns)`` matrix, so one call serves every measure and ablation
of a slice. Randomness comes only from a ``numpy.random.Generator`` made from an explicit seed *inside* each call:
the resamples depend on (seed, number of queries, resamples) and nothing else, so a column's interval or p-value
does not change when other columns are added, and every process gets the same numbers. The tests check the
functions against ``scipy.stats.bootstrap`` and ``scipy.stats.permutation_test``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from statistics import NormalDist
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field

from evalkit.data.schema import StrictModel

__all__ = [
    "DEFAULT_STATISTICS",
    "StatisticsSettings",
    "bootstrap_mean_intervals",
    "holm_adjust",
    "minimum_detectable_effect",
    "paired_bootstrap_intervals",
    "queries_needed",
    "sign_flip_p_floor",
    "sign_flip_p_values",
]

Alternative = Literal["two-sided", "less"]
"""``two-sided``: the mean difference is not 0; ``less``: it is below 0 (one-sided)."""
DEFAULT_POWER: Final = 0.8
"""The chance of detecting a true effect of the minimum detectable size."""

FloatArray = npt.NDArray[np.float64]

_CELLS_PER_BLOCK: Final = 1 << 22
"""Resamples are handled in blocks of at most this many (resample, query) cells (32 MB of float64): large enough
for an efficient matrix product over many columns, small enough to bound memory whatever the query count."""
_CELLS_PER_COUNT: Final = 1 << 18
"""Bootstrap counts are scattered in pieces of this many cells (2 MB, cache-sized: several times faster)."""
_EXACT_CELLS: Final = 1 << 26
"""Up to this many (resample, query) cells (6,710 queries at 10,000 resamples) every resample is drawn over every
query. Above it each column is handled on its own by :func:`_large_sample_intervals` and
:func:`_large_sample_p_values`, whose cost grows with the column's distinct values, not with queries x resamples."""
_DISTINCT_CELLS: Final = 1 << 21
"""Above :data:`_EXACT_CELLS`, a column with at most this many (resample, distinct value) cells (209 distinct values
at 10,000 resamples) is still resampled, over its distinct values; one with more takes the large-sample expansion."""
_NEAR_NORMAL: Final = 0.1
"""The expansions are used only when the skewness and excess kurtosis of the statistic's distribution are at most
this (in absolute value): the terms they leave out are then of the order of 0.001 standard deviations, far below the
Monte Carlo error of 10,000 resamples (about 0.03 standard deviations at the ends of a 95% interval)."""
_TIE_TOLERANCE: Final = 1e-10
"""Two sums of per-query differences closer than this are equal (float noise, not a real difference)."""
INTERVAL_DECIMALS: Final = 12
"""Interval ends are rounded to this many places so that BLAS summation noise never reaches the report bytes."""


class StatisticsSettings(StrictModel):
    """How intervals and p-values are computed: part of the evaluation definition."""

    confidence: float = Field(default=0.95, gt=0.0, lt=1.0, description="coverage of every confidence interval")
    resamples: int = Field(default=10_000, ge=100, le=1_000_000, description="bootstrap and permutation resamples")
    seed: int = Field(default=0, ge=0, description="seed of the numpy Generator behind every resample")


DEFAULT_STATISTICS: Final = StatisticsSettings()
"""The settings every report uses: 95% percentile bootstrap intervals and sign-flip tests, 10,000 resamples."""


def _as_matrix(values: npt.ArrayLike, name: str) -> FloatArray:
    matrix = np.asarray(values, dtype=np.float64)
    if matrix.ndim == 1:
        matrix = matrix[:, None]
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be a vector or a (queries, columns) matrix, got {matrix.ndim} dimensions")
    if matrix.shape[0] == 0:
        raise ValueError(f"{name} has no queries")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return matrix


def _blocks(total: int, queries: int) -> Iterator[int]:
    """Sizes of resample blocks summing to ``total``, each small enough to keep memory bounded."""
    size = max(1, _CELLS_PER_BLOCK // queries)
    for start in range(0, total, size):
        yield min(size, total - start)


def _resample_counts(rng: np.random.Generator, block: int, queries: int) -> FloatArray:
    """How often each query is drawn in each of ``block`` bootstrap resamples (rows sum to ``queries``)."""
    counts = np.empty((block, queries), dtype=np.float64)
    piece = max(1, _CELLS_PER_COUNT // queries)
    for start in range(0, block, piece):
        rows = min(piece, block - start)
        draws = rng.integers(0, queries, size=(rows, queries))
        offsets = (np.arange(rows, dtype=np.int64) * queries)[:, None]
        counts[start : start + rows] = np.bincount((draws + offsets).ravel(), minlength=rows * queries).reshape(
            rows, queries
        )
    return counts


def bootstrap_mean_intervals(values: npt.ArrayLike, settings: StatisticsSettings = DEFAULT_STATISTICS) -> FloatArray:
    """Percentile bootstrap confidence interval of the mean of each column.

    ``values`` is a vector or a ``(queries, columns)`` matrix; queries are resampled with replacement
    ``settings.resamples`` times (the same resamples for every column), each resample's column means are taken, and
    the interval is the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of those means (numpy's
    linear interpolation, as ``scipy.stats.bootstrap(method="percentile")``). Returns a ``(columns, 2)`` array of
    ``(low, high)``, rounded to :data:`INTERVAL_DECIMALS` places.

    Edge cases: one query gives the degenerate interval ``(v, v)``; no queries, NaN or infinity -> ``ValueError``.
    """
    matrix = _as_matrix(values, "values")
    queries = matrix.shape[0]
    if _large(queries, settings):
        return _large_sample_intervals(matrix, settings)
    rng = np.random.default_rng(settings.seed)
    means = np.concatenate(
        [_resample_counts(rng, block, queries) @ matrix / queries for block in _blocks(settings.resamples, queries)]
    )
    tail = (1.0 - settings.confidence) / 2.0
    bounds = np.quantile(means, [tail, 1.0 - tail], axis=0).T
    # A constant column must give exactly (v, v): the resampled means of a constant agree only up to rounding.
    constant = np.ptp(matrix, axis=0) == 0.0
    bounds[constant] = matrix[0, constant][:, None]
    return np.asarray(np.round(bounds, INTERVAL_DECIMALS), dtype=np.float64)


def paired_bootstrap_intervals(
    base: npt.ArrayLike, head: npt.ArrayLike, settings: StatisticsSettings = DEFAULT_STATISTICS
) -> FloatArray:
    """Bootstrap interval of the mean paired difference ``head - base`` per column (rows are the same queries)."""
    return bootstrap_mean_intervals(_differences(base, head), settings)


def _differences(base: npt.ArrayLike, head: npt.ArrayLike) -> FloatArray:
    base_matrix, head_matrix = _as_matrix(base, "base"), _as_matrix(head, "head")
    if base_matrix.shape != head_matrix.shape:
        raise ValueError(f"base and head must have the same shape, got {base_matrix.shape} and {head_matrix.shape}")
    return head_matrix - base_matrix


def _sign_blocks(rng: np.random.Generator | None, resamples: int, queries: int) -> Iterator[FloatArray]:
    """Sign vectors: all ``2**queries`` of them when ``rng`` is None (exact test), else ``resamples`` random ones."""
    if rng is None:
        codes = np.arange(2**queries, dtype=np.int64)[:, None]
        bits = (codes >> np.arange(queries, dtype=np.int64)) & 1
        yield 1.0 - 2.0 * bits.astype(np.float64)
        return
    width = -(-queries // 8)
    for block in _blocks(resamples, queries):
        # Eight fair coin flips per random byte: eight times fewer draws than one integer per sign.
        random_bytes = rng.integers(0, 256, size=(block, width), dtype=np.uint8)
        yield 1.0 - 2.0 * np.unpackbits(random_bytes, axis=1, count=queries).astype(np.float64)


def sign_flip_p_values(
    differences: npt.ArrayLike,
    settings: StatisticsSettings = DEFAULT_STATISTICS,
    alternative: Alternative = "two-sided",
) -> FloatArray:
    """Paired randomization (sign-flip permutation) test of a zero mean difference, per column.

    Under the null hypothesis each query's difference ``head - base`` is as likely to have either sign. The
    statistic is ``|sum(d)|`` (equivalently the absolute mean); the p-value is the share of sign assignments whose
    statistic is at least the observed one. With ``2**queries <= resamples`` every assignment is enumerated (the
    exact test); otherwise ``resamples`` random assignments are drawn and ``p = (1 + hits) / (1 + resamples)``,
    which counts the observed assignment and is never 0 (Phipson and Smyth 2010). Both agree with
    ``scipy.stats.permutation_test(permutation_type="samples")`` on one sample of differences.

    ``alternative="less"`` is the one-sided test of a negative mean: the statistic is ``sum(d)`` itself and the
    p-value the share of sign assignments whose sum is at most the observed one (scipy's ``alternative="less"``).
    The resamples are the same as the two-sided test's (same seed, same sign vectors).

    Edge cases: all differences zero -> ``p = 1``; sums within 1e-10 of the observed one count as ties (at least as
    extreme); no queries, NaN or infinity -> ``ValueError``.
    """
    matrix = _as_matrix(differences, "differences")
    extreme = _extreme(matrix, alternative)
    if _large(matrix.shape[0], settings):
        return _large_sample_p_values(matrix, settings, alternative)
    return _p_values(matrix, settings, extreme)


Extreme = Callable[[FloatArray], npt.NDArray[np.bool_]]
"""Which resampled column sums are at least as extreme as the observed ones."""


def _extreme(matrix: FloatArray, alternative: Alternative) -> Extreme:
    if alternative == "less":
        bound = matrix.sum(axis=0) + _TIE_TOLERANCE
        return lambda sums: sums <= bound
    if alternative != "two-sided":
        raise ValueError(f"unknown alternative {alternative!r}; valid: two-sided, less")
    observed = np.abs(matrix.sum(axis=0)) - _TIE_TOLERANCE
    return lambda sums: np.abs(sums) >= observed


def _p_values(matrix: FloatArray, settings: StatisticsSettings, extreme: Extreme) -> FloatArray:
    """Share of sign assignments whose column sums are ``extreme`` (exact, or Monte Carlo with the +1 rule)."""
    queries = matrix.shape[0]
    exact = 2**queries <= settings.resamples
    rng = None if exact else np.random.default_rng(settings.seed)
    hits = np.zeros(matrix.shape[1], dtype=np.int64)
    total = 0
    for signs in _sign_blocks(rng, settings.resamples, queries):
        hits += extreme(signs @ matrix).sum(axis=0)
        total += signs.shape[0]
    p_values = hits / total if exact else (hits + 1) / (total + 1)
    return np.asarray(np.minimum(p_values, 1.0), dtype=np.float64)


def _large(queries: int, settings: StatisticsSettings) -> bool:
    return queries * settings.resamples > _EXACT_CELLS


def _standard_moments(values: FloatArray) -> tuple[float, float, float]:
    """Variance, skewness and excess kurtosis of `values` (population moments, ddof 0)."""
    centred = values - values.mean()
    squares = centred * centred
    variance = float(squares.mean())
    skewness = float((squares * centred).mean()) / variance**1.5
    return variance, skewness, float((squares * squares).mean()) / variance**2 - 3.0


def _cornish_fisher(z: float, skewness: float, kurtosis: float) -> float:
    """The standardised quantile, at the normal quantile `z`, of a distribution with this skewness and excess
    kurtosis (Cornish and Fisher 1937, terms to the order of the kurtosis)."""
    return (
        z
        + skewness * (z * z - 1.0) / 6.0
        + kurtosis * (z**3 - 3.0 * z) / 24.0
        - skewness**2 * (2.0 * z**3 - 5.0 * z) / 36.0
    )


def _large_sample_intervals(matrix: FloatArray, settings: StatisticsSettings) -> FloatArray:
    """:func:`bootstrap_mean_intervals` above :data:`_EXACT_CELLS`, one column at a time.

    The resampled mean is the mean of ``n`` draws from the column's values, so only the column's distinct values and
    how often each occurs matter. A column of few distinct values is resampled over them: each resample's counts of
    the distinct values are one multinomial draw (the same distribution as drawing ``n`` queries), from a Generator
    seeded with ``settings.seed``. A column of many distinct values takes the interval of the ideal bootstrap (every
    resample, not ``settings.resamples`` of them): the Cornish-Fisher quantiles of the resampled mean, whose mean,
    variance, skewness and excess kurtosis are the column's mean, variance / n, skewness / sqrt(n) and excess kurtosis
    / n. It is used only when the last two are at most :data:`_NEAR_NORMAL`; a column too skewed for it is resampled.
    """
    queries = matrix.shape[0]
    tail = (1.0 - settings.confidence) / 2.0
    bounds = np.empty((matrix.shape[1], 2), dtype=np.float64)
    for column_index, column in enumerate(matrix.T):
        values, counts = np.unique(column, return_counts=True)
        if values.size == 1:
            bounds[column_index] = values[0]
            continue
        variance, skewness, kurtosis = _standard_moments(column)
        skewness, kurtosis = skewness / math.sqrt(queries), kurtosis / queries
        if values.size * settings.resamples > _DISTINCT_CELLS and max(abs(skewness), abs(kurtosis)) <= _NEAR_NORMAL:
            spread, mean = math.sqrt(variance / queries), float(column.mean())
            ends = (_cornish_fisher(_z(q), skewness, kurtosis) for q in (tail, 1.0 - tail))
            bounds[column_index] = [mean + spread * end for end in ends]
            continue
        rng = np.random.default_rng(settings.seed)
        shares = counts / queries
        means = np.concatenate(
            [
                rng.multinomial(queries, shares, size=block) @ values / queries
                for block in _blocks(settings.resamples, values.size)
            ]
        )
        bounds[column_index] = np.quantile(means, [tail, 1.0 - tail])
    return np.asarray(np.round(bounds, INTERVAL_DECIMALS), dtype=np.float64)


def _large_sample_p_values(matrix: FloatArray, settings: StatisticsSettings, alternative: Alternative) -> FloatArray:
    """:func:`sign_flip_p_values` above :data:`_EXACT_CELLS`, one column at a time.

    A query whose difference is 0 sums to 0 under either sign, and a random sign times ``d`` is a random sign times
    ``|d|``: so the sum under random signs is ``sum_v v (2 B_v - c_v)`` over the distinct non-zero magnitudes ``v``,
    each held by ``c_v`` queries, with ``B_v`` binomial(``c_v``, 1/2). With ``2**m <= resamples`` for the ``m``
    non-zero differences, every assignment of their signs is enumerated (the exact test). A column of few distinct
    magnitudes is resampled through those binomial counts (the same distribution as flipping every sign; the +1 rule
    as above). A column of many takes the p-value of the ideal test (every assignment) from the Edgeworth expansion of
    the sum's distribution (mean 0, variance ``sum d^2``, excess kurtosis ``-2 sum d^4 / (sum d^2)^2``, no skewness),
    used only when that kurtosis is at most :data:`_NEAR_NORMAL` in absolute value and the spread of the other
    differences is at least twice each magnitude (no lumps a normal curve would miss), and reported as the expected
    value of the Monte Carlo p-value, ``(resamples * p + 1) / (resamples + 1)``, so that it keeps the same floor.
    """
    resamples = settings.resamples
    p_values = np.ones(matrix.shape[1], dtype=np.float64)
    for column_index, column in enumerate(matrix.T):
        differing = column[column != 0.0][:, None]
        if not differing.size:
            continue  # every difference 0: every assignment is as extreme, p = 1
        extreme = _extreme(differing, alternative)
        if 2**differing.size <= resamples:
            signs = next(_sign_blocks(None, resamples, differing.size))
            p_values[column_index] = extreme(signs @ differing).mean()
            continue
        magnitudes, counts = np.unique(np.abs(differing), return_counts=True)
        squares = differing[:, 0] ** 2
        variance = float(squares.sum())
        kurtosis = -2.0 * float((squares * squares).sum()) / variance**2
        # No magnitude may make the sum lumpy: the other differences' spread must be at least twice it (then the
        # lattice its queries put on the sum is smoothed out to a few parts in a billion).
        smooth = bool(np.all(variance - counts * magnitudes**2 >= 4.0 * magnitudes**2))
        if magnitudes.size * resamples > _DISTINCT_CELLS and abs(kurtosis) <= _NEAR_NORMAL and smooth:
            observed = float(differing.sum()) / math.sqrt(variance)
            p = (
                2.0 * _upper_tail(abs(observed), kurtosis)
                if alternative == "two-sided"
                else _upper_tail(-observed, kurtosis)
            )
            p_values[column_index] = (resamples * min(max(p, 0.0), 1.0) + 1.0) / (resamples + 1.0)
            continue
        rng = np.random.default_rng(settings.seed)
        hits = 0
        for block in _blocks(resamples, magnitudes.size):
            sums = (2 * rng.binomial(counts, 0.5, size=(block, counts.size)) - counts) @ magnitudes
            hits += int(extreme(sums[:, None]).sum())
        p_values[column_index] = (hits + 1) / (resamples + 1)
    return np.minimum(p_values, 1.0)


def _upper_tail(x: float, kurtosis: float) -> float:
    """``P(Z >= x)`` for a standardised symmetric sum with this excess kurtosis (Edgeworth expansion)."""
    density = math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return 0.5 * math.erfc(x / math.sqrt(2.0)) + density * kurtosis * (x**3 - 3.0 * x) / 24.0


def holm_adjust(p_values: npt.ArrayLike, same_as: Sequence[int] | None = None) -> FloatArray:
    """Holm's step-down adjustment, controlling the family-wise error rate under any dependence (Holm 1979).

    With the ``m`` p-values sorted ascending, ``p_(1) <= ... <= p_(m)``, the adjusted values are
    ``q_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``, returned in the input order. Rejecting every hypothesis with
    ``q < alpha`` keeps the chance of any false rejection at most ``alpha``. Ties keep the input order (a stable
    sort). An empty input gives an empty output; a value outside ``[0, 1]`` or NaN -> ``ValueError``.

    ``same_as`` gives, per p-value, the position of the p-value whose hypothesis it tests again (its own position when
    none; a language slice that holds every query of ``all`` tests what ``all`` tests): each hypothesis counts once in
    ``m``, and a repeat gets the adjusted value of the one it repeats.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"p-values must be a vector, got {p.ndim} dimensions")
    if p.size and not ((p >= 0.0) & (p <= 1.0)).all():
        raise ValueError("p-values must lie in [0, 1]")
    if same_as is not None:
        first = np.asarray(same_as, dtype=np.int64)
        if first.shape != p.shape or (first.size and ((first < 0) | (first >= p.size)).any()):
            raise ValueError(f"same_as must give one position in [0, {p.size}) per p-value")
        if (first[first] != first).any():
            raise ValueError("same_as must point at p-values that repeat no other (their own position)")
        distinct = np.flatnonzero(first == np.arange(p.size))
        adjusted_distinct = np.empty(p.size, dtype=np.float64)
        adjusted_distinct[distinct] = holm_adjust(p[distinct])
        return adjusted_distinct[first]
    order = np.argsort(p, kind="stable")
    factors = np.arange(p.size, 0, -1, dtype=np.float64)
    stepped = np.maximum.accumulate(np.minimum(1.0, factors * p[order]))
    adjusted = np.empty_like(p)
    adjusted[order] = stepped
    return adjusted


def _z(probability: float) -> float:
    return NormalDist().inv_cdf(probability)


def minimum_detectable_effect(sd: float, queries: int, alpha: float, power: float = DEFAULT_POWER) -> float:
    """The smallest true mean difference a one-sided paired test at ``alpha`` detects with chance ``power``.

    Normal approximation (Webber, Moffat and Zobel, CIKM 2008, after Cohen): ``(z_{1-alpha} + z_{power}) * sd /
    sqrt(n)``, with ``sd`` the standard deviation of the paired per-query differences. Assumes the differences are
    independent and identically distributed and ``n`` large enough for their mean to be about normal (the central
    limit theorem); ``sd`` is the observed one, taken as the true one. A sign-flip test is close to this t-like test
    for such ``n``; with few differing queries it can be much weaker (see :func:`sign_flip_p_floor`).
    """
    _check_levels(alpha, power)
    if queries < 1:
        raise ValueError(f"queries must be >= 1, got {queries}")
    return (_z(1.0 - alpha) + _z(power)) * sd / math.sqrt(queries)


def queries_needed(sd: float, effect: float, alpha: float, power: float = DEFAULT_POWER) -> int | None:
    """Queries for which :func:`minimum_detectable_effect` falls to ``effect``: ``ceil(((z_a + z_b) sd / effect)^2)``.

    None when ``effect`` is 0 (no number of queries detects a zero drop); 1 when ``sd`` is 0.
    """
    _check_levels(alpha, power)
    if effect <= 0.0:
        return None
    return max(1, math.ceil(((_z(1.0 - alpha) + _z(power)) * sd / effect) ** 2))


def sign_flip_p_floor(discordant: int, queries: int, settings: StatisticsSettings, one_sided: bool = True) -> float:
    """The smallest p-value the sign-flip test can give, whatever the data, with ``discordant`` non-zero differences.

    Only queries that differ change the statistic when their sign flips, so of the ``2**discordant`` distinct sign
    patterns one (one-sided) or two (two-sided) are at least as extreme as the most extreme data: the floor is
    ``2**-discordant`` (two-sided ``2**(1 - discordant)``, at most 1). When the test draws ``settings.resamples``
    random assignments instead of enumerating them (``2**queries > resamples``), p is never below
    ``1 / (resamples + 1)`` either. No discordant query gives 1.
    """
    if discordant < 0 or queries < discordant:
        raise ValueError(f"need 0 <= discordant <= queries, got {discordant} and {queries}")
    floor = min(1.0, 2.0 ** (-discordant if one_sided else 1 - discordant))
    if 2**queries > settings.resamples:
        floor = max(floor, 1.0 / (settings.resamples + 1))
    return floor


def _check_levels(alpha: float, power: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}")
