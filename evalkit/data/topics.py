"""Topics in: the one reader of topics files, for per-language slices of a qrels-and-run score and for
``evalkit import trec``.

Two forms: TSV ``qid<TAB>text`` (no header; a first line whose first field is ``qid``/``query_id``/``query-id``/``id``
is a header), or JSONL, one ``{"query_id" (or "_id" / "qid"): ..., "text" (or "query" / "title"): ...,
"language": "en" | "zh"}`` object per line, ``language`` optional.

:func:`read_tsv_topics` reads a TSV file into :class:`Topic` lines (ID and text, in file order) and lists every
line it refuses, naming the file, the line and the field; a query ID is refused when it is blank or holds
whitespace, a control or a bidirectional character (it could never match a run's or a qrels file's).
:func:`read_topics` maps each query to its language: a query without a given language gets the one its text is
detected as (:func:`evalkit.data.language.detect_language`); only the languages and IDs are kept, never the text.
``evalkit import trec`` keeps the text (:func:`evalkit.data.trec.read_topics_tsv`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalkit.data.field_names import QUERY_ID_KEYS, QUERY_TEXT_KEYS, TOPICS_TSV_COLUMNS, TOPICS_TSV_HEADERS
from evalkit.data.ids import id_problem
from evalkit.data.inputs import InputError, cap_problems, clip, loads_strict
from evalkit.data.language import detect_language
from evalkit.data.schema import LANGUAGES, Language
from evalkit.data.tables import DEFAULT_MAX_TABLE_BYTES, TableError, text_lines

__all__ = ["Topic", "TopicsError", "read_topics", "read_tsv_topics"]


class TopicsError(ValueError):
    """A topics file that cannot be used: names the file, the line and the field."""


@dataclass(frozen=True)
class Topic:
    """One query of a TSV topics file: where it was read (``"<file> line <n>"``), its ID and its text (stripped)."""

    where: str
    query_id: str
    text: str


def _jsonl(line: str, where: str) -> tuple[str, Language]:
    try:
        record = loads_strict(line)
    except ValueError as exc:
        raise TopicsError(f"{where}: not JSON ({clip(str(exc))})") from None
    if not isinstance(record, dict):
        raise TopicsError(f"{where}: expected an object")
    query_id = next((record[k] for k in QUERY_ID_KEYS if k in record), None)
    if not isinstance(query_id, str) or not query_id.strip():
        raise TopicsError(f"{where}: field 'query_id': missing or not a non-empty string")
    _check_id(query_id, where)
    language = record.get("language")
    if language is None:
        text = next((record[k] for k in QUERY_TEXT_KEYS if k in record), None)
        if not isinstance(text, str):
            raise TopicsError(f"{where}: field 'text': needed to detect the language when 'language' is not given")
        return query_id, detect_language(text)
    if language not in LANGUAGES:
        raise TopicsError(f"{where}: field 'language': {clip(repr(language))} is not one of {', '.join(LANGUAGES)}")
    return query_id, language


def _id_problem(query_id: str, field: str, where: str) -> str | None:
    """A query ID as runs and qrels have them: not blank, no whitespace, no control or bidirectional characters."""
    if not query_id:
        return f"{where}: field {field!r}: must not be blank"
    if any(c.isspace() for c in query_id):
        return f"{where}: field {field!r}: {clip(repr(query_id))} holds whitespace"
    return id_problem(query_id, field, where)


def _check_id(query_id: str, where: str) -> None:
    problem = _id_problem(query_id, "query_id", where)
    if problem is not None:
        raise TopicsError(problem)


def read_tsv_topics(
    path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES, label: str | None = None
) -> tuple[list[Topic], list[str]]:
    """The queries of a TSV topics file in file order (see the module docstring), and the problem of every line
    refused (naming `label`, by default the file's name, the line and the field). A query listed twice is listed
    twice: what to do with it is the caller's choice.

    Raises:
        TopicsError: a file that cannot be read (missing, not a regular file, over `max_bytes`, not UTF-8).
    """
    path = Path(path)
    label = clip(path.name) if label is None else label
    topics: list[Topic] = []
    problems: list[str] = []
    first = True
    try:
        for number, line in text_lines(path, max_bytes):
            if not line.strip():
                continue
            fields = line.split("\t", 1)
            query_id = fields[0].strip()
            if first and query_id.lower() in TOPICS_TSV_HEADERS:
                first = False
                continue
            first, where = False, f"{label} line {number}"
            if len(fields) < 2:
                problems.append(f"{where}: needs 2 tab-separated fields ({', '.join(TOPICS_TSV_COLUMNS)}), has 1")
                continue
            problem = _id_problem(query_id, TOPICS_TSV_COLUMNS[0], where)
            if problem is not None:
                problems.append(problem)
                continue
            topics.append(Topic(where, query_id, fields[1].strip()))
    except (InputError, TableError) as exc:
        raise TopicsError(str(exc)) from None
    return topics, problems


def _languages_of(entries: list[tuple[str, str, Language]], label: str) -> dict[str, Language]:
    """Query ID -> language of ``(where, query ID, language)`` entries; a query listed twice is refused."""
    languages: dict[str, Language] = {}
    repeated: list[str] = []
    for where, query_id, language in entries:
        if query_id in languages:
            repeated.append(f"{where}: query {clip(repr(query_id))} is listed twice")
        languages[query_id] = language
    if repeated:
        raise TopicsError(f"{label}: " + "; ".join(cap_problems(repeated)))
    return languages


def read_topics(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> dict[str, Language]:
    """Query ID -> language, from a TSV or JSONL topics file (``.jsonl`` / ``.jsonl.gz``: JSONL, else TSV).

    Raises:
        TopicsError: naming the file, the line and the field; a query listed twice is refused.
    """
    path = Path(path)
    label = clip(path.name)
    if not path.name.endswith((".jsonl", ".jsonl.gz")):
        topics, problems = read_tsv_topics(path, max_bytes)
        if problems:
            listing = "\n".join(f"  - {p}" for p in cap_problems(problems))
            raise TopicsError(f"{label}: {len(problems)} malformed line(s)\n{listing}")
        return _languages_of([(t.where, t.query_id, detect_language(t.text)) for t in topics], label)
    entries: list[tuple[str, str, Language]] = []
    try:
        for number, line in text_lines(path, max_bytes):
            if not line.strip():
                continue
            where = f"{label} line {number}"
            entries.append((where, *_jsonl(line, where)))
    except (InputError, TableError) as exc:
        raise TopicsError(str(exc)) from None
    return _languages_of(entries, label)
