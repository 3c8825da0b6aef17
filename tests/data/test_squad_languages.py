"""The note on a SQuAD file whose questions or contexts read as the other language than the import says."""

from __future__ import annotations

import json
from typing import Any

from evalkit.data.squad import SquadDataset
from evalkit.data.squad.languages import SAMPLE_SIZE, evenly_spaced, language_note


def dataset(contexts: list[str], questions: list[str]) -> SquadDataset:
    """One article; paragraph i holds context i and the questions i, i + n, ... (n contexts), each answered by
    the context's first character."""
    paragraphs: list[dict[str, Any]] = [{"context": c, "qas": []} for c in contexts]
    for index, text in enumerate(questions):
        paragraph = paragraphs[index % len(contexts)]
        answer = {"text": paragraph["context"][0], "answer_start": 0}
        paragraph["qas"].append({"id": f"q{index}", "question": text, "answers": [answer]})
    data = {"data": [{"title": "T", "paragraphs": paragraphs}]}
    return SquadDataset.model_validate_json(json.dumps(data, ensure_ascii=False))


EN = "The Great Wall lies in the north of China."
ZH = "长城位于中国北方。"


def test_evenly_spaced_is_deterministic_and_spans_the_list() -> None:
    assert evenly_spaced(list(range(10)), 4) == [0, 2, 5, 7]
    assert evenly_spaced([1, 2], 4) == [1, 2]
    assert len(evenly_spaced(list(range(1_000)))) == SAMPLE_SIZE


def test_english_file_imported_as_chinese_gets_a_note_with_counts_and_flag() -> None:
    english = dataset([EN, EN, ZH], ["Where is the wall?", "Who built it?", "长城在哪里？"])
    assert language_note(english, "zh", "--language") == (
        "2 of 3 questions and 2 of 3 contexts read as en, not zh: is --language zh right? (the import goes on)"
    )
    assert language_note(english, "en", "--language") is None


def test_only_the_named_kinds_are_checked_and_half_is_not_most() -> None:
    questions_in_chinese = dataset([EN, EN], ["长城在哪里？", "谁建造了长城？"])
    assert language_note(questions_in_chinese, "en", "--language", ("contexts",)) is None
    note = language_note(questions_in_chinese, "en", "--question-language", ("questions",))
    assert note == "2 of 2 questions read as zh, not en: is --question-language en right? (the import goes on)"
    half = dataset([EN, ZH], ["Where is the wall?", "长城在哪里？"])
    assert language_note(half, "en", "--language") is None


def test_a_long_file_is_sampled() -> None:
    english = dataset([EN] * 300, ["Where is the wall?"] * 450)
    note = language_note(english, "zh", "--language")
    assert note is not None
    assert note.startswith("200 of 200 questions (sampled from 450) and 200 of 200 contexts (sampled from 300) read")
