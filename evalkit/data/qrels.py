"""Relevance judgments (qrels) in, columnar: TREC qrels and BEIR qrels TSV, plain or gzip-compressed.

- **TREC**: ``query-id iteration doc-id grade``, columns separated by any run of spaces or tabs; the iteration
  column is not used, columns past the fourth are ignored (as trec_eval ignores them); a first line of six columns
  with ``Q0`` in the second is a run's, and the file is refused as a run given as qrels.
- **BEIR**: ``query-id<TAB>corpus-id<TAB>score``, with or without BEIR's header line ``query-id corpus-id score``.

The format is told by the first data line: three columns is BEIR, four or more TREC. Grades are integers, kept as
read, so that each measure can give them trec_eval's meaning: 1 and above relevant (at the default relevance
level), 0 judged not relevant, and a negative grade what trec_eval reads as "in the pool, not judged" (``-1``, as
infAP reads it). A document absent from the file is unjudged; a row of grade 0 or ``-1`` is never dropped, so the
three states stay apart. A query without a grade of 1 or more has no relevant document: it is a no-answer query
(scored by ``no_answer_fpr``). The fixture importers (:func:`evalkit.data.collection.read_qrels`) map these grades
to a fixture's 0-3.

Duplicate policy: a (query, document) pair judged twice with the same grade is kept once and counted; judged with
two different grades it is refused, naming the query, the document and both grades, since no rule can tell which
one the assessor meant.

This is the one reader of qrels files: :func:`read_qrels_file` gives the scoring core its sorted, columnar
:class:`Qrels`; :func:`read_qrels_lines` gives an importer (``evalkit import trec`` and ``beir``) the same
judgments, checked the same way, as rows in file order with the number of the line each came from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.data import ids, tables
from evalkit.data.bad_lines import MAX_COUNTED, block_check, diagnose
from evalkit.data.columns import IntArray, encode, sort_pairs
from evalkit.data.field_names import BEIR_QRELS_HEADER, TREC_QRELS_COLUMNS
from evalkit.data.inputs import MAX_PROBLEMS, InputError, clip
from evalkit.data.tables import DEFAULT_MAX_TABLE_BYTES, TableError

__all__ = ["Layout", "Qrels", "QrelsError", "QrelsLines", "qrels_from_mapping", "read_qrels_file", "read_qrels_lines"]

Layout = Literal["trec", "beir"]
_INTEGER = re.compile(r"-?[0-9]+")
"""A grade as the columnar parser reads it (Python's int() would also take "+1", "1_0" or non-ASCII digits)."""
_TYPES = {"query": pa.dictionary(pa.int32(), pa.string()), "doc": pa.string(), "grade": pa.string()}
"""Grades are read as text and checked against _INTEGER before they are converted: pyarrow's integer parser also
takes "0x10" (16), which trec_eval's atol() reads as 0."""


class QrelsError(ValueError):
    """Judgments that cannot be used: names the file (or source), the line or the query and document.

    ``problems`` lists each refused line or conflicting pair on its own (naming the file), for a caller that
    collects them with other problems; it is empty when the file as a whole cannot be read (not found, too large).
    """

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


@dataclass(frozen=True, eq=False)
class Qrels:
    """Judgments, one row per (query, document) pair, in (query ID, document ID) order: the canonical form, which
    does not depend on the order of the lines read.

    ``queries`` are the judged query IDs (sorted, unique); ``query[i]`` is row i's code into it (ascending),
    ``docs[i]`` its document ID (within a query, in code-point order) and ``grades[i]`` its grade. A query's
    judgments are one range of rows. ``duplicates`` counts the repeated lines that were collapsed.
    """

    queries: pa.StringArray
    query: IntArray
    docs: pa.ChunkedArray
    grades: IntArray
    duplicates: int
    source: str

    def __len__(self) -> int:
        return len(self.query)

    def as_dict(self) -> dict[str, dict[str, int]]:
        """``{query_id: {doc_id: grade}}`` (a Python view, for small judgments)."""
        queries = self.queries.to_pylist()
        table: dict[str, dict[str, int]] = {q: {} for q in queries}
        for q, d, g in zip(self.query.tolist(), self.docs.to_pylist(), self.grades.tolist(), strict=True):
            table[queries[q]][d] = g
        return table


def _build(
    query_ids: pa.Array | pa.ChunkedArray, doc_ids: pa.Array | pa.ChunkedArray, grades: IntArray, source: str
) -> Qrels:
    """Sort by (query ID, document ID), collapse identical duplicates, refuse conflicting ones.

    One stable sort of (query code, document ID) puts every repeated pair next to its first copy: no hash table of
    document IDs is built (a sort of short strings within each query costs less than hashing them all)."""
    query = encode(query_ids)
    del query_ids  # each input is dropped once used: with a caller that holds none, its memory is freed here
    docs = _one_chunk(doc_ids if isinstance(doc_ids, pa.ChunkedArray) else pa.chunked_array([doc_ids]))
    del doc_ids
    order, d, same = sort_pairs(query.codes, docs)
    del docs
    q, g = query.codes[order].astype(np.int64), np.asarray(grades, dtype=np.int64)[order]
    del order, grades
    conflicts = np.flatnonzero(same & (g[1:] != g[:-1]))
    if len(conflicts):
        names = query.values
        problems = [
            f"query {clip(repr(names[int(q[i])].as_py()))} document {clip(repr(d[i].as_py()))}: "
            f"judged twice with different grades ({int(g[i])} and {int(g[i + 1])})"
            for i in conflicts[:MAX_COUNTED].tolist()
        ]
        more = [f"... and {len(conflicts) - MAX_PROBLEMS} more"] if len(conflicts) > MAX_PROBLEMS else []
        listing = "\n".join(f"  - {p}" for p in [*problems[:MAX_PROBLEMS], *more])
        raise QrelsError(
            f"{source}: {len(conflicts)} conflicting judgment(s)\n{listing}", [f"{source}: {p}" for p in problems]
        )
    keep = np.concatenate(([True], ~same)) if len(q) else np.zeros(0, dtype=bool)
    duplicates = int(len(keep) - int(keep.sum()))
    if duplicates:
        q, d, g = q[keep], d.filter(pa.array(keep)), g[keep]
    used = q[np.concatenate(([True], q[1:] != q[:-1]))] if len(q) else np.zeros(0, dtype=np.int64)
    renumber = np.full(len(query.values), -1, dtype=np.int64)
    renumber[used] = np.arange(len(used), dtype=np.int64)
    qrels = Qrels(
        queries=query.values.take(pa.array(used)),
        query=renumber[q],
        docs=d,
        grades=g,
        duplicates=duplicates,
        source=source,
    )
    tables.release_unused()
    return qrels


_CHUNK_BYTES = 1 << 30
"""Document IDs up to this many bytes are kept as one chunk (a take from one chunk is several times faster)."""


def _one_chunk(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """``values`` in one chunk when they fit comfortably in one string array."""
    if values.num_chunks <= 1 or values.nbytes >= _CHUNK_BYTES:
        return values
    return pa.chunked_array([values.combine_chunks()], type=values.type)


def qrels_from_mapping(judgments: Mapping[str, Mapping[str, int]], source: str = "qrels") -> Qrels:
    """Judgments from ``{query_id: {doc_id: grade}}`` (grades must be integers; bool is refused)."""
    queries: list[str] = []
    docs: list[str] = []
    grades: list[int] = []
    for query_id, row in judgments.items():
        if not isinstance(query_id, str) or not isinstance(row, Mapping):
            raise QrelsError(f"{source}: query {clip(repr(query_id))}: IDs are strings, judgments {{doc_id: grade}}")
        for doc_id, grade in row.items():
            if not isinstance(doc_id, str):
                raise QrelsError(
                    f"{source}: query {clip(repr(query_id))}: document ID {clip(repr(doc_id))} is not a string"
                )
            if not isinstance(grade, (int, np.integer)) or isinstance(grade, bool):
                raise QrelsError(
                    f"{source}: query {clip(repr(query_id))} document {clip(repr(doc_id))}: "
                    f"grade {clip(repr(grade))} is not an integer"
                )
            queries.append(str(query_id))
            docs.append(str(doc_id))
            grades.append(int(grade))
    for value, field in [*((q, "query_id") for q in judgments), *((d, "doc_id") for d in docs)]:
        problem = ids.given_id_problem(value, field, source)
        if problem is not None:
            raise QrelsError(problem)
    if grades and not -(2**63) <= min(grades) <= max(grades) < 2**63:
        raise QrelsError(f"{source}: a grade is past 64 bits ({min(grades)} to {max(grades)})")
    return _build(
        pa.array(queries, type=pa.string()), pa.array(docs, type=pa.string()), np.array(grades, dtype=np.int64), source
    )


def _layout(path: Path, max_bytes: int, given: Layout | None = None) -> tuple[Layout, int]:
    """``("beir" | "trec", header rows)``: the ``given`` layout, or the one the first data line tells; a BEIR header
    line is skipped (unless the layout is given as TREC, which has no header). A first data line shaped as a run's
    (6 columns, ``Q0`` in the second) is refused whatever the layout, as a run file given as the qrels."""
    for number, line in tables.text_lines(path, max_bytes, head=True):
        fields = tables.split_fields(line)
        if not fields:
            continue
        if given != "trec" and _is_beir_header(fields):
            return "beir", number
        if len(fields) == 6 and fields[1].upper() == "Q0":  # whatever layout is given: a run is no qrels
            problem = (
                f"{clip(path.name)} line {number}: has 6 columns with Q0 in the second, as a run's lines have "
                "(query-id Q0 doc-id rank score tag), not qrels (query-id iteration doc-id grade): is it a run file "
                "given as the qrels?"
            )
            raise QrelsError(f"{clip(path.name)}: 1 malformed line(s)\n  - {problem}", [problem])
        return given or ("beir" if len(fields) == 3 else "trec"), number - 1
    return given or "trec", 0


def _is_beir_header(fields: list[str]) -> bool:
    return tuple(f.lower() for f in fields[:3]) == BEIR_QRELS_HEADER


def _field_names(layout: str) -> tuple[str, ...]:
    """The names of the layout's columns, as messages give them."""
    return BEIR_QRELS_HEADER if layout == "beir" else TREC_QRELS_COLUMNS


def _line_problem(layout: str):  # type: ignore[no-untyped-def]
    names = _field_names(layout)

    def check(fields: list[str], where: str) -> str | None:
        if len(fields) < len(names):
            return f"{where}: needs {len(names)} columns ({' '.join(names)}), has {len(fields)}"
        grade = fields[len(names) - 1]
        if not _INTEGER.fullmatch(grade):
            return f"{where}: field {names[-1]!r}: {clip(repr(grade))} is not an integer"
        if not -(2**63) <= int(grade) < 2**63:
            return f"{where}: field {names[-1]!r}: {clip(repr(grade))} is out of the 64-bit integer range"
        for value, name in ((fields[0], names[0]), (fields[len(names) - 2], names[-2])):
            problem = ids.id_problem(value, name, where)
            if problem is not None:
                return problem
        return None

    return check


def _integers(grades: pa.StringArray) -> bool:
    """Whether every grade is a decimal integer (:data:`_INTEGER`). Grades of digits only, the usual case, are
    confirmed from the smallest and largest byte (a regular expression over a million grades took 30 ms of a 270 ms
    read); others, such as negative grades, are matched one by one."""
    low, high = ids.byte_range(grades)
    if ord("0") <= low and high <= ord("9"):
        return True
    return bool(pc.all(pc.match_substring_regex(grades, f"^{_INTEGER.pattern}$"), min_count=0).as_py())


def _bad_values(batch: pa.RecordBatch) -> bool:
    """Whether a parsed block of qrels holds an ID the readers refuse or a grade that is not a decimal integer."""
    return (
        ids.has_bad_ids(batch.column("query").dictionary)
        or ids.has_bad_ids(batch.column("doc"))
        or not _integers(batch.column("grade"))
    )


def _checked(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch``, unless :func:`_bad_values` refuses it (:class:`~evalkit.data.tables.Refused`)."""
    if _bad_values(batch):
        raise tables.Refused
    return batch


def _refuses(batch: pa.RecordBatch) -> bool:
    """:func:`_bad_values`, or a grade past 64 bits (for :func:`evalkit.data.bad_lines.diagnose`)."""
    if _bad_values(batch):
        return True
    try:
        pc.cast(batch.column("grade"), pa.int64())
    except pa.ArrowInvalid:
        return True
    return False


def _read_columns(path: Path, max_bytes: int, given: Layout | None = None) -> tuple[pa.Table, Layout, int]:
    """The checked columns ``query``, ``doc`` and ``grade`` (int64), one row per data line in file order; the
    layout (``given``, or told by the first data line) and how many lines come before the first data line."""
    try:
        layout, header = _layout(path, max_bytes, given)
        names = ("query", "doc", "grade") if layout == "beir" else ("query", "_iter", "doc", "grade")
        width = len(names)
        try:
            table = tables.read_columns(path, names, _TYPES, max_bytes, skip_rows=header, keep=_checked)
            grade_column = pc.cast(table.column("grade"), pa.int64())  # refuses grades past 64 bits
            refused = False
        except (pa.ArrowInvalid, tables.Refused):
            refused = True
        if refused:
            clean = block_check(path, names, _TYPES, _refuses, max_bytes, skip_rows=header)
            error = diagnose(path, _line_problem(layout), max_bytes, skip_rows=header, clean=clean)
            if error.problems:
                raise QrelsError(str(error), error.problems)
            table = _irregular(path, max_bytes, width, header)  # every line right: their widths differ
            grade_column = pc.cast(table.column("grade"), pa.int64())
    except InputError as exc:
        raise QrelsError(str(exc)) from None
    except TableError as exc:
        raise QrelsError(str(exc), exc.problems or [str(exc)]) from None
    return table.set_column(table.column_names.index("grade"), "grade", grade_column), layout, header


def _irregular(path: Path, max_bytes: int, width: int, header: int) -> pa.Table:
    """The columns of a qrels file whose lines have different numbers of columns (extra ones ignored, on any line,
    as trec_eval ignores them), every line checked already: read line by line. ``width`` is the layout's."""
    query: list[str] = []
    doc: list[str] = []
    grade: list[str] = []
    for number, line in tables.text_lines(path, max_bytes):
        fields = tables.split_fields(line)
        if number > header and fields:
            query.append(fields[0])
            doc.append(fields[width - 2])
            grade.append(fields[width - 1])
    return pa.table(
        {
            "query": pa.array(query, pa.string()).dictionary_encode(),
            "doc": pa.array(doc, pa.string()),
            "grade": pa.array(grade, pa.string()),
        }
    )


def read_qrels_file(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> Qrels:
    """Read TREC or BEIR qrels (see the module docstring), columnar; errors name the file and the lines."""
    path = Path(path)
    return _build_table(_read_columns(path, max_bytes)[0], clip(path.name))


def _build_table(table: pa.Table, source: str) -> Qrels:
    """:func:`_build` of the parsed columns, the table dropped before the sort so that its columns are freed as
    :func:`_build` is done with each (about a tenth off the peak memory of reading 10 million judgments)."""
    columns = [table.column("query"), table.column("doc"), table.column("grade").to_numpy()]
    del table
    return _build(columns.pop(0), columns.pop(0), columns.pop(0), source)


@dataclass(frozen=True)
class QrelsLines:
    """A qrels file's judgments as its lines give them, for a reader that keeps file order and names lines (an
    importer): one row per data line, in file order, repeated lines kept. ``lines[i]`` is the number of row i's
    line in the file; ``grade_field`` is the grade column's name in the file's layout (``grade`` for TREC,
    ``score`` for BEIR)."""

    query_ids: list[str]
    doc_ids: list[str]
    grades: list[int]
    lines: list[int]
    grade_field: str
    source: str


def read_qrels_lines(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES, layout: Layout | None = None) -> QrelsLines:
    """The judgments of a TREC or BEIR qrels file in file order, read and checked exactly as
    :func:`read_qrels_file` reads them: the same layouts, the same refused lines, the same refusal of a pair judged
    with two different grades. Only the form differs (rows in file order, repeated lines kept, line numbers).

    A caller that knows the format gives its ``layout``: the file is then read as that layout whatever its first
    line looks like (a three-column line of a TREC file is refused as too short, not read as BEIR), so a file both
    readers accept is read the same way by both.

    Raises:
        QrelsError: as :func:`read_qrels_file`; ``problems`` lists each refused line or conflicting pair.
    """
    path = Path(path)
    label = clip(path.name)
    table, layout, header = _read_columns(path, max_bytes, layout)
    grades = table.column("grade").to_numpy().astype(np.int64, copy=False)
    _build(table.column("query"), table.column("doc"), grades, label)  # the duplicate policy: conflicts refused
    try:
        lines = _data_lines(path, max_bytes, header)
    except InputError as exc:  # the file changed since it was parsed
        raise QrelsError(str(exc)) from None
    if len(lines) != table.num_rows:
        raise QrelsError(f"{label}: {table.num_rows} rows parsed but {len(lines)} data lines counted (file changed?)")
    return QrelsLines(
        query_ids=table.column("query").to_pylist(),
        doc_ids=table.column("doc").to_pylist(),
        grades=grades.tolist(),
        lines=lines.tolist(),
        grade_field=_field_names(layout)[-1],
        source=label,
    )


def _data_lines(path: Path, max_bytes: int, header: int) -> IntArray:
    """The number of each line the columnar parser reads as a row: the lines that are not blank once normalised as
    :func:`evalkit.data.tables.read_columns` normalises them, past the first ``header`` lines. Counted with numpy
    over the normalised bytes, a block at a time (no Python loop over lines)."""
    found: list[IntArray] = []
    before = 0
    for block in tables.guarded_blocks(path, max_bytes, True):
        data = np.frombuffer(block, dtype=np.uint8)
        ends = np.flatnonzero(data == ord("\n"))
        starts = np.concatenate(([0], ends + 1))
        stops = np.append(ends, len(data))
        found.append(before + 1 + np.flatnonzero(stops > starts).astype(np.int64))
        before += len(ends)
    numbers = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    return numbers[numbers > header]
