"""Run files in and out: TREC 6-column runs and a JSONL form, read into plain tuples.

A TREC run line is ``qid Q0 docid rank score tag`` (whitespace-separated; columns past the sixth are ignored, as
trec_eval ignores them). A JSONL run holds one object per line, ``{"query_id": ..., "results": [{"chunk_id": ...,
"score": ...}, ...]}``; unknown keys are ignored. Blank lines are skipped in both.

Policies (the README's "Evaluate your own retriever" declares them):

- a malformed line (too few columns, a rank that is not an integer, a score that is not a finite number, a JSON
  line that is not such an object) raises :class:`RunFileError` naming the file and the line number;
- duplicate (query, chunk) lines are kept as read and counted; the tie policy later keeps the best-placed one;
- checked against a fixture (:func:`check_run`): a line for a query the fixture does not have is an error naming the
  line; a query of the fixture missing from the run scores as an empty ranking and is counted; a chunk ID the
  fixture does not have is kept (it is simply not relevant) and counted.

The rank column is read but not used for ordering: like trec_eval, evalkit orders a run by score (see
``evalkit.measures.ties``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.data.schema import is_identifier

__all__ = [
    "Run",
    "RunCoverage",
    "RunFileError",
    "check_run",
    "read_jsonl_run",
    "read_run",
    "read_trec_run",
    "trec_run_bytes",
]

Ranking = tuple[tuple[str, float], ...]
"""One query's results: (chunk ID, score) pairs in file order."""


class RunFileError(ValueError):
    """A run file that cannot be read: names the file and the line."""


@dataclass(frozen=True)
class Run:
    """A run as read: per query ID its (chunk ID, score) pairs in file order, and where each query first appeared."""

    name: str
    rankings: Mapping[str, Ranking]
    first_line: Mapping[str, int]
    lines: int
    duplicates: int


@dataclass(frozen=True)
class RunCoverage:
    """How a run covers a fixture: counts (and the first few IDs) of what the policies above repaired."""

    missing_queries: tuple[str, ...]
    unknown_chunks: tuple[str, ...]
    duplicates: int

    def describe(self) -> str:
        """One line with the counts."""
        return (
            f"{len(self.missing_queries)} fixture query(ies) missing from the run (scored as empty rankings), "
            f"{len(self.unknown_chunks)} unknown chunk ID(s) kept as not relevant, {self.duplicates} duplicate line(s)"
        )


class _Builder:
    def __init__(self) -> None:
        self.rankings: dict[str, list[tuple[str, float]]] = {}
        self.first_line: dict[str, int] = {}
        self.seen: set[tuple[str, str]] = set()
        self.lines = 0
        self.duplicates = 0
        self.tags: set[str] = set()

    def add(self, query_id: str, chunk_id: str, score: float, number: int) -> None:
        self.lines += 1
        self.first_line.setdefault(query_id, number)
        if (query_id, chunk_id) in self.seen:
            self.duplicates += 1
        self.seen.add((query_id, chunk_id))
        self.rankings.setdefault(query_id, []).append((chunk_id, score))

    def build(self, name: str) -> Run:
        return Run(
            name=name,
            rankings={q: tuple(r) for q, r in self.rankings.items()},
            first_line=dict(self.first_line),
            lines=self.lines,
            duplicates=self.duplicates,
        )


def _score(text: Any, where: str) -> float:
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise RunFileError(f"{where}: score {text!r} is not a number")
    try:
        value = float(text)
    except ValueError:
        raise RunFileError(f"{where}: score {text!r} is not a number") from None
    if not math.isfinite(value):
        raise RunFileError(f"{where}: score {text!r} is not finite")
    return value


def _name_from(path: Path, tags: Iterable[str]) -> str:
    """The run's ablation ID: its single tag when that is a valid ID, else the file name without suffix."""
    unique = sorted(set(tags))
    if len(unique) == 1 and is_identifier(unique[0]):
        return unique[0]
    stem = path.name.split(".")[0]
    if not is_identifier(stem):
        raise RunFileError(f"{path.name}: no usable run ID: the tag and the file name are not valid IDs")
    return stem


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RunFileError(f"{path.name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield number, line


def read_trec_run(path: Path) -> Run:
    """Read a TREC 6-column run file (``qid Q0 docid rank score tag``)."""
    builder = _Builder()
    for number, line in _lines(path):
        where = f"{path.name} line {number}"
        columns = line.split()
        if len(columns) < 6:
            raise RunFileError(f"{where}: expected 6 columns (qid Q0 docid rank score tag), got {len(columns)}")
        query_id, _, chunk_id, rank, score, tag = columns[:6]
        try:
            int(rank)
        except ValueError:
            raise RunFileError(f"{where}: rank {rank!r} is not an integer") from None
        builder.tags.add(tag)
        builder.add(query_id, chunk_id, _score(score, where), number)
    return builder.build(_name_from(path, builder.tags))


def read_jsonl_run(path: Path) -> Run:
    """Read a JSONL run: one ``{"query_id", "results": [{"chunk_id", "score"}]}`` object per line."""
    builder = _Builder()
    for number, line in _lines(path):
        where = f"{path.name} line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RunFileError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("query_id"), str):
            raise RunFileError(f"{where}: expected an object with a string query_id")
        results = record.get("results")
        if not isinstance(results, list):
            raise RunFileError(f"{where}: results must be a list")
        query_id = record["query_id"]
        builder.first_line.setdefault(query_id, number)
        builder.rankings.setdefault(query_id, [])
        for index, result in enumerate(results):
            item = f"{where} results[{index}]"
            if not isinstance(result, dict) or not isinstance(result.get("chunk_id"), str):
                raise RunFileError(f"{item}: expected an object with a string chunk_id")
            builder.add(query_id, result["chunk_id"], _score(result.get("score"), item), number)
    return builder.build(_name_from(path, ()))


def read_run(path: Path) -> Run:
    """Read a run file by its suffix: ``.jsonl`` is JSONL, anything else TREC."""
    if not path.is_file():
        raise RunFileError(f"run file {path.name} not found")
    return read_jsonl_run(path) if path.suffix == ".jsonl" else read_trec_run(path)


def check_run(run: Run, query_ids: Iterable[str], chunk_ids: Iterable[str]) -> RunCoverage:
    """Apply the fixture policies: unknown query -> error naming its first line; missing queries and unknown
    chunks counted."""
    queries = set(query_ids)
    unknown_queries = sorted((line, q) for q, line in run.first_line.items() if q not in queries)
    if unknown_queries:
        line, query_id = unknown_queries[0]
        raise RunFileError(
            f"run {run.name} line {line}: query {query_id!r} is not in the fixture "
            f"({len(unknown_queries)} unknown query ID(s) in all)"
        )
    chunks = set(chunk_ids)
    unknown = sorted({c for ranking in run.rankings.values() for c, _ in ranking if c not in chunks})
    return RunCoverage(
        missing_queries=tuple(sorted(queries - set(run.rankings))),
        unknown_chunks=tuple(unknown),
        duplicates=run.duplicates,
    )


def trec_run_bytes(rankings: Mapping[str, Sequence[tuple[str, float]]], tag: str) -> bytes:
    """A TREC run: per query (sorted by ID) one line per result in the given order, rank from 1, scores in their
    shortest exact form (``repr``), so reading the file back gives the same floats."""
    lines = [
        f"{query_id} Q0 {chunk_id} {rank} {float(score)!r} {tag}\n"
        for query_id in sorted(rankings)
        for rank, (chunk_id, score) in enumerate(rankings[query_id], 1)
    ]
    return "".join(lines).encode("utf-8")
