"""The protocol every system under test implements, and the replay of a precomputed run.

A :class:`Retriever` answers ``search(text, language, k)`` with a sequence of ``(chunk_id, score)`` pairs (checked
and kept as a :data:`~evalkit.data.runs.Ranking`; a chunk ID must be one a run file could hold: not empty, no
whitespace or control character; a score must be a finite number). It may also define ``index(chunks)``, called once
with the fixture's chunks before any query, and ``search_all(requests)``, which answers a batch of
:class:`SearchRequest` at once (concurrently, say) and times each query itself. evalkit orders every returned
ranking by its declared tie policy, so a retriever need not sort.

A retriever reports a failure of one query (a timeout, an HTTP error, a malformed response) by raising
:class:`QueryFailed` (with a :class:`QueryError`, or just a message): the query scores as an empty ranking, the
failure is recorded by kind, status and attempt count, and the run goes on; a :class:`QueryError` with a field out of
its domain is refused when it is made. Any other exception is a bug in the retriever and stops the run (behind
``--retriever module:factory`` as :class:`evalkit.app.plugins.PluginError`: bad input, exit 2).

:class:`RunRetriever` replays a precomputed run file. This module imports nothing of the built-in knowledge
service: the adapters that make it (and other hit-returning functions) retrievers are in
:mod:`evalkit.retrieval.adapters`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, get_args, runtime_checkable

from evalkit.common.progress import progress
from evalkit.data.fixture import Chunk
from evalkit.data.ids import given_id_problem
from evalkit.data.inputs import clip, shorten
from evalkit.data.runs import Ranking, Run, given_score_problem
from evalkit.data.schema import Language, QueryFailureKind, is_identifier

FailureKind = QueryFailureKind
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)
MESSAGE_FAILURE_KIND: FailureKind = "retriever_error"
"""The kind of ``QueryFailed("a message")``: a Python retriever's own failure, of no kind evalkit can tell."""


@runtime_checkable
class Retriever(Protocol):
    """Any system under test: the top ``k`` chunks for a query, as (chunk ID, score) pairs."""

    def search(self, text: str, language: Language, k: int) -> Sequence[tuple[str, float]]:
        """The results for one query, best first (ties are ordered by evalkit's tie policy)."""
        ...


@dataclass(frozen=True)
class QueryError:
    """Why one query got no ranking: the failure kind, the HTTP status (if any) and the attempts made.

    ``detail`` says what went wrong in words that disclose nothing private (a config field's name, a size limit, a
    redirect's host; never a URL, header or body). It is for messages only: two errors that differ only in detail
    compare equal, and the report records kind, status and attempts.
    """

    kind: FailureKind
    status: int | None
    attempts: int
    detail: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        problem = _query_error_problem(self)
        if problem is not None:
            raise InvalidQueryError(f"QueryError field {problem}")

    def describe(self, query_id: str) -> str:
        """One ID-only line (no URL, header or body)."""
        status = f", status {self.status}" if self.status is not None else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"query {query_id}: {self.kind}{status} after {self.attempts} attempt(s){detail}"


class InvalidQueryError(ValueError):
    """A :class:`QueryError` with a field out of its domain, or a :class:`QueryFailed` given neither a QueryError nor
    a message: a bug in the retriever, refused when it is made (the run names the system and the query)."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _query_error_problem(error: QueryError) -> str | None:
    """What is wrong with one field of `error`, as "'field' is VALUE, not ...", or None."""
    if error.kind not in FAILURE_KINDS:
        return f"'kind' is {shorten(error.kind)}, not one of {', '.join(FAILURE_KINDS)}"
    if error.status is not None and not (_is_int(error.status) and 100 <= error.status <= 999):
        return f"'status' is {shorten(error.status)}, not None or an HTTP status (an integer from 100 to 999)"
    if not (_is_int(error.attempts) and error.attempts >= 1):
        return f"'attempts' is {shorten(error.attempts)}, not an integer of at least 1"
    if error.detail is not None and not isinstance(error.detail, str):
        return f"'detail' is {shorten(error.detail)}, not None or text"
    return None


class QueryFailed(Exception):
    """Raised by a retriever for a failure of one query that the run records and survives.

    ``QueryFailed(QueryError(kind, status, attempts, detail))`` says what failed; ``QueryFailed("a message")`` or
    ``QueryFailed()`` records a :data:`MESSAGE_FAILURE_KIND` failure after one attempt, with the message (on one
    line, cut to 300 characters) as its detail. Anything else raises :class:`InvalidQueryError`.
    """

    def __init__(self, error: QueryError | str | None = None) -> None:
        if error is None or isinstance(error, str):
            message = " ".join((error or "").split())
            error = QueryError(MESSAGE_FAILURE_KIND, None, 1, clip(message, 300) if message else None)
        elif not isinstance(error, QueryError):
            raise InvalidQueryError(f"QueryFailed takes a QueryError or a message, not {type(error).__name__}")
        self.error = error
        detail = f": {error.detail}" if error.detail else ""
        super().__init__(f"{error.kind} (status {error.status}, {error.attempts} attempt(s)){detail}")


@dataclass(frozen=True)
class SearchRequest:
    """One query as a batch retriever receives it."""

    query_id: str
    text: str
    language: Language
    k: int


@dataclass(frozen=True)
class SearchOutcome:
    """What one query returned (or why it failed) and how long it took."""

    query_id: str
    hits: Ranking
    latency_ms: float
    error: QueryError | None = None


ProvenanceKind = Literal["python", "http", "run-file"]


@dataclass(frozen=True)
class Provenance:
    """What the report may say about an external system: its kind, a hash of its definition and counts.

    Never a URL, header, body, path or name: the hash identifies the definition without disclosing it.
    """

    kind: ProvenanceKind
    sha256: str | None = None
    counts: tuple[tuple[str, int], ...] = ()

    def definition(self) -> dict[str, object]:
        """The provenance as plain data (for the evaluation definition hash)."""
        return {"kind": self.kind, "sha256": self.sha256, "counts": dict(self.counts)}


def provenance_of(retriever: Retriever) -> Provenance:
    """The retriever's own ``provenance()`` when it has one, else a plain Python retriever's."""
    describe = getattr(retriever, "provenance", None)
    if callable(describe):
        provenance = describe()
        if isinstance(provenance, Provenance):
            return provenance
    return Provenance(kind="python")


class RunRetriever:
    """A precomputed run: answers by query ID (a query missing from the run gets an empty ranking)."""

    def __init__(self, run: Run, sha256: str | None = None, counts: Sequence[tuple[str, int]] = ()) -> None:
        self.run = run
        self._provenance = Provenance(kind="run-file", sha256=sha256, counts=tuple(counts))

    def provenance(self) -> Provenance:
        """A run file: the SHA-256 of its bytes and the counts of what the reading policies repaired."""
        return self._provenance

    def search(self, text: str, language: Language, k: int) -> Sequence[tuple[str, float]]:
        """Not available: a run is keyed by query ID, so it answers through :meth:`search_all`."""
        raise TypeError("a precomputed run answers by query ID: call search_all")

    def search_all(self, requests: Sequence[SearchRequest]) -> list[SearchOutcome]:
        """Every request's ranking from the run, as read (no latency: nothing was run)."""
        return [SearchOutcome(r.query_id, tuple(self.run.rankings.get(r.query_id, ())), 0.0) for r in requests]


def system_name(retriever: Retriever) -> str:
    """What messages call a system: its ``name`` when that is a valid ID (a loaded plugin's is its system ID, an
    HTTP adapter's its configured name), else its type's name."""
    name = getattr(retriever, "name", None)
    return name if isinstance(name, str) and is_identifier(name) else type(retriever).__name__


def _finite_score(value: int | float) -> float | None:
    """`value` as a float when it is finite (an integer too large for a float is not), else None."""
    try:
        score = float(value)
    except OverflowError:
        return None
    return score if math.isfinite(score) else None


def _bad_results(retriever: Retriever, query_id: str, problem: str) -> ValueError:
    return ValueError(f"system {system_name(retriever)}: query {query_id}: {problem}")


def _checked_hits(results: object, query_id: str, retriever: Retriever) -> Ranking:
    """The results as (str, float) pairs, each ID one a run file could hold (not empty, no whitespace or control
    character) and each score finite; anything else is a bug in the `retriever`, named by system, query, result and
    field."""
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise _bad_results(retriever, query_id, f"the retriever returned {type(results).__name__}, not a sequence")
    hits: list[tuple[str, float]] = []
    for index, item in enumerate(results):
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str)):
            raise _bad_results(retriever, query_id, f"result {index} is not a (chunk_id, score) pair")
        problem = given_id_problem(item[0], "chunk_id", f"result {index}")  # the rule of run files
        if problem is not None:
            raise _bad_results(retriever, query_id, problem)
        where = f"result {index} (chunk {shorten(item[0])}): field score is {shorten(item[1])}"
        if given_score_problem(item[1]) == "is not a number":  # numpy scalars are numbers, as evalkit.score takes them
            raise _bad_results(retriever, query_id, f"{where}, not a number")
        score = _finite_score(item[1])  # a real number, checked just above
        if score is None:
            raise _bad_results(retriever, query_id, f"{where}, not a finite number")
        hits.append((item[0], score))
    return tuple(hits)


def _recorded(failed: QueryFailed, query_id: str, retriever: Retriever) -> QueryError:
    """The error a :class:`QueryFailed` carries (a subclass may not have set one: a bug in the `retriever`)."""
    error = getattr(failed, "error", None)
    if not isinstance(error, QueryError):
        raise _bad_results(retriever, query_id, f"{type(failed).__name__} carries no QueryError")
    return error


def timed_search(retriever: Retriever, request: SearchRequest) -> SearchOutcome:
    """Run one query through ``retriever.search``, timing the call; a :class:`QueryFailed` is recorded, and an
    :class:`InvalidQueryError` is refused naming the system and the query."""
    started = time.perf_counter_ns()
    try:
        results = retriever.search(request.text, request.language, request.k)
    except QueryFailed as failed:
        error = _recorded(failed, request.query_id, retriever)
        return SearchOutcome(request.query_id, (), (time.perf_counter_ns() - started) / 1e6, error)
    except InvalidQueryError as exc:
        raise _bad_results(retriever, request.query_id, str(exc)) from None
    elapsed_ms = (time.perf_counter_ns() - started) / 1e6
    return SearchOutcome(request.query_id, _checked_hits(results, request.query_id, retriever), elapsed_ms)


def search_all(
    retriever: Retriever, requests: Sequence[SearchRequest], description: str = "queries"
) -> tuple[SearchOutcome, ...]:
    """Every request through the retriever: its own ``search_all`` when it has one, else one timed call each
    (with a progress bar labelled ``description`` at a terminal)."""
    batch = getattr(retriever, "search_all", None)
    if callable(batch):
        outcomes = tuple(batch(requests))
        if [o.query_id for o in outcomes] != [r.query_id for r in requests]:
            raise ValueError(f"system {system_name(retriever)}: search_all did not answer the requests in order")
        for outcome in outcomes:
            if outcome.error is not None and not isinstance(outcome.error, QueryError):
                raise _bad_results(retriever, outcome.query_id, f"the error is {type(outcome.error).__name__}")
        return tuple(
            SearchOutcome(o.query_id, _checked_hits(o.hits, o.query_id, retriever), o.latency_ms, o.error)
            for o in outcomes
        )
    return tuple(timed_search(retriever, request) for request in progress(requests, description, len(requests)))


def index_chunks(retriever: Retriever, chunks: Sequence[Chunk]) -> None:
    """Call the retriever's optional ``index(chunks)`` with the fixture's chunks."""
    index = getattr(retriever, "index", None)
    if callable(index):
        index(chunks)
