"""Per-query values, aggregates and ID-only failures of one system's rankings over a fixture's judged queries.

:func:`score_queries` scores many queries in one pass through the scoring core's kernels (:mod:`evalkit.measures.core`);
:func:`score_query` is its per-query reference, over the reference functions of :mod:`evalkit.measures.metrics`.
Answerable queries get the standard measures, no-answer queries no-answer FPR's term; :func:`aggregate` macro-averages
them per slice and :func:`query_failures` names what each query missed, by ID.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalkit.data.fixture import Query
from evalkit.data.schema import LANGUAGES
from evalkit.measures.core import score_rankings
from evalkit.measures.metrics import (
    NO_ANSWER_FPR,
    STANDARD_MEASURES,
    Measure,
    context_precision,
    context_recall,
    dedupe_ranking,
    mean,
    merge_intervals,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank_at_k,
    returned_any,
)
from evalkit.measures.registry import parse_measures
from evalkit.measures.results import CONTEXT_K, FAILURE_CUTOFF, Failure

__all__ = ["FIXTURE_MEASURES", "aggregate", "query_failures", "score_queries", "score_query"]

FIXTURE_MEASURES = parse_measures([*(str(m) for m in STANDARD_MEASURES), str(NO_ANSWER_FPR)])
"""Every measure a fixture run reports, as the scoring core declares them."""


def score_query(query: Query, ranking: Sequence[str], chunk_lengths: Mapping[str, int]) -> dict[str, float]:
    """Every per-query metric: the standard measures for answerable queries, no-answer FPR's term otherwise."""
    if not query.answerable:
        return {str(NO_ANSWER_FPR): returned_any(ranking)}
    grades = {j.chunk_id: j.grade for j in query.judgments}
    spans = {j.chunk_id: [(s.start, s.end) for s in j.spans] for j in query.judgments}
    context = dedupe_ranking(ranking)[:CONTEXT_K]
    values: dict[str, float] = {}
    for measure in STANDARD_MEASURES:
        values[str(measure)] = _measure_value(measure, ranking, grades, context, chunk_lengths, spans)
    return values


def score_queries(
    queries: Sequence[Query],
    rankings: Sequence[Sequence[str]],
    chunk_lengths: Mapping[str, int],
    summation: str = "exact",
) -> dict[str, dict[str, float]]:
    """:func:`score_query` for many queries at once, through the scoring core's kernels (the same values, one pass).

    ``summation`` is how nDCG adds its terms (``exact``, as the reference; ``sequential`` as trec_eval does).
    """
    grades = [{j.chunk_id: j.grade for j in query.judgments} for query in queries]
    spans = [
        {j.chunk_id: sum(e - s for s, e in merge_intervals((s.start, s.end) for s in j.spans)) for j in query.judgments}
        for query in queries
    ]
    values, answerable = score_rankings(rankings, grades, FIXTURE_MEASURES, summation, spans, chunk_lengths, CONTEXT_K)
    columns = {name: column.tolist() for name, column in values.items()}
    no_answer = str(NO_ANSWER_FPR)
    scored: dict[str, dict[str, float]] = {}
    for row, (query, has_answer) in enumerate(zip(queries, answerable.tolist(), strict=True)):
        if has_answer:
            scored[query.query_id] = {str(m): columns[str(m)][row] for m in STANDARD_MEASURES}
        else:
            scored[query.query_id] = {no_answer: columns[no_answer][row]}
    return scored


def _measure_value(
    measure: Measure,
    ranking: Sequence[str],
    grades: Mapping[str, int],
    context: Sequence[str],
    chunk_lengths: Mapping[str, int],
    spans: Mapping[str, Sequence[tuple[int, int]]],
) -> float:
    k = measure.cutoff or 0
    functions = {
        "recall": lambda: recall_at_k(ranking, grades, k),
        "mrr": lambda: reciprocal_rank_at_k(ranking, grades, k),
        "ndcg": lambda: ndcg_at_k(ranking, grades, k),
        "context_precision": lambda: context_precision(context, chunk_lengths, spans),
        "context_recall": lambda: context_recall(context, chunk_lengths, spans),
    }
    return functions[measure.name]()


def query_failures(query: Query, ranking: Sequence[str]) -> list[Failure]:
    """ID-only failures of one query, relevant chunks by grade descending then ID."""
    if not query.answerable:
        if not ranking:
            return []
        return [Failure(query.query_id, query.language, "no_answer_returned_results", None, None, None, len(ranking))]
    rank_of = {chunk_id: index for index, chunk_id in enumerate(dedupe_ranking(ranking), 1)}
    failures = []
    for judgment in sorted(query.judgments, key=lambda j: (-j.grade, j.chunk_id)):
        rank = rank_of.get(judgment.chunk_id)
        if rank is None or rank > FAILURE_CUTOFF:
            failures.append(
                Failure(
                    query.query_id,
                    query.language,
                    "relevant_not_retrieved",
                    judgment.chunk_id,
                    judgment.grade,
                    rank,
                    len(ranking),
                )
            )
    return failures


def aggregate(queries: Sequence[Query], per_query: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Macro averages per measure: ``all`` and each language; no-answer FPR over the no-answer queries."""
    slices: dict[str, list[Query]] = {"all": list(queries)}
    for language in LANGUAGES:
        slices[language] = [q for q in queries if q.language == language]
    table: dict[str, dict[str, float]] = {}
    for name, members in slices.items():
        answerable = [q for q in members if q.answerable]
        unanswerable = [q for q in members if not q.answerable]
        row: dict[str, float] = {}
        if answerable:
            for measure in STANDARD_MEASURES:
                row[str(measure)] = mean([per_query[q.query_id][str(measure)] for q in answerable])
        if unanswerable:
            row[str(NO_ANSWER_FPR)] = mean([per_query[q.query_id][str(NO_ANSWER_FPR)] for q in unanswerable])
        table[name] = row
    return table
