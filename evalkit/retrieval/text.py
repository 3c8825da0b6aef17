"""Bilingual text normalization: Chinese word segmentation (rjieba) and English case-folding and stemming.

One analyzer serves the FTS5 index, the vector providers, the reranker and the BM25 baseline, so that every path
sees the same tokens. Text is NFKC-normalized and case-folded, split into runs of Han characters and runs of other
word characters. Han runs are segmented by rjieba in search mode without the HMM: dictionary words plus their
dictionary sub-words (笔记本 also yields 笔记), and unknown character pairs are not glued into pseudo-words.
Other runs are split on non-word characters and stemmed with the Snowball English stemmer (PyStemmer).
Nothing is loaded at import time.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any, cast

from evalkit.data.language import HAN_CHARACTERS as _HAN

_PIECES = re.compile(rf"([{_HAN}]+)|([^\W_{_HAN}]+)")
_IS_HAN = re.compile(rf"[{_HAN}]")
_OTHER_WORDS = re.compile(rf"[^\W_{_HAN}]+")
_WORD = re.compile(r"\w", re.UNICODE)
_ASCII_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})
_ODD = re.compile(r"[^\w\n]", re.UNICODE)

# Lucene's default English stop set plus question and auxiliary words, which carry no topic in a query.
ENGLISH_STOPWORDS = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such that the their then there these
    they this to was will with what how do does did can could i my me we our you your when which who whom why
    where should would shall may might has have had am been being its from about any so than""".split()
)
# Chinese function words, particles and question words (Simplified Chinese).
CHINESE_STOPWORDS = frozenset(
    """的 了 是 在 吗 呢 吧 啊 和 与 及 或 或者 我 我们 你 您 你们 他 她 它 他们 这 那 这个 那个 这些 那些 怎么
    怎样 如何 什么 哪些 哪个 哪 多少 几 是否 可以 能 能否 会 有 没有 把 被 就 都 也 还 要 个 之 等 为 对 从 到
    将 让 给 呀 么 并 而 但 如果 时 后 前 里 中 需要 应该 一下 一个""".split()
)
STOPWORDS = ENGLISH_STOPWORDS | CHINESE_STOPWORDS

ANALYZER_VERSION = "2"
"""Bump when tokenization changes; it is part of every provider and retrieval definition hash."""


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


_REMEMBERED_STEMS = 1 << 17
"""Distinct words whose stems :func:`_stems` keeps (a memory bound: past it, new words are stemmed each time)."""


@lru_cache(maxsize=1)
def _stem_memory() -> dict[str, str]:
    return {}


def _stems(words: list[str]) -> list[str]:
    """``stemWords(words)``: the Snowball stemmer stems a word on its own, so each distinct word's stem is
    remembered and looked up (a text's words are mostly words seen before; the stemmer costs more than a lookup)."""
    memory = _stem_memory()
    stems: list[str | None] = list(map(memory.get, words))
    if None in stems:
        new = list(dict.fromkeys(w for w, s in zip(words, stems, strict=True) if s is None))
        fresh = dict(zip(new, _stemmer().stemWords(new), strict=True))
        if len(memory) + len(fresh) <= _REMEMBERED_STEMS:
            memory.update(fresh)
        stems = list(map(fresh.get, words, stems))  # a remembered word's stem is its default
    return cast("list[str]", stems)


@lru_cache(maxsize=1)
def _jieba() -> Any:
    import rjieba

    return rjieba


@lru_cache(maxsize=1)
def _decompositions() -> tuple[re.Pattern[str], dict[str, str]]:
    """The Basic Multilingual Plane's characters that are not NFKC-normalized alone, each with its NFKD form."""
    characters = map(chr, range(0x10000))
    table = {c: unicodedata.normalize("NFKD", c) for c in characters if not unicodedata.is_normalized("NFKC", c)}
    return re.compile("[" + "".join(map(re.escape, table)) + "]"), table


def normalize(text: str) -> str:
    """NFKC-normalize and case-fold (full-width letters and digits become ASCII, English becomes lower case).

    Characters that NFKC changes are first replaced by their NFKD forms, which NFKC of the whole text would
    produce from them anyway (normalization decomposes each character on its own before it reorders and composes,
    and an NFKD form decomposes to itself): the result is the same, and a text whose only such characters are,
    say, full-width punctuation then passes NFKC's quick check instead of being decomposed and composed whole.
    """
    if not text.isascii():
        pattern, table = _decompositions()
        text = pattern.sub(lambda found: table[found.group()], text)
    return unicodedata.normalize("NFKC", text).casefold()


def is_han(text: str) -> bool:
    """True when the text contains at least one Han character."""
    return _IS_HAN.search(text) is not None


def tokenize(text: str, *, drop_stopwords: bool = False) -> tuple[str, ...]:
    """Split text into normalized tokens: rjieba words for Han runs, Snowball-stemmed words otherwise.

    With ``drop_stopwords`` the stop sets above are removed (English words before stemming).
    """
    return analyze(text)[1 if drop_stopwords else 0]


def analyze(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(tokenize(text), tokenize(text, drop_stopwords=True))`` from one pass of the analyzer.

    One pass over the normalized text finds the Han runs and the other words in order (ASCII text: its runs of
    letters and digits; other text without Han characters: its words alone); the words are stemmed together
    (:func:`_stems`) and the runs segmented by one rjieba call over the runs joined by newlines (rjieba cuts at a
    newline and yields it alone, so each run is segmented as if alone). A run holding unassigned code points (not
    word characters) keeps only the words with a word character.
    """
    normalized = normalize(text)
    pieces: list[tuple[str, str]] = []
    runs: list[str] = []
    if normalized.isascii():
        words = normalized.translate(_ASCII_SEPARATORS).split()
    elif _IS_HAN.search(normalized) is None:  # no Han run: _PIECES would find these words, in tuples
        words = _OTHER_WORDS.findall(normalized)
    else:
        pieces = _PIECES.findall(normalized)
        runs, words = [han for han, _ in pieces if han], [word for _, word in pieces if word]
    stems = _stems(words) if words else []
    if not runs:
        return tuple(stems), tuple([s for s, w in zip(stems, words, strict=True) if w not in STOPWORDS])
    joined = "\n".join(runs)
    cut: list[str] = _jieba().cut_for_search(joined, False)
    if _ODD.search(joined):
        cut = [word if word == "\n" or _WORD.search(word) else "" for word in cut]
    tokens = _in_order(cut, stems, pieces)
    if not any(map(STOPWORDS.__contains__, words)):
        # A run's words are Han and no stem is, so the Chinese stopwords are the tokens to drop (none is "").
        return tokens, tuple(filter(None, map(_blanks(CHINESE_STOPWORDS).get, tokens, tokens)))
    kept = list(map(_blanks(STOPWORDS).get, cut, cut))  # "\n" is in no stop set
    return tokens, _in_order(kept, [s if w not in STOPWORDS else "" for s, w in zip(stems, words, strict=True)], pieces)


def _in_order(cut: list[str], stems: list[str], pieces: list[tuple[str, str]]) -> tuple[str, ...]:
    """The runs' words (``cut``, a newline between runs) and the other words' stems, in the text's order."""
    if not stems:
        return tuple(" ".join(cut).split())
    # Run i's words lie between the cut's newlines i - 1 and i (rjieba yields each newline alone; one more newline
    # ends the last run). The words are put in order as they are, not joined and split again; "" words are dropped.
    ordered: list[str] = []
    stemmed, bounded, end = iter(stems), [*cut, "\n"], -1
    for han, _ in pieces:
        if han:
            start, end = end + 1, bounded.index("\n", end + 1)
            ordered += bounded[start:end]
        else:
            ordered.append(next(stemmed))
    return tuple(filter(None, ordered))


@lru_cache(maxsize=4)
def _blanks(stop: frozenset[str]) -> dict[str, str]:
    """Each word of a stop set mapped to "": ``map(_blanks(stop).get, words, words)`` blanks the stopwords."""
    return dict.fromkeys(stop, "")


@lru_cache(maxsize=1)
def stopword_tokens() -> frozenset[str]:
    """The stop sets as they appear in analyzed text (English stopwords stemmed: does -> doe, any -> ani)."""
    return frozenset(tokenize(" ".join(sorted(STOPWORDS))))


def analyzed(text: str) -> str:
    """Tokens joined by single spaces: the form stored in the FTS5 index."""
    return " ".join(tokenize(text))


def query_terms(text: str) -> tuple[str, ...]:
    """Distinct content tokens of a query, in first-occurrence order (stopwords removed)."""
    return tuple(dict.fromkeys(tokenize(text, drop_stopwords=True)))
