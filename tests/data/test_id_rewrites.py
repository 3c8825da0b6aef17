"""Source IDs that a fixture ID cannot hold: rewritten alike by every importer (SQuAD, BEIR, TREC), each rewrite
reported as ``id_rewritten`` or refused by the policy, and IDs that lose their letters kept apart by a hash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.assembly import replace_id_characters
from evalkit.data.beir import read_beir
from evalkit.data.collection import CollectionOptions
from evalkit.data.repairs import RepairLog, RepairPolicy
from evalkit.data.squad import SquadDataset, SquadFormatError, SquadImportOptions, import_squad

ANSWERS = [("长城位于中国北方。", "中国北方", 4), ("黄河发源于青海省。", "青海省", 5)]


def squad_with_ids(*ids: str) -> SquadDataset:
    """Two paragraphs (one is held out), the questions alternating between them."""
    paragraphs: list[dict[str, Any]] = [{"context": context, "qas": []} for context, _, _ in ANSWERS]
    for index, qid in enumerate(ids):
        _, text, start = ANSWERS[index % 2]
        question = {"id": qid, "question": "在哪里？", "answers": [{"text": text, "answer_start": start}]}
        paragraphs[index % 2]["qas"].append(question)
    data = {"version": "1.1", "data": [{"title": "T", "paragraphs": paragraphs}]}
    return SquadDataset.model_validate_json(json.dumps(data, ensure_ascii=False))


OPTIONS = SquadImportOptions(
    fixture_id="ids", language="zh", license="CC0-1.0", attribution="Test data.", held_out_fraction=0.5
)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("56beb4343aeaaa14008c925b", "56beb4343aeaaa14008c925b"),
        ("TRIAL_800_QUERY_0", "TRIAL_800_QUERY_0"),
        ("q 1\tx", "q_1_x"),  # only separators are lost: no suffix
        ("问题", "__-33a8618c"),  # sha256("问题") begins 33a8618c
        ("ａｂ", "__-8996e570"),
        ("zh-问题", "zh-__-33a8618c"),  # the suffix hashes the replaced characters only
    ],
)
def test_replace_id_characters(source: str, expected: str) -> None:
    assert replace_id_characters(source) == expected


def test_squad_id_rewrite_is_reported() -> None:
    log = RepairLog(RepairPolicy())
    fixture = import_squad(squad_with_ids("q 1\tx", "q2", "q3"), OPTIONS, log)
    assert [q.query_id for q in fixture.queries] == ["zh-q_1_x", "zh-q3", "zh-q2"]
    rewritten = log.repairs()["id_rewritten"]
    assert (rewritten.action, rewritten.count, rewritten.examples) == ("repair", 1, ("zh-q_1_x",))


def test_squad_id_rewrite_refused_by_the_policy() -> None:
    log = RepairLog(RepairPolicy.from_choices({"id_rewritten": "fail"}))
    with pytest.raises(SquadFormatError) as error:
        import_squad(squad_with_ids("q 1\tx", "q2", "q3"), OPTIONS, log)
    assert (
        "question 'q 1\\tx': field 'id': 'q 1\\tx' becomes 'zh-q_1_x' (refused as id_rewritten; "
        "--on-id-rewritten repair accepts it)" in str(error.value)
    )


def test_squad_ids_that_lose_their_letters_stay_apart() -> None:
    log = RepairLog(RepairPolicy())
    fixture = import_squad(squad_with_ids("ａｂ", "问题", "q3"), OPTIONS, log)
    assert sorted(q.query_id for q in fixture.queries) == ["zh-__-33a8618c", "zh-__-8996e570", "zh-q3"]
    assert log.count("id_rewritten") == 2


def test_squad_collision_names_both_source_ids_and_the_query_id() -> None:
    with pytest.raises(SquadFormatError) as error:
        import_squad(squad_with_ids("q 1", "q2", "q\t1"), OPTIONS, RepairLog(RepairPolicy()))
    assert "question 'q\\t1': field 'id': 'q\\t1' becomes query ID 'zh-q_1' like question 'q 1'" in str(error.value)


def test_beir_ids_that_lose_their_letters_stay_apart(tmp_path: Path) -> None:
    corpus = [{"_id": "d1", "title": "T", "text": "长城位于中国北方。"}]
    queries = [{"_id": "问题", "text": "长城在哪里？"}, {"_id": "ａｂ", "text": "黄河在哪里？"}]
    (tmp_path / "qrels").mkdir()
    for name, records in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        (tmp_path / name).write_text(lines, encoding="utf-8")
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n问题\td1\t1\n", encoding="utf-8")
    options = CollectionOptions(fixture_id="b", license="CC0-1.0", attribution="Test data.")
    log = RepairLog(RepairPolicy())
    fixture = read_beir(tmp_path, "test", options, log)
    assert [(q.query_id, q.answerable) for q in fixture.queries] == [("x__-33a8618c", True), ("x__-8996e570", False)]
    assert log.count("id_rewritten") == 2
