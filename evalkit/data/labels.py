"""Label files: one reviewer's graded decisions on (query, chunk) pairs, made one at a time and saved at once.

A label file is JSON lines, one :class:`LabelDecision` a line (keys sorted, UTF-8)::

    {"chunk_id": "en-trash-01", "grade": 3, "query_id": "q-en-001", "reviewer": "ana", "spans": [[14, 43]]}
    {"chunk_id": null, "grade": 0, "query_id": "q-en-004", "reviewer": "ana", "spans": []}

Spans are half-open ``[start, end)`` offsets into the chunk's text, counted in Python string characters (code
points), not bytes, in both languages: in ``"年度订阅在购买后"`` the span ``[0, 4)`` is ``"年度订阅"``. Grade 1-3 needs
at least one span, grade 0 (judged not relevant) takes none; ``chunk_id: null`` is a no-answer decision for the whole
query (grade 0, no spans). One file holds one reviewer's decisions, at most one per (query, chunk).

:func:`read_labels` reads a file through the guarded door (:func:`evalkit.data.inputs.read_input_bytes`, strict JSON
by :func:`evalkit.data.inputs.loads_strict`) and refuses it with one :class:`LabelFileError` listing every problem,
each naming the file, the line and the field. :class:`LabelFile` saves decisions one at a time, atomically, from
what it holds (:func:`record_label`: one decision). :mod:`evalkit.data.label_tasks` lists the pairs to label.

Two reviewers' files are compared by :mod:`evalkit.measures.agreement` and merged into a new fixture version by
:mod:`evalkit.data.label_merge`.
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError, ValidationInfo, field_validator

from evalkit.common.output import write_atomic, writers_in_turn
from evalkit.data.fixture import Chunk, Fixture, Query
from evalkit.data.inputs import (
    DEFAULT_MAX_INPUT_BYTES,
    InputError,
    cap_problems,
    clip,
    decode_text,
    loads_strict,
    read_input_bytes,
    shorten,
)
from evalkit.data.schema import (
    MAX_CHUNK_LENGTH,
    MAX_SPANS_PER_JUDGMENT,
    Identifier,
    StrictModel,
    absent,
    text_problem,
    validation_problems,
)

__all__ = [
    "Known",
    "LabelDecision",
    "LabelFile",
    "LabelFileError",
    "json_object",
    "labels_jsonl",
    "non_blank_lines",
    "read_labels",
    "record_label",
    "same_person",
    "text_sha256",
]

MAX_REVIEWER_LENGTH = 128
MAX_NOTE_LENGTH = 2_000


def _printable_name(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    if value != value.strip():
        raise ValueError(f"{shorten(value)} begins or ends with white space")
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise ValueError(f"holds the unprintable character U+{ord(bad):04X} (control, format or bidi characters)")
    return value


def _clean_note(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(f"{problem}; control and bidirectional-override characters are not allowed")
    return value


def same_person(a: str, b: str) -> bool:
    """Whether two reviewer names name one person: equal once NFKC-normalized and case-folded (``Ana``, ``ana`` and
    the full-width ``ａｎａ`` are one reviewer)."""
    return unicodedata.normalize("NFKC", a).casefold() == unicodedata.normalize("NFKC", b).casefold()


Reviewer = Annotated[str, Field(max_length=MAX_REVIEWER_LENGTH), AfterValidator(_printable_name)]
"""A reviewer's name: non-blank, printable (no control, format or bidirectional characters), at most 128 long."""
NoteText = Annotated[str, Field(max_length=MAX_NOTE_LENGTH), AfterValidator(_clean_note)]
_Offset = Annotated[int, Field(ge=0, le=MAX_CHUNK_LENGTH)]
SpanOffsets = tuple[_Offset, _Offset]
"""A span as ``(start, end)``: half-open character offsets into the chunk's text."""


TextSha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


def text_sha256(text: str) -> str:
    """The SHA-256 of a chunk's text (UTF-8), as a decision records it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class LabelDecision(StrictModel):
    """One reviewer's decision on one (query, chunk) pair, or a no-answer decision for a query (``chunk_id`` None)."""

    query_id: Identifier = Field(description="the query decided")
    chunk_id: Identifier | None = Field(description="the chunk judged; None: the query has no answer (grade 0)")
    grade: int = Field(description="3 directly answers, 2 substantially, 1 supporting evidence, 0 not relevant")
    spans: tuple[SpanOffsets, ...] = Field(
        default=(),
        validate_default=True,
        max_length=MAX_SPANS_PER_JUDGMENT,
        description="[start, end) character offsets into the chunk's text, kept sorted: >= 1 for grade 1-3, none for 0",
    )
    reviewer: Reviewer = Field(description="who decided (one reviewer per label file)")
    note: NoteText | None = Field(default=None, exclude_if=absent, description="the reviewer's remark, if any")
    chunk_sha256: TextSha256 | None = Field(
        default=None,
        exclude_if=absent,
        description="SHA-256 of the chunk's text the decision was made on (the labelling notebook writes it); a "
        "decision on a chunk whose text has changed since is refused. Absent: the spans are checked against the "
        "text's length only",
    )

    @field_validator("grade")
    @classmethod
    def _grade_fits(cls, grade: int, info: ValidationInfo) -> int:
        if not 0 <= grade <= 3:
            raise ValueError(f"grade {grade} is outside 0-3 (1-3 relevant, 0 judged not relevant)")
        if "chunk_id" in info.data and info.data["chunk_id"] is None and grade != 0:
            raise ValueError(f"a no-answer decision (chunk_id null) has grade 0, not {grade}")
        return grade

    @field_validator("spans")
    @classmethod
    def _spans_fit_grade(cls, spans: tuple[SpanOffsets, ...], info: ValidationInfo) -> tuple[SpanOffsets, ...]:
        grade = info.data.get("grade")
        if grade == 0 and spans:
            raise ValueError(f"grade 0 (judged not relevant) takes no spans, not {len(spans)}")
        if grade is not None and grade >= 1 and not spans:
            raise ValueError(f"grade {grade} (relevant) needs at least 1 span")
        for index, (start, end) in enumerate(spans):
            if start >= end:
                raise ValueError(f"span [{index}] = [{start}, {end}) is empty or reversed (start must be < end)")
        ordered = tuple(sorted(spans))
        repeated = next((s for s, t in pairwise(ordered) if s == t), None)
        if repeated is not None:
            raise ValueError(f"span [{repeated[0]}, {repeated[1]}) is given twice")
        return ordered

    @field_validator("chunk_sha256")
    @classmethod
    def _hash_of_a_chunk(cls, digest: str | None, info: ValidationInfo) -> str | None:
        if digest is not None and "chunk_id" in info.data and info.data["chunk_id"] is None:
            raise ValueError("a no-answer decision (chunk_id null) has no chunk text to hash")
        return digest

    @property
    def key(self) -> tuple[str, str | None]:
        """The pair decided: ``(query_id, chunk_id)``."""
        return (self.query_id, self.chunk_id)


class LabelFileError(ValueError):
    """A label or task file that cannot be used; ``problems`` lists each problem, naming file, line and field."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = list(problems)
        listing = "\n".join(f"  - {p}" for p in cap_problems(self.problems))
        super().__init__(f"invalid label file {source}: {len(self.problems)} problem(s)\n{listing}")


def non_blank_lines(path: Path, max_bytes: int) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every non-blank line of a regular UTF-8 file of at most `max_bytes`.

    Lines end at ``\\n`` only: a JSON string may hold U+2028, which :meth:`str.splitlines` would split at."""
    try:
        text = decode_text(read_input_bytes(path, max_bytes), clip(path.name))
    except InputError as exc:
        raise LabelFileError(clip(path.name), [f"{clip(path.name)}: {exc.reason}"]) from None
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, line.rstrip("\r")


def _field(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{clip(part)}" if path else clip(part))
    return f"field {path or '(the whole line)'!r}"


def json_object(line: str, where: str) -> tuple[dict[str, Any] | None, list[str]]:
    try:
        record = loads_strict(line)
    except ValueError as exc:
        return None, [f"{where}: field '(the whole line)': not JSON ({clip(str(exc), 200)})"]
    if not isinstance(record, dict):
        return None, [f"{where}: field '(the whole line)': expected a JSON object, got {type(record).__name__}"]
    return record, []


def _decision(line: str, where: str) -> tuple[LabelDecision | None, list[str]]:
    record, problems = json_object(line, where)
    if record is None:
        return None, problems
    try:
        return LabelDecision.model_validate_json(line), []
    except ValidationError as exc:
        return None, [f"{where}: {p}" for p in validation_problems(exc, record, lambda _, loc: _field(loc))]


@dataclass(frozen=True)
class Known:
    """A fixture's queries, chunks and document titles by ID, looked up once per line instead of searched, and the
    chunks' text hashes as the decisions ask for them."""

    queries: dict[str, Query]
    chunks: dict[str, Chunk]
    titles: dict[str, str]
    hashes: dict[str, str] = field(default_factory=dict)
    """Chunk text SHA-256s worked out so far, by chunk ID."""

    def sha256(self, chunk: Chunk) -> str:
        """The chunk's :func:`text_sha256`, worked out once."""
        if chunk.chunk_id not in self.hashes:
            self.hashes[chunk.chunk_id] = text_sha256(chunk.text)
        return self.hashes[chunk.chunk_id]

    @classmethod
    def of(cls, fixture: Fixture) -> Known:
        return cls(
            {q.query_id: q for q in fixture.queries},
            {c.chunk_id: c for c in fixture.chunks},
            {d.doc_id: d.title for d in fixture.documents},
        )


def _pair_problems(
    decision: LabelDecision, known: Known, where: str, stale: set[tuple[str, str | None]] | None = None
) -> list[str]:
    """The decision checked against the fixture: a known query and chunk, every span inside the chunk's text. With
    `stale`, a decision made on a chunk text that has changed since is added to it instead of refused."""
    problems = []
    if decision.query_id not in known.queries:
        problems.append(f"{where}: field 'query_id': unknown query {shorten(decision.query_id)}")
    if decision.chunk_id is None:
        return problems
    chunk = known.chunks.get(decision.chunk_id)
    if chunk is None:
        return [*problems, f"{where}: field 'chunk_id': unknown chunk {shorten(decision.chunk_id)}"]
    if decision.chunk_sha256 is not None and decision.chunk_sha256 != known.sha256(chunk):
        if stale is not None:
            stale.add(decision.key)
            return problems
        return [
            *problems,
            f"{where}: field 'chunk_sha256': the text of chunk {chunk.chunk_id!r} has changed since this decision was "
            "made on it (its SHA-256 differs): label the pair again on the fixture's text",
        ]
    for index, (start, end) in enumerate(decision.spans):
        if end > len(chunk.text):
            problems.append(
                f"{where}: field 'spans[{index}]': [{start}, {end}) is outside chunk {chunk.chunk_id!r} "
                f"(its text has {len(chunk.text)} characters)"
            )
    return problems


def read_labels(path: Path, fixture: Fixture, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> tuple[LabelDecision, ...]:
    """The decisions of a label file, in file order, each checked against `fixture`.

    Raises:
        LabelFileError: listing every problem, each naming the file, the line and the field: a file that cannot be
            read (missing, not a regular file, over `max_bytes`, not UTF-8), invalid JSON, an unknown key, a grade
            outside 0-3, spans for grade 0 or none for grade 1-3, an empty or reversed span, an offset outside the
            chunk's text, an unknown query or chunk, ``chunk_id`` null with a grade other than 0, a second decision
            on one (query, chunk), or a reviewer other than the first line's.
    """
    return _read_labels(Path(path), Known.of(fixture), max_bytes)


def _read_labels(
    path: Path, known: Known, max_bytes: int, stale: set[tuple[str, str | None]] | None = None
) -> tuple[LabelDecision, ...]:
    """:func:`read_labels` with the fixture already indexed; with `stale`, decisions on changed chunk text are
    collected there instead of refused."""
    name = clip(path.name)
    decisions: list[LabelDecision] = []
    problems: list[str] = []
    first_line: dict[tuple[str, str | None], int] = {}
    reviewer: tuple[str, int] | None = None
    answered: dict[str, LabelDecision] = {}  # per query, its first chunk graded 1-3
    for number, line in non_blank_lines(path, max_bytes):
        where = f"{name} line {number}"
        decision, found = _decision(line, where)
        if decision is None:
            problems.extend(found)
            continue
        problems.extend(_pair_problems(decision, known, where, stale))
        if decision.key in first_line:
            problems.append(
                f"{where}: field 'chunk_id': query {decision.query_id!r}, chunk {decision.chunk_id!r} is decided "
                f"again (first on line {first_line[decision.key]}; one decision per pair)"
            )
        first_line.setdefault(decision.key, number)
        if reviewer is None:
            reviewer = (decision.reviewer, number)
        elif decision.reviewer != reviewer[0]:
            problems.append(
                f"{where}: field 'reviewer': {shorten(decision.reviewer)} is not {shorten(reviewer[0])} of line "
                f"{reviewer[1]} (one reviewer per file)"
            )
        decisions.append(decision)
        if decision.chunk_id is not None and decision.grade >= 1:
            answered.setdefault(decision.query_id, decision)
    for decision in decisions:
        if decision.chunk_id is None and decision.query_id in answered:
            at = first_line[decision.key]
            problems.append(f"{name} line {at}: {_no_answer_conflict(answered[decision.query_id], first_line)}")
    if problems:
        raise LabelFileError(name, problems)
    return tuple(decisions)


def _no_answer_conflict(answer: LabelDecision, lines: Mapping[tuple[str, str | None], int] | None = None) -> str:
    """What is wrong with a no-answer decision beside `answer`, a chunk of its query graded 1-3 in the same file."""
    at = f" (line {lines[answer.key]})" if lines else ""
    return (
        f"field 'chunk_id': query {answer.query_id!r} is decided to have no answer, yet chunk {answer.chunk_id!r} is "
        f"graded {answer.grade}{at}: one reviewer's file holds one of the two, never both"
    )


def _line_of(decision: LabelDecision) -> bytes:
    return (json.dumps(decision.model_dump(mode="json"), sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def labels_jsonl(decisions: Iterable[LabelDecision]) -> bytes:
    """Decisions as label-file bytes: one JSON object a line, keys sorted, UTF-8 (``ensure_ascii=False``); a note
    is written only when set."""
    return b"".join(_line_of(d) for d in decisions)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a file another process wrote apart from the one this process wrote: inode, size and mtime."""
    try:
        found = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns)


class LabelFile:
    """One reviewer's label file, read once (:func:`read_labels`) and kept: :meth:`record` saves each decision at
    once, atomically, from what it holds, without reading and checking the whole file again, unless the file
    changed since this object last read or wrote it (another process wrote it: its inode, size or mtime differ),
    in which case it is read again first; the read and the write hold a lock on the folder
    (:func:`~evalkit.common.output.writers_in_turn`), so that two writers of one file take turns and neither
    loses the other's decisions. Recording the 2,000th decision of a 12,622-pair pool took 0.46 s when
    every decision read the file back (2026-12-06, CMRC 2018 trial set); from what it holds, 0.9 ms (the file is
    still rewritten whole, atomically, at each decision).

    ``decisions`` holds the file's decisions by pair, in file order (a pair decided again keeps its place);
    ``stale`` the pairs whose decision was made on a chunk text that has changed since (``chunk_sha256``): they are
    not in ``decisions``, so a session offers them again, and recording one replaces the old line; ``held`` is every
    decision the file holds, stale ones too (whose reviewer the file is, what a new decision may not contradict).
    ``generation`` counts the times the file was read, so that a holder of derived state (a session's progress)
    knows when :meth:`refresh` or :meth:`record` read it again.
    """

    def __init__(self, path: Path, fixture: Fixture, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> None:
        self.path = Path(path)
        self.fixture = fixture
        self.max_bytes = max_bytes
        self._known = Known.of(fixture)
        self.decisions: dict[tuple[str, str | None], LabelDecision] = {}
        self.held: dict[tuple[str, str | None], LabelDecision] = {}
        self.stale: set[tuple[str, str | None]] = set()
        self._lines: dict[tuple[str, str | None], bytes] = {}
        self._stamp: tuple[int, int, int] | None = None
        self.generation = 0
        self._read()

    def _read(self) -> None:
        stale: set[tuple[str, str | None]] = set()
        exists = os.path.lexists(self.path)
        existing = _read_labels(self.path, self._known, self.max_bytes, stale) if exists else ()
        self.held = {d.key: d for d in existing}
        self.decisions = {key: d for key, d in self.held.items() if key not in stale}
        self.stale = stale
        self._lines = {d.key: _line_of(d) for d in existing}
        self._stamp = _stamp(self.path)
        self.generation += 1

    def refresh(self) -> None:
        """Read the file again if another process changed it since this object last read or wrote it (a second
        notebook of the same reviewer, say): one ``stat`` when it did not.

        Raises:
            LabelFileError: the file now holds invalid decisions (see :func:`read_labels`).
        """
        if _stamp(self.path) != self._stamp:
            self._read()

    def record(self, decision: LabelDecision) -> None:
        """Save `decision`: an earlier decision on the same (query, chunk) is replaced in place, a new pair
        appended; a missing file is created. The caller vets the path (for example with
        :func:`evalkit.common.output.resolve_output_path`): the workspace rules are not applied here.

        Raises:
            LabelFileError: the file holds invalid decisions (see :func:`read_labels`), `decision` does not fit the
                fixture, or it is by another reviewer than the file's; nothing is written then.
        """
        name = clip(self.path.name)
        problems = _pair_problems(decision, self._known, "the decision")
        if problems:
            raise LabelFileError(name, problems)
        with writers_in_turn(self.path.parent):  # another process's decision is read before this one is written
            self.refresh()
            first = next(iter(self.held.values()), None)
            if first is not None and first.reviewer != decision.reviewer:
                raise LabelFileError(
                    name,
                    [
                        f"the decision: field 'reviewer': {shorten(decision.reviewer)} is not "
                        f"{shorten(first.reviewer)}, whose labels {name} holds (one reviewer per file)"
                    ],
                )
            if decision.chunk_id is None:  # a no-answer decision beside a chunk of its query graded 1-3, or the reverse
                held = (d for key, d in self.held.items() if key != decision.key)
                answer = next((d for d in held if d.query_id == decision.query_id and d.grade >= 1), None)
            else:
                answer = decision if decision.grade >= 1 and (decision.query_id, None) in self.held else None
            if answer is not None:
                raise LabelFileError(name, [f"the decision: {_no_answer_conflict(answer)}"])
            line = _line_of(decision)
            write_atomic(self.path, b"".join({**self._lines, decision.key: line}.values()))
            self.decisions[decision.key] = decision
            self.held[decision.key] = decision
            self.stale.discard(decision.key)
            self._lines[decision.key] = line
            self._stamp = _stamp(self.path)


def record_label(
    path: Path, decision: LabelDecision, fixture: Fixture, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> None:
    """Save `decision` into the label file at `path`, atomically (:meth:`LabelFile.record`, the file read first):
    for one decision; a session that records many keeps one :class:`LabelFile`."""
    LabelFile(path, fixture, max_bytes).record(decision)
