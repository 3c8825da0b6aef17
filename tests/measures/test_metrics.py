"""Tests for evalkit.measures.metrics: hand-computed cases, edge-case policies, properties, trec_eval comparison."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from evalkit.measures.metrics import (
    GAINS,
    METRICS_VERSION,
    NO_ANSWER_FPR,
    STANDARD_MEASURES,
    LatencySummary,
    Measure,
    context_overlap,
    context_precision,
    context_recall,
    dedupe_ranking,
    latency_summary,
    mean,
    measure_sort_key,
    merge_intervals,
    ndcg_at_k,
    rank_by_score,
    recall_at_k,
    reciprocal_rank_at_k,
    returned_any,
)

REL = 1e-12
L3 = math.log2(3)  # discount at rank 2
L5 = math.log2(5)  # discount at rank 4

# Shared hand case: "a" judged not relevant (grade 0), "b" 3, "c" 1, "e" 2 (never retrieved); "d" unjudged.
GRADES = {"a": 0, "b": 3, "c": 1, "e": 2}
RANKING = ("a", "b", "c", "d")

RankingFn = Callable[[Sequence[str], Mapping[str, int], int], float]
RANKING_FNS: list[RankingFn] = [recall_at_k, reciprocal_rank_at_k, ndcg_at_k]


def test_metrics_version_is_a_string() -> None:
    assert METRICS_VERSION == "2"


# ---------------------------------------------------------------------------------------------------------
# nDCG
# ---------------------------------------------------------------------------------------------------------


def test_ndcg_exponential_hand_computed() -> None:
    # gains 2^g - 1: a -> 0, b -> 7, c -> 1, d -> 0 (unjudged)
    # DCG@4  = 0/log2(2) + 7/log2(3) + 1/log2(4) + 0/log2(5) = 7/log2(3) + 1/2
    # ideal grades (positive only, descending) 3, 2, 1 -> gains 7, 3, 1
    # IDCG@4 = 7/log2(2) + 3/log2(3) + 1/log2(4) = 7 + 3/log2(3) + 1/2
    expected = (7 / L3 + 1 / 2) / (7 + 3 / L3 + 1 / 2)  # = 4.916508 / 9.392789 = 0.523434...
    assert ndcg_at_k(RANKING, GRADES, 4) == pytest.approx(expected, rel=REL)
    assert ndcg_at_k(RANKING, GRADES, 4, gain="exponential") == pytest.approx(expected, rel=REL)
    assert expected == pytest.approx(0.5234343, abs=1e-7)


def test_ndcg_linear_hand_computed() -> None:
    # gains = grade: DCG@4 = 3/log2(3) + 1/2 ; IDCG@4 = 3 + 2/log2(3) + 1/2
    expected = (3 / L3 + 1 / 2) / (3 + 2 / L3 + 1 / 2)  # = 0.502490... (trec_eval ndcg_cut_4 agrees)
    assert ndcg_at_k(RANKING, GRADES, 4, gain="linear") == pytest.approx(expected, rel=REL)
    assert expected == pytest.approx(0.5024905, abs=1e-7)


def test_ndcg_cut_at_k() -> None:
    # k = 2: DCG@2 = 0 + 7/log2(3) ; IDCG@2 = 7 + 3/log2(3)  (ideal list cut at k, not all judged)
    expected = (7 / L3) / (7 + 3 / L3)
    assert ndcg_at_k(RANKING, GRADES, 2) == pytest.approx(expected, rel=REL)
    # k = 1: top chunk "a" has grade 0
    assert ndcg_at_k(RANKING, GRADES, 1) == 0.0


def test_ndcg_chunk_beyond_k_does_not_count() -> None:
    # "c" (grade 1) sits at rank 4, outside k = 3: DCG@3 = 7/log2(3) ; IDCG@3 = 7 + 3/log2(3) + 1/2
    ranking = ("a", "b", "d", "c")
    expected = (7 / L3) / (7 + 3 / L3 + 1 / 2)
    assert ndcg_at_k(ranking, GRADES, 3) == pytest.approx(expected, rel=REL)
    # at k = 4 it counts with discount log2(5)
    expected4 = (7 / L3 + 1 / L5) / (7 + 3 / L3 + 1 / 2)
    assert ndcg_at_k(ranking, GRADES, 4) == pytest.approx(expected4, rel=REL)


@pytest.mark.parametrize("gain", sorted(GAINS))
def test_ndcg_ideal_ranking_is_one(gain: str) -> None:
    assert ndcg_at_k(("b", "e", "c"), GRADES, 3, gain=gain) == pytest.approx(1.0, rel=REL)
    assert ndcg_at_k(("b", "e", "c", "a", "d"), GRADES, 10, gain=gain) == pytest.approx(1.0, rel=REL)
    # ideal for k = 2 even though "c" is missing
    assert ndcg_at_k(("b", "e"), GRADES, 2, gain=gain) == pytest.approx(1.0, rel=REL)


def test_ndcg_equal_grades_in_any_order_is_one() -> None:
    grades = {"x": 2, "y": 2}
    assert ndcg_at_k(("y", "x"), grades, 2) == pytest.approx(1.0, rel=REL)
    assert ndcg_at_k(("x", "y"), grades, 2) == pytest.approx(1.0, rel=REL)


def test_ndcg_nothing_relevant_retrieved_is_zero() -> None:
    assert ndcg_at_k(("a", "d", "z"), GRADES, 10) == 0.0


def test_ndcg_negative_grade_gives_no_negative_gain() -> None:
    # "n" grade -1 counts as not relevant: same as unjudged
    grades = {"n": -1, "b": 1}
    assert ndcg_at_k(("n", "b"), grades, 2) == ndcg_at_k(("z", "b"), grades, 2)
    assert ndcg_at_k(("n", "b"), grades, 2) == pytest.approx(1 / L3, rel=REL)


def test_ndcg_duplicates_removed_before_cutoff() -> None:
    # [b, b, c] -> [b, c]: identical to the deduped ranking, and c is still inside k = 2
    assert ndcg_at_k(("b", "b", "c"), GRADES, 2) == ndcg_at_k(("b", "c"), GRADES, 2)
    expected = (7 + 1 / L3) / (7 + 3 / L3)
    assert ndcg_at_k(("b", "b", "c"), GRADES, 2) == pytest.approx(expected, rel=REL)


def test_ndcg_unknown_gain_lists_valid_names() -> None:
    with pytest.raises(ValueError, match=r"unknown gain 'log'.*exponential, linear"):
        ndcg_at_k(RANKING, GRADES, 4, gain="log")


def test_gain_functions() -> None:
    assert GAINS["exponential"](0) == 0.0
    assert GAINS["exponential"](3) == 7.0
    assert GAINS["linear"](0) == 0.0
    assert GAINS["linear"](3) == 3.0


# ---------------------------------------------------------------------------------------------------------
# recall and reciprocal rank
# ---------------------------------------------------------------------------------------------------------

REL3 = {"a": 1, "b": 2, "c": 1, "z": 0}  # three relevant chunks; "z" judged not relevant


def test_recall_hand_computed() -> None:
    ranking = ("x", "a", "z", "b", "y")
    assert recall_at_k(ranking, REL3, 1) == 0.0
    assert recall_at_k(ranking, REL3, 2) == 1 / 3
    assert recall_at_k(ranking, REL3, 3) == 1 / 3  # "z" has grade 0: not counted
    assert recall_at_k(ranking, REL3, 4) == 2 / 3
    assert recall_at_k(("a", "b", "c"), REL3, 3) == 1.0
    assert recall_at_k(("a", "b", "c"), REL3, 100) == 1.0


def test_reciprocal_rank_hand_computed() -> None:
    assert reciprocal_rank_at_k(("a", "x"), REL3, 10) == 1.0
    assert reciprocal_rank_at_k(("x", "a"), REL3, 10) == 0.5
    assert reciprocal_rank_at_k(("z", "x", "c"), REL3, 10) == 1 / 3  # grade-0 "z" is skipped
    assert reciprocal_rank_at_k(("z", "x", "c"), REL3, 2) == 0.0  # first relevant beyond k
    assert reciprocal_rank_at_k(("x", "y"), REL3, 10) == 0.0


def test_duplicates_do_not_push_relevant_out_of_cutoff() -> None:
    ranking = ("a", "a", "a", "b")
    relevant = {"b": 1}
    # deduped: [a, b] -> b at rank 2, inside k = 2 (without dedupe it would be rank 4)
    assert recall_at_k(ranking, relevant, 2) == 1.0
    assert reciprocal_rank_at_k(ranking, relevant, 2) == 0.5
    assert ndcg_at_k(ranking, relevant, 2) == pytest.approx(1 / L3, rel=REL)


def test_duplicates_do_not_count_twice() -> None:
    relevant = {"a": 1, "b": 1}
    assert recall_at_k(("a", "a"), relevant, 2) == 0.5
    # nDCG cannot exceed 1 by repeating the top chunk
    assert ndcg_at_k(("a", "a", "a"), {"a": 1}, 3) == 1.0


@pytest.mark.parametrize("fn", RANKING_FNS)
def test_empty_ranking_scores_zero(fn: RankingFn) -> None:
    assert fn((), REL3, 10) == 0.0


@pytest.mark.parametrize("fn", RANKING_FNS)
@pytest.mark.parametrize("k", [0, -1])
def test_cutoff_below_one_raises(fn: RankingFn, k: int) -> None:
    with pytest.raises(ValueError, match="cutoff k must be >= 1"):
        fn(("a",), REL3, k)


@pytest.mark.parametrize("fn", RANKING_FNS)
@pytest.mark.parametrize("relevant", [{}, {"a": 0}, {"a": 0, "b": -1}])
def test_no_relevant_raises(fn: RankingFn, relevant: Mapping[str, int]) -> None:
    with pytest.raises(ValueError, match="answerable"):
        fn(("a", "b"), relevant, 10)


def test_dedupe_ranking_keeps_first_occurrence() -> None:
    assert dedupe_ranking(["c", "a", "c", "b", "a"]) == ("c", "a", "b")
    assert dedupe_ranking([]) == ()


_ids = st.sampled_from("abcdefgh")


@given(
    ranking=st.lists(_ids, max_size=12),
    grades=st.dictionaries(_ids, st.integers(-1, 3), min_size=1).filter(lambda g: max(g.values()) >= 1),
    k=st.integers(1, 12),
)
def test_ranking_metrics_properties(ranking: list[str], grades: dict[str, int], k: int) -> None:
    deduped = dedupe_ranking(ranking)
    for fn in RANKING_FNS:
        value = fn(ranking, grades, k)
        assert 0.0 <= value <= 1.0 + 1e-12
        assert value == fn(deduped, grades, k)  # duplicates change nothing
        assert value == fn(deduped[:k], grades, k)  # nothing below the cutoff matters
    assert recall_at_k(ranking, grades, k) <= recall_at_k(ranking, grades, k + 1)
    ideal = sorted((c for c in grades if grades[c] >= 1), key=lambda c: (-grades[c], c))
    for gain in GAINS:
        assert ndcg_at_k(ideal, grades, k, gain=gain) == pytest.approx(1.0, rel=REL)


# ---------------------------------------------------------------------------------------------------------
# rank_by_score
# ---------------------------------------------------------------------------------------------------------


def test_rank_by_score_ties_broken_by_id() -> None:
    scores = {"b": 1.0, "c": 2.0, "a": 1.0, "d": -0.5}
    assert rank_by_score(scores) == ("c", "a", "b", "d")
    assert rank_by_score(dict(reversed(scores.items()))) == ("c", "a", "b", "d")
    assert rank_by_score({}) == ()


def test_rank_by_score_rejects_nan() -> None:
    with pytest.raises(ValueError, match="'x'"):
        rank_by_score({"a": 1.0, "x": math.nan})


@given(st.dictionaries(st.text(max_size=3), st.sampled_from([0.0, 0.5, 1.0, -2.0, math.inf])))
def test_rank_by_score_is_a_total_order(scores: dict[str, float]) -> None:
    ranked = rank_by_score(scores)
    assert sorted(ranked) == sorted(scores)
    assert ranked == rank_by_score(dict(sorted(scores.items(), reverse=True)))  # insertion order irrelevant
    for first, second in itertools.pairwise(ranked):
        assert scores[first] > scores[second] or (scores[first] == scores[second] and first < second)


# ---------------------------------------------------------------------------------------------------------
# merge_intervals
# ---------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------
# no-answer, mean, latency
# ---------------------------------------------------------------------------------------------------------


def test_returned_any() -> None:
    assert returned_any([]) == 0.0
    assert returned_any(()) == 0.0
    assert returned_any(["a"]) == 1.0
    assert returned_any(["a", "b"]) == 1.0


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


# ---------------------------------------------------------------------------------------------------------
# Measure identity
# ---------------------------------------------------------------------------------------------------------

_cutoff_measures = st.builds(Measure, name=st.sampled_from(["recall", "mrr", "ndcg"]), cutoff=st.integers(1, 10**9))
_plain_measures = st.builds(Measure, name=st.sampled_from(["context_precision", "context_recall", "no_answer_fpr"]))


@given(_cutoff_measures | _plain_measures)
def test_measure_str_parse_round_trip(measure: Measure) -> None:
    text = str(measure)
    assert Measure.parse(text) == measure
    assert str(Measure.parse(text)) == text


@given(st.text(alphabet="recalmndgo_pisfx@0123456789 ", max_size=20))
def test_measure_parse_accepts_only_exact_text_forms(text: str) -> None:
    try:
        measure = Measure.parse(text)
    except ValueError as error:
        assert "valid forms" in str(error)
    else:
        assert str(measure) == text


def test_measure_text_forms() -> None:
    assert str(Measure(name="recall", cutoff=5)) == "recall@5"
    assert str(Measure(name="mrr", cutoff=10)) == "mrr@10"
    assert str(Measure(name="ndcg", cutoff=10)) == "ndcg@10"
    assert str(Measure(name="context_precision")) == "context_precision"
    assert str(NO_ANSWER_FPR) == "no_answer_fpr"
    assert [str(m) for m in STANDARD_MEASURES] == [
        "recall@1",
        "recall@5",
        "recall@10",
        "mrr@10",
        "ndcg@10",
        "context_precision",
        "context_recall",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "recall",
        "recall@",
        "recall@0",
        "recall@-1",
        "recall@05",
        "recall@ 5",
        " recall@5",
        "ndcg@10 ",
        "NDCG@10",
        "ndcg@1.5",
        "context_precision@5",
        "no_answer_fpr@1",
        "precision@10",
        "foo",
    ],
)
def test_measure_parse_rejects_bad_text(text: str) -> None:
    with pytest.raises(ValueError, match="valid forms: recall@K, mrr@K, ndcg@K, context_precision") as info:
        Measure.parse(text)
    assert "no_answer_fpr" in str(info.value)


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "recall"},
        {"name": "ndcg", "cutoff": 0},
        {"name": "mrr", "cutoff": -3},
        {"name": "context_recall", "cutoff": 5},
        {"name": "no_answer_fpr", "cutoff": 1},
        {"name": "precision", "cutoff": 5},
        {"name": "recall", "cutoff": "5"},  # strict: no str -> int coercion
        {"name": "recall", "cutoff": 5.0},
        {"name": "recall", "cutoff": 5, "extra": 1},
    ],
)
def test_measure_rejects_invalid_fields(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Measure.model_validate(fields)


def test_measure_is_hashable_frozen_and_equal_by_value() -> None:
    first, second = Measure(name="ndcg", cutoff=10), Measure.parse("ndcg@10")
    assert first == second
    assert hash(first) == hash(second)
    assert first != Measure(name="ndcg", cutoff=5)
    assert {first: 0.5}[second] == 0.5
    assert len({first, second, NO_ANSWER_FPR, Measure(name="no_answer_fpr")}) == 2
    with pytest.raises(ValidationError):
        first.cutoff = 5  # type: ignore[misc]


def test_measure_sort_key_gives_canonical_order() -> None:
    shuffled = [
        NO_ANSWER_FPR,
        Measure(name="recall", cutoff=10),
        Measure(name="recall", cutoff=1),
        Measure(name="context_recall"),
        Measure(name="ndcg", cutoff=10),
        Measure(name="recall", cutoff=5),
        Measure(name="context_precision"),
        Measure(name="mrr", cutoff=10),
    ]
    assert tuple(sorted(shuffled, key=measure_sort_key)) == (*STANDARD_MEASURES, NO_ANSWER_FPR)


# ---------------------------------------------------------------------------------------------------------
# Comparison with trec_eval (pytrec_eval), a test-only peer
# ---------------------------------------------------------------------------------------------------------


def _random_queries(n_queries: int, seed: int) -> tuple[dict[str, dict[str, int]], dict[str, tuple[str, ...]]]:
    rng = np.random.default_rng(seed)
    corpus = [f"d{i:02d}" for i in range(40)]
    qrels: dict[str, dict[str, int]] = {}
    rankings: dict[str, tuple[str, ...]] = {}
    for q in range(n_queries):
        judged = rng.choice(corpus, size=int(rng.integers(1, 16)), replace=False)
        grades = {str(c): int(g) for c, g in zip(judged, rng.integers(0, 4, size=len(judged)), strict=True)}
        grades[str(judged[0])] = int(rng.integers(1, 4))  # at least one relevant: answerable
        qrels[f"q{q}"] = grades
        rankings[f"q{q}"] = tuple(str(c) for c in rng.choice(corpus, size=int(rng.integers(1, 31)), replace=False))
    return qrels, rankings


def _run(rankings: Mapping[str, Sequence[str]], depth: int | None = None) -> dict[str, dict[str, float]]:
    # strictly decreasing scores: trec_eval's own tie-breaking (docno descending) never comes into play
    return {
        qid: {chunk: float(len(ranking) - rank) for rank, chunk in enumerate(ranking[:depth])}
        for qid, ranking in rankings.items()
    }


def test_matches_trec_eval_on_random_queries() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, rankings = _random_queries(300, seed=20240601)
    measures = {"ndcg_cut.10", "recall.5,10"}

    linear = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(_run(rankings))
    # trec_eval's nDCG uses the grade itself as gain; feeding it 2^g - 1 as the grade gives exponential gain
    exp_qrels = {qid: {c: 2**g - 1 for c, g in grades.items()} for qid, grades in qrels.items()}
    exponential = pytrec_eval.RelevanceEvaluator(exp_qrels, {"ndcg_cut.10"}).evaluate(_run(rankings))
    # recip_rank has no cutoff in trec_eval: truncate the run at 10 to get RR@10
    rr10 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(_run(rankings, depth=10))

    assert set(linear) == set(exponential) == set(rr10) == set(qrels)
    for qid, ranking in rankings.items():
        grades = qrels[qid]
        peer = linear[qid]
        assert ndcg_at_k(ranking, grades, 10, gain="linear") == pytest.approx(peer["ndcg_cut_10"], abs=1e-9)
        assert ndcg_at_k(ranking, grades, 10) == pytest.approx(exponential[qid]["ndcg_cut_10"], abs=1e-9)
        assert recall_at_k(ranking, grades, 5) == pytest.approx(peer["recall_5"], abs=1e-9)
        assert recall_at_k(ranking, grades, 10) == pytest.approx(peer["recall_10"], abs=1e-9)
        assert reciprocal_rank_at_k(ranking, grades, 10) == pytest.approx(rr10[qid]["recip_rank"], abs=1e-9)
    # the sample must exercise the interesting region, not only zeros
    ndcgs = [linear[qid]["ndcg_cut_10"] for qid in qrels]
    assert 0.0 in ndcgs and any(0.0 < v < 1.0 for v in ndcgs)
