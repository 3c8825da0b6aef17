"""Import SQuAD-format question answering data (SQuAD v1.1 and v2.0, XQuAD) as an evalkit fixture.

:func:`read_squad` reads and checks a SQuAD JSON file; :func:`import_squad` turns one file into a monolingual fixture
and :func:`import_cross_lingual` pairs the questions of one file with the paragraphs of a parallel file in the other
language (XQuAD shares question IDs between languages); :func:`write_fixture` writes ``fixture.json``.

Mapping (all indexes are 0-based positions in the file; ``lang`` is the corpus language):

- **Documents** are articles: ``doc_id = f"{lang}-a{article_index:03d}"``, title = the article title with ``_``
  read as a space. Every article becomes a document, even when all its paragraphs are held out.
- **Chunks** are paragraphs, ``f"{doc_id}-p{paragraph_index:02d}"``, or with sentence chunking runs of consecutive
  sentences of one paragraph, ``f"{doc_id}-p{paragraph_index:02d}-s{chunk_index:02d}"`` (``chunk_index`` counts the
  paragraph's chunks). A chunk's text is the exact paragraph substring with surrounding whitespace removed.
- **Sentences**: English ends a sentence at ``.``, ``!`` or ``?`` (plus closing quotes or brackets) followed by
  whitespace, except after a common abbreviation (``Dr.``, ``St.``, ``No.``, month names, ...), a single capital
  initial (``J.``) or a dotted abbreviation (``U.S.``, ``e.g.``); decimals (``3.5``) never split because no
  whitespace follows the dot. Chinese ends a sentence after ``。``, ``！`` or ``？`` (plus closing quotes or brackets);
  ``；`` does not end one. Sentences are packed greedily into chunks of 1..``max_sentences`` sentences, except that an
  answer crossing a sentence boundary keeps every sentence it touches in one chunk, which may then hold more than
  ``max_sentences`` sentences.
- **Queries**: ``query_id = f"{question_language}-{qid}"`` where every character of the question ID outside
  ``A-Z a-z 0-9 . _ : -`` is replaced by ``_``; two question IDs that map to the same query ID are refused. A query has
  one judgment of grade 3 per chunk holding one of its answers, with every distinct answer in that chunk as a span.
  Answers are trimmed of surrounding whitespace (SQuAD scoring ignores it), so each span is verbatim in its chunk.
  v2.0 ``is_impossible`` questions become no-answer queries; ``plausible_answers`` are read and checked for type but
  not used (nor matched against the context).
- **Held out**: ``round(held_out_fraction * n)`` of the ``n`` corpus paragraphs (document order) are chosen with
  ``numpy.random.default_rng(seed).choice(n, size=k, replace=False)`` and removed with all their chunks; the questions
  of removed paragraphs become no-answer queries tagged ``held_out``. SQuAD v1.1 (and XQuAD) has no unanswerable
  questions, so a v1.1 import needs ``held_out_fraction > 0``.
- **Cross-lingual**: queries are the questions of the ``questions`` file; the paragraph, the answers and
  ``is_impossible`` come from the ``corpus`` file's question with the same ID. Every query is tagged
  ``cross_language``.
- **Privacy**: text the schema refuses (a URL, path, e-mail address or secret look-alike) surfaces as
  :class:`~evalkit.data.fixture.FixtureError` naming the record. With ``private_paragraphs="hold_out"``, a paragraph
  whose text or any of whose chunks trips :func:`evalkit.data.schema.privacy_problem` is instead removed like a
  held-out one (its questions become no-answer queries tagged ``held_out``); :func:`find_private_paragraphs` lists
  them. No XQuAD paragraph trips the rules (units such as ``平方英里 /年`` once did, before the path rule required two
  segments).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, ValidationError, model_validator

from evalkit.common.output import write_atomic
from evalkit.common.progress import progress
from evalkit.data.fixture import FIXTURE_FILE, Fixture, parse_fixture
from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES, InputError, clip, read_json_file
from evalkit.data.repairs import RepairLog, SourceFormatError
from evalkit.data.schema import (
    MAX_ID_LENGTH,
    AttributionText,
    Identifier,
    Language,
    NonBlank,
    PositiveInt,
    RecordProblems,
    StrictModel,
    child,
    privacy_problem,
    validation_problems,
)

__all__ = [
    "SquadAnswer",
    "SquadArticle",
    "SquadDataset",
    "SquadFormatError",
    "SquadImportOptions",
    "SquadParagraph",
    "SquadQuestion",
    "chunk_ranges",
    "find_private_paragraphs",
    "fixture_json",
    "forgive_squad",
    "import_cross_lingual",
    "import_squad",
    "nearest_occurrence",
    "query_id",
    "read_squad",
    "split_sentences",
    "write_fixture",
]


class SquadFormatError(SourceFormatError):
    """Malformed SQuAD input, or an import that cannot form a valid fixture; each problem names item and field."""

    FORMAT = "SQuAD"


class SquadAnswer(StrictModel):
    """One answer: ``context[answer_start:answer_start + len(text)] == text``."""

    text: NonBlank = Field(description="the verbatim answer text")
    answer_start: Annotated[int, Field(ge=0)] = Field(description="character offset of the answer in the context")


class SquadQuestion(StrictModel):
    """A question with its answers (v2.0: ``is_impossible`` questions have none)."""

    id: Annotated[str, Field(min_length=1)] = Field(description="question ID, unique in the file")
    question: NonBlank = Field(description="the question text")
    answers: tuple[SquadAnswer, ...] = Field(description="gold answers; empty exactly when is_impossible")
    is_impossible: bool = Field(default=False, description="v2.0: the paragraph does not answer the question")
    plausible_answers: tuple[SquadAnswer, ...] = Field(default=(), description="v2.0: unused distractor answers")


class SquadParagraph(StrictModel):
    """A paragraph (the context) and the questions asked about it."""

    context: NonBlank = Field(description="the paragraph text")
    qas: tuple[SquadQuestion, ...] = Field(description="questions about this paragraph")


class SquadArticle(StrictModel):
    """An article (a Wikipedia page) and its paragraphs."""

    title: NonBlank = Field(description="article title, words joined by underscores")
    paragraphs: tuple[SquadParagraph, ...] = Field(description="the article's paragraphs in order")


class SquadDataset(StrictModel):
    """A SQuAD v1.1 or v2.0 file; answer offsets and question-ID uniqueness are checked across records."""

    version: str | None = Field(default=None, description="format version, e.g. 1.1 or v2.0")
    data: tuple[SquadArticle, ...] = Field(description="the articles in order")

    @model_validator(mode="after")
    def _consistent(self) -> SquadDataset:
        problems = list(_dataset_problems(self))
        if problems:
            raise RecordProblems(problems)
        return self


def _short(value: str, limit: int = 60) -> str:
    return repr(value if len(value) <= limit else value[:limit] + "...")


def _item(article_index: int, title: str | None, paragraph_index: int | None = None, qid: str | None = None) -> str:
    where = f"article {article_index}" + (f" ({_short(title)})" if title is not None else "")
    if paragraph_index is not None:
        where += f", paragraph {paragraph_index}"
    if qid is not None:
        where += f", question {_short(qid)}"
    return where


def _question_problems(where: str, question: SquadQuestion, context: str) -> Iterable[str]:
    if question.is_impossible and question.answers:
        yield f"{where}: field 'answers': must be empty when is_impossible is true"
    if not question.is_impossible and not question.answers:
        yield f"{where}: field 'answers': must not be empty (the question is not marked is_impossible)"
    for index, answer in enumerate(question.answers):
        found = context[answer.answer_start : answer.answer_start + len(answer.text)]
        if found != answer.text:
            yield (
                f"{where}: field 'answers[{index}].answer_start': text {_short(answer.text)} is not at offset "
                f"{answer.answer_start} of the context (found {_short(found)})"
            )


def _dataset_problems(dataset: SquadDataset) -> Iterable[str]:
    seen: dict[str, str] = {}
    for ai, article in enumerate(dataset.data):
        for pi, paragraph in enumerate(article.paragraphs):
            for question in paragraph.qas:
                where = _item(ai, article.title, pi, question.id)
                if question.id in seen:
                    yield f"{where}: field 'id': already used by {seen[question.id]}"
                seen.setdefault(question.id, _item(ai, article.title, pi))
                yield from _question_problems(where, question, paragraph.context)


# --- reading -------------------------------------------------------------------------------------------------------

_LEVELS = (("data", "article", "title"), ("paragraphs", "paragraph", None), ("qas", "question", "id"))


def _locate(raw: Any, loc: tuple[int | str, ...]) -> str:
    """Describe a pydantic error location as "article i ('Title'), paragraph j, question 'id': field 'path'"."""
    names: list[str] = []
    node, rest = raw, loc
    for key, kind, name_field in _LEVELS:
        if len(rest) < 2 or rest[0] != key or not isinstance(rest[1], int):
            break
        node = child(child(node, key), rest[1])
        name = child(node, name_field) if name_field else None
        if kind == "question":
            names.append(f"question {_short(name)}" if isinstance(name, str) else f"question at qas[{rest[1]}]")
        else:
            names.append(f"{kind} {rest[1]}" + (f" ({_short(name)})" if isinstance(name, str) else ""))
        rest = rest[2:]
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{clip(p)}" for p in rest).removeprefix(".")
    field = f"field {path or '(record)'!r}"
    return f"{', '.join(names)}: {field}" if names else field


def _problems_from(error: ValidationError, raw: Any) -> list[str]:
    return validation_problems(error, raw, _locate, 1_000)  # the message lists MAX_PROBLEMS of them


# --- forgiving pass over the raw JSON ------------------------------------------------------------------------------

REPAIR_WINDOW = 8
"""An answer found at most this many characters from its stated offset is moved there (``answer_offset``)."""

_FIELDS = {
    "dataset": frozenset({"version", "data"}),
    "article": frozenset({"title", "paragraphs"}),
    "paragraph": frozenset({"context", "qas"}),
    "question": frozenset({"id", "question", "answers", "is_impossible", "plausible_answers"}),
    "answer": frozenset({"text", "answer_start"}),
}


def _known_keys(node: dict[str, Any], level: str, where: str, ident: str, log: RepairLog) -> dict[str, Any]:
    """`node` without the keys SQuAD does not define at `level` (each noted as ``unknown_key``; kept on fail)."""
    kept: dict[str, Any] = {}
    for key, value in node.items():
        known = key in _FIELDS[level]
        problem = f"{where}: field {key!r}: not a SQuAD field"
        if known or log.note("unknown_key", f"{ident}.{key}", problem) == "fail":
            kept[key] = value
    return kept


def nearest_occurrence(context: str, text: str, start: int, window: int) -> int | None:
    """The offset of the occurrence of `text` in `context` nearest to `start` (the earlier on a tie), at most
    `window` characters away; None when there is none."""
    low, high = max(0, start - window), max(0, start + window)
    found = [i for i in range(low, min(high, len(context) - len(text)) + 1) if context.startswith(text, i)]
    return min(found, key=lambda i: (abs(i - start), i)) if found else None


def _forgive_answers(
    answers: list[Any], context: str, where: str, ident: str, log: RepairLog, window: int
) -> list[Any]:
    kept: list[Any] = []
    for index, raw in enumerate(answers):
        at = (f"{where}, answer {index}", f"{ident}.answers[{index}]")
        answer = _known_keys(raw, "answer", *at, log) if isinstance(raw, dict) else raw
        text, start = child(answer, "text"), child(answer, "answer_start")
        if not isinstance(text, str) or not text.strip() or not isinstance(start, int) or isinstance(start, bool):
            kept.append(answer)  # wrong types are the strict schema's to report
            continue
        if context[start : start + len(text)] == text and start >= 0:
            kept.append(answer)
            continue
        field = f"{where}: field 'answers[{index}].answer_start'"
        nearest = nearest_occurrence(context, text, start, window)
        if nearest is None:
            problem = f"{field}: text {_short(text)} is not in the context within {window} characters of {start}"
            if log.note("answer_missing", ident, problem) == "fail":
                kept.append(answer)
            continue
        action = log.note("answer_offset", ident, f"{field}: text {_short(text)} is at {nearest}, not {start}")
        if action == "repair":
            kept.append({**answer, "answer_start": nearest})
        elif action == "fail":
            kept.append(answer)
    return kept


def _forgive_question(raw: Any, context: Any, where: str, log: RepairLog, window: int) -> Any | None:
    """The question with its answers checked against `context`; None when it is skipped."""
    if not isinstance(raw, dict):
        return raw
    qid = child(raw, "id")
    where = f"{where}, question {_short(qid)}" if isinstance(qid, str) else where
    ident = qid if isinstance(qid, str) else where
    question = _known_keys(raw, "question", where, ident, log)
    text = child(question, "question")
    blank = isinstance(text, str) and not text.strip()
    if blank and log.note("blank_question", ident, f"{where}: field 'question': must not be blank") != "fail":
        return None
    answers = child(question, "answers")
    if not isinstance(context, str) or not isinstance(answers, list) or not answers:
        return question
    kept = _forgive_answers(answers, context, where, ident, log, window)
    if not kept and question.get("is_impossible") is not True:
        problem = f"{where}: field 'answers': no answer is left in the context"
        if log.note("question_without_answer", ident, problem) != "fail":
            return None
    return {**question, "answers": kept}


def _forgive_paragraph(raw: Any, where: str, ident: str, log: RepairLog, window: int) -> Any:
    if not isinstance(raw, dict):
        return raw
    paragraph = _known_keys(raw, "paragraph", where, ident, log)
    qas = child(paragraph, "qas")
    if isinstance(qas, list):
        forgiven = (_forgive_question(q, child(paragraph, "context"), where, log, window) for q in qas)
        paragraph["qas"] = [q for q in forgiven if q is not None]
    return paragraph


def _forgive_article(raw: Any, index: int, log: RepairLog, window: int) -> Any | None:
    """The article with unknown keys removed, a blank title replaced and its paragraphs forgiven; None if skipped."""
    if not isinstance(raw, dict):
        return raw
    title = child(raw, "title")
    where = _item(index, title if isinstance(title, str) and title.strip() else None)
    ident = f"article {index}"
    article = _known_keys(raw, "article", where, ident, log)
    if isinstance(title, str) and not title.strip():
        action = log.note("blank_title", ident, f"{where}: field 'title': must not be blank")
        if action == "skip":
            return None
        if action == "repair":
            article["title"] = f"Untitled article {index}"
    paragraphs = child(article, "paragraphs")
    if isinstance(paragraphs, list):
        article["paragraphs"] = [
            _forgive_paragraph(p, f"{where}, paragraph {pi}", f"{ident} paragraph {pi}", log, window)
            for pi, p in enumerate(paragraphs)
        ]
    return article


def forgive_squad(raw: dict[str, Any], log: RepairLog, window: int = REPAIR_WINDOW) -> dict[str, Any]:
    """A copy of raw SQuAD JSON with what `log`'s policy repairs repaired and what it skips removed.

    Unknown keys are dropped (``unknown_key``); an answer whose exact text is within `window` characters of its
    stated offset is moved to the nearest occurrence (``answer_offset``); an answer not found there is dropped
    (``answer_missing``); a question left with no answer is dropped (``question_without_answer``), and so is a
    question with blank text (``blank_question``); a blank title becomes ``Untitled article <index>``
    (``blank_title``). Values of the wrong type are left for the strict schema.
    """
    dataset = _known_keys(raw, "dataset", "top level", "top level", log)
    data = child(dataset, "data")
    if isinstance(data, list):
        articles = (_forgive_article(a, ai, log, window) for ai, a in enumerate(data))
        dataset["data"] = [a for a in articles if a is not None]
    return dataset


def read_squad(
    path: Path, log: RepairLog | None = None, window: int = REPAIR_WINDOW, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> SquadDataset:
    """Read a SQuAD v1.1 or v2.0 JSON file; raise :class:`SquadFormatError` naming the item and field of any problem.

    Without `log` the reader is strict: a missing or unreadable file, text that is not UTF-8 or not JSON, a top level
    that is not an object, wrong or missing fields, unknown fields, an ``answer_start`` that does not locate the
    answer text, a blank context or question, inconsistent ``is_impossible`` and duplicate question IDs are all
    reported as SquadFormatError. So are a file that is not a regular file or is larger than `max_bytes`, and JSON
    with duplicate keys or ``NaN`` (see :mod:`evalkit.data.inputs`). With `log`, :func:`forgive_squad` first repairs
    or skips what the log's policy allows (and records it); what its policy refuses, and every other problem, is
    still a SquadFormatError.
    """
    source = str(path)
    try:
        text, raw = read_json_file(Path(path), max_bytes)
    except InputError as exc:
        reason = exc.reason
        if reason.startswith("cannot be read: not UTF-8"):
            reason = "cannot be read as UTF-8 text: " + reason.removeprefix("cannot be read: ")
        raise SquadFormatError(source, [f"file {reason}"]) from None
    if not isinstance(raw, dict):
        raise SquadFormatError(
            source, [f"top level: must be a JSON object with a 'data' list, not {type(raw).__name__}"]
        )
    if log is not None:
        raw = forgive_squad(raw, log, window)
        if log.failures:
            raise SquadFormatError(source, log.failures)
        text = json.dumps(raw, ensure_ascii=False)
    try:
        return SquadDataset.model_validate_json(text)
    except ValidationError as exc:
        raise SquadFormatError(source, _problems_from(exc, raw)) from None


# --- options ------------------------------------------------------------------------------------------------------


class SquadImportOptions(StrictModel):
    """How a SQuAD file becomes a fixture."""

    fixture_id: Identifier = Field(description="ID of the produced fixture")
    fixture_version: Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")] = Field(
        default="1.0.0", description="semantic version of the produced fixture"
    )
    language: Language = Field(description="corpus language (and question language of a monolingual import)")
    chunking: Literal["paragraph", "sentence"] = Field(
        default="paragraph", description="a chunk is a paragraph, or a run of 1..max_sentences sentences"
    )
    max_sentences: PositiveInt = Field(default=3, description="sentence chunking: at most this many sentences")
    held_out_fraction: Annotated[float, Field(ge=0.0, lt=1.0)] = Field(
        default=0.0, description="fraction of paragraphs removed from the corpus (their questions: no-answer)"
    )
    seed: Annotated[int, Field(ge=0)] = Field(
        default=0, description="seed of numpy.random.default_rng choosing held-out paragraphs"
    )
    max_articles: PositiveInt | None = Field(default=None, description="import only the first N articles")
    license: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9.+-]+$")] = Field(
        description="SPDX licence identifier carried into the fixture"
    )
    attribution: AttributionText = Field(description="source and attribution carried into the fixture")
    private_paragraphs: Literal["error", "hold_out"] = Field(
        default="error",
        description="a paragraph the privacy rules refuse: fail (error) or remove it like a held-out one",
    )
    allow_links_in_text: bool = Field(
        default=False,
        description="keep links, host names and paths in chunk and query text (credential-like values never)",
    )


# --- chunking -----------------------------------------------------------------------------------------------------

_CLOSERS = re.escape("\"'”’」』）)]")
# Possessive quantifiers and the look-behind make each run of terminators one match attempt: linear time, even on
# long runs such as "....." or words without spaces.
_EN_END = re.compile(rf"(?<![.!?])[.!?]++[{_CLOSERS}]*+(?=\s)")
_ZH_END = re.compile(rf"[。！？]++[{_CLOSERS}]*+")
_OPENERS = "\"'“‘「『（(["
_ABBREVIATIONS = frozenset(
    """Mr Mrs Ms Dr Prof St Sr Jr Mt Ft Gen Col Lt Sgt Capt Gov Sen Rep Rev Hon v vs Vol No Nos Fig fig pp p al approx
    ca cf c Inc Ltd Co Corp Bros Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec""".split()
)
_DOTTED = re.compile(r"[A-Z]|(?:[A-Za-z]\.)+[A-Za-z]")  # an initial (J.) or a dotted abbreviation (U.S., e.g.)
_LONGEST_ABBREVIATION = 24


def _is_abbreviation(text: str, dot: int) -> bool:
    """True when the word ending just before the full stop at `dot` is an abbreviation (``Dr``, ``U.S``, ``J``)."""
    window = text[max(0, dot - _LONGEST_ABBREVIATION) : dot]
    if not window or window[-1].isspace():
        return False
    word = window.split()[-1]
    if word == window and dot > _LONGEST_ABBREVIATION:
        return False  # the word is longer than the window: no abbreviation is that long
    word = word.lstrip(_OPENERS)
    return word in _ABBREVIATIONS or _DOTTED.fullmatch(word) is not None


def _english_boundaries(text: str) -> Iterable[int]:
    for match in _EN_END.finditer(text):
        if match.group() == "." and _is_abbreviation(text, match.start()):
            continue
        yield match.end()


def _chinese_boundaries(text: str) -> Iterable[int]:
    return (match.end() for match in _ZH_END.finditer(text))


def _core(text: str, start: int, end: int) -> tuple[int, int]:
    """`text[start:end]` without surrounding whitespace, as offsets (empty when it is all whitespace)."""
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    return start + lead, start + len(piece.rstrip())


def split_sentences(text: str, language: Language) -> tuple[tuple[int, int], ...]:
    """The sentences of `text` as ``(start, end)`` offsets, without surrounding whitespace, in order.

    Together the sentences hold every non-whitespace character of `text` (see the module docstring for the rules).
    """
    boundaries = _english_boundaries(text) if language == "en" else _chinese_boundaries(text)
    cuts = [0, *boundaries, len(text)]
    cores = (_core(text, a, b) for a, b in pairwise(cuts))
    return tuple((a, b) for a, b in cores if a < b)


def _units(sentences: Sequence[tuple[int, int]], answers: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Runs ``(first, last)`` of sentences that must share a chunk because an answer crosses their boundaries."""
    joined = [False] * max(len(sentences) - 1, 0)
    for a, b in answers:
        touched = [i for i, (s, e) in enumerate(sentences) if s < b and a < e]
        for i in range(touched[0], touched[-1]) if touched else ():
            joined[i] = True
    units: list[tuple[int, int]] = []
    first = 0
    for i in range(len(sentences)):
        if i == len(sentences) - 1 or not joined[i]:
            units.append((first, i))
            first = i + 1
    return units


def chunk_ranges(
    context: str,
    language: Language,
    chunking: Literal["paragraph", "sentence"],
    max_sentences: int,
    answers: Iterable[tuple[int, int]] = (),
) -> tuple[tuple[int, int], ...]:
    """The chunks of one paragraph as ``(start, end)`` offsets into `context`, in order.

    `answers` are ``(start, end)`` answer offsets without surrounding whitespace; with sentence chunking no answer
    crosses a chunk boundary (see the module docstring).
    """
    if chunking == "paragraph":
        return (_core(context, 0, len(context)),)
    sentences = split_sentences(context, language)
    chunks: list[tuple[int, int]] = []
    group: list[tuple[int, int]] = []  # units in the chunk being filled
    for unit in _units(sentences, answers):
        size = sum(last - first + 1 for first, last in group)
        if group and size + unit[1] - unit[0] + 1 > max_sentences:
            chunks.append((sentences[group[0][0]][0], sentences[group[-1][1]][1]))
            group = []
        group.append(unit)
    if group:
        chunks.append((sentences[group[0][0]][0], sentences[group[-1][1]][1]))
    return tuple(chunks)


def _answer_range(answer: SquadAnswer) -> tuple[int, int]:
    """The answer's offsets in the context without its surrounding whitespace."""
    text = answer.text
    return answer.answer_start + len(text) - len(text.lstrip()), answer.answer_start + len(text.rstrip())


# --- import -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Chunk:
    chunk_id: str
    start: int
    end: int


@dataclass(frozen=True)
class _Paragraph:
    paragraph_id: str
    doc_id: str
    context: str
    chunks: tuple[_Chunk, ...]


@dataclass(frozen=True)
class _Gold:
    """Where a question's answers are: its paragraph (index into the corpus plan) and answer offsets."""

    paragraph: int
    answers: tuple[tuple[int, int], ...]
    impossible: bool


@dataclass(frozen=True)
class _Corpus:
    documents: tuple[dict[str, str], ...]
    paragraphs: tuple[_Paragraph, ...]
    gold: dict[str, _Gold]


def _articles(dataset: SquadDataset, options: SquadImportOptions) -> tuple[SquadArticle, ...]:
    return dataset.data[: options.max_articles]


def _plan_paragraph(
    paragraph: SquadParagraph, paragraph_id: str, doc_id: str, options: SquadImportOptions
) -> _Paragraph:
    answers = [_answer_range(a) for q in paragraph.qas for a in q.answers]
    ranges = chunk_ranges(paragraph.context, options.language, options.chunking, options.max_sentences, answers)
    if options.chunking == "paragraph":
        ids = [paragraph_id]
    else:
        ids = [f"{paragraph_id}-s{k:02d}" for k in range(len(ranges))]
    chunks = tuple(_Chunk(chunk_id, a, b) for chunk_id, (a, b) in zip(ids, ranges, strict=True))
    return _Paragraph(paragraph_id, doc_id, paragraph.context, chunks)


def _plan_corpus(dataset: SquadDataset, options: SquadImportOptions) -> _Corpus:
    documents: list[dict[str, str]] = []
    paragraphs: list[_Paragraph] = []
    gold: dict[str, _Gold] = {}
    articles = _articles(dataset, options)
    for ai, article in enumerate(progress(articles, "importing articles", len(articles))):
        doc_id = f"{options.language}-a{ai:03d}"
        documents.append({"doc_id": doc_id, "language": options.language, "title": article.title.replace("_", " ")})
        for pi, paragraph in enumerate(article.paragraphs):
            for question in paragraph.qas:
                answers = tuple(_answer_range(a) for a in question.answers)
                gold[question.id] = _Gold(len(paragraphs), answers, question.is_impossible)
            paragraphs.append(_plan_paragraph(paragraph, f"{doc_id}-p{pi:02d}", doc_id, options))
    return _Corpus(tuple(documents), tuple(paragraphs), gold)


def _private(corpus: _Corpus, allow_links: bool = False) -> dict[int, str]:
    """Corpus paragraph index -> what the privacy rules see in its text or one of its chunks."""
    found: dict[int, str] = {}
    for index, paragraph in enumerate(corpus.paragraphs):
        texts = [paragraph.context, *(paragraph.context[c.start : c.end] for c in paragraph.chunks)]
        problems = (privacy_problem(text, allow_links=allow_links) for text in texts)
        problem = next((p for p in problems if p is not None), None)
        if problem is not None:
            found[index] = problem
    return found


def _note_links(job: _Import, log: RepairLog) -> None:
    """Note each kept paragraph and question whose text holds a link, host name or path (``links_in_text``)."""
    for index, paragraph in enumerate(job.corpus.paragraphs):
        problem = privacy_problem(paragraph.context)
        if index not in job.removed and problem is not None:
            log.note("links_in_text", paragraph.paragraph_id, f"paragraph {paragraph.paragraph_id}: {problem}")
    for article in _articles(job.questions, job.options):
        for source in article.paragraphs:
            for question in source.qas:
                problem = privacy_problem(question.question)
                if problem is not None:
                    ident = query_id(job.question_language, question.id)
                    log.note("links_in_text", ident, f"question {question.id!r}: {problem}")


def find_private_paragraphs(dataset: SquadDataset, options: SquadImportOptions) -> dict[str, str]:
    """Paragraph ID (``{lang}-aNNN-pNN``) -> what :func:`evalkit.data.schema.privacy_problem` sees in it, in file order.

    These paragraphs make an import fail with FixtureError unless ``options.private_paragraphs == "hold_out"``.
    """
    corpus = _plan_corpus(dataset, options)
    return {corpus.paragraphs[i].paragraph_id: problem for i, problem in _private(corpus).items()}


def _held_out(count: int, options: SquadImportOptions) -> frozenset[int]:
    """Indexes of the held-out paragraphs among `count` paragraphs in document order."""
    size = round(options.held_out_fraction * count)
    if size == 0:
        return frozenset()
    chosen = np.random.default_rng(options.seed).choice(count, size=size, replace=False)
    return frozenset(int(i) for i in chosen)


def query_id(language: Language, qid: str) -> str:
    """The query ID of SQuAD question `qid` asked in `language`: characters outside ``A-Za-z0-9._:-`` become ``_``."""
    return f"{language}-{re.sub(r'[^A-Za-z0-9._:-]', '_', qid)}"


def _judgments(gold: _Gold, paragraph: _Paragraph) -> list[dict[str, Any]]:
    """One grade-3 judgment per chunk holding an answer, in chunk order, with its distinct spans sorted."""
    spans: dict[int, set[tuple[int, str]]] = {}
    for a, b in gold.answers:
        for index, chunk in enumerate(paragraph.chunks):
            if chunk.start <= a and b <= chunk.end:
                spans.setdefault(index, set()).add((a - chunk.start, paragraph.context[a:b]))
                break
        else:  # chunk_ranges keeps answers inside one chunk; reaching this is a bug, not bad input
            raise RuntimeError(f"answer at {a}:{b} of paragraph {paragraph.paragraph_id!r} is in no chunk")
    return [
        {
            "chunk_id": paragraph.chunks[index].chunk_id,
            "grade": 3,
            "spans": [{"start": start, "text": text} for start, text in sorted(spans[index])],
        }
        for index in sorted(spans)
    ]


@dataclass(frozen=True)
class _Import:
    questions: SquadDataset
    question_language: Language
    corpus: _Corpus
    removed: frozenset[int]
    options: SquadImportOptions
    cross_lingual: bool
    log: RepairLog | None = None


def _query(job: _Import, question: SquadQuestion, gold: _Gold) -> dict[str, Any]:
    tags = ["cross_language"] if job.cross_lingual else []
    judgments: list[dict[str, Any]] = []
    if gold.paragraph in job.removed:
        tags.append("held_out")
    elif not gold.impossible:
        judgments = _judgments(gold, job.corpus.paragraphs[gold.paragraph])
    return {
        "query_id": query_id(job.question_language, question.id),
        "language": job.question_language,
        "text": question.question,
        "tags": tags,
        "judgments": judgments,
    }


def _queries(job: _Import) -> list[dict[str, Any]]:
    queries: list[dict[str, Any]] = []
    problems: list[str] = []
    owners: dict[str, str] = {}
    for ai, article in enumerate(_articles(job.questions, job.options)):
        for pi, paragraph in enumerate(article.paragraphs):
            for question in paragraph.qas:
                where = _item(ai, article.title, pi, question.id)
                ident = query_id(job.question_language, question.id)
                gold = job.corpus.gold.get(question.id)
                if gold is None:
                    problems.append(f"{where}: field 'id': question ID not found in the corpus file")
                elif len(ident) > MAX_ID_LENGTH:
                    problems.append(f"{where}: field 'id': query ID {_short(ident)} is over {MAX_ID_LENGTH} characters")
                elif ident in owners:
                    problems.append(f"{where}: field 'id': maps to query ID {ident!r} like question {owners[ident]!r}")
                else:
                    owners[ident] = question.id
                    queries.append(_query(job, question, gold))
    if problems:
        raise SquadFormatError(f"for fixture {job.options.fixture_id!r}", problems)
    return queries


def _label_problems(queries: Sequence[dict[str, Any]], chunks: Sequence[dict[str, str]]) -> Iterable[str]:
    if not queries:
        yield "no questions to import"
        return
    if not chunks:
        yield "no paragraphs left in the corpus (all are held out); lower held_out_fraction"
    if not any(q["judgments"] for q in queries):
        yield "no answerable question (every question is impossible or held out); lower held_out_fraction"
    if all(q["judgments"] for q in queries):
        yield (
            "no no-answer question: every question is answerable (SQuAD v1.1 and XQuAD have no unanswerable "
            "questions), which the fixture schema refuses as a degenerate label set; set held_out_fraction > 0 "
            "(e.g. 0.1) so that the questions of held-out paragraphs become no-answer queries"
        )


def _removed(corpus: _Corpus, options: SquadImportOptions) -> frozenset[int]:
    removed = _held_out(len(corpus.paragraphs), options)
    if options.private_paragraphs == "hold_out":
        removed |= _private(corpus, options.allow_links_in_text).keys()
    return removed


def _build(job: _Import) -> Fixture:
    queries = _queries(job)
    chunks = [
        {"chunk_id": chunk.chunk_id, "doc_id": paragraph.doc_id, "text": paragraph.context[chunk.start : chunk.end]}
        for index, paragraph in enumerate(job.corpus.paragraphs)
        if index not in job.removed
        for chunk in paragraph.chunks
    ]
    problems = list(_label_problems(queries, chunks))
    if problems:
        raise SquadFormatError(f"for fixture {job.options.fixture_id!r}", problems)
    options = job.options
    if job.log is not None and options.allow_links_in_text:
        _note_links(job, job.log)
    data = {
        "fixture_id": options.fixture_id,
        "fixture_version": options.fixture_version,
        "license": options.license,
        "attribution": options.attribution,
        "text_policy": "links_allowed" if options.allow_links_in_text else "strict",
        "documents": list(job.corpus.documents),
        "chunks": chunks,
        "queries": queries,
    }
    return parse_fixture(json.dumps(data, ensure_ascii=False), f"imported from SQuAD as {options.fixture_id!r}")


def import_squad(dataset: SquadDataset, options: SquadImportOptions, log: RepairLog | None = None) -> Fixture:
    """A monolingual fixture: the questions of `dataset` judged against its own paragraphs (``options.language``).

    Raises:
        SquadFormatError: question IDs that collide as query IDs, or a degenerate label set (SQuAD v1.1 with
            ``held_out_fraction == 0``: no no-answer query).
        FixtureError: any other schema refusal (text that looks like a path, URL or secret, over-long text),
            naming the record.
    """
    corpus = _plan_corpus(dataset, options)
    job = _Import(dataset, options.language, corpus, _removed(corpus, options), options, cross_lingual=False, log=log)
    return _build(job)


def import_cross_lingual(
    questions: SquadDataset,
    corpus: SquadDataset,
    question_language: Language,
    options: SquadImportOptions,
    log: RepairLog | None = None,
) -> Fixture:
    """A cross-lingual fixture: `questions` (in `question_language`) judged against the paragraphs of `corpus`.

    ``options.language`` is the corpus language and must differ from `question_language`. Questions are paired
    with the corpus through their shared question IDs; answers, ``is_impossible`` and held-out paragraphs come from
    the corpus side. Every query is tagged ``cross_language``.

    Raises:
        ValueError: `question_language` equals ``options.language``.
        SquadFormatError: a question ID missing from the corpus file (naming it), colliding query IDs, or a
            degenerate label set.
        FixtureError: any other schema refusal, naming the record.
    """
    if question_language == options.language:
        raise ValueError(
            f"question language {question_language!r} equals the corpus language; use import_squad for one language"
        )
    plan = _plan_corpus(corpus, options)
    job = _Import(questions, question_language, plan, _removed(plan, options), options, cross_lingual=True, log=log)
    return _build(job)


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
