"""The last hostile inputs, through the CLI: a report with a non-finite per-query value, a plugin returning a
non-finite score, a run file whose tag holds a control or bidirectional character. Each is refused with exit 2
and one message naming the file or system, the line, item or query, and the field; and nothing is written.

The factories below are the plugins the tests name, as ``tests.app.test_last_hostile_inputs:<factory>``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.app.cli import main
from evalkit.retrieval.retriever import SearchOutcome, SearchRequest

from ..conftest import TINY_DIR

HERE = "tests.app.test_last_hostile_inputs"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` with its bytes (None for a folder)."""
    return {
        p.relative_to(folder).as_posix(): (None if p.is_dir() else p.read_bytes()) for p in sorted(folder.rglob("*"))
    }


def _refused(capsys: pytest.CaptureFixture[str], workspace: Path, argv: list[str]) -> str:
    """Run the CLI, which must refuse with exit 2, one message and nothing written; its stderr."""
    before = _snapshot(workspace)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert "Traceback" not in out + err
    assert err.startswith("evalkit: ") and "\nevalkit: " not in err, err  # one message
    assert _snapshot(workspace) == before, "something was written"
    return err


# --- a report with NaN or Infinity in a per-query value ------------------------------------------------------


@pytest.fixture(scope="module")
def report_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The lexical ablation's report over the tiny fixture, as `evalkit run --output` writes it."""
    folder = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        argv = ["run", "--fixture", str(TINY_DIR), "--ablations", "lexical", "--runs", "1", "--no-gates"]
        assert main([*argv, "--no-cache", "--output", "report.json"]) == 0
    return (folder / "report.json").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("spelled", "problem"),
    [
        ("NaN", "NaN is not valid JSON (only finite numbers are allowed)"),
        ("Infinity", "Infinity is not valid JSON (only finite numbers are allowed)"),
        ("-Infinity", "-Infinity is not valid JSON (only finite numbers are allowed)"),
        ("1e999", "a number out of range (1e999)"),
    ],
)
def test_a_report_with_a_non_finite_per_query_value_is_refused_naming_the_field(
    report_text: str, workspace: Path, capsys: pytest.CaptureFixture[str], spelled: str, problem: str
) -> None:
    data = json.loads(report_text)
    values = data["ablations"]["lexical"]["per_query"]["ndcg@10"]
    marker = 0.123456789012345  # a value no report holds, then spelled as JSON that no float can hold
    values[2] = marker
    head = json.dumps(data).replace(repr(marker), spelled)
    assert head.count(spelled) == 1
    (workspace / "in").mkdir()
    (workspace / "in" / "base.json").write_text(report_text, encoding="utf-8")
    (workspace / "in" / "head.json").write_text(head, encoding="utf-8")
    err = _refused(capsys, workspace, ["compare", "in/base.json", "in/head.json", "--output", "c.json"])
    assert "head report in/head.json" in err
    assert f"{problem} at ablations.lexical.per_query.ndcg@10[2]" in err


# --- a plugin returning a non-finite score -------------------------------------------------------------------


class _Scores:
    """Answers every query with two chunks, the second with ``score``."""

    name = "bad-scores"

    def __init__(self, score: object) -> None:
        self.score = score

    def search(self, text: str, language: str, k: int) -> list[tuple[str, object]]:
        return [("en-trash-01", 1.0), ("en-trash-02", self.score)]


def infinite() -> _Scores:
    return _Scores(float("inf"))


def minus_infinite() -> _Scores:
    return _Scores(float("-inf"))


def nan() -> _Scores:
    return _Scores(float("nan"))


def huge_integer() -> _Scores:
    return _Scores(10**400)  # no float holds it


class _BatchScores(_Scores):
    """Answers the whole batch at once (its own ``search_all``), with the same results."""

    def search_all(self, requests: list[SearchRequest]) -> list[SearchOutcome]:
        hits = self.search("", "en", 10)
        return [SearchOutcome(r.query_id, tuple(hits), 1.0) for r in requests]  # type: ignore[arg-type]


def batch_infinite() -> _BatchScores:
    return _BatchScores(float("inf"))


@pytest.mark.parametrize(
    ("factory", "shown"),
    [
        ("infinite", "inf"),
        ("minus_infinite", "-inf"),
        ("nan", "nan"),
        ("huge_integer", "1000"),
        ("batch_infinite", "inf"),
    ],
)
def test_a_plugin_returning_a_non_finite_score_is_refused_naming_system_query_and_field(
    workspace: Path, capsys: pytest.CaptureFixture[str], factory: str, shown: str
) -> None:
    argv = ["run", "--fixture", str(TINY_DIR), "--ablations", "", "--retriever", f"{HERE}:{factory}"]
    err = _refused(capsys, workspace, [*argv, "--no-gates", "--no-cache", "--output", "out/report.json"])
    where = "system bad-scores: query q-en-001: result 1 (chunk 'en-trash-02'): field score is "
    assert where + shown in err
    assert "not a finite number" in err


# --- a run file whose tag holds a control or bidirectional character -----------------------------------------


@pytest.mark.parametrize(
    ("tag", "shown"),
    [
        ("\x1b[2Jmine", r"'\x1b[2Jmine'"),
        ("mi\x07ne", r"'mi\x07ne'"),
        ("mi\x00ne", r"'mi\x00ne'"),
        ("mi\u202ene", r"'mi\u202ene'"),
    ],
    ids=["ansi", "bel", "nul", "bidi-override"],
)
@pytest.mark.parametrize("line", [1, 2])
def test_a_run_file_whose_tag_holds_a_control_or_bidi_character_is_refused(
    workspace: Path, capsys: pytest.CaptureFixture[str], tag: str, shown: str, line: int
) -> None:
    lines = ["q-en-001 Q0 en-trash-02 1 2.0 mine", "q-en-001 Q0 en-trash-01 2 1.0 mine"]
    lines[line - 1] = lines[line - 1].replace("mine", tag)
    (workspace / "in").mkdir()
    (workspace / "in" / "r.trec").write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    argv = ["score", "--fixture", str(TINY_DIR), "--run", "in/r.trec", "--output", "out/report.json"]
    err = _refused(capsys, workspace, argv)
    assert f"r.trec line {line}: field 'tag': {shown} holds a control or bidirectional character" in err
    assert tag not in err  # shown escaped, never as it is
