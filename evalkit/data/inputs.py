"""Reading untrusted input files safely: regular files only, a size limit, strict JSON, short messages.

Every file evalkit reads from a user (fixture, aliases, baselines, SQuAD) goes through :func:`read_json_file`:

- only a regular file is read: a FIFO, a device such as ``/dev/zero``, a socket or a directory is refused without
  blocking (the file is opened with ``O_NONBLOCK`` and checked with ``fstat`` before any byte is read);
- a file larger than the limit is refused before it is read (:data:`DEFAULT_MAX_INPUT_BYTES`, 64 MiB, raised with
  ``--max-input-mb`` on the command line); a file that grows past the limit while being read is refused too;
- text must be UTF-8, and JSON must be standard JSON: ``NaN``/``Infinity`` and duplicate keys in one object are
  refused (the last value would otherwise silently win), naming the key and where it is;
- messages stay short: echoed names and values are cut with :func:`shorten`, and problem lists are capped with
  :func:`cap_problems` (the total count is always given).
"""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "MAX_ECHO_LENGTH",
    "MAX_PROBLEMS",
    "InputError",
    "cap_problems",
    "clip",
    "loads_strict",
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

_ID_KEYS = ("fixture_id", "doc_id", "chunk_id", "query_id", "group_id", "id")
_READ_CHUNK = 1 << 20


class InputError(ValueError):
    """An input file that cannot be used; the message names the file and the reason."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source}: {reason}")


def clip(text: str, limit: int = MAX_ECHO_LENGTH) -> str:
    """`text` cut to `limit` characters, noting the full length when cut."""
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


def read_input_bytes(path: Path, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; anything else raises :class:`InputError` at once.

    The file is opened with ``O_NONBLOCK`` (so a FIFO does not block the open) and checked with ``fstat`` before
    reading; at most ``max_bytes + 1`` bytes are ever read.
    """
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(source, "file not found") from None
    except OSError as exc:
        raise InputError(source, f"cannot be opened: {exc.strerror or exc}") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise InputError(
                source, f"cannot be read: it is {_describe_kind(status.st_mode)}, and only regular files are read"
            )
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


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (only finite numbers are allowed)")


def _location(path: tuple[int | str, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{clip(part)}" if text else clip(part))
    return text or "the top level"


def _record_name(node: dict[str, Any]) -> str:
    for key in _ID_KEYS:
        value = node.get(key)
        if isinstance(value, str) and value.isascii() and value.isprintable() and len(value) <= MAX_ECHO_LENGTH:
            return f" (record with {key} {value!r})"
    return ""


def _duplicate_keys(data: Any) -> list[str]:
    """Every duplicate key in decoded data, naming the key, where it is and the enclosing record's ID."""
    problems: list[str] = []
    stack: list[tuple[tuple[int | str, ...], Any, str]] = [((), data, "")]
    while stack:
        path, node, record = stack.pop()
        if isinstance(node, dict):
            record = _record_name(node) or record
            problems.extend(
                f"duplicate key {shorten(key)} in the object at {_location(path)}{record}"
                for key in getattr(node, "duplicates", ())
            )
            stack.extend(((*path, key), value, record) for key, value in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend(((*path, index), value, record) for index, value in reversed(list(enumerate(node))))
    return problems


def loads_strict(text: str) -> Any:
    """Decode standard JSON, refusing ``NaN``/``Infinity``, nesting too deep and duplicate keys (ValueError)."""
    hook = _Pairs()
    try:
        data = json.loads(text, object_pairs_hook=hook, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not hook.found:  # the common case: no walk over the whole document
        return data
    problems = _duplicate_keys(data)
    if problems:
        raise ValueError("; ".join(cap_problems(problems, 5)))
    return data


def read_json_file(path: Path, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> tuple[str, Any]:
    """The text and strictly decoded JSON of an input file; :class:`InputError` names the file and the problem."""
    data = read_input_bytes(path, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"cannot be read: not UTF-8 text (invalid byte at offset {exc.start})") from None
    try:
        return text, loads_strict(text)
    except ValueError as exc:
        raise InputError(str(path), f"is not JSON: {clip(str(exc), 400)}") from None
