"""The families' reference functions on hand-computed cases, their edge cases and properties, agreement with
trec_eval (pytrec_eval) and ir_measures' ``Judged@k``, and the declarations every family must carry."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.measures import kernels
from evalkit.measures.declaration import UNJUDGED, Gain
from evalkit.measures.kernels.ndcg import GAINS
from evalkit.measures.ranked import dedupe_ranking
from evalkit.measures.registry import (
    FAMILIES,
    NO_ANSWER_FPR,
    STANDARD_MEASURES,
    MeasureDef,
    QueryCase,
    parse_measure,
    reference_value,
    register_measure,
    unregister_measure,
)

REL = 1e-12
L3 = math.log2(3)  # discount at rank 2
L5 = math.log2(5)  # discount at rank 4

# Shared hand case: "a" judged not relevant (grade 0), "b" 3, "c" 1, "e" 2 (never retrieved); "d" unjudged.
GRADES = {"a": 0, "b": 3, "c": 1, "e": 2}
RANKING = ("a", "b", "c", "d")

RankingFn = Callable[[Sequence[str], Mapping[str, int], int], float]


def _value(family: str, ranking: Sequence[str], grades: Mapping[str, int], k: int, gain: Gain | None = None) -> float:
    """The family's reference value at cutoff k under evalkit's rules (no relevant document raises)."""
    spec = FAMILIES[family]
    return spec.reference(QueryCase(ranking, grades), MeasureDef(f"{family}@{k}", spec, k, gain or spec.default_gain))


def recall_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    return _value("recall", ranking, grades, k)


def reciprocal_rank_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    return _value("mrr", ranking, grades, k)


def ndcg_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int, gain: Gain = "exponential") -> float:
    return _value("ndcg", ranking, grades, k, gain)


RANKING_FNS: list[RankingFn] = [recall_at_k, reciprocal_rank_at_k, ndcg_at_k]


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


# ---------------------------------------------------------------------------------------------------------
# Declarations
# ---------------------------------------------------------------------------------------------------------


def _statement(family_name: str) -> tuple[str, str]:
    spec = FAMILIES.get(family_name) or parse_measure(family_name).spec
    return " ".join(spec.doc.split()), UNJUDGED[spec.unjudged].statement


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_says_what_it_does_with_unjudged_documents(family: str) -> None:
    doc, statement = _statement(family)
    assert statement in doc, f"{family}'s reference docstring lacks: {statement}"


def test_a_registered_family_says_it_too() -> None:
    register_measure("top_is_judged", lambda ranking, grades, k: float(bool(ranking) and ranking[0] in grades))
    try:
        doc, statement = _statement("top_is_judged")
        assert statement in doc
        assert FAMILIES.get("top_is_judged") is None  # a user family is not a built-in one
    finally:
        unregister_measure("top_is_judged")


def test_the_unjudged_check_can_fail() -> None:
    doc = " ".join((inspect.getdoc(kernels.ndcg.reference) or "").split())
    assert UNJUDGED["not_relevant"].statement in doc
    assert UNJUDGED["not_judged"].statement not in doc


def test_the_plain_measures_count_unjudged_documents_as_not_relevant() -> None:
    judged = {"a": 2, "b": 0}
    for name in ("recall@2", "precision@2", "success@2", "mrr@2", "ndcg@2", "map@2", "rprec"):
        with_unjudged = reference_value(parse_measure(name), QueryCase(["u", "a"], judged))
        with_judged_zero = reference_value(parse_measure(name), QueryCase(["b", "a"], judged))
        assert with_unjudged == with_judged_zero, name


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_lives_in_its_own_module(family: str) -> None:
    spec = FAMILIES[family]
    assert spec.reference.__module__ == spec.kernel.__module__
    assert spec.reference.__module__.startswith("evalkit.measures.kernels.")
    others = [f for f in FAMILIES.values() if f is not spec and f.reference.__module__ == spec.reference.__module__]
    assert others == []


def test_the_standard_measures_keep_their_text_forms() -> None:
    assert [str(m) for m in STANDARD_MEASURES] == [
        "recall@1",
        "recall@5",
        "recall@10",
        "mrr@10",
        "ndcg@10",
        "context_precision",
        "context_recall",
    ]
    assert str(NO_ANSWER_FPR) == "no_answer_fpr"
    assert NO_ANSWER_FPR.spec.defined_on == "no_answer"


# ---------------------------------------------------------------------------------------------------------
# judged@k: ir_measures' Judged@k
# ---------------------------------------------------------------------------------------------------------

IR_MEASURES_QRELS = {
    "0": {"D0": 0, "D1": 1, "D2": 1, "D3": 2, "D4": 0},
    "1": {"D0": 1, "D3": 2, "D5": 2},
}
IR_MEASURES_RUN = {"0": ["D0", "D2", "D3", "D1", "D4"], "1": ["D1", "D3", "D2", "D4"]}
"""ir_measures' own Judged test case (tests/test_judged.py), its runs put in score order."""


@pytest.mark.parametrize(
    ("k", "expected"), [(1000, (1.0, 1 / 4)), (10, (1.0, 1 / 4)), (3, (1.0, 1 / 3)), (1, (1.0, 0.0))]
)
def test_judged_equals_ir_measures_judged_on_its_own_case(k: int, expected: tuple[float, float]) -> None:
    measure = parse_measure(f"judged@{k}")
    values = tuple(reference_value(measure, QueryCase(IR_MEASURES_RUN[q], IR_MEASURES_QRELS[q])) for q in ("0", "1"))
    assert values == expected


def test_judged_divides_by_the_results_in_the_first_k_not_by_k() -> None:
    measure = parse_measure("judged@10")
    assert reference_value(measure, QueryCase(["a", "b", "c"], {"a": 1, "b": 0, "c": 2})) == 1.0
    assert reference_value(measure, QueryCase(["a", "x", "x", "y"], {"a": 1})) == 1 / 3  # deduplicated: a, x, y
    assert reference_value(measure, QueryCase([], {"a": 1})) == 0.0
    assert measure.definition == "judged(cutoff=10, denominator=returned)"
