"""The one report builder: whatever door a run came in by, its per-query values become a report here.

Every front door ends in :func:`build_report`. A fixture evaluation (``evalkit run``, the notebooks, Ray,
calibration) is handed over by :func:`evaluation_source`; precomputed runs scored against judgments (``evalkit
score``, :func:`evalkit.score`) by :meth:`evalkit.runs.precomputed.ScoreResult.report_source`. Both give a
:class:`ReportSource`: the query index, each system's per-query values and provenance, and what identifies the
evaluation. From it this module alone derives the query counts, the aggregates (means over the queries of each slice
a measure is defined on), the bootstrap intervals, the rounded per-query columns and the judgments hash.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

import numpy as np

from evalkit.data.judgments import fixture_judgments, judgments_sha256
from evalkit.data.schema import SLICES, Slice
from evalkit.data.settings import RetrievalSettings, VectorIndexRecord
from evalkit.measures.core import FIXTURE_COMPANIONS, FIXTURE_JUDGED_K, score_companions
from evalkit.measures.metrics import LatencySummary
from evalkit.measures.results import QueryResult, ScoredEvaluation
from evalkit.measures.statistics import DEFAULT_STATISTICS, FloatArray, StatisticsSettings
from evalkit.measures.ties import DEFAULT_TIE_POLICY, SUMMATION_OF, order_ranking
from evalkit.reporting.calibration_record import CalibrationRecord
from evalkit.reporting.per_query import (
    QueryIndex,
    column_intervals,
    every_query_measures,
    query_index,
    rounded_column,
    value_columns,
)
from evalkit.reporting.report import (
    STANDARD_DEFINITIONS,
    AblationReport,
    GateOutcome,
    QueryCounts,
    Report,
    ReportFailure,
    ReportQueryError,
    SystemReport,
    UnjudgedCounts,
)

__all__ = ["NOT_MEASURED", "ReportSource", "ReportedEvaluation", "SystemScores", "build_report", "evaluation_source"]

NOT_MEASURED = LatencySummary(count=0, min_ms=0.0, median_ms=0.0, p95_ms=0.0, max_ms=0.0, mean_ms=0.0)
"""The latency of a system nothing was timed for (a precomputed run): count 0."""


@dataclass(frozen=True)
class SystemScores:
    """One system as the builder takes it: per-query values and what the report says of how it ran."""

    mode: str
    per_query: Mapping[str, Mapping[str, float]]
    """Query ID -> measure -> value, unrounded (a measure absent for a query: not defined there)."""
    latency: LatencySummary = NOT_MEASURED
    failures: tuple[ReportFailure, ...] = ()
    system: SystemReport | None = None
    query_errors: tuple[ReportQueryError, ...] = ()
    unjudged: Mapping[str, int] | None = None
    """Query ID -> unjudged results in its first :attr:`ReportSource.unjudged_k` (None: not counted)."""


@dataclass(frozen=True)
class ReportSource:
    """Everything a report is built from, whichever front door made it."""

    fixture_id: str
    fixture_version: str
    corpus_sha256: str | None
    evaluation_definition_hash: str
    provider_definitions_hash: str | None
    projection_sha256: str
    index: QueryIndex
    judgments_sha256: str
    measures: Mapping[str, str]
    """Measure name -> definition, in the order the report lists them."""
    systems: Mapping[str, SystemScores]
    runs: int = 1
    settings: RetrievalSettings | None = None
    ties: str = DEFAULT_TIE_POLICY
    missing: str = "zero"
    statistics: StatisticsSettings = DEFAULT_STATISTICS
    calibration: CalibrationRecord | None = None
    notes: tuple[str, ...] = field(default=())
    """What the front door prints beside the summary (counts that shape the numbers); never in the report."""
    unjudged_k: int | None = None
    """The depth each system's unjudged results were counted to (:attr:`SystemScores.unjudged`)."""
    pooled: frozenset[str] = frozenset()
    """The queries whose judgments hold a chunk judged not relevant (grade 0): where the holes check can look."""
    companions: tuple[str, ...] = ()
    """Measures of :attr:`measures` carried for ``compare``'s check of label holes, not shown in the summary."""
    vector_indexes: Mapping[str, VectorIndexRecord] | None = None
    """Provider ID -> the vector index it used and its measured recall (None: exact search on a small corpus)."""


def mean_of(values: Sequence[float], ties: str) -> float:
    """The mean of `values` (in query-ID order): summed exactly (``math.fsum``), or under the ``trec_eval`` tie
    policy one by one in that order, as trec_eval sums them, so that its printed four decimals agree with trec_eval's
    (0.00475 exactly is 0.0047; trec_eval's running sum gives 0.004750000000000001, 0.0048)."""
    if ties == "trec_eval":
        return float(np.cumsum(np.asarray(values, dtype=np.float64))[-1]) / len(values)
    return math.fsum(values) / len(values)


def _aggregates(
    index: QueryIndex, columns: Mapping[str, FloatArray], measures: Sequence[str], ties: str
) -> dict[Slice, dict[str, float]]:
    """Each slice's mean of each measure over the slice's queries it is defined on; a slice or measure with no such
    query has no aggregate."""
    table: dict[Slice, dict[str, float]] = {}
    for slice_name in SLICES:
        rows = np.array(index.members(slice_name, None), dtype=np.int64)
        if slice_name != "all" and not rows.size:
            continue
        row: dict[str, float] = {}
        for measure in measures:
            values = columns[measure][rows]
            values = values[~np.isnan(values)]
            if values.size:
                row[measure] = mean_of(values.tolist(), ties)
        table[slice_name] = row
    return table


def _query_counts(index: QueryIndex) -> dict[Slice, QueryCounts]:
    return {
        s: QueryCounts(answerable=len(index.members(s, True)), no_answer=len(index.members(s, False))) for s in SLICES
    }


def build_report(source: ReportSource | ReportedEvaluation, gates: tuple[GateOutcome, ...] = ()) -> Report:
    """The report of `source` (IDs, hashes and numbers only), with `gates` as assessed; a fixture evaluation is
    taken through :func:`evaluation_source`."""
    if not isinstance(source, ReportSource):
        source = evaluation_source(source)
    index, names = source.index, list(source.measures)
    values = {system_id: value_columns(index, scores.per_query, names) for system_id, scores in source.systems.items()}
    every = every_query_measures(source.measures)
    shown = [name for name in names if name not in source.companions]  # companions are read per query, not as means
    intervals = column_intervals(index, values, source.statistics, shown, every)
    counts = _query_counts(index)
    ablations = {
        system_id: AblationReport(
            mode=scores.mode,
            metrics=_aggregates(index, values[system_id], names, source.ties),
            query_counts=counts,
            latency_ms=scores.latency,
            failures=scores.failures,
            system=scores.system,
            query_errors=scores.query_errors,
            intervals=intervals[system_id],
            per_query={name: rounded_column(column) for name, column in values[system_id].items()},
            unjudged=_unjudged(index, scores, source.unjudged_k, source.pooled),
        )
        for system_id, scores in source.systems.items()
    }
    return Report(
        fixture_id=source.fixture_id,
        fixture_version=source.fixture_version,
        corpus_sha256=source.corpus_sha256,
        evaluation_definition_hash=source.evaluation_definition_hash,
        provider_definitions_hash=source.provider_definitions_hash,
        deterministic_projection_sha256=source.projection_sha256,
        runs=source.runs,
        retrieval_settings=source.settings,
        tie_policy=source.ties,  # type: ignore[arg-type]
        ablations=ablations,
        gates=gates,
        judgments_sha256=source.judgments_sha256,
        statistics=source.statistics,
        queries=index,
        measures=dict(source.measures),
        missing_queries=source.missing,  # type: ignore[arg-type]
        calibration=source.calibration,
        companions=source.companions,
        vector_indexes=dict(source.vector_indexes) if source.vector_indexes else None,
    )


def _unjudged(index: QueryIndex, scores: SystemScores, k: int | None, pooled: frozenset[str]) -> UnjudgedCounts | None:
    """The system's unjudged counts aligned with the query index (None: not counted)."""
    if scores.unjudged is None or k is None:
        return None
    counts = scores.unjudged
    return UnjudgedCounts(
        k=k,
        per_query=tuple(counts.get(query_id) for query_id in index.query_ids),
        pooled=tuple(query_id in pooled for query_id in index.query_ids),
    )


class ReportedEvaluation(ScoredEvaluation, Protocol):
    """What a fixture evaluation's report is built from: the scored evaluation
    (:class:`evalkit.runs.evaluation.Evaluation`), with the retrieval settings that ran and the calibration record."""

    @property
    def settings(self) -> RetrievalSettings:
        """The retrieval settings that ran."""
        ...

    @property
    def calibration(self) -> CalibrationRecord | None:
        """What was chosen on the calibration part (None: not calibrated)."""
        ...

    @property
    def vector_indexes(self) -> Mapping[str, VectorIndexRecord]:
        """Provider ID -> the vector index its searches used and its measured recall@10."""
        ...


def evaluation_source(evaluation: ReportedEvaluation) -> ReportSource:
    """A fixture evaluation as the builder takes it: the standard measures over the fixture's queries, with
    ``judged@10``, ``unj@10``, each query's unjudged results in its top 10 and the condensed-list forms
    (:data:`~evalkit.measures.core.FIXTURE_COMPANIONS`) beside them."""
    companions = {
        ablation_id: _companions(evaluation, result.results) for ablation_id, result in evaluation.ablations.items()
    }
    systems = {
        ablation_id: SystemScores(
            mode=result.ablation.mode,
            per_query={q: {**v, **companions[ablation_id][0].get(q, {})} for q, v in result.per_query.items()},
            unjudged=companions[ablation_id][1],
            latency=result.latency,
            failures=tuple(ReportFailure(**asdict(f), message=f.describe()) for f in result.failures),
            system=_system_report(evaluation, ablation_id),
            query_errors=tuple(
                ReportQueryError(
                    query_id=r.query_id, kind=r.error.kind, status=r.error.status, attempts=r.error.attempts
                )
                for r in result.results
                if r.error is not None
            ),
        )
        for ablation_id, result in evaluation.ablations.items()
    }
    return ReportSource(
        fixture_id=evaluation.fixture.fixture_id,
        fixture_version=evaluation.fixture.fixture_version,
        corpus_sha256=evaluation.corpus_sha256,
        evaluation_definition_hash=evaluation.evaluation_definition_hash,
        provider_definitions_hash=evaluation.provider_definitions_hash,
        projection_sha256=evaluation.projection_sha256,
        index=query_index(evaluation.fixture.queries),
        judgments_sha256=judgments_sha256(fixture_judgments(evaluation.fixture)),
        measures={**STANDARD_DEFINITIONS, **{m.name: m.definition for m in FIXTURE_COMPANIONS}},
        systems=systems,
        runs=evaluation.runs,
        settings=evaluation.settings,
        ties=evaluation.tie_policy,
        calibration=evaluation.calibration,
        unjudged_k=FIXTURE_JUDGED_K,
        pooled=frozenset(q.query_id for q in evaluation.fixture.queries if any(j.grade == 0 for j in q.judgments)),
        companions=tuple(m.name for m in FIXTURE_COMPANIONS if m.spec.condensed),
        vector_indexes={
            pid: record
            for pid, record in evaluation.vector_indexes.items()
            if record.index != "exact" or record.chosen_by != "small-corpus"
        },
    )


def _companions(
    evaluation: ReportedEvaluation, results: Sequence[QueryResult]
) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """One system's companion values and unjudged counts (:func:`~evalkit.measures.core.score_companions`), its
    rankings ordered as they were scored."""
    queries = {q.query_id: q for q in evaluation.fixture.queries}
    ties = evaluation.tie_policy
    ranked = [order_ranking(tuple(zip(r.chunk_ids, r.scores, strict=True)), ties) for r in results]
    return score_companions([queries[r.query_id] for r in results], ranked, SUMMATION_OF[ties])


def _system_report(evaluation: ScoredEvaluation, system_id: str) -> SystemReport | None:
    provenance = evaluation.systems.get(system_id)
    if provenance is None:
        return None
    return SystemReport(kind=provenance.kind, sha256=provenance.sha256, counts=dict(provenance.counts))
