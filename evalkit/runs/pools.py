"""Pools to label: the unjudged (query, document) pairs in the union of the runs' top k, as trectools pools them.

:func:`build_pool` orders each run exactly as the scoring core does (:func:`evalkit.measures.run_order.rank_run`:
score descending under the tie policy, duplicates keeping their best-placed line), keeps each query's first
``depth`` results, and pools every pair the judgments do not speak for: a document absent from the judgments of its
query, or judged with a negative grade (trec_eval's ``-1``, "pooled, not judged"). A grade of 0 or more is judged
and never pooled. Queries a run names that the judgments do not hold are left out and counted, as the scoring core
leaves them out; a run none of whose queries the judgments hold is refused (``ValueError``), as the run of another
collection.

The pool is ordered by query ID, then the best (lowest) rank any run gave the pair, then document ID (code-point
order throughout), whatever the order of the runs or of their lines; each pair lists the runs that brought it in,
by rank, then run name. :func:`pool_jsonl` writes it one JSON object a line, and :func:`format_pool_counts` says
what each run adds and the ``judged@k`` it has today and will have once the pool is labelled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from evalkit.data.inputs import clip
from evalkit.data.qrels import Qrels
from evalkit.data.runs import Run
from evalkit.measures.core import score_ranked
from evalkit.measures.ranked import BoolArray, FloatArray, Ranked
from evalkit.measures.registry import MAX_CUTOFF, parse_measure
from evalkit.measures.run_order import rank_run
from evalkit.measures.ties import DEFAULT_TIE_POLICY, SUMMATION_OF, tie_policy

__all__ = ["Pool", "PoolEntry", "RunPoolCounts", "build_pool", "format_pool_counts", "pool_jsonl"]


@dataclass(frozen=True)
class PoolEntry:
    """One pair to label: its query and document, and every run that brought it in as ``(run name, rank)``, by
    rank, then run name (ranks from 1, within the depth)."""

    query_id: str
    doc_id: str
    runs: tuple[tuple[str, int], ...]

    @property
    def best_rank(self) -> int:
        """The best (lowest) rank any run gave the pair."""
        return self.runs[0][1]


@dataclass(frozen=True)
class RunPoolCounts:
    """What one run brings to the pool, and how much of its top k the judgments speak for before and after.

    ``pairs`` counts the pooled pairs it brings in (unjudged in its top k), ``only`` those no other run brings.
    ``judged_now`` and ``judged_labelled`` are ``judged@k`` (ir_measures' ``Judged@k``, evalkit's ``judged@k``:
    judged results in the top k over min(k, returned), averaged over the queries with a relevant judgment, a judged
    query the run does not name scoring 0) with the judgments as they are and with every pair of the pool judged;
    None when no judged query has a relevant document. Negative grades count as unjudged in both.
    ``left_out`` counts the run's queries the judgments do not hold."""

    run: str
    pairs: int
    only: int
    judged_now: float | None
    judged_labelled: float | None
    left_out: int


@dataclass(frozen=True)
class Pool:
    """The pairs to label in output order (see the module docstring), and each run's counts in the order given."""

    depth: int
    ties: str
    entries: tuple[PoolEntry, ...]
    counts: tuple[RunPoolCounts, ...]


def _check(qrels: Qrels, runs: Sequence[Run], depth: int) -> None:
    """Refuse a depth below 1 (or past what a cutoff may be), two runs named alike, and a run whose queries the
    judgments do not hold (``ValueError`` naming the run)."""
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_CUTOFF:
        raise ValueError(
            f"the pool depth (--depth) must be a whole number from 1 to {MAX_CUTOFF:,}, got {clip(repr(depth))}"
        )
    if not runs:
        raise ValueError("a pool needs at least one run")
    names = [run.name for run in runs]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"two runs are named {clip(repr(twice[0]))}; rename a file or change a tag")
    judged = set(qrels.queries.to_pylist())
    for run in runs:
        named = run.queries.to_pylist()
        if not any(query_id in judged for query_id in named):
            first = f" (the first: {clip(repr(named[0]))})" if named else ""
            raise ValueError(
                f"run {clip(repr(run.name))}: none of its {len(named)} query(ies) is in the judgments "
                f"({clip(qrels.source)}){first}; is it the run of another collection?"
            )


def _judged(ranked: Ranked) -> BoolArray:
    """Per position, whether its document is judged: in the judgments with a grade of 0 or more."""
    judged: BoolArray = ranked.judged & (ranked.grade >= 0)
    return judged


def _judged_at(ranked: Ranked, judged: BoolArray, depth: int) -> tuple[FloatArray, BoolArray]:
    """Per query, evalkit's ``judged@depth`` (its family's kernel) with ``judged`` as the judged positions, and
    whether the query has a relevant judgment (where it is defined). A position counted as judged that has no grade
    of 0 or more yet (a pair of the pool, once labelled) is given grade 0, so that the kernel sees it judged
    however it reads the grades; only the judged share is computed, so no value depends on that grade."""
    as_judged = replace(ranked, judged=judged, grade=np.where(judged, np.maximum(ranked.grade, 0), ranked.grade))
    values, answerable = score_ranked(as_judged, [parse_measure(f"judged@{depth}")])
    return values[f"judged@{depth}"], answerable


def _mean(values: FloatArray, defined: BoolArray) -> float | None:
    return float(values[defined].mean()) if defined.any() else None


@dataclass(frozen=True)
class _RunPool:
    """One run's part: its unjudged pairs within the depth as ``(qrels row, document ID, rank)``, its judged@k
    today and once labelled, and its queries the judgments do not hold."""

    pairs: list[tuple[int, str, int]]
    judged_now: float | None
    judged_labelled: float | None
    left_out: int


def _run_pool(run: Run, qrels: Qrels, depth: int, ties: str) -> _RunPool:
    """:func:`build_pool`'s work on one run, one block of queries at a time, as the scoring core reads it."""
    ranked_run = rank_run(run, qrels, ties, SUMMATION_OF[ties], depth, with_ids=True)
    now, labelled = np.full(ranked_run.n, np.nan), np.full(ranked_run.n, np.nan)
    answerable = np.zeros(ranked_run.n, dtype=bool)
    pairs: list[tuple[int, str, int]] = []
    for rows, ranked in ranked_run.blocks():
        judged = _judged(ranked)
        ids = ranked.doc_ids or []
        pooled = ~judged  # rank_run kept each query's first `depth` results: the unjudged ones join the pool
        pairs += [(int(rows[ranked.row[i]]), ids[i], int(ranked.rank[i])) for i in np.flatnonzero(pooled).tolist()]
        now[rows], answerable[rows] = _judged_at(ranked, judged, depth)
        labelled[rows] = _judged_at(ranked, judged | pooled, depth)[0]
    return _RunPool(pairs, _mean(now, answerable), _mean(labelled, answerable), ranked_run.counts.unjudged_queries)


def build_pool(qrels: Qrels, runs: Sequence[Run], depth: int, ties: str = DEFAULT_TIE_POLICY) -> Pool:
    """The unjudged pairs in the union of each run's first `depth` results under the tie policy `ties`, and what
    each run brings (see the module docstring and :class:`RunPoolCounts`).

    Raises ``ValueError`` for a depth below 1, an unknown tie policy, two runs with one name, or a run none of
    whose queries the judgments hold."""
    tie_policy(ties)
    _check(qrels, runs, depth)
    parts = [_run_pool(run, qrels, depth, ties) for run in runs]
    brought: dict[tuple[int, str], list[tuple[str, int]]] = {}
    for run, part in zip(runs, parts, strict=True):
        for row, doc, rank in part.pairs:
            brought.setdefault((row, doc), []).append((run.name, rank))
    query_ids = qrels.queries.to_pylist()
    entries = sorted(
        (
            PoolEntry(query_ids[row], doc, tuple(sorted(by, key=lambda r: (r[1], r[0]))))
            for (row, doc), by in brought.items()
        ),
        key=lambda e: (e.query_id, e.best_rank, e.doc_id),
    )
    counts = tuple(
        RunPoolCounts(
            run.name,
            len(part.pairs),
            sum(1 for row, doc, _ in part.pairs if len(brought[(row, doc)]) == 1),
            part.judged_now,
            part.judged_labelled,
            part.left_out,
        )
        for run, part in zip(runs, parts, strict=True)
    )
    return Pool(depth, ties, tuple(entries), counts)


def pool_jsonl(pool: Pool, languages: Mapping[str, str] | None = None, chunk_ids: bool = False) -> bytes:
    """The pool as UTF-8 JSON lines, one pair a line: ``query_id``, ``language`` (when `languages` knows the
    query), ``doc_id`` (and ``chunk_id``, the same ID, when `chunk_ids`: the documents are a fixture's chunks),
    ``best_rank`` and ``runs`` (``[{"run": name, "rank": r}, ...]``, by rank, then run name)."""
    known = languages or {}
    lines = []
    for entry in pool.entries:
        row: dict[str, object] = {"query_id": entry.query_id}
        if entry.query_id in known:
            row["language"] = known[entry.query_id]
        row["doc_id"] = entry.doc_id
        if chunk_ids:
            row["chunk_id"] = entry.doc_id
        row["best_rank"] = entry.best_rank
        row["runs"] = [{"run": name, "rank": rank} for name, rank in entry.runs]
        lines.append(json.dumps(row, ensure_ascii=False) + "\n")
    return "".join(lines).encode("utf-8")


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def format_pool_counts(pool: Pool) -> str:
    """What the pool holds and, per run, the pairs it brings (in all, and that only it brings) and its ``judged@k``
    today and once the pool is labelled; then a note per run whose queries the judgments do not all hold."""
    queries = len({e.query_id for e in pool.entries})
    k = f"judged@{pool.depth}"
    width = max([len("run"), *(len(c.run) for c in pool.counts)])
    header = f"{'run':<{width}}  {'pairs':>7}  {'only':>7}  {k + ' now':>{len(k) + 4}}  {k + ' labelled':>{len(k) + 9}}"
    lines = [
        f"pool: {len(pool.entries)} unjudged pair(s) in {queries} query(ies) to label "
        f"(top {pool.depth} of {len(pool.counts)} run(s), tie policy {pool.ties})",
        header,
    ]
    for c in pool.counts:
        lines.append(
            f"{c.run:<{width}}  {c.pairs:>7}  {c.only:>7}  {_share(c.judged_now):>{len(k) + 4}}  "
            f"{_share(c.judged_labelled):>{len(k) + 9}}"
        )
    lines += [
        f"note: {c.run}: {c.left_out} query(ies) not in the judgments (left out)" for c in pool.counts if c.left_out
    ]
    return "\n".join(lines)
