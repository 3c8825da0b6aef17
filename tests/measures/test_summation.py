"""The exact summation: per query, its terms added with their rounding errors kept (TwoSum), whatever the layout."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.measures.ranked import segment_sums

_gains = st.builds(lambda grade, rank: grade / math.log2(rank + 1), st.integers(0, 3), st.integers(1, 1000))
"""Terms as the ranking measures add them: a grade over the log of a rank."""


@settings(max_examples=200)
@given(st.lists(st.lists(_gains, max_size=40), min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_exact_sums_are_the_same_bits_grouped_or_shuffled_and_equal_fsum(
    queries: list[list[float]], shuffle: object
) -> None:
    """Positions grouped by query with ranks ascending (the per-step path) and the same positions in any order (the
    by-rank path) give the same bits, which on such terms are math.fsum's."""
    row = np.array([q for q, terms in enumerate(queries) for _ in terms], dtype=np.int64)
    rank = np.array([r + 1 for terms in queries for r in range(len(terms))], dtype=np.int64)
    rank = rank * 3 - np.arange(len(rank)) % 2  # ranks with gaps, as judged positions have them, still ascending
    terms = np.array([t for ts in queries for t in ts], dtype=np.float64)
    grouped = segment_sums(row, rank, terms, len(queries), "exact")
    order = np.arange(len(row))
    shuffle.shuffle(order)  # type: ignore[attr-defined]
    scattered = segment_sums(row[order], rank[order], terms[order], len(queries), "exact")
    assert grouped.tobytes() == scattered.tobytes()
    assert grouped.tolist() == [math.fsum(ts) for ts in queries]


def test_a_query_of_many_tiny_terms_after_a_large_one_is_not_lost() -> None:
    """Added one by one in float64, the small terms vanish (1.0 + 1e-16 is 1.0); the exact sum keeps them."""
    terms = np.array([1.0] + [1e-16] * 50 + [0.5], dtype=np.float64)
    row = np.zeros(len(terms), dtype=np.int64)
    rank = np.arange(1, len(terms) + 1, dtype=np.int64)
    exact = segment_sums(row, rank, terms, 1, "exact")
    naive = segment_sums(row, rank, terms, 1, "sequential")
    assert exact[0] == math.fsum(terms.tolist()) != naive[0]
