"""Source IDs that a fixture ID cannot hold: rewritten alike by every importer (SQuAD, BEIR, TREC), each rewrite
reported as ``id_rewritten`` or refused by the policy."""

from __future__ import annotations

import json
from typing import Any

import pytest

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


def test_squad_collision_names_both_source_ids_and_the_query_id() -> None:
    with pytest.raises(SquadFormatError) as error:
        import_squad(squad_with_ids("q 1", "q2", "q\t1"), OPTIONS, RepairLog(RepairPolicy()))
    assert "question 'q\\t1': field 'id': 'q\\t1' becomes query ID 'zh-q_1' like question 'q 1'" in str(error.value)
