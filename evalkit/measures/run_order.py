"""A run ordered under a tie policy and joined to the qrels, block by block, for the scoring core.

:func:`rank_run` takes a columnar :class:`~evalkit.data.runs.Run` and the :class:`~evalkit.data.qrels.Qrels`; a
linear pass checks that each query's lines are together with scores descending (how runs are written), and only
when not are they regrouped by one sort. Then, a block of about :data:`BLOCK_LINES` lines at a time, only the lines
that can reach the deepest cutoff (widened to whole ties at the boundary, and past duplicates) are put in
document-ID order under the tie policy (only the ties that hold a judged line, unless the caller reads IDs),
deduplicated and joined to the judgments of the block's queries (:mod:`evalkit.measures.run_join`), giving one
:class:`~evalkit.measures.ranked.Ranked` a block that the caller scores before the next is made.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import pairwise
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.common.threads import in_order, scoring_threads
from evalkit.data.columns import BoolArray, CodeArray, IntArray, lookup, position_ranges, take_positions
from evalkit.data.qrels import Qrels
from evalkit.data.runs import Run
from evalkit.measures.ranked import Ranked, SpanContext, ideal_arrays
from evalkit.measures.run_join import (
    Judged,
    JudgedProbe,
    join_block,
    judged_lines,
    repeats,
    same_documents,
    tie_order,
)

__all__ = ["BLOCK_LINES", "RankedRun", "Reading", "RunCounts", "grades_by_query", "rank_run"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RunCounts:
    """What joining a run to the qrels found: counts, never IDs.

    ``duplicates`` counts the lines repeating a (query, document) pair among the lines that can reach the ranks the
    measures read; ``all_ties`` the judged queries with at least two lines, every one of the same score (as read,
    before duplicates are removed); ``unjudged_queries`` the run's queries the qrels do not judge, and
    ``missing_queries`` the judged queries the run does not name."""

    lines: int
    duplicates: int
    unjudged_queries: int
    missing_queries: int
    all_ties: int


def _dense_descending(values: FloatArray) -> IntArray:
    """Rank 0 for the largest value, equal values sharing a rank."""
    unique, inverse = np.unique(values, return_inverse=True)
    ranks: IntArray = (len(unique) - 1 - inverse).astype(np.int64)
    return ranks


def _groups(query: CodeArray, scores: FloatArray) -> tuple[IntArray, IntArray] | None:
    """Start and size of each query's lines when the run is written the usual way (each query's lines together,
    scores descending), checked in one linear pass; None when it is not."""
    if len(query) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    change = query[1:] != query[:-1]
    rising = np.flatnonzero(scores[1:] > scores[:-1])  # in a usual run, only where one query's lines end
    if len(rising) and not change[rising].all():
        return None
    starts = np.concatenate(([0], np.flatnonzero(change) + 1))
    if len(np.unique(query[starts])) != len(starts):
        return None  # a query's lines are split in two places
    sizes = np.diff(np.append(starts, len(query)))
    return starts, sizes


def _regroup(query: CodeArray, scores: FloatArray) -> IntArray:
    """The order that puts each query's lines together, scores descending (equal scores keep their file order)."""
    key = query.astype(np.int64) * (len(query) + 1) + _dense_descending(scores)
    order: IntArray = np.argsort(key, kind="stable")
    return order


def _prefix(starts: IntArray, sizes: IntArray, scores: FloatArray, want: IntArray) -> tuple[IntArray, IntArray]:
    """Per group, how many of its first lines can reach rank ``want``: ``want`` lines widened to the end of the tie
    at the boundary (its order is decided by document ID later). Returns the lengths and the positions."""
    take = np.minimum(want, sizes)
    last = starts + take - 1
    end = starts + sizes - 1
    while True:  # widen through the tie at the boundary, one line per step for every group at once
        grow = (take > 0) & (last < end)
        grow[grow] = scores[last[grow] + 1] == scores[last[grow]]
        if not grow.any():
            break
        last = last + grow
        take = take + grow
    return take, position_ranges(starts, take)


FIRST_PROBE: Final = 10
""":func:`_relevant_reach` probes at least this many lines of each query first, then :data:`PROBE_GROWTH` times as
deep, and so on."""
PROBE_GROWTH: Final = 4
"""How much deeper each probe of :func:`_relevant_reach` reads than the one before. Every pass is a few numpy and
Arrow calls over the block, which hold the GIL between them: on the 10-million-line benchmark run (2026-12-06,
nDCG@10, recall@10 and recip_rank, scoring the run already read, alternating processes) windows growing fourfold
took 0.73-0.85 s on two threads against 0.87-0.92 s for one pass after the cutoff and 0.79-1.02 s for doubling
windows; on one thread they were all within the noise of each other (1.0-1.6 s)."""

BLOCK_LINES: Final = 1 << 17
"""Query groups are ordered, deduplicated and joined this many lines at a time, which bounds the memory of scoring
(whole rankings for measures without a cutoff). Measured on the 10-million-line benchmark run
(``benchmarks/score_speed.py``, nDCG@10, recall@10 and MRR@10, one thread, 2026-12-03): peak RSS 712 MB with
blocks of 2^20 lines, 626 MB with 2^18, 610 MB with 2^17 and 609 MB with 2^16; in alternating processes the whole
``score()`` took 1.91-2.06 s with 2^20 and 1.75-1.89 s with 2^17 (smaller temporaries stay in cache, and memory a
process touches for the first time is costly on this kind of virtual machine)."""


@dataclass(frozen=True)
class _Lines:
    """A run's lines grouped by query (scores descending within a group), as the block step reads them: each
    line's query as the run codes it, and ``position``, the qrels row of each run query (-1: not judged)."""

    query: CodeArray
    position: IntArray
    scores: FloatArray
    doc_ids: pa.ChunkedArray
    descending_ids: bool

    def rows(self, lines: IntArray) -> IntArray:
        """The qrels row of each of ``lines`` (-1: a query the qrels do not judge)."""
        rows: IntArray = self.position[self.query[lines]]
        return rows


@dataclass(frozen=True)
class _Block:
    """What one block of query groups contributes: per kept position its query, rank, grade, qrels row (-1: not
    judged) and, with a span context, its gold-span characters and chunk length."""

    q: IntArray
    rank: IntArray
    grade: IntArray
    qrels_row: IntArray
    ids: list[str]
    duplicates: int
    span_chars: IntArray | None = None
    lengths: IntArray | None = None


def _blocks(sizes: IntArray, limit: int) -> list[tuple[int, int]]:
    """Consecutive ranges of groups of about ``limit`` lines each (by where each group starts)."""
    if len(sizes) == 0:
        return []
    block = (np.cumsum(sizes) - sizes) // limit
    bounds = np.flatnonzero(np.concatenate(([True], block[1:] != block[:-1], [True])))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))


def _context_columns(
    returned: pa.Array, line: IntArray, rank: IntArray, qrels_row: IntArray, context: SpanContext
) -> tuple[IntArray, IntArray]:
    """Per kept position: its gold-span characters and its chunk's length inside the context (0 past it)."""
    inside = rank <= context.context_k
    spans = np.zeros(len(line), dtype=np.int64)
    judged = inside & (qrels_row >= 0)
    spans[judged] = context.span_chars[qrels_row[judged]]
    docs = returned.take(pa.array(line[inside])).cast(context.chunk_ids.type)
    found = np.asarray(pc.index_in(docs, value_set=context.chunk_ids).fill_null(-1).to_numpy(), dtype=np.int64)
    lengths = np.zeros(len(line), dtype=np.int64)
    lengths[inside] = np.where(found >= 0, context.lengths[np.maximum(found, 0)], 0)
    return spans, lengths


@dataclass(frozen=True)
class Reading:
    """What of each query's ranking the measures read (each field as :func:`rank_run` names it)."""

    depth: int | None = None
    with_ids: bool = False
    context: SpanContext | None = None
    judged_only: bool = False
    keep_unjudged: int | None = None
    first_relevant: tuple[int, ...] = ()


def _rank_block(lines: _Lines, starts: IntArray, sizes: IntArray, qrels: Qrels, reading: Reading) -> _Block:
    """Order, deduplicate, cut and join one block of query groups (see :func:`rank_run`)."""
    depth, with_ids, context, judged_only = reading.depth, reading.with_ids, reading.context, reading.judged_only
    keep_unjudged, first_relevant = reading.keep_unjudged, reading.first_relevant
    want = np.full(len(starts), int(sizes.sum()) if depth is None else depth, dtype=np.int64)
    rows = lines.rows(starts)
    at, _ = _judgments_of(qrels, rows[rows >= 0])
    judged = Judged(qrels.query[at], qrels.docs.take(pa.array(at)), qrels.grades[at], at)
    low = int(starts[0]) if len(starts) else 0  # the block's lines are one range: slice it (no copy) and take from
    high = int(starts[-1] + sizes[-1]) if len(starts) else 0  # the slice, since a take may join what it takes from
    block = lines.doc_ids.slice(low, high - low)
    deeper = np.zeros(len(starts), dtype=bool)  # groups read down to their first relevant line, past ``depth``
    if first_relevant and depth is not None:
        reach = _relevant_reach(lines, starts, sizes, block, low, judged, first_relevant, depth)
        deeper = reach > 0  # its relevant line may lie past ``depth`` once its tie is ordered, whatever ``reach``
        want = np.maximum(want, reach)
    while True:
        take, chosen = _prefix(starts, sizes, lines.scores, want)
        q = lines.rows(chosen)
        if judged_only:  # whole rankings (depth None): one pass
            every = len(chosen) == high - low  # every line of the block (no unjudged query's lines among them)
            lines_read = block if every else take_positions(block, chosen - low)
            keep = judged_lines(q, lines_read, judged)
            group_of = np.repeat(np.arange(len(starts)), take)[keep]
            take = np.bincount(group_of, minlength=len(starts))
            chosen, q, returned = chosen[keep], q[keep], lines_read.filter(pa.array(keep))
            returned = returned.combine_chunks() if isinstance(returned, pa.ChunkedArray) else returned
        else:
            returned = take_positions(block, chosen - low)
        for exact in (False, True):
            matched = join_block(q, returned, judged, exact)
            if not (with_ids or context is not None):  # IDs and contexts read every tie's order
                matched = replace(matched, needed=matched.qrels_row >= 0)
            permutation = tie_order(q, lines.scores[chosen], returned, matched, lines.descending_ids)
            identity = matched.identity[permutation]
            repeated = repeats(identity)
            if not (matched.hashed and repeated.any()) or same_documents(q, returned, permutation, identity, repeated):
                break  # else two IDs of a query share a hash: join again, exactly
        group_of = np.repeat(np.arange(len(starts)), take)
        if depth is None:
            break
        unique_per_group = np.bincount(group_of[~repeated], minlength=len(starts))
        short = (unique_per_group < depth) & (take < sizes)  # repeats left fewer than depth results: read on
        if not short.any():
            break
        want = np.where(short, want * 2, want)
    line, per_group = permutation, take
    if repeated.any():
        kept = ~repeated
        line, group_of = permutation[kept], group_of[kept]
        per_group = np.bincount(group_of, minlength=len(starts))
    first = np.concatenate(([0], np.cumsum(per_group)[:-1]))
    rank = np.arange(len(line), dtype=np.int64) - first[group_of] + 1
    if depth is not None:  # a deeper group keeps what was read: its tie's order may put its relevant line last
        within = (rank <= depth) | deeper[group_of]
        line, rank = line[within], rank[within]
    if keep_unjudged is not None and (depth is None or keep_unjudged < depth or deeper.any()):  # then judged only
        read = (rank <= keep_unjudged) | (matched.qrels_row[line] >= 0)
        line, rank = line[read], rank[read]
    ids = returned.take(pa.array(line)).to_pylist() if with_ids else []
    qrels_row = matched.qrels_row[line]
    block = _Block(q[line], rank, matched.grade[line], qrels_row, ids, int(repeated.sum()))
    if context is None:
        return block
    spans, lengths = _context_columns(returned, line, rank, qrels_row, context)
    return replace(block, span_chars=spans, lengths=lengths)


def _relevant_reach(
    lines: _Lines,
    starts: IntArray,
    sizes: IntArray,
    block: pa.ChunkedArray,
    low: int,
    judged: Judged,
    levels: tuple[int, ...],
    depth: int,
) -> IntArray:
    """Per group, how many of its first lines reach its first document of grade >= each of ``levels`` (the deepest
    of them; 0 when it has none): line IDs are probed in a small table of the block's relevant IDs
    (:class:`~evalkit.measures.run_join.JudgedProbe`), first each group's first ``depth`` lines (at least
    :data:`FIRST_PROBE`), then, for the groups with no hit yet, the next lines down to :data:`PROBE_GROWTH` times as
    deep, and so on; the lines stay in score order, so a group's first hit is its first relevant line. Most queries
    of a good run have a relevant document near the top, so most lines are never probed, and a query whose first
    relevant document lies at rank r has at most 4r of its lines probed, not all of them."""
    reach = np.zeros(len(starts), dtype=np.int64)
    for level in levels:
        relevant = judged.grades >= level
        if not relevant.any():
            continue
        table = Judged(
            judged.row[relevant], judged.docs.filter(pa.array(relevant)), judged.grades[relevant], judged.at[relevant]
        )
        probe = JudgedProbe(table, block.type)
        groups = np.arange(len(starts))
        probed = np.zeros(len(starts), dtype=np.int64)  # per group, how many of its first lines were probed
        limit = max(depth, FIRST_PROBE)
        while len(groups):
            upto = np.minimum(sizes[groups], limit)
            length = upto - probed[groups]
            read = position_ranges(starts[groups] + probed[groups], length)
            hit = np.flatnonzero(probe.lines(lines.rows(read), take_positions(block, read - low)))
            group_of = groups[np.repeat(np.arange(len(groups)), length)[hit]]
            first = np.concatenate(([True], group_of[1:] != group_of[:-1])) if len(hit) else np.zeros(0, dtype=bool)
            at = group_of[first]
            reach[at] = np.maximum(reach[at], read[hit[first]] - starts[at] + 1)
            probed[groups] = upto
            found = np.zeros(len(starts), dtype=bool)
            found[at] = True
            groups = groups[~found[groups] & (upto < sizes[groups])]  # no hit yet, and lines left to probe
            limit *= PROBE_GROWTH
    return reach


@dataclass
class RankedRun:
    """A run ordered and joined block by block: iterate :meth:`blocks` for ``(qrels rows, their Ranked)``; the
    counts are complete once every block has been read."""

    n: int
    in_run: BoolArray
    """Per qrels query, whether the run names it."""
    unknown: BoolArray
    """Per query of the run (:attr:`~evalkit.data.runs.Run.queries`), whether the qrels do not judge it."""
    counts: RunCounts
    _lines: _Lines
    _starts: IntArray
    _sizes: IntArray
    _qrels: Qrels
    _summation: str
    _reading: Reading

    def blocks(self, rest: bool = True) -> Iterator[tuple[IntArray, Ranked]]:
        """Per block of queries: the qrels rows it covers and their rankings (rows renumbered from 0); with ``rest``
        the judged queries the run does not name come last, as one block with empty rankings."""
        depth, deeper = self._reading.depth, self._reading.first_relevant
        reach = self._sizes if depth is None or deeper else np.minimum(self._sizes, depth)
        covered = np.zeros(self.n, dtype=bool)
        duplicates = 0
        ranges = _blocks(reach, BLOCK_LINES)
        for (a, b), part in zip(ranges, in_order(self._rank_range, ranges, scoring_threads()), strict=True):
            starts = self._starts[a:b]
            duplicates += part.duplicates
            rows = np.sort(self._lines.rows(starts))
            covered[rows] = True
            yield rows, self._local(rows, replace(part, q=np.searchsorted(rows, part.q)))
        self.counts = replace(self.counts, duplicates=duplicates)
        if rest:
            yield from self.empty(np.flatnonzero(~covered))

    def _rank_range(self, groups: tuple[int, int]) -> _Block:
        """:func:`_rank_block` of the query groups ``groups`` (a range), which reads and changes nothing shared."""
        a, b = groups
        starts, sizes = self._starts[a:b], self._sizes[a:b]
        return _rank_block(self._lines, starts, sizes, self._qrels, self._reading)

    def empty(self, rows: IntArray) -> Iterator[tuple[IntArray, Ranked]]:
        """The qrels rows ``rows`` (ascending) with empty rankings, as one block (none when there are no rows)."""
        if len(rows):
            empty = np.zeros(0, dtype=np.int64)
            none = _Block(empty, empty, empty, empty, [], 0)
            if self._reading.context is not None:
                none = replace(none, span_chars=empty, lengths=empty)
            yield rows, self._local(rows, none)

    @cached_property
    def _span_totals(self) -> IntArray:
        """Per qrels query, the gold-span characters of all its judgments (context measures' denominator)."""
        if self._reading.context is None:
            return np.zeros(self.n, dtype=np.int64)
        weights = self._reading.context.span_chars.astype(np.float64)
        return np.bincount(self._qrels.query, weights=weights, minlength=self.n).astype(np.int64)

    def _local(self, rows: IntArray, part: _Block) -> Ranked:
        """The Ranked of the qrels rows ``rows`` (ascending), positions given with local row numbers."""
        q, rank, grade, ids = part.q, part.rank, part.grade, part.ids
        order = np.argsort(q, kind="stable")  # rows ascending; ranks stay in order within a row
        judged_rows, counts = _judgments_of(self._qrels, rows)
        local_query = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
        judged_grades = self._qrels.grades[judged_rows]
        ideal_row, ideal_rank, ideal_grade = ideal_arrays(local_query, judged_grades, len(rows))
        nonrelevant = np.bincount(local_query[judged_grades == 0], minlength=len(rows)).astype(np.int64)
        ranked = Ranked(
            len(rows),
            q[order],
            rank[order],
            grade[order],
            part.qrels_row[order] >= 0,
            ideal_row,
            ideal_rank,
            ideal_grade,
            self._summation,
            qrels_row=part.qrels_row[order],
            nonrelevant=nonrelevant,
        )
        if self._reading.context is not None and part.span_chars is not None and part.lengths is not None:
            totals = self._span_totals
            ranked = replace(
                ranked,
                span_chars=part.span_chars[order],
                lengths=part.lengths[order],
                total_span_chars=totals[rows],
            )
        if self._reading.with_ids:  # registered measures call a Python function per query with IDs
            ranked = replace(
                ranked, doc_ids=[ids[i] for i in order.tolist()], judgments=grades_by_query(self._qrels, rows)
            )
        return ranked


def rank_run(
    run: Run,
    qrels: Qrels,
    ties: str,
    summation: str,
    depth: int | None = None,
    with_ids: bool = False,
    context: SpanContext | None = None,
    judged_only: bool = False,
    keep_unjudged: int | None = None,
    first_relevant: tuple[int, ...] = (),
) -> RankedRun:
    """The run ordered under the tie policy ``ties`` and joined to the qrels, to be read block by block
    (:meth:`RankedRun.blocks`); rows are the qrels' queries.

    ``depth`` keeps only the first ``depth`` results of each query (None: all), which is all any cutoff measure can
    see. Only the lines that can reach those ranks (the first ``depth`` of each query, widened to whole ties and
    past duplicates) are ordered by document ID, deduplicated and joined to the judgments, so a deep run costs
    little more than reading it; a run written the usual way (each query's lines together, scores descending) is
    not sorted at all. Groups of queries are processed :data:`BLOCK_LINES` lines at a time, and the caller scores
    each block before the next is made, so scoring whole rankings never holds every position at once.

    ``judged_only`` (whole rankings, no IDs, no contexts) keeps only the lines whose document the query's judgments
    name, found by one probe of a small hash table per line, before anything is ordered: the condensed lists that
    condensed-list measures read, ranked among themselves (the ranks of a :class:`Ranked` are then ranks among the
    judged lines, and its ``duplicates`` count repeats of judged lines only).

    ``keep_unjudged`` (no IDs, no contexts) ranks every line as usual, then keeps the positions of unjudged
    documents only up to that rank (0: none), and judged ones at every rank: all that families which read judged
    positions (:data:`~evalkit.measures.declaration.Positions`) need, in a tenth or less of the positions of whole
    rankings.
    """
    if ties not in ("evalkit", "trec_eval"):
        raise ValueError(f"unknown tie policy {ties!r}; valid: evalkit, trec_eval")
    n = len(qrels.queries)
    position = lookup(run.queries, qrels.queries)
    in_run = np.zeros(n, dtype=bool)
    in_run[position[position >= 0]] = True
    query = run.query  # the run's own codes: a line's qrels row is looked up only where it is needed
    scores = run.scores
    if ties == "trec_eval":
        with np.errstate(over="ignore"):  # beyond float32's range is +-inf, as trec_eval's C cast gives
            scores = scores.astype(np.float32).astype(np.float64)
    doc_ids = run.doc_ids
    grouped = _groups(query, scores)
    if grouped is None:
        order = _regroup(query, scores)
        query, scores, doc_ids = query[order], scores[order], doc_ids.take(pa.array(order))
        grouped = _groups(query, scores)
        if grouped is None:
            raise RuntimeError("regrouped run lines are not grouped: a bug in evalkit.measures.ranked")
    starts, sizes = grouped
    judged_groups = position[query[starts]] >= 0
    starts, sizes = starts[judged_groups], sizes[judged_groups]
    ends = starts + sizes - 1
    counts = RunCounts(
        lines=len(run.query),
        duplicates=0,
        unjudged_queries=int((position < 0).sum()),
        missing_queries=int(n - in_run.sum()),
        all_ties=int(np.sum((sizes >= 2) & (scores[starts] == scores[np.maximum(ends, 0)]))),
    )
    lines = _Lines(query, position, scores, doc_ids, ties == "trec_eval")
    if judged_only and (depth is not None or with_ids or context is not None):
        raise ValueError("judged_only reads whole rankings without IDs or contexts")
    if keep_unjudged is not None and (with_ids or context is not None):
        raise ValueError("keep_unjudged drops unjudged positions, which IDs and contexts read")
    reading = Reading(depth, with_ids, context, judged_only, keep_unjudged, first_relevant)
    return RankedRun(n, in_run, position < 0, counts, lines, starts, sizes, qrels, summation, reading)


def _judgments_of(qrels: Qrels, rows: IntArray) -> tuple[IntArray, IntArray]:
    """The qrels lines of the query rows ``rows`` (each query's judgments are one range, the qrels being sorted by
    query), in the order of ``rows``, and how many each row has."""
    low = np.searchsorted(qrels.query, rows, side="left")
    counts = np.searchsorted(qrels.query, rows, side="right") - low
    at: IntArray = np.repeat(low - np.concatenate(([0], np.cumsum(counts)[:-1])), counts) + np.arange(int(counts.sum()))
    return at, counts


def grades_by_query(qrels: Qrels, rows: IntArray | None = None) -> list[dict[str, int]]:
    """Per qrels query (or per row of ``rows``, in their order), its judgments as a dict (for registered measures
    and pools): a block's rows only, since making a dict of every judgment for each block of a run cost 0.3 s a
    block at 1,048,704 judgments."""
    rows = np.arange(len(qrels.queries)) if rows is None else rows
    at, counts = _judgments_of(qrels, rows)
    docs, grades = qrels.docs.take(pa.array(at)).to_pylist(), qrels.grades[at].tolist()
    bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
    return [dict(zip(docs[a:b], grades[a:b], strict=True)) for a, b in pairwise(bounds)]
