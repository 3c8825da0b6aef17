"""Precomputed runs scored against a fixture, through the columnar scoring core.

``evalkit score --fixture`` reads each run file with the columnar reader and scores it as ``evalkit score --qrels``
does, with what only a fixture has: its queries without any judgment (no-answer queries, which ``no_answer_fpr``
scores), the gold spans and chunk lengths the context measures read (:class:`~evalkit.measures.ranked.SpanContext`),
each query's language, and ID-only failures (a relevant chunk not in the top ``FAILURE_CUTOFF``, a no-answer query
that returned results). No database is seeded and no ranking becomes a Python list, so a run of millions of lines
is scored in about the time and memory of the qrels path. The values equal those of the run scored as an external
system of :func:`evalkit.runs.evaluation.evaluate` (tested).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.data.columns import IntArray, lookup
from evalkit.data.fixture import Fixture
from evalkit.data.qrels import Qrels
from evalkit.data.runs import Run
from evalkit.measures.core import FIXTURE_JUDGED_K, FIXTURE_MEASURES, RunScores, score_run
from evalkit.measures.ranked import SpanContext
from evalkit.measures.registry import STANDARD_MEASURES, judged_share_measures
from evalkit.measures.results import CONTEXT_K, FAILURE_CUTOFF, Failure
from evalkit.measures.spans import merge_intervals
from evalkit.reporting.report import SystemReport
from evalkit.runs.precomputed import ScoreResult

__all__ = ["fixture_qrels", "score_fixture_runs", "span_context"]


def fixture_qrels(fixture: Fixture) -> Qrels:
    """The fixture's judgments as qrels, every query included: a query without judgments (a no-answer query) is a
    row of ``queries`` with no judgment rows, which the core scores as a query without relevant documents."""
    query_ids = sorted(q.query_id for q in fixture.queries)
    code = {query_id: index for index, query_id in enumerate(query_ids)}
    rows = sorted((code[q.query_id], j.chunk_id, j.grade) for q in fixture.queries for j in q.judgments)
    return Qrels(
        queries=pa.array(query_ids, type=pa.string()),
        query=np.array([r[0] for r in rows], dtype=np.int64),
        docs=pa.chunked_array([pa.array([r[1] for r in rows], type=pa.string())], type=pa.string()),
        grades=np.array([r[2] for r in rows], dtype=np.int64),
        duplicates=0,
        source=f"fixture {fixture.fixture_id}",
    )


def span_context(fixture: Fixture, qrels: Qrels) -> SpanContext:
    """Per row of `qrels` (:func:`fixture_qrels`), the characters its chunk's merged gold spans cover; each chunk's
    length; the context depth ``CONTEXT_K``."""
    covered = {
        (q.query_id, j.chunk_id): sum(end - start for start, end in merge_intervals((s.start, s.end) for s in j.spans))
        for q in fixture.queries
        for j in q.judgments
    }
    queries = qrels.queries.to_pylist()
    span_chars = [covered[(queries[q], d)] for q, d in zip(qrels.query.tolist(), qrels.docs.to_pylist(), strict=True)]
    chunks = sorted((c.chunk_id, len(c.text)) for c in fixture.chunks)
    return SpanContext(
        span_chars=np.array(span_chars, dtype=np.int64),
        chunk_ids=pa.array([c for c, _ in chunks], type=pa.string()),
        lengths=np.array([n for _, n in chunks], dtype=np.int64),
        context_k=CONTEXT_K,
    )


def distinct_returned(run: Run, qrels: Qrels) -> IntArray:
    """Per qrels query, the distinct chunks the run returned for it (what its deduplicated ranking holds)."""
    lines = pa.table({"query": pa.array(run.query), "doc": run.doc_ids})
    counted = lines.group_by("query", use_threads=False).aggregate([("doc", "count_distinct")])
    names = run.queries.to_pylist()
    per_query = {
        names[q]: n
        for q, n in zip(counted["query"].to_pylist(), counted["doc_count_distinct"].to_pylist(), strict=True)
    }
    return np.array([per_query.get(q, 0) for q in qrels.queries.to_pylist()], dtype=np.int64)


def deep_ranks(qrels: Qrels, run: Run, scores: RunScores, ties: str) -> IntArray:
    """The rank each relevant document reached in the whole deduplicated ranking (0: not returned), where
    `scores` (scored to the measures' depth) saw it only when within that depth.

    No whole ranking is ordered. A document's rank is one more than the number of other documents of its query whose
    best line comes first under the tie policy: a higher score (as the policy reads it: float32 under ``trec_eval``),
    or the same score and an ID that sorts first (ascending under ``evalkit``, descending under ``trec_eval``). Those
    are counted by hashing, over the lines whose score reaches the document's best one."""
    if scores.judged_rank is None:
        raise ValueError("deep ranks complete the ranks within depth (score_run(..., judged_ranks=True))")
    reached = scores.judged_rank.copy()
    missing = np.flatnonzero((qrels.grades >= 1) & (reached == 0))
    if not len(missing):
        return reached
    position = lookup(run.queries, qrels.queries)  # run query code -> qrels row of the query (-1: not judged)
    codes = np.full(len(qrels.queries), -1, dtype=np.int64)
    codes[position[position >= 0]] = np.flatnonzero(position >= 0)
    wanted = pa.table(
        {
            "code": pa.array(codes[qrels.query[missing]]),
            "doc": qrels.docs.take(pa.array(missing)).combine_chunks().cast(pa.string()),
            "row": pa.array(missing.astype(np.int64)),
        }
    ).filter(pc.greater_equal(pa.array(codes[qrels.query[missing]]), 0))
    compared = run.scores.astype(np.float32).astype(np.float64) if ties == "trec_eval" else run.scores
    holding = np.flatnonzero(pc.is_in(run.doc_ids, value_set=wanted["doc"]).to_numpy(zero_copy_only=False))
    lines = _lines(run, holding, compared)
    found = (
        lines.join(wanted, ["code", "doc"], join_type="inner")
        .group_by(["row", "code", "doc"], use_threads=False)
        .aggregate([("score", "max")])
        .rename_columns(["row", "code", "target", "best"])
    )
    if not found.num_rows:
        return reached
    threshold = np.full(len(run.queries), np.inf)
    np.minimum.at(threshold, found["code"].to_numpy(), found["best"].to_numpy())
    prefix = _lines(run, np.flatnonzero(compared >= threshold[run.query]), compared)
    best = (
        prefix.group_by(["code", "doc"], use_threads=False)
        .aggregate([("score", "max")])
        .rename_columns(["code", "doc", "score"])
    )
    pairs = best.join(found, "code", join_type="inner")
    before = pc.less(pairs["doc"], pairs["target"]) if ties == "evalkit" else pc.greater(pairs["doc"], pairs["target"])
    ahead = pc.or_(pc.greater(pairs["score"], pairs["best"]), pc.and_(pc.equal(pairs["score"], pairs["best"]), before))
    counted = pairs.filter(ahead).group_by("row", use_threads=False).aggregate([("row", "count")])
    reached[np.asarray(found["row"].to_numpy(), dtype=np.int64)] = 1
    rows = np.asarray(counted["row"].to_numpy(), dtype=np.int64)
    reached[rows] += np.asarray(counted["row_count"].to_numpy(), dtype=np.int64)
    return reached


def _lines(run: Run, at: IntArray, compared: np.ndarray) -> pa.Table:
    """The run lines `at` as a table: query code, document ID and score as the tie policy compares it."""
    return pa.table(
        {
            "code": pa.array(run.query[at].astype(np.int64)),
            "doc": run.doc_ids.take(pa.array(at)).cast(pa.string()),
            "score": pa.array(compared[at]),
        }
    )


def run_failures(
    fixture: Fixture, qrels: Qrels, scores: RunScores, ranks: IntArray, returned: IntArray
) -> tuple[Failure, ...]:
    """ID-only failures of one run, as :func:`evalkit.measures.results.query_failures` names them: by query ID, and
    within a query relevant chunks by grade descending, then ID; `ranks` per qrels row (:func:`deep_ranks`),
    `returned` per query (:func:`distinct_returned`)."""
    language = {q.query_id: q.language for q in fixture.queries}
    queries = qrels.queries.to_pylist()
    rows: list[list[tuple[int, str, int]]] = [[] for _ in queries]
    for q, doc, grade, rank in zip(
        qrels.query.tolist(), qrels.docs.to_pylist(), qrels.grades.tolist(), ranks.tolist(), strict=True
    ):
        if grade >= 1 and (rank == 0 or rank > FAILURE_CUTOFF):
            rows[q].append((grade, doc, rank))
    failures: list[Failure] = []
    for q, query_id in enumerate(queries):
        count = int(returned[q])
        if not scores.answerable[q]:
            if count:
                failures.append(
                    Failure(query_id, language[query_id], "no_answer_returned_results", None, None, None, count)
                )
            continue
        failures += [
            Failure(query_id, language[query_id], "relevant_not_retrieved", doc, grade, rank or None, count)
            for grade, doc, rank in sorted(rows[q], key=lambda r: (-r[0], r[1]))
        ]
    return tuple(failures)


def score_fixture_runs(
    fixture: Fixture, runs: Sequence[Run], ties: str, systems: Mapping[str, SystemReport]
) -> ScoreResult:
    """Every run of `runs` scored against `fixture` on the measures a fixture report holds, with its failures;
    `systems` are the runs' provenance (file hash and the counts of what reading them found), by run name."""
    qrels = fixture_qrels(fixture)
    context = span_context(fixture, qrels)
    measures = (*FIXTURE_MEASURES, *judged_share_measures(STANDARD_MEASURES))
    scores = tuple(
        score_run(qrels, run, measures, ties, "zero", context, judged_ranks=True, unjudged_k=FIXTURE_JUDGED_K)
        for run in runs
    )
    failures = {
        s.name: run_failures(fixture, qrels, s, deep_ranks(qrels, run, s, ties), distinct_returned(run, qrels))
        for s, run in zip(scores, runs, strict=True)
    }
    systems = {  # duplicate lines as the core counted them (best-placed kept), beside what reading the run found
        s.name: (
            systems[s.name].model_copy(update={"counts": {**systems[s.name].counts, "duplicates": s.counts.duplicates}})
            if s.name in systems and s.counts is not None
            else systems[s.name]
        )
        for s in scores
        if s.name in systems
    }
    return ScoreResult(
        qrels,
        scores,
        measures,
        {q.query_id: q.language for q in fixture.queries},
        ties,
        "zero",
        tuple(
            f"{s.name}: {s.counts.lines} line(s); {s.counts.duplicates} duplicate line(s) (best-placed kept); "
            f"{s.counts.all_ties} query(ies) whose results all tie (ordered by the tie policy alone)"
            for s in scores
            if s.counts is not None
        ),
        sources=tuple(runs),
        named=True,
        fixture=fixture,
        failures=failures,
        systems=dict(systems),
        judged_share=tuple(m.name for m in measures[len(FIXTURE_MEASURES) :]),
    )
