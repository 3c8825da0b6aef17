"""No output onto an input: every command refuses, with exit 2 and before writing anything, an output that is one
of its inputs, whether named alike, hard-linked, reached through a symlink, or an absent input file of a fixture
reached through a symlinked folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from evalkit.app.cli import main
from evalkit.data.fixture import load_fixture
from evalkit.data.trec import trec_run_bytes
from evalkit.reporting.build import build_report
from evalkit.reporting.report import report_json
from evalkit.runs.evaluation import Evaluation

from ..conftest import ROOT, TINY_DIR

SQUAD = ROOT / "tests" / "fixtures" / "squad"
COMMON = ["--license", "CC-BY-SA-4.0", "--attribution", "Hand-written test data for evalkit."]
REFUSED = "input of this run"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the command; it must exit 2 naming the overwrite, without a traceback; return stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == 2, err
    assert REFUSED in err
    return err


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (symlinks followed) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def tiny_run(path: Path) -> Path:
    """A one-line TREC run over the tiny fixture."""
    fixture = load_fixture(TINY_DIR).fixture
    path.write_bytes(trec_run_bytes({fixture.queries[0].query_id: [(fixture.chunks[0].chunk_id, 1.0)]}, "r"))
    return path


# --- compare ---------------------------------------------------------------------------------------------------


@pytest.fixture
def reports(workspace: Path, tiny_evaluation: Evaluation) -> bytes:
    data = report_json(build_report(tiny_evaluation))
    Path("base.json").write_bytes(data)
    Path("head.json").write_bytes(data)
    return data


@pytest.mark.parametrize("output", ["base.json", "head.json", "./sub/../head.json"])
def test_compare_output_onto_a_report_is_refused(
    reports: bytes, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    Path("sub").mkdir()
    if ".." in output:  # a '..' component is refused by the path rules before the input check
        assert main(["compare", "base.json", "head.json", "--output", output]) == 2
        capsys.readouterr()
        return
    refused(capsys, "compare", "base.json", "head.json", "--output", output)
    assert Path("base.json").read_bytes() == Path("head.json").read_bytes() == reports


def test_compare_output_onto_a_hard_link_of_a_report_is_refused(
    reports: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    os.link("head.json", "alias.json")
    refused(capsys, "compare", "base.json", "head.json", "--output", "alias.json")
    assert Path("head.json").read_bytes() == reports


def test_compare_output_onto_the_target_of_a_symlinked_report_is_refused(
    reports: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("reports").mkdir()
    Path("head.json").rename("reports/head.json")
    Path("head-link.json").symlink_to("reports/head.json")
    refused(capsys, "compare", "base.json", "head-link.json", "--output", "reports/head.json")
    assert Path("reports/head.json").read_bytes() == reports


# --- import ----------------------------------------------------------------------------------------------------


def export_tiny(kind: str, folder: str) -> Path:
    assert main(["export", kind, str(TINY_DIR), "--output-dir", folder]) == 0
    return Path(folder)


def test_import_trec_onto_its_corpus_is_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = export_tiny("trec", "data")
    (data / "corpus.jsonl").rename(data / "fixture.json")  # a corpus file may be called anything
    before = snapshot(data)
    argv = ["--qrels", "data/qrels.txt", "--topics", "data/topics.jsonl", "--corpus", "data/fixture.json"]
    err = refused(capsys, "import", "trec", *argv, "--output-dir", "data", "--fixture-id", "t", *COMMON)
    assert "data/fixture.json" in err
    assert snapshot(data) == before


def test_import_trec_summary_onto_its_qrels_is_refused_before_the_fixture_is_written(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = export_tiny("trec", "data")
    (data / "qrels.txt").rename(data / "import_summary.json")
    before = snapshot(data)
    argv = ["--qrels", "data/import_summary.json", "--topics", "data/topics.jsonl", "--corpus", "data/corpus.jsonl"]
    refused(capsys, "import", "trec", *argv, "--output-dir", "data", "--fixture-id", "t", *COMMON)
    assert snapshot(data) == before  # no fixture.json either: the check comes before any write


def test_import_beir_onto_a_symlinked_input_is_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    beir = export_tiny("beir", "beir")
    Path("out").mkdir()
    (beir / "queries.jsonl").rename("out/fixture.json")
    (beir / "queries.jsonl").symlink_to(Path("..") / "out" / "fixture.json")
    before = snapshot(Path("out"))
    refused(capsys, "import", "beir", "beir", "--output-dir", "out", "--fixture-id", "t", *COMMON)
    assert snapshot(Path("out")) == before


def test_import_beir_onto_a_hard_linked_input_is_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    beir = export_tiny("beir", "beir")
    Path("out").mkdir()
    os.link(beir / "qrels" / "test.tsv", "out/import_summary.json")
    refused(capsys, "import", "beir", "beir", "--output-dir", "out", "--fixture-id", "t", *COMMON)
    assert not Path("out/fixture.json").exists()


def test_import_squad_summary_onto_its_questions_is_refused(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("out").mkdir()
    shutil.copy(SQUAD / "tiny.zh.json", "out/import_summary.json")
    before = snapshot(Path("out"))
    argv = ["import", "squad", str(SQUAD / "tiny.en.json"), "--questions", "out/import_summary.json"]
    argv += ["--question-language", "zh", "--language", "en", "--output-dir", "out", "--fixture-id", "t"]
    refused(capsys, *argv, "--held-out-fraction", "0.3", *COMMON)
    assert snapshot(Path("out")) == before


# --- score -----------------------------------------------------------------------------------------------------


def test_score_qrels_output_onto_a_hard_link_of_its_run_is_refused(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = export_tiny("trec", "data")
    run = tiny_run(Path("run.trec"))
    os.link(run, "report.json")
    before = run.read_bytes()
    refused(capsys, "score", "--qrels", str(data / "qrels.txt"), "--run", "run.trec", "--output", "report.json")
    refused(capsys, "score", "--qrels", str(data / "qrels.txt"), "--run", "run.trec", "--output", "data/qrels.txt")
    assert run.read_bytes() == before


def test_score_fixture_output_onto_its_run_is_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tiny_run(Path("run.trec"))
    before = run.read_bytes()
    refused(capsys, "score", "--fixture", str(TINY_DIR), "--run", "run.trec", "--output", "run.trec")
    assert run.read_bytes() == before


def test_score_fixture_output_cannot_create_an_absent_input_through_a_symlinked_folder(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(TINY_DIR, "fx")
    Path("fx-link").symlink_to("fx")
    tiny_run(Path("run.trec"))
    refused(capsys, "score", "--fixture", "fx-link", "--run", "run.trec", "--output", "fx/gates.json")
    assert not Path("fx/gates.json").exists(), "a report written as gates.json would be read as the next run's gates"


# --- run -------------------------------------------------------------------------------------------------------


RUN = ["run", "--ablations", "lexical", "--runs", "1", "--no-gates", "--no-cache"]


def test_run_trec_runs_onto_its_fixture_is_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("fx").mkdir()
    shutil.copy(TINY_DIR / "fixture.json", "fx/lexical.trec")  # a fixture file may be called anything
    before = snapshot(Path("fx"))
    err = refused(capsys, *RUN, "--fixture", "fx/lexical.trec", "--trec-runs", "fx")
    assert "fx/lexical.trec" in err
    assert snapshot(Path("fx")) == before


def test_run_output_onto_its_settings_file_is_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("settings.json").write_text('{"top_k": 10}\n', encoding="utf-8")
    refused(capsys, *RUN, "--fixture", str(TINY_DIR), "--settings", "settings.json", "--output", "settings.json")
    assert Path("settings.json").read_text(encoding="utf-8") == '{"top_k": 10}\n'


def test_run_output_onto_its_retriever_module_is_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = (
        "class Nothing:\n"
        "    name = 'nothing'\n\n"
        "    def search(self, text, language, k):\n"
        "        return []\n\n\n"
        "def make():\n"
        "    return Nothing()\n"
    )
    Path("own_retriever_for_overwrite.py").write_text(source, encoding="utf-8")
    argv = ["--ablations", "", "--retriever", "own_retriever_for_overwrite:make"]
    refused(capsys, *RUN, *argv, "--fixture", str(TINY_DIR), "--output", "own_retriever_for_overwrite.py")
    assert Path("own_retriever_for_overwrite.py").read_text(encoding="utf-8") == source


# --- export ----------------------------------------------------------------------------------------------------


def test_export_onto_its_fixture_is_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("fx").mkdir()
    shutil.copy(TINY_DIR / "fixture.json", "fx/corpus.jsonl")
    before = snapshot(Path("fx"))
    refused(capsys, "export", "trec", "fx/corpus.jsonl", "--output-dir", "fx")
    assert snapshot(Path("fx")) == before


def test_export_onto_its_aliases_is_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(TINY_DIR, "fx")
    Path("out").mkdir()
    os.link("fx/aliases.json", "out/qrels.txt")
    before = snapshot(Path("fx"))
    refused(capsys, "export", "trec", "fx", "--output-dir", "out")
    assert snapshot(Path("fx")) == before
    assert not Path("out/corpus.jsonl").exists()
