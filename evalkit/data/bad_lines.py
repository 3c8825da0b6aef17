"""Naming the bad lines of a tabular file the columnar parser (:mod:`evalkit.data.tables`) or a later check
refused: only then, and without a Python check of every line when few are bad.

:func:`diagnose` lists every line a reader's line check refuses, the first
:data:`~evalkit.data.inputs.MAX_PROBLEMS` by number. Given :func:`block_check` (the parse and the value checks the
reader applies, a block at a time), it passes over the blocks that parse and checks only the lines of the others,
cut down in parts; counting stops past :data:`MAX_COUNTED`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

import pyarrow as pa
from pyarrow import csv

from evalkit.data.inputs import MAX_PROBLEMS, cap_problems, clip
from evalkit.data.tables import (
    DEFAULT_MAX_TABLE_BYTES,
    TableError,
    block_lines,
    csv_options,
    extra_columns,
    guarded_blocks,
    split_fields,
    text_lines,
)

__all__ = ["MAX_COUNTED", "block_check", "diagnose"]


def block_check(
    path: Path,
    names: Sequence[str],
    types: dict[str, pa.DataType],
    refuses: Callable[[pa.RecordBatch], bool],
    max_bytes: int = DEFAULT_MAX_TABLE_BYTES,
    skip_rows: int = 0,
) -> Callable[[bytes, int], bool]:
    """For :func:`diagnose`: whether a block of the file's normalised lines (the first numbered as given) parses as
    :func:`read_columns` parses the file and no parsed batch is one that ``refuses`` refuses."""
    extra = extra_columns(path, len(names), max_bytes, skip_rows) or 0
    column_names = [*names, *(f"_extra{i}" for i in range(extra))]
    parse_options, convert_options = csv_options(names, types)

    def clean(block: bytes, first: int) -> bool:
        options = csv.ReadOptions(
            column_names=column_names,
            skip_rows=max(0, skip_rows - first + 1),
            use_threads=False,
            block_size=len(block) + 1,  # one parser block: a long line is never cut
        )
        sink = pa.BufferOutputStream()  # a copy pyarrow owns (see _parse_blocks)
        sink.write(block)
        try:
            table = csv.read_csv(pa.BufferReader(sink.getvalue()), options, parse_options, convert_options)
        except pa.ArrowInvalid:
            return False
        return not any(refuses(batch) for batch in table.to_batches())

    return clean


_SUSPECT_BYTES = 1 << 16
_SUSPECT_PARTS = 8
""":func:`diagnose` cuts a block that does not parse in this many parts, and each part that does not parse again,
until the parts are :data:`_SUSPECT_BYTES` small; their lines are then checked one by one. A block more than half
of whose parts fail has its lines checked at once. Both bound the parsing wasted on a file with bad lines all
over it: a bad line every 1,000 lines of 17 MB took 2.8 s cut in halves down to 64 KiB, 2.3 s cut in eights, 1.9 s
line by line, and 2.0 s now (2026-12-03, one process at a time)."""
MAX_COUNTED: Final = 1000
""":func:`diagnose` stops past this many malformed lines (the first :data:`MAX_PROBLEMS` are listed anyway): a
file of the wrong kind is refused at once, not after a Python check of every one of its lines."""


def diagnose(
    path: Path,
    check: Callable[[list[str], str], str | None],
    max_bytes: int = DEFAULT_MAX_TABLE_BYTES,
    skip_rows: int = 0,
    clean: Callable[[bytes, int], bool] | None = None,
) -> TableError:
    """The error for a refused file: every line whose fields ``check`` refuses, the first 20 listed by number.

    ``check(fields, where)`` returns a problem (naming the field) or None; blank lines are skipped. With ``clean``
    (see :func:`block_check`), only the lines of blocks that do not parse are checked: a block is cut in parts
    until the parts that fail are small (:data:`_SUSPECT_PARTS`), so that a few bad lines in a large file are
    found in about the time it takes to parse it (one bad line at the end of 17 MB: 0.41 s, 1.95 s line by line).
    Past :data:`MAX_COUNTED` problems the rest of the file is not checked.
    """
    label = clip(Path(path).name)
    problems: list[str] = []
    stopped = 0
    try:
        for number, line in text_lines(path, max_bytes) if clean is None else _suspect_lines(path, max_bytes, clean):
            fields = split_fields(line)
            if number <= skip_rows or not fields:
                continue
            problem = check(fields, f"{label} line {number}")
            if problem is not None:
                problems.append(problem)
                if len(problems) > MAX_COUNTED:
                    stopped = number
                    break
    except TableError as exc:
        problems.append(str(exc))
    if not problems:
        return TableError(f"{label}: the file could not be parsed")
    if stopped:
        listing = "\n".join(f"  - {p}" for p in [*problems[:MAX_PROBLEMS], "... and more"])
        return TableError(
            f"{label}: more than {MAX_COUNTED:,} malformed lines (not checked past line {stopped:,})\n{listing}",
            problems,
        )
    listing = "\n".join(f"  - {p}" for p in cap_problems(problems))
    return TableError(f"{label}: {len(problems)} malformed line(s)\n{listing}", problems)


def _suspect_lines(path: Path, max_bytes: int, clean: Callable[[bytes, int], bool]) -> Iterator[tuple[int, str]]:
    """The numbered lines of the blocks that ``clean`` refuses, cut down to :data:`_SUSPECT_BYTES` (see
    :data:`_SUSPECT_PARTS`)."""
    before = 0
    for block in guarded_blocks(path, max_bytes, True):
        yield from _suspects(block, before, clean, path)
        before += block.count(b"\n")


def _suspects(
    block: bytes, before: int, clean: Callable[[bytes, int], bool], path: Path, failed: bool = False
) -> Iterator[tuple[int, str]]:
    """The numbered lines to check of a block (``failed``: already known not to parse)."""
    if not failed and (not block.strip() or clean(block, before + 1)):
        return
    cuts = [block.find(b"\n", len(block) * part // _SUSPECT_PARTS) + 1 for part in range(1, _SUSPECT_PARTS)]
    bounds = sorted({0, len(block), *(cut for cut in cuts if 0 < cut < len(block))})
    if len(block) <= _SUSPECT_BYTES or len(bounds) == 2:  # small, or one line fills it: check its lines
        yield from block_lines(block, before, path)
        return
    parts = []  # (start, end, lines before it) of each part cut at line ends
    for start, end in itertools.pairwise(bounds):
        parts.append((start, end, before))
        before += block.count(b"\n", start, end)
    bad = [(a, b, n) for a, b, n in parts if block[a:b].strip() and not clean(block[a:b], n + 1)]
    if 2 * len(bad) > len(parts):  # bad lines all over: checking every line costs less than cutting again
        yield from block_lines(block, parts[0][2], path)
        return
    for start, end, lines_before in bad:
        yield from _suspects(block[start:end], lines_before, clean, path, failed=True)
