"""Topics in: the language of each query, for per-language slices of a qrels-and-run score.

Two forms: TSV ``qid<TAB>text`` (no header; a first line ``qid``/``query_id``/``query-id``/``id`` is a header), or
JSONL, one ``{"query_id" (or "_id" / "qid"): ..., "text" (or "query" / "title"): ..., "language": "en" | "zh"}``
object per line, ``language`` optional. A query without a given language gets the one its text is detected as
(:func:`evalkit.data.language.detect_language`); only the languages and IDs are kept, never the text.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.data.ids import id_problem
from evalkit.data.inputs import InputError, cap_problems, clip, loads_strict
from evalkit.data.language import detect_language
from evalkit.data.schema import LANGUAGES, Language
from evalkit.data.tables import DEFAULT_MAX_TABLE_BYTES, TableError, text_lines

__all__ = ["TopicsError", "read_topics"]

_ID_KEYS = ("query_id", "_id", "qid")
_TEXT_KEYS = ("text", "query", "title")
_HEADERS = {"qid", "query_id", "query-id", "id"}


class TopicsError(ValueError):
    """A topics file that cannot be used: names the file, the line and the field."""


def _jsonl(line: str, where: str) -> tuple[str, Language]:
    try:
        record = loads_strict(line)
    except ValueError as exc:
        raise TopicsError(f"{where}: not JSON ({clip(str(exc))})") from None
    if not isinstance(record, dict):
        raise TopicsError(f"{where}: expected an object")
    query_id = next((record[k] for k in _ID_KEYS if k in record), None)
    if not isinstance(query_id, str) or not query_id.strip():
        raise TopicsError(f"{where}: field 'query_id': missing or not a non-empty string")
    _check_id(query_id, where)
    language = record.get("language")
    if language is None:
        text = next((record[k] for k in _TEXT_KEYS if k in record), None)
        if not isinstance(text, str):
            raise TopicsError(f"{where}: field 'text': needed to detect the language when 'language' is not given")
        return query_id, detect_language(text)
    if language not in LANGUAGES:
        raise TopicsError(f"{where}: field 'language': {clip(repr(language))} is not one of {', '.join(LANGUAGES)}")
    return query_id, language


def _tsv(line: str, number: int, where: str) -> tuple[str, Language] | None:
    fields = line.split("\t", 1)
    if number == 1 and fields[0].strip().lower() in _HEADERS:
        return None
    if len(fields) < 2 or not fields[0].strip():
        raise TopicsError(f"{where}: needs 2 tab-separated fields (query-id, text)")
    _check_id(fields[0].strip(), where)
    return fields[0].strip(), detect_language(fields[1])


def _check_id(query_id: str, where: str) -> None:
    """A query ID as runs and qrels have them: no whitespace, no control or bidirectional characters."""
    if any(c.isspace() for c in query_id):
        raise TopicsError(f"{where}: field 'query_id': {clip(repr(query_id))} holds whitespace")
    problem = id_problem(query_id, "query_id", where)
    if problem is not None:
        raise TopicsError(problem)


def read_topics(path: Path, max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> dict[str, Language]:
    """Query ID -> language, from a TSV or JSONL topics file (``.jsonl`` / ``.jsonl.gz``: JSONL, else TSV).

    Raises:
        TopicsError: naming the file, the line and the field; a query listed twice is refused.
    """
    path = Path(path)
    label = clip(path.name)
    jsonl = path.name.endswith((".jsonl", ".jsonl.gz"))
    languages: dict[str, Language] = {}
    repeated: list[str] = []
    try:
        for number, line in text_lines(path, max_bytes):
            if not line.strip():
                continue
            where = f"{label} line {number}"
            entry = _jsonl(line, where) if jsonl else _tsv(line, number, where)
            if entry is None:
                continue
            if entry[0] in languages:
                repeated.append(f"{where}: query {clip(repr(entry[0]))} is listed twice")
            languages[entry[0]] = entry[1]
    except (InputError, TableError) as exc:
        raise TopicsError(str(exc)) from None
    if repeated:
        raise TopicsError(f"{label}: " + "; ".join(cap_problems(repeated)))
    return languages
