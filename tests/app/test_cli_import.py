"""`evalkit import squad`, `evalkit import trec`'s JSONL topics and `evalkit run --no-gates`: files written, errors
as exit 2 without a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evalkit.app.cli import main
from evalkit.data.fixture import load_fixture

from ..conftest import ROOT

SQUAD = ROOT / "tests" / "fixtures" / "squad"
COMMON = ["--license", "CC-BY-SA-4.0", "--attribution", "Hand-written SQuAD-format test data for evalkit."]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_monolingual_import_writes_a_valid_fixture(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["import", "squad", str(SQUAD / "tiny.en.json"), "--output-dir", "fx/en", "--fixture-id", "tiny-en"]
    assert main([*argv, "--language", "en", "--held-out-fraction", "0.3", *COMMON]) == 0
    assert capsys.readouterr().out.startswith("wrote fx/en/fixture.json: ")
    fixture = load_fixture(workspace / "fx" / "en").fixture
    assert fixture.fixture_id == "tiny-en"
    assert fixture.license == "CC-BY-SA-4.0"
    assert {q.language for q in fixture.queries} == {"en"}
    assert any(not q.answerable for q in fixture.queries)


def test_cross_lingual_import(workspace: Path) -> None:
    argv = ["import", "squad", str(SQUAD / "tiny.en.json"), "--questions", str(SQUAD / "tiny.zh.json")]
    argv += ["--question-language", "zh", "--language", "en", "--output-dir", "fx", "--fixture-id", "tiny-zh-en"]
    assert main([*argv, "--held-out-fraction", "0.3", "--chunking", "sentence", *COMMON]) == 0
    fixture = load_fixture(workspace / "fx").fixture
    languages = {d.doc_id: d.language for d in fixture.documents}
    chunk_language = {c.chunk_id: languages[c.doc_id] for c in fixture.chunks}
    answerable = [q for q in fixture.queries if q.answerable]
    assert answerable and all(q.language == "zh" for q in fixture.queries)
    assert {chunk_language[j.chunk_id] for q in answerable for j in q.judgments} == {"en"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--questions", str(SQUAD / "tiny.zh.json")], "--questions needs --question-language"),
        (["--held-out-fraction", "0"], "held"),
        (["--output-dir", "../escape", "--held-out-fraction", "0.3"], "refusing output path"),
    ],
)
def test_bad_import_exits_2_without_writing(
    workspace: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    argv = ["import", "squad", str(SQUAD / "tiny.en.json"), "--output-dir", "fx", "--fixture-id", "x"]
    assert main([*argv, "--language", "en", *COMMON, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert list(workspace.iterdir()) == []


def test_missing_input_file_exits_2(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["import", "squad", "missing.json", "--output-dir", "fx", "--fixture-id", "x", "--language", "en"]
    assert main([*argv, *COMMON]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_run_no_gates_reports_but_does_not_fail(capsys: pytest.CaptureFixture[str]) -> None:
    fixture = str(ROOT / "tests" / "fixtures" / "tiny")
    failing = ["--gate", "lexical recall@10 >= 1.01"]
    assert main(["run", "--fixture", fixture, "--ablations", "lexical", "--runs", "1", *failing]) == 1
    assert "lexical recall@10" in capsys.readouterr().err
    assert main(["run", "--fixture", fixture, "--ablations", "lexical", "--runs", "1", *failing, "--no-gates"]) == 0
    out = capsys.readouterr().out
    assert "FAIL  lexical recall@10 = " in out
    assert "hybrid-rerank" not in out, "a gate on a system that was not run is skipped, not failed"
    assert "gates not enforced (--no-gates)" in out


def _trec_argv(folder: Path, topics: list[object]) -> list[str]:
    corpus = [
        {"_id": "d1", "title": "Trash", "text": "Deleted notes stay in the trash for 30 days."},
        {"_id": "d2", "title": "回收站", "text": "删除的笔记在回收站中保留 30 天。"},
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
    (folder / "qrels.txt").write_text("7 0 d1 1\nq2 0 d2 1\n", encoding="utf-8")
    (folder / "topics.jsonl").write_text("".join(json.dumps(t) + "\n" for t in topics), encoding="utf-8")
    argv = ["import", "trec", "--qrels", "qrels.txt", "--topics", "topics.jsonl", "--corpus", "corpus.jsonl"]
    return [*argv, "--output-dir", "fx", "--fixture-id", "t", "--license", "CC0-1.0", "--attribution", "Test data."]


GOOD_TOPICS = [
    {"query_id": 7, "text": "How long are deleted notes kept?"},
    {"_id": "q2", "text": "删除的笔记保留多久？", "metadata": {"language": "zh"}},
    {"_id": "q3", "text": "深色模式在哪里？"},
    {"_id": "q4", "text": "深色模式 = dark mode?", "language": "en"},  # a given language wins over detection
]


def test_trec_import_takes_integer_ids_and_keeps_a_repeated_topic_once(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_trec_argv(workspace, [*GOOD_TOPICS, GOOD_TOPICS[1]])) == 0
    summary = capsys.readouterr().out
    assert re.search(r"duplicate_id +1 skip +e\.g\. q2", summary) and "unknown_key" not in summary
    fixture = load_fixture(workspace / "fx").fixture
    assert [(q.query_id, q.language, q.answerable) for q in fixture.queries] == [
        ("7", "en", True),
        ("q2", "zh", True),
        ("q3", "zh", False),
        ("q4", "en", False),
    ]


@pytest.mark.parametrize(
    ("topic", "message"),
    [
        (
            {"_id": "q5", "text": "Where is dark mode?", "language": "fr"},
            "topics.jsonl line 5: field 'language': must be 'en' or 'zh', not 'fr'",
        ),
        (
            {"qid": "q2", "text": "回收站在哪里？", "metadata": {"language": "zh"}},
            "topics.jsonl line 5: field 'qid': query 'q2' is listed again with another text than at topics.jsonl "
            "line 2",
        ),
        ({"_id": True, "text": "x"}, "topics.jsonl line 5: field '_id': must be a string or an integer, not bool"),
    ],
    ids=["language", "repeat", "bool-id"],
)
def test_bad_trec_topics_exit_2_naming_file_line_and_field(
    workspace: Path, capsys: pytest.CaptureFixture[str], topic: object, message: str
) -> None:
    assert main(_trec_argv(workspace, [*GOOD_TOPICS, topic])) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (workspace / "fx").exists()


_MISSING_INPUTS = {
    "squad": ["squad", "missing.json", "--language", "en"],
    "beir": ["beir", "missing-beir"],
    "trec": ["trec", "--qrels", "missing.txt", "--topics", "missing.tsv", "--corpus", "missing.jsonl"],
}


@pytest.mark.parametrize("source_format", sorted(_MISSING_INPUTS))
def test_import_refuses_a_non_empty_output_folder_before_reading(
    workspace: Path, capsys: pytest.CaptureFixture[str], source_format: str
) -> None:
    """A fixture written among another fixture's files would be validated against its baselines and gates; the
    folder is checked first, so even missing inputs are not reached."""
    (workspace / "fx").mkdir()
    (workspace / "fx" / "baselines.json").write_text('{"hello": 1}', encoding="utf-8")
    argv = ["import", *_MISSING_INPUTS[source_format], "--output-dir", "fx", "--fixture-id", "x", *COMMON]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "refusing output path 'fx': the output folder exists and is not empty: give a new or empty folder" in err
    assert "missing" not in err and "Traceback" not in err
    assert sorted(p.name for p in (workspace / "fx").iterdir()) == ["baselines.json"]


def test_import_into_an_existing_empty_folder(workspace: Path) -> None:
    (workspace / "fx").mkdir()
    argv = ["import", "squad", str(SQUAD / "tiny.en.json"), "--output-dir", "fx", "--fixture-id", "tiny-en"]
    assert main([*argv, "--language", "en", "--held-out-fraction", "0.3", *COMMON]) == 0
    assert sorted(p.name for p in (workspace / "fx").iterdir()) == ["fixture.json", "import_summary.json"]
    assert main(_trec_argv(workspace, GOOD_TOPICS)) == 2, "the folder now holds the SQuAD import"


def test_squad_import_reports_a_rewritten_question_id(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads((SQUAD / "tiny.en.json").read_text(encoding="utf-8"))
    data["data"][0]["paragraphs"][0]["qas"][0]["id"] = "q 1\tx"
    (workspace / "spaced.json").write_text(json.dumps(data), encoding="utf-8")
    argv = ["import", "squad", "spaced.json", "--language", "en", "--fixture-id", "t", "--held-out-fraction", "0.3"]
    assert main([*argv, "--output-dir", "fx", *COMMON]) == 0
    out = capsys.readouterr().out  # the file already holds question "lh/6"
    assert re.search(r"id_rewritten +2 repair +e\.g\. en-q_1_x, en-lh_6", out)
    assert main([*argv, "--output-dir", "refused", *COMMON, "--on-id-rewritten", "fail"]) == 2
    err = capsys.readouterr().err
    assert "'q 1\\tx' becomes 'en-q_1_x' (refused as id_rewritten; --on-id-rewritten repair accepts it)" in err
    assert not (workspace / "refused").exists()


def test_squad_import_notes_a_file_in_the_other_language(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["import", "squad", str(SQUAD / "tiny.en.json"), "--fixture-id", "t", "--held-out-fraction", "0.3"]
    assert main([*argv, "--language", "zh", "--output-dir", "zh", *COMMON]) == 0
    err = capsys.readouterr().err
    assert re.search(r"note: .*tiny\.en\.json: \d+ of \d+ questions and \d+ of \d+ contexts read as en, not zh", err)
    assert "is --language zh right? (the import goes on)" in err
    assert main([*argv, "--language", "en", "--output-dir", "en", *COMMON]) == 0
    assert "note:" not in capsys.readouterr().err
