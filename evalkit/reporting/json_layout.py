"""How a report's JSON is laid out: sorted keys and an indent of two, as :func:`json.dumps` writes them, except that a
flat array (numbers, null, booleans and ID-like strings: per-query columns, intervals, the query index) takes one
line, so that a report grows by a few bytes per value rather than a line per value. The bytes are stable: the same
report always gives the same text."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["indented_json"]

_ID_TEXT = re.compile(r"[A-Za-z0-9._:-]*")
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""The C encoder (no indent): what a flat array of numbers and IDs is written with."""


_NOT_SCALAR = re.compile(r'[\[\]{}"]')


def _flat(items: list[Any]) -> str | None:
    """An array written on one line (numbers, null, booleans and ID-like strings only) as it is written; None for
    any other. An array the C encoder writes without a bracket, a brace or a quote inside holds only numbers, null
    and booleans (a per-query column of 100,000 values is told so in one pass of C, not 100,000 checks in Python);
    any other is checked item by item."""
    text: str = _COMPACT_JSON.encode(items)
    if not _NOT_SCALAR.search(text, 1, len(text) - 1):
        return text
    flat = all(
        item is None or isinstance(item, (int, float)) or (isinstance(item, str) and _ID_TEXT.fullmatch(item))
        for item in items
    )
    return text if flat else None


def _json_lines(node: Any, indent: str, out: list[str]) -> None:
    """``node`` as :func:`json.dumps` writes it with sorted keys and an indent of two, except that a non-empty flat
    array (:func:`_flat`) takes one line; appended to ``out`` in pieces."""
    if isinstance(node, dict) and node:
        inner = indent + "  "
        out.append("{")
        for position, key in enumerate(sorted(node)):
            out.append(f"{',' if position else ''}\n{inner}{_COMPACT_JSON.encode(key)}: ")
            _json_lines(node[key], inner, out)
        out.append(f"\n{indent}}}")
        return
    one_line = _flat(node) if isinstance(node, list) and node else None
    if isinstance(node, list) and node and one_line is None:
        inner = indent + "  "
        out.append("[")
        for position, item in enumerate(node):
            out.append(f"{',' if position else ''}\n{inner}")
            _json_lines(item, inner, out)
        out.append(f"\n{indent}]")
    else:
        out.append(one_line if one_line is not None else _COMPACT_JSON.encode(node))


def indented_json(node: Any) -> str:
    """``node`` (JSON-ready: dicts, lists, strings, numbers, None) laid out as the module docstring says."""
    out: list[str] = []
    _json_lines(node, "", out)
    return "".join(out)
