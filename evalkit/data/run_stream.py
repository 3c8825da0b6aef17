"""A TREC or JSONL run read a segment at a time: whole query groups handed on as they are parsed, never the whole
file. (A JSONL run's segments are whole lines, :func:`stream_jsonl_run`; the rest of this docstring is the TREC
reader's.)

A run written the usual way holds each query's lines together. :func:`stream_trec_run` parses the file block by
block through the guarded door (:func:`evalkit.data.tables.read_columns`, with every block checked as
:func:`evalkit.data.runs.read_trec_run` checks it) and, about every :data:`SEGMENT_LINES` lines, hands ``consume``
a :class:`~evalkit.data.runs.Run` of the complete query groups read so far; the last query's lines wait for the
next segment, since more of them may follow. Only a segment's columns are in memory at once, so memory is bounded
by the segment, not by the file.

Whether the run really is grouped by query is for the consumer to tell (a query met in two segments); it then
raises, and the caller reads the file whole instead (:func:`evalkit.data.runs.read_trec_run`). A file the parser
refuses raises :class:`pyarrow.ArrowInvalid` or :class:`~evalkit.data.tables.Refused` as for the whole read, and
the caller names its bad lines the same way. When a later block shows that the file's separators need normalising,
the file is read again from its start: ``restart`` is called first, so that the consumer forgets what it was given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.data.columns import Codes
from evalkit.data.json_lines import json_line_segments, json_lines_table
from evalkit.data.runs import (
    _TREC_COLUMNS,
    _TREC_TYPES,
    JSONL_SCHEMA,
    Run,
    RunFileError,
    _first_tag,
    _name_from,
    _refuses,
    _run,
    _TrecBlocks,
    is_jsonl_run,
    jsonl_columns,
)
from evalkit.data.tables import DEFAULT_MAX_TABLE_BYTES, Refused, read_columns, release_unused

__all__ = [
    "SEGMENT_BYTES",
    "SEGMENT_LINES",
    "RunDigest",
    "StreamedRun",
    "run_file_name",
    "run_sha256",
    "stream_jsonl_run",
    "stream_trec_run",
]

SEGMENT_LINES: Final = 1 << 21
"""Lines gathered before the complete query groups among them are handed on (about 70 MB of a typical run file)."""
SEGMENT_BYTES: Final = 1 << 26
"""Bytes of a JSONL run file parsed at a time (64 MiB: about 1.6 million results)."""


_NOTHING: Final = pa.RecordBatch.from_arrays([pa.array([], type=pa.string())], names=["doc"])
"""What the reader keeps of a block once its lines are gathered: nothing."""


class RunDigest:
    """SHA-256 of a run's content in file order (each line's query ID, document ID and score), the same whether the
    run is given whole or a segment of whole query groups at a time: each kind of bytes goes to its own running
    digest (query IDs once per group of consecutive lines, with the group's size), and the digests are hashed
    together at the end."""

    def __init__(self) -> None:
        self._parts = [hashlib.sha256() for _ in range(6)]

    def update(self, run: Run) -> None:
        """Add the run's lines, in order."""
        codes = run.query
        starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1]))) if len(codes) else codes
        self._strings(run.queries.take(pa.array(codes[starts])), 0)
        self._parts[2].update(np.diff(np.append(starts, len(codes))).astype(np.int64).tobytes())
        chunks = run.doc_ids.chunks if isinstance(run.doc_ids, pa.ChunkedArray) else [run.doc_ids]
        for chunk in chunks:
            self._strings(chunk, 3)
        self._parts[5].update(np.ascontiguousarray(run.scores, dtype=np.float64).tobytes())

    def _strings(self, column: pa.Array, first: int) -> None:
        """A string column's lengths to digest ``first`` and its bytes to the next."""
        column = column.cast(pa.string())
        self._parts[first].update(np.asarray(pc.binary_length(column), dtype=np.int64).tobytes())
        if len(column) == 0:
            return
        offsets = np.frombuffer(column.buffers()[1], dtype=np.int32, count=len(column) + 1, offset=column.offset * 4)
        data = column.buffers()[2]
        if data is not None:
            self._parts[first + 1].update(memoryview(data)[int(offsets[0]) : int(offsets[-1])])

    def hexdigest(self) -> str:
        """The run's hash."""
        return hashlib.sha256("".join(part.hexdigest() for part in self._parts).encode("ascii")).hexdigest()


def run_sha256(run: Run) -> str:
    """:class:`RunDigest` of a whole run."""
    digest = RunDigest()
    digest.update(run)
    return digest.hexdigest()


@dataclass
class StreamedRun:
    """What streaming a run file found: its name, its lines, its distinct queries and its hash."""

    name: str
    lines: int = 0
    queries: int = 0
    sha256: str = ""
    _digest: RunDigest = field(default_factory=RunDigest, repr=False)


def _last_group_start(batches: list[pa.RecordBatch]) -> tuple[int, int] | None:
    """Where the last query's lines begin, as (batch index, line within it); None when every line is of that
    query (no complete group yet)."""
    last = batches[-1].column("query")
    target = last[len(last) - 1]
    for b in range(len(batches) - 1, -1, -1):
        other = np.flatnonzero(pc.not_equal(batches[b].column("query"), target).to_numpy(zero_copy_only=False))
        if len(other):
            return b, int(other[-1]) + 1
    return None


def _named(query: Codes) -> Codes:
    """The codes with only the queries that have lines: a block cut in two keeps its whole dictionary, and a query
    of the other part must not be named here (it would count as a query that returned nothing)."""
    used = np.bincount(query.codes, minlength=len(query.values)) > 0
    if used.all():
        return query
    renumber = (np.cumsum(used) - 1).astype(np.int32)
    return Codes(query.values.filter(pa.array(used)), renumber[query.codes])


class _Segments:
    """The ``keep`` of :func:`read_columns`: checks each block, gathers blocks, and hands on complete query groups."""

    def __init__(self, name: str, consume: Callable[[Run], None], restart: Callable[[], None]) -> None:
        self.name, self.consume, self.on_restart = name, consume, restart
        self.restart()

    def restart(self) -> None:
        self.pending: list[pa.RecordBatch] = []
        self.lines = 0
        self.result = StreamedRun(self.name)
        self.on_restart()

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if _refuses(batch):
            raise Refused
        if batch.num_rows:
            self.pending.append(batch.drop_columns(["tag"]))  # checked: its buffers need not wait for the segment
            self.lines += batch.num_rows
        if self.lines >= SEGMENT_LINES:
            cut = _last_group_start(self.pending)
            if cut is not None:
                b, at = cut
                done = [*self.pending[:b], self.pending[b].slice(0, at)]
                self.pending = [self.pending[b].slice(at), *self.pending[b + 1 :]]
                self.lines = sum(p.num_rows for p in self.pending)
                self._hand_on(done)
        return _NOTHING  # not a slice of the block: that would keep the block's buffers alive to the end

    def flush(self) -> None:
        """Hand on what is left once the file is read."""
        done, self.pending, self.lines = self.pending, [], 0
        self._hand_on(done)

    def _hand_on(self, batches: list[pa.RecordBatch]) -> None:
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        blocks = _TrecBlocks(check=False)
        docs = [blocks(b).column("doc") for b in batches]
        query, scores = _named(blocks.query()), blocks.all_scores()
        run = _run(self.name, query, pa.chunked_array(docs, type=pa.string()), scores, len(scores))
        self.result.lines += run.lines
        self.result.queries += len(run.queries)
        self.result._digest.update(run)
        self.consume(run)
        release_unused()


def run_file_name(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> str:
    """The name a run file's run goes by: a TREC run's is the tag of its first line when that is a valid ID, else
    the file name without suffix, as :func:`evalkit.data.runs.read_trec_run` names it; a JSONL run's is its file
    name without suffix."""
    path = Path(path)
    return _name_from(path, None if is_jsonl_run(path) else _first_tag(path, max_bytes))


def stream_jsonl_run(
    path: Path, consume: Callable[[Run], None], max_bytes: int = DEFAULT_MAX_TABLE_BYTES
) -> StreamedRun:
    """Read a JSONL run file about :data:`SEGMENT_BYTES` of whole lines at a time, handing each segment's run to
    ``consume`` (a query's results are together when it is on one line, as JSONL runs are written); returns what
    was read. Raises :class:`~evalkit.data.tables.Refused` when a segment, or the file's name, needs what only the
    whole read decides (:func:`evalkit.data.runs.read_jsonl_run`, which names a bad line)."""
    path = Path(path)
    try:
        result = StreamedRun(_name_from(path, None))
    except RunFileError:
        raise Refused from None
    for data in json_line_segments(path, max_bytes, SEGMENT_BYTES):
        table = None if data is None else json_lines_table(data, JSONL_SCHEMA)
        run = None if table is None else jsonl_columns(result.name, table)
        if run is None:
            raise Refused
        result.lines += run.lines
        result.queries += len(run.queries)
        result._digest.update(run)
        consume(run)
        release_unused()
    result.sha256 = result._digest.hexdigest()
    return result


def stream_trec_run(
    path: Path,
    consume: Callable[[Run], None],
    restart: Callable[[], None],
    max_bytes: int = DEFAULT_MAX_TABLE_BYTES,
) -> StreamedRun:
    """Read a TREC run file a segment of complete query groups at a time (see the module docstring), handing each
    to ``consume``; returns what was read. Raises what :func:`read_columns` raises on a file it cannot read."""
    path = Path(path)
    segments = _Segments(run_file_name(path, max_bytes), consume, restart)
    read_columns(path, _TREC_COLUMNS, _TREC_TYPES, max_bytes, keep=segments, restart=segments.restart)
    segments.flush()
    result = segments.result
    result.sha256 = result._digest.hexdigest()
    return result
