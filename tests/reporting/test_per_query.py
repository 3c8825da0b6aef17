"""The report's query index and per-query columns: IDs checked for privacy in one scan, values rounded as Python
rounds them, NaN as None."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

import evalkit
from evalkit.data.schema import first_private_value, privacy_problem
from evalkit.reporting.per_query import PER_QUERY_DECIMALS, SHARED_MIN, QueryIndex, rounded_column, shared_values
from evalkit.reporting.report import parse_report, report_json


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


def test_a_long_column_shares_one_object_per_distinct_value_and_stays_equal() -> None:
    rng = np.random.default_rng(3)
    column = tuple(None if v < 0 else float(v) for v in rng.choice([-1.0, 0.0, 0.5, 1.0, 0.333333], SHARED_MIN * 2))
    column = tuple(float(repr(v)) if v is not None else None for v in column)  # a fresh object per value, as parsed
    shared = shared_values(column)
    assert shared == column
    assert [v is None for v in shared] == [v is None for v in column]
    assert len({id(v) for v in shared if v is not None}) == 4
    assert len({id(v) for v in column if v is not None}) > 4


@pytest.mark.parametrize("odd", [-0.0, float("nan")])
def test_a_column_with_negative_zero_or_nan_is_kept_as_read(odd: float) -> None:
    column = (*(float(repr(0.5)) for _ in range(SHARED_MIN)), odd, 0.0)
    shared = shared_values(column)
    assert shared is column
    assert math.copysign(1.0, shared[-2]) == -1.0 or math.isnan(shared[-2])


def test_a_short_or_varied_column_is_kept_as_read() -> None:
    short = (0.5, 0.5, None)
    assert shared_values(short) is short
    varied = tuple(float(i) / (SHARED_MIN * 3) for i in range(SHARED_MIN * 3))
    assert shared_values(varied) is varied


def test_a_long_report_read_back_is_equal_and_writes_the_same_bytes() -> None:
    n = SHARED_MIN + 500
    rng = np.random.default_rng(11)
    ranks = rng.integers(0, 4, n)  # the relevant document at rank 1 to 3, or not returned
    qrels = {f"q{i:05d}": {f"d{i}": 1, f"n{i}": 0} for i in range(n)}
    run = {
        f"q{i:05d}": {f"x{i}-{j}": 1.0 - j / 10 for j in range(3)} | ({f"d{i}": 1.0 - r / 10 + 0.05} if r else {})
        for i, r in enumerate(ranks.tolist())
    }
    report = evalkit.score(qrels, {"sys": run}, ["ndcg@10", "recall@10", "mrr@10"]).to_report()
    text = report_json(report)
    reread = parse_report(text)
    column = reread.ablations["sys"].per_query["mrr@10"]
    assert len(column) == n
    assert len({id(v) for v in column if v is not None}) <= 4  # 1, 1/2, 1/3, 0: one object each
    assert reread == report
    assert report_json(reread) == text
