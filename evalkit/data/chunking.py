"""Sentences and chunks of a paragraph, as character offsets into its text.

- **Sentences**: English ends a sentence at ``.``, ``!`` or ``?`` (plus closing quotes or brackets) followed by
  whitespace, except after a common abbreviation (``Dr.``, ``St.``, ``No.``, month names, ...), a single capital
  initial (``J.``) or a dotted abbreviation (``U.S.``, ``e.g.``); decimals (``3.5``) never split because no
  whitespace follows the dot. Chinese ends a sentence after ``。``, ``！`` or ``？`` (plus closing quotes or brackets);
  ``；`` does not end one.
- **Chunks**: a whole paragraph, or sentences packed greedily into chunks of 1..``max_sentences`` sentences, except
  that an answer crossing a sentence boundary keeps every sentence it touches in one chunk, which may then hold more
  than ``max_sentences`` sentences. A chunk is the exact substring with surrounding whitespace removed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Literal

from evalkit.data.schema import Language

__all__ = ["chunk_ranges", "split_sentences"]

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
