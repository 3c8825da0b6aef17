"""Turn SQuAD data into an evalkit fixture: one file (monolingual) or two parallel files (cross-lingual).

Mapping (all indexes are 0-based positions in the file; ``lang`` is the corpus language):

- **Documents** are articles: ``doc_id = f"{lang}-a{article_index:03d}"``, title = the article title with ``_``
  read as a space. Every article becomes a document, even when all its paragraphs are held out.
- **Chunks** are paragraphs, ``f"{doc_id}-p{paragraph_index:02d}"``, or with sentence chunking runs of consecutive
  sentences of one paragraph, ``f"{doc_id}-p{paragraph_index:02d}-s{chunk_index:02d}"`` (``chunk_index`` counts the
  paragraph's chunks). A chunk's text is the exact paragraph substring with surrounding whitespace removed.
  Sentences and chunks are cut as :mod:`evalkit.data.chunking` describes.
- **Queries**: ``query_id = f"{question_language}-{qid}"`` where every character of the question ID outside
  ``A-Z a-z 0-9 . _ : -`` is replaced by ``_``, with a short hash appended when letters or digits are lost
  (:func:`evalkit.data.assembly.replace_id_characters`, as for BEIR and TREC IDs); each rewrite is reported as
  ``id_rewritten`` (or refused when the policy fails it), and two question IDs that map to the same query ID are
  refused, naming both. XQuAD and CMRC 2018 question IDs need no rewrite. A query has
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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from evalkit.common.progress import progress
from evalkit.data.assembly import ImportOptions, assemble_fixture, replace_id_characters
from evalkit.data.chunking import chunk_ranges
from evalkit.data.fixture import Fixture
from evalkit.data.inputs import shorten
from evalkit.data.repairs import RepairLog, RepairPolicy
from evalkit.data.schema import MAX_ID_LENGTH, Language, PositiveInt, privacy_problem
from evalkit.data.squad.records import (
    SquadAnswer,
    SquadArticle,
    SquadDataset,
    SquadFormatError,
    SquadParagraph,
    SquadQuestion,
    describe_item,
)

__all__ = [
    "SquadImportOptions",
    "find_private_paragraphs",
    "import_cross_lingual",
    "import_squad",
    "query_id",
]


class SquadImportOptions(ImportOptions):
    """How a SQuAD file becomes a fixture (the fixture's ID, version, licence and text policy: ImportOptions)."""

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
    private_paragraphs: Literal["error", "hold_out"] = Field(
        default="error",
        description="a paragraph the privacy rules refuse: fail (error) or remove it like a held-out one",
    )


def _answer_range(answer: SquadAnswer) -> tuple[int, int]:
    """The answer's offsets in the context without its surrounding whitespace."""
    text = answer.text
    return answer.answer_start + len(text) - len(text.lstrip()), answer.answer_start + len(text.rstrip())


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
    """The query ID of SQuAD question `qid` asked in `language`: characters outside ``A-Za-z0-9._:-`` become ``_``
    (:func:`~evalkit.data.assembly.replace_id_characters`: with a hash suffix when letters or digits are lost)."""
    return f"{language}-{replace_id_characters(qid)}"


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


def _rewritten(log: RepairLog, question: SquadQuestion, ident: str, where: str) -> bool:
    """Whether the query may take `ident`: a question ID that had to be rewritten is noted as ``id_rewritten``, as
    the BEIR and TREC readers note theirs, and refused when the log's policy fails it."""
    if replace_id_characters(question.id) == question.id:
        return True
    return log.note("id_rewritten", ident, f"{where}: field 'id': {question.id!r} becomes {ident!r}") != "fail"


def _queries(job: _Import) -> list[dict[str, Any]]:
    queries: list[dict[str, Any]] = []
    problems: list[str] = []
    owners: dict[str, str] = {}
    log = job.log if job.log is not None else RepairLog(RepairPolicy())
    failed = len(log.failures)
    for ai, article in enumerate(_articles(job.questions, job.options)):
        for pi, paragraph in enumerate(article.paragraphs):
            for question in paragraph.qas:
                where = describe_item(ai, article.title, pi, question.id)
                ident = query_id(job.question_language, question.id)
                gold = job.corpus.gold.get(question.id)
                if gold is None:
                    problems.append(f"{where}: field 'id': question ID not found in the corpus file")
                elif len(ident) > MAX_ID_LENGTH:
                    problems.append(
                        f"{where}: field 'id': query ID {shorten(ident)} is over {MAX_ID_LENGTH} characters"
                    )
                elif ident in owners:
                    problems.append(
                        f"{where}: field 'id': {question.id!r} becomes query ID {ident!r} like question "
                        f"{owners[ident]!r}"
                    )
                elif _rewritten(log, question, ident, where):
                    owners[ident] = question.id
                    queries.append(_query(job, question, gold))
    problems += log.failures[failed:]
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
    if job.log is not None and job.options.allow_links_in_text:
        _note_links(job, job.log)
    return assemble_fixture(job.options, job.corpus.documents, chunks, queries, "SQuAD")


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
