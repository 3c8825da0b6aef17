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

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.data.columns import IntArray, encode, lookup, position_ranges, sort_pairs
from evalkit.data.inputs import clip
from evalkit.data.qrels import Qrels
from evalkit.data.run_coverage import refuse_unscorable
from evalkit.data.runs import Run
from evalkit.measures.core import score_ranked
from evalkit.measures.ranked import BoolArray, FloatArray, Ranked
from evalkit.measures.registry import MAX_CUTOFF, parse_measure
from evalkit.measures.run_order import rank_run
from evalkit.measures.ties import DEFAULT_TIE_POLICY, SUMMATION_OF, tie_policy

__all__ = ["Pool", "PoolEntry", "PoolPairs", "RunPoolCounts", "build_pool", "format_pool_counts", "pool_jsonl"]


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


@dataclass(frozen=True, eq=False)
class PoolPairs:
    """The pool's pairs as columns, in output order: pair i is query ``query_ids[query[i]]`` and document
    ``doc_ids[i]``, brought in by run ``run_names[run[j]]`` at rank ``rank[j]`` for each j in
    ``offsets[i]:offsets[i + 1]`` (by rank, then run name; a pair's first is its best rank). A pool of two million
    pairs is a few arrays, not two million objects."""

    query_ids: pa.StringArray
    query: IntArray
    doc_ids: pa.StringArray
    run_names: tuple[str, ...]
    offsets: IntArray
    run: IntArray
    rank: IntArray

    def __len__(self) -> int:
        return len(self.query)

    @property
    def best_rank(self) -> IntArray:
        """Per pair, the best (lowest) rank any run gave it."""
        best: IntArray = self.rank[self.offsets[:-1]]
        return best

    @classmethod
    def from_entries(cls, entries: Sequence[PoolEntry]) -> PoolPairs:
        """The columns of `entries` (already in output order, each one's runs by rank, then run name)."""
        query_ids = list(dict.fromkeys(e.query_id for e in entries))
        run_names = list(dict.fromkeys(name for e in entries for name, _ in e.runs))
        where, named = {q: i for i, q in enumerate(query_ids)}, {n: i for i, n in enumerate(run_names)}
        return cls(
            pa.array(query_ids, type=pa.string()),
            np.array([where[e.query_id] for e in entries], dtype=np.int64),
            pa.array([e.doc_id for e in entries], type=pa.string()),
            tuple(run_names),
            np.cumsum([0, *(len(e.runs) for e in entries)], dtype=np.int64),
            np.array([named[name] for e in entries for name, _ in e.runs], dtype=np.int64),
            np.array([rank for e in entries for _, rank in e.runs], dtype=np.int64),
        )

    def entries(self) -> tuple[PoolEntry, ...]:
        """One :class:`PoolEntry` per pair (Python objects: for small pools and tests)."""
        query_ids, docs = self.query_ids.to_pylist(), self.doc_ids.to_pylist()
        runs = [(self.run_names[r], k) for r, k in zip(self.run.tolist(), self.rank.tolist(), strict=True)]
        bounds = self.offsets.tolist()
        return tuple(
            PoolEntry(query_ids[q], doc, tuple(runs[a:b]))
            for q, doc, a, b in zip(self.query.tolist(), docs, bounds[:-1], bounds[1:], strict=True)
        )

    def query_count(self) -> int:
        """How many queries the pairs are in (a query's pairs stand together)."""
        return 0 if not len(self) else 1 + int(np.count_nonzero(self.query[1:] != self.query[:-1]))


@dataclass(frozen=True, eq=False)
class Pool:
    """The pairs to label in output order (see the module docstring), and each run's counts in the order given."""

    depth: int
    ties: str
    pairs: PoolPairs
    counts: tuple[RunPoolCounts, ...]

    @cached_property
    def entries(self) -> tuple[PoolEntry, ...]:
        """The pairs as :class:`PoolEntry` objects (made on first use; the CLI never asks for them)."""
        return self.pairs.entries()


def _check_depth(depth: int) -> None:
    """Refuse a depth below 1 or past what a cutoff may be (``ValueError``)."""
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_CUTOFF:
        raise ValueError(
            f"the pool depth (--depth) must be a whole number from 1 to {MAX_CUTOFF:,}, got {clip(repr(depth))}"
        )


def _check_run(run: Run, names: Sequence[str], qrels: Qrels) -> None:
    """Refuse a run named as one before it (``names``), or none of whose queries the judgments hold
    (``ValueError`` naming the run)."""
    if run.name in names:
        raise ValueError(f"two runs are named {clip(repr(run.name))}; rename a file or change a tag")
    judged = lookup(run.queries, qrels.queries) >= 0
    first = run.queries[:1].to_pylist()
    source = f"the judgments ({clip(qrels.source)})"
    refuse_unscorable(run.name, len(run.queries), run.lines, int((~judged).sum()), source, first)


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
    """One run's part: its unjudged pairs within the depth as columns (qrels row, document ID, rank), its judged@k
    today and once labelled, and its queries the judgments do not hold."""

    row: IntArray
    doc_ids: pa.Array
    rank: IntArray
    judged_now: float | None
    judged_labelled: float | None
    left_out: int


def _run_pool(run: Run, qrels: Qrels, depth: int, ties: str) -> _RunPool:
    """:func:`build_pool`'s work on one run, one block of queries at a time, as the scoring core reads it."""
    ranked_run = rank_run(run, qrels, ties, SUMMATION_OF[ties], depth, with_ids=True)
    now, labelled = np.full(ranked_run.n, np.nan), np.full(ranked_run.n, np.nan)
    answerable = np.zeros(ranked_run.n, dtype=bool)
    rows: list[IntArray] = []
    docs: list[pa.Array] = []
    ranks: list[IntArray] = []
    for block_rows, ranked in ranked_run.blocks():
        judged = _judged(ranked)
        pooled = ~judged  # rank_run kept each query's first `depth` results: the unjudged ones join the pool
        rows.append(block_rows[ranked.row[pooled]])
        docs.append(pa.array(ranked.doc_ids or [], type=pa.string()).filter(pa.array(pooled)))
        ranks.append(ranked.rank[pooled])
        now[block_rows], answerable[block_rows] = _judged_at(ranked, judged, depth)
        labelled[block_rows] = _judged_at(ranked, judged | pooled, depth)[0]
    return _RunPool(
        np.concatenate([np.zeros(0, dtype=np.int64), *rows]),
        pa.concat_arrays([pa.array([], type=pa.string()), *docs]),
        np.concatenate([np.zeros(0, dtype=np.int64), *ranks]),
        _mean(now, answerable),
        _mean(labelled, answerable),
        ranked_run.counts.unjudged_queries,
    )


def _sort_order(keys: Sequence[IntArray]) -> IntArray:
    """The positions that sort by ``keys`` (non-negative integers, the most significant first), stably: one sort
    of a single int64 key when their ranges multiply to less than 2^63 (on the 2 million pairs of two
    10-million-line runs, 0.07 s where ``np.lexsort`` took 0.6 s), else ``np.lexsort``."""
    combined = np.zeros(len(keys[0]), dtype=np.int64)
    span = 1
    for key in keys:
        width = int(key.max()) + 1 if len(key) else 1
        span *= width
        if span >= 2**63:
            order: IntArray = np.lexsort(keys[::-1])
            return order
        combined = combined * width + key
    order = np.argsort(combined, kind="stable")
    return order


def _union(parts: Sequence[_RunPool], names: Sequence[str], queries: pa.StringArray) -> tuple[PoolPairs, IntArray]:
    """The pairs of every run's part, each once with the runs that brought it, in output order; and per run the
    pairs that only it brings. ``queries`` are the qrels' query IDs (the parts' rows index them).

    One Arrow sort by (qrels row, document ID) numbers the pairs in code-point order of their IDs within each
    query (on two 10-million-line runs, 0.1-0.2 s, where placing each ID among all the pooled IDs took 0.5 s);
    the rest are sorts of integer keys."""
    by_name = np.argsort(np.array(sorted(range(len(names)), key=names.__getitem__), dtype=np.int64))
    run = np.repeat(np.arange(len(parts), dtype=np.int64), [len(part.row) for part in parts])
    row = np.concatenate([part.row for part in parts])
    rank = np.concatenate([part.rank for part in parts])
    docs = pa.concat_arrays([part.doc_ids for part in parts])
    members, _, same = sort_pairs(row, docs)
    pair = np.cumsum(np.concatenate(([True], ~same))) - 1  # by qrels row, then document ID
    by_rank = _sort_order([pair, rank[members], by_name[run[members]]])  # each pair's runs by rank, then name
    members, pair = members[by_rank], pair[by_rank]
    row, rank, run = row[members], rank[members], run[members]
    new = np.ones(len(pair), dtype=bool)
    new[1:] = pair[1:] != pair[:-1]
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, len(pair)))
    only = np.bincount(run[np.repeat(sizes, sizes) == 1], minlength=len(parts))
    query = encode(queries).codes.astype(np.int64)[row[starts]]  # each query ID's place in code-point order
    order = _sort_order([query, rank[starts], pair[starts]])  # query ID, best rank, document ID
    starts, sizes = starts[order], sizes[order]
    taken = position_ranges(starts, sizes)
    columns = PoolPairs(
        queries,
        row[starts],
        docs.take(pa.array(members[starts])),
        tuple(names),
        np.concatenate(([0], np.cumsum(sizes))).astype(np.int64),
        run[taken],
        rank[taken],
    )
    return columns, only


def build_pool(qrels: Qrels, runs: Iterable[Run], depth: int, ties: str = DEFAULT_TIE_POLICY) -> Pool:
    """The unjudged pairs in the union of each run's first `depth` results under the tie policy `ties`, and what
    each run brings (see the module docstring and :class:`RunPoolCounts`).

    Every run's pairs are columns (one array each for qrels row, document ID, rank and run), and the union, the
    runs that brought each pair and the order are sorts and groupings of those columns (:func:`_union`), never a
    Python object per pair.

    `runs` may be an iterator: each run is pooled and let go before the next is taken, so a caller that reads run
    files as they are asked for holds one run at a time (two 10-million-line runs: 0.87 GB at peak, not 1.5 GB).

    Raises ``ValueError`` for a depth below 1, an unknown tie policy, no run, two runs with one name, or a run none
    of whose queries the judgments hold."""
    tie_policy(ties)
    _check_depth(depth)
    parts: list[_RunPool] = []
    names: list[str] = []
    for run in runs:
        _check_run(run, names, qrels)
        parts.append(_run_pool(run, qrels, depth, ties))
        names.append(run.name)
        del run  # before the next run is read
    if not parts:
        raise ValueError("a pool needs at least one run")
    pairs, only = _union(parts, names, qrels.queries)
    counts = tuple(
        RunPoolCounts(name, len(part.row), int(alone), part.judged_now, part.judged_labelled, part.left_out)
        for name, part, alone in zip(names, parts, only.tolist(), strict=True)
    )
    return Pool(depth, ties, pairs, counts)


_JSON_ESCAPED = r'["\\\x00-\x1f]'
"""The characters ``json.dumps(..., ensure_ascii=False)`` escapes in a string (as RE2 spells the class)."""

POOL_LINES_BLOCK: Final = 1 << 18
""":func:`pool_jsonl` writes this many pairs at a time (bounds the memory of its temporary columns)."""

_TEXT = pa.large_string()
"""The type of the text :func:`pool_jsonl` assembles: 64-bit offsets, so that no block overflows, however long
its IDs."""


def _concat(*columns: pa.Array | str) -> pa.Array:
    """Element-wise concatenation of text columns (of type :data:`_TEXT`) and literal texts."""
    parts = [pa.scalar(c, _TEXT) if isinstance(c, str) else c for c in columns]
    return pc.binary_join_element_wise(*parts, pa.scalar("", _TEXT))


def _numbers(values: IntArray) -> pa.Array:
    """Whole numbers as JSON writes them."""
    return pa.array(values).cast(_TEXT)


def _json_strings(values: pa.Array) -> pa.Array:
    """Each string as ``json.dumps(value, ensure_ascii=False)`` writes it: quoted, and the few that hold a quote, a
    backslash or a control character encoded by :mod:`json` itself."""
    values = values.cast(_TEXT)
    quoted = _concat('"', values, '"')
    escaped = np.flatnonzero(pc.match_substring_regex(values, _JSON_ESCAPED).to_numpy(zero_copy_only=False))
    if not len(escaped):
        return quoted
    encoded = [json.dumps(value, ensure_ascii=False) for value in values.take(pa.array(escaped)).to_pylist()]
    index = np.arange(len(values), dtype=np.int64)
    index[escaped] = len(values) + np.arange(len(escaped))
    return pa.concat_arrays([quoted, pa.array(encoded, type=_TEXT)]).take(pa.array(index))


def _line_starts(pairs: PoolPairs, known: Mapping[str, str]) -> tuple[pa.Array, IntArray]:
    """Per query of the pool, the text of its lines up to the document ID (``{"query_id": ..., "language": ...,
    "doc_id": ``), and per pair the place of its query in that list."""
    new = np.ones(len(pairs), dtype=bool)
    new[1:] = pairs.query[1:] != pairs.query[:-1]
    query_ids = pairs.query_ids.take(pa.array(pairs.query[new]))
    language: pa.Array | str = ""
    if known:
        texts = {name: f', "language": {json.dumps(name, ensure_ascii=False)}' for name in set(known.values())}
        language = pa.array([texts[known[q]] if q in known else "" for q in query_ids.to_pylist()], type=_TEXT)
    place: IntArray = np.cumsum(new) - 1
    return _concat('{"query_id": ', _json_strings(query_ids), language, ', "doc_id": '), place


def _runs_text(pairs: PoolPairs, low: int, high: int, run_starts: pa.Array) -> pa.Array:
    """Per pair of ``low:high``, its runs as JSON writes them, without the brackets."""
    first, last = int(pairs.offsets[low]), int(pairs.offsets[high])
    runs = _concat(run_starts.take(pa.array(pairs.run[first:last])), _numbers(pairs.rank[first:last]), "}")
    bounds = pa.array(pairs.offsets[low : high + 1] - first, type=pa.int64())
    return pc.binary_join(pa.LargeListArray.from_arrays(bounds, runs), pa.scalar(", ", _TEXT))


def _text_bytes(text: pa.Array) -> pa.Buffer:
    """The bytes of a :data:`_TEXT` array's values, one after the other (no copy)."""
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)
    low, high = int(offsets[text.offset]), int(offsets[text.offset + len(text)])
    return text.buffers()[2].slice(low, high - low)


def pool_jsonl(pool: Pool, languages: Mapping[str, str] | None = None, chunk_ids: bool = False) -> bytes:
    """The pool as UTF-8 JSON lines, one pair a line: ``query_id``, ``language`` (when `languages` knows the
    query), ``doc_id`` (and ``chunk_id``, the same ID, when `chunk_ids`: the documents are a fixture's chunks),
    ``best_rank`` and ``runs`` (``[{"run": name, "rank": r}, ...]``, by rank, then run name): the bytes
    ``json.dumps(line, ensure_ascii=False)`` gives, assembled column by column, :data:`POOL_LINES_BLOCK` pairs at a
    time, each query, run name and unusual document ID encoded by :mod:`json` once."""
    pairs = pool.pairs
    line_starts, place = _line_starts(pairs, languages or {})
    run_starts = pa.array(
        [f'{{"run": {json.dumps(name, ensure_ascii=False)}, "rank": ' for name in pairs.run_names], type=_TEXT
    )
    out = io.BytesIO()  # grows in place: the bytes are held once, not once in blocks and again joined
    for low in range(0, len(pairs), POOL_LINES_BLOCK):
        high = min(low + POOL_LINES_BLOCK, len(pairs))
        doc = _json_strings(pairs.doc_ids.slice(low, high - low))
        text = _concat(
            line_starts.take(pa.array(place[low:high])),
            doc,
            *([', "chunk_id": ', doc] if chunk_ids else []),
            ', "best_rank": ',
            _numbers(pairs.rank[pairs.offsets[low:high]]),
            ', "runs": [',
            _runs_text(pairs, low, high, run_starts),
            "]}\n",
        )
        out.write(_text_bytes(text))
    return out.getvalue()


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def format_pool_counts(pool: Pool) -> str:
    """What the pool holds and, per run, the pairs it brings (in all, and that only it brings) and its ``judged@k``
    today and once the pool is labelled; then a note per run whose queries the judgments do not all hold."""
    queries = pool.pairs.query_count()
    k = f"judged@{pool.depth}"
    width = max([len("run"), *(len(c.run) for c in pool.counts)])
    header = f"{'run':<{width}}  {'pairs':>7}  {'only':>7}  {k + ' now':>{len(k) + 4}}  {k + ' labelled':>{len(k) + 9}}"
    lines = [
        f"pool: {len(pool.pairs)} unjudged pair(s) in {queries} query(ies) to label "
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
