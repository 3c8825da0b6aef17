"""The privacy-safe evaluation report: IDs, hashes and numbers, never text.

A report names the fixture by ID and version and identifies the corpus, the evaluation definition and the
provider definitions by SHA-256 only. It never contains query text, titles, chunk text, snippets, paths,
endpoints, provider fingerprints, model names, credentials, metadata or vectors. ``schema_version`` is checked on
load: a report of another version is refused with a message saying how to regenerate it.

Version 2 adds what a comparison of two reports needs: the per-query values of every ablation (one column per
measure aligned with ``queries``, see :mod:`evalkit.reporting.per_query`), a 95% bootstrap interval beside every
aggregate, the statistics settings (seed included), and ``judgments_sha256``, the hash of the queries and their
judgments alone, which must match for two reports to be compared.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, model_validator

from evalkit.ablations import AblationId
from evalkit.data.schema import SLICES, Identifier, Language, PositiveInt, Sha256, Slice, StrictModel, model_json
from evalkit.evaluation import CONTEXT_K, FAILURE_CUTOFF, Evaluation, judgments_sha256
from evalkit.measures.metrics import METRICS_VERSION, LatencySummary
from evalkit.measures.statistics import DEFAULT_STATISTICS, StatisticsSettings
from evalkit.measures.ties import DEFAULT_TIE_POLICY, TiePolicyName
from evalkit.output import write_atomic
from evalkit.reporting.per_query import (
    Interval,
    PerQueryColumns,
    QueryIndex,
    aggregate_intervals,
    check_columns,
    per_query_columns,
    query_index,
)
from evalkit.retrieval.service import RetrievalSettings

SCHEMA_VERSION: Literal[2] = 2

STANDARD_DEFINITIONS: dict[str, str] = {
    "recall@1": "recall(cutoff=1)",
    "recall@5": "recall(cutoff=5)",
    "recall@10": "recall(cutoff=10)",
    "mrr@10": "mrr(cutoff=10)",
    "ndcg@10": "ndcg(cutoff=10, gain=exponential)",
    "context_precision": "context_precision()",
    "context_recall": "context_recall()",
    "no_answer_fpr": "no_answer_fpr()",
}
"""The definitions of the measures every fixture run reports (see :mod:`evalkit.measures.registry`)."""

MetricTable = dict[str, Annotated[float, Field(ge=0.0, le=1.0)]]


class ReportFailure(StrictModel):
    """An ID-only failure."""

    query_id: Identifier
    language: Language
    kind: Literal["relevant_not_retrieved", "no_answer_returned_results"]
    chunk_id: Identifier | None
    grade: int | None
    rank: int | None
    returned: int = Field(ge=0, description="results the query returned")
    message: str = Field(description="one line naming query and chunk by ID")


class QueryCounts(StrictModel):
    """How many queries a slice holds."""

    answerable: int = Field(ge=0)
    no_answer: int = Field(ge=0)


class ReportQueryError(StrictModel):
    """A query an external system failed to answer (scored as an empty ranking): kind, status, attempts."""

    query_id: Identifier
    kind: Literal["timeout", "connection_error", "http_error", "malformed_response"]
    status: int | None = Field(description="HTTP status, when there was one")
    attempts: int = Field(ge=1, description="requests made, retries included")


class SystemReport(StrictModel):
    """Provenance of an external system: its kind, the SHA-256 of its definition, counts. No URL, header or body."""

    kind: Literal["python", "http", "run-file"]
    sha256: Sha256 | None = Field(description="hash of the run file's bytes or of the HTTP configuration")
    counts: dict[str, int] = Field(description="e.g. run-file lines, missing queries, unknown chunks, duplicates")


class AblationReport(StrictModel):
    """Aggregates of one ablation: overall and per language, latency and failures."""

    mode: str
    metrics: dict[Slice, MetricTable] = Field(description="macro averages per slice, keyed by measure text")
    query_counts: dict[Slice, QueryCounts]
    latency_ms: LatencySummary
    failures: tuple[ReportFailure, ...]
    system: SystemReport | None = Field(default=None, description="external systems only")
    query_errors: tuple[ReportQueryError, ...] = Field(default=(), description="queries the system failed")
    intervals: dict[Slice, dict[str, Interval]] = Field(
        default_factory=dict, description="bootstrap confidence interval (low, high) of each aggregate in metrics"
    )
    per_query: PerQueryColumns = Field(
        default_factory=dict, description="measure -> one value per query of Report.queries (None: not defined)"
    )


class GateOutcome(StrictModel):
    """One gate: the value measured, the bound and whether it held."""

    gate: str
    value: float | None
    threshold: float
    comparison: Literal[">=", "<="]
    passed: bool
    detail: str = ""


class Report(StrictModel):
    """The JSON report of one evaluation."""

    schema_version: Literal[2] = SCHEMA_VERSION
    fixture_id: Identifier
    fixture_version: str
    corpus_sha256: Sha256 | None = Field(description="hash of the corpus; None when only qrels and runs were scored")
    evaluation_definition_hash: Sha256
    provider_definitions_hash: Sha256 | None = Field(description="hash of the embedding providers; None: none ran")
    deterministic_projection_sha256: Sha256
    metrics_version: str = METRICS_VERSION
    runs: PositiveInt
    retrieval_settings: RetrievalSettings | None = Field(
        description="the retrieval settings that ran (numbers and names); None when no built-in system ran"
    )
    context_k: PositiveInt = CONTEXT_K
    failure_cutoff: PositiveInt = FAILURE_CUTOFF
    tie_policy: TiePolicyName = Field(default=DEFAULT_TIE_POLICY, description="how equal scores were ordered")
    ablations: dict[AblationId | Identifier, AblationReport]
    gates: tuple[GateOutcome, ...] = ()
    judgments_sha256: Sha256 | None = Field(default=None, description="hash of the queries and judgments alone")
    statistics: StatisticsSettings = Field(default=DEFAULT_STATISTICS, description="how intervals were computed")
    queries: QueryIndex = Field(default_factory=QueryIndex, description="the row index of every per-query column")
    measures: dict[str, str] = Field(
        default_factory=dict,
        description="measure name -> its definition with every parameter (empty: the standard measures)",
    )
    missing_queries: Literal["zero", "skip"] = Field(
        default="zero", description="judged queries a run does not name: scored 0 (zero) or left out (skip)"
    )

    def measure_definitions(self) -> dict[str, str]:
        """Every measure's definition; a report written before definitions were recorded holds the standard ones."""
        return dict(self.measures) or dict(STANDARD_DEFINITIONS)

    @model_validator(mode="after")
    def _per_query_matches_queries(self) -> Report:
        for ablation_id, ablation in self.ablations.items():
            check_columns(self.queries, ablation_id, ablation.per_query)
        return self


class ReportVersionError(ValueError):
    """A report of an unsupported schema version."""


def build_report(evaluation: Evaluation, gates: tuple[GateOutcome, ...] = ()) -> Report:
    """Project an evaluation onto the report schema (IDs and numbers only)."""
    queries = evaluation.fixture.queries
    counts: dict[Slice, QueryCounts] = {}
    for name in SLICES:
        members = [q for q in queries if name == "all" or q.language == name]
        answerable = sum(1 for q in members if q.answerable)
        counts[name] = QueryCounts(answerable=answerable, no_answer=len(members) - answerable)
    index = query_index(queries)
    per_query = {ablation_id: result.per_query for ablation_id, result in evaluation.ablations.items()}
    intervals = aggregate_intervals(index, per_query, DEFAULT_STATISTICS)
    ablations = {
        ablation_id: AblationReport(
            mode=result.ablation.mode,
            metrics={name: dict(row) for name, row in result.aggregates.items()},  # type: ignore[misc]
            query_counts=counts,
            latency_ms=result.latency,
            failures=tuple(
                ReportFailure(
                    query_id=f.query_id,
                    language=f.language,
                    kind=f.kind,
                    chunk_id=f.chunk_id,
                    grade=f.grade,
                    rank=f.rank,
                    returned=f.returned,
                    message=f.describe(),
                )
                for f in result.failures
            ),
            system=_system_report(evaluation, ablation_id),
            query_errors=tuple(
                ReportQueryError(
                    query_id=r.query_id, kind=r.error.kind, status=r.error.status, attempts=r.error.attempts
                )
                for r in result.results
                if r.error is not None
            ),
            intervals=intervals[ablation_id],
            per_query=per_query_columns(index, result.per_query),
        )
        for ablation_id, result in evaluation.ablations.items()
    }
    return Report(
        fixture_id=evaluation.fixture.fixture_id,
        fixture_version=evaluation.fixture.fixture_version,
        corpus_sha256=evaluation.corpus_sha256,
        evaluation_definition_hash=evaluation.evaluation_definition_hash,
        provider_definitions_hash=evaluation.provider_definitions_hash,
        deterministic_projection_sha256=evaluation.projection_sha256,
        runs=evaluation.runs,
        retrieval_settings=evaluation.settings,
        tie_policy=evaluation.tie_policy,  # type: ignore[arg-type]
        ablations=ablations,
        gates=gates,
        judgments_sha256=judgments_sha256(evaluation.fixture),
        statistics=DEFAULT_STATISTICS,
        queries=index,
        measures=dict(STANDARD_DEFINITIONS),
    )


def _system_report(evaluation: Evaluation, ablation_id: str) -> SystemReport | None:
    provenance = evaluation.systems.get(ablation_id)
    if provenance is None:
        return None
    return SystemReport(kind=provenance.kind, sha256=provenance.sha256, counts=dict(provenance.counts))


_SCALAR = r'(?:-?[0-9][0-9.eE+-]*|null|true|false|"[A-Za-z0-9._:-]*")'
_FLAT_ARRAY = re.compile(rf"\[\s+({_SCALAR}(?:,\s+{_SCALAR})*)\s+\]")


def report_json(report: Report) -> bytes:
    """Serialize with sorted keys and a trailing newline (stable bytes for the deterministic part).

    Arrays of numbers and IDs (per-query columns, intervals, the query index) are written on one line each, so
    a report's size grows by a few bytes per value rather than a line per value.
    """
    text = model_json(report).decode("utf-8")
    return _FLAT_ARRAY.sub(lambda match: "[" + re.sub(r",\s+", ",", match.group(1)) + "]", text).encode("utf-8")


def write_report(report: Report, path: Path | None) -> Path | None:
    """Write the report atomically to an already-resolved path; do nothing when path is None."""
    if path is not None:
        write_atomic(path, report_json(report))
    return path


def parse_report(text: str | bytes) -> Report:
    """Load a report, refusing other schema versions with a clear message."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"report is not JSON: {exc}") from None
    version = raw.get("schema_version") if isinstance(raw, dict) else None
    if version != SCHEMA_VERSION:
        raise ReportVersionError(
            f"report schema_version {version!r} is not supported (this evalkit reads {SCHEMA_VERSION}); "
            "regenerate the report with `evalkit run --output PATH`"
        )
    try:
        return Report.model_validate_json(text)
    except ValidationError as exc:
        raise ValueError(f"invalid report: {exc}") from None
