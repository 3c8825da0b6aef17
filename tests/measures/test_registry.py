"""The measure registry: names in both vocabularies, user measures, and hand-computed values of every family.

Every hand case is checked twice, through the family's reference function and through its batch kernel, and
asserted with ``==`` against the formula written out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.data.qrels import qrels_from_mapping
from evalkit.data.runs import run_from_rankings
from evalkit.measures.core import score_rankings, score_run
from evalkit.measures.registry import (
    FAMILIES,
    QueryCase,
    UserFunction,
    parse_measure,
    parse_measures,
    reference_value,
    register_measure,
    unregister_measure,
)
from evalkit.measures.ties import order_ranking

# ----------------------------------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------------------------------

EVALKIT_NAMES = [
    ("recall@5", "recall", 5, None, "recall(cutoff=5)"),
    ("recall", "recall", None, None, "recall(cutoff=none)"),
    ("precision@3", "precision", 3, None, "precision(cutoff=3)"),
    ("success@1", "success", 1, None, "success(cutoff=1)"),
    ("mrr@10", "mrr", 10, None, "mrr(cutoff=10)"),
    ("mrr", "mrr", None, None, "mrr(cutoff=none)"),
    ("ndcg@10", "ndcg", 10, "exponential", "ndcg(cutoff=10, gain=exponential)"),
    ("map@5", "map", 5, None, "map(cutoff=5)"),
    ("rprec", "rprec", None, None, "rprec()"),
    ("judged@10", "judged", 10, None, "judged(cutoff=10, denominator=returned)"),
    ("unj@10", "unj", 10, None, "unj(cutoff=10, denominator=returned)"),
    ("bpref", "bpref", None, None, "bpref(no_relevant=zero)"),  # trec_eval's name and meaning in both vocabularies
    ("infap", "infap", None, None, "infap()"),
    (
        "condensed_ndcg@10",
        "condensed_ndcg",
        10,
        "exponential",
        "condensed_ndcg(cutoff=10, gain=exponential, unjudged=removed)",
    ),
    (
        "condensed_ndcg",
        "condensed_ndcg",
        None,
        "exponential",
        "condensed_ndcg(cutoff=none, gain=exponential, unjudged=removed)",
    ),
    ("condensed_map@10", "condensed_map", 10, None, "condensed_map(cutoff=10, unjudged=removed)"),
    ("condensed_map", "condensed_map", None, None, "condensed_map(cutoff=none, unjudged=removed)"),
    ("condensed_precision@5", "condensed_precision", 5, None, "condensed_precision(cutoff=5, unjudged=removed)"),
    ("condensed_recall@10", "condensed_recall", 10, None, "condensed_recall(cutoff=10, unjudged=removed)"),
    ("condensed_mrr@10", "condensed_mrr", 10, None, "condensed_mrr(cutoff=10, unjudged=removed)"),
    ("context_precision", "context_precision", None, None, "context_precision()"),
    ("context_recall", "context_recall", None, None, "context_recall()"),
    ("no_answer_fpr", "no_answer_fpr", None, None, "no_answer_fpr()"),
]
TREC_EVAL_NAMES = [
    ("ndcg_cut_10", "ndcg", 10, "linear", "ndcg(cutoff=10, gain=linear, no_relevant=zero)"),
    ("ndcg", "ndcg", None, "linear", "ndcg(cutoff=none, gain=linear, no_relevant=zero)"),
    ("recip_rank", "mrr", None, None, "mrr(cutoff=none, no_relevant=zero)"),
    ("P_10", "precision", 10, None, "precision(cutoff=10, no_relevant=zero)"),
    ("recall_100", "recall", 100, None, "recall(cutoff=100, no_relevant=zero)"),
    ("success_5", "success", 5, None, "success(cutoff=5, no_relevant=zero)"),
    ("map", "map", None, None, "map(cutoff=none, no_relevant=zero)"),
    ("map_cut_10", "map", 10, None, "map(cutoff=10, no_relevant=zero)"),
    ("Rprec", "rprec", None, None, "rprec(no_relevant=zero)"),
    ("infAP", "infap", None, None, "infap(no_relevant=zero)"),
]


@pytest.mark.parametrize(("name", "family", "cutoff", "gain", "definition"), EVALKIT_NAMES + TREC_EVAL_NAMES)
def test_every_form_parses_to_its_family_and_parameters(
    name: str, family: str, cutoff: int | None, gain: str | None, definition: str
) -> None:
    measure = parse_measure(name)
    assert (measure.family, measure.cutoff, measure.gain) == (family, cutoff, gain)
    assert measure.definition == definition
    assert measure.name == str(measure) == name  # the name it was asked by is its report key


def test_every_built_in_family_has_an_evalkit_name_under_test() -> None:
    assert {family for _, family, *_ in EVALKIT_NAMES} == set(FAMILIES)


def test_evalkit_and_trec_eval_ndcg_differ_in_gain_and_in_queries_without_relevant_documents() -> None:
    ours, theirs = parse_measure("ndcg@10"), parse_measure("ndcg_cut_10")
    assert ours.definition == "ndcg(cutoff=10, gain=exponential)"
    assert theirs.definition == "ndcg(cutoff=10, gain=linear, no_relevant=zero)"
    assert (ours.family, ours.cutoff, ours.no_relevant) == (theirs.family, theirs.cutoff, "skip")


def test_surrounding_spaces_are_dropped_from_the_name() -> None:
    assert parse_measure(" P_5 ").name == "P_5"


@pytest.mark.parametrize(
    "name",
    ["ndcg@0", "P_0", "recall@", "recall_0", "precision", "judged", "rprec@5", "no_answer_fpr@1", "foo", "Recall@5"],
)
def test_malformed_or_unknown_names_raise_listing_the_valid_forms(name: str) -> None:
    with pytest.raises(
        ValueError,
        match=r"measure .*; valid: recall\[\(rel=<integer>\)\]\[@k\], precision\[\(rel=<integer>\)\]@k, "
        r".*ndcg\[\(gain=exponential\|linear\)\]\[@k\], .*recall_k, P_k, .*ndcg_cut_k",
    ):
        parse_measure(name)


def test_a_missing_cutoff_says_how_to_write_it() -> None:
    with pytest.raises(
        ValueError, match=re.escape("malformed measure 'precision': write it precision[(rel=<integer>)]@k")
    ):
        parse_measure("precision")
    with pytest.raises(ValueError, match=re.escape("malformed measure 'rprec@5': write it rprec[(rel=<integer>)];")):
        parse_measure("rprec@5")


@given(st.text(max_size=20))
def test_any_text_parses_to_its_own_name_or_raises_value_error(text: str) -> None:
    try:
        measure = parse_measure(text)
    except ValueError:
        return
    assert measure.name == text.strip()


@given(st.sampled_from(["recall", "precision", "success", "mrr", "ndcg", "map", "judged"]), st.integers(1, 10**6))
def test_any_positive_cutoff_parses(family: str, k: int) -> None:
    assert parse_measure(f"{family}@{k}").cutoff == k


def test_parse_measures_keeps_the_order_and_refuses_repeats() -> None:
    assert [m.name for m in parse_measures(["map", "P_5", "precision@5"])] == ["map", "P_5", "precision@5"]
    with pytest.raises(ValueError, match="measure\\(s\\) named more than once: ndcg@10"):
        parse_measures(["ndcg@10", "recall@5", "ndcg@10"])


# ----------------------------------------------------------------------------------------------------
# Hand-computed values, every family (reference and kernel)
# ----------------------------------------------------------------------------------------------------

GRADES = {"a": 2, "b": 1, "c": 3, "z": 0}
"""Three relevant documents (a, b, c) and one judged non-relevant (z)."""


def value(name: str, ranking: Sequence[str], grades: Mapping[str, int]) -> float:
    """The measure's value by its reference function, after checking the kernel gives the same."""
    measure = parse_measure(name)
    reference = reference_value(measure, QueryCase(ranking, grades))
    kernel, _ = score_rankings([ranking], [grades], [measure])
    assert float(kernel[name][0]) == reference, (name, float(kernel[name][0]), reference)
    return reference


def test_precision_counts_relevant_in_the_first_k_over_k() -> None:
    assert value("precision@3", ["a", "x", "b", "y"], GRADES) == 2 / 3
    assert value("P_10", ["a", "x", "b", "y"], GRADES) == 2 / 10  # k, not the number returned


def test_recall_counts_relevant_in_the_first_k_over_all_relevant() -> None:
    assert value("recall@2", ["a", "x", "b", "y"], GRADES) == 1 / 3
    assert value("recall", ["a", "x", "b", "y"], GRADES) == 2 / 3
    assert value("recall@1", ["z"], GRADES) == 0.0  # grade 0 is not relevant


def test_success_is_one_when_a_relevant_document_is_in_the_first_k() -> None:
    assert value("success@1", ["x", "a"], GRADES) == 0.0
    assert value("success@2", ["x", "a"], GRADES) == 1.0


def test_reciprocal_rank_and_its_cutoff() -> None:
    assert value("recip_rank", ["x", "y", "a"], GRADES) == 1 / 3
    assert value("mrr@3", ["x", "y", "a"], GRADES) == 1 / 3
    assert value("mrr@2", ["x", "y", "a"], GRADES) == 0.0  # the first relevant is beyond the cutoff


def test_average_precision_divides_by_every_relevant_document() -> None:
    # Relevant at ranks 1 and 3 (a, b); c is never retrieved but counts in the denominator.
    assert value("map", ["a", "x", "b", "y"], GRADES) == (1 / 1 + 2 / 3) / 3
    assert value("map@2", ["a", "x", "b", "y"], GRADES) == (1 / 1) / 3
    assert value("map_cut_10", ["x", "c"], GRADES) == (1 / 2) / 3


def test_r_precision_reads_the_first_r_results() -> None:
    assert value("rprec", ["a", "x", "b", "c"], GRADES) == 2 / 3  # R = 3: a, x, b
    assert value("Rprec", ["c", "b", "a"], GRADES) == 1.0


def test_judged_counts_grade_zero_documents_as_judged_over_the_results_in_the_first_k() -> None:
    assert value("judged@3", ["a", "z", "q"], GRADES) == 2 / 3
    assert value("judged@4", ["a", "x", "b", "y"], GRADES) == 2 / 4
    assert value("judged@5", ["z"], GRADES) == 1 / 1  # one result: ir_measures' denominator, not k
    assert value("judged@2", ["q", "z", "a"], GRADES) == 1 / 2


def test_ndcg_gains_linear_and_exponential() -> None:
    grades = {"a": 2, "b": 1}
    ranking = ["x", "b", "a"]  # discounts log2(3) and log2(4) = 2
    assert value("ndcg_cut_3", ranking, grades) == (1 / math.log2(3) + 2 / 2) / (2 / 1 + 1 / math.log2(3))
    assert value("ndcg@3", ranking, grades) == (1 / math.log2(3) + 3 / 2) / (3 / 1 + 1 / math.log2(3))
    assert value("ndcg", ranking, grades) == value("ndcg_cut_3", ranking, grades)
    assert value("ndcg@1", ["a", "b"], grades) == 1.0
    assert value("ndcg@2", ["b"], grades) == (1 / 1) / (3 / 1 + 1 / math.log2(3))


def test_context_measures_count_gold_characters_of_the_first_five() -> None:
    measures = [parse_measure("context_precision"), parse_measure("context_recall")]
    grades = {"a": 3, "b": 1, "z": 0}
    spans = {"a": [(0, 10)], "b": [(0, 5), (3, 8)]}  # b's spans overlap: 8 characters, not 10
    lengths = {"a": 100, "b": 20, "x": 30, "y": 50}
    ranking = ["x", "b", "b", "a", "y"]  # deduplicated: x, b, a, y
    case = QueryCase(ranking, grades, lengths, spans)
    chars = [{"a": 10, "b": 8}]
    kernel, _ = score_rankings([ranking], [grades], measures, spans=chars, chunk_lengths=lengths, context_k=5)
    for measure, expected in zip(measures, (18 / 200, 1.0), strict=True):
        assert reference_value(measure, case) == expected
        assert float(kernel[measure.name][0]) == expected


# ----------------------------------------------------------------------------------------------------
# Edge cases
# ----------------------------------------------------------------------------------------------------

RANKING_MEASURES = [
    "recall@5",
    "precision@5",
    "success@5",
    "mrr@5",
    "ndcg@5",
    "ndcg_cut_5",
    "map",
    "map@5",
    "rprec",
    "judged@5",
]


@pytest.mark.parametrize("name", RANKING_MEASURES)
def test_an_empty_ranking_scores_zero(name: str) -> None:
    assert value(name, [], GRADES) == 0.0


def test_duplicates_are_removed_before_the_cutoff() -> None:
    ranking = ["x", "x", "a", "a", "b"]  # deduplicated: x, a, b
    assert value("precision@2", ranking, GRADES) == 1 / 2
    assert value("success@2", ranking, GRADES) == 1.0
    assert value("recall@3", ranking, GRADES) == 2 / 3
    assert value("mrr@2", ranking, GRADES) == 1 / 2
    assert value("judged@3", ranking, GRADES) == 2 / 3
    assert value("map", ranking, GRADES) == (1 / 2 + 2 / 3) / 3


@pytest.mark.parametrize("name", RANKING_MEASURES)
def test_a_query_without_relevant_documents_is_skipped_by_evalkit_names_and_scores_0_under_trec_evals(
    name: str,
) -> None:
    grades = {"z": 0, "w": -1}
    measure = parse_measure(name)
    values, answerable = score_rankings([["z", "a"]], [grades], [measure])
    assert not answerable[0]
    if measure.no_relevant == "zero":  # trec_eval's names: as trec_eval scores such a query
        assert reference_value(measure, QueryCase(["z", "a"], grades)) == 0.0
        assert values[name][0] == 0.0
    else:
        with pytest.raises(ValueError, match="no chunk with grade >= 1"):
            reference_value(measure, QueryCase(["z", "a"], grades))
        assert math.isnan(values[name][0])


def test_no_answer_fpr_is_defined_on_no_answer_queries_only() -> None:
    measure = parse_measure("no_answer_fpr")
    rankings = [["z"], [], ["a"]]
    grades = [{"z": 0}, {"z": 0}, {"a": 1}]
    values, answerable = score_rankings(rankings, grades, [measure])
    assert answerable.tolist() == [False, False, True]
    assert values["no_answer_fpr"][:2].tolist() == [1.0, 0.0]
    assert math.isnan(values["no_answer_fpr"][2])
    assert [reference_value(measure, QueryCase(r, g)) for r, g in zip(rankings, grades, strict=True)] == [1, 0, 1]


def test_score_run_marks_no_answer_queries_the_same_way() -> None:
    qrels = qrels_from_mapping({"q1": {"a": 1}, "q2": {"z": 0}})
    run = run_from_rankings("r", {"q1": [("a", 1.0)], "q2": [("z", 0.5)]})
    scores = score_run(qrels, run, parse_measures(["ndcg@10", "no_answer_fpr"]))
    assert scores.answerable.tolist() == [True, False]
    assert scores.values["ndcg@10"][0] == 1.0
    assert math.isnan(scores.values["ndcg@10"][1])
    assert math.isnan(scores.values["no_answer_fpr"][0])
    assert scores.values["no_answer_fpr"][1] == 1.0


# ----------------------------------------------------------------------------------------------------
# Registered measures
# ----------------------------------------------------------------------------------------------------


@contextmanager
def registered(name: str, function: UserFunction, *, cutoff: bool = False) -> Iterator[None]:
    """``name`` registered for the block, and removed after it whatever happens (the registry is global)."""
    register_measure(name, function, cutoff=cutoff, description="test measure")
    try:
        yield
    finally:
        unregister_measure(name)


def first_is_best(ranking: Sequence[str], grades: Mapping[str, int], k: int | None) -> float:
    """1 when the first result has the highest grade of the query."""
    return 1.0 if ranking and grades.get(ranking[0], 0) == max(grades.values()) else 0.0


def strong_share(ranking: Sequence[str], grades: Mapping[str, int], k: int | None) -> float:
    """The share of the first k results with grade 2 or more."""
    if k is None:
        raise ValueError("strong_share needs a cutoff")
    return sum(1 for d in ranking[:k] if grades.get(d, 0) >= 2) / k


def _random_run(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, list[tuple[str, float]]]]:
    rng = np.random.default_rng(seed)
    pool = [f"d{i:02d}" for i in range(15)]
    judgments, rankings = {}, {}
    for index in range(300):
        judged = rng.choice(pool, size=int(rng.integers(1, 6)), replace=False)
        judgments[f"q{index:03d}"] = {
            str(d): int(g) for d, g in zip(judged, rng.integers(0, 4, len(judged)), strict=True)
        }
        if index % 10:  # every tenth judged query is missing from the run
            docs = rng.choice(pool, size=int(rng.integers(0, 12)))
            scores = rng.choice([0.1, 0.5, 0.9], size=len(docs))
            rankings[f"q{index:03d}"] = [(str(d), float(s)) for d, s in zip(docs, scores, strict=True)]
    return judgments, rankings


@pytest.mark.parametrize("cutoff", [False, True])
def test_a_registered_measure_flows_through_score_run(cutoff: bool) -> None:
    name, function, asked = (
        ("strong_share", strong_share, "strong_share@3") if cutoff else ("top", first_is_best, "top")
    )
    judgments, rankings = _random_run(seed=11)
    qrels, run = qrels_from_mapping(judgments), run_from_rankings("r", rankings)
    with registered(name, function, cutoff=cutoff):
        measures = parse_measures([asked, "ndcg@10"])
        assert measures[0].definition == (f"user:{name}(cutoff=3)" if cutoff else f"user:{name}()")
        scores = score_run(qrels, run, measures)
    expected = []
    for query_id in qrels.queries.to_pylist():
        grades = judgments[query_id]
        ranking = order_ranking(rankings.get(query_id, ()), "evalkit")
        defined = max(grades.values()) >= 1
        expected.append(function(ranking, grades, 3 if cutoff else None) if defined else math.nan)
    np.testing.assert_array_equal(scores.values[asked], np.array(expected))
    assert 0 < np.nansum(scores.values[asked]) < len(expected)  # the function's values vary: a real check
    with pytest.raises(ValueError, match="unknown measure"):
        parse_measure(asked)  # unregistered again


def test_a_registered_measure_takes_or_refuses_a_cutoff_as_declared() -> None:
    with registered("top", first_is_best):
        with pytest.raises(ValueError, match="malformed measure 'top@5': write it top;"):
            parse_measure("top@5")
        with pytest.raises(ValueError, match=r"valid: .*, top, recall_k"):  # listed among the valid forms
            parse_measure("foo")
    with registered("strong_share", strong_share, cutoff=True):
        with pytest.raises(ValueError, match="write it strong_share@k"):
            parse_measure("strong_share")
        assert parse_measure("strong_share@7").cutoff == 7


@pytest.mark.parametrize(
    "name", ["ndcg", "recall", "map", "recip_rank", "recall_5", "map_cut_10", "success_1", "Top", "top-1", "", "1st"]
)
def test_a_name_that_is_taken_or_malformed_cannot_be_registered(name: str) -> None:
    with pytest.raises(ValueError, match="cannot register measure"):
        register_measure(name, first_is_best)


def test_a_name_registered_twice_is_refused() -> None:
    with registered("top", first_is_best):
        with pytest.raises(ValueError, match="cannot register measure 'top'"):
            register_measure("top", strong_share)
        assert reference_value(parse_measure("top"), QueryCase(["b"], {"a": 1, "b": 2})) == 1.0  # the first kept


@pytest.mark.parametrize("bad", [1.5, -0.25, math.nan])
def test_values_outside_zero_one_are_refused(bad: float) -> None:
    qrels = qrels_from_mapping({"q1": {"a": 1}})
    run = run_from_rankings("r", {"q1": [("a", 1.0)]})
    refused = r"measure broken returned .*; a registered measure's values lie in \[0, 1\]"
    with registered("broken", lambda ranking, grades, k: bad), pytest.raises(ValueError, match=refused):
        score_run(qrels, run, parse_measures(["broken"]))


def test_only_registered_measures_can_be_unregistered() -> None:
    with pytest.raises(ValueError, match="'ndcg' is not a registered measure"):
        unregister_measure("ndcg")
    with pytest.raises(ValueError, match="'never' is not a registered measure"):
        unregister_measure("never")


@pytest.mark.parametrize("name", ["ndcg@9223372036854775808", "P_99999999999999999999", "recall@1000000001"])
def test_a_cutoff_past_the_limit_is_refused_by_name(name: str) -> None:
    """A cutoff past 2^63 overflowed numpy deep in scoring (a traceback with exit 1, which means a failed gate)."""
    with pytest.raises(ValueError, match=rf"malformed measure '{re.escape(name)}': a cutoff is at most 1,000,000,000"):
        parse_measure(name)
    assert parse_measure("ndcg@1000000000").cutoff == 1_000_000_000
