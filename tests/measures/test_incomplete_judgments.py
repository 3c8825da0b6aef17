"""Measures for incomplete judgments: ``bpref`` and ``infAP`` against trec_eval (pytrec_eval), the condensed-list
forms against a literal reference and ir_measures' ``judged_only``, ``unj@k`` against ``judged@k``, and each one's
edge cases.

Kernels equal their reference functions on random data in ``test_core.py``, which runs every family.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pytest

import evalkit
from evalkit.measures.core import depth_of, score_rankings
from evalkit.measures.kernels.infap import EPSILON
from evalkit.measures.ranked import dedupe_ranking
from evalkit.measures.registry import QueryCase, parse_measure, parse_measures, reference_value

Pairs = list[tuple[str, float]]
SCORES = (0.0, 0.25, 0.5, 1.0, 1.0 + 1e-9, 2.0)
"""Few distinct scores (two equal only in float32): most rankings hold ties."""
CONDENSED = {
    "condensed_ndcg@10": "ndcg@10",
    "condensed_ndcg@3": "ndcg@3",
    "condensed_ndcg": "ndcg@1000000",  # the whole ranking (bare ndcg and map are trec_eval's)
    "condensed_map": "map@1000000",
    "condensed_map@10": "map@10",
    "condensed_precision@5": "precision@5",
    "condensed_recall@10": "recall@10",
    "condensed_recall": "recall",
    "condensed_mrr@10": "mrr@10",
    "condensed_mrr": "mrr",
}
"""Each condensed form and the plain measure its literal reference computes on the condensed ranking."""


@functools.cache
def _random_collection(seed: int, queries: int = 1_500) -> tuple[dict[str, dict[str, int]], dict[str, Pairs]]:
    """Judged queries with grades -1 (pooled, not judged) to 3, some with no relevant document, and a tie-heavy run
    with duplicates, unjudged documents, empty rankings and judged queries it leaves out."""
    rng = np.random.default_rng(seed)
    pool = [f"d{i:03d}" for i in range(40)]
    judgments: dict[str, dict[str, int]] = {}
    rankings: dict[str, Pairs] = {}
    for index in range(queries):
        query_id = f"q{index:04d}"
        judged = rng.choice(pool, size=int(rng.integers(1, 20)), replace=False)
        judgments[query_id] = {str(d): int(g) for d, g in zip(judged, rng.integers(-1, 4, len(judged)), strict=True)}
        if index % 40 == 0:
            continue  # judged, not in the run
        size = int(rng.choice([0, 1, 3, 10, 25, 45]))
        docs, scores = rng.choice(pool, size=size), rng.choice(SCORES, size=size)
        rankings[query_id] = [(str(d), float(s)) for d, s in zip(docs, scores, strict=True)]
    return judgments, rankings


def _best_scores(rankings: Mapping[str, Pairs]) -> dict[str, dict[str, float]]:
    """A run as a peer reads it: one score a document, its highest (its best-placed copy, the one evalkit keeps)."""
    run: dict[str, dict[str, float]] = {}
    for query_id, pairs in rankings.items():
        best: dict[str, float] = {}
        for doc, score in pairs:
            best[doc] = max(score, best.get(doc, score))
        if best:
            run[query_id] = best
    return run


def _scored(
    judgments: dict[str, dict[str, int]], rankings: dict[str, Pairs], names: Sequence[str], ties: str
) -> pd.DataFrame:
    """evalkit's per-query values, query IDs as the index."""
    return evalkit.score(judgments, _best_scores(rankings), measures=list(names), ties=ties).per_query


# ----------------------------------------------------------------------------------------------------
# bpref and infAP: trec_eval's, through pytrec_eval
# ----------------------------------------------------------------------------------------------------


def _pytrec_eval(judgments: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    values: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(judgments, {"bpref", "infAP"}).evaluate(run)
    return values


def _trec_eval_differences(
    judgments: dict[str, dict[str, int]], rankings: dict[str, Pairs], ties: str
) -> tuple[int, list[tuple[str, str, float, float]]]:
    peer = _pytrec_eval(judgments, _best_scores(rankings))
    ours = _scored(judgments, rankings, ["bpref", "infAP"], ties)
    differences = [
        (query_id, name, float(ours.loc[query_id, name]), values[name])
        for query_id, values in peer.items()
        for name in ("bpref", "infAP")
        if float(ours.loc[query_id, name]) != values[name]
    ]
    return len(peer), differences


def test_bpref_and_infap_equal_trec_eval_on_random_tie_heavy_data() -> None:
    judgments, rankings = _random_collection(seed=20260329)
    compared, differences = _trec_eval_differences(judgments, rankings, "trec_eval")
    assert compared >= 1_200
    assert differences == []


def test_the_random_collection_covers_what_bpref_and_infap_read() -> None:
    judgments, rankings = _random_collection(seed=20260329)
    run = _best_scores(rankings)
    assert sum(-1 in grades.values() for grades in judgments.values()) > 500
    assert sum(max(grades.values()) < 1 for grades in judgments.values()) > 20  # scored 0, as trec_eval scores them
    assert sum(not pairs for pairs in rankings.values()) > 100
    assert sum(len({d for d, _ in pairs}) < len(pairs) for pairs in rankings.values()) > 300
    assert sum(any(d not in judgments[q] for d in docs) for q, docs in run.items()) > 1_000
    peer = _pytrec_eval(judgments, run)
    assert len({round(v["bpref"], 6) for v in peer.values()}) > 100
    assert len({round(v["infAP"], 6) for v in peer.values()}) > 300


def test_the_trec_eval_comparison_can_fail() -> None:
    """Ordered under evalkit's own tie policy, tied queries score differently: the comparison above can see it."""
    judgments, rankings = _random_collection(seed=20260329)
    _, differences = _trec_eval_differences(judgments, rankings, "evalkit")
    assert len({query_id for query_id, *_ in differences}) > 100


SMALL_QRELS = {
    "301": {"r1": 1, "r2": 2, "r3": 1, "n1": 0, "n2": 0, "p1": -1, "p2": -1},
    "302": {"a": 2, "b": 0, "c": -1},
    "303": {"x": 0, "y": -1},  # no relevant document
    "304": {"m": 1, "n": 0},  # judged, left out of the run
    "305": {"s": 1, "t": 0},  # every result unjudged
}
SMALL_RUN = {
    "301": {"n1": 9.0, "r1": 8.0, "u1": 7.0, "p1": 6.0, "r2": 5.0, "n2": 4.0, "r3": 3.0, "u2": 2.0},
    "302": {"c": 3.0, "a": 3.0, "b": 3.0, "u": 1.0},  # ties: trec_eval orders them by ID descending, c b a
    "303": {"x": 2.0, "y": 1.0},
    "305": {"u1": 2.0, "u2": 1.0},
    "999": {"r1": 1.0},  # nobody judged 999
}
"""A trec_eval-style collection: grades -1, 0, 1 and 2, unjudged documents, ties, a query without a relevant
document, a judged query the run leaves out and a run query nobody judged."""


def _infap_term(j: int, rel_above: int, nonrel_above: int, pooled_above: int) -> float:
    """trec_eval's estimated precision at a relevant document at 0-based position j > 0, as m_infap.c writes it."""
    fj = float(j)
    return 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((rel_above + nonrel_above + pooled_above) / fj) * (
        (rel_above + EPSILON) / (rel_above + nonrel_above + 2 * EPSILON)
    )


def test_bpref_and_infap_on_a_small_trec_eval_style_collection() -> None:
    result = evalkit.score(SMALL_QRELS, SMALL_RUN, measures=["bpref", "infAP", "infap"], ties="trec_eval")
    ours = result.per_query
    # 301: R = 3, N = 2. n1 (1 non-relevant above), r1: 1 - 1/2; u1, p1 skipped; r2: 1 - 1/2; n2; r3: 1 - 2/2.
    assert ours.loc["301", "bpref"] == (0.5 + 0.5 + 0.0) / 3
    # infAP: r1 at j=1 (n1 above), r2 at j=4 (r1, n1, p1 above: u1 is outside the pool), r3 at j=6.
    terms = [_infap_term(1, 0, 1, 0), _infap_term(4, 1, 1, 1), _infap_term(6, 2, 2, 1)]
    assert ours.loc["301", "infAP"] == (terms[0] + terms[1] + terms[2]) / 3
    assert ours.loc["301", "infAP"] == pytest.approx((0.5 + 0.5 + (1 / 7 + (5 / 7) * (2 / 4))) / 3, abs=1e-5)
    # 302 ordered c, b, a: a follows b (judged non-relevant) and c (pooled): bpref 1 - 1/1 = 0
    assert ours.loc["302", "bpref"] == 0.0
    assert ours.loc["302", "infAP"] == _infap_term(2, 0, 1, 1)
    # no relevant document, a query left out, every result unjudged: 0 under trec_eval's names
    assert ours.loc[["303", "304", "305"], ["bpref", "infAP"]].to_numpy().tolist() == [[0.0, 0.0]] * 3
    assert math.isnan(ours.loc["303", "infap"])  # evalkit's name: answerable queries only
    assert ours.loc["305", "infap"] == 0.0
    peer = _pytrec_eval(SMALL_QRELS, SMALL_RUN)
    assert set(peer) == {"301", "302", "303", "305"}
    for query_id, values in peer.items():
        assert (ours.loc[query_id, "bpref"], ours.loc[query_id, "infAP"]) == (values["bpref"], values["infAP"])


def test_bpref_reads_only_judged_documents_and_infap_reads_the_pooled_ones() -> None:
    """An unjudged document above a relevant one changes nothing for bpref; for infAP an unpooled one counts as not
    relevant and a pooled one (grade -1) as relevant in proportion."""
    grades = {"r": 1, "s": 1, "n": 0, "p": -1}
    bpref, infap = parse_measure("bpref"), parse_measure("infap")
    base = QueryCase(["r", "s", "n"], grades)
    for moved in (["u", "r", "s", "n"], ["p", "r", "s", "n"], ["r", "u", "p", "s", "n"]):
        assert reference_value(bpref, QueryCase(moved, grades)) == reference_value(bpref, base) == 1.0
    assert reference_value(infap, base) == (1.0 + _infap_term(1, 1, 0, 0)) / 2
    assert reference_value(infap, base) == pytest.approx(1.0, abs=1e-5)  # eps keeps it a hair below 1
    unpooled = reference_value(infap, QueryCase(["u", "r", "s"], grades))
    pooled = reference_value(infap, QueryCase(["p", "r", "s"], grades))
    assert unpooled == (_infap_term(1, 0, 0, 0) + _infap_term(2, 1, 0, 0)) / 2
    assert pooled == (_infap_term(1, 0, 0, 1) + _infap_term(2, 1, 0, 1)) / 2
    assert unpooled < pooled < 1.0


# ----------------------------------------------------------------------------------------------------
# Condensed lists: a literal reference, and ir_measures' judged_only
# ----------------------------------------------------------------------------------------------------


def _literal_condensed(name: str, ranking: Sequence[str], grades: Mapping[str, int]) -> float:
    """The plain measure's reference on the ranking with every document not judged with a grade >= 0 removed."""
    kept = [doc for doc in dedupe_ranking(ranking) if doc in grades and grades[doc] >= 0]
    return reference_value(parse_measure(CONDENSED[name]), QueryCase(kept, grades))


def _random_cases(seed: int, count: int = 2_000) -> list[QueryCase]:
    judgments, rankings = _random_collection(seed, count)
    cases = []
    for query_id, grades in judgments.items():
        pairs = rankings.get(query_id, [])
        cases.append(QueryCase([doc for doc, _ in sorted(pairs, key=lambda p: (-p[1], p[0]))], grades))
    return cases


def test_condensed_forms_equal_the_plain_measure_on_the_literally_condensed_ranking() -> None:
    cases = [case for case in _random_cases(seed=20260330) if any(g >= 1 for g in case.grades.values())]
    measures = parse_measures(list(CONDENSED))
    values, _ = score_rankings([c.ranking for c in cases], [c.grades for c in cases], measures)
    for measure in measures:
        expected = [_literal_condensed(measure.name, c.ranking, c.grades) for c in cases]
        assert values[measure.name].tolist() == expected, measure.name
        assert [reference_value(measure, c) for c in cases] == expected, measure.name


def test_condensed_forms_differ_from_the_plain_ones_where_results_are_unjudged() -> None:
    """The check above can fail: the condensed values are not the plain ones."""
    cases = [case for case in _random_cases(seed=20260330) if any(g >= 1 for g in case.grades.values())]
    for condensed, plain in (("condensed_ndcg@10", "ndcg@10"), ("condensed_recall@10", "recall@10")):
        differ = sum(
            reference_value(parse_measure(condensed), c) != reference_value(parse_measure(plain), c) for c in cases
        )
        assert differ > 200, condensed


def _judged_only_measures() -> dict[str, object]:
    """ir_measures' judged_only measure for each condensed form it has (its RR takes no cutoff)."""
    from ir_measures import AP, RR, R, nDCG
    from ir_measures import P as Precision

    exponential = {grade: 2**grade - 1 for grade in range(4)}
    return {
        "condensed_ndcg@10": nDCG(gains=exponential, judged_only=True) @ 10,
        "condensed_ndcg@3": nDCG(gains=exponential, judged_only=True) @ 3,
        "condensed_ndcg": nDCG(gains=exponential, judged_only=True),
        "condensed_map": AP(judged_only=True),
        "condensed_map@10": AP(judged_only=True) @ 10,
        "condensed_precision@5": Precision(judged_only=True) @ 5,
        "condensed_recall@10": R(judged_only=True) @ 10,
        "condensed_mrr": RR(judged_only=True),
    }


def test_condensed_forms_equal_ir_measures_judged_only_on_random_tie_heavy_data() -> None:
    """Per query with ``==`` under the trec_eval tie policy, on the answerable queries (evalkit's names leave the
    others out). ir_measures has no cutoff for RR: ``condensed_mrr@k`` is its RR where the rank is at most k."""
    ir_measures = pytest.importorskip("ir_measures")
    peer = _judged_only_measures()
    judgments, rankings = _random_collection(seed=20260331)
    ours = _scored(judgments, rankings, [*peer, "condensed_mrr@3"], "trec_eval")
    by_measure = {measure: name for name, measure in peer.items()}
    compared, differences = 0, []
    for metric in ir_measures.iter_calc(list(peer.values()), judgments, _best_scores(rankings)):
        if max(judgments[metric.query_id].values()) < 1:
            continue
        name = by_measure[metric.measure]
        compared += 1
        if float(ours.loc[metric.query_id, name]) != metric.value:
            differences.append((metric.query_id, name, float(ours.loc[metric.query_id, name]), metric.value))
        if name == "condensed_mrr":
            cut = metric.value if metric.value >= 1 / 3 else 0.0
            cut_ours = float(ours.loc[metric.query_id, "condensed_mrr@3"])
            if cut_ours != cut:
                differences.append((metric.query_id, "condensed_mrr@3", cut_ours, cut))
    assert compared > 8 * 1_000
    assert differences == []


# ----------------------------------------------------------------------------------------------------
# Condensed lists: the cutoff after condensing, and the edge cases
# ----------------------------------------------------------------------------------------------------

GRADES = {"a": 2, "b": 0, "c": 1, "p": -1}


def _value(name: str, ranking: Sequence[str], grades: Mapping[str, int] = GRADES) -> float:
    """The kernel's value (through the builder of rankings in order), checked against the reference function."""
    measure = parse_measure(name)
    values, _ = score_rankings([ranking], [grades], [measure])
    value = float(values[name][0])
    assert value == reference_value(measure, QueryCase(ranking, grades)) or math.isnan(value), name
    return value


def test_the_cutoff_applies_after_condensing() -> None:
    ranking = ["u1", "p", "u2", "b", "u3", "a", "c"]  # condensed: b, a, c
    assert _value("recall@2", ranking) == 0.0
    assert _value("condensed_recall@2", ranking) == 1 / 2
    assert _value("condensed_recall@3", ranking) == 1.0
    assert _value("condensed_precision@2", ranking) == 1 / 2
    assert _value("condensed_mrr@2", ranking) == 1 / 2
    assert _value("condensed_ndcg@2", ranking) == (3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert _value("condensed_map@3", ranking) == (1 / 2 + 2 / 3) / 2
    for name in ("condensed_ndcg@10", "condensed_recall@10", "condensed_map@2", "condensed_mrr@1"):
        assert depth_of(parse_measures([name])) is None  # the k-th judged result may lie past rank k


def test_a_scored_run_reads_past_the_cutoff_for_a_condensed_form() -> None:
    run = {"q": {**{f"u{i}": 10.0 - i for i in range(9)}, "a": 0.5, "c": 0.25}}
    ours = evalkit.score({"q": GRADES}, run, measures=["recall@10", "condensed_recall@10", "unj@10"]).per_query
    assert (ours.loc["q", "recall@10"], ours.loc["q", "condensed_recall@10"], ours.loc["q", "unj@10"]) == (
        1 / 2,
        1.0,
        9 / 10,
    )


@pytest.mark.parametrize("name", [n for n in CONDENSED if "@" in n] + ["bpref", "infap"])
def test_an_empty_or_all_unjudged_ranking_scores_zero(name: str) -> None:
    assert _value(name, []) == 0.0
    assert _value(name, ["u1", "u2", "p"]) == 0.0


@pytest.mark.parametrize("name", [*CONDENSED, "infap", "unj@5"])
def test_no_relevant_document_is_not_defined_under_evalkit_names(name: str) -> None:
    with pytest.raises(ValueError, match="answerable"):
        reference_value(parse_measure(name), QueryCase(["a", "b"], {"a": 0, "b": -1}))
    values, _ = score_rankings([["a", "b"]], [{"a": 0, "b": -1}], [parse_measure(name)])
    assert math.isnan(values[name][0])


@pytest.mark.parametrize("name", ["bpref", "infAP"])
def test_no_relevant_document_scores_zero_under_trec_eval_names(name: str) -> None:
    assert reference_value(parse_measure(name), QueryCase(["a", "b"], {"a": 0, "b": -1})) == 0.0


@pytest.mark.parametrize("name", [*CONDENSED, "bpref", "infap", "unj@3"])
def test_duplicates_count_once_at_their_first_place(name: str) -> None:
    ranking = ["b", "u", "a", "b", "a", "u", "c"]
    assert _value(name, ranking) == _value(name, ["b", "u", "a", "c"])


def test_ties_are_ordered_by_the_policy_before_condensing() -> None:
    """Tied a, b and c after an unjudged u: evalkit's policy reads u a b c (ID ascending), trec_eval's u c b a (ID
    descending); only a is relevant."""
    grades = {"a": 2, "b": 0, "c": 0}
    run = {"q": {"a": 1.0, "b": 1.0, "c": 1.0, "u": 2.0}}
    names = ["condensed_mrr@1", "condensed_precision@1", "bpref", "infAP"]
    ascending = evalkit.score({"q": grades}, run, measures=names, ties="evalkit").per_query.loc["q"]
    descending = evalkit.score({"q": grades}, run, measures=names, ties="trec_eval").per_query.loc["q"]
    assert ascending.tolist() == [1.0, 1.0, 1.0, _infap_term(1, 0, 0, 0)]
    assert descending.tolist() == [0.0, 0.0, 1.0 - 1 / 1, _infap_term(3, 0, 2, 0)]


# ----------------------------------------------------------------------------------------------------
# unj@k: the complement of judged@k
# ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 5, 10, 20])
def test_unj_is_one_minus_judged_on_every_query_where_judged_is_defined(k: int) -> None:
    cases = _random_cases(seed=20260401)
    measures = parse_measures([f"unj@{k}", f"judged@{k}"])
    values, answerable = score_rankings([c.ranking for c in cases], [c.grades for c in cases], measures)
    unj, judged = values[f"unj@{k}"], values[f"judged@{k}"]
    assert np.array_equal(np.isnan(unj), ~answerable) and np.array_equal(np.isnan(judged), ~answerable)
    assert (unj[answerable] == 1.0 - judged[answerable]).all()
    shares = set(unj[answerable].tolist())
    assert {0.0, 1.0} <= shares and (k == 1 or any(0.0 < v < 1.0 for v in shares))  # not a constant


def test_unj_by_hand_and_its_relation_to_trec_eval_unj() -> None:
    grades = {"a": 1, "b": 0, "p": -1}
    assert _value("unj@4", ["a", "u1", "b", "u2", "u3"], grades) == 1 - 2 / 4
    assert _value("unj@10", ["a", "u1", "b"], grades) == 1 - 2 / 3  # over the 3 results, not 10
    assert _value("unj@2", ["p", "u1"], grades) == 1.0  # a negative grade is unjudged, as trec_eval reads it
    assert _value("unj@3", [], grades) == 1.0  # judged@3 is 0 on an empty ranking
    # trec_eval's unj (m_unjudged.c): unjudged or negative-grade documents in the first k, over k. With k results
    # returned, the two agree.
    ranking = ["u1", "a", "p", "u2", "u3"]
    trec_eval_unj_5 = sum(1 for d in ranking[:5] if grades.get(d, -1) < 0) / 5
    assert _value("unj@5", ranking, grades) == trec_eval_unj_5
    assert parse_measure("unj@5").definition == "unj(cutoff=5, denominator=returned)"
    with pytest.raises(ValueError, match="unknown measure 'unj_5'"):
        parse_measure("unj_5")  # trec_eval's name, whose meaning differs, is not taken
