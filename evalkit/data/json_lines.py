"""JSON lines read into Arrow columns by pyarrow's JSON reader, for the readers of large JSONL files (runs).

A JSONL run of 10 million results took 70 s decoded line by line with :func:`~evalkit.data.inputs.loads_strict`,
against a few seconds here. This reader takes only what the strict line-by-line reading would take with the same
result, and returns None for everything else, so that the caller reads the file line by line and names the line
and field it refuses. The file's bytes come through the guarded door (:func:`~evalkit.data.tables.guarded_blocks`:
regular files only, the size limit, gzip, the longest line). Then, before pyarrow parses:

- the bytes must be UTF-8 (pyarrow would not say which line is not);
- nothing may nest deeper than :data:`~evalkit.data.inputs.MAX_JSON_DEPTH` (pyarrow's parser recurses: 100,000
  levels crash the process);
- every line that is not blank must start with ``{`` and end with ``}``, and pyarrow must find one object a line
  (two objects on one line, or one object over two lines, are what the strict reader refuses).

pyarrow refuses duplicate keys (in every object, since fields the schema does not name are parsed too), a value
of another type than the schema's, an invalid escape or a control character in a string; each is a None here.
It takes ``NaN`` and ``Infinity`` and integers of any length, which the strict reader refuses: so every number it
parsed, named by the schema or not, must be finite and below 1e300 in magnitude (an integer of more than
:data:`~evalkit.data.inputs.MAX_NUMBER_DIGITS` digits is not; a float that large only costs speed). What it
parses the caller still checks (nulls, IDs), as the strict reader would. Numbers are decoded to the same doubles
as Python's ``float`` (correctly rounded; a test compares both on edge cases).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import json as pa_json

from evalkit.data.inputs import MAX_JSON_DEPTH, nesting_depth
from evalkit.data.tables import guarded_blocks

__all__ = ["json_line_segments", "json_lines_table", "read_json_lines"]

_SCAN = 1 << 24
"""Bytes looked at a time for line ends (bounds the temporary arrays of a large file)."""
_WHITESPACE = b" \t\n\r\x0b\x0c"  # what ``bytes.strip`` strips: a line of only these is blank, as for every reader
_LARGEST = 1e300
"""Numbers from this magnitude on are left to the strict reader: an integer of more than 300 digits is one."""


def read_json_lines(path: Path, max_bytes: int, schema: pa.Schema) -> pa.Table | None:
    """The objects of a JSONL file as a table of the columns of ``schema``, one row per line that is not blank, in
    file order; None when the file must be read line by line instead (see the module docstring)."""
    data = _utf8(b"".join(guarded_blocks(path, max_bytes, False)))  # the door strips a byte-order mark
    return None if data is None else json_lines_table(data, schema)


def json_line_segments(path: Path, max_bytes: int, size: int) -> Iterator[bytes | None]:
    """The file's lines through the guarded door, whole lines of about ``size`` bytes at a time (more when one
    line is longer); None for a segment that is not UTF-8."""
    for block in guarded_blocks(path, max_bytes, False, size):  # each ends at a line end
        yield _utf8(block)


def _utf8(data: bytes) -> bytes | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return data


def json_lines_table(data: bytes, schema: pa.Schema) -> pa.Table | None:
    """:func:`read_json_lines` of whole lines of UTF-8 bytes (a file, or a segment of one)."""
    if nesting_depth(data) > MAX_JSON_DEPTH:  # over all the lines: an object may span lines until parsed
        return None
    objects, longest = _objects(data)
    if objects is None:
        return None
    if objects == 0:
        return schema.empty_table()
    options = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")
    try:
        table = pa_json.read_json(
            pa.BufferReader(data), pa_json.ReadOptions(block_size=max(1 << 20, longest + 2)), options
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != objects or not all(_plain_numbers(column) for column in table.columns):
        return None
    return table.select(schema.names).combine_chunks()


def _plain_numbers(values: pa.Array | pa.ChunkedArray) -> bool:
    """Whether every number in ``values`` (lists and structs looked into) is finite and below 1e300 in magnitude."""
    if isinstance(values, pa.ChunkedArray):
        return all(_plain_numbers(chunk) for chunk in values.chunks)
    kind = values.type
    if pa.types.is_floating(kind):
        numbers = values.drop_null().to_numpy(zero_copy_only=False)
        return bool((np.abs(numbers) < _LARGEST).all())  # NaN and infinities compare false
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _plain_numbers(values.flatten())
    if pa.types.is_struct(kind):
        return all(_plain_numbers(pc.struct_field(values, index)) for index in range(kind.num_fields))
    return True


def _objects(data: bytes) -> tuple[int | None, int]:
    """How many lines are not blank, and the longest line's length; None for the count when such a line does not
    start with ``{`` and end with ``}`` (ASCII whitespace around them aside)."""
    ends = np.concatenate(
        [
            np.flatnonzero(np.frombuffer(data, np.uint8, min(_SCAN, len(data) - at), at) == 10) + at
            for at in range(0, len(data), _SCAN)
        ]
        or [np.zeros(0, np.int64)]
    )
    starts = np.concatenate(([0], ends + 1))
    stops = np.append(ends, len(data))
    keep = stops > starts
    starts, stops = starts[keep], stops[keep]
    longest = int((stops - starts).max()) if len(starts) else 0
    raw = np.frombuffer(data, np.uint8)
    last = stops - 1 - (raw[stops - 1] == 13)  # a line may end with "\r\n"
    plain = (raw[starts] == ord("{")) & (last >= starts) & (raw[np.maximum(last, 0)] == ord("}"))
    count = int(plain.sum())
    for start, stop in zip(starts[~plain].tolist(), stops[~plain].tolist(), strict=True):
        line = data[start:stop].strip(_WHITESPACE)
        if not line:
            continue  # blank
        if not (line.startswith(b"{") and line.endswith(b"}")):
            return None, longest
        count += 1
    return count, longest
