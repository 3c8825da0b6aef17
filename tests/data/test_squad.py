"""Tests for evalkit.data.squad and evalkit.data.chunking: reading SQuAD files, chunking, held-out paragraphs,
cross-lingual pairing, writing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.data.chunking import chunk_ranges, split_sentences
from evalkit.data.fixture import Fixture, FixtureError, fixture_json, load_fixture, write_fixture
from evalkit.data.schema import Language
from evalkit.data.squad import (
    SquadDataset,
    SquadFormatError,
    SquadImportOptions,
    find_private_paragraphs,
    import_cross_lingual,
    import_squad,
    query_id,
    read_squad,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "fixtures" / "squad"
EN_FILE = DATA / "tiny.en.json"
ZH_FILE = DATA / "tiny.zh.json"
V2_FILE = DATA / "tiny.v2.en.json"
XQUAD = Path(__file__).resolve().parents[3] / "shared" / "data" / "xquad"

Data = dict[str, Any]
Chunking = Literal["paragraph", "sentence"]


def options(**changes: Any) -> SquadImportOptions:
    values: Data = {
        "fixture_id": "tiny-squad",
        "language": "en",
        "license": "CC0-1.0",
        "attribution": "Hand-written SQuAD-format test data.",
        "held_out_fraction": 0.4,  # round(0.4 * 5 paragraphs) = 2 held out
        "seed": 0,  # default_rng(0).choice(5, 2) = {3, 4}: the two Tea_Garden paragraphs
    }
    values.update(changes)
    return SquadImportOptions(**values)


@pytest.fixture(scope="module")
def en() -> SquadDataset:
    return read_squad(EN_FILE)


@pytest.fixture(scope="module")
def zh() -> SquadDataset:
    return read_squad(ZH_FILE)


@pytest.fixture(scope="module")
def v2() -> SquadDataset:
    return read_squad(V2_FILE)


def raw(path: Path) -> Data:
    data: Data = json.loads(path.read_text(encoding="utf-8"))
    return data


def dataset_of(data: object) -> SquadDataset:
    return SquadDataset.model_validate_json(json.dumps(data, ensure_ascii=False))


def judged(fixture: Fixture) -> dict[str, list[tuple[str, list[tuple[int, str]]]]]:
    """query ID -> [(chunk ID, [(span start, span text)])]."""
    return {
        q.query_id: [(j.chunk_id, [(s.start, s.text) for s in j.spans]) for j in q.judgments] for q in fixture.queries
    }


def assert_spans_verbatim(fixture: Fixture) -> None:
    chunks = {c.chunk_id: c.text for c in fixture.chunks}
    for query in fixture.queries:
        for judgment in query.judgments:
            assert judgment.grade == 3
            for span in judgment.spans:
                assert chunks[judgment.chunk_id][span.start : span.end] == span.text


# --- reading ------------------------------------------------------------------------------------------------------


def test_read_tiny_files(en: SquadDataset, zh: SquadDataset, v2: SquadDataset) -> None:
    assert en.version == "1.1" and v2.version == "v2.0"
    assert [len(a.paragraphs) for a in en.data] == [3, 2] == [len(a.paragraphs) for a in zh.data]
    ids = [[q.id for p in a.paragraphs for q in p.qas] for a in en.data]
    assert ids == [["lh-1", "lh-2", "lh-3", "lh-4", "lh-5", "lh/6", "lh-7", "lh-8"], ["tg-1", "tg-2", "tg-3", "tg-4"]]
    assert ids == [[q.id for p in a.paragraphs for q in p.qas] for a in zh.data]
    impossible = [q.id for a in v2.data for p in a.paragraphs for q in p.qas if q.is_impossible]
    assert impossible == ["nm-2", "nm-4", "rf-3"]
    assert v2.data[0].paragraphs[0].qas[1].plausible_answers[0].text == "6 p.m."


def _drop(key: str) -> Callable[[Data], None]:
    def mutate(data: Data) -> None:
        del data["data"][0]["paragraphs"][1]["qas"][0][key]

    return mutate


def _set_answer(key: str, value: object) -> Callable[[Data], None]:
    def mutate(data: Data) -> None:
        data["data"][0]["paragraphs"][1]["qas"][0]["answers"][0][key] = value

    return mutate


def _set_title(data: Data) -> None:
    data["data"][1]["title"] = 7


def _unknown_field(data: Data) -> None:
    data["data"][1]["paragraphs"][0]["extra"] = 1


def _duplicate_id(data: Data) -> None:
    data["data"][1]["paragraphs"][0]["qas"][0]["id"] = "lh-1"


def _impossible_with_answers(data: Data) -> None:
    data["data"][0]["paragraphs"][1]["qas"][0]["is_impossible"] = True


def _no_answers(data: Data) -> None:
    data["data"][0]["paragraphs"][1]["qas"][0]["answers"] = []


def _no_data(data: Data) -> None:
    del data["data"]


LH4 = "article 0 ('Harbor_Lighthouse'), paragraph 1, question 'lh-4'"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_drop("answers"), f"{LH4}: field 'answers': Field required"),
        (_drop("question"), f"{LH4}: field 'question': Field required"),
        (_set_answer("answer_start", "12"), f"{LH4}: field 'answers[0].answer_start': Input should be a valid integer"),
        (_set_answer("answer_start", 1.5), f"{LH4}: field 'answers[0].answer_start': Input should be a valid integer"),
        (_set_answer("answer_start", True), f"{LH4}: field 'answers[0].answer_start': Input should be a valid integer"),
        (_set_answer("answer_start", -1), f"{LH4}: field 'answers[0].answer_start': Input should be greater than"),
        (_set_answer("text", ["x"]), f"{LH4}: field 'answers[0].text': Input should be a valid string"),
        (_set_answer("text", " "), f"{LH4}: field 'answers[0].text': must not be blank"),
        (
            _set_answer("answer_start", 47),
            f"{LH4}: field 'answers[0].answer_start': text 'two rooms and a garden' is not at offset 47",
        ),
        (_set_title, "article 1: field 'title': Input should be a valid string"),
        (_unknown_field, "article 1 ('Tea_Garden'), paragraph 0: field 'extra': Extra inputs are not permitted"),
        (
            _duplicate_id,
            "article 1 ('Tea_Garden'), paragraph 0, question 'lh-1': field 'id': already used by "
            "article 0 ('Harbor_Lighthouse'), paragraph 0",
        ),
        (_impossible_with_answers, f"{LH4}: field 'answers': must be empty when is_impossible is true"),
        (_no_answers, f"{LH4}: field 'answers': must not be empty"),
        (_no_data, "field 'data': Field required"),
    ],
)
def test_malformed_input_names_item_and_field(tmp_path: Path, mutate: Callable[[Data], None], expected: str) -> None:
    data = raw(EN_FILE)
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SquadFormatError) as error:
        read_squad(path)
    assert expected in str(error.value)
    assert str(path) in str(error.value)
    assert len(error.value.problems) == 1


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"version": "1.1", "data": [', "file is not JSON"),
        (b"[]", "top level: must be a JSON object with a 'data' list, not list"),
        (b'"data"', "top level: must be a JSON object with a 'data' list, not str"),
        (b'{"data": {}}', "field 'data': Input should be a valid array"),
        (b'{"data": [], "version": 1.1}', "field 'version': Input should be a valid string"),
        ('{"data": [], "version": "é"}'.encode("latin-1"), "cannot be read as UTF-8 text"),
        (b'{"data": [{"title": "T", "paragraphs": [{"context": "\\ud800", "qas": []}]}]}', "Invalid JSON"),
        (b"[" * 100_000, "file is not JSON"),
    ],
)
def test_unreadable_files_raise_format_error(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(SquadFormatError, match="invalid SQuAD data") as error:
        read_squad(path)
    assert expected in str(error.value)


def test_missing_file_raises_format_error(tmp_path: Path) -> None:
    with pytest.raises(SquadFormatError, match="file not found"):
        read_squad(tmp_path / "absent.json")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
SQUAD_LIKE = st.fixed_dictionaries(
    {
        "data": st.lists(
            st.fixed_dictionaries(
                {
                    "title": JSON_VALUES,
                    "paragraphs": st.lists(
                        st.fixed_dictionaries({"context": st.text(max_size=20), "qas": JSON_VALUES}), max_size=2
                    ),
                }
            ),
            max_size=2,
        )
    }
)


@settings(max_examples=150, deadline=None)
@given(
    content=st.binary(max_size=64)
    | JSON_VALUES.map(json.dumps).map(str.encode)
    | SQUAD_LIKE.map(json.dumps).map(str.encode)
)
def test_read_squad_raises_only_format_errors(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "input.json"
        path.write_bytes(content)
        try:
            dataset = read_squad(path)
        except SquadFormatError as error:
            assert error.problems and all(isinstance(p, str) and p for p in error.problems)
        else:
            assert isinstance(dataset, SquadDataset)


# --- sentences and chunks -----------------------------------------------------------------------------------------


def sentences_of(text: str, language: Language) -> list[str]:
    return [text[a:b] for a, b in split_sentences(text, language)]


def test_english_sentence_rules() -> None:
    text = (
        "Dr. Lin moved to the U.S. in 1990. It is 3.5 m tall, i.e. short! Is it? "
        '(Yes.) "Fine." Brown v. Board was decided. No. 5 won.\n\nDone'
    )
    assert sentences_of(text, "en") == [
        "Dr. Lin moved to the U.S. in 1990.",
        "It is 3.5 m tall, i.e. short!",
        "Is it?",
        "(Yes.)",
        '"Fine."',
        "Brown v. Board was decided.",
        "No. 5 won.",
        "Done",
    ]
    assert sentences_of("Pi is 3.14159.The end. ", "en") == ["Pi is 3.14159.The end."]


def test_initials_and_long_words() -> None:
    assert sentences_of("Written by J. R. Smith. Next one.", "en") == ["Written by J. R. Smith.", "Next one."]
    long_word = "x" * 30 + "U.S."  # too long to be an abbreviation
    assert sentences_of(f"{long_word} Next.", "en") == [long_word, "Next."]


@pytest.mark.parametrize("text", ["." * 20_000 + "x", "a" * 20_000 + "!x", "3.5" * 7_000, "。" * 20_000 + "好"])
def test_sentence_splitting_of_long_runs(text: str) -> None:
    # A backtracking splitter took seconds on these runs; speed is not asserted (no timed tests), the result is:
    # the sentences always re-assemble into the text.
    for language in ("en", "zh"):
        pieces = split_sentences(text, language)
        assert pieces and "".join(text[start:end] for start, end in pieces).replace(" ", "") == text.replace(" ", "")


def test_chinese_sentence_rules() -> None:
    text = "你好。这是3.5米！真的吗？“是的。”分号；不分句。尾巴"
    assert sentences_of(text, "zh") == ["你好。", "这是3.5米！", "真的吗？", "“是的。”", "分号；不分句。", "尾巴"]


def test_paragraph_chunk_strips_whitespace() -> None:
    assert chunk_ranges("  a b. c d.\n", "en", "paragraph", 3) == ((2, 11),)


def test_crossing_answer_keeps_sentences_together() -> None:
    text = "One. Two. Three. Four. Five."
    crossing = (text.index("Two"), text.index("Three") + 5)  # "Two. Three"
    texts = [text[a:b] for a, b in chunk_ranges(text, "en", "sentence", 1, [crossing])]
    assert texts == ["One.", "Two. Three.", "Four.", "Five."]
    texts = [text[a:b] for a, b in chunk_ranges(text, "en", "sentence", 2, [crossing])]
    assert texts == ["One.", "Two. Three.", "Four. Five."]
    three = (text.index("One"), text.index("Three") + 3)  # "One. Two. Thr": touches sentences 0..2
    texts = [text[a:b] for a, b in chunk_ranges(text, "en", "sentence", 2, [three])]
    assert texts == ["One. Two. Three.", "Four. Five."]  # the first chunk exceeds max_sentences


# --- monolingual import -------------------------------------------------------------------------------------------


def test_paragraph_import_ids_titles_texts_and_spans(en: SquadDataset) -> None:
    fixture = import_squad(en, options())
    assert [(d.doc_id, d.language, d.title) for d in fixture.documents] == [
        ("en-a000", "en", "Harbor Lighthouse"),
        ("en-a001", "en", "Tea Garden"),
    ]
    assert [(c.chunk_id, c.doc_id) for c in fixture.chunks] == [
        ("en-a000-p00", "en-a000"),
        ("en-a000-p01", "en-a000"),
        ("en-a000-p02", "en-a000"),
    ]
    assert fixture.chunks[1].text == (
        "Keepers lived in a small cottage. The cottage had two rooms and a garden. "
        "Supplies arrived by boat every week. The last keeper left in 1962."
    )
    assert judged(fixture) == {
        "en-lh-1": [("en-a000-p00", [(32, "in 1871"), (35, "1871")])],  # the duplicate answer appears once
        "en-lh-2": [("en-a000-p00", [(57, "3.5 metres")])],
        "en-lh-3": [("en-a000-p00", [(93, "Dr. Lin")])],
        "en-lh-4": [("en-a000-p01", [(50, "two rooms and a garden")])],  # context offset 52, minus 2 stripped spaces
        "en-lh-5": [("en-a000-p01", [(17, "a small cottage. The cottage had two rooms")])],
        "en-lh_6": [("en-a000-p01", [(135, "1962")])],
        "en-lh-7": [("en-a000-p02", [(29, "on weekends")])],
        "en-lh-8": [("en-a000-p02", [(32, "weekends"), (68, "clear days")])],
        "en-tg-1": [],
        "en-tg-2": [],
        "en-tg-3": [],
        "en-tg-4": [],
    }
    assert all(q.language == "en" for q in fixture.queries)
    assert fixture.queries[0].text == "When was the harbor lighthouse built?"
    assert [q.tags for q in fixture.queries] == [()] * 8 + [("held_out",)] * 4
    assert (fixture.fixture_id, fixture.fixture_version, fixture.license) == ("tiny-squad", "1.0.0", "CC0-1.0")
    assert fixture.attribution == "Hand-written SQuAD-format test data."
    assert_spans_verbatim(fixture)


def test_query_id_mapping() -> None:
    assert query_id("en", "56beb4343aeaaa14008c925b") == "en-56beb4343aeaaa14008c925b"
    assert query_id("zh", "a/b c") == "zh-a_b_c"
    # 'é' is a letter: the ID keeps it apart with 8 hex digits of sha256("/ ?é")
    assert query_id("zh", "a/b c?é:d.e-f_g") == "zh-a_b_c__:d.e-f_g-37d53da0"


@pytest.mark.parametrize(
    ("max_sentences", "p00", "p01", "p02"),
    [
        (
            1,
            ["The harbor lighthouse was built in 1871.", "Its lamp stands 3.5 metres above the gallery floor.",
             "Dr. Lin restored the lens in 1990."],
            ["Keepers lived in a small cottage. The cottage had two rooms and a garden.",
             "Supplies arrived by boat every week.", "The last keeper left in 1962."],
            ["Visitors may climb the tower on weekends!", "Is the view good?",
             "Yes, on clear days you can see the islands."],
        ),
        (
            2,
            ["The harbor lighthouse was built in 1871. Its lamp stands 3.5 metres above the gallery floor.",
             "Dr. Lin restored the lens in 1990."],
            ["Keepers lived in a small cottage. The cottage had two rooms and a garden.",
             "Supplies arrived by boat every week. The last keeper left in 1962."],
            ["Visitors may climb the tower on weekends! Is the view good?",
             "Yes, on clear days you can see the islands."],
        ),
        (
            3,
            ["The harbor lighthouse was built in 1871. Its lamp stands 3.5 metres above the gallery floor. "
             "Dr. Lin restored the lens in 1990."],
            ["Keepers lived in a small cottage. The cottage had two rooms and a garden. "
             "Supplies arrived by boat every week.", "The last keeper left in 1962."],
            ["Visitors may climb the tower on weekends! Is the view good? "
             "Yes, on clear days you can see the islands."],
        ),
    ],
)  # fmt: skip
def test_sentence_chunks(en: SquadDataset, max_sentences: int, p00: list[str], p01: list[str], p02: list[str]) -> None:
    fixture = import_squad(en, options(chunking="sentence", max_sentences=max_sentences))
    expected = [
        (f"en-a000-p{p:02d}-s{k:02d}", text) for p, texts in enumerate([p00, p01, p02]) for k, text in enumerate(texts)
    ]
    assert [(c.chunk_id, c.text) for c in fixture.chunks] == expected
    assert_spans_verbatim(fixture)


def test_sentence_judgments(en: SquadDataset) -> None:
    fixture = import_squad(en, options(chunking="sentence", max_sentences=1))
    found = judged(fixture)
    assert found["en-lh-1"] == [("en-a000-p00-s00", [(32, "in 1871"), (35, "1871")])]
    assert found["en-lh-2"] == [("en-a000-p00-s01", [(16, "3.5 metres")])]
    assert found["en-lh-3"] == [("en-a000-p00-s02", [(0, "Dr. Lin")])]
    assert found["en-lh-5"] == [("en-a000-p01-s00", [(17, "a small cottage. The cottage had two rooms")])]
    assert found["en-lh_6"] == [("en-a000-p01-s02", [(24, "1962")])]
    # two answers in two chunks: one grade-3 judgment each
    assert found["en-lh-8"] == [("en-a000-p02-s00", [(32, "weekends")]), ("en-a000-p02-s02", [(8, "clear days")])]


def test_chinese_sentence_import(zh: SquadDataset) -> None:
    fixture = import_squad(zh, options(language="zh", chunking="sentence", max_sentences=1))
    assert [d.title for d in fixture.documents] == ["港口灯塔", "茶园"]
    assert [c.text for c in fixture.chunks[:5]] == [
        "港口灯塔建于1871年。",
        "灯塔的灯高出观景台地面3.5米。",
        "林博士在1990年修复了透镜。",
        "看守人住在一间小屋里。小屋有两个房间和一个花园。",
        "补给每周由船运来。",
    ]
    found = judged(fixture)
    assert found["zh-lh-1"] == [("zh-a000-p00-s00", [(4, "建于1871年"), (6, "1871年")])]
    assert found["zh-lh-2"] == [("zh-a000-p00-s01", [(11, "3.5米")])]
    assert found["zh-lh-5"] == [("zh-a000-p01-s00", [(5, "一间小屋里。小屋有两个房间")])]
    assert found["zh-lh-8"] == [("zh-a000-p02-s00", [(5, "周末")]), ("zh-a000-p02-s02", [(2, "晴天")])]
    assert all(q.language == "zh" for q in fixture.queries)
    assert_spans_verbatim(fixture)


def test_max_articles(en: SquadDataset) -> None:
    fixture = import_squad(en, options(max_articles=1, held_out_fraction=0.34))  # round(0.34 * 3) = 1
    assert [d.doc_id for d in fixture.documents] == ["en-a000"]
    assert len(fixture.queries) == 8


# --- held out -----------------------------------------------------------------------------------------------------


def test_held_out_is_deterministic(en: SquadDataset) -> None:
    first = fixture_json(import_squad(en, options(chunking="sentence", seed=0)))
    assert fixture_json(import_squad(en, options(chunking="sentence", seed=0))) == first
    assert fixture_json(import_squad(en, options(chunking="sentence", seed=1))) != first


@pytest.mark.parametrize(
    ("seed", "removed", "held_out"),
    [
        (0, ["en-a001-p00", "en-a001-p01"], ["en-tg-1", "en-tg-2", "en-tg-3", "en-tg-4"]),
        (1, ["en-a000-p01", "en-a000-p02"], ["en-lh-4", "en-lh-5", "en-lh_6", "en-lh-7", "en-lh-8"]),
    ],
)
@pytest.mark.parametrize("chunking", ["paragraph", "sentence"])
def test_held_out_questions_are_those_of_removed_paragraphs(
    en: SquadDataset, seed: int, removed: list[str], held_out: list[str], chunking: str
) -> None:
    assert sorted(np.random.default_rng(seed).choice(5, size=2, replace=False).tolist()) == (
        [3, 4] if seed == 0 else [1, 2]
    )
    fixture = import_squad(en, options(seed=seed, chunking=chunking))
    paragraphs = {c.chunk_id[:11] for c in fixture.chunks}
    assert paragraphs == {"en-a000-p00", "en-a000-p01", "en-a000-p02", "en-a001-p00", "en-a001-p01"} - set(removed)
    assert [q.query_id for q in fixture.queries if "held_out" in q.tags] == held_out
    assert [q.query_id for q in fixture.queries if not q.answerable] == held_out
    assert len(fixture.documents) == 2  # a document keeps its place when all its paragraphs are held out


def test_no_answer_query_required(en: SquadDataset) -> None:
    with pytest.raises(SquadFormatError, match=r"no no-answer question.*held_out_fraction > 0"):
        import_squad(en, options(held_out_fraction=0.0))


def test_everything_held_out_is_refused(en: SquadDataset) -> None:
    with pytest.raises(SquadFormatError, match=r"no paragraphs left.*\n.*no answerable question"):
        import_squad(en, options(held_out_fraction=0.9, max_articles=1))  # round(0.9 * 3) = 3 of 3 paragraphs


def test_v2_impossible_questions_are_no_answer(v2: SquadDataset) -> None:
    fixture = import_squad(v2, options(held_out_fraction=0.0))
    assert judged(fixture) == {
        "en-nm-1": [("en-a000-p00", [(23, "at 6 p.m. on Fridays")])],
        "en-nm-2": [],
        "en-nm-3": [("en-a000-p01", [(43, "near the east gate")])],
        "en-nm-4": [],
        "en-rf-1": [("en-a001-p00", [(24, "120 passengers")])],
        "en-rf-2": [("en-a001-p01", [(17, "at the pier")])],
        "en-rf-3": [],
    }
    assert all(q.tags == () for q in fixture.queries)
    assert [
        c.text for c in import_squad(v2, options(held_out_fraction=0.0, chunking="sentence", max_sentences=1)).chunks
    ][:2] == [
        "The night market opens at 6 p.m. on Fridays.",
        "About 40 stalls sell food and crafts.",
    ]


# --- cross-lingual ------------------------------------------------------------------------------------------------


def test_cross_lingual_zh_questions_en_corpus(en: SquadDataset, zh: SquadDataset) -> None:
    fixture = import_cross_lingual(zh, en, "zh", options(language="en"))
    assert [d.doc_id for d in fixture.documents] == ["en-a000", "en-a001"]
    assert {fixture.chunk_language(c.chunk_id) for c in fixture.chunks} == {"en"}
    assert {q.language for q in fixture.queries} == {"zh"}
    assert fixture.queries[1].query_id == "zh-lh-2" and fixture.queries[1].text == "灯高出观景台地面多少？"
    found = judged(fixture)
    assert found["zh-lh-2"] == [("en-a000-p00", [(57, "3.5 metres")])]  # the span comes from the English corpus
    assert found["zh-lh_6"] == [("en-a000-p01", [(135, "1962")])]
    assert [q.tags for q in fixture.queries] == [("cross_language",)] * 8 + [("cross_language", "held_out")] * 4
    assert_spans_verbatim(fixture)


def test_cross_lingual_en_questions_zh_corpus(en: SquadDataset, zh: SquadDataset) -> None:
    fixture = import_cross_lingual(en, zh, "en", options(language="zh", chunking="sentence", max_sentences=1, seed=1))
    assert {fixture.chunk_language(c.chunk_id) for c in fixture.chunks} == {"zh"}
    assert {q.language for q in fixture.queries} == {"en"}
    found = judged(fixture)
    assert found["en-lh-1"] == [("zh-a000-p00-s00", [(4, "建于1871年"), (6, "1871年")])]
    assert found["en-tg-1"] == [("zh-a001-p00-s00", [(8, "12.5公顷")])]
    assert [q.query_id for q in fixture.queries if "held_out" in q.tags] == [
        "en-lh-4", "en-lh-5", "en-lh_6", "en-lh-7", "en-lh-8"
    ]  # fmt: skip
    assert_spans_verbatim(fixture)


def test_cross_lingual_missing_question_id(en: SquadDataset) -> None:
    data = raw(ZH_FILE)
    del data["data"][1]["paragraphs"][1]["qas"][0]  # tg-3
    with pytest.raises(SquadFormatError) as error:
        import_cross_lingual(en, dataset_of(data), "en", options(language="zh"))
    assert "article 1 ('Tea_Garden'), paragraph 1, question 'tg-3': field 'id': question ID not found" in str(
        error.value
    )


def test_cross_lingual_needs_two_languages(en: SquadDataset) -> None:
    with pytest.raises(ValueError, match="equals the corpus language"):
        import_cross_lingual(en, en, "en", options())


# --- ID collisions and privacy ------------------------------------------------------------------------------------


def test_colliding_query_ids(tmp_path: Path) -> None:
    data = raw(EN_FILE)
    data["data"][0]["paragraphs"][1]["qas"][0]["id"] = "lh_6"  # lh/6 also maps to en-lh_6
    with pytest.raises(
        SquadFormatError,
        match=r"question 'lh/6': field 'id': 'lh/6' becomes query ID 'en-lh_6' like question 'lh_6'",
    ):
        import_squad(dataset_of(data), options())


def _private_data() -> Data:
    data = raw(EN_FILE)
    paragraph = data["data"][0]["paragraphs"][0]
    paragraph["context"] += " Logs are kept in /var/log/lamp."
    return data


def test_private_text_is_a_fixture_error() -> None:
    dataset = dataset_of(_private_data())
    with pytest.raises(FixtureError, match=r"chunk 'en-a000-p00-s01': field 'text': looks like a filesystem path"):
        import_squad(dataset, options(chunking="sentence", max_sentences=2))
    assert find_private_paragraphs(dataset, options()) == {"en-a000-p00": "a filesystem path"}


def test_private_paragraphs_can_be_held_out() -> None:
    fixture = import_squad(dataset_of(_private_data()), options(private_paragraphs="hold_out"))
    assert [c.chunk_id for c in fixture.chunks] == ["en-a000-p01", "en-a000-p02"]
    held_out = [q.query_id for q in fixture.queries if "held_out" in q.tags]
    assert held_out == ["en-lh-1", "en-lh-2", "en-lh-3", "en-tg-1", "en-tg-2", "en-tg-3", "en-tg-4"]


# --- writing and determinism --------------------------------------------------------------------------------------


def test_write_fixture_round_trips(tmp_path: Path, en: SquadDataset, zh: SquadDataset) -> None:
    fixture = import_cross_lingual(en, zh, "en", options(language="zh", chunking="sentence"))
    path = write_fixture(fixture, tmp_path / "xq")
    assert path == tmp_path / "xq" / "fixture.json"
    assert load_fixture(tmp_path / "xq").fixture == fixture
    text = path.read_text(encoding="utf-8")
    assert text.startswith('{\n "fixture_id": "tiny-squad",\n "fixture_version": "1.0.0",')
    assert "港口灯塔" in text and text.endswith("}\n")
    assert path.read_bytes() == fixture_json(fixture)


_SCRIPT = """
import sys
from pathlib import Path
from evalkit.data.fixture import write_fixture
from evalkit.data.squad import SquadImportOptions, import_cross_lingual, import_squad, read_squad
data = Path(sys.argv[1])
out = Path(sys.argv[2])
en, zh = read_squad(data / "tiny.en.json"), read_squad(data / "tiny.zh.json")
base = dict(license="CC0-1.0", attribution="Hand-written test data.", held_out_fraction=0.4, seed=3)
mono = SquadImportOptions(fixture_id="a", language="zh", chunking="sentence", **base)
cross = SquadImportOptions(fixture_id="b", language="en", **base)
write_fixture(import_squad(zh, mono), out / "a")
write_fixture(import_cross_lingual(zh, en, "zh", cross), out / "b")
"""


def test_output_is_byte_identical_across_hash_seeds(tmp_path: Path) -> None:
    outputs = []
    for seed in ("0", "1"):
        out = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", _SCRIPT, str(DATA), str(out)], check=True, env=env, cwd=ROOT)
        outputs.append([(out / name / "fixture.json").read_bytes() for name in ("a", "b")])
    assert outputs[0] == outputs[1]
    assert all(len(data) > 1000 for data in outputs[0])


# --- properties ---------------------------------------------------------------------------------------------------

WORDS = st.sampled_from(["lamp", "tower", "3.5", "12.25", "keeper", "x", "sea", "A1", "to", "in"])
EN_SENTENCE = st.builds(
    lambda words, end: " ".join(words) + end, st.lists(WORDS, min_size=1, max_size=6), st.sampled_from([".", "!", "?"])
)
ZH_SENTENCE = st.builds(
    lambda chars, end: chars + end,
    st.text(alphabet="灯塔海岸看守人小屋花园3.5年", min_size=1, max_size=8),
    st.sampled_from(["。", "！", "？"]),
)
SEPARATORS = st.sampled_from([" ", "  ", "\n", " \n "])


@st.composite
def paragraphs(draw: st.DrawFn) -> tuple[Language, list[str], str]:
    language: Language = draw(st.sampled_from(["en", "zh"]))
    sentences = draw(st.lists(EN_SENTENCE if language == "en" else ZH_SENTENCE, min_size=1, max_size=8))
    if language == "en":
        separators = draw(st.lists(SEPARATORS, min_size=len(sentences) + 1, max_size=len(sentences) + 1))
        text = separators[0] + "".join(s + sep for s, sep in zip(sentences, separators[1:], strict=True))
    else:
        text = "".join(sentences)
    return language, sentences, text


@settings(max_examples=200, deadline=None)
@given(paragraphs())
def test_split_sentences_recovers_sentences(paragraph: tuple[Language, list[str], str]) -> None:
    language, sentences, text = paragraph
    assert sentences_of(text, language) == sentences


@st.composite
def squad_paragraphs(draw: st.DrawFn) -> tuple[Language, str, list[list[tuple[int, str]]], int]:
    language, _, context = draw(paragraphs())
    content = [i for i, ch in enumerate(context) if not ch.isspace()]
    questions: list[list[tuple[int, str]]] = []
    for _ in range(draw(st.integers(1, 4))):
        answers = []
        for _ in range(draw(st.integers(1, 3))):
            start = draw(st.sampled_from(content))
            end = draw(st.integers(start + 1, len(context)))
            answers.append((start, context[start:end]))
        questions.append(answers)
    return language, context, questions, draw(st.integers(1, 4))


def _chunk_offsets(context: str, texts: list[str]) -> list[int]:
    """Where each chunk lies in the context: chunks are in order and only whitespace lies between them."""
    offsets, position = [], 0
    for text in texts:
        start = context.find(text, position)
        assert start >= 0 and not context[position:start].strip()
        offsets.append(start)
        position = start + len(text)
    assert not context[position:].strip()
    return offsets


@settings(max_examples=150, deadline=None)
@given(squad_paragraphs())
def test_sentence_chunking_keeps_answers_in_judged_chunks(
    case: tuple[Language, str, list[list[tuple[int, str]]], int],
) -> None:
    language, context, questions, max_sentences = case
    qas: list[Data] = [
        {"id": f"q{i}", "question": "q?", "answers": [{"answer_start": s, "text": t} for s, t in answers]}
        for i, answers in enumerate(questions)
    ]
    qas.append({"id": "none", "question": "q?", "answers": [], "is_impossible": True})
    dataset = dataset_of({"data": [{"title": "T", "paragraphs": [{"context": context, "qas": qas}]}]})
    fixture = import_squad(dataset, options(language=language, chunking="sentence", max_sentences=max_sentences))
    texts = [c.text for c in fixture.chunks]
    offsets = _chunk_offsets(context, texts)
    ranges = [(o, o + len(t)) for o, t in zip(offsets, texts, strict=True)]
    sentences = split_sentences(context, language)
    crossing_boundaries: set[int] = set()
    for index, answers in enumerate(questions):
        expected: dict[int, set[tuple[int, str]]] = {}
        for start, text in answers:
            a = start + len(text) - len(text.lstrip())
            b = start + len(text.rstrip())
            touched = [k for k, (s, e) in enumerate(sentences) if s < b and a < e]
            crossing_boundaries.update(range(touched[0], touched[-1]))
            holders = [k for k, (s, e) in enumerate(ranges) if s <= a and b <= e]
            assert len(holders) == 1  # the answer crosses no chunk boundary
            expected.setdefault(holders[0], set()).add((a - ranges[holders[0]][0], context[a:b]))
        query = fixture.queries[index]
        assert [(j.chunk_id, {(s.start, s.text) for s in j.spans}) for j in query.judgments] == [
            (fixture.chunks[k].chunk_id, expected[k]) for k in sorted(expected)
        ]
    assert_spans_verbatim(fixture)
    for s, e in ranges:  # 1..max_sentences sentences, more only when an answer joins them
        inside = [k for k, (a, b) in enumerate(sentences) if s <= a and b <= e]
        assert inside and (len(inside) <= max_sentences or any(k in crossing_boundaries for k in inside[:-1]))


# --- real data (XQuAD) --------------------------------------------------------------------------------------------

needs_xquad = pytest.mark.skipif(
    not XQUAD.is_dir(), reason=f"XQuAD data not found at {XQUAD} (real-data tests need the shared data folder)"
)
# Units written with a space before the slash (8,646平方英里 /年, 110英里 /小时) once read as paths; the path rule
# now needs two segments, so no XQuAD paragraph trips the privacy rules.
XQUAD_PRIVATE: dict[str, str] = {}


@pytest.fixture(scope="module")
def xquad() -> dict[str, SquadDataset]:
    if not XQUAD.is_dir():
        pytest.skip(f"XQuAD data not found at {XQUAD}")
    return {lang: read_squad(XQUAD / f"xquad.{lang}.json") for lang in ("en", "zh")}


def xquad_options(language: Language, chunking: Chunking) -> SquadImportOptions:
    return SquadImportOptions(
        fixture_id=f"xquad-{language}-{chunking}",
        language=language,
        chunking=chunking,
        held_out_fraction=0.1,
        seed=0,
        license="CC-BY-SA-4.0",
        attribution="XQuAD (Artetxe, Ruder and Yogatama, 2020), CC BY-SA 4.0.",
    )


@needs_xquad
def test_xquad_shape(xquad: dict[str, SquadDataset]) -> None:
    for dataset in xquad.values():
        assert len(dataset.data) == 48
        assert sum(len(a.paragraphs) for a in dataset.data) == 240
        assert sum(len(p.qas) for a in dataset.data for p in a.paragraphs) == 1190
    assert find_private_paragraphs(xquad["en"], xquad_options("en", "paragraph")) == {}
    assert find_private_paragraphs(xquad["zh"], xquad_options("zh", "sentence")) == XQUAD_PRIVATE


@needs_xquad
def test_xquad_units_with_a_spaced_slash_are_not_paths(xquad: dict[str, SquadDataset]) -> None:
    fixture = import_squad(xquad["zh"], xquad_options("zh", "paragraph"))
    texts = {c.chunk_id: c.text for c in fixture.chunks}
    assert "平方英里 /年" in texts["zh-a016-p02"]
    assert "英里 /小时" in texts["zh-a032-p04"]


@needs_xquad
@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("chunking", ["paragraph", "sentence"])
def test_xquad_monolingual(xquad: dict[str, SquadDataset], language: Language, chunking: Chunking) -> None:
    fixture = import_squad(xquad[language], xquad_options(language, chunking))
    removed = set(np.random.default_rng(0).choice(240, size=24, replace=False).tolist())
    paragraph_ids = [
        f"{language}-a{a:03d}-p{p:02d}"
        for a, art in enumerate(xquad[language].data)
        for p in range(len(art.paragraphs))
    ]
    removed_ids = {paragraph_ids[i] for i in removed} | (set(XQUAD_PRIVATE) if language == "zh" else set())
    kept = {c.chunk_id[:11] for c in fixture.chunks}
    assert kept == set(paragraph_ids) - removed_ids
    assert len(fixture.documents) == 48 and len(fixture.queries) == 1190
    removed_questions = sum(
        len(p.qas)
        for a, art in enumerate(xquad[language].data)
        for p_index, p in enumerate(art.paragraphs)
        if f"{language}-a{a:03d}-p{p_index:02d}" in removed_ids
    )
    assert sum(not q.answerable for q in fixture.queries) == removed_questions
    assert sum("held_out" in q.tags for q in fixture.queries) == removed_questions
    assert all(q.language == language for q in fixture.queries)
    assert_spans_verbatim(fixture)


@needs_xquad
@pytest.mark.parametrize(("questions", "corpus"), [("zh", "en"), ("en", "zh")])
def test_xquad_cross_lingual(xquad: dict[str, SquadDataset], questions: Language, corpus: Language) -> None:
    fixture = import_cross_lingual(xquad[questions], xquad[corpus], questions, xquad_options(corpus, "sentence"))
    assert len(fixture.queries) == 1190
    assert {q.language for q in fixture.queries} == {questions}
    assert {fixture.chunk_language(c.chunk_id) for c in fixture.chunks} == {corpus}
    assert all("cross_language" in q.tags for q in fixture.queries)
    assert sum(q.answerable for q in fixture.queries) > 1000
    assert_spans_verbatim(fixture)
