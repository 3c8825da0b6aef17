"""Fair per-query latency: BLAS threads pinned with threadpoolctl, and warm-up queries before the clock starts.

numpy's BLAS starts one thread per core. On a small machine shared with other work, a threaded matrix-vector
product waits for cores that are busy elsewhere, and its time measures that contention, not the search. The first
query of a process also pays one-off costs (rjieba's dictionary, the stemmer, lazily built indexes and matrices).
So latency is measured with BLAS limited to a fixed number of threads (one by default) and after untimed warm-up
queries. Samples are milliseconds from :func:`time.perf_counter_ns`; summarize them with
:func:`evalkit.measures.metrics.latency_summary`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from threadpoolctl import threadpool_limits

__all__ = ["DEFAULT_BLAS_THREADS", "DEFAULT_WARMUP", "pinned_blas", "time_queries"]

DEFAULT_BLAS_THREADS = 1
"""BLAS threads while timing: one, so that a query's time does not depend on what else runs on the machine."""
DEFAULT_WARMUP = 1
"""Untimed queries run before timing starts."""

Q = TypeVar("Q")


@contextmanager
def pinned_blas(threads: int = DEFAULT_BLAS_THREADS) -> Iterator[None]:
    """Limit every loaded BLAS library (OpenBLAS, MKL, BLIS) to ``threads`` threads inside the block."""
    if threads < 1:
        raise ValueError(f"BLAS threads must be >= 1, got {threads}")
    with threadpool_limits(limits=threads, user_api="blas"):
        yield


def time_queries(
    search: Callable[[Q], object],
    queries: Sequence[Q],
    *,
    warmup: int = DEFAULT_WARMUP,
    blas_threads: int = DEFAULT_BLAS_THREADS,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> tuple[float, ...]:
    """Milliseconds of ``search`` per query, in query order, with BLAS pinned and after warm-up.

    The warm-up runs the first ``warmup`` queries (cycling through them when there are fewer queries) untimed.
    ``clock`` returns nanoseconds; it is a parameter so that tests need no real time.
    """
    if warmup < 0:
        raise ValueError(f"warm-up must be >= 0 queries, got {warmup}")
    if not queries:
        raise ValueError("no queries to time")
    samples: list[float] = []
    with pinned_blas(blas_threads):
        for position in range(warmup):
            search(queries[position % len(queries)])
        for query in queries:
            started = clock()
            search(query)
            samples.append((clock() - started) / 1e6)
    return tuple(samples)
