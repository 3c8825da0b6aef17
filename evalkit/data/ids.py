"""IDs as every reader holds them: no control or bidirectional-control character, no space beyond ASCII, valid UTF-8;
and, for IDs given in Python, not empty and without whitespace (they could not be written to a TREC file). Whole
columns are checked at C speed (:func:`has_bad_ids`); single values name the item and the field (:func:`id_problem`).
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from evalkit.data.inputs import clip

__all__ = [
    "bad_ids",
    "byte_range",
    "check_trec_field",
    "given_id_problem",
    "has_bad_ids",
    "has_refused_given_ids",
    "id_problem",
]

_CONTROL = r"[\x00-\x1f\x7f\u0080-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
"""Control and bidirectional-control characters, as Python's re spells them."""
_SURROGATE = "[\ud800-\udfff]"
_CONTROL_RE2 = r"[\x00-\x1f\x7f\x{80}-\x{9f}\x{61c}\x{200e}\x{200f}\x{202a}-\x{202e}\x{2066}-\x{2069}]"
"""The same class as RE2 (pyarrow) spells it."""
_WIDE_SPACE = "[\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
"""The spaces beyond ASCII that no control class above holds (no-break, ideographic, ...): a TREC line splits at
ASCII white space only, so they would stay inside an ID that evalkit could then not write to a TREC file."""
_INVISIBLE = "[\u00ad\u180e\u200b-\u200d\u2060-\u2064\u206a-\u206f\ufeff\U000e0001-\U000e007f]"
"""Characters that print as nothing (soft hyphen, zero-width space and joiners, word joiner, byte order mark, tags):
two IDs that differ only by one look alike, and no TREC file could be written with them."""
_REFUSED_RE2 = (
    r"[\x00-\x1f\x7f\x{80}-\x{a0}\x{ad}\x{61c}\x{1680}\x{180e}\x{2000}-\x{200f}\x{2028}-\x{202f}\x{205f}-\x{2064}"
    r"\x{2066}-\x{206f}\x{3000}\x{feff}\x{e0001}-\x{e007f}]"
)
""":data:`_CONTROL_RE2`, :data:`_WIDE_SPACE` and :data:`_INVISIBLE` in one class, as RE2 (pyarrow) spells it."""
_SPACE_RE2 = r"[\s\p{Z}\x{85}\x{1c}-\x{1f}\x{0b}\x{0c}]"
"""Every character Python's ``str.isspace`` calls whitespace (a test checks each code point), as RE2 spells it."""


def byte_range(values: pa.Array) -> tuple[int, int]:
    """The smallest and largest byte in a string array's data buffer ((256, -1) when it holds no byte): one pass at C
    speed that confirms the common case (printable ASCII IDs, decimal digits) without looking at each value. The
    buffer may hold bytes of values outside a sliced array: callers use it only to skip a check, never to fail one."""
    data = values.buffers()[2]
    if data is None or not data.size:
        return 256, -1
    low, high = pc.min_max(pa.Array.from_buffers(pa.uint8(), data.size, [None, data])).values()
    return int(low.as_py()), int(high.as_py())


def has_bad_ids(values: pa.Array) -> bool:
    """Whether any ID is not valid UTF-8 or holds a control or bidirectional-control character or a space beyond
    ASCII (:data:`_WIDE_SPACE`).

    The parser leaves UTF-8 to this check: printable ASCII (the usual IDs) is confirmed from the bytes' minimum and
    maximum alone; anything else is validated, then checked character by character."""
    if len(values) == 0:
        return False
    low, high = byte_range(values)
    if low > 0x20 and high < 0x7F:
        return False
    try:
        values.validate(full=True)  # full validation of a string array checks its UTF-8
    except pa.ArrowInvalid:
        return True
    return bool(pc.any(bad_ids(values)).as_py())


def bad_ids(values: pa.Array) -> pa.Array:
    """Mask of IDs with control or bidirectional-control characters or spaces beyond ASCII (ASCII white space
    cannot occur: it separates)."""
    return pc.match_substring_regex(values, _REFUSED_RE2)


def given_id_problem(value: str, field: str, where: str) -> str | None:
    """A problem with an ID given in Python (a mapping's key, a DataFrame's cell): empty, whitespace (it could not be
    written to a TREC file), or a control or bidirectional character; or None."""
    if not value or any(c.isspace() for c in value):
        return f"{where}: field {field!r}: {clip(repr(value))} is empty or holds whitespace"
    return id_problem(value, field, where)


def has_refused_given_ids(values: pa.Array) -> bool:
    """Whether :func:`given_id_problem` refuses any of ``values`` (a column of IDs a JSON file gave): an empty ID,
    whitespace, or what :func:`has_bad_ids` finds. Printable ASCII IDs are confirmed from the bytes' range."""
    if len(values) == 0:
        return False
    if pc.min(pc.binary_length(values)).as_py() == 0:
        return True
    low, high = byte_range(values)  # once: printable ASCII holds no control, bidi or space character
    if low > 0x20 and high < 0x7F:
        return False
    return has_bad_ids(values) or bool(pc.any(pc.match_substring_regex(values, _SPACE_RE2)).as_py())


def id_problem(value: str, field: str, where: str) -> str | None:
    """A problem with one ID field (control or bidirectional characters, a space beyond ASCII, a lone surrogate), or
    None."""
    reason = _refused_because(value)
    return None if reason is None else f"{where}: field {field!r}: {clip(repr(value))} {reason}"


def _refused_because(value: str) -> str | None:
    """Why every reader refuses an ID holding what ``value`` holds (as :func:`has_bad_ids` finds in a column), or
    None."""
    if re.search(_CONTROL, value):
        return "holds a control or bidirectional character"
    if re.search(_WIDE_SPACE, value):
        return "holds a space beyond ASCII (no-break, ideographic)"
    if re.search(_INVISIBLE, value):
        return "holds an invisible character (zero-width, soft hyphen)"
    if re.search(_SURROGATE, value):  # JSON's "\ud800" escape: it has no UTF-8 form
        return "holds a lone surrogate (not valid Unicode text)"
    return None


def check_trec_field(value: str, field: str) -> str:
    """`value` when it can stand as one column of a TREC line (run or qrels): not empty, no whitespace (which
    separates columns) and nothing else the readers refuse in an ID (a control or bidirectional character, a space
    beyond ASCII, an invisible character, a lone surrogate): so every ID a reader takes can be written, and a newline
    can never start a forged line.

    Raises:
        ValueError: naming `field` and the value, quoted with every such character escaped.
    """
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        reason: str | None = "it is empty or holds whitespace, which would break or forge lines"
    else:
        reason = _refused_because(value)
    if reason is not None:
        raise ValueError(f"{field} {clip(repr(value))} cannot be written to a TREC file: {reason}")
    return value
