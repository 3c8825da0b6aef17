"""The analyzer's batched implementation must give exactly the tokens of its original, run-by-run definition.

``reference_tokenize`` is the analyzer as it was before stemming was batched (one ``stemWords`` call per run of
non-Han word characters); every stored index and hash depends on the tokens staying the same.
"""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.data.fixture import LoadedFixture
from evalkit.retrieval import text as text_module
from evalkit.retrieval.text import (
    STOPWORDS,
    _jieba,
    _stem_memory,
    _stemmer,
    _stems,
    analyze,
    is_han,
    normalize,
    tokenize,
)

_HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_REFERENCE_RUNS = re.compile(rf"[{_HAN}]+|[^\W{_HAN}]+")
_WORD = re.compile(r"\w", re.UNICODE)


def reference_tokenize(text: str, *, drop_stopwords: bool = False) -> tuple[str, ...]:
    stop = STOPWORDS if drop_stopwords else frozenset()
    tokens: list[str] = []
    for run in _REFERENCE_RUNS.findall(normalize(text)):
        if is_han(run):
            words = _jieba().cut_for_search(run, False)
            tokens.extend(word for word in words if _WORD.search(word) and word not in stop)
        else:
            words = [word for word in run.replace("_", " ").split() if word not in stop]
            tokens.extend(_stemmer().stemWords(words))
    return tuple(tokens)


_PIECES = st.sampled_from(
    [
        "the",
        "Running",
        "does",
        "any",
        "召回率",
        "是",
        "检索",
        "笔记本",
        "的",
        "ＰＤＦ",
        "café",
        "naïve",
        "x86_64",
        "__init__",
        "3.5",
        "½",
        "Straße",
        "ΣΑΣ",
        "\u00a0",
        " ",
        "\n",
        ",",
        "。",
        "_",
        "-",
        "ﬁ",
        "Ⅻ",
        "ǅ",
        "가나",
        "ｶﾀｶﾅ",
        "召\ufa6e回",
        "\ufada",
        "\u9fff",
    ]
)


@given(st.lists(st.one_of(_PIECES, st.text(max_size=6)), max_size=30).map("".join), st.booleans())
def test_batched_stemming_gives_the_reference_tokens(text: str, drop: bool) -> None:
    assert tokenize(text, drop_stopwords=drop) == reference_tokenize(text, drop_stopwords=drop)


@given(st.lists(st.one_of(_PIECES, st.text(max_size=6)), max_size=30).map("".join))
def test_one_pass_gives_both_token_forms(text: str) -> None:
    assert analyze(text) == (reference_tokenize(text), reference_tokenize(text, drop_stopwords=True))


@pytest.mark.parametrize("name", ["tiny", "synthetic"])
def test_fixture_texts_give_the_reference_tokens(name: str, request: pytest.FixtureRequest) -> None:
    loaded: LoadedFixture = request.getfixturevalue(name)
    texts = [c.text for c in loaded.fixture.chunks] + [q.text for q in loaded.fixture.queries]
    for text in texts:
        for drop in (False, True):
            assert tokenize(text, drop_stopwords=drop) == reference_tokenize(text, drop_stopwords=drop), text
        assert analyze(text) == (tokenize(text), tokenize(text, drop_stopwords=True)), text


# The analyzer's shortcuts must give what the plain definitions give: NFKC + casefold, and stemWords.

_NORMALIZE_PIECES = st.sampled_from(
    [
        *("，", "（", "）", "：", "ＰＤＦ", "１２３", "\u3000", "ﬁ", "ﬀ", "½", "²", "Ⅻ", "ǅ", "가", "\u1100\u1161"),
        *("ｶﾞ", "ｶ\uff9e"),
        *("召回率", "。", "“", "e", "\u0301", "\u0327", "\u0308", "Å", "Ω", "K", "ß", "İ", "ΣΑΣ", "\U0001d400", "\0"),
    ]
)


@given(st.lists(st.one_of(_NORMALIZE_PIECES, st.text(max_size=4)), max_size=24).map("".join))
def test_normalize_is_nfkc_then_casefold(text: str) -> None:
    assert normalize(text) == unicodedata.normalize("NFKC", text).casefold()


def test_normalize_is_nfkc_then_casefold_for_every_bmp_character_and_its_neighbours() -> None:
    # Each character alone, after a combining mark's base, and before combining marks (composition and reordering).
    for code in range(0x10000):
        character = chr(code)
        for text in (character, "a" + character, character + "\u0327\u0301", "\uff0c" + character + "\u0301"):
            assert normalize(text) == unicodedata.normalize("NFKC", text).casefold(), hex(code)


def test_remembered_stems_are_the_stemmers_stems(monkeypatch: pytest.MonkeyPatch) -> None:
    words = ["running", "runs", "running", "does", "caresses", "ponies", "café", "x86", "running", "generously"]
    assert _stems(words) == _stemmer().stemWords(words)
    assert _stems(words[::-1]) == _stemmer().stemWords(words[::-1])  # remembered by now
    monkeypatch.setattr(text_module, "_REMEMBERED_STEMS", 0)  # a full memory stems the new words every time
    _stem_memory().clear()
    assert _stems(words) == _stemmer().stemWords(words)
    assert not _stem_memory()


@pytest.mark.parametrize(
    "text",
    [
        "Café naïve Straße, x86_64 — ΣΑΣ ½ ﬁnal",  # no Han character, not ASCII: the words found alone
        "召回率（Recall）是 3.5，笔记本 2024 年的 AI 检索。",  # words between Han runs, put in order
        "1，导出。2，3 the 笔记",  # a word before the first run, several runs between words, a stopword
        "\ufada的 x \U000e0001召回",  # an unassigned code point in a run
    ],
)
def test_texts_of_each_path_give_the_reference_tokens(text: str) -> None:
    assert analyze(text) == (reference_tokenize(text), reference_tokenize(text, drop_stopwords=True))
