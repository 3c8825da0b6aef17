"""Span geometry (merge_intervals, context_overlap) and the context measures' reference functions."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.measures.registry import QueryCase, parse_measure, reference_value
from evalkit.measures.spans import context_overlap, merge_intervals

CONTEXT_PRECISION = parse_measure("context_precision")
CONTEXT_RECALL = parse_measure("context_recall")


@pytest.mark.parametrize(
    ("intervals", "expected"),
    [
        ([], ()),
        ([(5, 7), (1, 3)], ((1, 3), (5, 7))),
        ([(1, 3), (3, 5)], ((1, 5),)),  # adjacent merge
        ([(0, 10), (2, 3)], ((0, 10),)),  # nested
        ([(0, 4), (2, 6), (8, 9)], ((0, 6), (8, 9))),  # overlapping
        ([(4, 4)], ()),  # empty interval covers nothing
        ([(2, 3), (2, 3)], ((2, 3),)),
    ],
)
def test_merge_intervals_literal(intervals: list[tuple[int, int]], expected: tuple[tuple[int, int], ...]) -> None:
    assert merge_intervals(intervals) == expected


def test_merge_intervals_rejects_reversed_interval() -> None:
    with pytest.raises(ValueError, match=r"\[5, 2\)"):
        merge_intervals([(0, 1), (5, 2)])


_interval = st.tuples(st.integers(0, 60), st.integers(0, 15)).map(lambda t: (t[0], t[0] + t[1]))


@given(st.lists(_interval, max_size=20))
def test_merge_intervals_properties(intervals: list[tuple[int, int]]) -> None:
    merged = merge_intervals(intervals)
    assert all(start < end for start, end in merged)  # non-empty
    for (_, end), (next_start, _) in itertools.pairwise(merged):
        assert end < next_start  # sorted, disjoint and not adjacent
    covered = {p for start, end in merged for p in range(start, end)}
    assert covered == {p for start, end in intervals for p in range(start, end)}
    assert merge_intervals(merged) == merged  # idempotent
    assert merge_intervals(reversed(intervals)) == merged  # order-independent


# ---------------------------------------------------------------------------------------------------------
# context metrics
# ---------------------------------------------------------------------------------------------------------

LENGTHS = {"c1": 100, "c2": 50, "c3": 40}
# c1: [10,30) ∪ [20,40) ∪ [25,35) (nested) = [10,40) -> 30 chars
# c2: [0,10) ∪ [10,20) (adjacent) = [0,20) -> 20 chars ; total = 50
SPANS = {"c1": [(10, 30), (20, 40), (25, 35)], "c2": [(0, 10), (10, 20)]}


def context_precision(
    returned: Sequence[str], lengths: Mapping[str, int], spans: Mapping[str, Sequence[tuple[int, int]]]
) -> float:
    return reference_value(CONTEXT_PRECISION, QueryCase(returned, {"c1": 1}, lengths, spans))


def context_recall(
    returned: Sequence[str], lengths: Mapping[str, int], spans: Mapping[str, Sequence[tuple[int, int]]]
) -> float:
    return reference_value(CONTEXT_RECALL, QueryCase(returned, {"c1": 1}, lengths, spans))


def test_context_overlap_unions_spans() -> None:
    # returned c1, c3: found 30 (c3 has no spans), returned chars 100 + 40 = 140, total 50
    assert context_overlap(["c1", "c3"], LENGTHS, SPANS) == (30, 140, 50)
    assert context_precision(["c1", "c3"], LENGTHS, SPANS) == 30 / 140
    assert context_recall(["c1", "c3"], LENGTHS, SPANS) == 30 / 50


def test_context_all_evidence_returned() -> None:
    # c2, c1: found 20 + 30 = 50 of 150 returned chars, of 50 total
    assert context_overlap(["c2", "c1"], LENGTHS, SPANS) == (50, 150, 50)
    assert context_precision(["c2", "c1"], LENGTHS, SPANS) == 50 / 150
    assert context_recall(["c2", "c1"], LENGTHS, SPANS) == 1.0


def test_context_duplicates_not_double_counted() -> None:
    assert context_overlap(["c1", "c3", "c1", "c1"], LENGTHS, SPANS) == (30, 140, 50)
    assert context_precision(["c1", "c1"], LENGTHS, SPANS) == 30 / 100
    assert context_recall(["c1", "c1"], LENGTHS, SPANS) == 30 / 50


def test_context_chunk_without_spans_only_adds_length() -> None:
    assert context_overlap(["c3"], LENGTHS, SPANS) == (0, 40, 50)
    assert context_precision(["c3"], LENGTHS, SPANS) == 0.0
    assert context_recall(["c3"], LENGTHS, SPANS) == 0.0


def test_context_empty_results_score_zero() -> None:
    assert context_overlap([], LENGTHS, SPANS) == (0, 0, 50)
    assert context_precision([], LENGTHS, SPANS) == 0.0
    assert context_recall([], LENGTHS, SPANS) == 0.0


def test_context_precision_zero_length_chunk() -> None:
    lengths = {**LENGTHS, "empty": 0}
    assert context_precision(["empty"], lengths, SPANS) == 0.0


@pytest.mark.parametrize("span", [(-1, 5), (90, 101), (7, 3)])
def test_context_span_out_of_range_names_chunk(span: tuple[int, int]) -> None:
    spans = {"c2": [(0, 5)], "c1": [span]}
    for fn in (context_overlap, context_precision, context_recall):
        with pytest.raises(ValueError, match="chunk 'c1'"):
            fn(["c2"], LENGTHS, spans)


def test_context_span_at_chunk_end_is_allowed() -> None:
    assert context_overlap(["c1"], LENGTHS, {"c1": [(0, 100)]}) == (100, 100, 100)


def test_context_missing_chunk_length_names_chunk() -> None:
    with pytest.raises(ValueError, match="chunk 'ghost'"):
        context_precision(["c1", "ghost"], LENGTHS, SPANS)
    with pytest.raises(ValueError, match="chunk 'ghost'"):
        context_recall(["c1"], LENGTHS, {"ghost": [(0, 1)]})


def test_context_negative_chunk_length_rejected() -> None:
    with pytest.raises(ValueError, match="chunk 'c9'"):
        context_overlap(["c9"], {**LENGTHS, "c9": -1}, SPANS)


@pytest.mark.parametrize("spans", [{}, {"c1": []}, {"c1": [(5, 5)]}])
def test_context_no_span_chars_raises(spans: Mapping[str, Sequence[tuple[int, int]]]) -> None:
    for fn in (context_overlap, context_precision, context_recall):
        with pytest.raises(ValueError, match="no characters"):
            fn(["c1"], LENGTHS, spans)
