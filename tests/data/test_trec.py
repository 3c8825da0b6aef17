"""evalkit.data.trec: TREC qrels, TSV and JSONL topics, the writers and the round trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalkit.app.cli import main
from evalkit.data.collection import CollectionOptions
from evalkit.data.fixture import load_fixture
from evalkit.data.repairs import RepairLog, RepairPolicy
from evalkit.data.trec import QRELS_GAINS, qrels_text, read_trec, trec_files, write_trec
from evalkit.measures.registry import QueryCase, parse_measure, reference_value
from evalkit.runs.evaluation import corpus_sha256

from ..conftest import ROOT, SYNTHETIC_DIR

GRADE_ZERO_DIR = ROOT / "tests" / "fixtures" / "judged-not-relevant"

COMMON = ["--fixture-id", "imported", "--license", "CC0-1.0", "--attribution", "Hand-written TREC test data."]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def options(**changes: Any) -> CollectionOptions:
    values: dict[str, Any] = {"fixture_id": "imported", "license": "CC0-1.0", "attribution": "TREC test data."}
    values.update(changes)
    return CollectionOptions(**values)


def write_collection(directory: Path, qrels: str, topics: str, topics_name: str = "topics.tsv") -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    corpus = [
        {"_id": "D1", "title": "Trash", "text": "Deleted notes stay in the trash for 30 days."},
        {"_id": "D2", "title": "回收站", "text": "删除的笔记在回收站中保留 30 天。"},
    ]
    (directory / "corpus.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in corpus), encoding="utf-8"
    )
    (directory / "qrels.txt").write_text(qrels, encoding="utf-8")
    (directory / topics_name).write_text(topics, encoding="utf-8")
    return [
        "--qrels",
        str(directory / "qrels.txt"),
        "--topics",
        str(directory / topics_name),
        "--corpus",
        str(directory / "corpus.jsonl"),
    ]


TOPICS = "qid\ttext\n1\tHow long are deleted notes kept?\n2\t删除的笔记保留多久？\n3\tdark mode\n4\t深色模式\n"


def test_tsv_topics_and_qrels_with_extra_columns(tmp_path: Path) -> None:
    # Every line as wide as the first (the qrels reader refuses a line of another width, naming it).
    qrels = "1 0 D1 1 extra-column\n1 0 D2 0 x\n2 Q0 D2 2 x\n\n5 0 D1 1 x\n3 0 D1 -1 x\n4 0 D2 -2 x\n"
    args = write_collection(tmp_path, qrels, TOPICS)
    log = RepairLog(RepairPolicy())
    fixture = read_trec(Path(args[1]), Path(args[3]), Path(args[5]), options(), log)
    judged = {q.query_id: [(j.chunk_id, j.grade) for j in q.judgments] for q in fixture.queries}
    # 0 is judged not relevant (kept), -1 pooled but not judged (left out), -2 judged not relevant (becomes 0)
    assert judged == {"1": [("D1", 1), ("D2", 0)], "2": [("D2", 2)], "3": [], "4": []}
    assert [q.answerable for q in fixture.queries] == [True, True, False, False]
    assert [q.language for q in fixture.queries] == ["en", "zh", "en", "zh"]
    counts = {kind: item.count for kind, item in log.repairs().items()}
    assert counts == {"unknown_reference": 1, "pooled_not_judged": 1, "negative_grade": 1, "missing_spans": 2}


def test_jsonl_topics_with_trec_keys(tmp_path: Path) -> None:
    topics = [
        {"query_id": "1", "query": "How long are deleted notes kept?"},
        {"qid": "2", "title": "删除的笔记保留多久？"},
        {"_id": "3", "text": "dark mode"},
        {"_id": "4", "text": "深色模式", "narrative": "unused"},
    ]
    lines = "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in topics)
    args = write_collection(tmp_path, "1 0 D1 1\n2 0 D2 3\n", lines, "topics.jsonl")
    log = RepairLog(RepairPolicy())
    fixture = read_trec(Path(args[1]), Path(args[3]), Path(args[5]), options(), log)
    assert [(q.query_id, q.language) for q in fixture.queries] == [("1", "en"), ("2", "zh"), ("3", "en"), ("4", "zh")]
    assert log.repairs()["unknown_key"].examples == ("4.narrative",)


@pytest.mark.parametrize("topics_format", ["jsonl", "tsv"])
def test_round_trip_of_the_synthetic_fixture(workspace: Path, topics_format: str) -> None:
    original = load_fixture(SYNTHETIC_DIR).fixture
    assert main(["export", "trec", str(SYNTHETIC_DIR), "--output-dir", "out", "--topics-format", topics_format]) == 0
    out = workspace / "out"
    assert sorted(p.name for p in out.iterdir()) == sorted(["corpus.jsonl", "qrels.txt", f"topics.{topics_format}"])
    assert (out / "qrels.txt").read_text(encoding="utf-8").startswith("q-en-001 0 zh-trash-01 3\n")
    argv = ["--qrels", "out/qrels.txt", "--topics", f"out/topics.{topics_format}", "--corpus", "out/corpus.jsonl"]
    assert main(["import", "trec", *argv, "--output-dir", "fx", *COMMON]) == 0
    again = load_fixture(workspace / "fx").fixture
    assert corpus_sha256(again) == corpus_sha256(original)
    # TSV topics carry no language: auto detection reads every synthetic query right.
    assert [(q.query_id, q.text, q.language) for q in again.queries] == [
        (q.query_id, q.text, q.language) for q in original.queries
    ]
    assert [[(j.chunk_id, j.grade) for j in q.judgments] for q in again.queries] == [
        [(j.chunk_id, j.grade) for j in q.judgments] for q in original.queries
    ]
    if topics_format == "jsonl":
        assert again.queries == original.queries


@pytest.mark.parametrize("topics_format", ["jsonl", "tsv"])
def test_round_trip_keeps_judged_not_relevant_chunks(workspace: Path, topics_format: str) -> None:
    original = load_fixture(GRADE_ZERO_DIR).fixture
    assert main(["export", "trec", str(GRADE_ZERO_DIR), "--output-dir", "out", "--topics-format", topics_format]) == 0
    qrels = (workspace / "out" / "qrels.txt").read_text(encoding="utf-8").splitlines()
    assert [line for line in qrels if line.startswith("q-en-002 ")] == [
        "q-en-002 0 en-sync-01 0",
        "q-en-002 0 en-trash-02 0",
    ]
    assert len(qrels) == 8
    argv = ["--qrels", "out/qrels.txt", "--topics", f"out/topics.{topics_format}", "--corpus", "out/corpus.jsonl"]
    assert main(["import", "trec", *argv, "--output-dir", "fx", *COMMON]) == 0
    again = load_fixture(workspace / "fx").fixture
    assert corpus_sha256(again) == corpus_sha256(original)
    assert [[(j.chunk_id, j.grade) for j in q.judgments] for q in again.queries] == [
        [(j.chunk_id, j.grade) for j in q.judgments] for q in original.queries
    ]
    assert [q.answerable for q in again.queries] == [q.answerable for q in original.queries]
    summary = json.loads((workspace / "fx" / "import_summary.json").read_text(encoding="utf-8"))
    # grade 0 needs no span: only TSV topics (no spans at all) leave the two relevant chunks without one
    assert summary["repairs"] == (
        {}
        if topics_format == "jsonl"
        else {"missing_spans": {"action": "repair", "count": 2, "examples": ["q-en-001", "q-zh-001"]}}
    )
    if topics_format == "jsonl":
        assert again.queries == original.queries


def test_tsv_topics_flatten_tabs_and_newlines() -> None:
    fixture = load_fixture(SYNTHETIC_DIR).fixture
    topics = trec_files(fixture, "tsv")["topics.tsv"].decode("utf-8").splitlines()
    assert len(topics) == len(fixture.queries)
    assert all(line.count("\t") == 1 for line in topics)


def test_writer_is_deterministic(tmp_path: Path) -> None:
    fixture = load_fixture(SYNTHETIC_DIR).fixture
    first = [p.read_bytes() for p in write_trec(fixture, tmp_path / "a")]
    assert first == [p.read_bytes() for p in write_trec(fixture, tmp_path / "b")]


@pytest.mark.parametrize(
    ("qrels", "topics", "expected"),
    [
        ("1 0 D1\n", TOPICS, "qrels.txt line 1: needs 4 columns (query-id iteration doc-id grade), has 3"),
        ("1 0 D1 yes\n", TOPICS, "qrels.txt line 1: field 'grade': 'yes' is not an integer"),
        ("1 0 D1 1\n", "1\n", "topics.tsv line 1: needs 2 tab-separated fields (query-id, text), has 1"),
        ("1 0 D1 1\n", "1\tx\n\tno id\n", "topics.tsv line 2: field 'query-id': must not be blank"),
        ("1 Q0 D1 1 9.5 sys\n", TOPICS, "qrels.txt line 1: has 6 columns with Q0 in the second, as a run's lines"),
    ],
)
def test_malformed_files_exit_2_naming_line_and_field(
    workspace: Path, capsys: pytest.CaptureFixture[str], qrels: str, topics: str, expected: str
) -> None:
    args = write_collection(workspace / "src", qrels, topics)
    assert main(["import", "trec", *args, "--output-dir", "fx", *COMMON]) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert "Traceback" not in err
    assert not (workspace / "fx").exists()


def test_missing_corpus_exits_2(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = write_collection(workspace / "src", "1 0 D1 1\n", TOPICS)
    args[-1] = "src/none.jsonl"
    assert main(["import", "trec", *args, "--output-dir", "fx", *COMMON]) == 2
    assert "none.jsonl: file not found" in capsys.readouterr().err
    assert not (workspace / "fx").exists()


def test_export_refuses_an_output_outside_the_workspace(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "trec", str(SYNTHETIC_DIR), "--output-dir", "../escape"]) == 2
    assert "refusing output path" in capsys.readouterr().err
    assert not (workspace.parent / "escape").exists()


# --- qrels gains: --gains raw|exponential --------------------------------------------------------------------------


def export_qrels(workspace: Path, *flags: str) -> dict[str, dict[str, int]]:
    """Export the synthetic fixture with `flags` and read back qrels.txt as query -> chunk -> relevance."""
    assert main(["export", "trec", str(SYNTHETIC_DIR), "--output-dir", "out", *flags]) == 0
    qrels: dict[str, dict[str, int]] = {}
    for line in (workspace / "out" / "qrels.txt").read_text(encoding="utf-8").splitlines():
        query_id, iteration, chunk_id, relevance = line.split(" ")
        assert iteration == "0"
        qrels.setdefault(query_id, {})[chunk_id] = int(relevance)
    return qrels


def test_exponential_qrels_make_trec_eval_ndcg_cut_10_equal_evalkit_ndcg_at_10(workspace: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    fixture = load_fixture(SYNTHETIC_DIR).fixture
    rng = np.random.default_rng(20240611)
    chunk_ids = [c.chunk_id for c in fixture.chunks]
    # every chunk ranked in a random order with strictly decreasing scores: no ties for either tool to break
    rankings = {q.query_id: [chunk_ids[i] for i in rng.permutation(len(chunk_ids))] for q in fixture.queries}
    run = {qid: {c: float(len(r) - rank) for rank, c in enumerate(r)} for qid, r in rankings.items()}
    grades = {q.query_id: {j.chunk_id: j.grade for j in q.judgments} for q in fixture.queries if q.answerable}

    exponential = export_qrels(workspace, "--gains", "exponential")
    raw = export_qrels(workspace, "--gains", "raw")
    peer = pytrec_eval.RelevanceEvaluator(exponential, {"ndcg_cut.10"}).evaluate(run)
    peer_raw = pytrec_eval.RelevanceEvaluator(raw, {"ndcg_cut.10"}).evaluate(run)

    assert set(peer) == set(grades)  # trec_eval evaluates the answerable queries: no-answer ones have no qrels
    ndcg = parse_measure("ndcg@10")
    ours = {qid: reference_value(ndcg, QueryCase(rankings[qid], grades[qid])) for qid in grades}
    for qid, value in ours.items():
        assert abs(peer[qid]["ndcg_cut_10"] - value) <= 1e-12, (qid, peer[qid], value)
    # the sample exercises partial scores, and raw grades would not have reproduced them
    assert any(0.0 < value < 1.0 for value in ours.values())
    assert any(abs(peer_raw[qid]["ndcg_cut_10"] - value) > 1e-6 for qid, value in ours.items())


def test_raw_qrels_are_the_grades_unchanged_and_the_default(workspace: Path) -> None:
    fixture = load_fixture(SYNTHETIC_DIR).fixture
    expected = "".join(f"{q.query_id} 0 {j.chunk_id} {j.grade}\n" for q in fixture.queries for j in q.judgments)
    assert main(["export", "trec", str(SYNTHETIC_DIR), "--output-dir", "default"]) == 0
    assert main(["export", "trec", str(SYNTHETIC_DIR), "--output-dir", "raw", "--gains", "raw"]) == 0
    assert (workspace / "raw" / "qrels.txt").read_text(encoding="utf-8") == expected
    assert (workspace / "default" / "qrels.txt").read_bytes() == (workspace / "raw" / "qrels.txt").read_bytes()
    assert {j.grade for q in fixture.queries for j in q.judgments} == {1, 2, 3}


def test_exponential_qrels_write_two_to_the_grade_minus_one(workspace: Path) -> None:
    fixture = load_fixture(SYNTHETIC_DIR).fixture
    exponential = export_qrels(workspace, "--gains", "exponential")
    relevance = {1: 1, 2: 3, 3: 7}
    assert exponential == {
        q.query_id: {j.chunk_id: relevance[j.grade] for j in q.judgments} for q in fixture.queries if q.answerable
    }
    assert [QRELS_GAINS["exponential"](grade) for grade in (-1, 0, 1, 2, 3, 4)] == [0, 0, 1, 3, 7, 15]
    assert [QRELS_GAINS["raw"](grade) for grade in (-1, 0, 1, 2, 3)] == [-1, 0, 1, 2, 3]


def test_unknown_gains_are_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["export", "trec", str(SYNTHETIC_DIR), "--output-dir", "out", "--gains", "linear"])
    assert info.value.code == 2
    assert "invalid choice: 'linear'" in capsys.readouterr().err
    assert not (workspace / "out").exists()
    with pytest.raises(ValueError, match="unknown qrels gains 'linear'; valid gains: exponential, raw"):
        qrels_text(load_fixture(SYNTHETIC_DIR).fixture, "linear")


def test_export_help_documents_the_gains(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["export", "trec", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--gains {exponential,raw}" in out
    assert "(default: raw)" in out
