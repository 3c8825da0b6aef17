"""Typed parameters in measure names (``ndcg(gain=linear)@10``, ``precision(rel=2)@5``): parsed by each family's
declaration, refused by name when a family does not take them, and equal to trec_eval's (pytrec_eval's
``relevance_level``) where the definitions match."""

from __future__ import annotations

import math

import numpy as np
import pytest

import evalkit
from evalkit.measures.declaration import QueryCase
from evalkit.measures.families import BUILT_IN
from evalkit.measures.registry import measure_list, parse_measure, reference_value


def test_gain_and_rel_are_parsed_into_the_definition() -> None:
    linear = parse_measure("ndcg(gain=linear)@10")
    assert (linear.name, linear.gain, linear.cutoff) == ("ndcg(gain=linear)@10", "linear", 10)
    assert linear.definition == "ndcg(cutoff=10, gain=linear)"
    strict = parse_measure("precision(rel=2)@5")
    assert (strict.rel, strict.cutoff, strict.definition) == (2, 5, "precision(cutoff=5, rel=2)")
    assert parse_measure("map( rel = 3 )").definition == "map(cutoff=none, rel=3)"
    # the default level spells the plain measure's definition: reports of both compare
    assert parse_measure("recall(rel=1)@10").definition == parse_measure("recall@10").definition


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("precision(rel=0)@5", "parameter rel is at least 1"),
        ("precision(rel=two)@5", "parameter rel takes an integer"),
        ("precision(rel=-1)@5", "parameter rel takes an integer"),
        ("ndcg(gain=cubic)@10", "parameter gain takes one of exponential, linear"),
        ("precision(gain=linear)@5", "precision takes rel=<integer>"),
        ("precision(rel=2,rel=3)@5", "is repeated"),
        ("precision(k=5)", "write it precision[(rel=<integer>)]@k"),
        ("infap(rel=2)", "infap takes no parameter in parentheses"),
        ("ndcg(gain)@10", "ndcg takes gain=exponential|linear"),
        ("precision(rel=600)@5", "at most 512"),
    ],
)
def test_a_parameter_the_family_does_not_take_is_refused_by_name(name: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"measure .*") as error:
        parse_measure(name)
    assert says in str(error.value)


def test_every_parameter_is_declared_once_per_family() -> None:
    for family in BUILT_IN:
        names = [p.name for p in family.params]
        assert len(names) == len(set(names)), family.name
        assert "k" not in names[1:], f"{family.name}: k comes first"


def test_a_comma_inside_parentheses_stays_in_its_name() -> None:
    assert measure_list("ndcg(gain=linear)@10, P_5,,precision(rel=2)@5") == [
        "ndcg(gain=linear)@10",
        "P_5",
        "precision(rel=2)@5",
    ]


def test_rel_counts_lower_grades_as_judged_not_relevant() -> None:
    case = QueryCase(["a", "b", "c"], {"a": 1, "b": 2, "c": 0})
    assert reference_value(parse_measure("precision@3"), case) == pytest.approx(2 / 3)
    assert reference_value(parse_measure("precision(rel=2)@3"), case) == pytest.approx(1 / 3)
    assert reference_value(parse_measure("mrr(rel=2)"), case) == 0.5
    # no grade reaches the level: 0 on an answerable query, as trec_eval scores it; still undefined without any
    assert reference_value(parse_measure("recall(rel=3)@3"), case) == 0.0
    with pytest.raises(ValueError, match="no chunk with grade >= 1"):
        reference_value(parse_measure("recall(rel=3)@3"), QueryCase(["a"], {"a": 0}))


_PEERS = {
    "precision(rel=2)@5": "P_5",
    "recall(rel=2)@10": "recall_10",
    "success(rel=2)@10": "success_10",
    "mrr(rel=2)": "recip_rank",
    "map(rel=2)": "map",
    "rprec(rel=2)": "Rprec",
    "bpref(rel=2)": "bpref",
}


def _data(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    rng = np.random.default_rng(seed)
    corpus = [f"d{i:02d}" for i in range(40)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(200):
        judged = rng.choice(corpus, size=int(rng.integers(2, 16)), replace=False)
        qrels[f"q{q}"] = {str(c): int(g) for c, g in zip(judged, rng.integers(0, 4, size=len(judged)), strict=True)}
        qrels[f"q{q}"][str(judged[0])] = int(rng.integers(1, 4))
        ranking = rng.choice(corpus, size=int(rng.integers(1, 31)), replace=False)
        run[f"q{q}"] = {str(c): float(len(ranking) - r) for r, c in enumerate(ranking)}  # no ties
    return qrels, run


def test_rel_equals_trec_eval_relevance_level_on_random_queries() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = _data(20261205)
    peer = pytrec_eval.RelevanceEvaluator(
        qrels, {"P.5", "recall.10", "success.10", "recip_rank", "map", "Rprec", "bpref"}, relevance_level=2
    ).evaluate(run)
    result = evalkit.score(qrels, run, measures=list(_PEERS), ties="trec_eval")
    per_query = result.per_query
    reaching = [q for q, grades in qrels.items() if max(grades.values()) >= 2]
    assert 0 < len(reaching) < len(qrels)  # queries with and without a grade at the level are exercised
    for ours, theirs in _PEERS.items():
        column = per_query[ours]
        assert [float(column.loc[q]) for q in qrels] == [peer[q][theirs] for q in qrels], ours
    assert math.isnan(evalkit.score({"q": {"a": 0}}, {"q": {"a": 1.0}}, measures=["map(rel=2)"]).per_query.iloc[0, 0])


def test_the_batch_kernels_equal_the_references_at_a_level() -> None:
    qrels, run = _data(7)
    names = ["precision(rel=3)@5", "recall(rel=2)", "map(rel=2)@10", "condensed_ndcg(gain=linear)@10", "bpref(rel=3)"]
    result = evalkit.score(qrels, run, measures=names)
    for name in names:
        measure = parse_measure(name)
        column = result.per_query[name]
        for q, grades in qrels.items():
            ranking = sorted(run[q], key=lambda d: -run[q][d])
            try:
                expected = reference_value(measure, QueryCase(ranking, grades))
            except ValueError:
                assert math.isnan(float(column.loc[q])), (name, q)
                continue
            assert float(column.loc[q]) == pytest.approx(expected, abs=1e-12), (name, q)
