"""The report's query index and per-query columns: IDs checked for privacy in one scan, values rounded as Python
rounds them, NaN as None."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from evalkit.data.schema import first_private_value, privacy_problem
from evalkit.reporting.per_query import PER_QUERY_DECIMALS, QueryIndex, rounded_column


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


PRIVATE_IDS = ("10.0.0.1", "localhost", "AKIA" + "A" * 16, "token:abcdef12", "glpat-" + "x" * 20, "www.host.com")


def test_a_query_index_checks_every_id_for_privacy_in_one_scan() -> None:
    clean = [f"q-{i:05d}" for i in range(2_000)]
    assert QueryIndex(query_ids=tuple(clean), languages=(None,) * 2_000, answerable=(True,) * 2_000)
    for private in PRIVATE_IDS:
        ids = sorted([*clean, private])
        position = ids.index(private)
        with pytest.raises(ValidationError, match=rf"query_ids\[{position}\] looks like"):
            QueryIndex(query_ids=tuple(ids), languages=(None,) * len(ids), answerable=(True,) * len(ids))


def test_the_joined_scan_gives_the_verdict_of_checking_each_id() -> None:
    # Values that only look private across a boundary ("token" then ":abcdef") must not be refused.
    values = ["a-token", ":abcdef", "x.1", "2.3.4", *PRIVATE_IDS]
    for end in range(len(values) + 1):
        expected = next(((i, p) for i, v in enumerate(values[:end]) if (p := privacy_problem(v)) is not None), None)
        assert first_private_value(values[:end]) == expected
