"""Tests for retrieval.text: Chinese segmentation, English stemming, normalization, stopwords and determinism."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.retrieval.text import (
    CHINESE_STOPWORDS,
    ENGLISH_STOPWORDS,
    STOPWORDS,
    analyzed,
    is_han,
    normalize,
    query_terms,
    tokenize,
)

MIXED = "Sync 同步 runs 每五分钟; ＰＤＦ导出 is Running, 召回率是检索评估的重要指标!"


# ---------------------------------------------------------------------------------------------------------
# Chinese
# ---------------------------------------------------------------------------------------------------------


def test_chinese_is_segmented_into_words() -> None:
    assert tokenize("召回率是检索评估的重要指标") == ("召回", "率", "是", "检索", "评估", "的", "重要", "指标")


def test_chinese_search_mode_adds_dictionary_sub_words() -> None:
    # Search mode: the compound and the dictionary words inside it, sub-words first.
    assert tokenize("笔记本") == ("笔记", "笔记本")
    assert tokenize("中华人民共和国") == ("中华", "华人", "人民", "共和", "共和国", "中华人民共和国")


def test_chinese_punctuation_splits_runs_and_is_dropped() -> None:
    assert tokenize("「导出」功能，真的吗？") == ("导出", "功能", "真的", "吗")


# ---------------------------------------------------------------------------------------------------------
# English
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Running", ("run",)),
        ("RUNS running Ran", ("run", "run", "ran")),
        ("Deleted notes", ("delet", "note")),
        ("deleting", ("delet",)),
        ("subscriptions", ("subscript",)),
    ],
)
def test_english_is_case_folded_and_stemmed(text: str, expected: tuple[str, ...]) -> None:
    assert tokenize(text) == expected


def test_english_punctuation_and_underscores_split_words() -> None:
    assert tokenize("hello, world! (foo) — bar? snake_case e-mail") == (
        "hello",
        "world",
        "foo",
        "bar",
        "snake",
        "case",
        "e",
        "mail",
    )


def test_punctuation_only_text_has_no_tokens() -> None:
    assert tokenize("?!，。…— ()") == ()
    assert tokenize("") == ()


# ---------------------------------------------------------------------------------------------------------
# Normalization
# ---------------------------------------------------------------------------------------------------------


def test_full_width_letters_and_digits_become_ascii() -> None:
    assert normalize("ＡＢＣ１２３") == "abc123"
    assert tokenize("ＡＢＣ１２３") == ("abc123",)
    assert tokenize("ＡＢＣ１２３，Ｔｅｓｔ！") == ("abc123", "test")


def test_case_folding_is_full_unicode() -> None:
    assert normalize("Straße ÉCOLE") == "strasse école"
    assert tokenize("Café") == ("café",)


def test_is_han() -> None:
    assert is_han("导出")
    assert is_han("PDF 导出")
    assert not is_han("export")
    assert not is_han("，。！")  # CJK punctuation is not Han


# ---------------------------------------------------------------------------------------------------------
# Mixed text
# ---------------------------------------------------------------------------------------------------------


def test_mixed_text_keeps_order() -> None:
    assert tokenize("Sync 同步 runs, 导出 PDF!") == ("sync", "同步", "run", "导出", "pdf")


def test_latin_and_han_split_without_spaces() -> None:
    assert tokenize("PDF格式导出") == ("pdf", "格式", "导出")
    assert tokenize("2024年") == ("2024", "年")


# ---------------------------------------------------------------------------------------------------------
# Stopwords
# ---------------------------------------------------------------------------------------------------------


def test_stopwords_kept_by_default_and_dropped_on_request() -> None:
    text = "How does the app work? 怎么导出笔记？"
    assert tokenize(text) == ("how", "doe", "the", "app", "work", "怎么", "导出", "笔记")
    assert tokenize(text, drop_stopwords=True) == ("app", "work", "导出", "笔记")


def test_english_stopwords_dropped_before_stemming() -> None:
    # 'does' stems to 'doe', which is not a stopword: dropping after stemming would keep it.
    assert tokenize("does") == ("doe",)
    assert tokenize("does", drop_stopwords=True) == ()
    assert tokenize("DOES Has", drop_stopwords=True) == ()


@pytest.mark.parametrize("word", sorted(STOPWORDS))
def test_every_stopword_is_dropped(word: str) -> None:
    assert tokenize(word, drop_stopwords=True) == ()


def test_stop_sets_are_disjoint_by_script() -> None:
    assert not any(is_han(w) for w in ENGLISH_STOPWORDS)
    assert all(is_han(w) for w in CHINESE_STOPWORDS)
    assert ENGLISH_STOPWORDS | CHINESE_STOPWORDS == STOPWORDS


# ---------------------------------------------------------------------------------------------------------
# query_terms and analyzed
# ---------------------------------------------------------------------------------------------------------


def test_query_terms_dedupes_in_first_occurrence_order() -> None:
    assert query_terms("Trash notes, the TRASH and a note: 导出 笔记 导出") == ("trash", "note", "导出", "笔记")


def test_query_terms_of_stopwords_only_is_empty() -> None:
    assert query_terms("What is the? 是什么吗") == ()


def test_analyzed_joins_tokens_with_single_spaces() -> None:
    assert analyzed("Deleted  notes,\tstay 在回收站") == "delet note stay 在 回收 回收站"
    assert analyzed("") == ""


# ---------------------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------------------

_WORDS = ["ＡＢＣ", "１２", "导出", "笔记", "回收站", "的", "是", "召回率", "running", "does", "the", "Deleted"]
_ALPHABET = st.sampled_from([*"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,!?，。！？", *_WORDS])
_TEXTS = st.lists(_ALPHABET, max_size=30).map("".join)


def _is_subsequence(small: tuple[str, ...], large: tuple[str, ...]) -> bool:
    remaining = iter(large)
    return all(any(token == candidate for candidate in remaining) for token in small)


@given(_TEXTS)
def test_tokens_are_non_empty_words_and_analyzed_round_trips(text: str) -> None:
    tokens = tokenize(text)
    assert all(token and not any(ch.isspace() for ch in token) for token in tokens)
    assert analyzed(text) == " ".join(tokens)
    assert (analyzed(text).split(" ") if tokens else []) == list(tokens)


@given(_TEXTS)
def test_dropping_stopwords_yields_a_subsequence(text: str) -> None:
    full = tokenize(text)
    content = tokenize(text, drop_stopwords=True)
    assert _is_subsequence(content, full)
    assert query_terms(text) == tuple(dict.fromkeys(content))
    assert len(set(query_terms(text))) == len(query_terms(text))


_TOKENS_BY_HAND: dict[str, tuple[str, ...]] = {
    # NFKC and lower case, Snowball English stems, jieba's search mode (sub-words first); stopwords are kept.
    "ＡＢＣ": ("abc",),
    "１２": ("12",),
    "导出": ("导出",),
    "笔记": ("笔记",),
    "回收站": ("回收", "回收站"),
    "的": ("的",),
    "是": ("是",),
    "召回率": ("召回", "率"),
    "running": ("run",),
    "does": ("doe",),
    "the": ("the",),
    "Deleted": ("delet",),
}


@given(st.lists(st.sampled_from(sorted(_TOKENS_BY_HAND)), max_size=12))
def test_words_apart_give_their_hand_written_tokens_in_order(words: list[str]) -> None:
    assert tokenize(" ".join(words)) == tuple(token for word in words for token in _TOKENS_BY_HAND[word])


@given(_TEXTS)
def test_tokenize_ignores_case(text: str) -> None:
    assert tokenize(text.upper()) == tokenize(text.lower())


# ---------------------------------------------------------------------------------------------------------
# Determinism across processes and no import-time loading
# ---------------------------------------------------------------------------------------------------------


def _run(code: str, hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return result.stdout


def test_tokenize_identical_across_hash_seeds() -> None:
    code = (
        "from evalkit.retrieval.text import tokenize, query_terms; "
        f"print(tokenize({MIXED!r})); print(query_terms({MIXED!r}))"
    )
    outputs = {seed: _run(code, seed) for seed in ("0", "12345")}
    assert outputs["0"] == outputs["12345"]
    assert outputs["0"] == f"{tokenize(MIXED)}\n{query_terms(MIXED)}\n"


def test_nothing_loaded_at_import() -> None:
    code = "import sys, evalkit.retrieval.text; print('rjieba' in sys.modules, 'Stemmer' in sys.modules)"
    assert _run(code, "0") == "False False\n"
