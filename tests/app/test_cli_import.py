"""`evalkit import squad` and `evalkit run --no-gates`: files written, errors as exit 2 without a traceback."""

from __future__ import annotations

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
