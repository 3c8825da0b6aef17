"""Topics in: the one reader of topics files, for per-language slices of a qrels-and-run score
(:func:`read_topics`) and for ``evalkit import trec`` and ``evalkit import beir`` (``queries.jsonl``), which build
their queries on :func:`read_tsv_topics` and :func:`read_jsonl_topics`.

Two forms: TSV ``qid<TAB>text`` (no header; a first line whose first field is ``qid``/``query_id``/``query-id``/``id``
is a header), or JSONL, one object per line with the query ID under ``_id``, ``query_id`` or ``qid``, its text under
``text``, ``query`` or ``title`` (the first key present is read), and optionally its language as ``language`` or
``metadata.language`` (``en`` or ``zh``); ``metadata`` holds anything else (an evalkit export's tags and spans).

Every reader refuses, naming the file, the line and the field: a query ID that is blank or holds whitespace, a
control or a bidirectional character (it could never match a run's or a qrels file's); in JSONL, an ID that is
neither a string nor an integer, a text that is not a string, a ``metadata`` that is not an object, and a language
that is neither ``en`` nor ``zh`` (or given twice, differently). The policy on what readers of these files have
differed about:

- a JSON integer query ID (not a boolean or a float) is read as its decimal text, ``7`` as ``"7"``, as a run or
  qrels line that names it spells it; nothing is lost, so it is not counted as a repair;
- an unknown language is refused, never ignored: a query's slice would otherwise be guessed;
- a query listed twice is kept once when the lines agree (the same text and language: the import counts it as
  ``duplicate_id``), and refused, naming both lines, when they differ (which text was judged could only be
  guessed), as the qrels reader keeps a repeated judgment once and refuses a pair judged with two grades.

:func:`read_topics` maps each query to its language: a query without a given language gets the one its text is
detected as (:func:`evalkit.data.language.detect_language`); only the languages and IDs are kept, never the text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from evalkit.data.field_names import QUERY_ID_KEYS, QUERY_TEXT_KEYS, TOPICS_TSV_COLUMNS, TOPICS_TSV_HEADERS
from evalkit.data.ids import id_problem
from evalkit.data.inputs import InputError, cap_problems, clip, loads_strict
from evalkit.data.language import detect_language
from evalkit.data.schema import LANGUAGES, Language
from evalkit.data.tables import DEFAULT_MAX_TABLE_BYTES, TableError, text_lines

__all__ = [
    "Topic",
    "TopicLines",
    "TopicsError",
    "language_problem",
    "read_jsonl_topics",
    "read_topics",
    "read_tsv_topics",
]


class TopicsError(ValueError):
    """A topics file that cannot be used: names the file, the line and the field."""


@dataclass(frozen=True)
class Topic:
    """One query of a topics file: where it was read (``"<file> line <n>"``), its ID and its text (a TSV line's
    stripped; None when a JSONL record has none), with what a JSONL record adds: its given language (None: not
    given), the key its ID was read from, its ``metadata`` and the keys the reader did not read."""

    where: str
    query_id: str
    text: str | None
    language: Language | None = None
    id_field: str = TOPICS_TSV_COLUMNS[0]
    metadata: Mapping[str, Any] = field(default_factory=dict)
    unread: tuple[str, ...] = ()


@dataclass(frozen=True)
class TopicLines:
    """What a topics file holds: each query once (in file order), the lines that repeat an earlier one exactly
    (kept once), and the problem of every line refused, naming the file, the line and the field."""

    topics: list[Topic]
    repeats: list[Topic]
    problems: list[str]


def _id_problem(query_id: str, field: str, where: str) -> str | None:
    """A query ID as runs and qrels have them: not blank, no whitespace, no control or bidirectional characters."""
    if not query_id:
        return f"{where}: field {field!r}: must not be blank"
    if any(c.isspace() for c in query_id):
        return f"{where}: field {field!r}: {clip(repr(query_id))} holds whitespace"
    return id_problem(query_id, field, where)


def language_problem(value: object, field: str, where: str) -> str | None:
    """The problem of a given language (None: not given), or None when it is one evalkit knows."""
    if value is None or value in LANGUAGES:
        return None
    known = " or ".join(repr(language) for language in LANGUAGES)
    return f"{where}: field {field!r}: must be {known}, not {clip(repr(value))}"


def _once(read: Iterator[Topic | str]) -> TopicLines:
    """Topics and problems in file order, made into each query once (see the module docstring)."""
    lines = TopicLines([], [], [])
    first: dict[str, Topic] = {}
    for topic in read:
        if isinstance(topic, str):
            lines.problems.append(topic)
        elif topic.query_id not in first:
            first[topic.query_id] = topic
            lines.topics.append(topic)
        else:
            earlier = first[topic.query_id]
            differ = [name for name in ("text", "language") if getattr(topic, name) != getattr(earlier, name)]
            if not differ:
                lines.repeats.append(topic)
                continue
            lines.problems.append(
                f"{topic.where}: field {topic.id_field!r}: query {clip(repr(topic.query_id))} is listed again with "
                f"another {' and '.join(differ)} than at {earlier.where}"
            )
    return lines


def _lines(path: Path, max_bytes: int) -> Iterator[tuple[int, str]]:
    try:
        yield from text_lines(path, max_bytes)
    except (InputError, TableError) as exc:
        raise TopicsError(str(exc)) from None


def _tsv_topics(path: Path, max_bytes: int, label: str) -> Iterator[Topic | str]:
    first = True
    for number, line in _lines(path, max_bytes):
        fields = line.split("\t", 1)
        query_id = fields[0].strip()
        if first and query_id.lower() in TOPICS_TSV_HEADERS:
            first = False
            continue
        first, where = False, f"{label} line {number}"
        if len(fields) < 2:
            yield f"{where}: needs 2 tab-separated fields ({', '.join(TOPICS_TSV_COLUMNS)}), has 1"
            continue
        yield _id_problem(query_id, TOPICS_TSV_COLUMNS[0], where) or Topic(where, query_id, fields[1].strip())


def read_tsv_topics(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES, label: str | None = None) -> TopicLines:
    """The queries of a TSV topics file (see the module docstring); problems name `label` (by default the file's
    name), the line and the field.

    Raises:
        TopicsError: a file that cannot be read (missing, not a regular file, over `max_bytes`, not UTF-8).
    """
    path = Path(path)
    return _once(_tsv_topics(path, max_bytes, clip(path.name) if label is None else label))


def _query_id(record: dict[str, Any], where: str) -> tuple[str, str]:
    """The record's ID key and its ID as text (an integer as its decimal digits)."""
    key = next((k for k in QUERY_ID_KEYS if k in record), None)
    if key is None:
        raise TopicsError(f"{where}: field {QUERY_ID_KEYS[0]!r}: required (or {' or '.join(QUERY_ID_KEYS[1:])})")
    value = record[key]
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise TopicsError(f"{where}: field {key!r}: must be a string or an integer, not {type(value).__name__}")
    problem = _id_problem(value, key, where)
    if problem is not None:
        raise TopicsError(problem)
    return key, value


def _text(record: dict[str, Any], where: str) -> tuple[str | None, str | None]:
    """The record's text key and text (both None when it has none)."""
    key = next((k for k in QUERY_TEXT_KEYS if k in record), None)
    if key is None:
        return None, None
    if not isinstance(record[key], str):
        raise TopicsError(f"{where}: field {key!r}: must be a string, not {type(record[key]).__name__}")
    return key, record[key]


def _language(record: dict[str, Any], metadata: Mapping[str, Any], where: str) -> Language | None:
    given = {"language": record.get("language"), "metadata.language": metadata.get("language")}
    for name, value in given.items():
        problem = language_problem(value, name, where)
        if problem is not None:
            raise TopicsError(problem)
    top, nested = given.values()
    if top is not None and nested is not None and top != nested:
        raise TopicsError(f"{where}: field 'metadata.language': {nested!r} differs from field 'language': {top!r}")
    return cast(Language | None, nested if top is None else top)


def _jsonl_topic(line: str, where: str) -> Topic:
    try:
        record = loads_strict(line)
    except ValueError as exc:
        raise TopicsError(f"{where}: not JSON ({clip(str(exc), 200)})") from None
    if not isinstance(record, dict):
        raise TopicsError(f"{where}: must be a JSON object, not {type(record).__name__}")
    id_key, query_id = _query_id(record, where)
    text_key, text = _text(record, where)
    metadata = record.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise TopicsError(f"{where}: field 'metadata': must be an object, not {type(metadata).__name__}")
    metadata = metadata or {}
    unread = tuple(sorted(set(record) - {id_key, text_key, "language", "metadata"}))
    return Topic(where, query_id, text, _language(record, metadata, where), id_key, metadata, unread)


def _jsonl_topics(path: Path, max_bytes: int, label: str) -> Iterator[Topic | str]:
    for number, line in _lines(path, max_bytes):
        try:
            yield _jsonl_topic(line, f"{label} line {number}")
        except TopicsError as exc:
            yield str(exc)


def read_jsonl_topics(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES, label: str | None = None) -> TopicLines:
    """The queries of a JSONL topics or queries file (see the module docstring); problems name `label` (by default
    the file's name), the line and the field.

    Raises:
        TopicsError: a file that cannot be read (missing, not a regular file, over `max_bytes`, not UTF-8).
    """
    path = Path(path)
    return _once(_jsonl_topics(path, max_bytes, clip(path.name) if label is None else label))


def read_topics(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> dict[str, Language]:
    """Query ID -> language, from a TSV or JSONL topics file (``.jsonl`` / ``.jsonl.gz``: JSONL, else TSV).

    Raises:
        TopicsError: naming the file, the line and the field (see the module docstring).
    """
    path = Path(path)
    jsonl = path.name.endswith((".jsonl", ".jsonl.gz"))
    lines = read_jsonl_topics(path, max_bytes) if jsonl else read_tsv_topics(path, max_bytes)
    languages: dict[str, Language] = {}
    problems = list(lines.problems)
    for topic in lines.topics:
        if topic.language is not None:
            languages[topic.query_id] = topic.language
        elif topic.text is not None and topic.text.strip():
            languages[topic.query_id] = detect_language(topic.text)
        else:  # a blank text has no language to detect either (the importers skip it as blank_text)
            problems.append(f"{topic.where}: field 'text': needed to detect the language when none is given")
    if problems:
        listing = "\n".join(f"  - {p}" for p in cap_problems(problems))
        raise TopicsError(f"{clip(path.name)}: {len(problems)} refused line(s)\n{listing}")
    return languages
