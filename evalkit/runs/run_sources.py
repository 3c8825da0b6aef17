"""Where a precomputed run's scores come from: a run in memory, or a large run file scored a segment at a time.

A TREC or JSONL run file larger than :data:`STREAM_SCORE_BYTES` is never read whole when its lines are grouped by
query (each query's lines together, as runs are written): :func:`score_source` hands its segments of complete query
groups (:func:`evalkit.data.run_stream.stream_trec_run`, :func:`~evalkit.data.run_stream.stream_jsonl_run`) to a
:class:`~evalkit.measures.core.RunScorer`, so memory is
bounded by a segment and the per-query values, not by the file. A run whose query's lines are apart (a query met in
two segments) is read whole instead and scored as any other, with a note saying it took the slower path; a file the
streamed parse refuses is read whole too, which names its bad lines.

Either way a source gives the same values and counts, and the same hash (:func:`evalkit.data.run_stream.run_sha256`,
taken while a file streams, and of a run in memory only when a report asks for it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa

from evalkit.common.progress import meter
from evalkit.data.qrels import Qrels
from evalkit.data.run_stream import run_sha256, stream_jsonl_run, stream_trec_run
from evalkit.data.runs import Run, is_jsonl_run, read_run
from evalkit.data.tables import STREAM_BYTES, Refused, TableError
from evalkit.measures.core import NotGrouped, RunScorer, RunScores, score_run
from evalkit.measures.registry import MeasureDef

__all__ = [
    "STREAM_SCORE_BYTES",
    "RunFile",
    "Scored",
    "Scoring",
    "abstain_below",
    "check_floor",
    "score_source",
    "streams",
]

STREAM_SCORE_BYTES: Final = STREAM_BYTES
"""TREC run files larger than this (on disk) are scored a segment at a time; smaller ones are read whole."""


@dataclass(frozen=True)
class RunFile:
    """A run file to be scored a segment at a time, under ``name`` when given (else its tag or file name)."""

    path: Path
    name: str | None = None


@dataclass(frozen=True)
class Scored:
    """One source's scores and what was read: its name, hash, distinct queries, the queries its floor withheld, its
    result lines as read (before the floor), and a note when a streamed file had to be read whole."""

    scores: RunScores
    name: str
    sha256: str | None
    """Its hash when reading it gave one (a run file read a segment at a time); None for a run in memory."""
    queries: int
    withheld: int
    lines: int
    note: str | None = None


def streams(run: object, max_bytes: int) -> bool:
    """Whether ``run`` is a run file to score a segment at a time (see the module docstring)."""
    if not isinstance(run, (str, Path)):
        return False
    path = Path(run)
    try:
        return path.is_file() and os.stat(path).st_size > min(STREAM_SCORE_BYTES, max_bytes)
    except OSError:
        return False


def check_floor(floor: float | None) -> None:
    """Refuse a floor that is not a finite number (None: no floor)."""
    if floor is not None and not math.isfinite(floor):
        raise ValueError(f"floor must be a finite number, got {floor!r}")


def abstain_below(run: Run, floor: float | None) -> tuple[Run, int]:
    """The run with every result of a query whose best score is below ``floor`` removed (the query still named),
    and how many queries abstained; unchanged when ``floor`` is None. A floor that is not finite is refused."""
    check_floor(floor)
    if floor is None:
        return run, 0
    best = np.full(len(run.queries), -np.inf)
    np.maximum.at(best, run.query, run.scores)
    keep = best[run.query] >= floor
    withheld = int(np.count_nonzero((best < floor) & np.isfinite(best)))
    kept = replace(run, query=run.query[keep], doc_ids=run.doc_ids.filter(pa.array(keep)), scores=run.scores[keep])
    return kept, withheld


@dataclass(frozen=True)
class Scoring:
    """How every source of one call is scored: the judgments, the measures and the policies."""

    qrels: Qrels
    measures: Sequence[MeasureDef]
    ties: str
    missing: str
    unjudged_k: int | None
    floor: float | None
    max_bytes: int

    def __post_init__(self) -> None:
        check_floor(self.floor)  # before any file is read, whichever way it is scored

    def whole(self, run: Run, note: str | None = None) -> Scored:
        """A run in memory, its floor applied."""
        floored, withheld = abstain_below(run, self.floor)
        scores = score_run(self.qrels, floored, self.measures, self.ties, self.missing, unjudged_k=self.unjudged_k)
        return Scored(scores, run.name, None, len(run.queries), withheld, run.lines, note)  # hashed on demand

    def streamed(self, source: RunFile) -> Scored:
        """A run file a segment at a time, or read whole when its lines are not grouped by query or the streamed
        parse refuses it (the whole read names its bad lines)."""
        scorer = RunScorer(self.qrels, self.measures, self.ties, self.missing, unjudged_k=self.unjudged_k)
        withheld = [0]

        def restart() -> None:
            scorer.restart()
            withheld[0] = 0

        try:
            with meter(f"scoring {source.name or Path(source.path).name}", "line") as bar:

                def consume(segment: Run) -> None:
                    floored, count = abstain_below(segment, self.floor)
                    withheld[0] += count
                    scorer.add(floored)
                    bar.update(segment.lines)

                if is_jsonl_run(source.path):
                    read = stream_jsonl_run(source.path, consume, self.max_bytes)
                else:
                    read = stream_trec_run(source.path, consume, restart, self.max_bytes)
        except NotGrouped:
            return self._read_whole(source, "its lines are not grouped by query")
        except (pa.ArrowInvalid, Refused, TableError):  # a bad file is refused by the whole read, naming its lines
            why = (
                "its lines could not be read a segment at a time (they do not all have the columns or separators of "
                "its first lines)"
            )
            return self._read_whole(source, why)
        name = source.name or read.name
        return Scored(scorer.result(name), name, read.sha256, read.queries, withheld[0], read.lines)

    def _read_whole(self, source: RunFile, why: str) -> Scored:
        """A run file read whole, `why` it could not be streamed said in its note (its source stays the file: hashed
        now, since it is not kept in memory)."""
        name = source.name or Path(source.path).name
        note = f"{name}: {why}, so it was read whole (the slower path: memory grows with the file)"
        run = read_run(source.path, self.max_bytes)
        scored = replace(self.whole(run, note), sha256=run_sha256(run))
        if source.name is None or source.name == scored.name:
            return scored
        return replace(scored, name=source.name, scores=replace(scored.scores, name=source.name))


def score_source(source: Run | RunFile, scoring: Scoring) -> Scored:
    """One source's scores (see the module docstring)."""
    return scoring.streamed(source) if isinstance(source, RunFile) else scoring.whole(source)
