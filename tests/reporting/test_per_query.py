"""The report's per-query columns: values rounded as Python rounds them, NaN as None."""

from __future__ import annotations

import math

import numpy as np

from evalkit.reporting.per_query import PER_QUERY_DECIMALS, rounded_column


def test_rounded_columns_equal_pythons_round_value_by_value() -> None:
    rng = np.random.default_rng(37)
    # Random values, values at and beside the halfway points between 6-decimal numbers (where a vectorised
    # rint(v * 10**6) / 10**6 can disagree with Python's correctly rounded round), ties, and NaN.
    halves = (rng.integers(0, 10**6, size=20_000) + 0.5) / 10**6
    values = np.concatenate(
        [
            rng.random(50_000),
            halves,
            np.nextafter(halves, 0.0),
            np.nextafter(halves, 1.0),
            rng.integers(0, 11, size=1_000) / 10,
            [0.0, 1.0, 1e-7, 5e-7, 0.0000005, 0.9999995, math.nan],
        ]
    )
    expected = tuple(None if math.isnan(v) else round(v, PER_QUERY_DECIMALS) for v in values.tolist())
    assert rounded_column(values) == expected
