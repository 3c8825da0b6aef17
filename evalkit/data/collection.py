"""A test collection in the shape the IR field exchanges it: corpus records, queries and graded qrels.

The BEIR (:mod:`evalkit.data.beir`) and TREC (:mod:`evalkit.data.trec`) readers share this module: reading a JSONL
corpus forgivingly (every repair and skip goes to a :class:`~evalkit.data.repairs.RepairLog`), and queries and qrels
through the one topics and qrels readers that scoring uses (:func:`query_records`, :func:`read_qrels`), turning a
collection into a strict :class:`~evalkit.data.fixture.Fixture`. Their writers write a fixture's corpus and queries
back as JSONL with :mod:`evalkit.data.collection_files`.

Mapping (what the writers produce and the readers read back):

- **Corpus record** = one chunk: ``{"_id": chunk_id, "title": document title, "text": chunk text, "metadata":
  {"doc_id": ..., "language": ...}}``. On reading, chunks that share ``metadata.doc_id`` form one document (its
  language and title are the first chunk's; a later chunk that gives another is recorded, ``conflicting_document``);
  without it every record is its own document, ``doc_id = _id``.
- **Query** = ``{"_id": query_id, "text": ..., "metadata": {"language": ..., "tags": [...], "spans": [{"chunk_id",
  "start", "text"}]}}``, read by the one topics reader (:mod:`evalkit.data.topics`: its keys, ID checks, languages
  and repeated queries). Spans are evalkit's own and optional: a relevant judgment (grade 1-3) without them gets
  the whole chunk as its span (``missing_spans``); a judgment of grade 0 (judged, not relevant) has none.
- **Grades** of a qrels file: 1-3 as they are, 0 kept as "judged, not relevant"; ``-1`` is trec_eval's "pooled, not
  judged" (as infAP reads it), so the pair stays unjudged (``pooled_not_judged``); ``-2`` and below are left out
  too, as trec_eval reads every negative grade (``negative_grade``; its ``repair`` makes them 0, judged not
  relevant, for TREC Web's junk pages); above 3 becomes 3 (``grade_above_3``).
- **Language** of a record: ``metadata.language`` when present, else the ``language`` option: ``en``, ``zh`` or
  ``auto`` (:func:`evalkit.data.language.detect_language`, per record).
- **IDs** with characters outside ``A-Z a-z 0-9 . _ : -`` have each such character replaced by ``_``
  (``id_rewritten``); an ID that so loses letters or digits also gets ``-`` and 8 hex digits of their SHA-256
  (:func:`evalkit.data.assembly.replace_id_characters`); two IDs that still become equal are refused.
- **Queries without a qrel** become no-answer queries (``unjudged_queries="no-answer"``) or are left out
  (``"skip"``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

from pydantic import Field

from evalkit.data.assembly import ImportOptions, assemble_fixture, replace_id_characters
from evalkit.data.field_names import QUERY_TEXT_KEYS
from evalkit.data.fixture import RELEVANT_GRADE, Fixture
from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES
from evalkit.data.language import detect_language
from evalkit.data.qrels import Layout, QrelsError, read_qrels_lines
from evalkit.data.repairs import CollectionKind, RepairLog, SourceFormatError
from evalkit.data.schema import LANGUAGES, MAX_ID_LENGTH, Language, is_identifier, privacy_problem
from evalkit.data.sources import read_jsonl
from evalkit.data.topics import TopicLines, TopicsError, language_problem, read_jsonl_topics

__all__ = [
    "COLLECTION_KINDS",
    "CollectionOptions",
    "CorpusRecord",
    "IdMapper",
    "Qrel",
    "QueryRecord",
    "build_fixture",
    "query_records",
    "read_corpus",
    "read_qrels",
    "read_queries",
]

COLLECTION_KINDS: tuple[CollectionKind, ...] = get_args(CollectionKind)
"""The kinds of problem a collection import reports, in the order the CLI's help lists them."""


class CollectionOptions(ImportOptions):
    """How a BEIR or TREC collection becomes a fixture (the fixture's ID, version, licence and text policy:
    ImportOptions)."""

    language: Literal["en", "zh", "auto"] = Field(
        default="auto", description="language of records without metadata.language; auto detects per record"
    )
    unjudged_queries: Literal["no-answer", "skip"] = Field(
        default="no-answer", description="a query without any qrel: a no-answer query, or left out"
    )

    def language_of(self, text: str) -> Language:
        """The language of a record that does not name one: the ``language`` option, or detected when ``auto``."""
        return detect_language(text) if self.language == "auto" else self.language


@dataclass(frozen=True)
class CorpusRecord:
    """One corpus record: a chunk and the document it belongs to."""

    chunk_id: str
    doc_id: str
    title: str
    text: str
    language: Language


@dataclass(frozen=True)
class QueryRecord:
    """One query; `spans` are evalkit's own (chunk ID -> spans as ``{"start", "text"}``), empty for other tools."""

    query_id: str
    text: str
    language: Language
    tags: tuple[str, ...] = ()
    spans: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Qrel:
    """A graded judgment read from a qrels file (grade already within 0..3, 0 judged not relevant); `where` names
    the file and line."""

    query_id: str
    chunk_id: str
    grade: int
    where: str


class IdMapper:
    """Maps source IDs to fixture IDs (rewriting characters the schema does not allow) and finds collisions."""

    def __init__(self, kind: str, log: RepairLog) -> None:
        self.kind = kind
        self.log = log
        self.owner: dict[str, str] = {}
        self.seen: set[str] = set()

    def source_id(self, value: Any, where: str, key: str) -> str | None:
        """The record's source ID as text (an integer is read as its digits); None (problem noted) otherwise."""
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            self.log.failures.append(f"{where}: field {key!r}: must be a non-blank string")
            return None
        return value

    def fixture_id(self, source: str, where: str, key: str) -> str | None:
        """The fixture ID of `source`, or None when the record is skipped (duplicate) or refused."""
        if source in self.seen:
            self.log.note("duplicate_id", source, f"{where}: field {key!r}: {self.kind} {source!r} was already read")
            return None
        self.seen.add(source)
        ident = _rewrite(source)
        if ident != source and self.log.note("id_rewritten", ident, f"{where}: field {key!r}: {source!r}") == "fail":
            return None
        if len(ident) > MAX_ID_LENGTH or not is_identifier(ident):
            self.log.failures.append(f"{where}: field {key!r}: not a usable ID (at most {MAX_ID_LENGTH} characters)")
            return None
        if ident in self.owner:
            self.log.failures.append(f"{where}: field {key!r}: becomes {ident!r} like {self.owner[ident]!r}")
            return None
        self.owner[ident] = source
        return ident


def _rewrite(source: str) -> str:
    ident = replace_id_characters(source)
    return ident if re.match(r"[A-Za-z0-9]", ident) else f"x{ident}"


def _unknown_keys(keys: Iterable[str], where: str, ident: str, log: RepairLog) -> None:
    for key in keys:
        log.note("unknown_key", f"{ident}.{key}", f"{where}: field {key!r}: not a field of the format")


def _metadata(record: dict[str, Any], where: str, log: RepairLog) -> dict[str, Any]:
    metadata = record.get("metadata")
    if metadata is None or isinstance(metadata, dict):
        return metadata or {}
    log.failures.append(f"{where}: field 'metadata': must be an object, not {type(metadata).__name__}")
    return {}


def _language(metadata: dict[str, Any], text: str, where: str, options: CollectionOptions, log: RepairLog) -> Language:
    value = metadata.get("language")
    problem = language_problem(value, "metadata.language", where)
    if problem is not None:
        log.failures.append(problem)
    return options.language_of(text) if value not in LANGUAGES else cast(Language, value)


def _text_and_metadata(record: dict[str, Any], where: str, log: RepairLog) -> tuple[str | None, dict[str, Any]]:
    """A corpus record's text (None when it is missing or not a string, the problem recorded) and its metadata."""
    metadata = _metadata(record, where, log)
    text = record.get("text")
    if not isinstance(text, str):
        problem = "required" if "text" not in record else f"must be a string, not {type(text).__name__}"
        log.failures.append(f"{where}: field 'text': {problem}")
        return None, metadata
    return text, metadata


def _fixture_id(ids: IdMapper, text: str, source: str, where: str, key: str) -> str | None:
    """The record's fixture ID; None when its text is blank (``blank_text``) or its ID is skipped or refused."""
    if not text.strip():
        ids.log.note("blank_text", source, f"{where}: field 'text': must not be blank")
        return None
    return ids.fixture_id(source, where, key)


def _note_links(ident: str, text: str, where: str, options: CollectionOptions, log: RepairLog) -> None:
    problem = privacy_problem(text)
    if options.allow_links_in_text and problem is not None and privacy_problem(text, allow_links=True) is None:
        log.note("links_in_text", ident, f"{where}: field 'text': {problem}")


def read_corpus(
    path: Path, label: str, options: CollectionOptions, log: RepairLog, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> list[CorpusRecord]:
    """The corpus records of a JSONL corpus file of at most `max_bytes` (see the module docstring), in file order."""
    ids = IdMapper("corpus record", log)
    records: list[CorpusRecord] = []
    for where, record in read_jsonl(path, label, max_bytes):
        source = ids.source_id(record.get("_id"), where, "_id")
        if source is None:
            continue
        _unknown_keys(sorted(set(record) - {"_id", "title", "text", "metadata"}), where, source, log)
        text, metadata = _text_and_metadata(record, where, log)
        title = record.get("title", "")
        if text is None:
            continue
        if not isinstance(title, str):
            log.failures.append(f"{where}: field 'title': must be a string, not {type(title).__name__}")
            continue
        chunk_id = _fixture_id(ids, text, source, where, "_id")
        if chunk_id is None:
            continue
        doc_id = _doc_id(metadata, chunk_id, where, log)
        language = _language(metadata, f"{title} {text}", where, options, log)
        _note_links(chunk_id, text, where, options, log)
        records.append(CorpusRecord(chunk_id, doc_id, title, text, language))
    return records


def _doc_id(metadata: dict[str, Any], chunk_id: str, where: str, log: RepairLog) -> str:
    value = metadata.get("doc_id")
    if value is None:
        return chunk_id
    if not isinstance(value, str) or not is_identifier(value):
        log.failures.append(f"{where}: field 'metadata.doc_id': must be an ID of A-Z a-z 0-9 . _ : -")
        return chunk_id
    return value


def read_queries(
    path: Path, label: str, options: CollectionOptions, log: RepairLog, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> list[QueryRecord]:
    """The queries of a JSONL queries or topics file of at most `max_bytes`, in order: :func:`query_records` of the
    one topics reader's :func:`~evalkit.data.topics.read_jsonl_topics`. Raises SourceFormatError for a file that
    cannot be read (missing, not a regular file, too large, not UTF-8)."""
    try:
        lines = read_jsonl_topics(path, max_bytes, label)
    except TopicsError as exc:
        raise SourceFormatError(str(path), [str(exc)]) from None
    return query_records(lines, options, log)


def query_records(lines: TopicLines, options: CollectionOptions, log: RepairLog) -> list[QueryRecord]:
    """The queries of a topics file as the one topics reader read it (:mod:`evalkit.data.topics`), in order: lines
    it refused and queries without text are failures; exact repeats ``duplicate_id``, keys it did not read
    ``unknown_key``, blank text ``blank_text``, IDs rewritten like the records' (``id_rewritten``); a language not
    given is the ``language`` option's."""
    log.failures.extend(lines.problems)
    for again in lines.repeats:
        problem = f"{again.where}: field {again.id_field!r}: query {again.query_id!r} was already read"
        log.note("duplicate_id", again.query_id, problem)
    ids = IdMapper("query", log)
    queries: list[QueryRecord] = []
    for topic in lines.topics:
        _unknown_keys(topic.unread, topic.where, topic.query_id, log)
        if topic.text is None:
            log.failures.append(f"{topic.where}: field {QUERY_TEXT_KEYS[0]!r}: required")
            continue
        query_id = _fixture_id(ids, topic.text, topic.query_id, topic.where, topic.id_field)
        if query_id is None:
            continue
        language = topic.language or options.language_of(topic.text)
        _note_links(query_id, topic.text, topic.where, options, log)
        tags, spans = _evalkit_metadata(topic.metadata, topic.where, log)
        queries.append(QueryRecord(query_id, topic.text, language, tags, spans))
    return queries


def _evalkit_metadata(
    metadata: Mapping[str, Any], where: str, log: RepairLog
) -> tuple[tuple[str, ...], dict[str, list[dict[str, Any]]]]:
    """Tags and spans an evalkit export wrote into a query's metadata (checked for shape; the schema checks values)."""
    tags = metadata.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        log.failures.append(f"{where}: field 'metadata.tags': must be a list of strings")
        tags = []
    spans: dict[str, list[dict[str, Any]]] = {}
    raw_spans = metadata.get("spans", [])
    if not isinstance(raw_spans, list):
        log.failures.append(f"{where}: field 'metadata.spans': must be a list")
        raw_spans = []
    for index, span in enumerate(raw_spans):
        if not isinstance(span, dict) or set(span) != {"chunk_id", "start", "text"}:
            log.failures.append(f"{where}: field 'metadata.spans[{index}]': must have chunk_id, start and text")
            continue
        spans.setdefault(str(span["chunk_id"]), []).append({"start": span["start"], "text": span["text"]})
    return tuple(tags), spans


def _documents(corpus: Sequence[CorpusRecord], log: RepairLog) -> dict[str, dict[str, str]]:
    """Document ID -> document, in order of first appearance; a document whose title is blank gets its ID as title
    (``blank_title`` repair) or is left out with its chunks (skip)."""
    documents: dict[str, dict[str, str]] = {}
    skipped: set[str] = set()
    for record in corpus:
        if record.doc_id in documents or record.doc_id in skipped:
            first = documents.get(record.doc_id)
            if first is not None and (first["language"], first["title"]) != (record.language, record.title):
                problem = f"corpus record {record.chunk_id!r}: title or language differs from its document's first"
                log.note("conflicting_document", record.doc_id, problem)  # the first kept (repair), or refused
            continue
        title = record.title
        if not title.strip():
            problem = f"corpus record {record.chunk_id!r}: field 'title': must not be blank"
            action = log.note("blank_title", record.doc_id, problem)
            if action == "skip":
                skipped.add(record.doc_id)
                continue
            title = record.doc_id if action == "repair" else title
        documents[record.doc_id] = {"doc_id": record.doc_id, "language": record.language, "title": title}
    return documents


def _judgments(
    query: QueryRecord, qrels: Sequence[Qrel], chunks: dict[str, CorpusRecord], log: RepairLog
) -> list[dict[str, Any]]:
    judgments: list[dict[str, Any]] = []
    for qrel in qrels:
        spans = query.spans.get(qrel.chunk_id, [])
        if not spans and qrel.grade >= RELEVANT_GRADE:
            problem = f"{qrel.where}: query {query.query_id!r}, chunk {qrel.chunk_id!r}: no answer spans"
            if log.note("missing_spans", query.query_id, problem) == "fail":
                continue
            spans = [{"start": 0, "text": chunks[qrel.chunk_id].text}]
        judgments.append({"chunk_id": qrel.chunk_id, "grade": qrel.grade, "spans": spans})
    return judgments


def _grouped_qrels(
    qrels: Sequence[Qrel], queries: Sequence[QueryRecord], chunks: dict[str, CorpusRecord], log: RepairLog
) -> dict[str, list[Qrel]]:
    """Query ID -> its qrels in file order; qrels of unknown queries or chunks and repeated pairs are skipped."""
    query_ids = {q.query_id for q in queries}
    grouped: dict[str, list[Qrel]] = {}
    seen: set[tuple[str, str]] = set()
    for qrel in qrels:
        if qrel.query_id not in query_ids or qrel.chunk_id not in chunks:
            unknown = "query" if qrel.query_id not in query_ids else "document"
            name = qrel.query_id if unknown == "query" else qrel.chunk_id
            log.note(
                "unknown_reference", f"{qrel.query_id}/{qrel.chunk_id}", f"{qrel.where}: unknown {unknown} {name!r}"
            )
            continue
        if (qrel.query_id, qrel.chunk_id) in seen:
            problem = f"{qrel.where}: query {qrel.query_id!r} judges {qrel.chunk_id!r} again"
            log.note("duplicate_id", f"{qrel.query_id}/{qrel.chunk_id}", problem)
            continue
        seen.add((qrel.query_id, qrel.chunk_id))
        grouped.setdefault(qrel.query_id, []).append(qrel)
    return grouped


def build_fixture(
    corpus: Sequence[CorpusRecord],
    queries: Sequence[QueryRecord],
    qrels: Sequence[Qrel],
    options: CollectionOptions,
    log: RepairLog,
    source: str,
) -> Fixture:
    """The strict fixture of a collection.

    Raises:
        SourceFormatError: every problem the log's policy refused (naming the record and field).
        FixtureError: any other schema refusal, naming the record.
    """
    documents = _documents(corpus, log)
    kept = [record for record in corpus if record.doc_id in documents]
    chunks = {record.chunk_id: record for record in kept}
    grouped = _grouped_qrels(qrels, queries, chunks, log)
    log.raise_failures(source)
    query_data = [
        {
            "query_id": query.query_id,
            "language": query.language,
            "text": query.text,
            "tags": list(query.tags),
            "judgments": _judgments(query, grouped.get(query.query_id, []), chunks, log),
        }
        for query in queries
        if query.query_id in grouped or options.unjudged_queries == "no-answer"
    ]
    log.raise_failures(source)
    chunk_data = [{"chunk_id": r.chunk_id, "doc_id": r.doc_id, "text": r.text} for r in kept]
    return assemble_fixture(options, documents.values(), chunk_data, query_data, source)


def read_qrels(path: Path, log: RepairLog, layout: Layout, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> list[Qrel]:
    """The graded qrels of a TREC or BEIR qrels file (`layout`) of at most `max_bytes`, in file order.

    The file is read by the one qrels reader, :func:`evalkit.data.qrels.read_qrels_lines` (what ``evalkit score
    --qrels`` reads with): columns past the grade ignored, grades decimal integers, a pair judged with two different
    grades refused. Each line it refuses goes to the log's failures, naming the file, the line and the field. Then,
    for a fixture: a grade of 0 is kept (judged, not relevant); a grade of -1 (trec_eval's "pooled, not judged") is
    skipped and counted, so the pair stays unjudged (``pooled_not_judged``); a grade of -2 or below is skipped too, as
    trec_eval reads it (``negative_grade``; repairing it makes it 0, judged not relevant, as TREC Web's junk pages
    are); a grade above 3 is lowered to 3
    (``grade_above_3``); and IDs are rewritten like the records'.

    Raises:
        SourceFormatError: a file that cannot be read at all (missing, not a regular file, over `max_bytes`).
    """
    try:
        rows = read_qrels_lines(path, max_bytes, layout)
    except QrelsError as exc:
        if not exc.problems:
            raise SourceFormatError(str(path), [str(exc)]) from None
        log.failures.extend(exc.problems)
        return []
    qrels: list[Qrel] = []
    for query, chunk, grade, line in zip(rows.query_ids, rows.doc_ids, rows.grades, rows.lines, strict=True):
        where, ident = f"{rows.source} line {line}", f"{query}/{chunk}"
        field = f"field {rows.grade_field!r}"
        fixture_grade = _fixture_grade(grade, ident, f"{where}: {field}", log)
        if fixture_grade is not None:
            qrels.append(Qrel(_rewrite(query), _rewrite(chunk), fixture_grade, where))
    return qrels


POOLED_NOT_JUDGED = -1
"""trec_eval's grade for a document in the pool that was not judged (as infAP reads it)."""


def _fixture_grade(grade: int, ident: str, where: str, log: RepairLog) -> int | None:
    """The fixture grade (0-3) of a qrels grade, or None when the pair is left out; every change is noted."""
    if grade == POOLED_NOT_JUDGED:
        log.note("pooled_not_judged", ident, f"{where}: grade -1 (pooled, not judged)")
        return None
    if grade < POOLED_NOT_JUDGED:
        problem = f"{where}: grade {grade} is negative (trec_eval reads it as not judged)"
        return 0 if log.note("negative_grade", ident, problem) == "repair" else None
    if grade > 3:
        return 3 if log.note("grade_above_3", ident, f"{where}: grade {grade} is above 3") == "repair" else None
    return grade
