"""`evalkit compare`: the table, --output, the regression gate's exit codes and messages, refusals without traces."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import nbformat
import pytest

from evalkit.app.cli import main
from evalkit.app.headless import run_notebook
from evalkit.reporting.build import build_report
from evalkit.reporting.comparison_views import parse_comparison
from evalkit.reporting.report import report_json
from evalkit.runs.evaluation import Evaluation

from ..conftest import ROOT

COMPARE_NOTEBOOK = Path("notebooks") / "compare_reports.ipynb"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, synthetic_evaluation: Evaluation) -> dict[str, Any]:
    """base.json, a copy, and worse-zh.json where every Chinese answerable query lost its first-rank hit."""
    monkeypatch.chdir(tmp_path)
    data = report_json(build_report(synthetic_evaluation))
    Path("base.json").write_bytes(data)
    Path("same.json").write_bytes(data)
    worse = json.loads(data)
    languages = worse["queries"]["languages"]
    for ablation in worse["ablations"].values():
        for measure in ("recall@1", "mrr@10", "ndcg@10"):
            column = ablation["per_query"][measure]
            ablation["per_query"][measure] = [
                v if v is None or lang == "en" else min(v, 0.0 if measure == "recall@1" else 0.5 * v)
                for v, lang in zip(column, languages, strict=True)
            ]
    Path("worse-zh.json").write_text(json.dumps(with_means(worse)), encoding="utf-8")
    return json.loads(data)


def with_means(report: dict[str, Any]) -> dict[str, Any]:
    """`report` with every aggregate recomputed from its per-query column (compare refuses stale aggregates)."""
    languages = report["queries"]["languages"]
    for ablation in report["ablations"].values():
        for slice_name, row in ablation["metrics"].items():
            for measure in row:
                values = [
                    v
                    for v, lang in zip(ablation["per_query"][measure], languages, strict=True)
                    if v is not None and slice_name in ("all", lang)
                ]
                row[measure] = sum(values) / len(values)
    return report


def test_same_report_compares_to_zero_and_exits_0(reports: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "compare", "base.json", "same.json", "--fail-on-regression", "--output", "c.json")
    assert code == 0
    assert "ablation" in out and "Holm p" in out and "p worse" in out and "95% CI" in out
    assert "hybrid-rerank      ndcg@10           zh" in out
    # Gated: ndcg@10 and recall@10 x 5 ablations x 3 slices; the other 90 rows are exploratory.
    assert "30 gated comparisons" in out and "90 exploratory comparisons" in out and "PASS" in out
    comparison = parse_comparison(Path("c.json").read_bytes())
    assert all(r.difference == 0.0 and r.p_value == 1.0 for r in comparison.rows)
    assert "comparison written to c.json" in out


def test_regression_in_one_language_exits_1_naming_it(
    reports: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "compare", "base.json", "worse-zh.json", "--fail-on-regression")
    assert code == 1
    assert "quality gate(s) failed" in err
    assert "hybrid-rerank ndcg@10 [zh] difference = -0." in err
    assert "95% CI [-0." in err and "Holm p = " in err
    assert "[en]" not in err
    assert "FAIL  hybrid-rerank ndcg@10 [zh]" in out


def test_without_the_flag_a_regression_is_printed_but_exits_0(
    reports: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "compare", "base.json", "worse-zh.json")
    assert code == 0 and "FAIL  lexical ndcg@10 [zh]" in out


def test_a_large_tolerance_passes_the_same_drop(reports: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "compare", "base.json", "worse-zh.json", "--fail-on-regression", "--max-drop", "0.9")
    assert code == 0 and "significant, within tolerance" in out


def test_gated_measures_can_be_chosen(reports: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    args = ("compare", "base.json", "worse-zh.json", "--fail-on-regression", "--gate-measures")
    assert run_cli(capsys, *args, "context_recall,no_answer_fpr")[0] == 0
    code, _, err = run_cli(capsys, *args, "ndcg@11")
    assert code == 2 and "unknown gated measure(s) ndcg@11" in err


def test_version_1_report_is_refused_with_exit_2(reports: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    old = dict(reports, schema_version=1)
    Path("old.json").write_text(json.dumps(old), encoding="utf-8")
    code, _, err = run_cli(capsys, "compare", "old.json", "base.json", "--output", "c.json")
    assert code == 2
    assert (
        "base report old.json" in err
        and "regenerate it with the command that made it (`evalkit run --output PATH`" in err
    )
    assert not Path("c.json").exists()


def test_other_judgments_are_refused_before_writing(
    reports: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    Path("other.json").write_text(json.dumps(dict(reports, judgments_sha256="e" * 64)), encoding="utf-8")
    code, _, err = run_cli(capsys, "compare", "base.json", "other.json", "--output", "c.json")
    assert code == 2 and "judgments_sha256 differs" in err
    assert not Path("c.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.json", "base.json"], "missing.json"),
        (["base.json", "base.json", "--output", "/tmp/c.json"], "absolute paths are not allowed"),
        (["base.json", "base.json", "--alpha", "1.5"], "alpha must be in (0, 1)"),
    ],
)
def test_bad_input_exits_2_with_a_message(
    reports: dict[str, Any], capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run_cli(capsys, "compare", *argv)
    assert code == 2 and message in err


def test_metric_version_and_settings_differences_are_said_plainly(
    reports: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    Path("head.json").write_text(json.dumps(dict(reports, metrics_version="3")), encoding="utf-8")
    code, out, _ = run_cli(capsys, "compare", "base.json", "head.json")
    assert code == 0 and "note: the metric definitions differ: metrics_version base 2, head 3" in out


@pytest.mark.slow  # executes a notebook
def test_compare_notebook_fails_its_last_cell_on_a_regression(
    reports: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = f"pytest-compare-{uuid.uuid4().hex[:8]}"
    folder = ROOT / "reports" / run_id
    inputs = ROOT / "reports" / f"{run_id}-inputs"  # a run folder must not exist before its run
    try:
        inputs.mkdir(parents=True)
        shutil.copy("base.json", inputs / "base.json")
        shutil.copy("worse-zh.json", inputs / "worse-zh.json")
        parameters = {"base": f"reports/{run_id}-inputs/base.json", "head": f"reports/{run_id}-inputs/worse-zh.json"}
        run = run_notebook(ROOT, parameters, notebook=COMPARE_NOTEBOOK, run_id=run_id)
        assert run.error_name == "GateFailure"
        assert "hybrid-rerank ndcg@10 [zh] difference" in (run.error_message or "")
        executed = nbformat.read(run.notebook, as_version=4)
        code_cells = [c for c in executed.cells if c.cell_type == "code"]
        failing = [c for c in code_cells if any(o.get("output_type") == "error" for o in c.outputs)]
        assert failing == [code_cells[-1]]
        assert (folder / "comparison.json").is_file() and (folder / "figures" / "forest.svg").is_file()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(inputs, ignore_errors=True)


def test_a_qrels_report_compares_with_a_run_report_of_the_same_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One judgments hash whichever door made the report: `evalkit score --qrels` on the fixture exported as TREC
    and `evalkit run` on the fixture carry the same judgments_sha256, compare query by query, and agree on every
    value (the run files are the very rankings `evalkit run` scored). The fixture's no-answer queries, which TREC
    qrels cannot hold, are left out with a note."""
    monkeypatch.chdir(tmp_path)
    fixture = str(ROOT / "fixtures" / "synthetic-bilingual-v1")
    assert run_cli(capsys, "export", "trec", fixture, "--output-dir", "trec")[0] == 0
    run_args = ["--ablations", "lexical,hybrid", "--runs", "1", "--no-gates", "--trec-runs", "runs"]
    assert run_cli(capsys, "run", "--fixture", fixture, *run_args, "--output", "run.json")[0] == 0
    score_args = ["--run", "runs/lexical.trec", "--run", "runs/hybrid.trec", "--topics", "trec/topics.jsonl"]
    code, out, _ = run_cli(capsys, "score", "--qrels", "trec/qrels.txt", *score_args, "--output", "score.json")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["system", "slice", "recall@1"]
    run_report, score_report = (json.loads(Path(name).read_bytes()) for name in ("run.json", "score.json"))
    assert run_report["judgments_sha256"] == score_report["judgments_sha256"]
    assert run_cli(capsys, "compare", "run.json", "score.json", "--output", "cmp.json")[0] == 0
    comparison = parse_comparison(Path("cmp.json").read_bytes())
    assert {row.ablation for row in comparison.rows} == {"lexical", "hybrid"}
    assert {row.measure for row in comparison.rows} == {"recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10"}
    assert all(row.difference == 0.0 and row.losses == row.wins == 0 for row in comparison.rows)
    no_answer = sum(not answerable for answerable in run_report["queries"]["answerable"])
    assert no_answer > 0
    assert any(f"{no_answer} query(ies) of base without judgments" in note for note in comparison.notes)


def test_a_report_label_that_does_not_print_is_refused(
    reports: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """A file name with a newline would forge rows of the tables (a line starting `PASS`); with an escape it would
    drive the terminal: such a label is refused, naming it escaped, before anything is compared."""
    shutil.copy("base.json", "two\nPASS  forged line.json")
    shutil.copy("base.json", "evil\x1b[2J.json")
    for name in ("two\nPASS  forged line.json", "evil\x1b[2J.json"):
        code, out, err = run_cli(capsys, "compare", "base.json", "same.json", name)
        assert code == 2 and out == ""
        assert "holds a character that does not print" in err and "\x1b" not in err
        assert len(err.splitlines()) == 1
    code, out, _ = run_cli(
        capsys,
        "compare",
        "base.json",
        "same.json",
        "two\nPASS  forged line.json",
        "--label",
        "a",
        "--label",
        "b",
        "--label",
        "c",
    )
    assert code == 0 and "forged" not in out


def test_reports_under_trec_eval_names_are_not_passed_on_no_gated_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scored under trec_eval's names, the reports hold none of the default gated measures: the gate had nothing to
    read, which is no pass (exit 2, naming --gate-measures), and a paper table without columns is not written;
    naming the measure gates it."""
    import evalkit
    from evalkit.reporting.report import report_json as as_json

    monkeypatch.chdir(tmp_path)
    qrels = {f"q{i:02d}": {f"d{i}": 1} for i in range(30)}
    base = {q: {d: 1.0 for d in judged} for q, judged in qrels.items()}
    head = {q: ({"x": 1.0} if i < 12 else dict(base[q])) for i, q in enumerate(qrels)}
    for name, run in (("base", base), ("head", head)):
        report = evalkit.score(qrels, {"sys": run}, measures=["ndcg_cut_10", "P_10", "map"]).to_report()
        Path(f"{name}.json").write_bytes(as_json(report))
    code, out, err = run_cli(capsys, "compare", "base.json", "head.json")
    assert code == 0 and "NOT GATED  none of the default gated measures (ndcg@10, recall@10)" in out
    assert "PASS" not in out
    code, out, err = run_cli(capsys, "compare", "base.json", "head.json", "--fail-on-regression")
    assert code == 2 and "the regression gate cannot run" in err and "--gate-measures" in err
    code, out, err = run_cli(capsys, "compare", "base.json", "head.json", "--format", "markdown")
    assert code == 2 and out == "" and "no paper table" in err
    code, out, err = run_cli(
        capsys, "compare", "base.json", "head.json", "--fail-on-regression", "--gate-measures", "ndcg_cut_10"
    )
    assert code == 1 and "FAIL  sys ndcg_cut_10 [all]" in out + err
    code, out, err = run_cli(
        capsys, "compare", "base.json", "head.json", "--gate-measures", "ndcg_cut_10", "--format", "markdown"
    )
    assert code == 0 and "| a) base |" in out and "FAIL  sys ndcg_cut_10 [all]" not in out  # stdout: the table
    assert "FAIL  sys ndcg_cut_10 [all]" in err  # what the gate read of it, beside
    code, out, err = run_cli(
        capsys,
        "compare",
        "base.json",
        "head.json",
        "--gate-measures",
        "ndcg_cut_10",
        "--format",
        "latex",
        "--output",
        "cmp.json",
    )
    assert code == 0 and "comparison written to cmp.json" in err and "comparison written" not in out
