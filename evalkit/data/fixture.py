"""The fixture schema: documents, chunks, queries with graded judgments and exact answer spans.

Grades keep three states apart: judged relevant (grade 1-3, with exact answer spans), judged not relevant (grade 0,
no spans), and unjudged (a chunk no judgment of the query names).

A fixture lives in a directory holding ``fixture.json`` (this schema) and optionally ``aliases.json`` (alias groups
for the alias embedding provider). :func:`load_fixture` reads both and turns every schema problem into one
:class:`FixtureError` that lists each problem with the record ID and field it concerns.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from evalkit.common.output import write_atomic
from evalkit.data.inputs import (
    DEFAULT_MAX_INPUT_BYTES,
    MAX_PROBLEMS,
    InputError,
    cap_problems,
    clip,
    loads_strict,
    read_json_file,
)
from evalkit.data.schema import (
    LANGUAGES,
    LINKS_ALLOWED,
    MAX_CHUNKS,
    MAX_DOCUMENTS,
    MAX_JUDGMENTS_PER_QUERY,
    MAX_QUERIES,
    MAX_SPAN_LENGTH,
    MAX_SPANS_PER_JUDGMENT,
    AliasTerm,
    AttributionText,
    ChunkText,
    Grade,
    Identifier,
    Language,
    Offset,
    QueryText,
    RecordProblems,
    SemanticVersion,
    SpdxLicense,
    StrictModel,
    Title,
    child,
    is_identifier,
    privacy_problem,
    text_problem,
    validation_problems,
)

FIXTURE_FILE = "fixture.json"
ALIASES_FILE = "aliases.json"

QueryTag = Literal["cross_language", "multi_chunk", "near_miss", "paraphrase", "held_out"]


class Span(StrictModel):
    """An exact answer span: ``chunk.text[start:start + len(text)] == text``."""

    start: Offset = Field(description="0-based character offset of the span in its chunk's text")
    text: Annotated[str, Field(min_length=1, max_length=MAX_SPAN_LENGTH)] = Field(description="the verbatim span text")

    @property
    def end(self) -> int:
        """Exclusive end offset."""
        return self.start + len(self.text)


RELEVANT_GRADE = 1
"""The lowest grade that counts as relevant: grade 0 is judged, not relevant."""


class Judgment(StrictModel):
    """A graded relevance judgment of one chunk for one query, with its supporting spans.

    A relevant chunk (grade 1-3) has at least one exact answer span; a chunk judged not relevant (grade 0) has none.
    A chunk that no judgment of the query names is unjudged, which is not the same as grade 0.
    """

    chunk_id: Identifier = Field(description="the judged chunk")
    grade: Grade = Field(
        description="3 directly answers, 2 substantially answers, 1 supporting evidence, 0 judged not relevant"
    )
    spans: tuple[Span, ...] = Field(
        default=(),
        validate_default=True,  # a grade 1-3 judgment without the key is checked too
        max_length=MAX_SPANS_PER_JUDGMENT,
        description="exact answer spans in the chunk: at least one for grade 1-3, none for grade 0",
    )

    @property
    def relevant(self) -> bool:
        """True for grade 1-3; False for a chunk judged not relevant (grade 0)."""
        return self.grade >= RELEVANT_GRADE

    @field_validator("grade", mode="wrap")
    @classmethod
    def _grade_in_range(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> int:
        """Name the judged chunk when a grade is outside 0-3 (a type error is left as it is)."""
        try:
            grade: int = handler(value)
        except ValidationError as exc:
            if not {e["type"] for e in exc.errors()} <= {"greater_than_equal", "less_than_equal"}:
                raise
            chunk = info.data.get("chunk_id")
            of = f" of chunk {chunk!r}" if chunk is not None else ""
            problem = f"grade {clip(str(value))}{of} is outside 0-3 (1-3 relevant, 0 judged not relevant)"
            raise ValueError(problem) from None
        return grade

    @field_validator("spans")
    @classmethod
    def _spans_fit_grade(cls, spans: tuple[Span, ...], info: ValidationInfo) -> tuple[Span, ...]:
        """Grade 1-3 needs at least one span, grade 0 takes none (nothing is checked when the grade is invalid)."""
        grade = info.data.get("grade")
        chunk = info.data.get("chunk_id")
        of = f"chunk {chunk!r}" if chunk is not None else "the chunk"
        if grade == 0 and spans:
            raise ValueError(f"{of} is judged not relevant (grade 0): it takes no spans, not {len(spans)}")
        if grade is not None and grade >= RELEVANT_GRADE and not spans:
            raise ValueError(f"{of} is judged relevant (grade {grade}): it needs at least 1 exact answer span")
        return spans


class Document(StrictModel):
    """A source document; its chunks carry the text."""

    doc_id: Identifier = Field(description="stable document ID")
    language: Language = Field(description="language of the document")
    title: Title = Field(description="document title (private: never reported)")


class Chunk(StrictModel):
    """A retrievable passage of one document."""

    chunk_id: Identifier = Field(description="stable chunk ID")
    doc_id: Identifier = Field(description="the document this chunk belongs to")
    text: ChunkText = Field(description="chunk text (private: never reported)")


class Query(StrictModel):
    """An evaluation query; a query without a relevant judgment (grade >= 1) is a no-answer query, which may still
    hold judgments of grade 0 (chunks judged not relevant)."""

    query_id: Identifier = Field(description="stable query ID")
    language: Language = Field(description="language of the query text")
    text: QueryText = Field(description="query text (private: never reported)")
    tags: tuple[QueryTag, ...] = Field(default=(), max_length=8, description="what the query exercises")
    judgments: tuple[Judgment, ...] = Field(
        default=(),
        max_length=MAX_JUDGMENTS_PER_QUERY,
        description="judged chunks, grade 0 included; none of grade >= 1 = no answer",
    )

    @property
    def answerable(self) -> bool:
        """True when at least one chunk is judged relevant (grade >= 1); grade-0 judgments do not count."""
        return any(j.relevant for j in self.judgments)

    @property
    def relevant_judgments(self) -> tuple[Judgment, ...]:
        """The judgments of relevant chunks (grade >= 1), in fixture order."""
        return tuple(j for j in self.judgments if j.relevant)


class Fixture(StrictModel):
    """A complete evaluation fixture, checked as a whole for cross-record consistency."""

    fixture_id: Identifier = Field(description="stable fixture ID, e.g. synthetic-bilingual-v1")
    fixture_version: SemanticVersion = Field(description="semantic version, ASCII digits only")
    license: SpdxLicense = Field(description="SPDX licence identifier of the fixture content")
    attribution: AttributionText = Field(description="source and attribution")
    text_policy: Literal["strict", "links_allowed"] = Field(
        default="strict",
        description="links_allowed: chunk and query text of an imported corpus may hold links, host names and paths",
    )
    documents: tuple[Document, ...] = Field(min_length=1, max_length=MAX_DOCUMENTS)
    chunks: tuple[Chunk, ...] = Field(min_length=1, max_length=MAX_CHUNKS)
    queries: tuple[Query, ...] = Field(min_length=1, max_length=MAX_QUERIES)

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Fixture:
        problems = list(_cross_record_problems(self))
        if info.context and info.context.get(LINKS_ALLOWED) and self.text_policy != "links_allowed":
            problems.append(f"fixture {self.fixture_id!r}: field 'text_policy': links in text need 'links_allowed'")
        if problems:
            raise RecordProblems(problems)
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The strict text policy is the default and left out, so strict fixtures dump as they did before it."""
        data: dict[str, Any] = handler(self)
        if data.get("text_policy") == "strict":
            del data["text_policy"]
        return data

    def chunk_languages(self) -> dict[str, Language]:
        """Every chunk's language (its document's language), by chunk ID."""
        doc_language = {d.doc_id: d.language for d in self.documents}
        return {c.chunk_id: doc_language[c.doc_id] for c in self.chunks}

    def chunk_language(self, chunk_id: str) -> Language:
        """The language of one chunk; use :meth:`chunk_languages` for many."""
        return self.chunk_languages()[chunk_id]


def _duplicates(kind: str, field: str, ids: Iterable[str]) -> Iterable[str]:
    for value, count in sorted(Counter(ids).items()):
        if count > 1:
            yield f"{kind} {value!r}: field {field!r} is used by {count} records (IDs must be unique)"


def _cross_record_problems(fixture: Fixture) -> Iterable[str]:
    yield from _duplicates("document", "doc_id", (d.doc_id for d in fixture.documents))
    yield from _duplicates("chunk", "chunk_id", (c.chunk_id for c in fixture.chunks))
    yield from _duplicates("query", "query_id", (q.query_id for q in fixture.queries))
    doc_ids = {d.doc_id for d in fixture.documents}
    chunks = {c.chunk_id: c for c in fixture.chunks}
    for chunk in fixture.chunks:
        if chunk.doc_id not in doc_ids:
            yield f"chunk {chunk.chunk_id!r}: field 'doc_id' refers to unknown document {chunk.doc_id!r}"
    for query in fixture.queries:
        yield from _judgment_problems(query, chunks)
    where = f"fixture {fixture.fixture_id!r}: field 'queries'"
    # Every language that has queries needs both kinds: a monolingual or cross-lingual fixture (queries in one
    # language only) is fine, a language whose queries are all answerable (or all no-answer) is degenerate.
    for language in [lang for lang in LANGUAGES if any(q.language == lang for q in fixture.queries)]:
        in_language = [q for q in fixture.queries if q.language == language]
        if not any(q.answerable for q in in_language):
            yield f"{where}: language {language!r} has no answerable query (degenerate label set)"
        if not any(not q.answerable for q in in_language):
            yield f"{where}: language {language!r} has no no-answer query (degenerate label set)"


def _judgment_problems(query: Query, chunks: dict[str, Chunk]) -> Iterable[str]:
    seen: set[str] = set()
    for index, judgment in enumerate(query.judgments):
        where = f"query {query.query_id!r}: field 'judgments[{index}]"
        if judgment.chunk_id in seen:
            yield f"{where}.chunk_id' judges chunk {judgment.chunk_id!r} twice"
        seen.add(judgment.chunk_id)
        chunk = chunks.get(judgment.chunk_id)
        if chunk is None:
            yield f"{where}.chunk_id' refers to unknown chunk {judgment.chunk_id!r}"
            continue
        for span_index, span in enumerate(judgment.spans):
            if chunk.text[span.start : span.end] != span.text:
                yield (
                    f"{where}.spans[{span_index}]' is not verbatim in chunk {chunk.chunk_id!r} at offset {span.start}"
                )


class AliasGroup(StrictModel):
    """Terms (in any language) that name one concept and share one alias-embedding dimension."""

    group_id: Identifier = Field(description="stable concept ID")
    terms: tuple[AliasTerm, ...] = Field(min_length=1, max_length=64, description="the concept's names")


class AliasTable(StrictModel):
    """The alias groups of a fixture (``aliases.json``)."""

    groups: tuple[AliasGroup, ...] = Field(default=(), max_length=10_000)

    @model_validator(mode="after")
    def _unique(self) -> AliasTable:
        problems = list(_duplicates("alias group", "group_id", (g.group_id for g in self.groups)))
        owner: dict[str, str] = {}
        for group in self.groups:
            for term in group.terms:
                key = term.casefold()
                if key in owner and owner[key] != group.group_id:
                    problems.append(
                        f"alias group {group.group_id!r}: field 'terms' repeats {term!r} from group {owner[key]!r}"
                    )
                owner.setdefault(key, group.group_id)
        if problems:
            raise RecordProblems(problems)
        return self


class FixtureError(ValueError):
    """A fixture could not be loaded; ``problems`` lists every problem found, each naming record and field."""

    def __init__(self, source: str, problems: list[str], total: int | None = None) -> None:
        self.source = source
        self.problems = problems
        self.total = max(total or 0, len(problems))
        listing = "\n".join(f"  - {p}" for p in cap_problems(problems))
        if self.total > len(problems) and len(problems) > MAX_PROBLEMS:
            listing = listing.rsplit("\n", 1)[0] + f"\n  - ... and {self.total - MAX_PROBLEMS} more"
        super().__init__(f"invalid fixture {source}: {self.total} problem(s)\n{listing}")


@dataclass(frozen=True)
class LoadedFixture:
    """A validated fixture together with its alias table."""

    fixture: Fixture
    aliases: AliasTable


_COLLECTIONS: dict[str, tuple[str, str]] = {
    "documents": ("document", "doc_id"),
    "chunks": ("chunk", "chunk_id"),
    "queries": ("query", "query_id"),
    "groups": ("alias group", "group_id"),
}
"""Top-level list field -> (record kind, ID field) for naming the record an error is in."""


def _record_id(node: Any, key: str) -> str | None:
    """The record's ID when it is a valid ID (an invalid one may be long, not text, or secret-shaped, so it is not
    echoed: the record is then named by its position)."""
    value = node.get(key) if isinstance(node, dict) else None
    if not isinstance(value, str) or not is_identifier(value):
        return None
    return value if privacy_problem(value) is None and text_problem(value) is None else None


def _field_path(parts: tuple[int | str, ...]) -> str:
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{clip(part)}" if path else clip(part)
    return path


def _locate(raw: Any, loc: tuple[int | str, ...]) -> str:
    """Describe a pydantic error location as "<kind> '<ID>': field '<path>'".

    A record of a top-level list (document, chunk, query, alias group) is named by its ID, or by its position when
    its ID is missing or invalid; a top-level field is named with the fixture's ID when there is a valid one.
    """
    record: str | None = None
    rest = loc
    if len(loc) >= 2 and isinstance(loc[0], str) and loc[0] in _COLLECTIONS and isinstance(loc[1], int):
        kind, key = _COLLECTIONS[loc[0]]
        ident = _record_id(child(child(raw, loc[0]), loc[1]), key)
        record = f"{kind} {ident!r}" if ident else f"{kind} at {loc[0]}[{loc[1]}]"
        rest = loc[2:]
    else:
        ident = _record_id(raw, "fixture_id")
        record = f"fixture {ident!r}" if ident else None
    where = f"field {_field_path(rest) or '(record)'!r}"
    return f"{record}: {where}" if record else where


MAX_DESCRIBED_ERRORS = 1_000
"""At most this many schema errors are described (the message lists fewer, with the total count)."""


def _first_records(raw: Any) -> Any:
    """`raw` with every top-level list cut to its first records (to describe the first errors of a huge file)."""
    if not isinstance(raw, dict):
        return raw
    return {key: value[:MAX_DESCRIBED_ERRORS] if isinstance(value, list) else value for key, value in raw.items()}


def _fixture_error(source: str, error: ValidationError, raw: Any, model: type[StrictModel] = Fixture) -> FixtureError:
    """The error listing the first problems and the total count.

    Building pydantic's error details is slow for millions of errors (tens of seconds), so for a file with more
    than :data:`MAX_DESCRIBED_ERRORS` errors the first records alone are validated again and their problems listed.
    """
    total = error.error_count()
    if total > MAX_DESCRIBED_ERRORS:
        sample = _first_records(raw)
        try:
            model.model_validate_json(json.dumps(sample))
        except ValidationError as first:
            if first.error_count() and not any(
                isinstance(e.get("ctx", {}).get("error"), RecordProblems) for e in first.errors(include_url=False)
            ):
                return FixtureError(source, validation_problems(first, sample, _locate, MAX_DESCRIBED_ERRORS), total)
    return FixtureError(source, validation_problems(error, raw, _locate, MAX_DESCRIBED_ERRORS), total)


def _decode(text: str) -> Any:
    """Strict JSON of text that already passed :func:`_read_json` (None when it does not decode)."""
    try:
        return loads_strict(text)
    except ValueError:
        return None


def _read_json(path: Path, max_bytes: int) -> tuple[str, Any]:
    """Text and strict JSON of a regular file of at most `max_bytes` (see :mod:`evalkit.data.inputs`)."""
    try:
        return read_json_file(path, max_bytes)
    except InputError as exc:
        raise FixtureError(str(path), [f"file {clip(path.name)!r} {exc.reason}"]) from None


def _links_allowed(text: str, raw: Any = None) -> bool:
    """True when the fixture JSON declares ``"text_policy": "links_allowed"`` at its top level."""
    if '"links_allowed"' not in text:  # the common case, without decoding the text twice
        return False
    if raw is None:
        raw = _decode(text)
    return isinstance(raw, dict) and raw.get("text_policy") == "links_allowed"


def parse_fixture(text: str, source: str = "<memory>", raw: Any = None) -> Fixture:
    """Validate fixture JSON text; raise :class:`FixtureError` listing every problem.

    `raw` is the already decoded JSON, when the caller has it (it is used to name records in messages).
    """
    try:
        return Fixture.model_validate_json(text, context={LINKS_ALLOWED: _links_allowed(text, raw)})
    except ValidationError as exc:
        raise _fixture_error(source, exc, _decode(text) if raw is None else raw) from None


def load_fixture(path: Path | str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> LoadedFixture:
    """Load ``fixture.json`` (and ``aliases.json`` when present) from a fixture directory or file.

    Each file must be a regular file of at most `max_bytes` with strict JSON (no duplicate keys, no ``NaN``); see
    :mod:`evalkit.data.inputs`.
    """
    location = Path(path)
    directory = location if location.is_dir() else location.parent
    fixture_path = location / FIXTURE_FILE if location.is_dir() else location
    if not fixture_path.exists():
        raise FixtureError(str(location), [f"no {FIXTURE_FILE} at {location}"])
    text, raw = _read_json(fixture_path, max_bytes)
    fixture = parse_fixture(text, str(fixture_path), raw)
    aliases_path = directory / ALIASES_FILE
    aliases = AliasTable()
    if aliases_path.exists():
        alias_text, alias_raw = _read_json(aliases_path, max_bytes)
        try:
            aliases = AliasTable.model_validate_json(alias_text)
        except ValidationError as exc:
            raise _fixture_error(str(aliases_path), exc, alias_raw, AliasTable) from None
    return LoadedFixture(fixture=fixture, aliases=aliases)


def fixture_json(fixture: Fixture) -> bytes:
    """The fixture as UTF-8 JSON: schema field order, ``ensure_ascii=False``, indent 1, trailing newline."""
    return (json.dumps(fixture.model_dump(mode="json"), ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def write_fixture(fixture: Fixture, directory: Path) -> Path:
    """Write ``directory/fixture.json`` atomically (creating `directory` if needed) and return its path.

    The caller vets `directory` (for example with :func:`evalkit.common.output.resolve_output_path`); this function
    does not. Missing folders are created by :func:`evalkit.common.output.write_atomic`, which never follows a
    symlinked folder.
    """
    path = directory / FIXTURE_FILE
    write_atomic(path, fixture_json(fixture))
    return path
