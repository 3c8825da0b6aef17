"""Repair and skip accounting of the source-format readers (SQuAD, BEIR, TREC).

A reader of an outside format forgives what real files contain: it repairs what is unambiguous, skips what is not,
and records every repair and skip here, by kind, with a count and the first few IDs. A :class:`RepairPolicy` says,
for each kind, whether to ``repair``, ``skip`` or ``fail`` (``fail`` is the strict behaviour: the problem is
reported, naming the record and field, and no fixture is written). :class:`RepairLog` collects what happened and
gives the :class:`ImportSummary` that the CLI prints and writes beside the fixture as ``import_summary.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal, get_args

from pydantic import Field

from evalkit.common.output import write_atomic
from evalkit.data.inputs import cap_problems
from evalkit.data.schema import StrictModel, model_json, privacy_problem

__all__ = [
    "KIND_ACTIONS",
    "SQUAD_KINDS",
    "SUMMARY_FILE",
    "Action",
    "CollectionKind",
    "ImportSummary",
    "KindSummary",
    "RepairKind",
    "RepairLog",
    "RepairPolicy",
    "SourceFormatError",
    "SquadKind",
    "format_import_summary",
    "write_import_summary",
]

SUMMARY_FILE = "import_summary.json"
MAX_EXAMPLES = 5
"""At most this many example IDs are kept per kind."""

Action = Literal["repair", "skip", "fail"]

CollectionKind = Literal[
    "unknown_key",
    "blank_text",
    "blank_title",
    "duplicate_id",
    "id_rewritten",
    "unknown_reference",
    "pooled_not_judged",
    "negative_grade",
    "grade_above_3",
    "missing_spans",
    "conflicting_document",
]
"""The kinds a collection import (BEIR, TREC: :mod:`evalkit.data.collection`) reports."""

SquadKind = Literal[
    "unknown_key",
    "answer_offset",
    "answer_missing",
    "question_without_answer",
    "blank_question",
    "blank_title",
    "id_rewritten",
]
"""The kinds a SQuAD import (:mod:`evalkit.data.squad`) reports, each with its ``--on-<kind>`` flag."""
SQUAD_KINDS: tuple[SquadKind, ...] = get_args(SquadKind)

RepairKind = Literal[SquadKind, CollectionKind, "links_in_text"]
"""Every kind of problem a reader of an outside format reports: a SQuAD import's, the rest of a collection's, links."""

KIND_ACTIONS: dict[RepairKind, tuple[tuple[Action, ...], str]] = {
    "unknown_key": (("skip", "fail"), "a key the source format does not define: ignored (skip)"),
    "answer_offset": (
        ("repair", "skip", "fail"),
        "an answer whose exact text is near, not at, its offset: moved to the nearest occurrence (repair)",
    ),
    "answer_missing": (("skip", "fail"), "an answer whose text is not in the context near its offset: dropped"),
    "question_without_answer": (("skip", "fail"), "a question left with no answer: dropped"),
    "blank_question": (("skip", "fail"), "a question with blank text: dropped"),
    "blank_title": (("repair", "skip", "fail"), "a blank title: replaced by a stable fallback (repair)"),
    "blank_text": (("skip", "fail"), "a record with blank text: dropped"),
    "duplicate_id": (("skip", "fail"), "a second record with an ID already read: dropped"),
    "id_rewritten": (
        ("repair", "fail"),
        "an ID with characters outside A-Z a-z 0-9 . _ : -: each becomes '_', and an ID that so loses letters or "
        "digits gets '-' and 8 hex digits of their SHA-256 (repair)",
    ),
    "unknown_reference": (("skip", "fail"), "a judgment naming an unknown query or document: dropped"),
    "pooled_not_judged": (("skip", "fail"), "a qrel of grade -1 (trec_eval's pooled, not judged): left unjudged"),
    "negative_grade": (
        ("skip", "repair", "fail"),
        "a qrel of grade -2 or below: left out, unjudged, as trec_eval reads it (skip); repair makes it grade 0",
    ),
    "grade_above_3": (("repair", "skip", "fail"), "a grade above 3: lowered to 3 (repair)"),
    "missing_spans": (("repair", "fail"), "a judgment without answer spans: the whole chunk becomes its span"),
    "conflicting_document": (
        ("repair", "fail"),
        "a corpus record whose title or language differs from its document's first record: the first kept (repair)",
    ),
    "links_in_text": (("repair", "fail"), "a link, host name or path in chunk or query text: kept (repair)"),
}
"""Each kind: the actions it allows (the first is the default) and what the default does."""


class SourceFormatError(ValueError):
    """A source file (SQuAD, BEIR, TREC) that cannot become a fixture; each problem names the record and field.

    The message lists the first :data:`~evalkit.data.inputs.MAX_PROBLEMS` problems and the total count.
    """

    FORMAT = "source"

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        shown = [f"  - {p}" for p in cap_problems(self.problems)]
        header = f"invalid {self.FORMAT} data {source}: {len(self.problems)} problem(s)"
        super().__init__(header + "\n" + "\n".join(shown))


class RepairPolicy(StrictModel):
    """What a reader does with each kind of problem: repair it, skip the record, or fail (the strict behaviour)."""

    actions: dict[RepairKind, Action] = Field(
        default_factory=dict, description="kind -> action; a kind not named here gets its default"
    )

    def action(self, kind: RepairKind) -> Action:
        """The action for `kind`: the one set, or the kind's default."""
        return self.actions.get(kind, KIND_ACTIONS[kind][0][0])

    @classmethod
    def strict(cls) -> RepairPolicy:
        """Every kind fails: today's strict behaviour."""
        return cls(actions=dict.fromkeys(KIND_ACTIONS, "fail"))

    @classmethod
    def from_choices(cls, choices: dict[RepairKind, Action]) -> RepairPolicy:
        """A policy from kind -> action; raise ValueError naming the kind when it does not allow the action."""
        for kind, action in choices.items():
            allowed = KIND_ACTIONS[kind][0]
            if action not in allowed:
                raise ValueError(f"repair policy for {kind!r}: {action!r} is not one of {', '.join(allowed)}")
        return cls(actions=dict(choices))


class KindSummary(StrictModel):
    """What was done about one kind of problem."""

    action: Action = Field(description="what was done: repair or skip")
    count: int = Field(ge=0, description="how many times")
    examples: tuple[str, ...] = Field(description=f"the first (up to {MAX_EXAMPLES}) record IDs concerned")


class ImportSummary(StrictModel):
    """Every repair and skip of one import, by kind, with the counts of what was written."""

    source_format: Literal["squad", "beir", "trec"] = Field(description="the format read")
    documents: int = Field(ge=0, description="documents written")
    chunks: int = Field(ge=0, description="chunks written")
    queries: int = Field(ge=0, description="queries written")
    answerable: int = Field(ge=0, description="queries with at least one relevant judgment (grade >= 1)")
    repairs: dict[str, KindSummary] = Field(description="kind -> what was done, in kind order")


def _shown_id(item: str) -> str:
    """An ID as it may appear in a summary: IDs that look private or are over-long are withheld."""
    if len(item) > 128 or privacy_problem(item) is not None or not item.isprintable():
        return "(withheld ID)"
    return item


class RepairLog:
    """Collects the repairs, skips and failures of one import under one :class:`RepairPolicy`."""

    def __init__(self, policy: RepairPolicy) -> None:
        self.policy = policy
        self.failures: list[str] = []
        self._counts: dict[RepairKind, int] = {}
        self._examples: dict[RepairKind, list[str]] = {}

    def note(self, kind: RepairKind, item: str, problem: str) -> Action:
        """Record one problem of `kind` about record `item`; return the action to take.

        With ``fail`` the `problem` (a sentence naming the record and field) is kept for :meth:`raise_failures`,
        with the flag that would accept it; the caller then goes on as if skipping, so that all problems are found.
        """
        action = self.policy.action(kind)
        if action == "fail":
            flag = "--on-" + kind.replace("_", "-")
            other = "/".join(a for a in KIND_ACTIONS[kind][0] if a != "fail")
            self.failures.append(f"{problem} (refused as {kind}; {flag} {other} accepts it)")
            return action
        self._counts[kind] = self._counts.get(kind, 0) + 1
        examples = self._examples.setdefault(kind, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append(_shown_id(item))
        return action

    def count(self, kind: RepairKind) -> int:
        """How many problems of `kind` were repaired or skipped."""
        return self._counts.get(kind, 0)

    def raise_failures(self, source: str) -> None:
        """Raise :class:`SourceFormatError` listing every refused problem, if there is any."""
        if self.failures:
            raise SourceFormatError(source, self.failures)

    def repairs(self) -> dict[str, KindSummary]:
        """Kind -> what was done, in the order of :data:`KIND_ACTIONS`."""
        return {
            kind: KindSummary(action=self.policy.action(kind), count=count, examples=tuple(self._examples[kind]))
            for kind in KIND_ACTIONS
            if (count := self._counts.get(kind, 0))
        }


def format_import_summary(summary: ImportSummary) -> str:
    """The summary as text lines: one per kind with its count, action and first IDs (or that nothing was needed)."""
    lines = [
        f"import summary ({summary.source_format}): {summary.documents} documents, {summary.chunks} chunks, "
        f"{summary.queries} queries ({summary.answerable} answerable)"
    ]
    if not summary.repairs:
        lines.append("  no repairs or skips")
    for kind, item in summary.repairs.items():
        lines.append(f"  {kind:<24} {item.count:>6} {item.action:<6} e.g. {', '.join(item.examples)}")
    return "\n".join(lines)


def write_import_summary(summary: ImportSummary, directory: Path) -> Path:
    """Write ``directory/import_summary.json`` atomically and return its path."""
    path = directory / SUMMARY_FILE
    write_atomic(path, model_json(summary))
    return path
