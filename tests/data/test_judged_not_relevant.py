"""Grade 0, "judged, not relevant": the fixture holds it without spans, and nothing downstream counts it as relevant.

Three states stay apart: judged relevant (grade 1-3), judged not relevant (grade 0) and unjudged (a chunk no judgment
names). The fixture ``tests/fixtures/judged-not-relevant`` holds all three: an answerable query per language with
grade-0 judgments beside its relevant chunk, a no-answer query per language holding only grade-0 judgments, and an
English no-answer query with no judgment at all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.app.cli import main
from evalkit.data.fixture import FIXTURE_FILE, FixtureError, LoadedFixture, load_fixture, parse_fixture
from evalkit.data.judgments import fixture_judgments, judgments_sha256, qrels_judgments
from evalkit.data.qrels import read_qrels_file
from evalkit.data.runs import run_from_rankings
from evalkit.data.trec import qrels_text
from evalkit.measures.core import score_queries
from evalkit.measures.results import Failure, query_failures
from evalkit.reporting.build import build_report
from evalkit.reporting.report import SystemReport
from evalkit.retrieval.retriever import RunRetriever
from evalkit.runs.ablations import external_ablation
from evalkit.runs.evaluation import evaluate
from evalkit.runs.fixture_runs import fixture_qrels, score_fixture_runs, span_context

from ..conftest import ROOT

GRADE_ZERO_DIR = ROOT / "tests" / "fixtures" / "judged-not-relevant"
FIXTURE = "fixture 'judged-not-relevant'"

RANKINGS = {
    "q-en-001": ["en-trash-02", "en-sync-01", "en-trash-01"],  # two grade-0 chunks, then the grade-3 one
    "q-en-002": ["en-sync-01"],  # a no-answer query (grade 0 only) that returned its grade-0 chunk
    "q-en-003": [],
    "q-zh-001": ["zh-export-01"],  # only the grade-0 chunk: the relevant one is missed
    "q-zh-002": [],
}
"""A run over the fixture, hand-scored in the tests below."""


@pytest.fixture(scope="module")
def loaded() -> LoadedFixture:
    return load_fixture(GRADE_ZERO_DIR)


def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GRADE_ZERO_DIR / FIXTURE_FILE).read_text(encoding="utf-8"))
    return data


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(FixtureError) as caught:
        parse_fixture(json.dumps(data, ensure_ascii=False))
    return caught.value.problems


# --- the fixture -------------------------------------------------------------------------------------------------


def test_grade_zero_judgments_are_held_without_spans(loaded: LoadedFixture) -> None:
    queries = {q.query_id: q for q in loaded.fixture.queries}
    assert {q: [(j.chunk_id, j.grade) for j in query.judgments] for q, query in queries.items()} == {
        "q-en-001": [("en-trash-01", 3), ("en-trash-02", 0), ("en-sync-01", 0)],
        "q-en-002": [("en-sync-01", 0), ("en-trash-02", 0)],
        "q-en-003": [],
        "q-zh-001": [("zh-export-02", 3), ("zh-export-01", 0)],
        "q-zh-002": [("zh-billing-02", 0)],
    }
    assert all(j.spans == () for q in queries.values() for j in q.judgments if j.grade == 0)
    assert all(len(j.spans) >= 1 for q in queries.values() for j in q.judgments if j.grade >= 1)
    # answerable = has a judgment of grade >= 1; a query of grade-0 judgments only is a no-answer query
    assert [(q.query_id, q.answerable) for q in loaded.fixture.queries] == [
        ("q-en-001", True),
        ("q-en-002", False),
        ("q-en-003", False),
        ("q-zh-001", True),
        ("q-zh-002", False),
    ]
    assert [j.chunk_id for j in queries["q-en-001"].relevant_judgments] == ["en-trash-01"]
    assert queries["q-en-002"].relevant_judgments == ()


def test_a_grade_zero_judgment_may_leave_out_its_empty_spans() -> None:
    data = _data()
    del data["queries"][1]["judgments"][0]["spans"]
    assert parse_fixture(json.dumps(data, ensure_ascii=False)).queries[1].judgments[0].spans == ()


@pytest.mark.parametrize("grade", [-1, -2, 4, 7])
def test_a_grade_outside_0_to_3_is_refused_naming_query_chunk_and_field(grade: int) -> None:
    data = _data()
    data["queries"][3]["judgments"][1]["grade"] = grade
    assert _problems(data) == [
        f"query 'q-zh-001': field 'judgments[1].grade': grade {grade} of chunk 'zh-export-01' is outside 0-3 "
        "(1-3 relevant, 0 judged not relevant)"
    ]


def test_a_grade_outside_0_to_3_exits_2_from_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _data()
    data["queries"][0]["judgments"][2]["grade"] = 5
    (tmp_path / "fx").mkdir()
    (tmp_path / "fx" / FIXTURE_FILE).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "fx"]) == 2
    err = capsys.readouterr().err
    assert "query 'q-en-001': field 'judgments[2].grade': grade 5 of chunk 'en-sync-01' is outside 0-3" in err, err
    assert "Traceback" not in err
    assert main(["validate", str(GRADE_ZERO_DIR)]) == 0
    assert "5 queries (2 answerable, 3 no-answer)" in capsys.readouterr().out


def test_grade_zero_takes_no_spans_and_grades_1_to_3_need_one() -> None:
    data = _data()
    data["queries"][1]["judgments"][0]["spans"] = [{"start": 0, "text": "Sync"}]  # grade 0 with a span
    data["queries"][3]["judgments"][0]["spans"] = []  # grade 3 without one
    assert _problems(data) == [
        "query 'q-en-002': field 'judgments[0].spans': chunk 'en-sync-01' is judged not relevant (grade 0): it "
        "takes no spans, not 1",
        "query 'q-zh-001': field 'judgments[0].spans': chunk 'zh-export-02' is judged relevant (grade 3): it needs "
        "at least 1 exact answer span",
    ]


def test_a_relevant_judgment_without_the_spans_key_is_refused_too() -> None:
    data = _data()
    del data["queries"][0]["judgments"][0]["spans"]  # grade 3: the default (no spans) is checked like a given []
    assert _problems(data) == [
        "query 'q-en-001': field 'judgments[0].spans': chunk 'en-trash-01' is judged relevant (grade 3): it needs "
        "at least 1 exact answer span"
    ]


def test_the_label_set_checks_count_grade_zero_judgments_as_no_answer() -> None:
    # q-en-003 (no judgment) removed: q-en-002, judged only 0, is still English's no-answer query
    data = _data()
    data["queries"] = [q for q in data["queries"] if q["query_id"] != "q-en-003"]
    assert [q.answerable for q in parse_fixture(json.dumps(data, ensure_ascii=False)).queries] == [
        True,
        False,
        True,
        False,
    ]
    # q-zh-001 left with its grade-0 judgment only: Chinese has judgments, but no answerable query
    data = _data()
    data["queries"][3]["judgments"] = data["queries"][3]["judgments"][1:]
    assert _problems(data) == [
        f"{FIXTURE}: field 'queries': language 'zh' has no answerable query (degenerate label set)"
    ]


def test_the_judgments_hash_keeps_grade_zero_and_matches_the_exported_qrels(
    loaded: LoadedFixture, tmp_path: Path
) -> None:
    triples = fixture_judgments(loaded.fixture)
    assert ("q-en-002", "en-sync-01", 0) in triples and len(triples) == 8
    without_zero = [t for t in triples if t[2] != 0]
    assert judgments_sha256(triples) != judgments_sha256(without_zero)
    path = tmp_path / "qrels.txt"
    path.write_bytes(qrels_text(loaded.fixture))
    assert judgments_sha256(qrels_judgments(read_qrels_file(path))) == judgments_sha256(triples)


# --- scoring: grade 0 never counts as relevant -------------------------------------------------------------------


def test_query_failures_list_only_relevant_chunks(loaded: LoadedFixture) -> None:
    queries = {q.query_id: q for q in loaded.fixture.queries}
    assert query_failures(queries["q-en-001"], []) == [
        Failure("q-en-001", "en", "relevant_not_retrieved", "en-trash-01", 3, None, 0)
    ]
    assert query_failures(queries["q-en-001"], RANKINGS["q-en-001"]) == []
    assert query_failures(queries["q-zh-001"], RANKINGS["q-zh-001"]) == [
        Failure("q-zh-001", "zh", "relevant_not_retrieved", "zh-export-02", 3, None, 1)
    ]
    # a no-answer query holding grade-0 judgments fails only by returning something
    assert query_failures(queries["q-en-002"], []) == []
    assert query_failures(queries["q-en-002"], RANKINGS["q-en-002"]) == [
        Failure("q-en-002", "en", "no_answer_returned_results", None, None, None, 1)
    ]


def test_the_reference_path_scores_grade_zero_as_not_relevant(loaded: LoadedFixture) -> None:
    fixture = loaded.fixture
    lengths = {c.chunk_id: len(c.text) for c in fixture.chunks}
    scored = score_queries(fixture.queries, [RANKINGS[q.query_id] for q in fixture.queries], lengths)
    en, zh = scored["q-en-001"], scored["q-zh-001"]
    assert (en["recall@10"], en["mrr@10"], en["ndcg@10"]) == (1.0, 1 / 3, 0.5)  # 7 / log2(4) over the ideal 7
    assert (zh["recall@10"], zh["mrr@10"], zh["ndcg@10"]) == (0.0, 0.0, 0.0)
    assert scored["q-en-002"] == {"no_answer_fpr": 1.0}
    assert scored["q-zh-002"] == {"no_answer_fpr": 0.0}


def test_fixture_qrels_hold_grade_zero_rows_with_no_span_characters(loaded: LoadedFixture) -> None:
    qrels = fixture_qrels(loaded.fixture)
    queries = qrels.queries.to_pylist()
    rows = list(
        zip([queries[q] for q in qrels.query.tolist()], qrels.docs.to_pylist(), qrels.grades.tolist(), strict=True)
    )
    assert ("q-zh-002", "zh-billing-02", 0) in rows and len(rows) == 8
    span_chars = span_context(loaded.fixture, qrels).span_chars.tolist()
    chars = dict(zip([(q, d) for q, d, _ in rows], span_chars, strict=True))
    assert chars == {
        ("q-en-001", "en-sync-01"): 0,
        ("q-en-001", "en-trash-01"): len("stay in the trash for 30 days"),
        ("q-en-001", "en-trash-02"): 0,
        ("q-en-002", "en-sync-01"): 0,
        ("q-en-002", "en-trash-02"): 0,
        ("q-zh-001", "zh-export-01"): 0,
        ("q-zh-001", "zh-export-02"): len("一次最多包含 500 篇笔记"),
        ("q-zh-002", "zh-billing-02"): 0,
    }


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
def test_the_columnar_path_equals_the_evaluation_path_on_grade_zero(loaded: LoadedFixture, ties: str) -> None:
    rankings = {q: [(c, float(len(chunks) - i)) for i, c in enumerate(chunks)] for q, chunks in RANKINGS.items()}
    run = run_from_rankings("graded", rankings)
    systems = {run.name: SystemReport(kind="run-file", sha256=None, counts={})}
    columnar = score_fixture_runs(loaded.fixture, [run], ties, systems).to_report()
    evaluation = evaluate(
        loaded, [external_ablation(run.name, "run")], runs=1, systems={run.name: RunRetriever(run)}, ties=ties
    )
    expected = build_report(evaluation)
    actual, reference = columnar.ablations[run.name], expected.ablations[run.name]
    assert actual.per_query == reference.per_query
    assert actual.metrics == reference.metrics
    assert [f.model_dump() for f in actual.failures] == [f.model_dump() for f in reference.failures]
    assert [(f.query_id, f.kind, f.chunk_id) for f in actual.failures] == [
        ("q-en-002", "no_answer_returned_results", None),
        ("q-zh-001", "relevant_not_retrieved", "zh-export-02"),
    ]
    counts = actual.query_counts["all"]
    assert (counts.answerable, counts.no_answer) == (2, 3)
    assert columnar.judgments_sha256 == expected.judgments_sha256 == judgments_sha256(fixture_judgments(loaded.fixture))
