"""Read a SQuAD JSON file: strictly, or forgiving what real files contain.

:func:`read_squad` reads through the guarded door (:func:`evalkit.data.inputs.read_json_file`) and checks the file
against the strict records of :mod:`evalkit.data.squad.records`. With a :class:`~evalkit.data.repairs.RepairLog`,
:func:`forgive_squad` first repairs what is unambiguous (an answer a few characters from its stated offset, a blank
title) and skips what is not, recording every repair and skip by kind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES, InputError, clip, read_json_file, shorten
from evalkit.data.repairs import RepairLog
from evalkit.data.schema import child, validation_problems
from evalkit.data.squad.records import SquadDataset, SquadFormatError, describe_item

__all__ = ["REPAIR_WINDOW", "forgive_squad", "nearest_occurrence", "read_squad"]

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
            names.append(f"question {shorten(name)}" if isinstance(name, str) else f"question at qas[{rest[1]}]")
        else:
            names.append(f"{kind} {rest[1]}" + (f" ({shorten(name)})" if isinstance(name, str) else ""))
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
            problem = f"{field}: text {shorten(text)} is not in the context within {window} characters of {start}"
            if log.note("answer_missing", ident, problem) == "fail":
                kept.append(answer)
            continue
        action = log.note("answer_offset", ident, f"{field}: text {shorten(text)} is at {nearest}, not {start}")
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
    where = f"{where}, question {shorten(qid)}" if isinstance(qid, str) else where
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
    where = describe_item(index, title if isinstance(title, str) and title.strip() else None)
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
