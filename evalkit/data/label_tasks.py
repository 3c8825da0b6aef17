"""The pairs a reviewer labels (:class:`LabelTask`), listed from a pool file of ``evalkit pool`` or from a fixture's
own judgments (:func:`load_tasks`), and the exact text of a decision's spans (:func:`span_text`).

A task carries the chunk's text as the fixture holds it, which is the text a reviewer's spans count into; a decision
records that text's SHA-256 (:func:`evalkit.data.labels.text_sha256`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.data.fixture import Chunk, Fixture, Query
from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES, clip, shorten
from evalkit.data.labels import Known, LabelFileError, json_object, non_blank_lines

__all__ = ["LabelTask", "load_tasks", "span_text"]


@dataclass(frozen=True)
class LabelTask:
    """One pair to label, with what a reviewer reads; ``language`` is the query's (as ``evalkit pool`` writes it)."""

    query_id: str
    chunk_id: str
    language: str
    query_text: str
    chunk_title: str
    chunk_text: str


def span_text(source: LabelTask | str, spans: Iterable[Sequence[int]]) -> tuple[str, ...]:
    """The exact characters of each ``(start, end)`` span of a task's chunk text (or of the text given).

    Raises:
        ValueError: a span that is empty, reversed or outside the text.
    """
    text = source.chunk_text if isinstance(source, LabelTask) else source
    found = []
    for span in spans:
        start, end = int(span[0]), int(span[1])
        if not 0 <= start < end <= len(text):
            raise ValueError(f"span [{start}, {end}) is empty, reversed or outside the text ({len(text)} characters)")
        found.append(text[start:end])
    return tuple(found)


def _task(query: Query, chunk: Chunk, known: Known) -> LabelTask:
    return LabelTask(query.query_id, chunk.chunk_id, query.language, query.text, known.titles[chunk.doc_id], chunk.text)


def _task_pair(
    record: dict[str, Any], where: str, queries: dict[str, Query], chunks: dict[str, Chunk]
) -> tuple[tuple[Query, Chunk] | None, list[str]]:
    query_id = record.get("query_id")
    query = queries.get(query_id) if isinstance(query_id, str) else None
    problems = [] if query is not None else [f"{where}: field 'query_id': unknown query {shorten(query_id)}"]
    field = "chunk_id" if "chunk_id" in record else "doc_id"
    chunk_id = record.get(field)
    if "chunk_id" in record and "doc_id" in record and record["doc_id"] != chunk_id:
        problems.append(f"{where}: field 'doc_id': {shorten(record['doc_id'])} is not chunk_id {shorten(chunk_id)}")
    chunk = chunks.get(chunk_id) if isinstance(chunk_id, str) else None
    if chunk is None:
        problems.append(f"{where}: field {field!r}: unknown chunk {shorten(chunk_id)}")
    language = record.get("language")
    if query is not None and language is not None and language != query.language:
        problems.append(f"{where}: field 'language': {shorten(language)} is not query's language {query.language!r}")
    if problems or query is None or chunk is None:
        return None, problems
    return (query, chunk), []


def load_tasks(
    fixture: Fixture, tasks_path: Path | None, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> tuple[LabelTask, ...]:
    """The pairs to label, each with the query's language and text and the chunk's title and text.

    With `tasks_path`, the pairs of a pool file (JSON lines as ``evalkit pool`` writes them: ``query_id``, and
    ``chunk_id`` or ``doc_id`` naming a chunk of the fixture, both equal when both are given; ``language``, when
    given, must be the query's; other keys such as ``best_rank`` and ``runs`` are ignored), in file order. With
    None, every (query, chunk) pair the fixture judges (grade 0 included), in fixture order.

    Raises:
        LabelFileError: naming file, line and field: invalid JSON, an unknown query or chunk, a language that is not
            the query's, or a pair listed twice.
    """
    known = Known.of(fixture)
    queries, chunks = known.queries, known.chunks
    if tasks_path is None:
        return tuple(_task(q, chunks[j.chunk_id], known) for q in fixture.queries for j in q.judgments)
    path = Path(tasks_path)
    name = clip(path.name)
    tasks: list[LabelTask] = []
    problems: list[str] = []
    first_line: dict[tuple[str, str], int] = {}
    for number, line in non_blank_lines(path, max_bytes):
        where = f"{name} line {number}"
        record, found = json_object(line, where)
        pair, more = (None, []) if record is None else _task_pair(record, where, queries, chunks)
        problems.extend(found + more)
        if pair is None:
            continue
        key = (pair[0].query_id, pair[1].chunk_id)
        if key in first_line:
            problems.append(f"{where}: field 'chunk_id': pair {key} is listed again (first on line {first_line[key]})")
            continue
        first_line[key] = number
        tasks.append(_task(*pair, known))
    if problems:
        raise LabelFileError(name, problems)
    return tuple(tasks)
