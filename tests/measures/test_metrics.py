"""Numbers over many queries: the exact mean, the latency summary, the version of the definitions."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from evalkit.measures.metrics import METRICS_VERSION, LatencySummary, latency_summary, mean

REL = 1e-12


def test_metrics_version_is_a_string() -> None:
    assert METRICS_VERSION == "2"


def test_mean() -> None:
    assert mean([0.5, 1.0, 0.0]) == 0.5
    assert mean([1 / 3]) == 1 / 3
    assert mean([0.1] * 10) == 0.1  # exact summation (plain sum gives 0.9999999999999999)
    with pytest.raises(ValueError, match="no queries"):
        mean([])


def test_latency_summary_hand_computed() -> None:
    # sorted [1, 2, 3, 4, 100]; median = 3; mean = 110 / 5 = 22
    # p95 (linear): position (5 - 1) * 0.95 = 3.8 -> 4 + 0.8 * (100 - 4) = 80.8
    summary = latency_summary([100, 1, 4, 3, 2])
    assert summary.count == 5
    assert summary.min_ms == 1.0
    assert summary.median_ms == 3.0
    assert summary.p95_ms == pytest.approx(80.8, rel=REL)
    assert summary.max_ms == 100.0
    assert summary.mean_ms == 22.0


def test_latency_summary_even_count_and_single_sample() -> None:
    # [1, 2, 3, 10]: median 2.5; p95 position 3 * 0.95 = 2.85 -> 3 + 0.85 * 7 = 8.95
    summary = latency_summary([10.0, 1.0, 3.0, 2.0])
    assert summary.median_ms == 2.5
    assert summary.p95_ms == pytest.approx(8.95, rel=REL)
    one = latency_summary([7.5])
    assert (one.count, one.min_ms, one.median_ms, one.p95_ms, one.max_ms, one.mean_ms) == (
        1,
        7.5,
        7.5,
        7.5,
        7.5,
        7.5,
    )


@pytest.mark.parametrize("samples", [[], [1.0, -0.1], [1.0, math.nan], [math.inf]])
def test_latency_summary_rejects_bad_samples(samples: list[float]) -> None:
    with pytest.raises(ValueError, match="latency samples"):
        latency_summary(samples)


def test_latency_summary_is_frozen_and_strict() -> None:
    summary = latency_summary([1.0])
    with pytest.raises(ValidationError):
        summary.count = 2  # type: ignore[misc]
    with pytest.raises(ValidationError):
        LatencySummary.model_validate({**summary.model_dump(), "extra": 1})
