"""Reading untrusted input files safely: regular files only, a size limit, strict JSON, short messages.

Every JSON file evalkit reads from a user (fixture, aliases, baselines, gates, settings, SQuAD, retriever
configurations) goes through :func:`read_json_file`, and every JSON text (JSONL lines, HTTP responses) through
:func:`loads_strict`; line-oriented files go through :mod:`evalkit.data.tables`, which guards them alike:

- only a regular file is read: a FIFO, a device such as ``/dev/zero``, a socket or a directory is refused without
  blocking (the file is opened with ``O_NONBLOCK`` and checked with ``fstat`` before any byte is read);
- a file larger than the limit is refused before it is read (:data:`DEFAULT_MAX_INPUT_BYTES`, 64 MiB, raised with
  ``--max-input-mb`` on the command line); a file that grows past the limit while being read is refused too;
- text must be UTF-8; a leading byte-order mark (U+FEFF) is dropped;
- JSON must be standard JSON: ``NaN``/``Infinity`` and duplicate keys in one object are refused (the last value
  would otherwise silently win), naming the value or key and where it is (``ablations.bm25.per_query.ndcg@10[3]``);
- JSON must stay within limits that no real file reaches: arrays and objects nested at most
  :data:`MAX_JSON_DEPTH` deep (checked before parsing, in linear time), integers of at most
  :data:`MAX_NUMBER_DIGITS` digits (whatever ``sys.set_int_max_str_digits`` allows) and finite floats (``1e400``
  would otherwise become ``inf``);
- messages stay short: echoed names and values are cut with :func:`shorten`, and problem lists are capped with
  :func:`cap_problems` (the total count is always given).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "MAX_ECHO_LENGTH",
    "MAX_JSON_DEPTH",
    "MAX_NUMBER_DIGITS",
    "MAX_PROBLEMS",
    "InputError",
    "cap_problems",
    "clip",
    "decode_text",
    "loads_strict",
    "nesting_depth",
    "open_regular",
    "read_input_bytes",
    "read_json_file",
    "shorten",
]

DEFAULT_MAX_INPUT_BYTES = 64 * 1024 * 1024
"""Input files larger than this (64 MiB) are refused before reading; ``--max-input-mb`` raises the limit."""
MAX_PROBLEMS = 20
"""At most this many problems are listed in one message (followed by the number left out)."""
MAX_ECHO_LENGTH = 60
"""Names and values quoted back in a message are cut to this many characters."""
MAX_JSON_DEPTH = 64
"""JSON nested deeper than this (arrays and objects) is refused; real files nest far less (SQuAD files 9 deep,
fixtures 7, reports 6)."""
MAX_NUMBER_DIGITS = 300
"""JSON integers with more digits than this are refused (floats must be finite: at most about 1.8e308)."""

_BOM = "\ufeff"
_DEPTH_BLOCK = 1 << 20
_ID_KEYS = ("fixture_id", "doc_id", "chunk_id", "query_id", "group_id", "id")
_READ_CHUNK = 1 << 20


class InputError(ValueError):
    """An input file that cannot be used; the message names the file and the reason."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source}: {reason}")


def clip(text: str, limit: int = MAX_ECHO_LENGTH) -> str:
    """`text` cut to `limit` characters, noting the full length when cut; a character that does not print (a
    newline or an escape in a file name, say) is written as its escape, so a message stays one line and sends
    nothing to the terminal but text."""
    if not text.isprintable():
        text = repr(text)[1:-1]
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def shorten(value: object, limit: int = MAX_ECHO_LENGTH) -> str:
    """``repr`` of `value` (quoted for text) cut to `limit` characters, noting the full length when cut."""
    if not isinstance(value, str):
        return clip(repr(value), limit)
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}... ({len(value)} characters)"


def cap_problems(problems: Sequence[str], limit: int = MAX_PROBLEMS) -> list[str]:
    """The first `limit` problems, then one line saying how many more there are."""
    shown = list(problems[:limit])
    if len(problems) > limit:
        shown.append(f"... and {len(problems) - limit} more")
    return shown


def _describe_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((label for check, label in kinds if check(mode)), "not a regular file")


def open_regular(path: Path) -> int:
    """A file descriptor of `path` opened for reading, when it is a regular file; anything else (a FIFO, a device,
    a socket, a directory, a missing file) raises :class:`InputError` at once. The open uses ``O_NONBLOCK``, so a
    FIFO does not block it; the descriptor is blocking again when returned. The caller closes it."""
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(source, "file not found") from None
    except OSError as exc:
        raise InputError(source, f"cannot be opened: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(source, f"cannot be read: it is {_describe_kind(mode)}, and only regular files are read")
    os.set_blocking(fd, True)
    return fd


def read_input_bytes(path: Path, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; anything else raises :class:`InputError` at once.

    The file is opened by :func:`open_regular` and its size checked with ``fstat`` before reading; at most
    ``max_bytes + 1`` bytes are ever read.
    """
    source = str(path)
    fd = open_regular(path)
    try:
        status = os.fstat(fd)
        if status.st_size > max_bytes:
            raise InputError(source, _too_large(status.st_size, max_bytes))
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(_READ_CHUNK, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise InputError(source, _too_large(size, max_bytes))
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(source, f"cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _too_large(size: int, max_bytes: int) -> str:
    return (
        f"cannot be read: it is larger than the input limit ({size} bytes > {max_bytes / 2**20:g} MiB); "
        "raise the limit with --max-input-mb if the file is trusted"
    )


class _Object(dict[str, Any]):
    """A decoded JSON object that saw some keys more than once (only such objects get this type)."""

    duplicates: tuple[str, ...] = ()


class _Pairs:
    """``object_pairs_hook`` that builds plain dicts and notes whether any object repeated a key."""

    def __init__(self) -> None:
        self.found = False

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) == len(pairs):
            return result
        self.found = True
        marked = _Object(pairs)
        counts = Counter(key for key, _ in pairs)
        marked.duplicates = tuple(key for key, count in counts.items() if count > 1)
        return marked


class _NonFinite:
    """Stands in, while decoding, for a number JSON may not hold, so that its refusal can say where it is."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem


class _Numbers:
    """``parse_constant`` and ``parse_float`` hooks that put a :class:`_NonFinite` in place of ``NaN``,
    ``Infinity`` or a float that overflows (``1e400``), and note that they did."""

    def __init__(self) -> None:
        self.found = False

    def constant(self, name: str) -> _NonFinite:
        self.found = True
        return _NonFinite(f"{name} is not valid JSON (only finite numbers are allowed)")

    def finite_float(self, text: str) -> float | _NonFinite:
        value = float(text)
        if math.isfinite(value):
            return value
        self.found = True
        return _NonFinite(f"a number out of range ({clip(text, 20)})")

    def checked_float(self, text: str) -> float | _NonFinite:
        """:meth:`finite_float` that keeps no value: every finite float decodes as the one object ``0.0``."""
        checked = self.finite_float(text)
        return _ZERO if isinstance(checked, float) else checked


_ZERO: Final = 0.0


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_NUMBER_DIGITS:
        raise ValueError(f"an integer of {digits} digits (more than {MAX_NUMBER_DIGITS})")
    return int(text)


_NOT_STRUCTURE: Final = bytes(b for b in range(256) if b not in b'"[]{}')
_STEPS: Final = np.zeros(256, dtype=np.int8)
_STEPS[list(b"[{")] = 1
_STEPS[list(b"]}")] = -1


def nesting_depth(text: bytes | str) -> int:
    """How deeply the arrays and objects of JSON text nest, counted without parsing (vectorized, linear, in blocks).

    Escaped backslashes and quotes are dropped first, so the quotes left delimit strings and brackets between an
    odd and an even quote are text. For invalid JSON the count may be off, but never below the depth a parser
    reaches before it stops at the first error.
    """
    payload = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    cleaned = payload.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in payload else payload
    # Only quotes and brackets count: the rest is dropped, in C, then every pair of quotes side by side (a string
    # without brackets, or the end of one and the start of the next), which leaves every bracket's parity of quotes.
    marks = cleaned.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    depth = deepest = 0
    inside = False  # within a string at the end of the previous block
    for start in range(0, len(marks), _DEPTH_BLOCK):
        block = np.frombuffer(marks, dtype=np.uint8, count=min(_DEPTH_BLOCK, len(marks) - start), offset=start)
        in_string = np.logical_xor.accumulate(block == ord('"')) ^ inside
        steps = _STEPS[block]
        steps[in_string] = 0
        levels = np.cumsum(steps, dtype=np.int32)
        deepest = max(deepest, depth + int(levels.max()))
        depth += int(levels[-1])
        inside = bool(in_string[-1])
    return deepest


def _location(path: tuple[int | str, ...]) -> str:
    """``a.b[3].c``; a key with a control, bidi or other unprintable character is quoted with it escaped."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        key = clip(part) if part.isprintable() else shorten(part)
        text += f".{key}" if text else key
    return text or "the top level"


def _record_name(node: dict[str, Any]) -> str:
    for key in _ID_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value.isascii() and value.isprintable() and len(value) <= MAX_ECHO_LENGTH:
            return f" (record with {key} {value!r})"
    return ""


def _nodes(data: Any) -> Iterator[tuple[tuple[int | str, ...], Any, str]]:
    """Every value in decoded data in document order, with its path and the ID of the record holding it."""
    stack: list[tuple[tuple[int | str, ...], Any, str]] = [((), data, "")]
    while stack:
        path, node, record = stack.pop()
        if isinstance(node, dict):
            record = _record_name(node) or record
            stack.extend(((*path, key), value, record) for key, value in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend(((*path, index), value, record) for index, value in reversed(list(enumerate(node))))
        yield path, node, record


def _duplicate_keys(data: Any) -> list[str]:
    """Every duplicate key in decoded data, naming the key, where it is and the enclosing record's ID."""
    return [
        f"duplicate key {shorten(key)} in the object at {_location(path)}{record}"
        for path, node, record in _nodes(data)
        for key in getattr(node, "duplicates", ())
    ]


def _first_non_finite(data: Any) -> str:
    """The first number of decoded data JSON may not hold, named with where it is and the enclosing record's ID."""
    return next(
        f"{node.problem} at {_location(path)}{record}"
        for path, node, record in _nodes(data)
        if isinstance(node, _NonFinite)
    )


_DIGIT_BYTES: Final = np.zeros(256, dtype=bool)
_DIGIT_BYTES[list(b"0123456789")] = True
_WORD_BYTES: Final = _DIGIT_BYTES.copy()
_WORD_BYTES[list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_.")] = True


LEAN_CHARACTERS: Final = 16 * 1024**2
"""Above this length, ``loads_strict(text, floats=False)`` keeps no float (a 1,000,000-query report: 92 MB, whose
floats would hold about a gigabyte while it is checked); below it, speed comes first."""


_LONG_NUMBER: Final = re.compile(r"(?<![.0-9])[0-9]{20}|[0-9][eE][+-]?[0-9]{3,}(?![0-9A-Za-z_.])")
"""What :func:`may_hold_long_number` looks for, as a pattern (ASCII classes, as the byte scan's)."""
SCAN_CHARACTERS: Final = 4096
""":func:`may_hold_long_number` searches a shorter text with :data:`_LONG_NUMBER` (about 7 us for a 130-character
line, against 130 us for the byte scan's fixed cost) and scans a longer one's bytes (0.16 s for a 9 MB report,
against 0.53 s for the pattern; 2026-12-06)."""


def may_hold_long_number(text: str) -> bool:
    """Whether JSON text may hold a number too large to take: a float past 1.8e308 has an exponent of three digits
    or an integer part of more than 200 digits, and an integer refused has more than :data:`MAX_NUMBER_DIGITS`.
    So: a run of 20 digits not after a point (a fraction's digits never overflow), or a run of three digits after
    ``e``/``E`` (and a sign) after a digit, followed by neither a letter, a digit nor a point (so a hash's hex such
    as ``8e466a`` does not count). A match inside a string costs only speed. A text shorter than
    :data:`SCAN_CHARACTERS` (a line of JSON lines) is searched with a pattern, a longer one by one vectorised scan of
    its bytes (:func:`_scanned_bytes_may_hold_long_number`): the same answer, each where it is faster."""
    if len(text) < SCAN_CHARACTERS:
        return _LONG_NUMBER.search(text) is not None
    return _scanned_bytes_may_hold_long_number(text)


def _scanned_bytes_may_hold_long_number(text: str) -> bool:
    """:func:`may_hold_long_number` by one vectorised scan of the text's UTF-8 bytes."""
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    digit = np.concatenate(([False], _DIGIT_BYTES[data], [False])).view(np.int8)
    edges = np.flatnonzero(np.diff(digit))  # run starts and ends (exclusive), alternating
    starts, ends = edges[0::2], edges[1::2]
    length = ends - starts
    padded = np.concatenate(([32, 32, 32], data, [32])).astype(np.uint8)  # index i of data is padded[i + 3]
    if (padded[starts[length >= 20] + 2] != 46).any():  # 20 digits not after a point: an integer part
        return True
    starts, ends = starts[length >= 3], ends[length >= 3]
    one, two, three = padded[starts + 2], padded[starts + 1], padded[starts]  # the bytes before each run
    exponent = np.isin(one, (69, 101)) & _DIGIT_BYTES[two]  # 1e400
    signed = np.isin(one, (43, 45)) & np.isin(two, (69, 101)) & _DIGIT_BYTES[three]  # 1e+400
    ended = ~_WORD_BYTES[padded[ends + 3]]
    return bool(((exponent | signed) & ended).any())


def loads_strict(text: str, floats: bool = True) -> Any:
    """Decode standard JSON within the limits above (see the module docstring); every refusal is a ValueError.

    Numbers are checked one by one only where the text may hold one out of range (:func:`may_hold_long_number`), or
    where ``floats=False`` asks a text of more than :data:`LEAN_CHARACTERS` not to keep its floats: there every
    finite float decodes as one shared ``0.0`` (checked, not kept), which holds a large document's tree in a fraction
    of the memory, at the cost of a Python call per number. A leading
    byte-order mark is dropped. Refused: ``NaN``/``Infinity`` and floats that overflow (the first one,
    named with where it is: ``NaN is not valid JSON (...) at runs[3].score``), nesting deeper than
    :data:`MAX_JSON_DEPTH`, integers of more than :data:`MAX_NUMBER_DIGITS` digits, and duplicate keys (named with
    where they are).
    """
    text = text.removeprefix(_BOM)
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:  # else it cannot nest too deep: no scan
        depth = nesting_depth(text)
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"nested {depth} deep (more than {MAX_JSON_DEPTH})")
    hook, numbers = _Pairs(), _Numbers()
    checks: dict[str, Any] = {}  # no run of 20 digits, no 3-digit exponent: every number fits, parsed in C
    if (not floats and len(text) > LEAN_CHARACTERS) or may_hold_long_number(text):
        checks = {"parse_int": _bounded_int, "parse_float": numbers.finite_float if floats else numbers.checked_float}
    try:
        data = json.loads(text, object_pairs_hook=hook, parse_constant=numbers.constant, **checks)
    except RecursionError:  # not expected after the depth check; kept as a last line of defence
        raise ValueError("JSON nested too deeply") from None
    if numbers.found:
        raise ValueError(_first_non_finite(data))
    if not hook.found:  # the common case: no walk over the whole document
        return data
    problems = _duplicate_keys(data)
    if problems:
        raise ValueError("; ".join(cap_problems(problems, 5)))
    return data


def decode_text(data: bytes, source: str) -> str:
    """UTF-8 `data` as text without a leading byte-order mark; :class:`InputError` names `source` and the offset."""
    try:
        return data.decode("utf-8").removeprefix(_BOM)
    except UnicodeDecodeError as exc:
        raise InputError(source, f"cannot be read: not UTF-8 text (invalid byte at offset {exc.start})") from None


def read_json_file(path: Path, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> tuple[str, Any]:
    """The text (without a byte-order mark) and strictly decoded JSON of an input file (:func:`loads_strict`);
    :class:`InputError` names the file and the problem."""
    text = decode_text(read_input_bytes(path, max_bytes), str(path))
    try:
        return text, loads_strict(text)
    except ValueError as exc:
        raise InputError(str(path), f"is not JSON: {clip(str(exc), 400)}") from None
