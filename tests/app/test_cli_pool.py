"""`evalkit pool`: JSON lines of the pairs to label, to stdout or atomically to --output, the counts beside them,
exit 2 with one message and nothing written for bad input, and the same bytes in every process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evalkit.app.cli import main

from ..conftest import TINY_DIR

QRELS = "q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 -1\nq2 0 e1 1\n"
RUN_A = "q1 Q0 d1 1 9 a\nq1 Q0 x 2 8 a\nq1 Q0 d3 3 7 a\nq2 Q0 e1 1 5 a\nq2 Q0 y 2 4 a\n"
RUN_B = "q1 Q0 x 1 3 b\nq1 Q0 d2 2 2 b\nq1 Q0 w 3 1 b\n"
TOPICS = '{"query_id": "q1", "text": "one", "language": "en"}\n{"query_id": "q2", "text": "二", "language": "zh"}\n'
RUNS_AB = [{"run": "b", "rank": 1}, {"run": "a", "rank": 2}]
EXPECTED = [
    {"query_id": "q1", "language": "en", "doc_id": "x", "best_rank": 1, "runs": RUNS_AB},
    {"query_id": "q1", "language": "en", "doc_id": "d3", "best_rank": 3, "runs": [{"run": "a", "rank": 3}]},
    {"query_id": "q1", "language": "en", "doc_id": "w", "best_rank": 3, "runs": [{"run": "b", "rank": 3}]},
    {"query_id": "q2", "language": "zh", "doc_id": "y", "best_rank": 2, "runs": [{"run": "a", "rank": 2}]},
]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    for name, text in {"qrels.txt": QRELS, "a.trec": RUN_A, "b.trec": RUN_B, "topics.jsonl": TOPICS}.items():
        (tmp_path / "in" / name).write_text(text, encoding="utf-8")
    return tmp_path


BASE = ["pool", "--qrels", "in/qrels.txt", "--run", "in/a.trec", "--run", "in/b.trec", "--depth", "3"]


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    return {p.relative_to(folder).as_posix(): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


def test_jsonl_to_stdout_and_counts_to_stderr(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--topics", "in/topics.jsonl"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == EXPECTED
    assert err.startswith("pool: 4 unjudged pair(s) in 2 query(ies) to label (top 3 of 2 run(s), tie policy evalkit)")
    a_line = next(line for line in err.splitlines() if line.startswith("a "))
    assert a_line.split() == ["a", "3", "2", "0.4167", "1.0000"]  # x d3 y; judged@3 (1/3 + 1/2) / 2, then 1
    assert "Traceback" not in err


def test_output_file_holds_what_stdout_would(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(BASE) == 0
    printed = capsys.readouterr().out.encode("utf-8")
    assert main([*BASE, "--output", "reports/pool.jsonl"]) == 0
    out, err = capsys.readouterr()
    assert (workspace / "reports" / "pool.jsonl").read_bytes() == printed
    assert out.startswith("pool: 4 unjudged pair(s)") and out.rstrip().endswith("wrote reports/pool.jsonl")
    assert err == ""
    assert "language" not in printed.decode("utf-8")  # no topics: no language


def test_fixture_pool_keeps_no_answer_queries_and_names_chunks(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = "q-en-001 Q0 en-trash-01 1 2.0 mine\nq-en-001 Q0 zh-export-01 2 1.0 mine\nq-en-004 Q0 en-sync-01 1 1.0 mine\n"
    (workspace / "in" / "f.trec").write_text(run, encoding="utf-8")
    assert main(["pool", "--fixture", str(TINY_DIR), "--run", "in/f.trec", "--depth", "5"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["query_id"], r["language"], r["doc_id"], r["chunk_id"], r["best_rank"]) for r in rows] == [
        ("q-en-001", "en", "zh-export-01", "zh-export-01", 2),
        ("q-en-004", "en", "en-sync-01", "en-sync-01", 1),  # a no-answer query: no judgment at all
    ]


def _run_file(workspace: Path, name: str, text: str) -> str:
    (workspace / "in" / name).write_text(text, encoding="utf-8")
    return f"in/{name}"


REFUSED: dict[str, tuple[list[str], str]] = {
    "depth 0": (["--depth", "0"], "--depth must be at least 1, got 0"),
    "negative depth": (["--depth", "-2"], "--depth must be at least 1, got -2"),
    "unknown queries only": (["--run", "in/other.trec"], "run other: none of its 1 query(ies) is in the judgments"),
    "run that does not parse": (["--run", "in/bad.trec"], "bad.trec line 2: score 'not-a-number' is not a number"),
    "same run twice": (["--run", "in/a.trec"], "the same run file is given twice"),
    "output onto an input": (["--output", "in/qrels.txt"], "it is an input of this run"),
    "output escaping the workspace": (["--output", "../pool.jsonl"], "'..' components are not allowed"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    case: str, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_file(workspace, "other.trec", "p1 Q0 x 1 1.0 other\n")
    _run_file(workspace, "bad.trec", "q1 Q0 x 1 1.0 bad\nq1 Q0 y 2 not-a-number bad\n")
    extra, fragment = REFUSED[case]
    argv = [*BASE, *extra, "--output", "reports/pool.jsonl"] if "--output" not in extra else [*BASE, *extra]
    before = _snapshot(workspace)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == "" and err.startswith("evalkit: ") and "\nevalkit: " not in err and "Traceback" not in err, err
    assert fragment in err
    assert err.count("\n") == 1 or case == "run that does not parse", err  # the run reader lists each bad line
    assert _snapshot(workspace) == before


@pytest.mark.parametrize(
    ("judgments", "fragment"),
    [
        ([], "give --qrels FILE or --fixture DIR (exactly one)"),
        (["--qrels", "in/qrels.txt", "--fixture", str(TINY_DIR)], "give --qrels FILE or --fixture DIR (exactly one)"),
        (["--fixture", "in/broken"], "in/broken"),
        (["--fixture", str(TINY_DIR), "--topics", "in/topics.jsonl"], "--topics goes with --qrels"),
    ],
)
def test_judgments_from_exactly_one_valid_source(
    judgments: list[str], fragment: str, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "in" / "broken").mkdir()
    (workspace / "in" / "broken" / "fixture.json").write_text('{"fixture_id": "x"}', encoding="utf-8")
    before = _snapshot(workspace)
    code = main(["pool", *judgments, "--run", "in/a.trec", "--depth", "3", "--output", "pool.jsonl"])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == "" and err.startswith("evalkit: ") and "Traceback" not in err
    assert fragment in err
    assert _snapshot(workspace) == before


def test_a_fixture_grade_outside_0_to_3_is_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixture = json.loads((TINY_DIR / "fixture.json").read_text(encoding="utf-8"))
    fixture["queries"][0]["judgments"][0]["grade"] = 4
    (workspace / "in" / "fx").mkdir()
    (workspace / "in" / "fx" / "fixture.json").write_text(json.dumps(fixture), encoding="utf-8")
    code = main(["pool", "--fixture", "in/fx", "--run", "in/a.trec", "--depth", "3"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("evalkit: ") and "grade" in err


def _many_runs(folder: Path) -> list[str]:
    """Qrels and three tie-heavy runs over 40 queries, IDs that a hash-ordered set would shuffle."""
    rng = np.random.default_rng(29)
    docs = [f"doc-{i:03d}-{chr(0x4E00 + i)}" for i in range(60)]
    qrels = [
        f"q{q:02d} 0 {d} {int(rng.integers(-1, 3))}" for q in range(40) for d in rng.choice(docs, 6, replace=False)
    ]
    (folder / "qrels.txt").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    names = []
    for r in range(3):
        lines = [
            f"q{q:02d} Q0 {d} 0 {rng.choice([1.0, 2.0, 3.0])} run{r}"
            for q in rng.permutation(40)
            for d in rng.choice(docs, 15)
        ]
        (folder / f"run{r}.trec").write_text("\n".join(lines) + "\n", encoding="utf-8")
        names += ["--run", f"run{r}.trec"]
    return names


def test_the_same_bytes_in_every_process(tmp_path: Path) -> None:
    runs = _many_runs(tmp_path)
    argv = [sys.executable, "-m", "evalkit", "pool", "--qrels", "qrels.txt", *runs, "--depth", "7"]
    outputs = []
    for seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, check=False, timeout=120)
        assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    rows = [json.loads(line) for line in outputs[0].decode("utf-8").splitlines()]
    assert len(rows) > 100
    keys = [(r["query_id"], r["best_rank"], r["doc_id"]) for r in rows]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    # the order of the runs on the command line changes nothing in the file
    swapped = [*argv[:6], *(word for f in reversed(runs[1::2]) for word in ("--run", f)), "--depth", "7"]
    assert swapped != argv and sorted(swapped) == sorted(argv)
    again = subprocess.run(swapped, cwd=tmp_path, capture_output=True, check=True, timeout=120)
    assert again.stdout == outputs[0]


def test_runs_of_one_name_in_two_files_are_pooled_apart(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`evalkit compare` pairs a base and a head by their run name, and its label-holes advice pools both: two files
    tagged alike are pooled, the later under its file name, or its name and place when that is taken too."""
    (workspace / "base").mkdir()
    (workspace / "head").mkdir()
    (workspace / "base" / "sys.trec").write_text(RUN_A.replace(" a\n", " sys\n"), encoding="utf-8")
    (workspace / "head" / "hybrid-new.trec").write_text(RUN_B.replace(" b\n", " sys\n"), encoding="utf-8")
    (workspace / "head" / "sys.trec").write_text(RUN_B.replace(" b\n", " sys\n"), encoding="utf-8")
    pool = ["pool", "--qrels", "in/qrels.txt", "--depth", "3"]
    assert main([*pool, "--run", "base/sys.trec", "--run", "head/hybrid-new.trec"]) == 0
    out, err = capsys.readouterr()
    assert {r["run"] for line in out.splitlines() for r in json.loads(line)["runs"]} == {"sys", "hybrid-new"}
    assert "note: run 2 (head/hybrid-new.trec) is pooled as 'hybrid-new': 'sys' names an earlier run" in err
    assert main([*pool, "--run", "base/sys.trec", "--run", "head/sys.trec"]) == 0
    out, err = capsys.readouterr()
    assert {r["run"] for line in out.splitlines() for r in json.loads(line)["runs"]} == {"sys", "sys-2"}
    assert "is pooled as 'sys-2'" in err


def test_a_run_pooled_apart_takes_a_name_no_given_run_carries(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for folder, name, tag in [("a", "sys", "sys-3"), ("b", "sys", "sys"), ("c", "sys", "sys"), ("d", "dense", "hyb")]:
        (workspace / folder).mkdir(exist_ok=True)
        (workspace / folder / f"{name}.trec").write_text(RUN_A.replace(" a\n", f" {tag}\n"), encoding="utf-8")
    (workspace / "e").mkdir()
    (workspace / "e" / "x.trec").write_text(RUN_B.replace(" b\n", " dense\n"), encoding="utf-8")
    (workspace / "e" / "hyb.trec").write_text(RUN_B.replace(" b\n", " hyb\n"), encoding="utf-8")
    runs = ["a/sys.trec", "b/sys.trec", "c/sys.trec", "e/hyb.trec", "d/dense.trec", "e/x.trec"]
    assert main(["pool", "--qrels", "in/qrels.txt", "--depth", "3", *(x for r in runs for x in ("--run", r))]) == 0
    out, err = capsys.readouterr()
    names = {r["run"] for line in out.splitlines() for r in json.loads(line)["runs"]}
    assert names == {"sys-3", "sys", "sys-4", "hyb", "hyb-5", "dense"}, err  # never a name another run carries
