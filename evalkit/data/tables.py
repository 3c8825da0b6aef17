"""Whitespace-separated tables (TREC runs and qrels, BEIR qrels) read by a columnar parser, never a Python line loop.

One guarded door for every tabular input:

- only a regular file is read: a FIFO, a device, a socket or a directory is refused at once, without blocking;
- a file whose bytes (after decompression, for ``.gz``) exceed the limit is refused while it is read
  (:data:`DEFAULT_MAX_TABLE_BYTES`, raised with ``--max-input-mb``), so a gzip bomb stops at the limit;
- gzip is recognised by its magic bytes, whatever the file is called; a UTF-8 byte-order mark is stripped;
- columns are separated by any run of spaces and tabs (as trec_eval reads them), blank lines are skipped, and
  columns past the expected ones are ignored.

The bytes are normalised in blocks (tabs and runs of spaces to one space, with C-speed byte operations) and parsed
by pyarrow's CSV reader, with IDs dictionary-encoded: a 10-million-line run takes a few hundred MB. When the
parser or a later check refuses the file, :mod:`evalkit.data.bad_lines` names the bad lines, only then.
"""

from __future__ import annotations

import io
import os
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

import pyarrow as pa
from pyarrow import csv

from evalkit.common.progress import meter
from evalkit.data.inputs import InputError, open_regular

__all__ = [
    "DEFAULT_MAX_TABLE_BYTES",
    "Refused",
    "TableError",
    "block_lines",
    "csv_options",
    "extra_columns",
    "guarded_blocks",
    "open_guarded",
    "read_columns",
    "split_fields",
    "text_lines",
]

DEFAULT_MAX_TABLE_BYTES: Final = 4 * 1024**3
"""Run and qrels files larger than this (4 GiB, after decompression) are refused; ``--max-input-mb`` raises it."""

_BLOCK = 1 << 22
MAX_LINE_BYTES: Final = 64 * 1024**2
"""The longest line any tabular or JSONL input may have: a run, qrels or topics line is a few hundred bytes, a JSONL
run line with 10,000 results about a megabyte. A longer line is refused while it is read, so that a file without
line ends is never held whole."""
_HEAD = 1 << 16
"""Bytes read at a time by the helpers that look only at a file's first lines (its layout, its first tag)."""
_PARSE_BLOCK = 1 << 21
"""Bytes the parser takes at a time when it reads a file whole, on every core. Measured on a 10-million-line run,
one thread: with the system allocator, reading took 1.23-1.24 s with 2 MiB blocks, 1.25-1.27 s with 1 MiB and
1.29-1.40 s with 4 MiB; with jemalloc, which scoring uses (:mod:`evalkit.common.memory`), the parse alone took
1.12-1.13 s with 2 MiB and 1.21-1.24 s with 4 MiB."""
_STREAM_BLOCK = 1 << 22
"""Bytes the parser takes at a time when it reads a large file block by block."""
STREAM_BYTES: Final = 512 * 1024**2
"""Files larger than this (on disk) are parsed block by block, keeping only what each block's check keeps; smaller
ones are parsed whole, on every core (faster, with all columns in memory for a moment)."""
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_WHITESPACE = bytes.maketrans(b"\t\r\f\v", b"    ")
_SPACES = re.compile(rb" {2,}")
_BARE_CR = re.compile(rb"\r(?!\n)")
_SEPARATORS = re.compile(r"[ \t\r\f\v]+")
"""The column separators the columnar path knows (str.split() would also split at other Unicode whitespace)."""
_BYTE_SEPARATORS = re.compile(rb"[ \t\r\f\v]+")


class TableError(ValueError):
    """A tabular file that cannot be used: names the file and, for malformed lines, each line number."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


class Refused(Exception):
    """Raised by a :func:`read_columns` ``keep`` callback for a parsed block whose values its checks refuse (the
    caller names the lines afterwards, with :mod:`evalkit.data.bad_lines`)."""


class _Guarded(io.RawIOBase):
    """A regular file's bytes, decompressed when gzip, BOM stripped, capped at ``max_bytes``; whitespace normalised.

    Blocks handed on end at a line end, so that the normalisation never sees half a separator.
    """

    def __init__(self, path: Path, max_bytes: int, normalise: bool, block: int = _BLOCK) -> None:
        super().__init__()
        self._block = block
        self._label = str(path)
        self._max = max_bytes
        self._normalise = normalise
        self._raw = _open_regular(path)
        head = self._raw.read(2)
        self._raw.seek(0)
        self._source: io.BufferedIOBase | io.RawIOBase = self._raw
        self._inflate = zlib.decompressobj(wbits=31) if head == _GZIP_MAGIC else None
        self._seen = 0
        self._pending: list[bytes] = []  # read bytes after the last line end, in pieces (never re-joined)
        self._out = b""
        self._at = 0  # how much of _out readinto has handed on
        self._first = True
        self._eof = False
        self._lines = 0  # line ends handed on so far

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._raw.close()
        super().close()

    def _next_raw(self) -> bytes:
        if self._inflate is None:
            return self._raw.read(self._block)
        while True:
            inflate = self._inflate
            if inflate.eof:
                # A member ended (its unconsumed_tail is stale then): a concatenated member may follow.
                rest = inflate.unused_data or self._raw.read(self._block)
                if not rest:
                    return b""
                self._inflate = inflate = zlib.decompressobj(wbits=31)
                data = inflate.decompress(rest, self._block)
            elif inflate.unconsumed_tail:
                data = inflate.decompress(inflate.unconsumed_tail, self._block)
            else:
                compressed = self._raw.read(self._block)
                if not compressed:
                    raise EOFError("the file ends inside a gzip member (truncated)")
                data = inflate.decompress(compressed, self._block)
            if data:
                return data

    def _fill(self) -> None:
        while not self._out and not self._eof:
            try:
                data = self._next_raw()
                while self._first and 0 < len(data) < 3 and _BOM.startswith(data):
                    more = self._next_raw()
                    if not more:
                        break
                    data += more
            except (zlib.error, EOFError) as exc:
                raise InputError(self._label, f"cannot be read: corrupt gzip data ({exc})") from None
            self._seen += len(data)
            if self._seen > self._max:
                raise InputError(
                    self._label,
                    f"cannot be read: it is larger than the input limit ({self._max / 2**20:g} MiB"
                    f"{' decompressed' if self._inflate is not None else ''}); raise the limit with --max-input-mb "
                    "if the file is trusted",
                )
            if self._first and data:
                self._first = False
                data = data.removeprefix(_BOM)
                if not data:
                    continue
            if not data:
                self._eof = True
                block, self._pending = b"".join(self._pending), []
            else:
                cut = data.rfind(b"\n") + 1
                if cut == 0:  # no line end yet: a long line is joined once, when it ends (never quadratically)
                    self._pending.append(data)
                    self._check_line(sum(len(part) for part in self._pending))
                    continue
                block, self._pending = b"".join([*self._pending, data[:cut]]), [data[cut:]] if cut < len(data) else []
            if b"\r" in block:
                self._check_carriage_returns(block)
            self._lines += block.count(b"\n")
            self._out, self._at = (_normalise(block) if self._normalise else block), 0

    def _check_carriage_returns(self, block: bytes) -> None:
        """Refuse a carriage return that does not end a line (``\\r`` without ``\\n``; one ending the file is
        trailing blank): read as a blank it would join lines, and a file whose lines end in ``\\r`` alone would
        be read as one line."""
        bare = _BARE_CR.search(block, 0, len(block) - 1 if self._eof else len(block))
        if bare is not None:
            line = self._lines + block.count(b"\n", 0, bare.start()) + 1
            raise InputError(
                self._label,
                f"line {line}: a carriage return (\\r) that does not end a line; lines end with \\n or \\r\\n (a "
                "file whose lines end with \\r alone must be converted)",
            )

    def _check_line(self, length: int) -> None:
        """Refuse a line longer than :data:`MAX_LINE_BYTES` (a file without line ends, or a hostile one)."""
        if length > MAX_LINE_BYTES:
            raise InputError(
                self._label, f"cannot be read: a line is longer than {MAX_LINE_BYTES / 2**20:g} MiB (no line end)"
            )

    def blocks(self) -> Iterator[bytes]:
        """The bytes, block by block, each block ending at a line end (the last one may not)."""
        while True:
            self._fill()
            if not self._out:
                return
            block, self._out = self._out[self._at :] if self._at else self._out, b""
            yield block

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        self._fill()
        size = min(len(buffer), len(self._out) - self._at)
        buffer[:size] = memoryview(self._out)[self._at : self._at + size]
        self._at += size
        if self._at == len(self._out):
            self._out, self._at = b"", 0
        return size


def _normalise(block: bytes) -> bytes:
    """Tabs and other blanks to spaces, runs of spaces to one, no space at either end of a line."""
    block = block.translate(_WHITESPACE)
    if b"  " in block:
        block = _SPACES.sub(b" ", block)
    block = block.replace(b"\n ", b"\n").replace(b" \n", b"\n")
    # The last block may end without a newline, so blanks that ended its last line are at the very end.
    return block.removeprefix(b" ").removesuffix(b" ")


def _open_regular(path: Path) -> io.BufferedReader:
    """The file opened for reading, refusing at once anything but a regular file (FIFOs do not block the open)."""
    return os.fdopen(open_regular(path), "rb")


def open_guarded(
    path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES, normalise: bool = False, block: int = _BLOCK
) -> io.BufferedReader:
    """A buffered reader of the file's text bytes (see the module docstring), reading ``block`` bytes at a time
    (smaller for a look at the first lines only); the caller closes it."""
    return io.BufferedReader(_Guarded(Path(path), max_bytes, normalise, block), buffer_size=block)


def split_fields(line: str) -> list[str]:
    """A line's columns, split exactly where the columnar parser splits them (spaces, tabs, CR, FF, VT)."""
    return [field for field in _SEPARATORS.split(line) if field]


def count_lines(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> int:
    """How many lines the file has, at most (line ends, plus one for a last line without one): a pass over the
    bytes at C speed, so that readers can size their arrays once."""
    count, last = 0, b"\n"
    with open_guarded(path, max_bytes) as stream:
        while block := stream.read(_BLOCK):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def guarded_blocks(path: Path, max_bytes: int, normalise: bool, block: int | None = None) -> Iterator[bytes]:
    """The file's bytes through the guarded door (see the module docstring), ``block`` bytes (default
    :data:`_BLOCK`) at a time, each block ending at a line end (the last may not)."""
    with _Guarded(Path(path), max_bytes, normalise, block or _BLOCK) as guarded:
        yield from guarded.blocks()


def text_lines(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES, head: bool = False) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every line that is not blank (ASCII whitespace only: every reader skips those),
    decoded as UTF-8 (for small files and for :func:`diagnose`); with ``head``, read in small blocks, for a caller
    that stops after the first lines. A block of blank lines is counted and passed over at once, so that a file of
    millions of blank lines takes no Python loop over them (20 MB of them took 18 s line by line)."""
    before = 0
    for block in guarded_blocks(path, max_bytes, False, _HEAD if head else _BLOCK):
        yield from block_lines(block, before, path)
        before += block.count(b"\n")


def block_lines(block: bytes, before: int, path: Path) -> Iterator[tuple[int, str]]:
    """The non-blank lines of a block that ends at a line end (or the file's end), numbered after ``before``."""
    if not block.strip():
        return
    lines = block.split(b"\n")
    if not lines[-1]:
        lines.pop()  # the block ended at a line end
    for number, raw in enumerate(lines, start=before + 1):
        if not raw.strip():
            continue
        try:
            yield number, raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            raise TableError(f"{Path(path).name} line {number}: not UTF-8 text ({exc.reason})") from None


def read_columns(
    path: Path,
    names: Sequence[str],
    types: dict[str, pa.DataType],
    max_bytes: int = DEFAULT_MAX_TABLE_BYTES,
    skip_rows: int = 0,
    keep: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
    restart: Callable[[], None] | None = None,
) -> pa.Table:
    """The whitespace-separated columns ``names`` of the file, typed as ``types`` (names starting ``_`` skipped).

    The file is parsed in blocks; ``keep`` turns each block into what is kept of it (checking it, dropping
    columns), so that only the kept columns of the whole file are ever in memory at once. A file whose separators
    turn out to need normalising further on is read again from its first block: ``restart`` is called first, so
    that ``keep`` can drop what it kept. Rows with more columns
    than ``names`` keep the first ``len(names)`` (extra columns are ignored, as trec_eval ignores them). Raises
    :class:`pyarrow.ArrowInvalid` on any row the parser refuses (too few columns, a value of the wrong type): the
    caller then names the lines with :func:`diagnose`. String columns are not checked for UTF-8 here: the caller
    checks every one with :func:`has_bad_ids`. ``keep`` raises :class:`Refused` for a block whose values its
    checks refuse; as for a row the parser refuses, a file that was not normalised is then read again, normalised
    (a tab starting or ending a line past the first block is read into a column otherwise), and the error is
    raised only if the normalised read fails too.
    """
    extra = extra_columns(path, len(names), max_bytes, skip_rows)
    empty = pa.table({n: pa.array([], type=types[n]) for n in names if not n.startswith("_")})
    if extra is None:  # no data line at all (pyarrow refuses an empty file): no rows
        return empty if keep is None else _kept_empty(empty, keep)
    column_names = [*names, *(f"_extra{i}" for i in range(extra))]
    normalise = _needs_normalising(path, max_bytes)
    while True:
        try:
            return _scan(path, column_names, names, types, max_bytes, skip_rows, normalise, keep or _same)
        except (pa.ArrowInvalid, Refused):
            if normalise:
                raise
            normalise = True  # a separator other than one space further on: read again, normalising
            if restart is not None:
                restart()


def release_unused() -> None:
    """Hand the memory pyarrow freed back to the system, so that the blocks a reader parsed and dropped do not stay
    resident while the next step runs (pyarrow's allocator keeps freed memory otherwise)."""
    pa.default_memory_pool().release_unused()


def _same(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch


def _kept_empty(empty: pa.Table, keep: Callable[[pa.RecordBatch], pa.RecordBatch]) -> pa.Table:
    batch = keep(pa.RecordBatch.from_pydict({n: empty.column(n).combine_chunks() for n in empty.column_names}))
    return pa.Table.from_batches([batch])


def _scan(
    path: Path,
    column_names: Sequence[str],
    names: Sequence[str],
    types: dict[str, pa.DataType],
    max_bytes: int,
    skip_rows: int,
    normalise: bool,
    keep: Callable[[pa.RecordBatch], pa.RecordBatch],
) -> pa.Table:
    read_options = csv.ReadOptions(column_names=column_names, skip_rows=skip_rows, block_size=_PARSE_BLOCK)
    parse_options, convert_options = csv_options(names, types)
    native = _native_file(path, max_bytes, normalise)
    if native is None:  # gzip, a byte-order mark or separators to normalise: the bytes pass through Python
        kept = [
            keep(batch)
            for batch in _parse_blocks(path, max_bytes, normalise, read_options, parse_options, convert_options)
        ]
    else:
        with native:
            if os.stat(path).st_size > STREAM_BYTES:  # block by block: only the kept columns of the file in memory
                serial = csv.ReadOptions(
                    column_names=column_names, skip_rows=skip_rows, block_size=_STREAM_BLOCK, use_threads=False
                )
                reader = csv.open_csv(native, serial, parse_options, convert_options)
                kept = []
                with meter(f"reading {path.name}", "line") as bar:
                    for batch in reader:
                        kept.append(keep(batch))
                        bar.update(batch.num_rows)
            else:  # the whole file at once, parsed on every core
                table = csv.read_csv(native, read_options, parse_options, convert_options)
                kept = [keep(batch) for batch in table.to_batches()]
                del table
    release_unused()
    if not kept:
        return _kept_empty(pa.table({n: pa.array([], type=types[n]) for n in names if not n.startswith("_")}), keep)
    return pa.Table.from_batches(kept)


def csv_options(names: Sequence[str], types: dict[str, pa.DataType]) -> tuple[csv.ParseOptions, csv.ConvertOptions]:
    """How every tabular input is parsed (one space between columns, no quoting) and which columns are converted."""
    parse_options = csv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False, escape_char=False)
    convert_options = csv.ConvertOptions(
        column_types=types,
        include_columns=[n for n in names if not n.startswith("_")],
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
        null_values=[],
        check_utf8=False,  # every string column read is checked by has_bad_ids, which skips printable ASCII
    )
    return parse_options, convert_options


_PROC_FD = Path("/proc/self/fd")


def _parse_blocks(
    path: Path,
    max_bytes: int,
    normalise: bool,
    read_options: csv.ReadOptions,
    parse_options: csv.ParseOptions,
    convert_options: csv.ConvertOptions,
) -> Iterator[pa.RecordBatch]:
    """The file's rows, parsed a block of :func:`open_guarded`'s bytes at a time (blocks end at line ends).

    pyarrow never gets a Python file object, only a copy of each block in memory it owns: its threaded reader can be
    dropped on one of pyarrow's threads after the read returns, and one that holds a Python object then takes the
    GIL; while the interpreter is exiting, that thread is stopped and the process aborts (``evalkit score`` on a
    gzip, BOM-prefixed or tab-separated file ended with SIGABRT in between one run in three and one in 400)."""
    skip_rows = read_options.skip_rows
    with _Guarded(path, max_bytes, normalise, _BLOCK) as guarded:
        for block in guarded.blocks():
            if not block.strip():  # blank lines only (pyarrow refuses an input without a row); skip_rows counts them
                skip_rows = max(0, skip_rows - block.count(b"\n"))
                continue
            options = csv.ReadOptions(
                column_names=read_options.column_names, skip_rows=skip_rows, block_size=read_options.block_size
            )
            sink = pa.BufferOutputStream()
            sink.write(block)
            table = csv.read_csv(pa.BufferReader(sink.getvalue()), options, parse_options, convert_options)
            skip_rows = 0
            yield from table.to_batches()


def _native_file(path: Path, max_bytes: int, normalise: bool) -> pa.NativeFile | None:
    """A plain file that needs no change (not gzip, no byte-order mark, nothing to normalise) as a native file that
    pyarrow reads without passing through Python; None for anything else (read through :func:`_parse_blocks`).
    The native file is the very file :func:`open_regular` opened and checked (reopened through its descriptor), and
    its size is checked against ``max_bytes`` first."""
    if normalise or not _PROC_FD.is_dir():
        return None
    fd = open_regular(path)
    try:
        head = os.pread(fd, 3, 0)
        if head.startswith(_GZIP_MAGIC) or head == _BOM:
            return None
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise InputError(
                str(path),
                f"cannot be read: it is larger than the input limit ({max_bytes / 2**20:g} MiB); raise the limit with "
                "--max-input-mb if the file is trusted",
            )
        return pa.OSFile(str(_PROC_FD / str(fd)))
    finally:
        os.close(fd)


def _needs_normalising(path: Path, max_bytes: int) -> bool:
    """Whether the file's first block separates columns by anything but single spaces (most files do not: they are
    then handed to the parser as they are, and read again normalised only if a later line needs it)."""
    with open_guarded(path, max_bytes, block=_HEAD) as stream:
        head = stream.read(_HEAD)
    return head.startswith(b" ") or any(mark in head for mark in (b"\t", b"  ", b"\r", b"\n ", b" \n", b"\f", b"\v"))


def extra_columns(path: Path, expected: int, max_bytes: int, skip_rows: int) -> int | None:
    """How many columns past ``expected`` the first data line has (its width is the file's); None: no data line.
    Counted on the bytes: a column that is not UTF-8 is the parser's and the checks' to name, with its field."""
    before = 0
    with _Guarded(Path(path), max_bytes, False, _HEAD) as guarded:
        for block in guarded.blocks():
            for number, raw in enumerate(block.split(b"\n"), start=before + 1):
                fields = [field for field in _BYTE_SEPARATORS.split(raw) if field]
                if number > skip_rows and fields:
                    return max(0, len(fields) - expected)
            before += block.count(b"\n")
    return None
