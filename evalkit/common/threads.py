"""Work done on a few threads and handed back in order: how scoring uses more than one core.

Scoring a run orders and joins it a block of queries at a time (:mod:`evalkit.measures.run_order`); numpy and
pyarrow release the GIL for the work on a block's arrays, so the next blocks can be made on other threads while
the caller scores the current one. :func:`in_order` gives the results in the order of the items whatever the number
of threads, so that every value, count and byte written is the same with one thread or many.

A query searches several vector graphs the same way (:func:`each`): their searches release the GIL, so a query
takes about half the time on two free cores, and its results are the same bytes on one thread or many.

The number of threads follows Arrow's CPU pool (:func:`pyarrow.cpu_count`), which follows ``OMP_NUM_THREADS``: a
process pinned to one thread scores and searches on one thread.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from typing import TypeVar

import pyarrow as pa

__all__ = ["beside", "each", "in_order", "scoring_threads"]

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")


def scoring_threads() -> int:
    """How many threads make blocks while one scores: Arrow's CPU pool, at most the machine's cores."""
    return max(1, min(int(pa.cpu_count()), os.cpu_count() or 1))


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(threads: int) -> ThreadPoolExecutor:
    """One lasting pool per thread count, for work too short to pay for starting threads each time."""
    with _POOLS_LOCK:
        if threads not in _POOLS:
            _POOLS[threads] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="evalkit-each")
        return _POOLS[threads]


def _forget_pools() -> None:
    """In a forked child: none of the parent's threads exist there (and its lock may have been held), so the child
    makes pools of its own."""
    global _POOLS_LOCK
    _POOLS_LOCK = threading.Lock()
    _POOLS.clear()


os.register_at_fork(after_in_child=_forget_pools)


def each(work: Callable[[T], R], items: Sequence[T], threads: int) -> list[R]:
    """``[work(item) for item in items]``, spread over ``threads`` lasting threads when above 1 (short pieces of
    work that release the GIL, such as one query's search of each graph). The list is in the items' order whatever
    the threads; an exception in ``work`` is raised at the first item, in order, that raised it."""
    if threads <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    try:
        pending = [_pool(threads).submit(work, item) for item in items]
    except RuntimeError:  # the interpreter is shutting down (an atexit handler searching): no new threads
        return [work(item) for item in items]
    return [future.result() for future in pending]


def in_order(work: Callable[[T], R], items: Sequence[T], threads: int) -> Iterator[R]:
    """``work(item)`` of each item, yielded in the items' order; with ``threads`` above 1, ``threads`` items are
    worked on ahead of the one yielded and one more waits for a free thread, so no thread idles while the consumer
    takes its result (at most ``threads + 1`` results wait in memory; with ``threads`` ahead only, scoring whole
    rankings on two threads took 3-5% longer, 2026-12-05). ``work`` must not change anything shared. Stopping
    early (the consumer closes the iterator, or raises) cancels what has not started and waits for what has; an
    exception in ``work`` is raised at its item."""
    if threads <= 1 or len(items) <= 1:
        yield from map(work, items)
        return
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="evalkit-blocks")
    try:
        upcoming = iter(items)
        pending: deque[Future[R]] = deque(pool.submit(work, item) for item in islice(upcoming, threads + 1))
        while pending:
            result = pending.popleft().result()
            pending.extend(pool.submit(work, following) for following in islice(upcoming, 1))
            yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def beside(first: Callable[[], T], second: Callable[[], S], threads: int) -> tuple[T, S]:
    """``(first(), second())``, with ``first`` run on a thread beside ``second`` when ``threads`` is above 1 (two
    reads that each leave a core idle part of the time). Errors come as if ``first`` ran first: its exception is
    raised, whatever ``second`` did; then ``second``'s."""
    if threads <= 1:
        return first(), second()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalkit-beside")
    try:
        pending = pool.submit(first)
        try:
            other = second()
        except BaseException:
            pending.result()  # first's error, if any, comes first
            raise
        return pending.result(), other
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
