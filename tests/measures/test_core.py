"""The scoring core: kernels equal the reference functions, trec_eval aliases equal pytrec_eval, and the policies.

- Every family's kernel equals its reference function with ``==`` on thousands of seeded random queries, through
  both builders (:func:`rank_lists` for rankings in order, :func:`rank_run` for a scored run under the evalkit
  tie policy), under both summations.
- Under the trec_eval tie policy every trec_eval alias equals pytrec_eval's value with ``==``.
- Which queries count (``missing``), what the join counts, and the two tie policies on hand cases.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Iterable, Sequence
from types import SimpleNamespace

import numpy as np
import pytest

from evalkit.data.qrels import qrels_from_mapping
from evalkit.data.runs import run_from_rankings
from evalkit.measures import run_join, run_order
from evalkit.measures.core import depth_of, score_ranked, score_rankings, score_run
from evalkit.measures.kernels import average_precision, bpref, infap, ndcg
from evalkit.measures.ranked import SUMMATIONS, ideal_arrays, rank_lists, segment_sums
from evalkit.measures.registry import FAMILIES, MeasureDef, QueryCase, parse_measure, parse_measures, reference_value
from evalkit.measures.spans import merge_intervals
from evalkit.measures.ties import order_ranking

CONTEXT_K = 5
CHUNKS = [f"c{i:03d}" for i in range(60)]
LENGTHS = {c: 50 + (i * 37) % 400 for i, c in enumerate(CHUNKS)}
SCORE_LEVELS = np.array([0.0, 0.25, 0.5, 1.0, 1.0 + 1e-9, 2.0, 2.0 - 1e-12])
"""Few distinct scores (some equal only in float32): most rankings hold ties."""
CUTOFFS = (1, 3, 5, 10, 20, None)
QUERIES = 3_000

Pairs = list[tuple[str, float]]


def _measures(family: str) -> list[MeasureDef]:
    """The family at every cutoff it takes (nDCG also with trec_eval's linear gain)."""
    spec = FAMILIES[family]
    if spec.cutoff == "none":
        return [parse_measure(family)]
    cutoffs = [k for k in CUTOFFS if k is not None or spec.cutoff == "optional"]
    names = [family if k is None else f"{family}@{k}" for k in cutoffs]
    if family == "ndcg":  # bare "ndcg" is trec_eval's linear one: evalkit's exponential nDCG always has a cutoff
        names = [n for n in names if n != "ndcg"] + [f"ndcg_cut_{k}" for k in CUTOFFS if k is not None] + ["ndcg"]
    return [parse_measure(n) for n in names]


def _random_query(rng: np.random.Generator) -> tuple[Pairs, QueryCase]:
    """A scored ranking (tie-heavy, duplicates likely, empty to 40 long, unjudged documents) and its judgments
    (grades 0 to 3; some queries with no relevant document; gold spans on relevant and some non-relevant chunks)."""
    judged = [str(c) for c in rng.choice(CHUNKS, size=int(rng.integers(1, 12)), replace=False)]
    grades = {c: int(rng.integers(0, 4)) for c in judged}
    if rng.random() < 0.1:
        grades = dict.fromkeys(judged, 0)  # a no-answer query
    spans: dict[str, list[tuple[int, int]]] = {}
    for chunk, grade in grades.items():
        if grade >= 1 or rng.random() < 0.2:
            length = LENGTHS[chunk]
            starts = rng.integers(0, length, size=int(rng.integers(1, 4)))
            spans[chunk] = [(int(s), int(min(length, s + rng.integers(0, 80)))) for s in starts]
    if any(g >= 1 for g in grades.values()):
        spans.setdefault(judged[0], []).append((0, 1))  # an answerable query has some gold characters
    size = int(rng.choice([0, 1, 2, 3, 5, 7, 10, 15, 25, 40]))
    pool = judged + [str(c) for c in rng.choice(CHUNKS, size=20)]
    docs = [pool[int(i)] for i in rng.integers(0, len(pool), size=size)]
    pairs = [(d, float(s)) for d, s in zip(docs, rng.choice(SCORE_LEVELS, size=size), strict=True)]
    return pairs, QueryCase(docs, grades, LENGTHS, spans)


@functools.cache
def _random_queries(seed: int, count: int = QUERIES) -> tuple[tuple[Pairs, QueryCase], ...]:
    rng = np.random.default_rng(seed)
    return tuple(_random_query(rng) for _ in range(count))


def _reference(measure: MeasureDef, case: QueryCase) -> float:
    """The reference value, NaN where the measure is not defined (ranking measures under evalkit's names on
    no-answer queries, and ``no_answer_fpr`` on answerable ones); the context is the first CONTEXT_K deduplicated
    results."""
    answerable = any(g >= 1 for g in case.grades.values())
    if answerable == (measure.spec.defined_on == "no_answer") and (answerable or measure.no_relevant == "skip"):
        return math.nan
    if measure.spec.needs_spans:
        case = case._replace(ranking=tuple(dict.fromkeys(case.ranking))[:CONTEXT_K])
    return reference_value(measure, case)


def _mismatches(measure: MeasureDef, kernel: np.ndarray, cases: Sequence[QueryCase]) -> list[tuple[int, float, float]]:
    reference = np.array([_reference(measure, case) for case in cases])
    same = (kernel == reference) | (np.isnan(kernel) & np.isnan(reference))
    return [(int(i), float(kernel[i]), float(reference[i])) for i in np.flatnonzero(~same)[:5]]


def _in_rank_order(terms: Iterable[float]) -> float:
    """trec_eval's arithmetic: the terms added one by one, in rank order."""
    total: float = functools.reduce(operator.add, terms, 0.0)
    return total


@pytest.fixture(params=sorted(SUMMATIONS))
def summation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each summation; under ``sequential`` the reference functions add their terms as trec_eval does (``math.fsum``
    replaced by a left-to-right sum), everything else about them unchanged."""
    if request.param == "sequential":
        for module in (ndcg, average_precision, bpref, infap):  # the families whose references add terms
            monkeypatch.setattr(module, "math", SimpleNamespace(log2=math.log2, fsum=_in_rank_order))
    name: str = request.param
    return name


# ----------------------------------------------------------------------------------------------------
# (a) kernels equal the reference functions
# ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_kernels_equal_the_reference_on_rankings_in_order(family: str, summation: str) -> None:
    queries = _random_queries(seed=20260101)
    cases = [case for _, case in queries]
    rankings = [case.ranking for case in cases]
    grades = [case.grades for case in cases]
    span_chars = [
        {c: sum(e - s for s, e in merge_intervals(v)) for c, v in (case.spans or {}).items()} for case in cases
    ]
    for measure in _measures(family):
        depth = depth_of([measure], CONTEXT_K)
        ranked = rank_lists(rankings, grades, summation, depth, span_chars, LENGTHS, CONTEXT_K)
        values, _ = score_ranked(ranked, [measure])
        assert _mismatches(measure, values[measure.name], cases) == [], measure.name


@pytest.mark.parametrize("family", sorted(f for f, spec in FAMILIES.items() if not spec.needs_spans))
def test_kernels_equal_the_reference_on_a_scored_run_under_the_evalkit_policy(family: str) -> None:
    queries = _random_queries(seed=20260102)
    ids = [f"q{i:05d}" for i in range(len(queries))]
    judged = {q: case.grades for q, (_, case) in zip(ids, queries, strict=True)}
    run = run_from_rankings("r", {q: pairs for q, (pairs, _) in zip(ids, queries, strict=True)})
    qrels = qrels_from_mapping(judged)
    assert qrels.queries.to_pylist() == ids
    measures = _measures(family)
    scores = score_run(qrels, run, measures, ties="evalkit")
    cases = [case._replace(ranking=order_ranking(pairs, "evalkit")) for pairs, case in queries]
    for measure in measures:
        assert _mismatches(measure, scores.values[measure.name], cases) == [], measure.name


def test_the_random_queries_cover_the_edge_cases() -> None:
    cases = [case for _, case in _random_queries(seed=20260101)]
    assert sum(not case.ranking for case in cases) > 100
    assert sum(len(set(case.ranking)) < len(case.ranking) for case in cases) > 500
    assert sum(not any(g >= 1 for g in case.grades.values()) for case in cases) > 100
    assert sum(any(d not in case.grades for d in case.ranking) for case in cases) > 1000


# ----------------------------------------------------------------------------------------------------
# (b) trec_eval aliases equal pytrec_eval under the trec_eval policy
# ----------------------------------------------------------------------------------------------------

TREC_EVAL_ALIASES = (
    "ndcg_cut_5",
    "ndcg_cut_10",
    "ndcg_cut_20",
    "ndcg",
    "recip_rank",
    "P_5",
    "P_10",
    "recall_10",
    "recall_100",
    "map",
    "map_cut_10",
    "Rprec",
    "success_1",
    "success_5",
    "success_10",
)
PYTREC_FAMILIES = {"ndcg_cut", "ndcg", "recip_rank", "P", "recall", "map", "map_cut", "Rprec", "success"}


def _tied_run(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, Pairs]]:
    """2,500 judged queries (grades 0 to 3) and a tie-heavy run with duplicates, empty rankings, judged queries
    it leaves out and queries nobody judged."""
    rng = np.random.default_rng(seed)
    pool = [f"d{i:03d}" for i in range(40)]
    judgments: dict[str, dict[str, int]] = {}
    rankings: dict[str, Pairs] = {}
    for index in range(2_500):
        query_id = f"q{index:04d}"
        judged = rng.choice(pool, size=int(rng.integers(1, 15)), replace=False)
        judgments[query_id] = {str(d): int(g) for d, g in zip(judged, rng.integers(0, 4, len(judged)), strict=True)}
        if index % 50 == 0:
            continue  # judged, not in the run
        size = int(rng.integers(0, 40))
        docs, scores = rng.choice(pool, size=size), rng.choice(SCORE_LEVELS, size=size)
        rankings[query_id] = [(str(d), float(s)) for d, s in zip(docs, scores, strict=True)]
    for index in range(20):
        rankings[f"u{index:02d}"] = [("d000", 1.0)]
    return judgments, rankings


def _pytrec_eval(judgments: dict[str, dict[str, int]], rankings: dict[str, Pairs]) -> dict[str, dict[str, float]]:
    """pytrec_eval's values; it cannot hold a document twice in a query, so each document gets its highest score
    (its best-placed occurrence under trec_eval's order, which is the one evalkit keeps)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    run: dict[str, dict[str, float]] = {}
    for query_id, pairs in rankings.items():
        best: dict[str, float] = {}
        for doc, score in pairs:
            best[doc] = max(score, best.get(doc, score))
        if best:
            run[query_id] = best
    values: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(judgments, PYTREC_FAMILIES).evaluate(run)
    return values


def _differences(ties: str) -> tuple[int, list[tuple[str, str, float, float]]]:
    judgments, rankings = _tied_run(seed=20261202)
    peer = _pytrec_eval(judgments, rankings)
    qrels = qrels_from_mapping(judgments)
    scores = score_run(qrels, run_from_rankings("r", rankings), parse_measures(TREC_EVAL_ALIASES), ties)
    compared, differences = 0, []
    for row, query_id in enumerate(qrels.queries.to_pylist()):
        if query_id not in peer:
            continue
        compared += 1
        for alias in TREC_EVAL_ALIASES:
            ours, theirs = float(scores.values[alias][row]), peer[query_id][alias]
            if ours != theirs:
                differences.append((query_id, alias, ours, theirs))
    return compared, differences


@pytest.mark.parametrize("join", ["chosen", "sorted", "codes"])
def test_trec_eval_aliases_equal_pytrec_eval_under_the_trec_eval_policy(
    join: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every query pytrec_eval scores, those without a relevant document (0, as trec_eval scores them) included;
    with the join each block chooses, and with every block joined by the sort, then by dictionary codes."""
    if join != "chosen":
        monkeypatch.setattr(run_join, "SORTED_SHARE", 10**9 if join == "sorted" else 0)
    compared, differences = _differences("trec_eval")
    judgments, _ = _tied_run(seed=20261202)
    assert compared >= 2_000
    assert sum(max(grades.values()) < 1 for grades in judgments.values()) >= 40
    assert differences == []


def test_the_evalkit_policy_differs_from_pytrec_eval_on_ties() -> None:
    """The comparison above can fail: ordered under evalkit's own policy, tied queries score differently."""
    _, differences = _differences("evalkit")
    assert len({query_id for query_id, *_ in differences}) > 100


# ----------------------------------------------------------------------------------------------------
# (c) which queries count, and what the join counts
# ----------------------------------------------------------------------------------------------------

JUDGMENTS = {"q1": {"a": 2, "b": 0}, "q2": {"c": 1}, "q3": {"z": 0}}


def test_a_judged_query_missing_from_the_run_scores_zero_or_is_skipped() -> None:
    qrels = qrels_from_mapping(JUDGMENTS)
    run = run_from_rankings("r", {"q1": [("a", 1.0)]})
    measures = parse_measures(["ndcg@10", "recall", "recip_rank", "P_5", "map", "no_answer_fpr"])
    zero = score_run(qrels, run, measures, missing="zero")
    skip = score_run(qrels, run, measures, missing="skip")
    assert zero.evaluated.tolist() == [True, True, True]
    assert skip.evaluated.tolist() == [True, False, False]
    for name in ("ndcg@10", "recall", "recip_rank", "map"):
        assert zero.values[name][:2].tolist() == [1.0, 0.0], name
        assert skip.values[name][0] == 1.0, name
        assert np.isnan(skip.values[name][1:]).all(), name
    assert zero.values["P_5"][:2].tolist() == [1 / 5, 0.0]
    assert zero.values["no_answer_fpr"][2] == 0.0  # q3 returned nothing
    assert np.isnan(skip.values["no_answer_fpr"][2])
    assert zero.counts == skip.counts
    assert zero.counts is not None and zero.counts.missing_queries == 2


def test_the_join_counts_lines_duplicates_unjudged_queries_and_all_ties() -> None:
    run = run_from_rankings(
        "r",
        {
            "q1": [("a", 1.0), ("b", 1.0), ("a", 0.5)],  # a duplicate; the lines' scores differ: not all ties
            "q2": [("c", 2.0), ("x", 1.0), ("c", 2.0), ("c", 0.1)],  # two duplicates; no tie
            "q3": [("z", 3.0), ("y", 3.0)],  # every line the same score: all ties
            "u1": [("a", 1.0), ("a", 1.0)],  # nobody judged u1
            "u2": [("b", 1.0)],
        },
    )
    scores = score_run(qrels_from_mapping(JUDGMENTS), run, parse_measures(["map"]))  # reads every line
    assert scores.counts is not None
    assert (scores.counts.lines, scores.counts.duplicates) == (12, 3)
    assert (scores.counts.unjudged_queries, scores.counts.missing_queries, scores.counts.all_ties) == (2, 0, 1)


def test_unknown_policies_and_span_measures_are_refused() -> None:
    qrels, run = qrels_from_mapping(JUDGMENTS), run_from_rankings("r", {"q1": [("a", 1.0)]})
    with pytest.raises(ValueError, match="unknown tie policy 'ranx'; valid: evalkit, trec_eval"):
        score_run(qrels, run, parse_measures(["map"]), ties="ranx")
    with pytest.raises(ValueError, match="unknown missing-query policy 'drop'; valid: zero, skip"):
        score_run(qrels, run, parse_measures(["map"]), missing="drop")
    with pytest.raises(ValueError, match="context_recall need\\(s\\) gold spans"):
        score_run(qrels, run, parse_measures(["context_recall"]))


# ----------------------------------------------------------------------------------------------------
# (d) the tie policies on hand cases
# ----------------------------------------------------------------------------------------------------


RECIP_RANK = parse_measures(["recip_rank"])


def _first_relevant_rank(pairs: Pairs, ties: str) -> float:
    """1 / rank of the only relevant document, ``a``."""
    scores = score_run(qrels_from_mapping({"q": {"a": 1}}), run_from_rankings("r", {"q": pairs}), RECIP_RANK, ties)
    return float(scores.values["recip_rank"][0])


def test_the_evalkit_policy_breaks_ties_by_id_ascending() -> None:
    assert _first_relevant_rank([("c", 1.0), ("b", 1.0), ("a", 1.0)], "evalkit") == 1.0
    assert _first_relevant_rank([("b", 2.0), ("c", 1.0), ("a", 1.0)], "evalkit") == 1 / 2
    assert _first_relevant_rank([("a", 1.0), ("b", 1.0 + 1e-9)], "evalkit") == 1 / 2  # doubles, not float32


def test_the_trec_eval_policy_rounds_to_float32_then_breaks_ties_by_id_descending() -> None:
    assert _first_relevant_rank([("a", 1.0), ("b", 1.0), ("c", 1.0)], "trec_eval") == 1 / 3
    assert _first_relevant_rank([("a", 1.0 + 1e-9), ("b", 1.0)], "trec_eval") == 1 / 2  # the same float32
    assert _first_relevant_rank([("a", 1.5), ("b", 1.0), ("c", 1.5)], "trec_eval") == 1 / 2


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
def test_a_duplicate_counts_once_at_its_best_place(ties: str) -> None:
    assert _first_relevant_rank([("b", 1.0), ("a", 0.5), ("a", 2.0), ("a", 0.1)], ties) == 1.0


IDS = ["文档", "é", "e", "E", "Z", "a", "ab", "a\u00e9", "b", "ß", "10", "9", "𝔘", "\uff21"]
"""Document IDs whose code-point order differs from locale, case-folded and numeric orders."""


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
@pytest.mark.parametrize("seed", range(20))
def test_ties_among_non_ascii_ids_follow_code_point_order(ties: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(IDS), size=9)  # with repeats: duplicates among the tied lines too
    pairs = [(IDS[i], float(rng.choice([1.0, 1.0, 0.5]))) for i in picks]
    relevant = IDS[int(picks[rng.integers(len(picks))])]
    qrels = qrels_from_mapping({"q": {relevant: 1, **{d: 0 for d in IDS if d != relevant}}})
    scores = score_run(qrels, run_from_rankings("r", {"q": pairs}), RECIP_RANK, ties)
    best: dict[str, float] = {}
    for doc, score in pairs:  # the best-placed copy of a duplicate: its highest score
        best[doc] = max(best.get(doc, -math.inf), score)
    if ties == "evalkit":
        order = sorted(best, key=lambda d: (-best[d], d))
    else:  # float32 scores are equal here; IDs descending
        order = sorted(best, key=lambda d: (-best[d], [-ord(c) for c in d] + [1]))
    assert float(scores.values["recip_rank"][0]) == 1 / (order.index(relevant) + 1)


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
def test_ties_of_unjudged_lines_are_ordered_only_when_ids_are_read(ties: str) -> None:
    """Scoring orders by ID only the ties that hold a judged line (the ranks of judged lines, and so every value,
    are the same whatever the order of a tie of unjudged ones); a caller that reads the IDs gets the policy's whole
    order."""
    pairs = [("m", 3.0), ("b", 2.0), ("z", 2.0), ("a", 2.0), ("a", 1.0), ("y", 1.0), ("c", 1.0), ("x", 1.0)]
    qrels = qrels_from_mapping({"q": {"c": 1, "y": 0}})
    run = run_from_rankings("r", {"q": pairs})
    ranked = run_order.rank_run(run, qrels, ties, "exact", with_ids=True)
    (_, block), *_ = ranked.blocks()
    ascending = ["m", "a", "b", "z", "c", "x", "y"]
    expected = ascending if ties == "evalkit" else ["m", "z", "b", "a", "y", "x", "c"]
    assert list(block.doc_ids or []) == expected
    (_, scored), *_ = run_order.rank_run(run, qrels, ties, "exact").blocks()
    judged_ranks = dict(zip(scored.grade[scored.judged].tolist(), scored.rank[scored.judged].tolist(), strict=True))
    assert judged_ranks == ({1: 5, 0: 7} if ties == "evalkit" else {0: 5, 1: 7})
    assert scored.returned().tolist() == [7]


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
def test_condensed_lists_from_judged_lines_only_equal_those_of_whole_rankings(
    ties: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Condensed-list measures alone are ranked from the judged lines only (unjudged ones dropped before ties are
    ordered and repeats removed); beside a plain measure they are read off whole rankings: the values agree."""
    judgments, rankings = _tied_run(seed=20261206)
    rng = np.random.default_rng(5)
    for grades in judgments.values():  # trec_eval's pooled, not judged: removed from a condensed list too
        for doc in list(grades)[: int(rng.integers(0, 3))]:
            grades[doc] = -1
    for index in range(1, 2_500, 7):  # queries nobody judged, whose lines lie between judged queries' lines
        rankings[f"q{index:04d}x"] = [("d001", 1.0), ("d002", 0.5)]
    qrels, run = qrels_from_mapping(judgments), run_from_rankings("r", rankings)
    assert run.queries.to_pylist()[:3] == ["q0001", "q0001x", "q0002"]
    condensed = parse_measures(["condensed_ndcg@5", "condensed_map", "condensed_precision@3", "condensed_mrr@10"])
    monkeypatch.setattr(run_order, "BLOCK_LINES", 997)
    alone = score_run(qrels, run, condensed, ties)
    beside = score_run(qrels, run, [*condensed, *parse_measures(["map"])], ties)
    for m in condensed:
        assert np.array_equal(alone.values[m.name], beside.values[m.name], equal_nan=True), m.name
    assert np.nanmax(alone.values["condensed_map"]) > 0


# ----------------------------------------------------------------------------------------------------
# Builders and summations
# ----------------------------------------------------------------------------------------------------


def test_summations_add_one_by_one_or_exactly_and_unknown_ones_are_refused() -> None:
    grades = [3, 2, 2, 1, 1, 0, 0, 0, 0, 3]
    terms = np.array([(2.0**g - 1.0) / math.log2(r + 2) for r, g in enumerate(grades)])
    row, rank = np.zeros(len(terms), dtype=np.int64), np.arange(1, len(terms) + 1, dtype=np.int64)
    running = 0.0
    for term in terms.tolist():
        running += term
    assert float(segment_sums(row, rank, terms, 1, "sequential")[0]) == running
    assert float(segment_sums(row, rank, terms, 1, "exact")[0]) == math.fsum(terms.tolist())
    assert running != math.fsum(terms.tolist())  # the two differ on these terms: the checks above can fail
    with pytest.raises(ValueError, match="unknown summation 'pairwise'; valid: exact, sequential"):
        segment_sums(row, rank, terms, 1, "pairwise")


def test_rank_lists_checks_alignment_and_needs_lengths_only_for_the_context() -> None:
    with pytest.raises(ValueError, match="2 rankings for 1 judged queries"):
        rank_lists([[], []], [{"a": 1}])
    mrr = parse_measure("mrr@10")
    values, _ = score_rankings([["ghost", "a"]], [{"a": 2}], [mrr])
    assert values["mrr@10"][0] == 1 / 2
    context = [parse_measure("context_recall")]
    with pytest.raises(ValueError, match="chunk 'ghost' has no entry in chunk_lengths"):
        score_rankings([["ghost", "a"]], [{"a": 2}], context, spans=[{"a": 4}], chunk_lengths={"a": 10}, context_k=5)


def test_an_empty_ranking_scores_zero_on_the_context_measures_too() -> None:
    measures = parse_measures(["context_precision", "context_recall", "recall@5", "ndcg@10"])
    values, _ = score_rankings([[]], [{"a": 2}], measures, spans=[{"a": 4}], chunk_lengths={"a": 10}, context_k=5)
    assert all(float(column[0]) == 0.0 for column in values.values())


def test_depth_is_the_deepest_rank_any_measure_reads() -> None:
    assert depth_of(parse_measures(["recall@5", "ndcg@10", "no_answer_fpr"])) == 10
    assert depth_of(parse_measures(["context_precision", "P_3"]), context_k=5) == 5
    assert depth_of(parse_measures(["recall@5", "map"])) is None
    assert depth_of(parse_measures(["no_answer_fpr"])) == 1


@pytest.mark.parametrize("top_grade", [3, 2**61])
def test_ideal_rankings_sort_each_querys_positive_grades_descending(top_grade: int) -> None:
    """One int64 key when query and grade fit in it; a two-key sort when they do not: the same ideal rankings."""
    rng = np.random.default_rng(7)
    query = np.sort(rng.integers(0, 50, 2_000))
    grades = rng.integers(-1, 4, 2_000)
    grades[rng.integers(0, 2_000, 20)] = top_grade
    row, rank, grade = ideal_arrays(query, grades, 50)
    expected = sorted(((int(q), -int(g)) for q, g in zip(query, grades, strict=True) if g >= 1))
    assert list(zip(row.tolist(), (-grade).tolist(), strict=True)) == expected
    assert rank.tolist() == [sum(1 for q, _ in expected[:i] if q == expected[i][0]) + 1 for i in range(len(expected))]


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
def test_scoring_block_by_block_gives_the_values_of_one_block(ties: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of a few lines (queries split across many blocks, duplicates and ties at their edges) give exactly the
    values and counts of the whole run scored as one block."""
    rng = np.random.default_rng(11)
    rankings = {
        f"q{q}": [(f"d{int(d)}", float(s)) for d, s in zip(rng.integers(0, 30, n), rng.integers(0, 4, n), strict=True)]
        for q, n in enumerate(rng.integers(0, 40, 60))
    }
    judgments = {f"q{q}": {f"d{int(d)}": int(rng.integers(-1, 4)) for d in rng.integers(0, 30, 8)} for q in range(70)}
    qrels, run = qrels_from_mapping(judgments), run_from_rankings("r", rankings)
    measures = parse_measures(["ndcg@10", "mrr@5", "recip_rank", "map", "P_20", "Rprec", "ndcg_cut_3", "recall@30"])
    whole = score_run(qrels, run, measures, ties=ties)
    for lines in (1, 7, 50):
        monkeypatch.setattr(run_order, "BLOCK_LINES", lines)
        blocks = score_run(qrels, run, measures, ties=ties)
        assert blocks.counts == whole.counts
        for m in measures:
            assert np.array_equal(blocks.values[m.name], whole.values[m.name], equal_nan=True), (lines, m.name)
    assert whole.counts is not None and whole.counts.duplicates > 0


def test_within_a_cutoff_only_the_lines_that_can_reach_it_are_read_and_counted() -> None:
    """A repeat near the top makes the reader take more lines until k distinct documents are in hand, not the whole
    ranking: a second repeat far below the cutoff is not among the lines read, so it is not counted (whole
    rankings, which read every line, count both)."""
    ranking = [("a", 10.0), ("a", 9.0), *((f"d{i}", 8.0 - i / 100) for i in range(40)), ("d30", 1.0)]
    judgments = {"q": {"a": 1, "d1": 2}}
    run = run_from_rankings("r", {"q": ranking})
    cut = score_run(qrels_from_mapping(judgments), run, parse_measures(["ndcg@3"]))
    whole = score_run(qrels_from_mapping(judgments), run, parse_measures(["map"]))
    assert cut.counts is not None and whole.counts is not None
    assert (cut.counts.duplicates, whole.counts.duplicates) == (1, 2)
    assert cut.values["ndcg@3"][0] == pytest.approx(whole_ranking_ndcg3(["a", "d0", "d1"], judgments["q"]), rel=1e-12)


def whole_ranking_ndcg3(top: list[str], grades: dict[str, int]) -> float:
    """nDCG@3 with exponential gain, by hand."""
    dcg = sum((2 ** grades.get(doc, 0) - 1) / np.log2(rank + 1) for rank, doc in enumerate(top, 1))
    ideal = sum(
        (2**grade - 1) / np.log2(rank + 1) for rank, grade in enumerate(sorted(grades.values(), reverse=True), 1)
    )
    return float(dcg / ideal)
