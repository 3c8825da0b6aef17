"""The suite runner: per-query scoring, failures, aggregation, hashes and the determinism check."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from evalkit.common.hashing import sha256_of
from evalkit.data.fixture import Fixture, Judgment, LoadedFixture, Query, Span
from evalkit.data.settings import RetrievalSettings
from evalkit.measures.core import score_queries, score_query
from evalkit.measures.metrics import aggregate
from evalkit.measures.results import CONTEXT_K, QueryResult, query_failures
from evalkit.runs import evaluation as evaluation_module
from evalkit.runs.ablations import ABLATION_IDS, select_ablations
from evalkit.runs.evaluation import (
    DeterminismError,
    Evaluation,
    corpus_sha256,
    evaluate,
    evaluation_definition_hash,
    make_providers,
    projection,
)

from ..conftest import ROOT, TINY_DIR

ALL = select_ablations(list(ABLATION_IDS))


def _query(query_id: str, language: str, judgments: tuple[Judgment, ...]) -> Query:
    return Query(query_id=query_id, language=language, text="question text", judgments=judgments)  # type: ignore[arg-type]


def _judgment(chunk_id: str, grade: int, start: int, text: str) -> Judgment:
    return Judgment(chunk_id=chunk_id, grade=grade, spans=(Span(start=start, text=text),))


def test_score_query_hand_computed() -> None:
    # a (grade 3) at rank 2, b (grade 1) at rank 4; x and y are irrelevant.
    query = _query("q1", "en", (_judgment("a", 3, 0, "aaaa"), _judgment("b", 1, 2, "bb")))
    lengths = {"a": 10, "b": 10, "x": 20, "y": 20, "z": 5}
    values = score_query(query, ["x", "a", "y", "b", "z", "a"], lengths)
    dcg = 7 / math.log2(3) + 1 / math.log2(5)
    idcg = 7 / math.log2(2) + 1 / math.log2(3)
    assert values["ndcg@10"] == pytest.approx(dcg / idcg, rel=1e-12)
    assert values["mrr@10"] == 0.5
    assert values["recall@1"] == 0.0
    assert values["recall@5"] == 1.0
    assert values["recall@10"] == 1.0
    # Context = first five results x, a, y, b, z: 65 characters, of which 4 + 2 are gold spans.
    assert CONTEXT_K == 5
    assert values["context_precision"] == pytest.approx(6 / 65, rel=1e-12)
    assert values["context_recall"] == 1.0


def test_score_query_no_answer_has_only_fpr_term() -> None:
    query = _query("q2", "zh", ())
    assert score_query(query, [], {}) == {"no_answer_fpr": 0.0}
    assert score_query(query, ["a"], {"a": 3}) == {"no_answer_fpr": 1.0}


def test_query_failures_name_ids_and_ranks() -> None:
    query = _query("q1", "en", (_judgment("a", 3, 0, "aa"), _judgment("b", 2, 0, "bb"), _judgment("c", 1, 0, "c")))
    ranking = [f"x{i:02d}" for i in range(10)] + ["b"]
    failures = query_failures(query, ranking)
    assert [(f.chunk_id, f.grade, f.rank) for f in failures] == [("a", 3, None), ("b", 2, 11), ("c", 1, None)]
    assert failures[1].describe() == "query q1: relevant chunk b (grade 2) not in the top 10 (at rank 11)"
    assert query_failures(query, ["a", "b", "c"]) == []


def test_no_answer_failure_counts_results() -> None:
    query = _query("q9", "zh", ())
    assert query_failures(query, []) == []
    (failure,) = query_failures(query, ["a", "b"])
    assert failure.describe() == "no-answer query q9 returned 2 result(s)"
    assert failure.kind == "no_answer_returned_results"


def test_aggregate_macro_averages_per_language() -> None:
    q_en = _query("e1", "en", (_judgment("a", 3, 0, "a"),))
    q_en2 = _query("e2", "en", (_judgment("a", 3, 0, "a"),))
    q_zh = _query("z1", "zh", (_judgment("a", 3, 0, "a"),))
    n_en = _query("e3", "en", ())
    n_zh = _query("z2", "zh", ())
    base = {
        "recall@1": 0.0,
        "recall@5": 0.0,
        "recall@10": 0.0,
        "mrr@10": 0.0,
        "context_precision": 0.0,
        "context_recall": 0.0,
    }
    per_query = {
        "e1": {**base, "ndcg@10": 1.0},
        "e2": {**base, "ndcg@10": 0.5},
        "z1": {**base, "ndcg@10": 0.25},
        "e3": {"no_answer_fpr": 1.0},
        "z2": {"no_answer_fpr": 0.0},
    }
    table = aggregate([q_en, q_en2, q_zh, n_en, n_zh], per_query)
    assert table["en"]["ndcg@10"] == 0.75
    assert table["zh"]["ndcg@10"] == 0.25
    assert table["all"]["ndcg@10"] == pytest.approx(1.75 / 3, rel=1e-15)
    assert table["en"]["no_answer_fpr"] == 1.0
    assert table["all"]["no_answer_fpr"] == 0.5


def test_evaluation_covers_every_ablation_and_query(tiny_evaluation: Evaluation) -> None:
    assert list(tiny_evaluation.ablations) == list(ABLATION_IDS)
    query_ids = sorted(q.query_id for q in tiny_evaluation.fixture.queries)
    for result in tiny_evaluation.ablations.values():
        assert [r.query_id for r in result.results] == query_ids
        assert result.latency.count == 2 * len(query_ids)
        assert set(result.aggregates) == {"all", "en", "zh"}
        for r in result.results:
            assert len(set(r.chunk_ids)) == len(r.chunk_ids)
            assert list(r.scores) == sorted(r.scores, reverse=True)


def test_repeated_evaluations_agree(tiny: LoadedFixture, tiny_evaluation: Evaluation) -> None:
    again = evaluate(tiny, ALL, runs=1)
    assert again.projection_sha256 == tiny_evaluation.projection_sha256
    assert again.evaluation_definition_hash == tiny_evaluation.evaluation_definition_hash


def test_determinism_error_names_the_ablation(tiny: LoadedFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    real = evaluation_module.run_once
    calls = {"n": 0}

    def flaky(*args: object, **kwargs: object) -> dict[str, tuple[QueryResult, ...]]:
        outcome = real(*args, **kwargs)  # type: ignore[arg-type]
        calls["n"] += 1
        if calls["n"] == 2:
            results = outcome["hybrid"]
            first = results[0]
            outcome["hybrid"] = (
                replace(first, chunk_ids=tuple(reversed(first.chunk_ids)), scores=tuple(reversed(first.scores))),
            )
            outcome["hybrid"] += results[1:]
        return outcome

    monkeypatch.setattr(evaluation_module, "run_once", flaky)
    with pytest.raises(DeterminismError, match="run 2 differs from run 1 in ablation 'hybrid'"):
        evaluate(tiny, ALL, runs=2)


def test_runs_must_be_positive(tiny: LoadedFixture) -> None:
    with pytest.raises(ValueError, match="runs must be >= 1"):
        evaluate(tiny, ALL, runs=0)


_PROBE = """
import json, sys
from evalkit.runs.ablations import ABLATION_IDS, select_ablations
from evalkit.runs.evaluation import evaluate
from evalkit.data.fixture import load_fixture
e = evaluate(load_fixture(sys.argv[1]), select_ablations(list(ABLATION_IDS)), runs=1)
print(json.dumps([e.projection_sha256, e.evaluation_definition_hash, e.provider_definitions_hash]))
"""


@pytest.mark.parametrize("seed", ["0", "4242"])
def test_projection_identical_across_hash_seeds(tiny_evaluation: Evaluation, seed: str) -> None:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(TINY_DIR)], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == [
        tiny_evaluation.projection_sha256,
        tiny_evaluation.evaluation_definition_hash,
        tiny_evaluation.provider_definitions_hash,
    ]


def _definition(fixture: Fixture, loaded: LoadedFixture, settings: RetrievalSettings | None = None) -> str:
    changed = LoadedFixture(fixture=fixture, aliases=loaded.aliases)
    return evaluation_definition_hash(fixture, settings or RetrievalSettings(), ALL, make_providers(ALL, changed))


def test_definition_hash_tracks_the_contract(tiny: LoadedFixture) -> None:
    fixture = tiny.fixture
    base = _definition(fixture, tiny)
    first = fixture.queries[0]
    reworded = replace_query(fixture, first.model_copy(update={"text": first.text + " please"}))
    regraded_judgment = first.judgments[0].model_copy(update={"grade": 2})
    regraded = replace_query(fixture, first.model_copy(update={"judgments": (regraded_judgment, *first.judgments[1:])}))
    bumped = fixture.model_copy(update={"fixture_version": "1.0.1"})
    variants = [
        _definition(reworded, tiny),
        _definition(regraded, tiny),
        _definition(bumped, tiny),
        _definition(fixture, tiny, RetrievalSettings(top_k=9)),
    ]
    assert len({base, *variants}) == 5
    shuffled = fixture.model_copy(update={"queries": tuple(reversed(fixture.queries))})
    assert _definition(shuffled, tiny) == base


def replace_query(fixture: Fixture, query: Query) -> Fixture:
    queries = tuple(query if q.query_id == query.query_id else q for q in fixture.queries)
    return fixture.model_copy(update={"queries": queries})


def test_corpus_hash_ignores_order_but_not_text(tiny: LoadedFixture) -> None:
    fixture = tiny.fixture
    reordered = fixture.model_copy(update={"chunks": tuple(reversed(fixture.chunks))})
    assert corpus_sha256(reordered) == corpus_sha256(fixture)
    chunk = fixture.chunks[0]
    edited = fixture.model_copy(update={"chunks": (chunk.model_copy(update={"text": chunk.text + "!"}),)})
    assert corpus_sha256(edited) != corpus_sha256(fixture)


def test_projection_excludes_latency(tiny_evaluation: Evaluation) -> None:
    result = tiny_evaluation.ablations["lexical"]
    slower = replace(result, results=tuple(replace(r, latency_ms=r.latency_ms + 5) for r in result.results))
    assert sha256_of(projection({"lexical": slower})) == sha256_of(projection({"lexical": result}))


def test_duplicates_are_removed_before_the_context_cut() -> None:
    # [a, a, x, y, z, w]: deduplicated, the context is a, x, y, z, w (five distinct chunks), not a, a, x, y, z.
    query = _query("q3", "en", (_judgment("w", 3, 0, "ww"),))
    lengths = dict.fromkeys(["a", "x", "y", "z", "w"], 10)
    values = score_query(query, ["a", "a", "x", "y", "z", "w"], lengths)
    assert values["context_recall"] == 1.0
    assert values["context_precision"] == 2 / 50
    # Ten copies of a then w: w is the second distinct chunk, so it is within the top 10.
    assert query_failures(_query("q5", "en", (_judgment("w", 3, 0, "w"),)), ["a"] * 10 + ["w"]) == []


def test_batch_scoring_equals_the_per_query_reference(synthetic_evaluation: Evaluation) -> None:
    fixture = synthetic_evaluation.fixture
    queries = {q.query_id: q for q in fixture.queries}
    lengths = {c.chunk_id: len(c.text) for c in fixture.chunks}
    for result in synthetic_evaluation.ablations.values():
        rankings = [r.chunk_ids for r in result.results]
        ordered = [queries[r.query_id] for r in result.results]
        batch = score_queries(ordered, rankings, lengths)
        reference = {q.query_id: score_query(q, ranking, lengths) for q, ranking in zip(ordered, rankings, strict=True)}
        assert batch == reference
        assert batch == result.per_query
