"""The privacy-safe evaluation report: IDs, hashes and numbers, never text.

A report names the fixture by ID and version and identifies the corpus, the evaluation definition and the
provider definitions by SHA-256 only. It never contains query text, titles, chunk text, snippets, paths,
endpoints, provider fingerprints, model names, credentials, metadata or vectors. ``schema_version`` is checked on
load: a report of another version is refused with a message saying how to regenerate it.

Version 2 adds what a comparison of two reports needs: the per-query values of every ablation (one column per
measure aligned with ``queries``, see :mod:`evalkit.reporting.per_query`), a 95% bootstrap interval beside every
aggregate, the statistics settings (seed included), and ``judgments_sha256``, the hash of the queries and their
judgments alone, which must match for two reports to be compared.

A report is data from outside when it is read back, so every :class:`Report` is checked as it is built or parsed
(:func:`check_report_integrity`): each number is one evalkit could have written (finite, in its measure's range,
each aggregate the mean of its per-query column, query counts those of the query index), and no text holds a
control or bidirectional character, since report text is printed to a terminal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import numpy as np
from pydantic import AfterValidator, Field, ValidationError, model_validator

from evalkit.common.output import write_atomic
from evalkit.data.inputs import clip, loads_strict, shorten
from evalkit.data.schema import (
    SLICES,
    AblationId,
    Identifier,
    Language,
    PositiveInt,
    QueryFailureKind,
    Sha256,
    Slice,
    StrictModel,
    absent,
    character_problem,
    describe_validation_error,
    refusing,
)
from evalkit.data.settings import RetrievalSettings, VectorIndexRecord
from evalkit.measures.metrics import METRICS_VERSION, LatencySummary
from evalkit.measures.registry import NO_ANSWER_FPR, STANDARD_MEASURES, parse_measure
from evalkit.measures.results import CONTEXT_K, FAILURE_CUTOFF
from evalkit.measures.statistics import DEFAULT_STATISTICS, StatisticsSettings
from evalkit.measures.ties import DEFAULT_TIE_POLICY, TiePolicyName
from evalkit.reporting.calibration_record import CalibrationRecord
from evalkit.reporting.json_layout import indented_json
from evalkit.reporting.per_query import (
    PER_QUERY_DECIMALS,
    Interval,
    PerQueryColumns,
    QueryIndex,
    check_columns,
    every_query_measures,
    shared_values,
)

SCHEMA_VERSION: Literal[2] = 2
REGENERATE: Final = (
    "regenerate it with the command that made it (`evalkit run --output PATH` or `evalkit score ... --output PATH`)"
)
"""How to make a report this evalkit reads, for messages refusing one."""

STANDARD_DEFINITIONS: dict[str, str] = {
    str(m): parse_measure(str(m)).definition for m in (*STANDARD_MEASURES, NO_ANSWER_FPR)
}
"""The definitions of the measures every fixture run reports (see :mod:`evalkit.measures.registry`)."""

_UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069]")
"""Control characters (tab and line feed included: a report's text is printed on one line), the Unicode line and
paragraph separators, and the bidirectional controls that make displayed text differ from the stored text."""


def _display_problem(value: str) -> str | None:
    """Name the first character of `value` a terminal must not receive (by code point and position), or None."""
    return character_problem(value, _UNSAFE_TEXT, "control or bidirectional character")


ReportText = Annotated[str, AfterValidator(refusing(_display_problem, "report text must be printable"))]
"""Free text of a report (versions, measure names and definitions, messages): no control or bidirectional
characters, since it is printed to a terminal."""
MetricTable = dict[ReportText, Annotated[float, Field(ge=0.0, le=1.0)]]


class ReportFailure(StrictModel):
    """An ID-only failure: a :class:`~evalkit.measures.results.Failure` and its message."""

    query_id: Identifier
    language: Language
    kind: Literal["relevant_not_retrieved", "no_answer_returned_results"]
    chunk_id: Identifier | None
    grade: int | None
    rank: int | None
    returned: int = Field(ge=0, description="results the query returned")
    message: ReportText = Field(description="one line naming query and chunk by ID")


class QueryCounts(StrictModel):
    """How many queries a slice holds."""

    answerable: int = Field(ge=0)
    no_answer: int = Field(ge=0)


class ReportQueryError(StrictModel):
    """A query an external system failed to answer (scored as an empty ranking): kind, status, attempts."""

    query_id: Identifier
    kind: QueryFailureKind = Field(
        description="retriever_error: a Python retriever's own failure (QueryFailed with a message)"
    )
    status: int | None = Field(description="HTTP status, when there was one")
    attempts: int = Field(ge=1, description="requests made, retries included")


class SystemReport(StrictModel):
    """Provenance of an external system: its kind, the SHA-256 of its definition, counts. No URL, header or body."""

    kind: Literal["python", "http", "run-file"]
    sha256: Sha256 | None = Field(description="hash of the run file's bytes or of the HTTP configuration")
    counts: dict[ReportText, Annotated[int, Field(ge=0)]] = Field(
        description="e.g. run-file lines, missing queries, unknown chunks, duplicates"
    )
    abstention_floor: Annotated[float, Field(allow_inf_nan=False)] | None = Field(
        default=None,
        exclude_if=absent,
        description="the floor applied to the run's scores (a query whose best score is below it returned nothing); "
        "absent when none was",
    )


class UnjudgedCounts(StrictModel):
    """How many of each query's first k results the judgments do not speak for (absent from them, or a negative
    grade): what a pool of depth k (``evalkit pool``) asks to label. The share of them is the ``judged@k`` and
    ``unj@k`` measures beside it."""

    k: PositiveInt = Field(description="the depth counted: the largest cutoff of the measures reported")
    per_query: tuple[Annotated[int, Field(ge=0)] | None, ...] = Field(
        description="one count per query of Report.queries (None: the query was not evaluated)"
    )
    pooled: tuple[bool, ...] = Field(
        default=(),
        description="per query of Report.queries, whether its judgments hold a chunk judged not relevant (grade 0): "
        "only there can an unjudged chunk be told from a miss (judgments of relevant chunks alone leave every other "
        "chunk unjudged by design); empty: every query",
    )

    @property
    def pooled_queries(self) -> tuple[bool, ...]:
        """:attr:`pooled`, or every query when the report records none (written before reports did)."""
        return self.pooled or (True,) * len(self.per_query)


class AblationReport(StrictModel):
    """Aggregates of one ablation: overall and per language, latency and failures."""

    mode: ReportText
    metrics: dict[Slice, MetricTable] = Field(description="macro averages per slice, keyed by measure text")
    query_counts: dict[Slice, QueryCounts]
    latency_ms: LatencySummary
    failures: tuple[ReportFailure, ...]
    system: SystemReport | None = Field(default=None, description="external systems only")
    query_errors: tuple[ReportQueryError, ...] = Field(default=(), description="queries the system failed")
    intervals: dict[Slice, dict[ReportText, Interval]] = Field(
        default_factory=dict, description="bootstrap confidence interval (low, high) of each aggregate in metrics"
    )
    per_query: dict[ReportText, Annotated[tuple[float | None, ...], AfterValidator(shared_values)]] = Field(
        default_factory=dict, description="measure -> one value per query of Report.queries (None: not defined)"
    )
    unjudged: UnjudgedCounts | None = Field(
        default=None, exclude_if=absent, description="unjudged results in each query's top k; absent in old reports"
    )


class GateOutcome(StrictModel):
    """One gate: the value measured, the bound and whether it held."""

    gate: ReportText
    value: float | None
    threshold: float
    comparison: Literal[">=", "<="]
    passed: bool
    detail: ReportText = ""


class Report(StrictModel):
    """The JSON report of one evaluation."""

    schema_version: Literal[2] = SCHEMA_VERSION
    fixture_id: Identifier
    fixture_version: ReportText
    corpus_sha256: Sha256 | None = Field(description="hash of the corpus; None when only qrels and runs were scored")
    evaluation_definition_hash: Sha256
    provider_definitions_hash: Sha256 | None = Field(description="hash of the embedding providers; None: none ran")
    deterministic_projection_sha256: Sha256
    metrics_version: ReportText = METRICS_VERSION
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
    measures: dict[ReportText, ReportText] = Field(
        default_factory=dict,
        description="measure name -> its definition with every parameter (empty: the standard measures)",
    )
    missing_queries: Literal["zero", "skip"] = Field(
        default="zero", description="judged queries a run does not name: scored 0 (zero) or left out (skip)"
    )
    calibration: CalibrationRecord | None = Field(
        default=None,
        exclude_if=absent,
        description="the calibration split and what was chosen on it; absent when every query was evaluated",
    )
    vector_indexes: dict[Identifier, VectorIndexRecord] | None = Field(
        default=None,
        exclude_if=absent,
        description="provider ID -> the vector index its searches used and, for an approximate one, its recall@10 "
        "against exact search; absent when every provider used exact search on a small corpus",
    )
    companions: tuple[ReportText, ...] = Field(
        default=(),
        exclude_if=lambda value: not value,
        description="measures carried for compare's check of label holes (condensed-list forms), not shown in the "
        "summary table",
    )

    def measure_definitions(self) -> dict[str, str]:
        """Every measure's definition; a report written before definitions were recorded holds the standard ones."""
        return dict(self.measures) or dict(STANDARD_DEFINITIONS)

    @model_validator(mode="after")
    def _per_query_matches_queries(self) -> Report:
        for ablation_id, ablation in self.ablations.items():
            check_columns(
                self.queries, ablation_id, ablation.per_query, every_query_measures(self.measure_definitions())
            )
        check_report_integrity(self)
        return self


class ReportVersionError(ValueError):
    """A report of an unsupported schema version."""


AGGREGATE_SLACK: Final = 0.5 * 10.0**-PER_QUERY_DECIMALS + 1e-9
"""How far an aggregate may lie from the mean of its per-query column. The aggregate is the mean of the unrounded
values while the column holds them rounded to ``PER_QUERY_DECIMALS`` places, each moved by at most half a unit in
the last place (and so their mean); ``1e-9`` more absorbs floating-point summation."""


def check_report_integrity(report: Report) -> None:
    """Refuse numbers evalkit could not have written, before anything computes with them.

    Every measure value (aggregate, interval end, per-query value) is finite and in [0, 1], as every evalkit
    measure is; latencies are finite and >= 0, gate values and bounds finite; every measure named is declared in
    ``measures``; each slice's query counts agree with the query index; and each aggregate is the mean of its
    per-query column over the slice's queries it is defined on, within :data:`AGGREGATE_SLACK`. A report without
    a query index (written before reports carried per-query values) has its aggregates checked by range only.

    Raises:
        ValueError: naming the ablation, the field and the value.
    """
    for position, gate in enumerate(report.gates):
        for name, value in (("value", gate.value), ("threshold", gate.threshold)):
            if value is not None and not math.isfinite(value):
                raise ValueError(f"gates[{position}] ({gate.gate}): {name} {value!r} is not a finite number")
    declared = report.measure_definitions()
    if len(set(report.companions)) != len(report.companions):
        raise ValueError("companions names a measure twice")
    for name in report.companions:
        if name not in declared:
            raise ValueError(f"companions names measure {shorten(name)}, which the report does not declare")
        if not name.startswith("condensed_"):
            raise ValueError(f"companions names measure {shorten(name)}, which is not a condensed-list measure")
    index = report.queries
    counts = {s: (len(index.members(s, True)), len(index.members(s, False))) for s in SLICES}
    masks = {s: np.array([s in ("all", language) for language in index.languages], dtype=bool) for s in SLICES}
    for ablation_id, ablation in report.ablations.items():
        where = f"ablation {ablation_id}"
        _check_latency(where, ablation.latency_ms)
        _check_declared(where, ablation, declared)
        _check_intervals(where, ablation.intervals)
        columns = _per_query_arrays(where, index, ablation.per_query)
        _check_unjudged(where, index, ablation.unjudged)
        if index.query_ids:
            _check_query_counts(where, ablation.query_counts, counts)
            _check_aggregates(where, ablation.metrics, columns, masks)


def _check_unjudged(where: str, index: QueryIndex, unjudged: UnjudgedCounts | None) -> None:
    if unjudged is None:
        return
    if len(unjudged.per_query) != len(index.query_ids):
        raise ValueError(
            f"{where}: unjudged.per_query has {len(unjudged.per_query)} values for {len(index.query_ids)} queries"
        )
    if unjudged.pooled and len(unjudged.pooled) != len(index.query_ids):
        raise ValueError(
            f"{where}: unjudged.pooled has {len(unjudged.pooled)} values for {len(index.query_ids)} queries"
        )
    for query_id, count in zip(index.query_ids, unjudged.per_query, strict=True):
        if count is not None and count > unjudged.k:
            raise ValueError(f"{where}: unjudged.per_query value {count} for query {query_id} exceeds k {unjudged.k}")


def _check_latency(where: str, latency: LatencySummary) -> None:
    for name, value in latency.model_dump().items():
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{where}: latency_ms.{name} {value!r} is not a finite number >= 0")


def _check_declared(where: str, ablation: AblationReport, declared: Mapping[str, str]) -> None:
    named = [("per_query", m) for m in ablation.per_query]
    named += [(f"metrics[{s}]", m) for s, row in ablation.metrics.items() for m in row]
    named += [(f"intervals[{s}]", m) for s, row in ablation.intervals.items() for m in row]
    for field, measure in named:
        if measure not in declared:
            raise ValueError(f"{where}: {field} names measure {shorten(measure)}, which the report does not declare")


def _check_intervals(where: str, intervals: Mapping[Slice, Mapping[str, Interval]]) -> None:
    for slice_name, row in intervals.items():
        for measure, (low, high) in row.items():
            if not 0.0 <= low <= high <= 1.0:  # NaN fails too
                raise ValueError(
                    f"{where}: intervals[{slice_name}][{measure!r}] ({low!r}, {high!r}) is not an interval in [0, 1]"
                )


def _per_query_arrays(where: str, index: QueryIndex, columns: PerQueryColumns) -> dict[str, np.ndarray]:
    """Each column as a float array (None as NaN), once every value is checked to be in [0, 1]."""
    arrays = {}
    for measure, column in columns.items():
        array = np.array(column, dtype=np.float64)  # None as NaN
        outside = np.flatnonzero(~((array >= 0.0) & (array <= 1.0)))  # NaN is outside too
        for row in outside.tolist():
            value = column[row]
            if value is not None:
                raise ValueError(
                    f"{where}: per_query[{measure!r}] value {value!r} for query {index.query_ids[row]} is not in [0, 1]"
                )
        arrays[measure] = array
    return arrays


def _check_query_counts(
    where: str, query_counts: Mapping[Slice, QueryCounts], expected: Mapping[Slice, tuple[int, int]]
) -> None:
    for slice_name, counts in query_counts.items():
        answerable, no_answer = expected[slice_name]
        if (counts.answerable, counts.no_answer) != (answerable, no_answer):
            raise ValueError(
                f"{where}: query_counts[{slice_name}] says {counts.answerable} answerable and {counts.no_answer} "
                f"no-answer queries; the report's queries hold {answerable} and {no_answer}"
            )


def _check_aggregates(
    where: str,
    metrics: Mapping[Slice, Mapping[str, float]],
    columns: Mapping[str, np.ndarray],
    masks: Mapping[Slice, np.ndarray],
) -> None:
    for slice_name, row in metrics.items():
        for measure, aggregate in row.items():
            field = f"metrics[{slice_name}][{measure!r}]"
            column = columns.get(measure)
            if column is None:
                raise ValueError(f"{where}: {field} has no per-query column (per_query[{measure!r}])")
            values = column[masks[slice_name] & ~np.isnan(column)].tolist()
            if not values:
                raise ValueError(f"{where}: {field} = {aggregate!r}, but no query of the slice has a per-query value")
            mean = math.fsum(values) / len(values)
            if abs(aggregate - mean) > AGGREGATE_SLACK:
                raise ValueError(
                    f"{where}: {field} = {aggregate!r} is not the mean of per_query[{measure!r}] over the slice's "
                    f"{len(values)} queries ({mean!r})"
                )


def report_json(report: Report) -> bytes:
    """Serialize with sorted keys, an indent of two and a trailing newline (stable bytes for the deterministic part).

    Arrays of numbers and IDs (per-query columns, intervals, the query index) are written on one line each, so
    a report's size grows by a few bytes per value rather than a line per value.
    """
    return (indented_json(report.model_dump(mode="json")) + "\n").encode("utf-8")


def write_report(report: Report, path: Path | None) -> Path | None:
    """Write the report atomically to an already-resolved path; do nothing when path is None."""
    if path is not None:
        write_atomic(path, report_json(report))
    return path


def parse_report(text: str | bytes) -> Report:
    """Load a report, refusing other schema versions with a clear message, and anything :class:`Report` and
    :func:`check_report_integrity` refuse.

    The JSON is decoded strictly first (no ``NaN``/``Infinity``, no duplicate keys), and every string in it, keys
    included, is checked for control and bidirectional characters before the schema sees it: schema errors quote
    keys as they are, and every message may reach a terminal.

    Raises:
        ReportVersionError: another ``schema_version``.
        ValueError: anything else, naming the field.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"report is not UTF-8 text (invalid byte at offset {exc.start})") from None
    try:
        raw = loads_strict(text, floats=False)  # checked here; the values are read by the model, from the text
    except ValueError as exc:
        raise ValueError(f"report is not JSON: {clip(str(exc), 400)}") from None
    version = raw.get("schema_version") if isinstance(raw, dict) else None
    if version != SCHEMA_VERSION:
        raise ReportVersionError(
            f"report schema_version {shorten(version)} is not supported (this evalkit reads {SCHEMA_VERSION}); "
            + REGENERATE
        )
    _check_strings(raw)
    del raw  # a million queries' decoded values: not held while the model is built from the text
    try:
        return Report.model_validate_json(text)
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc, "invalid report")) from None


def _check_strings(raw: Any) -> None:
    """Refuse a string (key or value) anywhere in decoded JSON that holds a control or bidirectional character."""
    stack: list[tuple[str, Any]] = [("", raw)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                problem = _display_problem(key)
                if problem is not None:
                    raise ValueError(f"report field {where or 'at the top level'}: key {shorten(key)} {problem}")
                stack.append((f"{where}.{key}" if where else key, value))
        elif isinstance(node, list) and not _NUMBERS.issuperset(map(type, node)):  # numbers: nothing to check
            if all(isinstance(item, str) for item in node) and _display_problem("".join(node)) is None:
                continue  # a column of clean IDs: one scan
            stack.extend((f"{where}[{position}]", item) for position, item in enumerate(node) if not _number(item))
        elif isinstance(node, str):
            problem = _display_problem(node)
            if problem is not None:
                raise ValueError(f"report field {where}: {shorten(node)} {problem}")


_NUMBERS: Final = frozenset({float, int, bool, type(None)})


def _number(item: Any) -> bool:
    return item is None or isinstance(item, (int, float))
