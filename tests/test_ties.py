"""Tie policies: hand-checked orders, and trec_eval equality on heavily tied random runs (pytrec_eval as peer)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from evalkit.data.runs import read_trec_run
from evalkit.measures.batch import judged_query, standard_values
from evalkit.measures.metrics import Measure, ndcg_at_k, recall_at_k, reciprocal_rank_at_k
from evalkit.measures.ties import SUMMATION_OF, TIE_POLICIES, order_ranking, tie_policy

pytrec_eval = pytest.importorskip("pytrec_eval")

QUERIES = 2_000
MEASURES = {"recall_5", "recall_10", "ndcg_cut_10", "recip_rank"}


def test_evalkit_policy_orders_score_descending_then_id_ascending() -> None:
    pairs = (("c", 1.0), ("a", 1.0), ("b", 2.0), ("d", 0.5))
    assert order_ranking(pairs, "evalkit") == ("b", "a", "c", "d")


def test_trec_eval_policy_orders_ties_by_id_descending() -> None:
    pairs = (("c", 1.0), ("a", 1.0), ("b", 2.0), ("d", 0.5))
    assert order_ranking(pairs, "trec_eval") == ("b", "c", "a", "d")


def test_trec_eval_policy_rounds_scores_to_float32_first() -> None:
    # 1.0 and 1.0 + 1e-9 differ as doubles but are the same float32, so the ID decides (descending).
    pairs = (("a", 1.0 + 1e-9), ("b", 1.0))
    assert order_ranking(pairs, "evalkit") == ("a", "b")
    assert order_ranking(pairs, "trec_eval") == ("b", "a")


@pytest.mark.parametrize("policy", sorted(TIE_POLICIES))
def test_duplicates_keep_their_best_placed_occurrence(policy: str) -> None:
    pairs = (("a", 0.1), ("b", 0.5), ("a", 0.9))
    assert order_ranking(pairs, policy) == ("a", "b")


@pytest.mark.parametrize("policy", sorted(TIE_POLICIES))
def test_nan_score_is_refused_naming_the_chunk(policy: str) -> None:
    with pytest.raises(ValueError, match="chunk 'x'"):
        order_ranking((("x", float("nan")),), policy)


def test_unknown_policy_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown tie policy 'ranx'; valid: evalkit, trec_eval"):
        tie_policy("ranx")


def _random_queries(seed: int) -> list[tuple[str, list[tuple[str, float]], dict[str, int]]]:
    """Runs with heavy ties (few distinct scores, some equal only in float32), duplicates and grades 0 to 3."""
    rng = np.random.default_rng(seed)
    pool = [f"d{i:03d}" for i in range(40)]
    levels = np.array([0.0, 0.25, 0.5, 1.0, 1.0 + 1e-9, 2.0, 2.0 - 1e-12])
    queries = []
    for index in range(QUERIES):
        size = int(rng.integers(1, 25))
        docs = rng.choice(pool, size=size, replace=True)  # replacement: duplicates
        scores = rng.choice(levels, size=size)
        judged = rng.choice(pool, size=int(rng.integers(1, 12)), replace=False)
        grades = {str(d): int(g) for d, g in zip(judged, rng.integers(0, 4, size=len(judged)), strict=True)}
        if max(grades.values()) < 1:
            grades[str(judged[0])] = int(rng.integers(1, 4))
        queries.append((f"q{index:04d}", [(str(d), float(s)) for d, s in zip(docs, scores, strict=True)], grades))
    return queries


def _pytrec(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    result: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    return result


NDCG_ULPS = 4
"""With linear gain (not evalkit's definition) nDCG is checked through the reference function, which sums with
math.fsum; trec_eval sums one by one, so the last bits may differ. evalkit's own nDCG (exponential gain) under the
trec_eval policy adds its terms one by one too and must equal pytrec_eval's exactly, as recall and reciprocal rank
must."""
NDCG_AT_10 = Measure.parse("ndcg@10")


def _same(ours: dict[str, float], peer: dict[str, float], gain: str = "exponential") -> bool:
    exact = all(ours[m] == peer[m] for m in ("recall_5", "recall_10", "recip_rank"))
    if gain == "exponential":
        return exact and ours["ndcg_cut_10"] == peer["ndcg_cut_10"]
    ndcg = abs(ours["ndcg_cut_10"] - peer["ndcg_cut_10"]) <= NDCG_ULPS * math.ulp(peer["ndcg_cut_10"])
    return exact and ndcg


def _trec_eval_ndcg(ranking: tuple[str, ...], grades: dict[str, int]) -> float:
    """evalkit's nDCG@10 under the trec_eval policy: the batch kernel with trec_eval's summation."""
    values = standard_values(
        [ranking], [judged_query(grades, {})], None, 0, measures=(NDCG_AT_10,), summation=SUMMATION_OF["trec_eval"]
    )
    return float(values[NDCG_AT_10][0])


def _evalkit(ranking: tuple[str, ...], grades: dict[str, int], gain: str) -> dict[str, float]:
    exponential = gain == "exponential"
    return {
        "recall_5": recall_at_k(ranking, grades, 5),
        "recall_10": recall_at_k(ranking, grades, 10),
        "ndcg_cut_10": _trec_eval_ndcg(ranking, grades) if exponential else ndcg_at_k(ranking, grades, 10, gain=gain),
        "recip_rank": reciprocal_rank_at_k(ranking, grades, len(ranking)),
    }


@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_trec_eval_policy_equals_pytrec_eval_on_tied_random_runs(gain: str) -> None:
    queries = _random_queries(seed=20261202)
    run: dict[str, dict[str, float]] = {}
    for query_id, pairs, _ in queries:
        best: dict[str, float] = {}
        for doc, score in pairs:
            best[doc] = max(score, best.get(doc, score))
        run[query_id] = best
    # trec_eval's nDCG gain is the judged value itself: exponential gain is checked by judging 2**grade - 1.
    qrels = {q: {d: (2**g - 1 if gain == "exponential" else g) for d, g in grades.items()} for q, _, grades in queries}
    peer = _pytrec(qrels, run)
    assert len(peer) == QUERIES
    mismatches = []
    for query_id, pairs, grades in queries:
        ours = _evalkit(order_ranking(pairs, "trec_eval"), grades, gain)
        if not _same(ours, peer[query_id], gain):
            mismatches.append(query_id)
    assert mismatches == []


def test_the_evalkit_policy_differs_from_trec_eval_on_ties() -> None:
    """The comparison above can fail: under evalkit's own policy some tied queries score differently."""
    queries = _random_queries(seed=7)[:300]
    run = {q: {d: s for d, s in sorted(pairs, key=lambda p: p[1])} for q, pairs, _ in queries}
    peer = _pytrec({q: grades for q, _, grades in queries}, run)
    differing = [
        q
        for q, pairs, grades in queries
        if not _same(_evalkit(order_ranking(pairs, "evalkit"), grades, "linear"), peer[q], "linear")
    ]
    assert differing


def test_a_trec_file_scored_by_pytrec_eval_matches_evalkit(tmp_path: Path) -> None:
    folder = tmp_path
    queries = _random_queries(seed=3)[:200]
    lines = [f"{q} Q0 {d} {rank} {s!r} tagged\n" for q, pairs, _ in queries for rank, (d, s) in enumerate(pairs, 1)]
    (folder / "run.trec").write_text("".join(lines), encoding="utf-8")
    run = read_trec_run(folder / "run.trec")
    assert run.name == "tagged"
    grades_of = {q: grades for q, _, grades in queries}
    peer_run = {
        q: {d: max(s for dd, s in ranking if dd == d) for d, _ in ranking} for q, ranking in run.rankings.items()
    }
    peer = _pytrec(grades_of, peer_run)
    for query_id, ranking in run.rankings.items():
        assert _same(
            _evalkit(order_ranking(ranking, "trec_eval"), grades_of[query_id], "linear"), peer[query_id], "linear"
        )


def test_a_run_exported_by_evalkit_reproduces_its_per_query_values_in_pytrec_eval(tmp_path: Path) -> None:
    from evalkit.ablations import select_ablations
    from evalkit.data.fixture import load_fixture
    from evalkit.evaluation import evaluate
    from evalkit.reporting.trec import write_trec_runs

    from .conftest import SYNTHETIC_DIR

    loaded = load_fixture(SYNTHETIC_DIR)
    evaluation = evaluate(loaded, select_ablations(["lexical", "hybrid"]), runs=1, ties="trec_eval")
    answerable = [q for q in loaded.fixture.queries if q.answerable]
    qrels = {q.query_id: {j.chunk_id: 2**j.grade - 1 for j in q.judgments} for q in answerable}
    compared = 0
    for path in write_trec_runs(evaluation, tmp_path):
        run = read_trec_run(path)
        per_query = evaluation.ablations[run.name].per_query
        peer_run = {q: dict(ranking) for q, ranking in run.rankings.items() if q in qrels}
        peer = _pytrec(qrels, peer_run)
        for query_id, values in peer.items():
            ours = per_query[query_id]
            assert (ours["recall@5"], ours["recall@10"], ours["mrr@10"]) == (
                values["recall_5"],
                values["recall_10"],
                values["recip_rank"],
            ), query_id
            assert ours["ndcg@10"] == values["ndcg_cut_10"], query_id
            compared += 1
    assert compared > 100
