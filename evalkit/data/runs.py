"""Run files in and out: TREC 6-column runs and a JSONL form, read into one columnar :class:`Run`.

A TREC run line is ``qid Q0 docid rank score tag``, columns separated by any run of spaces or tabs; columns past the
sixth are ignored when every line has the same number of them (as trec_eval ignores them). A JSONL run holds one
object per line, ``{"query_id": ..., "results": [{"chunk_id": ..., "score": ...}, ...]}``; unknown keys are ignored.
Blank lines are skipped in both. Either may be gzip-compressed (recognised by its bytes, whatever its name).

TREC runs are parsed by pyarrow's CSV reader (:mod:`evalkit.data.tables`), JSONL runs by its JSON reader
(:mod:`evalkit.data.json_lines`), never by a Python loop over lines; a file either reader refuses is read again
line by line, only to name the line and field.

Policies (the docs' "Score a run file" page declares them):

- a malformed line (too few columns, a score that is not a finite number, a query ID, document ID or tag with a
  control or bidirectional character, a JSON line that is not such an object) raises :class:`RunFileError` naming
  the file, the line number (the first 20 of them) and the field;
- duplicate (query, document) lines are kept as read; the tie policy later keeps the best-placed one, and the
  scoring core counts them;
- checked against a fixture (:func:`evalkit.data.run_coverage.check_run`): a query the fixture does not have is
  left out and counted; a query of the fixture missing from the run scores as an empty ranking and is counted; a
  chunk ID the fixture does not have is kept (it is simply not relevant) and counted.

The ``Q0`` and rank columns are not read, as trec_eval reads neither: a run is ordered by score (see
``evalkit.measures.ties``), and named by the tag of its first line (trec_eval's ``runid``) when that is a valid
ID, else by its file name. Every line's tag is checked as the IDs are (no control or bidirectional character, valid
UTF-8), since a tag is text a terminal may be shown.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.common.threads import beside, scoring_threads
from evalkit.data.bad_lines import block_check, diagnose
from evalkit.data.columns import CodeArray, Codes, encode, value_runs
from evalkit.data.ids import given_id_problem, has_bad_ids, has_refused_given_ids, id_problem
from evalkit.data.inputs import InputError, clip, loads_strict
from evalkit.data.json_lines import read_json_lines
from evalkit.data.schema import is_identifier
from evalkit.data.tables import (
    DEFAULT_MAX_TABLE_BYTES,
    STREAM_BYTES,
    Refused,
    TableError,
    count_lines,
    read_columns,
    release_unused,
    split_fields,
    text_lines,
)

__all__ = [
    "JSONL_SCHEMA",
    "Ranking",
    "Run",
    "RunFileError",
    "given_score_problem",
    "is_jsonl_run",
    "jsonl_columns",
    "read_jsonl_run",
    "read_run",
    "read_trec_run",
    "run_from_rankings",
]

Ranking = tuple[tuple[str, float], ...]
"""The ranked-list type: one query's results as (chunk ID, score) pairs, as a system returned them or a run file
holds them (in file order). Every system returns it, the shards exchange it and the tie policies order it."""
FloatArray = npt.NDArray[np.float64]
_TREC_COLUMNS = ("query", "_q0", "doc", "_rank", "score", "tag")
_TREC_TYPES = {  # plain strings: the parser's dictionary conversion hashes every line (see value_runs)
    "query": pa.string(),
    "doc": pa.string(),
    "score": pa.float64(),
    "tag": pa.string(),  # checked by its bytes' range (printable ASCII), which costs less than hashing each tag
}
_NUMBER = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE)
"""A score as the columnar parser reads it (decimal ASCII digits; inf and nan are then refused as not finite).
Python's float() would also take "1_0" or non-ASCII digits, which trec_eval's atof() reads otherwise."""


class RunFileError(ValueError):
    """A run file that cannot be read: names the file and the line."""


@dataclass(frozen=True, eq=False)
class Run:
    """A run as read, columnar: one row per result line, in file order.

    ``queries`` holds every query ID the run names (sorted; a JSONL query with no results is one too),
    ``query[i]`` is row i's code into ``queries``, ``doc_ids[i]`` its document ID (a chunked array, as parsed, block
    by block) and ``scores[i]`` its score.
    Document IDs stay as read: only the ones a measure can see are ever encoded (see
    :func:`evalkit.measures.ranked.rank_run`).
    """

    name: str
    queries: pa.StringArray
    query: CodeArray
    doc_ids: pa.ChunkedArray
    scores: FloatArray
    lines: int

    @cached_property
    def _doc_codes(self) -> Codes:
        return encode(self.doc_ids)

    @property
    def docs(self) -> pa.StringArray:
        """The distinct document IDs, sorted."""
        return self._doc_codes.values

    @property
    def doc(self) -> CodeArray:
        """Row i's code into :attr:`docs`."""
        return self._doc_codes.codes

    @property
    def duplicates(self) -> int:
        """Rows that repeat an earlier row's (query, document) pair."""
        if len(self.query) == 0:
            return 0
        keys = self.query.astype(np.int64) * max(len(self.docs), 1) + self.doc
        return int(len(keys) - len(np.unique(keys)))

    @cached_property
    def rankings(self) -> Mapping[str, Ranking]:
        """Per query ID its (document ID, score) pairs in file order (a Python view, for small runs)."""
        queries = self.queries.to_pylist()
        grouped: dict[str, list[tuple[str, float]]] = {q: [] for q in queries}
        for q, d, s in zip(self.query.tolist(), self.doc_ids.to_pylist(), self.scores.tolist(), strict=True):
            grouped[queries[q]].append((d, s))
        return {q: tuple(pairs) for q, pairs in grouped.items()}


def _run(name: str, query: Codes, doc_ids: pa.Array | pa.ChunkedArray, scores: FloatArray, lines: int) -> Run:
    if isinstance(doc_ids, pa.Array):
        doc_ids = pa.chunked_array([doc_ids], type=pa.string())
    return Run(name, query.values, query.codes, doc_ids, scores.astype(np.float64, copy=False), lines)


def given_score_problem(score: object) -> str | None:
    """What is wrong with a score given in Python (a real number that is finite as a float is right), or None."""
    if not isinstance(score, numbers.Real) or isinstance(score, (bool, np.bool_)):
        return "is not a number"
    try:
        value = float(score)
    except OverflowError:
        return "is out of the floating-point range"
    return None if math.isfinite(value) else "is not finite"


def run_from_rankings(name: str, rankings: Mapping[str, Sequence[tuple[str, float]]]) -> Run:
    """A run from per-query (document ID, score) pairs; a query with no pairs is kept (it returned nothing)."""
    for query_id, pairs in rankings.items():
        if not isinstance(query_id, str) or any(not isinstance(d, str) for d, _ in pairs):
            raise RunFileError(
                f"run {clip(repr(name))}: query {clip(repr(query_id))}: query and document IDs are strings"
            )
        for doc_id, score in pairs:
            problem = given_score_problem(score)
            if problem is not None:
                where = f"run {clip(repr(name))}: query {clip(repr(query_id))} document {clip(repr(doc_id))}"
                raise RunFileError(f"{where}: score {clip(repr(score))} {problem}")
    queries = [q for q, pairs in rankings.items() for _ in pairs]
    docs = [d for pairs in rankings.values() for d, _ in pairs]
    for value, field in [*((q, "query_id") for q in rankings), *((d, "doc_id") for d in docs)]:
        problem = given_id_problem(value, field, f"run {clip(repr(name))}")
        if problem is not None:
            raise RunFileError(problem)
    scores = np.array([float(s) for pairs in rankings.values() for _, s in pairs], dtype=np.float64)
    query = encode(pa.array([*queries, *rankings], type=pa.string()))
    codes = Codes(query.values, query.codes[: len(queries)])
    return _run(name, codes, pa.array(docs, type=pa.string()), scores, len(docs))


def _name_from(path: Path, tag: str | None) -> str:
    """The run's system ID: the tag of its first line when that is a valid ID, else the file name without suffix."""
    if tag is not None and is_identifier(tag):
        return tag
    stem = path.name.split(".")[0]
    if not is_identifier(stem):
        raise RunFileError(f"{clip(path.name)}: no usable run ID: the tag and the file name are not valid IDs")
    return stem


def _trec_line_problem(fields: list[str], where: str) -> str | None:
    if len(fields) < 6:
        return f"{where}: expected 6 columns (qid Q0 docid rank score tag), got {len(fields)}"
    query_id, _, doc_id, _, score, _ = fields[:6]
    problem = _score_problem(score, where)
    if problem is not None:
        return problem
    for value, name in ((query_id, "qid"), (doc_id, "docid"), (fields[5], "tag")):
        problem = id_problem(value, name, where)
        if problem is not None:
            return problem
    return None


def _score_problem(text: Any, where: str) -> str | None:
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        return f"{where}: score {clip(repr(text))} is not a number"
    if isinstance(text, str) and not _NUMBER.fullmatch(text):
        return f"{where}: score {clip(repr(text))} is not a number"
    try:
        value = float(text)
    except (ValueError, OverflowError):
        return f"{where}: score {clip(repr(text))} is not a number"
    if not math.isfinite(value):
        return f"{where}: score {clip(repr(text))} is not finite"
    return None


_IRREGULAR_BLOCK: Final = 1 << 20
""":func:`_irregular_trec` turns this many lines at a time into columns, so a big file is never held as Python
strings (a 560 MB run with one line of seven columns took 5.1 GB as lists of every ID and score)."""


def _irregular_trec(path: Path, max_bytes: int) -> Run:
    """A valid run whose lines have different numbers of columns (extra ones ignored): read line by line, a block
    of :data:`_IRREGULAR_BLOCK` lines at a time into columns."""
    queries: list[pa.Array] = []
    docs: list[pa.Array] = []
    scores: list[FloatArray] = []
    block: tuple[list[str], list[str], list[float]] = ([], [], [])

    def flush() -> None:
        queries.append(pa.array(block[0], type=pa.string()))
        docs.append(pa.array(block[1], type=pa.string()))
        scores.append(np.array(block[2], dtype=np.float64))
        for column in block:
            column.clear()

    for _, line in text_lines(path, max_bytes):
        fields = split_fields(line)
        if fields:
            block[0].append(fields[0])
            block[1].append(fields[2])
            block[2].append(float(fields[4]))
            if len(block[2]) == _IRREGULAR_BLOCK:
                flush()
    flush()
    lines = sum(len(part) for part in scores)
    return _run(
        _name_from(path, _first_tag(path, max_bytes)),
        encode(pa.chunked_array(queries, type=pa.string())),
        pa.chunked_array(docs, type=pa.string()),
        np.concatenate(scores),
        lines,
    )


def _refuses(batch: pa.RecordBatch) -> bool:
    """Whether a parsed block of a TREC run holds a score that is not finite, or an ID or tag the readers refuse."""
    scores = batch.column("score").to_numpy()
    return (
        not np.isfinite(scores).all()
        or has_bad_ids(batch.column("doc"))
        or has_bad_ids(batch.column("query"))
        or has_bad_ids(batch.column("tag"))
    )


class _TrecBlocks:
    """Checks each parsed block of a TREC run and keeps what the run needs of it: each line's query as a 32-bit
    code, its score, and the block's document-ID column (the rest of the block is dropped at once).

    A line's query is first kept as its position in the blocks' query values laid end to end (each block has its
    own: :func:`~evalkit.data.columns.value_runs`, each run of lines of one query once); :meth:`query` encodes
    those values once and turns positions into codes. With ``capacity`` (at least the number of lines), positions
    and scores go straight into arrays of that size, so the whole run is never held twice, and positions become
    codes in place; without it, each block's positions and scores are kept (the scores as views of the parsed
    block) and copied once, the positions looked up straight into the joined codes (no second pass: 30-60 ms less
    of 1.9 s, 10 MB less, on the 10-million-line benchmark run, one thread). Without ``check`` a block is taken as
    checked already (:mod:`evalkit.data.run_stream` checks each block as it is parsed)."""

    def __init__(self, capacity: int | None = None, check: bool = True) -> None:
        self.capacity, self.check = capacity, check
        self.restart()

    def restart(self) -> None:
        """Forget every block kept (the file is read again from its first block)."""
        capacity = self.capacity
        self.values: list[pa.Array] = []  # each block's query values (value_runs)
        self.entries = 0
        self.codes: list[tuple[CodeArray, int]] = []  # positions into a block's query values, and where they start
        self.scores: list[FloatArray] = []
        self.lines = 0
        self.filled: tuple[CodeArray, FloatArray] | None = None
        if capacity is not None:
            self.filled = (np.empty(capacity, dtype=np.int32), np.empty(capacity, dtype=np.float64))

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.check and _refuses(batch):
            raise Refused
        scores = batch.column("score").to_numpy()
        values, indices = value_runs(batch.column("query"))
        first = self.entries
        self.values.append(values)
        self.entries += len(values)
        end = self.lines + len(scores)
        if self.filled is not None and end <= len(self.filled[1]):
            np.add(indices, np.int32(first), out=self.filled[0][self.lines : end])
            self.filled[1][self.lines : end] = scores
        else:
            if self.filled is not None:  # more lines than counted (it cannot happen): keep blocks from here on
                self.codes.append((self.filled[0][: self.lines], 0))
                self.scores.append(self.filled[1][: self.lines])
                self.filled = None
            self.codes.append((indices, first))  # views of the parsed block's buffers: copied once, at the end
            self.scores.append(scores)
        self.lines = end
        return pa.RecordBatch.from_arrays([batch.column("doc")], names=["doc"])

    def query(self) -> Codes:
        """Every line's query code into the sorted query IDs."""
        entries = (
            pa.concat_arrays([v.cast(pa.string()) for v in self.values])
            if self.values
            else pa.array([], type=pa.string())
        )
        encoded = encode(entries)
        if self.filled is not None:
            codes = self.filled[0][: self.lines]
            for start in range(0, len(codes), 1 << 24):  # in place, a slice at a time: no second array of codes
                codes[start : start + (1 << 24)] = encoded.codes[codes[start : start + (1 << 24)]]
            return Codes(encoded.values, codes)
        codes = np.empty(self.lines, dtype=np.int32)
        end = 0
        for positions, first in self.codes:  # each block's positions looked up straight into the joined array
            np.take(encoded.codes[first:], positions, out=codes[end : end + len(positions)])
            end += len(positions)
        self.codes = []
        return Codes(encoded.values, codes)

    def all_scores(self) -> FloatArray:
        """Every line's score, in file order."""
        if self.filled is not None:
            return self.filled[1][: self.lines]
        scores = np.concatenate(self.scores) if self.scores else np.zeros(0, dtype=np.float64)
        self.scores = []
        return scores


def read_trec_run(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> Run:
    """Read a TREC 6-column run file (``qid Q0 docid rank score tag``), columnar, block by block."""
    path = Path(path)
    large = path.is_file() and path.stat().st_size > STREAM_BYTES  # a stat never blocks, even on a FIFO
    blocks = _TrecBlocks(count_lines(path, max_bytes) if large else None)
    try:
        table = read_columns(path, _TREC_COLUMNS, _TREC_TYPES, max_bytes, keep=blocks, restart=blocks.restart)
    except (pa.ArrowInvalid, Refused):
        clean = block_check(path, _TREC_COLUMNS, _TREC_TYPES, _refuses, max_bytes)
        error = diagnose(path, _trec_line_problem, max_bytes, clean=clean)
        if error.problems:
            raise RunFileError(str(error)) from None
        return _irregular_trec(path, max_bytes)
    except TableError as exc:
        raise RunFileError(str(exc)) from None
    doc_ids, lines = table.column("doc"), table.num_rows
    del table
    query, scores = beside(blocks.query, blocks.all_scores, scoring_threads())  # numpy copies without the GIL
    release_unused()
    return _run(_name_from(path, _first_tag(path, max_bytes)), query, doc_ids, scores, lines)


def _first_tag(path: Path, max_bytes: int) -> str | None:
    """The tag (sixth column) of the run's first line, if it has one (every tag was checked by then)."""
    try:
        for _, line in text_lines(path, max_bytes, head=True):
            fields = split_fields(line)
            if fields:
                return fields[5] if len(fields) > 5 else None
    except TableError:  # not UTF-8: cannot happen once the parser's columns were checked; no tag then
        return None
    return None


JSONL_SCHEMA = pa.schema(
    [("query_id", pa.string()), ("results", pa.list_(pa.struct([("chunk_id", pa.string()), ("score", pa.float64())])))]
)


def read_jsonl_run(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> Run:
    """Read a JSONL run: one ``{"query_id", "results": [{"chunk_id", "score"}]}`` object per line; a query on
    several lines keeps its results in file order, at its first line. Parsed into columns by pyarrow
    (:mod:`evalkit.data.json_lines`); a file the columnar reading cannot take as it is is read line by line, which
    names the line and field it refuses, or takes what only it takes (a score given as a string)."""
    path = Path(path)
    label = clip(path.name)
    rankings: dict[str, list[tuple[str, float]]] = {}
    try:
        table = read_json_lines(path, max_bytes, JSONL_SCHEMA)
        run = None if table is None else jsonl_columns("", table)
        if run is not None:  # named once every line is taken, as below: a bad line is named first
            return replace(run, name=_name_from(path, None))
        for number, line in text_lines(path, max_bytes):
            if line.strip():
                _jsonl_line(line, f"{label} line {number}", rankings)
    except TableError as exc:
        raise RunFileError(str(exc)) from None
    run = run_from_rankings(_name_from(path, None), rankings)
    return run


def jsonl_columns(name: str, table: pa.Table) -> Run | None:
    """The run of a JSONL file's columns; None when a value needs the line-by-line reading's verdict (a null, an
    ID it refuses, a score of -0)."""
    queries, lists = table.column("query_id").combine_chunks(), table.column("results").combine_chunks()
    if queries.null_count or lists.null_count or lists.values.null_count:
        return None
    items = lists.flatten()  # the results' structs may hold fields the schema does not name
    docs, scores = pc.struct_field(items, "chunk_id"), pc.struct_field(items, "score")
    values = scores.to_numpy(zero_copy_only=False)
    if docs.null_count or scores.null_count:  # every number read is finite (read_json_lines)
        return None
    if np.signbit(values[values == 0]).any():  # "-0" is the integer 0 to Python, -0.0 to pyarrow: let it decide
        return None
    if has_refused_given_ids(queries) or has_refused_given_ids(docs):
        return None
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    seen = np.asarray(pc.dictionary_encode(queries).indices, dtype=np.int64)  # in order of first appearance
    if len(seen) and (seen[1:] < seen[:-1]).any():  # a query on several lines: its results go together
        order = np.argsort(seen, kind="stable")
        starts = np.asarray(lists.offsets, dtype=np.int64)[:-1][order]
        positions = np.repeat(starts - np.cumsum(lengths[order]) + lengths[order], lengths[order])
        positions += np.arange(len(positions), dtype=np.int64)
        docs, values, queries, lengths = (
            docs.take(pa.array(positions)),
            values[positions],
            queries.take(order),
            lengths[order],
        )
    codes = encode(queries)
    return _run(name, Codes(codes.values, np.repeat(codes.codes, lengths)), docs, values, len(docs))


def _jsonl_line(line: str, where: str, rankings: dict[str, list[tuple[str, float]]]) -> None:
    try:
        record = loads_strict(line)
    except ValueError as exc:
        raise RunFileError(f"{where}: not JSON ({clip(str(exc), 200)})") from None
    if not isinstance(record, dict) or not isinstance(record.get("query_id"), str):
        raise RunFileError(f"{where}: expected an object with a string query_id")
    results = record.get("results")
    if not isinstance(results, list):
        raise RunFileError(f"{where}: results must be a list")
    query_id = record["query_id"]
    _check_id(query_id, "query_id", where)
    pairs = rankings.setdefault(query_id, [])
    for index, result in enumerate(results):
        item = f"{where} results[{index}]"
        if not isinstance(result, dict) or not isinstance(result.get("chunk_id"), str):
            raise RunFileError(f"{item}: expected an object with a string chunk_id")
        _check_id(result["chunk_id"], "chunk_id", item)
        problem = _score_problem(result.get("score"), item)
        if problem is not None:
            raise RunFileError(problem)
        pairs.append((result["chunk_id"], float(result["score"])))


def _check_id(value: str, name: str, where: str) -> None:
    if not value or any(c.isspace() for c in value):
        raise RunFileError(f"{where}: field {name!r}: {clip(repr(value))} is empty or holds whitespace")
    problem = id_problem(value, name, where)
    if problem is not None:
        raise RunFileError(problem)


def is_jsonl_run(path: Path) -> bool:
    """Whether a run file is JSONL, by its name: ``.jsonl`` (or ``.jsonl.gz``); anything else is TREC."""
    return Path(path).name.endswith((".jsonl", ".jsonl.gz"))


def read_run(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> Run:
    """Read a run file by its name (:func:`is_jsonl_run`)."""
    path = Path(path)
    try:
        if is_jsonl_run(path):
            return read_jsonl_run(path, max_bytes)
        return read_trec_run(path, max_bytes)
    except InputError as exc:
        if exc.reason == "file not found":
            raise RunFileError(f"run file {clip(path.name)} not found") from None
        raise RunFileError(str(exc)) from None
