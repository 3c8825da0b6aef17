"""Tie policies: hand-checked orders, and trec_eval equality on heavily tied random runs (pytrec_eval as peer)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from evalkit.data.runs import read_trec_run
from evalkit.measures.core import score_rankings
from evalkit.measures.registry import parse_measures
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


NDCG_OF_GAIN = {"linear": "ndcg_cut_10", "exponential": "ndcg@10"}
"""evalkit's nDCG@10 with each gain: trec_eval's ``ndcg_cut_10`` is the linear one; evalkit's own ``ndcg@10``
(exponential gain) is trec_eval's nDCG over judgments of ``2**grade - 1``. Under the trec_eval policy both add their
terms one by one, as trec_eval does, and must equal pytrec_eval's exactly, as recall and reciprocal rank must."""


def _evalkit(rankings: Sequence[Sequence[str]], grades: Sequence[dict[str, int]], gain: str) -> list[dict[str, float]]:
    """Per query, evalkit's values of MEASURES (under pytrec_eval's names), terms added as trec_eval adds them."""
    names = {
        "recall_5": "recall_5",
        "recall_10": "recall_10",
        "ndcg_cut_10": NDCG_OF_GAIN[gain],
        "recip_rank": "recip_rank",
    }
    values, _ = score_rankings(rankings, grades, parse_measures(list(names.values())), SUMMATION_OF["trec_eval"])
    columns = {peer: values[ours].tolist() for peer, ours in names.items()}
    return [{peer: column[row] for peer, column in columns.items()} for row in range(len(rankings))]


def _differing(
    queries: Sequence[tuple[str, Sequence[tuple[str, float]], dict[str, int]]],
    peer: dict[str, dict[str, float]],
    gain: str,
    policy: str,
) -> list[str]:
    """The queries where evalkit, ordering each ranking under ``policy``, differs from pytrec_eval's values."""
    rankings = [order_ranking(pairs, policy) for _, pairs, _ in queries]
    ours = _evalkit(rankings, [grades for _, _, grades in queries], gain)
    return [q for (q, _, _), values in zip(queries, ours, strict=True) if values != peer[q]]


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
    assert _differing(queries, peer, gain, "trec_eval") == []


def test_the_evalkit_policy_differs_from_trec_eval_on_ties() -> None:
    """The comparison above can fail: under evalkit's own policy some tied queries score differently."""
    queries = _random_queries(seed=7)[:300]
    run = {q: {d: s for d, s in sorted(pairs, key=lambda p: p[1])} for q, pairs, _ in queries}
    peer = _pytrec({q: grades for q, _, grades in queries}, run)
    assert _differing(queries, peer, "linear", "evalkit")


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
    read = [(q, ranking, grades_of[q]) for q, ranking in run.rankings.items()]
    assert len(read) == 200
    assert _differing(read, peer, "linear", "trec_eval") == []


def test_a_run_exported_by_evalkit_reproduces_its_per_query_values_in_pytrec_eval(tmp_path: Path) -> None:
    from evalkit.data.fixture import load_fixture
    from evalkit.reporting.run_files import write_trec_runs
    from evalkit.runs.ablations import select_ablations
    from evalkit.runs.evaluation import evaluate

    from ..conftest import SYNTHETIC_DIR

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
