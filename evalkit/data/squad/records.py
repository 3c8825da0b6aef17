"""The records of a SQuAD v1.1 or v2.0 file (articles, paragraphs, questions, answers) and the checks across them.

Every problem names its place as ``article i ('Title'), paragraph j, question 'id'`` and the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from pydantic import Field, model_validator

from evalkit.data.inputs import shorten
from evalkit.data.repairs import SourceFormatError
from evalkit.data.schema import NonBlank, RecordProblems, StrictModel

__all__ = [
    "SquadAnswer",
    "SquadArticle",
    "SquadDataset",
    "SquadFormatError",
    "SquadParagraph",
    "SquadQuestion",
    "describe_item",
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


def describe_item(
    article_index: int, title: str | None, paragraph_index: int | None = None, qid: str | None = None
) -> str:
    """Where a record is: ``article i ('Title')``, then ``, paragraph j`` and ``, question 'id'`` when given."""
    where = f"article {article_index}" + (f" ({shorten(title)})" if title is not None else "")
    if paragraph_index is not None:
        where += f", paragraph {paragraph_index}"
    if qid is not None:
        where += f", question {shorten(qid)}"
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
                f"{where}: field 'answers[{index}].answer_start': text {shorten(answer.text)} is not at offset "
                f"{answer.answer_start} of the context (found {shorten(found)})"
            )


def _dataset_problems(dataset: SquadDataset) -> Iterable[str]:
    seen: dict[str, str] = {}
    for ai, article in enumerate(dataset.data):
        for pi, paragraph in enumerate(article.paragraphs):
            for question in paragraph.qas:
                where = describe_item(ai, article.title, pi, question.id)
                if question.id in seen:
                    yield f"{where}: field 'id': already used by {seen[question.id]}"
                seen.setdefault(question.id, describe_item(ai, article.title, pi))
                yield from _question_problems(where, question, paragraph.context)
