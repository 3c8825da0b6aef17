"""Run files scored against a fixture through the columnar core equal the same runs scored as external systems of
the fixture evaluation (the path `evalkit score --fixture` took before): every per-query value, every aggregate and
every failure, under both tie policies, on seeded tie-heavy runs with duplicates, unknown chunks, missing queries,
queries the fixture does not hold and answers to no-answer queries."""

from __future__ import annotations

import numpy as np
import pytest

from evalkit.data.fixture import LoadedFixture
from evalkit.data.runs import Run, run_from_rankings
from evalkit.reporting.build import build_report
from evalkit.reporting.report import Report, SystemReport
from evalkit.retrieval.retriever import RunRetriever
from evalkit.runs.ablations import external_ablation
from evalkit.runs.evaluation import evaluate
from evalkit.runs.fixture_runs import fixture_qrels, score_fixture_runs


def _random_run(loaded: LoadedFixture, seed: int) -> Run:
    rng = np.random.default_rng(seed)
    fixture = loaded.fixture
    chunks = sorted(c.chunk_id for c in fixture.chunks)
    rankings: dict[str, list[tuple[str, float]]] = {}
    for query in sorted(fixture.queries, key=lambda q: q.query_id):
        if rng.random() < 0.1:
            continue  # a fixture query the run leaves out
        relevant = [j.chunk_id for j in query.judgments]
        pool = [*chunks, "not-a-chunk-1", "not-a-chunk-2"]
        picked = list(rng.choice(pool, size=int(rng.integers(0, 30)), replace=True))
        if relevant and rng.random() < 0.7:
            picked.insert(int(rng.integers(0, len(picked) + 1)), relevant[0])  # a relevant chunk, at any depth
        scores = np.round(rng.random(len(picked)) * 4) / 4  # few distinct scores: ties everywhere
        rankings[query.query_id] = [(str(c), float(s)) for c, s in zip(picked, scores, strict=True)]
    rankings["q-not-in-the-fixture"] = [(chunks[0], 1.0)]
    return run_from_rankings(f"random-{seed}", rankings)


def _reference(loaded: LoadedFixture, run: Run, ties: str) -> Report:
    system = external_ablation(run.name, "run")
    evaluation = evaluate(loaded, [system], runs=1, systems={run.name: RunRetriever(run)}, ties=ties)
    return build_report(evaluation)


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
@pytest.mark.parametrize("seed", range(6))
def test_columnar_fixture_scoring_equals_the_evaluation_path(synthetic: LoadedFixture, ties: str, seed: int) -> None:
    run = _random_run(synthetic, seed)
    expected = _reference(synthetic, run, ties).ablations[run.name]
    systems = {run.name: SystemReport(kind="run-file", sha256=None, counts={})}
    report = score_fixture_runs(synthetic.fixture, [run], ties, systems).to_report()
    actual = report.ablations[run.name]
    assert actual.per_query == expected.per_query
    assert actual.metrics == expected.metrics
    assert actual.query_counts == expected.query_counts
    assert [f.model_dump() for f in actual.failures] == [f.model_dump() for f in expected.failures]
    assert any(f.kind == "no_answer_returned_results" for f in actual.failures)
    assert any(f.rank is not None for f in actual.failures), "a relevant chunk found past the cutoff keeps its rank"
    assert report.judgments_sha256 == _reference(synthetic, run, ties).judgments_sha256


def test_fixture_qrels_keep_queries_without_judgments(synthetic: LoadedFixture) -> None:
    qrels = fixture_qrels(synthetic.fixture)
    assert qrels.queries.to_pylist() == sorted(q.query_id for q in synthetic.fixture.queries)
    no_answer = {q.query_id for q in synthetic.fixture.queries if not q.answerable}
    assert no_answer and no_answer.isdisjoint({qrels.queries[int(q)].as_py() for q in qrels.query})
