"""The scored outcome of running systems over a fixture's queries, as the report, tables, figures and TREC export
read it.

Every system evaluated (a built-in ablation, a user's retriever, an HTTP service, a run file) answers each query
with a :class:`QueryResult`; the scoring core (:mod:`evalkit.measures.core`) turns the rankings into per-query
values, :func:`evalkit.measures.metrics.aggregate` into means, and :func:`query_failures` into ID-only
:class:`Failure` records. :class:`ScoredSystem` and
:class:`ScoredEvaluation` declare what the layers above read of one scored system and of a whole evaluation;
:class:`evalkit.runs.evaluation.AblationResult` and :class:`evalkit.runs.evaluation.Evaluation` are those, with
what ran (the retrieval settings, each system's definition) beside them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from evalkit.data.fixture import Fixture, Query
from evalkit.data.schema import Language, QueryFailureKind
from evalkit.measures.metrics import LatencySummary
from evalkit.measures.ranked import dedupe_ranking

__all__ = [
    "CONTEXT_K",
    "FAILURE_CUTOFF",
    "FailedQuery",
    "Failure",
    "QueryFailureKind",
    "QueryResult",
    "ScoredEvaluation",
    "ScoredSystem",
    "SystemDefinition",
    "SystemProvenance",
    "query_failures",
]

CONTEXT_K = 5
"""The returned context of a query: its first CONTEXT_K results (what a RAG prompt would receive)."""
FAILURE_CUTOFF = 10
"""A relevant chunk not within the first FAILURE_CUTOFF results is reported as a failure."""


class FailedQuery(Protocol):
    """Why a system gave one query no ranking, as recorded (:class:`evalkit.retrieval.retriever.QueryError`)."""

    @property
    def kind(self) -> QueryFailureKind:
        """The failure kind."""
        ...

    @property
    def status(self) -> int | None:
        """The HTTP status, when there was one."""
        ...

    @property
    def attempts(self) -> int:
        """Requests made, retries included."""
        ...

    def describe(self, query_id: str) -> str:
        """One ID-only line."""
        ...


@dataclass(frozen=True)
class QueryResult:
    """What one system returned for one query, and how long it took."""

    query_id: str
    chunk_ids: tuple[str, ...]
    scores: tuple[float, ...]
    latency_ms: float
    error: FailedQuery | None = None


@dataclass(frozen=True)
class Failure:
    """An actionable, ID-only failure: a relevant chunk missed, or a no-answer query that returned results."""

    query_id: str
    language: Language
    kind: Literal["relevant_not_retrieved", "no_answer_returned_results"]
    chunk_id: str | None
    grade: int | None
    rank: int | None
    returned: int

    def describe(self) -> str:
        """One line naming the query and chunk by ID."""
        if self.kind == "no_answer_returned_results":
            return f"no-answer query {self.query_id} returned {self.returned} result(s)"
        where = f"at rank {self.rank}" if self.rank else "not returned"
        return (
            f"query {self.query_id}: relevant chunk {self.chunk_id} (grade {self.grade}) "
            f"not in the top {FAILURE_CUTOFF} ({where})"
        )


def query_failures(query: Query, ranking: Sequence[str]) -> list[Failure]:
    """ID-only failures of one query, relevant chunks (grade >= 1) by grade descending then ID; a chunk judged not
    relevant (grade 0) is never a failure, retrieved or not."""
    if not query.answerable:
        if not ranking:
            return []
        return [Failure(query.query_id, query.language, "no_answer_returned_results", None, None, None, len(ranking))]
    rank_of = {chunk_id: index for index, chunk_id in enumerate(dedupe_ranking(ranking), 1)}
    failures = []
    for judgment in sorted(query.relevant_judgments, key=lambda j: (-j.grade, j.chunk_id)):
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


class SystemDefinition(Protocol):
    """How a system ran, as a report says it: its mode (a knowledge-service mode, ``bm25s``, ``retriever`` or
    ``run``)."""

    @property
    def mode(self) -> str:
        """The system's mode."""
        ...


class SystemProvenance(Protocol):
    """What a report may say of an external system (:class:`evalkit.retrieval.retriever.Provenance`): its kind, a
    hash of its definition and counts; never a URL, header, body, path or name."""

    @property
    def kind(self) -> Literal["python", "http", "run-file"]:
        """How the system was given."""
        ...

    @property
    def sha256(self) -> str | None:
        """Hash of the run file's bytes or of the HTTP configuration."""
        ...

    @property
    def counts(self) -> Sequence[tuple[str, int]]:
        """Named counts (run-file lines, missing queries, unknown chunks, duplicates)."""
        ...


class ScoredSystem(Protocol):
    """One system's results over every query, scored: what the report, tables, figures and TREC export read."""

    @property
    def ablation(self) -> SystemDefinition:
        """How the system ran."""
        ...

    @property
    def results(self) -> Sequence[QueryResult]:
        """One result per query, sorted by query ID."""
        ...

    @property
    def per_query(self) -> Mapping[str, Mapping[str, float]]:
        """Query ID -> measure -> value."""
        ...

    @property
    def aggregates(self) -> Mapping[str, Mapping[str, float]]:
        """Slice -> measure -> macro average."""
        ...

    @property
    def latency(self) -> LatencySummary:
        """Summary of the measured latencies (count 0 when none were measured)."""
        ...

    @property
    def latency_samples_ms(self) -> Sequence[float]:
        """Every measured latency, all runs."""
        ...

    @property
    def failures(self) -> Sequence[Failure]:
        """ID-only failures, by query."""
        ...


class ScoredEvaluation(Protocol):
    """Every system's scored results over one fixture, and the hashes that identify what was evaluated."""

    @property
    def fixture(self) -> Fixture:
        """The fixture evaluated (its queries: those reported on)."""
        ...

    @property
    def ablations(self) -> Mapping[str, ScoredSystem]:
        """System ID -> its scored results (the report key is ``ablations`` for every system)."""
        ...

    @property
    def runs(self) -> int:
        """How many times the suite ran (the projections agreed)."""
        ...

    @property
    def corpus_sha256(self) -> str:
        """Hash of the documents and chunks."""
        ...

    @property
    def evaluation_definition_hash(self) -> str:
        """Hash of everything that defines the evaluated contract."""
        ...

    @property
    def provider_definitions_hash(self) -> str:
        """Hash of the embedding providers' definitions."""
        ...

    @property
    def projection_sha256(self) -> str:
        """Hash of the deterministic projection (rankings with scores, per-query values, failures)."""
        ...

    @property
    def tie_policy(self) -> str:
        """How equal scores were ordered (:mod:`evalkit.measures.ties`)."""
        ...

    @property
    def systems(self) -> Mapping[str, SystemProvenance]:
        """Provenance of each external system, by system ID."""
        ...
