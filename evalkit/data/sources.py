"""Outside source files read line by line, through the guarded door every input goes through.

The BEIR and TREC readers (:mod:`evalkit.data.collection`, :mod:`evalkit.data.beir`, :mod:`evalkit.data.trec`) read
their files here: a regular file only, within a size cap, a byte-order mark dropped, JSON parsed strictly. Every
problem is a :class:`~evalkit.data.repairs.SourceFormatError` naming the file and line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES, InputError, clip, decode_text, loads_strict, read_input_bytes
from evalkit.data.repairs import SourceFormatError
from evalkit.data.tables import open_guarded

__all__ = ["read_jsonl", "read_source_text", "source_lines"]


def source_lines(path: Path, label: str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> Iterator[tuple[str, str]]:
    """``(where, text)`` of every line of a line-oriented source file; `where` is ``"<label> line <n>"``.

    The file is read through the guarded door of :func:`evalkit.data.tables.open_guarded`: a regular file only (a
    FIFO or ``/dev/zero`` is refused at once), at most `max_bytes` (after decompression, for gzip), a byte-order
    mark dropped. Lines end at ``\\n`` alone (a ``\\r`` before it is dropped), so a separator character inside a
    JSON string never splits a record.

    Raises:
        SourceFormatError: a missing or unreadable file, or a line that is not UTF-8, naming `label`.
    """
    try:
        with open_guarded(Path(path), max_bytes) as stream:
            for number, raw in enumerate(stream, start=1):
                where = f"{label} line {number}"
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise SourceFormatError(str(path), [f"{where}: not UTF-8 text ({exc.reason})"]) from None
                yield where, text.rstrip("\r\n")
    except InputError as exc:
        raise SourceFormatError(str(path), [f"{label}: {_file_reason(exc)}"]) from None


def read_jsonl(
    path: Path, label: str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, object)`` for each non-blank line of a JSONL file (:func:`source_lines`), each line strict JSON
    (:func:`evalkit.data.inputs.loads_strict`).

    Raises:
        SourceFormatError: a missing or unreadable file, a line that is not JSON or not an object (every such line
            is named before any record is handed on).
    """
    problems: list[str] = []
    records: list[tuple[str, dict[str, Any]]] = []
    for where, line in source_lines(path, label, max_bytes):
        if not line.strip():
            continue
        try:
            value = loads_strict(line)
        except ValueError as exc:
            problems.append(f"{where}: not JSON ({clip(str(exc), 200)})")
            continue
        if not isinstance(value, dict):
            problems.append(f"{where}: must be a JSON object, not {type(value).__name__}")
            continue
        records.append((where, value))
    if problems:
        raise SourceFormatError(str(path), problems)
    yield from records


def read_source_text(path: Path, label: str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of a small source file, read as every input is (:func:`evalkit.data.inputs.read_input_bytes`:
    a regular file of at most `max_bytes`, so a FIFO or ``/dev/zero`` is refused at once; a byte-order mark
    dropped); problems name `label`."""
    try:
        return decode_text(read_input_bytes(Path(path), max_bytes), str(path))
    except InputError as exc:
        raise SourceFormatError(str(path), [f"{label}: {_file_reason(exc)}"]) from None


def _file_reason(error: InputError) -> str:
    return error.reason if error.reason.startswith("file ") else f"file {error.reason}"
