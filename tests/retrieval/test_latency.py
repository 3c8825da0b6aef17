"""Tests for retrieval.latency: warm-up before timing, BLAS pinned while timing, samples from the clock."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from evalkit.retrieval.latency import pinned_blas, time_queries


def _fake_clock(ticks_ns: list[int]) -> Callable[[], int]:
    remaining = iter(ticks_ns)
    return lambda: next(remaining)


def test_samples_come_from_the_clock_in_query_order() -> None:
    clock = _fake_clock([0, 2_000_000, 10_000_000, 10_500_000])
    assert time_queries(lambda q: q, ["a", "b"], warmup=0, clock=clock) == (2.0, 0.5)


def test_warm_up_runs_untimed_before_the_timed_queries() -> None:
    calls: list[str] = []
    ticks = iter(range(0, 10**9, 1_000_000))
    samples = time_queries(calls.append, ["a", "b", "c"], warmup=2, clock=lambda: next(ticks))
    assert calls == ["a", "b", "a", "b", "c"]
    assert samples == (1.0, 1.0, 1.0)


def test_warm_up_cycles_through_few_queries() -> None:
    calls: list[str] = []
    time_queries(calls.append, ["a"], warmup=3)
    assert calls == ["a", "a", "a", "a"]


def _blas_threads() -> list[int]:
    return [int(pool["num_threads"]) for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_blas_is_pinned_while_timing_and_released_after() -> None:
    np.ones((4, 4)) @ np.ones(4)  # make sure numpy's BLAS is loaded
    if not _blas_threads():
        pytest.skip("numpy reports no BLAS library to pin")
    seen: list[list[int]] = []
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        time_queries(lambda _: seen.append(_blas_threads()), ["a", "b"], warmup=1, blas_threads=1)
        after = _blas_threads()
    assert before == [2] * len(before)
    assert seen == [[1] * len(before)] * 3
    assert after == before


def test_pinned_blas_rejects_zero_threads() -> None:
    with pytest.raises(ValueError, match="BLAS threads must be >= 1, got 0"), pinned_blas(0):
        pass


@pytest.mark.parametrize(("queries", "warmup", "message"), [([], 1, "no queries"), (["a"], -1, "warm-up must be")])
def test_bad_arguments(queries: list[str], warmup: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        time_queries(lambda q: q, queries, warmup=warmup)
