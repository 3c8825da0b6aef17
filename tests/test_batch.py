"""The batch kernels equal the per-query reference functions, value for value, on random and edge-case runs."""

from __future__ import annotations

import numpy as np
import pytest

from evalkit.measures.batch import judged_query, rank_queries, standard_values
from evalkit.measures.metrics import (
    STANDARD_MEASURES,
    Measure,
    context_precision,
    context_recall,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank_at_k,
)

CONTEXT_K = 5
CHUNKS = [f"c{i:03d}" for i in range(60)]
LENGTHS = {c: 50 + (i * 37) % 400 for i, c in enumerate(CHUNKS)}


def _reference(measure: Measure, ranking: list[str], grades: dict[str, int], spans: dict) -> float:
    k = measure.cutoff or 0
    context = list(dict.fromkeys(ranking))[:CONTEXT_K]
    functions = {
        "recall": lambda: recall_at_k(ranking, grades, k),
        "mrr": lambda: reciprocal_rank_at_k(ranking, grades, k),
        "ndcg": lambda: ndcg_at_k(ranking, grades, k),
        "context_precision": lambda: context_precision(context, LENGTHS, spans),
        "context_recall": lambda: context_recall(context, LENGTHS, spans),
    }
    return functions[measure.name]()


def _random_query(rng: np.random.Generator) -> tuple[list[str], dict[str, int], dict]:
    judged = rng.choice(CHUNKS, size=int(rng.integers(1, 12)), replace=False)
    grades = {str(c): int(rng.integers(0, 4)) for c in judged}
    grades[str(judged[0])] = int(rng.integers(1, 4))  # answerable
    spans = {}
    for chunk in (c for c, g in grades.items() if g >= 1):
        length = LENGTHS[chunk]
        starts = rng.integers(0, length, size=int(rng.integers(1, 4)))
        spans[chunk] = [(int(s), int(min(length, s + rng.integers(0, 80)))) for s in starts]
    spans[str(judged[0])].append((0, 1))  # at least one character of gold evidence
    size = int(rng.choice([0, 1, 3, 7, 10, 15, 40]))
    pool = list(judged) + list(rng.choice(CHUNKS, size=20))
    ranking = [str(pool[int(i)]) for i in rng.integers(0, len(pool), size=size)]  # duplicates likely
    return ranking, grades, spans


@pytest.mark.parametrize("seed", range(4))
def test_batch_values_equal_the_reference_exactly(seed: int) -> None:
    rng = np.random.default_rng(seed)
    queries = [_random_query(rng) for _ in range(1500)]
    judged = [judged_query(grades, spans) for _, grades, spans in queries]
    values = standard_values([q[0] for q in queries], judged, LENGTHS, CONTEXT_K)
    assert set(values) == set(STANDARD_MEASURES)
    for measure, batch in values.items():
        reference = np.array([_reference(measure, r, g, s) for r, g, s in queries])
        mismatched = np.flatnonzero(batch != reference)
        assert mismatched.size == 0, (str(measure), mismatched[:5], batch[mismatched[:5]], reference[mismatched[:5]])


def test_hand_computed_ranking() -> None:
    judged = [judged_query({"a": 3, "b": 1, "z": 0}, {"a": [(0, 10)], "b": [(0, 5), (3, 8)]})]
    ranking = [["x", "b", "b", "a", "y"]]  # the duplicate b is dropped before any cutoff
    values = standard_values(ranking, judged, {"a": 100, "b": 20, "x": 30, "y": 50}, context_k=5)
    by_name = {str(m): float(v[0]) for m, v in values.items()}
    assert by_name["recall@1"] == 0.0
    assert by_name["recall@5"] == 1.0
    assert by_name["mrr@10"] == 0.5
    dcg = 1 / np.log2(3) + 7 / np.log2(4)
    idcg = 7 / np.log2(2) + 1 / np.log2(3)
    assert by_name["ndcg@10"] == pytest.approx(dcg / idcg, abs=1e-15)
    assert by_name["context_precision"] == 18 / 200  # (10 + 8) gold characters of 30 + 20 + 100 + 50
    assert by_name["context_recall"] == 1.0


def test_empty_ranking_scores_zero() -> None:
    judged = [judged_query({"a": 2}, {"a": [(0, 4)]})]
    values = standard_values([[]], judged, {"a": 10}, context_k=5)
    assert all(float(v[0]) == 0.0 for v in values.values())


def test_no_relevant_chunk_is_an_error_as_in_the_reference() -> None:
    with pytest.raises(ValueError, match="no chunk with grade >= 1"):
        judged_query({"a": 0}, {})


def test_unknown_returned_chunk_needs_a_length_for_context_only() -> None:
    judged = [judged_query({"a": 2}, {"a": [(0, 4)]})]
    ranking_only = [m for m in STANDARD_MEASURES if not m.name.startswith("context")]
    values = standard_values([["ghost", "a"]], judged, None, context_k=0, measures=ranking_only)
    assert float(values[Measure.parse("mrr@10")][0]) == 0.5
    with pytest.raises(ValueError, match="chunk 'ghost' has no entry in chunk_lengths"):
        standard_values([["ghost", "a"]], judged, {"a": 10}, context_k=5)


def test_depth_and_alignment_are_checked() -> None:
    judged = [judged_query({"a": 2}, {})]
    with pytest.raises(ValueError, match="rankings for"):
        rank_queries([[], []], judged, None, depth=10)
    with pytest.raises(ValueError, match="context_depth"):
        rank_queries([[]], judged, None, depth=3, context_depth=5)


def test_sequential_summation_adds_one_by_one_and_unknown_summation_is_refused() -> None:
    from evalkit.measures.batch import _discounted_sums

    grades = np.array([[3, 0, 2, 1, 3, 2, 1, 1, 3, 2]], dtype=np.int64)
    terms = [(2.0**g - 1.0) / np.log2(r + 2) for r, g in enumerate(grades[0])]
    running = 0.0
    for term in terms:
        running += float(term)
    assert float(_discounted_sums(grades, 10, "sequential")[0]) == running
    assert float(_discounted_sums(grades, 10, "exact")[0]) == __import__("math").fsum(float(t) for t in terms)
    with pytest.raises(ValueError, match="unknown summation 'pairwise'; valid: exact, sequential"):
        _discounted_sums(grades, 10, "pairwise")
