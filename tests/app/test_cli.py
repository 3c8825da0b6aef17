"""Tests for evalkit.app.cli: exit codes, messages, report output and the console-script entry point."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit.app.cli import main
from evalkit.common.output import ENV_VAR
from evalkit.data.fixture import FIXTURE_FILE
from evalkit.reporting.report import parse_report
from evalkit.runs.ablations import ABLATION_IDS

from ..conftest import SYNTHETIC_DIR, TINY_DIR

TINY = str(TINY_DIR)
VALID_LINE = (
    "fixture tiny-bilingual 1.0.0 is valid: 4 documents, 8 chunks, 8 queries (6 answerable, 2 no-answer), "
    "6 alias groups"
)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run `evalkit argv` in-process; return (exit code, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def run_tiny(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    return run_cli(capsys, "run", "--fixture", TINY, "--runs", "1", *extra)


def invalid_fixture(directory: Path) -> Path:
    """The tiny fixture with one chunk carrying an unknown field."""
    data: dict[str, Any] = json.loads((TINY_DIR / FIXTURE_FILE).read_text(encoding="utf-8"))
    data["chunks"][1]["colour"] = "blue"
    directory.mkdir()
    (directory / FIXTURE_FILE).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return directory


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current directory, with the report environment variable unset."""
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)
    monkeypatch.delenv(ENV_VAR, raising=False)
    return ws


@pytest.fixture
def tiny_gated(tmp_path: Path) -> str:
    """The tiny fixture beside the synthetic fixture's gates.json (the four seed gates), outside the workspace."""
    folder = tmp_path / "tiny-gated"
    shutil.copytree(TINY_DIR, folder)
    shutil.copy(SYNTHETIC_DIR / "gates.json", folder)
    return str(folder)


def contents(directory: Path, include_cache: bool = False) -> list[str]:
    """Everything under `directory`; the embedding cache (`.cache/`, written by every run) only when asked."""
    found = sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))
    return found if include_cache else [p for p in found if p.split("/")[0] != ".cache"]


# --- validate ---------------------------------------------------------------------------------------------------


def test_validate_tiny_prints_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "validate", TINY) == (0, VALID_LINE + "\n", "")


def test_validate_accepts_the_fixture_json_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "validate", str(TINY_DIR / FIXTURE_FILE)) == (0, VALID_LINE + "\n", "")


def test_validate_invalid_fixture_exits_2_naming_record_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run_cli(capsys, "validate", str(invalid_fixture(tmp_path / "bad")))
    assert code == 2
    assert out == ""
    assert err.startswith("evalkit: invalid fixture ")
    assert "1 problem(s)" in err
    assert "chunk 'en-trash-02': field 'colour': Extra inputs are not permitted" in err


def test_validate_lists_every_cross_record_problem(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data: dict[str, Any] = json.loads((TINY_DIR / FIXTURE_FILE).read_text(encoding="utf-8"))
    data["chunks"][0]["doc_id"] = "gone"
    data["queries"][1]["judgments"][0]["spans"][0]["start"] = 44
    (tmp_path / FIXTURE_FILE).write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run_cli(capsys, "validate", str(tmp_path))
    assert code == 2
    assert "2 problem(s)" in err
    assert "chunk 'en-trash-01': field 'doc_id' refers to unknown document 'gone'" in err
    assert "query 'q-en-002': field 'judgments[0].spans[0]' is not verbatim in chunk 'en-sync-02' at offset 44" in err


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{not json", "is not JSON"),
        (b"\xff\xfe\x00", "cannot be read"),
        (b"[" * 50_000, "is not JSON"),
    ],
    ids=["syntax", "not-utf8", "deeply-nested"],
)
def test_validate_unreadable_file_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, fragment: str
) -> None:
    (tmp_path / FIXTURE_FILE).write_bytes(content)
    code, out, err = run_cli(capsys, "validate", str(tmp_path))
    assert (code, out) == (2, "")
    assert f"file 'fixture.json' {fragment}" in err


def test_validate_missing_fixture_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "validate", str(tmp_path))
    assert code == 2
    assert f"no fixture.json at {tmp_path}" in err


# --- run -------------------------------------------------------------------------------------------------------


def test_run_prints_every_ablation_and_slice(
    capsys: pytest.CaptureFixture[str], workspace: Path, tiny_gated: str
) -> None:
    code, out, err = run_cli(capsys, "run", "--fixture", tiny_gated)
    assert (code, err) == (0, "")
    assert "fixture tiny-bilingual 1.0.0, 2 run(s), deterministic" in out
    for ablation in ABLATION_IDS:
        for slice_name in ("all", "en", "zh"):
            assert re.search(rf"^{re.escape(ablation)}\s+{slice_name}\s", out, re.MULTILINE), (ablation, slice_name)
    assert out.count("PASS") == 4
    assert "FAIL" not in out
    # No report unless asked; the only thing written is the embedding cache of the token-hash provider.
    assert contents(workspace) == []
    written = contents(workspace, include_cache=True)
    assert len([p for p in written if p.startswith(".cache/evalkit/") and p.endswith(".npy")]) == 2


@pytest.mark.parametrize(
    ("flag", "bound", "gate", "value"),
    [
        ("--min-reranked-mrr-at-10", "1.01", "hybrid-rerank mrr@10", "1.0000"),
        ("--min-reranked-ndcg-at-10", "1.5", "hybrid-rerank ndcg@10", "1.0000"),
        ("--max-no-answer-fpr", "-0.25", "hybrid-rerank no_answer_fpr", "0.0000"),
        ("--max-rerank-ndcg-drop", "-0.1", "rerank ndcg@10 drop vs hybrid", "0.0000"),
    ],
)
def test_run_with_an_impossible_gate_exits_1_naming_it(
    capsys: pytest.CaptureFixture[str], workspace: Path, flag: str, bound: str, gate: str, value: str
) -> None:
    # The tiny fixture scores 1.0 on the reranked path with no false positives, so only out-of-range bounds fail.
    code, out, err = run_tiny(capsys, f"{flag}={bound}")
    assert code == 1
    assert "1 quality gate(s) failed" in err
    failing = [line for line in err.splitlines() if gate in line]
    assert len(failing) == 1
    assert value in failing[0]
    assert f"{float(bound):.4f}" in failing[0]
    assert out.count("FAIL") == 1


def test_run_without_the_reranked_ablation_skips_its_gates(
    capsys: pytest.CaptureFixture[str], workspace: Path, tiny_gated: str
) -> None:
    code, out, err = run_cli(capsys, "run", "--fixture", tiny_gated, "--runs", "1", "--ablations", "lexical")
    assert (code, err) == (0, "")
    assert "FAIL" not in out and "PASS" not in out
    assert "no gates: none names a system evaluated here" in out


def test_run_of_a_fixture_without_gates_file_checks_no_seed_gate(
    capsys: pytest.CaptureFixture[str], workspace: Path
) -> None:
    code, out, err = run_tiny(capsys, "--output", "r.json")
    assert (code, err) == (0, "")
    assert "no gates: none names a system evaluated here" in out
    assert parse_report((workspace / "r.json").read_bytes()).gates == ()


def test_a_gate_on_a_measure_a_run_does_not_evaluate_is_refused(
    capsys: pytest.CaptureFixture[str], workspace: Path
) -> None:
    """map@10 and ndcg@99 are known names a fixture run never computes: such a gate could only fail, as "not
    evaluated", exit 1 on every run; it is refused before anything runs (exit 2), by run and by validate."""
    code, out, err = run_tiny(capsys, "--ablations", "lexical", "--gate", "lexical ndcg@99 >= 0.1")
    assert (code, out) == (2, "")
    assert "gate 'ndcg@99' on lexical: a fixture run does not evaluate this measure" in err
    shutil.copytree(TINY_DIR, workspace / "fx")
    gates = {"gates": [{"system": "hybrid-rerank", "measure": "map@10", "min": 0.1}]}
    (workspace / "fx" / "gates.json").write_text(json.dumps(gates), encoding="utf-8")
    code, _, err = run_cli(capsys, "validate", "fx")
    assert code == 2 and "gates.json: gate 'map@10' on hybrid-rerank" in err
    code, _, err = run_cli(capsys, "run", "--fixture", "fx", "--runs", "1")
    assert code == 2 and "a fixture run does not evaluate this measure" in err


@pytest.mark.parametrize("bound", ["nan", "inf", "-inf"])
def test_run_refuses_a_non_finite_gate(capsys: pytest.CaptureFixture[str], workspace: Path, bound: str) -> None:
    code, _, err = run_tiny(capsys, f"--max-no-answer-fpr={bound}")
    assert code == 2
    assert "max_no_answer_fpr" in err


def test_run_unknown_ablation_exits_2_naming_valid_ids(capsys: pytest.CaptureFixture[str], workspace: Path) -> None:
    code, out, err = run_tiny(capsys, "--ablations", "lexical,nope")
    assert (code, out) == (2, "")
    assert "nope" in err
    for ablation in ABLATION_IDS:
        assert ablation in err


def test_run_invalid_fixture_exits_2(capsys: pytest.CaptureFixture[str], workspace: Path, tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "run", "--fixture", str(invalid_fixture(tmp_path / "bad")))
    assert (code, out) == (2, "")
    assert "chunk 'en-trash-02': field 'colour'" in err


# --- report output ----------------------------------------------------------------------------------------------


def test_run_writes_the_report_inside_the_workspace(
    capsys: pytest.CaptureFixture[str], workspace: Path, tiny_gated: str
) -> None:
    code, out, _ = run_cli(capsys, "run", "--fixture", tiny_gated, "--runs", "1", "--output", "reports/x.json")
    assert code == 0
    assert "report written to reports/x.json" in out
    assert contents(workspace) == ["reports", "reports/x.json"]
    report = parse_report((workspace / "reports" / "x.json").read_bytes())
    assert (report.fixture_id, report.fixture_version, report.runs) == ("tiny-bilingual", "1.0.0", 1)
    assert sorted(report.ablations) == sorted(ABLATION_IDS)
    assert len(report.gates) == 4
    assert all(g.passed for g in report.gates)


def test_report_is_written_even_when_a_gate_fails(
    capsys: pytest.CaptureFixture[str], workspace: Path, tiny_gated: str
) -> None:
    argv = ["--fixture", tiny_gated, "--runs", "1", "--output", "r.json", "--min-reranked-mrr-at-10", "1.01"]
    code, _, _ = run_cli(capsys, "run", *argv)
    assert code == 1
    report = parse_report((workspace / "r.json").read_bytes())
    assert [g.passed for g in report.gates] == [False, True, True, True]


@pytest.mark.parametrize(
    ("requested", "reason"),
    [("../escape.json", "'..'"), ("/abs.json", "absolute"), ("reports/", "directory"), ("a\\b.json", "backslash")],
)
def test_run_refuses_an_unsafe_output_path(
    capsys: pytest.CaptureFixture[str], workspace: Path, requested: str, reason: str
) -> None:
    code, out, err = run_tiny(capsys, "--output", requested)
    assert (code, out) == (2, "")
    assert repr(requested) in err
    assert reason in err
    assert contents(workspace.parent) == ["ws"]
    assert not Path("/abs.json").exists()


def test_environment_variable_names_the_report(
    capsys: pytest.CaptureFixture[str], workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, "out/env.json")
    code, out, _ = run_tiny(capsys)
    assert code == 0
    assert "report written to out/env.json" in out
    assert contents(workspace) == ["out", "out/env.json"]
    assert parse_report((workspace / "out" / "env.json").read_text(encoding="utf-8")).fixture_id == "tiny-bilingual"


@pytest.mark.parametrize("value", [None, ""])
def test_no_report_without_flag_or_variable(
    capsys: pytest.CaptureFixture[str], workspace: Path, monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is not None:
        monkeypatch.setenv(ENV_VAR, value)
    code, out, _ = run_tiny(capsys)
    assert code == 0
    assert "report written" not in out
    assert contents(workspace) == []


def test_output_flag_wins_over_the_variable(
    capsys: pytest.CaptureFixture[str], workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, "../ignored.json")
    code, _, _ = run_tiny(capsys, "--output", "flag.json")
    assert code == 0
    assert contents(workspace) == ["flag.json"]


def test_unsafe_environment_variable_exits_2(
    capsys: pytest.CaptureFixture[str], workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, "../escape.json")
    code, out, err = run_tiny(capsys)
    assert (code, out) == (2, "")
    assert "'../escape.json'" in err
    assert contents(workspace.parent) == ["ws"]


@pytest.mark.parametrize(
    "extra",
    [
        ["--ablations", "nope"],
        ["--fixture", str(TINY_DIR / "missing")],
        ["--max-no-answer-fpr=nan"],
        ["--runs", "0"],
        ["--max-failed-queries", "-1"],
    ],
    ids=["ablation", "fixture", "threshold", "runs", "failed-queries"],
)
def test_invalid_input_leaves_the_workspace_untouched(
    capsys: pytest.CaptureFixture[str], workspace: Path, extra: list[str]
) -> None:
    # Regression: the output path (and its missing folders) used to be created before the other inputs were checked.
    code, out, _ = run_tiny(capsys, "--output", "out/sub/r.json", *extra)
    assert (code, out) == (2, "")
    assert contents(workspace, include_cache=True) == []


# --- help and usage --------------------------------------------------------------------------------------------


COMMANDS = ("run", "validate", "baseline", "notebook", "import", "score", "export", "compare", "pool", "labels")


@pytest.mark.parametrize("argv", [["--help"]] + [[command, "--help"] for command in COMMANDS])
def test_help_exits_0(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: evalkit")


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "{" + ",".join(COMMANDS) + "}" in capsys.readouterr().out


def test_run_help_documents_the_gates(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for flag in (
        "--min-reranked-mrr-at-10",
        "--min-reranked-ndcg-at-10",
        "--max-no-answer-fpr",
        "--max-rerank-ndcg-drop",
    ):
        assert flag in out
    assert ENV_VAR in out


@pytest.mark.parametrize("argv", [[], ["nope"], ["run", "--runs", "two"], ["validate"]])
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: evalkit" in capsys.readouterr().err


# --- the installed console script -------------------------------------------------------------------------------


def test_console_script_validates_the_tiny_fixture() -> None:
    script = Path(sys.executable).parent / "evalkit"
    result = subprocess.run([str(script), "validate", TINY], capture_output=True, text=True, check=False, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, VALID_LINE + "\n", "")


def test_console_script_exit_code_for_invalid_input(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "evalkit"
    result = subprocess.run(
        [str(script), "validate", str(tmp_path)], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "no fixture.json" in result.stderr
