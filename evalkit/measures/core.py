"""The scoring core: rankings and judgments in, one value per query and measure out, through the families' kernels.

Two doors, one set of kernels (:mod:`evalkit.measures.kernels`, declared in :mod:`evalkit.measures.families`):

- :func:`score_run`: no corpus, no retrieval path. It joins a columnar :class:`~evalkit.data.runs.Run` to the
  :class:`~evalkit.data.qrels.Qrels`, orders it under the declared tie policy (:mod:`evalkit.measures.ties`) and
  computes every measure asked.
- :func:`score_queries`: a system's rankings (already in order) over a fixture's queries, scored on the measures a
  fixture run reports (:data:`FIXTURE_MEASURES`); :func:`score_query` is its per-query reference, through the
  families' reference functions.

Which queries count (:func:`score_run`):

- every query of the qrels is evaluated; one the run does not name returned nothing and scores 0 (trec_eval's
  ``-c``). With ``missing="skip"`` such queries are left out instead (trec_eval's default, without ``-c``);
- queries of the run that the qrels do not judge are ignored, and counted;
- a query whose judgments are all 0 or below has no relevant document: the ranking measures are not defined for
  it (NaN), ``no_answer_fpr`` is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from evalkit.data.columns import IntArray
from evalkit.data.fixture import Query
from evalkit.data.qrels import Qrels
from evalkit.data.runs import Run
from evalkit.measures.kernels.shared import at_level
from evalkit.measures.ranked import Ranked, SpanContext, dedupe_ranking, rank_lists
from evalkit.measures.registry import (
    NO_ANSWER_FPR,
    STANDARD_MEASURES,
    MeasureDef,
    QueryCase,
    condensed_forms,
    judged_k,
    judged_share_measures,
    reference_value,
)
from evalkit.measures.results import CONTEXT_K
from evalkit.measures.run_order import RankedRun, RunCounts, rank_run
from evalkit.measures.spans import merge_intervals
from evalkit.measures.ties import SUMMATION_OF, tie_policy

__all__ = [
    "FIXTURE_COMPANIONS",
    "FIXTURE_MEASURES",
    "MISSING_POLICIES",
    "Missing",
    "NotGrouped",
    "RunScorer",
    "RunScores",
    "depth_of",
    "first_relevant_levels",
    "score_companions",
    "score_queries",
    "score_query",
    "score_ranked",
    "score_rankings",
    "score_run",
    "unjudged_counts",
    "unjudged_reach",
]

FloatArray = npt.NDArray[np.float64]
Missing = Literal["zero", "skip"]
MISSING_POLICIES: Final = ("zero", "skip")


@dataclass(frozen=True)
class RunScores:
    """One run's per-query values: ``values[measure][i]`` for query ``i`` of the qrels (NaN: not defined there,
    or not evaluated), which queries were ``evaluated`` and which are ``answerable``, and the join's counts."""

    name: str
    values: Mapping[str, FloatArray]
    evaluated: npt.NDArray[np.bool_]
    answerable: npt.NDArray[np.bool_]
    counts: RunCounts | None = None
    judged_rank: npt.NDArray[np.int64] | None = None
    """Per qrels row, the rank its document reached in the deduplicated ranking (0: not within the depth scored);
    only when asked, for the failures a fixture report lists."""
    unjudged: npt.NDArray[np.int64] | None = None
    """Per qrels row, how many of its first ``unjudged_k`` results the judgments do not speak for (absent, or a
    negative grade); only when asked (``score_run(..., unjudged_k=k)``)."""
    named: npt.NDArray[np.bool_] | None = None
    """Per qrels row, whether the run names the query (a judged query it leaves out scores 0 under
    ``missing="zero"``, as with trec_eval's ``-c``, but has no line of its own in trec_eval's ``-q`` output)."""


def depth_of(measures: Sequence[MeasureDef], context_k: int = 0) -> int | None:
    """The deepest rank any of the measures reads (None: the whole ranking)."""
    depths = []
    for m in measures:
        spec = m.spec
        if spec.needs_spans:
            depths.append(context_k)
        elif spec.defined_on == "no_answer":
            depths.append(1)
        elif m.cutoff is None or spec.user or spec.condensed:  # a condensed list's k-th result may lie deeper
            return None
        else:
            depths.append(m.cutoff)
    return max(depths, default=1) or 1


MAX_EXPONENTIAL_GRADE = 512
"""The largest grade a measure with exponential gain (``2**grade - 1``: ``ndcg@k``) takes: past about 1,000 the gain
is past what a float holds, and nDCG came out 0 even for a perfect ranking. Real qrels grade 0 to 16."""


def score_ranked(ranked: Ranked, measures: Sequence[MeasureDef]) -> tuple[dict[str, FloatArray], npt.NDArray[np.bool_]]:
    """Every measure's kernel over ``ranked``; NaN where a measure is not defined. Returns values and answerable.

    A grade past :data:`MAX_EXPONENTIAL_GRADE` is refused (ValueError) for a measure with exponential gain."""
    exponential = [m.name for m in measures if m.gain == "exponential"]
    if exponential and len(ranked.ideal_grade) and int(ranked.ideal_grade.max()) > MAX_EXPONENTIAL_GRADE:
        raise ValueError(
            f"{exponential[0]} has gain 2^grade - 1, and a grade of {int(ranked.ideal_grade.max())} is past the "
            f"{MAX_EXPONENTIAL_GRADE} it can take (the gain would overflow a float); use linear gain instead "
            "(ndcg_cut_10 and the like, as trec_eval)"
        )
    answerable = ranked.relevant() > 0
    values: dict[str, FloatArray] = {}
    for measure in measures:
        # a relevance level past 1 reads grades below it as 0: where none reaches it, the kernels give 0
        column = np.asarray(measure.spec.kernel(at_level(ranked, measure.rel), measure), dtype=np.float64)
        if measure.spec.defined_on == "no_answer":
            defined = ~answerable
        else:
            defined = answerable if measure.no_relevant == "skip" else np.ones(len(answerable), dtype=bool)
        values[measure.name] = np.where(defined, column, np.nan)
    return values, answerable


def _reads_to_first_relevant(m: MeasureDef) -> bool:
    return m.cutoff is None and m.spec.uncut_reach == "first_relevant" and not (m.spec.user or m.spec.condensed)


def first_relevant_levels(measures: Sequence[MeasureDef]) -> tuple[int, ...]:
    """The relevance levels of the measures that read a ranking without a cutoff only down to its first relevant
    document (:data:`~evalkit.measures.declaration.UncutReach`), ascending."""
    return tuple(sorted({m.rel for m in measures if _reads_to_first_relevant(m)}))


def unjudged_reach(measures: Sequence[MeasureDef], unjudged_k: int | None = None) -> int | None:
    """The deepest rank at which one of ``measures`` (or the count of unjudged results in the first ``unjudged_k``)
    reads the position of an unjudged document, from what each family declares it reads
    (:data:`~evalkit.measures.declaration.Positions`): 0 when none does, None when one may read any rank."""
    if not measures or any(m.spec.positions == "all" for m in measures):
        return None
    cutoffs = [m.cutoff for m in measures if m.spec.positions == "cutoff"]
    if any(k is None for k in cutoffs):
        return None
    return max([*[k for k in cutoffs if k is not None], unjudged_k or 0])


class NotGrouped(ValueError):
    """A run given a segment at a time names one query in two segments: its lines are not grouped by query."""


class RunScorer:
    """A run scored a segment of complete query groups at a time (:meth:`add`), then :meth:`result`: the same
    values and counts as :func:`score_run` of the whole run when no query is split between segments (a run written
    the usual way), and :class:`NotGrouped` when one is. Only the per-query values are kept between segments, so
    memory is bounded by a segment, not by the run (see :func:`score_run` for the parameters)."""

    def __init__(
        self,
        qrels: Qrels,
        measures: Sequence[MeasureDef],
        ties: str = "evalkit",
        missing: str = "zero",
        context: SpanContext | None = None,
        judged_ranks: bool = False,
        whole_rankings: bool = False,
        unjudged_k: int | None = None,
    ) -> None:
        tie_policy(ties)
        if missing not in MISSING_POLICIES:
            raise ValueError(f"unknown missing-query policy {missing!r}; valid: {', '.join(MISSING_POLICIES)}")
        spans = [m.name for m in measures if m.spec.needs_spans]
        if spans and context is None:
            raise ValueError(f"{', '.join(spans)} need(s) gold spans, which qrels do not have: score against a fixture")
        self.qrels, self.measures, self.ties, self.missing, self.context = qrels, measures, ties, missing, context
        self.judged_ranks, self.unjudged_k = judged_ranks, unjudged_k
        self.with_ids = any(m.spec.user for m in measures)
        context_k = 0 if context is None else context.context_k
        depth = None if whole_rankings else depth_of(measures, context_k)
        # recip_rank and the like read down to the first relevant document only: deeper than depth where needed
        self.first_relevant = () if whole_rankings else first_relevant_levels(measures)
        if depth is None and self.first_relevant:
            depth = depth_of([m for m in measures if not _reads_to_first_relevant(m)], context_k)
            self.first_relevant = self.first_relevant if depth is not None else ()
        self.depth = max(depth, unjudged_k) if depth is not None and unjudged_k is not None else depth
        # Condensed lists read judged lines only: unjudged ones are dropped before anything is ordered.
        self.judged_only = bool(measures) and all(m.spec.condensed for m in measures) and self.depth is None
        self.judged_only &= not (self.with_ids or context is not None or judged_ranks or unjudged_k is not None)
        # Positions no measure reads are dropped once ranked: past this rank, judged ones only.
        self.keep_unjudged = None if self.with_ids or context is not None else unjudged_reach(measures, unjudged_k)
        self.restart()

    def restart(self) -> None:
        """Forget every segment added."""
        n = len(self.qrels.queries)
        self.values = {m.name: np.full(n, np.nan) for m in self.measures}
        self.answerable = np.zeros(n, dtype=bool)
        self.reached = np.zeros(len(self.qrels), dtype=np.int64) if self.judged_ranks else None
        self.unjudged = None if self.unjudged_k is None else np.zeros(n, dtype=np.int64)
        self.covered = np.zeros(n, dtype=bool)  # named by a segment
        self.scored = np.zeros(n, dtype=bool)  # scored with the lines of a segment
        self.unknown: set[str] = set()
        self.counts = RunCounts(0, 0, 0, 0, 0)

    def _rank(self, run: Run) -> RankedRun:
        summation = SUMMATION_OF[self.ties]
        return rank_run(
            run,
            self.qrels,
            self.ties,
            summation,
            self.depth,
            self.with_ids,
            self.context,
            self.judged_only,
            self.keep_unjudged,
            self.first_relevant,
        )

    def _take(self, rows: IntArray, ranked: Ranked) -> None:
        self.scored[rows] = True
        block_values, block_answerable = score_ranked(ranked, self.measures)
        self.answerable[rows] = block_answerable
        for name, column in block_values.items():
            self.values[name][rows] = column
        if self.unjudged is not None and self.unjudged_k is not None:
            self.unjudged[rows] = unjudged_counts(ranked, self.unjudged_k)
        if self.reached is not None and ranked.qrels_row is not None:
            judged = ranked.qrels_row >= 0
            self.reached[ranked.qrels_row[judged]] = ranked.rank[judged]

    def add(self, run: Run) -> None:
        """Score the queries of ``run``, one segment of a run; :class:`NotGrouped` when one of them was in an
        earlier segment."""
        ranked_run = self._rank(run)
        unknown = (
            set(run.queries.filter(pa.array(ranked_run.unknown)).to_pylist()) if ranked_run.unknown.any() else set()
        )
        if (self.covered & ranked_run.in_run).any() or not self.unknown.isdisjoint(unknown):
            raise NotGrouped(f"run {run.name}: a query's lines are not together")
        for rows, ranked in ranked_run.blocks(rest=False):  # one block of queries at a time: bounded memory
            self._take(rows, ranked)
        self.covered |= ranked_run.in_run
        self.unknown |= unknown
        c, mine = self.counts, ranked_run.counts
        self.counts = RunCounts(
            c.lines + mine.lines, c.duplicates + mine.duplicates, len(self.unknown), 0, c.all_ties + mine.all_ties
        )

    def result(self, name: str) -> RunScores:
        """The run's scores: the judged queries no segment named score as empty rankings (``missing="zero"``) or
        are left out (``"skip"``), as do those a segment named without lines (a JSONL query without results)."""
        empty = Run(
            name, pa.array([], pa.string()), np.zeros(0, np.int32), pa.chunked_array([], pa.string()), np.zeros(0), 0
        )
        for rows, ranked in self._rank(empty).empty(np.flatnonzero(~self.scored)):
            self._take(rows, ranked)
        n = len(self.covered)
        counts = replace(self.counts, missing_queries=int(n - self.covered.sum()))
        evaluated = np.ones(n, dtype=bool) if self.missing == "zero" else self.covered.copy()
        values = self.values
        if self.missing == "skip":
            values = {name: np.where(evaluated, column, np.nan) for name, column in values.items()}
        return RunScores(
            name, values, evaluated, self.answerable, counts, self.reached, self.unjudged, self.covered.copy()
        )


def score_run(
    qrels: Qrels,
    run: Run,
    measures: Sequence[MeasureDef],
    ties: str = "evalkit",
    missing: str = "zero",
    context: SpanContext | None = None,
    judged_ranks: bool = False,
    whole_rankings: bool = False,
    unjudged_k: int | None = None,
) -> RunScores:
    """Score ``run`` against ``qrels`` (see the module docstring); rows follow ``qrels.queries``.

    ``context`` gives the gold spans and chunk lengths the context measures read (a fixture's); without it they are
    refused. ``judged_ranks`` also records the rank each judged document reached within the depth the measures read
    (:attr:`RunScores.judged_rank`); ``whole_rankings`` reads every rank; ``unjudged_k`` counts each query's unjudged
    results in its first k (:attr:`RunScores.unjudged`). A run read a segment at a time goes through
    :class:`RunScorer` directly."""
    scorer = RunScorer(qrels, measures, ties, missing, context, judged_ranks, whole_rankings, unjudged_k)
    scorer.add(run)
    return scorer.result(run.name)


def unjudged_counts(ranked: Ranked, k: int) -> npt.NDArray[np.int64]:
    """Per query, how many of its first ``k`` (deduplicated) results the judgments do not speak for: absent from
    them, or judged with a negative grade (trec_eval's "pooled, not judged"). These are what a pool of depth ``k``
    asks to label."""
    unjudged = ~(ranked.judged & (ranked.grade >= 0)) & (ranked.rank <= k)
    return ranked.count(unjudged)


def score_rankings(
    rankings: Sequence[Sequence[str]],
    grades: Sequence[Mapping[str, int]],
    measures: Sequence[MeasureDef],
    summation: str = "exact",
    spans: Sequence[Mapping[str, int]] | None = None,
    chunk_lengths: Mapping[str, int] | None = None,
    context_k: int = 0,
) -> tuple[dict[str, FloatArray], npt.NDArray[np.bool_]]:
    """Rankings already in order (the fixture path), each with its grades (and gold-span characters by chunk)."""
    ranked = rank_lists(rankings, grades, summation, depth_of(measures, context_k), spans, chunk_lengths, context_k)
    return score_ranked(ranked, measures)


FIXTURE_MEASURES: Final = (*STANDARD_MEASURES, NO_ANSWER_FPR)
"""Every measure a fixture run reports: the standard ones on answerable queries, ``no_answer_fpr`` on the others."""

FIXTURE_COMPANIONS: Final = (*judged_share_measures(STANDARD_MEASURES), *condensed_forms(STANDARD_MEASURES))
"""What a fixture report carries beside its measures: ``judged@10`` and ``unj@10`` (the unjudged share shown beside
every score) and the condensed-list forms of the standard measures (which ``compare`` retests a drop on when the
head's top 10 holds more unjudged chunks than the base's)."""

FIXTURE_JUDGED_K: Final = judged_k(STANDARD_MEASURES)
"""The k of a fixture report's unjudged share and counts."""


def score_companions(
    queries: Sequence[Query], rankings: Sequence[Sequence[str]], summation: str = "exact"
) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """:data:`FIXTURE_COMPANIONS` for each query (answerable ones: the others have none), and each query's count of
    unjudged results in its first :data:`FIXTURE_JUDGED_K` (every query), by query ID."""
    grades = [{j.chunk_id: j.grade for j in query.judgments} for query in queries]
    ranked = rank_lists(rankings, grades, summation, depth_of(FIXTURE_COMPANIONS))
    values, answerable = score_ranked(ranked, FIXTURE_COMPANIONS)
    columns = {name: column.tolist() for name, column in values.items()}
    counts = unjudged_counts(ranked, FIXTURE_JUDGED_K).tolist()
    scored = {
        q.query_id: ({m.name: columns[m.name][row] for m in FIXTURE_COMPANIONS} if has_answer else {})
        for row, (q, has_answer) in enumerate(zip(queries, answerable.tolist(), strict=True))
    }
    return scored, {q.query_id: int(c) for q, c in zip(queries, counts, strict=True)}


def score_query(query: Query, ranking: Sequence[str], chunk_lengths: Mapping[str, int]) -> dict[str, float]:
    """One query's values by the reference functions: the standard measures when it is answerable (the context
    measures over its first :data:`~evalkit.measures.results.CONTEXT_K` results), ``no_answer_fpr``'s term if not."""
    grades = {j.chunk_id: j.grade for j in query.judgments}
    if not query.answerable:
        return {NO_ANSWER_FPR.name: reference_value(NO_ANSWER_FPR, QueryCase(ranking, grades))}
    spans = {j.chunk_id: [(s.start, s.end) for s in j.spans] for j in query.judgments}
    context = dedupe_ranking(ranking)[:CONTEXT_K]
    return {
        m.name: reference_value(m, QueryCase(context if m.spec.needs_spans else ranking, grades, chunk_lengths, spans))
        for m in STANDARD_MEASURES
    }


def score_queries(
    queries: Sequence[Query],
    rankings: Sequence[Sequence[str]],
    chunk_lengths: Mapping[str, int],
    summation: str = "exact",
) -> dict[str, dict[str, float]]:
    """:func:`score_query` for many queries at once, through the kernels (the same values, one pass).

    ``summation`` is how nDCG adds its terms (``exact``, as the reference; ``sequential`` as trec_eval does).
    """
    grades = [{j.chunk_id: j.grade for j in query.judgments} for query in queries]
    spans = [
        {j.chunk_id: sum(e - s for s, e in merge_intervals((s.start, s.end) for s in j.spans)) for j in query.judgments}
        for query in queries
    ]
    values, answerable = score_rankings(rankings, grades, FIXTURE_MEASURES, summation, spans, chunk_lengths, CONTEXT_K)
    columns = {name: column.tolist() for name, column in values.items()}
    scored: dict[str, dict[str, float]] = {}
    for row, (query, has_answer) in enumerate(zip(queries, answerable.tolist(), strict=True)):
        if has_answer:
            scored[query.query_id] = {m.name: columns[m.name][row] for m in STANDARD_MEASURES}
        else:
            scored[query.query_id] = {NO_ANSWER_FPR.name: columns[NO_ANSWER_FPR.name][row]}
    return scored
