"""`evalkit score`: run files scored as ablations, equal to `evalkit run` of the same ablations, with the declared
policies for missing queries, unknown chunks, unknown queries and malformed lines."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.app.cli import main
from evalkit.reporting.report import parse_report

from ..conftest import ROOT, SYNTHETIC_DIR, TINY_DIR


@pytest.fixture
def out() -> Iterator[str]:
    name = f"reports/pytest-{uuid.uuid4().hex[:8]}"
    yield name
    shutil.rmtree(ROOT / name, ignore_errors=True)


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
def test_score_of_exported_runs_equals_the_run(out: str, ties: str, capsys: pytest.CaptureFixture[str]) -> None:
    ablations = "lexical,token-hash-vector,hybrid-rerank"
    run_argv = ["run", "--fixture", str(SYNTHETIC_DIR), "--ablations", ablations, "--runs", "1", "--no-gates"]
    assert main([*run_argv, "--ties", ties, "--output", f"{out}/run.json", "--trec-runs", f"{out}/runs"]) == 0
    files = sorted((ROOT / out / "runs").iterdir())
    assert [f.name for f in files] == ["hybrid-rerank.trec", "lexical.trec", "token-hash-vector.trec"]
    score_argv = ["score", "--fixture", str(SYNTHETIC_DIR), "--ties", ties, "--no-gates", "--output", f"{out}/s.json"]
    assert main([*score_argv, *(a for f in files for a in ("--run", str(f)))]) == 0
    run = parse_report((ROOT / out / "run.json").read_bytes())
    scored = parse_report((ROOT / out / "s.json").read_bytes())
    assert run.tie_policy == scored.tie_policy == ties
    assert set(scored.ablations) == set(run.ablations)
    for ablation_id, result in run.ablations.items():
        other = scored.ablations[ablation_id]
        assert other.metrics == result.metrics, ablation_id
        assert other.failures == result.failures, ablation_id
        assert other.mode == "run" and other.latency_ms.count == 0
        assert other.system is not None and other.system.kind == "run-file"
    assert "missing from the run" in capsys.readouterr().out


def test_score_applies_only_gates_on_the_scored_systems(out: str, capsys: pytest.CaptureFixture[str]) -> None:
    run = ROOT / out / "x.trec"
    run.parent.mkdir(parents=True)
    run.write_text("q-en-001 Q0 en-trash-01 1 1.0 mine\n", encoding="utf-8")
    assert main(["score", "--fixture", str(SYNTHETIC_DIR), "--run", str(run)]) == 0, "seed gates name other systems"
    out_text = capsys.readouterr().out
    assert "no gates" in out_text and "not evaluated" not in out_text
    gate = ["--gate", "mine ndcg@10 >= 0.5"]
    assert main(["score", "--fixture", str(SYNTHETIC_DIR), "--run", str(run), *gate]) == 1
    assert "mine ndcg@10" in capsys.readouterr().err
    assert main(["score", "--fixture", str(SYNTHETIC_DIR), "--run", str(run), *gate, "--no-gates"]) == 0
    assert main(["score", "--fixture", str(SYNTHETIC_DIR), "--run", str(run), "--gate", "lexical ndcg@10 >= 0.5"]) == 2


def _tiny_run(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_run_with_missing_queries_unknown_chunks_and_duplicates(
    out: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {
            "query_id": "q-en-001",
            "results": [{"chunk_id": "en-trash-01", "score": 2}, {"chunk_id": "ghost", "score": 1}],
        },
        {"query_id": "q-en-001", "results": [{"chunk_id": "en-trash-01", "score": 0.5}]},
    ]
    path = _tiny_run(ROOT / out, "mine.jsonl", "\n".join(json.dumps(line) for line in lines))
    report_path = f"{out}/r.json"
    assert main(["score", "--fixture", str(TINY_DIR), "--run", str(path), "--no-gates", "--output", report_path]) == 0
    printed = capsys.readouterr().out
    assert "7 fixture query(ies) missing from the run" in printed
    assert "1 unknown chunk ID(s) kept as not relevant" in printed
    assert "mine: 3 line(s); 1 duplicate line(s) (best-placed kept)" in printed
    report = parse_report((ROOT / report_path).read_bytes())
    system = report.ablations["mine"].system
    assert system is not None
    assert system.counts == {
        "lines": 3,
        "missing_queries": 7,
        "unjudged_queries": 0,
        "unknown_chunks": 1,
        "duplicates": 1,
    }
    assert report.ablations["mine"].query_counts["all"].answerable == 6
    assert report.ablations["mine"].metrics["all"]["recall@10"] < 1.0, "missing queries score as empty rankings"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "q-en-001 Q0 en-trash-01 1 1.0 t\nq-en-001 Q0 en-trash-02 2 x t\n",
            "bad.trec line 2: score 'x' is not a number",
        ),
        ("q-en-001 Q0 en-trash-01 1 1.0 t\nq-en-001 Q0 en-trash-02\n", "bad.trec line 2: expected 6 columns"),
        (
            "q-xx-998 Q0 en-trash-01 1 1.0 t\n\nq-xx-999 Q0 en-trash-01 1 1.0 t\n",
            "run t: none of its 2 query(ies) is in the fixture",
        ),
    ],
)
def test_bad_run_lines_exit_2_naming_the_line(
    out: str, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _tiny_run(ROOT / out, "bad.trec", text)
    code = main(["score", "--fixture", str(TINY_DIR), "--run", str(path), "--output", f"{out}/r.json"])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err
    assert not (ROOT / out / "r.json").exists(), "no partial report"


def test_two_runs_with_one_id_are_refused(out: str, capsys: pytest.CaptureFixture[str]) -> None:
    first = _tiny_run(ROOT / out / "a", "x.trec", "q-en-001 Q0 en-trash-01 1 1.0 same\n")
    second = _tiny_run(ROOT / out / "b", "y.trec", "q-en-001 Q0 en-trash-01 1 1.0 same\n")
    assert main(["score", "--fixture", str(TINY_DIR), "--run", str(first), "--run", str(second)]) == 2
    assert "run ID 'same' of y.trec is used by another run" in capsys.readouterr().err


def test_unknown_tie_policy_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["score", "--run", "x.trec", "--ties", "ranx"])
    assert info.value.code == 2
    assert "invalid choice: 'ranx'" in capsys.readouterr().err


def test_score_reports_are_byte_identical_across_processes(out: str) -> None:
    import os
    import subprocess
    import sys

    lines = "".join(f"q-{lang}-00{i} Q0 en-trash-0{i % 2 + 1} 1 1.0 same\n" for lang in ("en", "zh") for i in (1, 2))
    path = _tiny_run(ROOT / out, "r.trec", lines + "q-en-001 Q0 zh-export-01 2 1.0 same\n")
    reports = []
    for seed in ("0", "123"):
        target = f"{out}/report-{seed}.json"
        argv = ["-m", "evalkit.app.cli", "score", "--fixture", str(TINY_DIR), "--run", str(path), "--no-gates"]
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, *argv, "--output", target], cwd=ROOT, env=env, capture_output=True)
        assert done.returncode == 0, done.stderr
        reports.append((ROOT / target).read_bytes())
    assert reports[0] == reports[1]


def _qrels_run_topics(folder: Path, topics: str) -> list[str]:
    (folder / "qrels.txt").write_text("q1 0 d1 1\n7 0 d2 1\n", encoding="utf-8")
    (folder / "run.trec").write_text("q1 Q0 d1 1 1.0 t\n7 Q0 d1 1 1.0 t\n", encoding="utf-8")
    (folder / "topics.jsonl").write_text(topics, encoding="utf-8")
    return ["score", "--qrels", "qrels.txt", "--run", "run.trec", "--topics", "topics.jsonl"]


def test_topics_with_an_integer_id_and_a_repeated_line_give_language_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    topics = '{"_id": "q1", "text": "hello"}\n{"query_id": 7, "metadata": {"language": "zh"}}\n'
    topics += '{"qid": "q1", "query": "hello"}\n'  # the first line again, the same: kept once
    assert main(_qrels_run_topics(tmp_path, topics)) == 0
    rows = {tuple(line.split()[:3]) for line in capsys.readouterr().out.splitlines()}
    assert {("t", "en", "1.0000"), ("t", "zh", "0.0000")} <= rows  # q1 (English) found, query 7 (Chinese) missed


@pytest.mark.parametrize(
    ("topics", "message"),
    [
        (
            '{"_id": "q1", "text": "hello", "language": "fr"}\n',
            "topics.jsonl line 1: field 'language': must be 'en' or 'zh', not 'fr'",
        ),
        (
            '{"_id": "q1", "text": "hello"}\n{"qid": "q1", "text": "bye"}\n',
            "topics.jsonl line 2: field 'qid': query 'q1' is listed again with another text than at topics.jsonl "
            "line 1",
        ),
        (
            '{"_id": true, "text": "hello"}\n',
            "topics.jsonl line 1: field '_id': must be a string or an integer, not bool",
        ),
    ],
    ids=["language", "repeat", "bool-id"],
)
def test_bad_topics_exit_2_naming_file_line_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], topics: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_qrels_run_topics(tmp_path, topics)) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
