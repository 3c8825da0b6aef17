"""Shared schema building blocks: the strict base model, constrained types and privacy checks.

Every evalkit schema model inherits :class:`StrictModel`. Reusable constrained types live here so that the fixture,
the report and the parameters of the notebooks agree on what an ID, a language or a bounded text is.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

Language = Literal["en", "zh"]
"""Languages evalkit evaluates: English and Simplified Chinese."""

LANGUAGES: tuple[Language, ...] = ("en", "zh")

MAX_ID_LENGTH = 128
MAX_TITLE_LENGTH = 500
MAX_CHUNK_LENGTH = 20_000
MAX_QUERY_LENGTH = 2_000
MAX_SPAN_LENGTH = 20_000
MAX_DOCUMENTS = 100_000
MAX_CHUNKS = 100_000
MAX_QUERIES = 20_000
MAX_JUDGMENTS_PER_QUERY = 100
MAX_SPANS_PER_JUDGMENT = 20

_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]*$"

_URL = re.compile(r"[a-z][a-z0-9+.-]*://|\bwww\.[a-z0-9-]+\.|\b[a-z0-9.-]+\.[a-z]{2,}:\d{2,5}\b", re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b")
_HOST_PORT = re.compile(r"\b(?:localhost|\d{1,3}(?:\.\d{1,3}){3})(?::\d{1,5})?\b", re.IGNORECASE)
_POSIX_PATH = re.compile(r"(?:^|[\s\"'(=])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]*)*")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\|\\\\[\w.-]+\\")
_SECRETS = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|\bbearer\s+[A-Za-z0-9._~+/-]{8,}"
    r"|\b(?:sk|pk|rk)[-_](?:live[-_]|test[-_])?[A-Za-z0-9]{16,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bxox[abpr]-[A-Za-z0-9-]{10,}"
    r"|\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"
    r"|\b(?:api[_-]?key|secret|token|password|passwd)\s*[:=]\s*\S{6,}",
    re.IGNORECASE,
)

_PRIVACY_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a URL or endpoint", _URL),
    ("an e-mail address", _EMAIL),
    ("a host address", _HOST_PORT),
    ("a filesystem path", _POSIX_PATH),
    ("a filesystem path", _WINDOWS_PATH),
    ("a secret (API key, token or private key)", _SECRETS),
)


def privacy_problem(value: str) -> str | None:
    """Name what `value` looks like when it resembles a path, URL, endpoint or secret; None when it is clean."""
    for label, pattern in _PRIVACY_RULES:
        if pattern.search(value):
            return label
    return None


def _no_private_values(value: str) -> str:
    problem = privacy_problem(value)
    if problem is not None:
        raise ValueError(f"looks like {problem}; fixtures must not carry paths, endpoints or credentials")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


Identifier = Annotated[
    str,
    Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=_ID_PATTERN),
]
"""A stable record ID: ASCII letters, digits and ``. _ : -``, starting with a letter or digit."""

SafeText = Annotated[str, AfterValidator(_not_blank), AfterValidator(_no_private_values)]
"""Free text that is neither blank nor looks like a path, endpoint or secret."""

Title = Annotated[SafeText, Field(max_length=MAX_TITLE_LENGTH)]
ChunkText = Annotated[SafeText, Field(max_length=MAX_CHUNK_LENGTH)]
QueryText = Annotated[SafeText, Field(max_length=MAX_QUERY_LENGTH)]
Grade = Annotated[int, Field(ge=1, le=3)]
"""Graded relevance: 3 directly answers, 2 substantially answers, 1 useful supporting evidence."""
Offset = Annotated[int, Field(ge=0, le=MAX_CHUNK_LENGTH)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
NonNegativeFloat = Annotated[float, Field(ge=0.0)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveInt = Annotated[int, Field(ge=1)]


class StrictModel(BaseModel):
    """Base of every evalkit schema: unknown fields rejected, no type coercion, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
