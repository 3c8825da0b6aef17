"""A cheap check that a SQuAD file is in the language its import says: an English file imported with ``--language
zh`` would otherwise become a Chinese fixture without a word.

:func:`language_note` runs :func:`evalkit.data.language.detect_language` over an evenly spaced sample of the file's
questions or contexts (at most :data:`SAMPLE_SIZE` of each, the same for the same file) and returns a note when most
of a sample read as the other language. It is a note, not a refusal: the rule misreads a few texts (a question
that is only a product name), and a file may be what its user says it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar

from evalkit.data.language import detect_language
from evalkit.data.schema import Language
from evalkit.data.squad.records import SquadDataset

__all__ = ["SAMPLE_SIZE", "TextKind", "evenly_spaced", "language_note"]

SAMPLE_SIZE = 200
"""At most this many questions, and this many contexts, of a file are checked."""

TextKind = Literal["questions", "contexts"]
Item = TypeVar("Item")


def evenly_spaced(items: Sequence[Item], size: int = SAMPLE_SIZE) -> list[Item]:
    """`size` items of `items` at evenly spaced positions, the first included (all of them when there are fewer)."""
    if len(items) <= size:
        return list(items)
    return [items[i * len(items) // size] for i in range(size)]


def _texts(dataset: SquadDataset, kind: TextKind) -> list[str]:
    paragraphs = [p for article in dataset.data for p in article.paragraphs]
    if kind == "contexts":
        return [p.context for p in paragraphs]
    return [q.question for p in paragraphs for q in p.qas]


def language_note(
    dataset: SquadDataset, language: Language, flag: str, kinds: Sequence[TextKind] = ("questions", "contexts")
) -> str | None:
    """A note naming the counts and `flag` when most of the sampled texts of one of `kinds` do not read as
    `language`; None when each sample is mostly in `language` (or empty)."""
    counts: list[tuple[TextKind, int, int, int]] = []
    for kind in kinds:
        texts = _texts(dataset, kind)
        sample = evenly_spaced(texts)
        counts.append((kind, sum(detect_language(t) != language for t in sample), len(sample), len(texts)))
    if not any(2 * other > checked for _, other, checked, _ in counts):
        return None
    parts = [
        f"{other} of {checked} {kind}" + (f" (sampled from {total})" if checked < total else "")
        for kind, other, checked, total in counts
    ]
    other_language = "en" if language == "zh" else "zh"
    return (
        f"{' and '.join(parts)} read as {other_language}, not {language}: is {flag} {language} right? "
        "(the import goes on)"
    )
