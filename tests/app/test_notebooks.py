"""The notebooks: committed clean, parameters strict, headless runs produce every file and gates fail loudly.

nbval executes every notebook in notebooks/ separately (``pytest --nbval-lax notebooks``, part of ``make test``).
"""

from __future__ import annotations

import ast
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from evalkit.app.cli import main
from evalkit.app.headless import NotebookParameterError, declared_parameters, parse_value, run_notebook
from evalkit.app.notebook import CompareParameters, EvaluationParameters, UnknownParameterError, injected_names
from evalkit.reporting.report import parse_report

from ..conftest import ROOT

pytestmark = pytest.mark.slow

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MAIN = ROOT / "notebooks" / "retrieval_evaluation.ipynb"
ALLOWED_NOTEBOOK_METADATA = {"kernelspec", "language_info"}


def test_both_notebooks_exist() -> None:
    assert {p.name for p in NOTEBOOKS} >= {"retrieval_evaluation.ipynb", "failure_analysis.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_committed_clean(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert set(notebook.metadata) <= ALLOWED_NOTEBOOK_METADATA
    assert set(notebook.metadata.get("language_info", {})) <= {"name"}
    for cell in notebook.cells:
        assert set(cell.metadata) <= {"tags"}, cell.id
        if cell.cell_type == "code":
            assert cell.execution_count is None, cell.id
            assert cell.outputs == [], cell.id
            assert "def " not in cell.source and "class " not in cell.source, "helpers belong in the package"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_is_tagged_parameters(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    first = next(c for c in notebook.cells if c.cell_type == "code")
    assert first.metadata.get("tags") == ["parameters"]
    declared = declared_parameters(path)
    assert declared, "papermill must be able to read the parameters"
    for parameter in declared.values():
        assert parameter["help"], f"{parameter['name']} needs a comment"
        assert parameter["inferred_type_name"] != "None", f"{parameter['name']} needs a type"


def test_main_notebook_declares_the_issue_parameters() -> None:
    declared = declared_parameters(MAIN)
    assert set(declared) == set(EvaluationParameters.model_fields)
    # Gate bounds default to None: the fixture's gates.json decides unless a parameter overrides it, as in `run`.
    for bound in ("min_reranked_mrr_at_10", "min_reranked_ndcg_at_10", "max_no_answer_fpr", "max_rerank_ndcg_drop"):
        assert declared[bound]["default"] == "None", bound
    assert declared["ties"]["default"] == '"evalkit"'
    assert declared["report_output"]["default"] == "None"
    assert declared["runs"]["default"] == "2"


def test_last_cell_checks_the_gates() -> None:
    notebook = nbformat.read(MAIN, as_version=4)
    last = [c for c in notebook.cells if c.cell_type == "code"][-1]
    assert "enforce_gates(" in last.source  # raises GateFailure unless no_gates


def test_injected_names_come_from_papermill_cells_only() -> None:
    history = ["", "fixture = 'x'", "# Parameters\nruns = 3\nbogus = 1\n", "params = 1"]
    assert injected_names(history) == ["runs", "bogus"]


def test_unknown_injected_parameter_is_refused() -> None:
    namespace = {"In": ["# Parameters\nmin_reranked_mrr = 0.9\n"], "fixture": "fixtures/synthetic-bilingual-v1"}
    with pytest.raises(UnknownParameterError, match="min_reranked_mrr"):
        EvaluationParameters.from_namespace(namespace)


def test_parameter_values_are_validated() -> None:
    # Defaults are Python literals (no_gates: bool = False), so they are read as such, not as JSON.
    defaults = {name: ast.literal_eval(p["default"]) for name, p in declared_parameters(MAIN).items()}
    assert EvaluationParameters.from_namespace(defaults).runs == 2
    with pytest.raises(ValueError, match="runs"):
        EvaluationParameters.from_namespace({**defaults, "runs": 0})
    with pytest.raises(ValueError, match="unknown ablation"):
        EvaluationParameters.from_namespace({**defaults, "ablations": ["nope"]})


def test_runner_refuses_undeclared_parameters_before_running() -> None:
    with pytest.raises(NotebookParameterError, match="min_mrr"):
        run_notebook(ROOT, {"min_mrr": 0.9}, run_id=f"pytest-{uuid.uuid4().hex[:8]}")


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"fixture": "../no-such-fixture"}, "parameter fixture: '../no-such-fixture' is no folder"),
        ({"fixture": "fixtures/no-such"}, "parameter fixture: 'fixtures/no-such' is no folder"),
        ({"retriever": "no-such-http.json"}, "parameter retriever: 'no-such-http.json' is no file"),
    ],
)
def test_a_missing_input_is_refused_before_anything_is_written(parameters: dict[str, str], message: str) -> None:
    """Each of these failed in a cell, exit 2, after reports/<run-id>/ and its notebook were written."""
    run_id = f"pytest-{uuid.uuid4().hex[:8]}"
    with pytest.raises(NotebookParameterError, match=message):
        run_notebook(ROOT, parameters, run_id=run_id)
    assert not (ROOT / "reports" / run_id).exists()


def test_the_command_refuses_a_folder_that_is_no_evalkit_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notebooks").mkdir()  # a notebooks/ folder, but no pyproject.toml beside evalkit/
    monkeypatch.chdir(tmp_path)
    assert main(["notebook", "--run-id", "elsewhere"]) == 2
    assert "no evalkit project (pyproject.toml beside evalkit/)" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


@pytest.fixture
def run_id() -> Iterator[str]:
    name = f"pytest-{uuid.uuid4().hex[:8]}"
    yield name
    shutil.rmtree(ROOT / "reports" / name, ignore_errors=True)


def test_default_run_passes_and_writes_every_file(run_id: str) -> None:
    run = run_notebook(ROOT, {}, run_id=run_id)
    assert run.passed, run.error_message
    assert run.run_dir == (ROOT / "reports" / run_id).resolve()
    names = {p.relative_to(run.run_dir).as_posix() for p in run.run_dir.rglob("*") if p.is_file()}
    figures = {f"figures/{n}.{s}" for n in ("language_metrics", "latency", "rerank_delta") for s in ("png", "svg")}
    assert names == {"retrieval_evaluation.ipynb", "retrieval_evaluation.html", "report.json", *figures}
    report = parse_report((run.run_dir / "report.json").read_bytes())
    assert report.gates and all(g.passed for g in report.gates)
    html = (run.run_dir / "retrieval_evaluation.html").read_text(encoding="utf-8")
    assert "<html" in html[:2000].lower()
    assert html.count("data:image/png;base64") >= 3, (
        "the three charts are shown in the export (the template has a PNG too)"
    )
    executed = nbformat.read(run.notebook, as_version=4)
    images = [c for c in executed.cells if any("image/png" in o.get("data", {}) for o in c.get("outputs", []))]
    assert len(images) == 3
    private = str(ROOT.resolve())
    assert private not in run.notebook.read_text(encoding="utf-8"), "no absolute workspace path in the notebook"
    assert private not in html


def test_impossible_gate_fails_in_the_final_cell(run_id: str) -> None:
    run = run_notebook(ROOT, {"min_reranked_mrr_at_10": 1.01}, run_id=run_id)
    assert run.error_name == "GateFailure"
    assert "hybrid-rerank mrr@10" in (run.error_message or "")
    executed = nbformat.read(run.notebook, as_version=4)
    code_cells = [c for c in executed.cells if c.cell_type == "code"]
    failing = [c for c in code_cells if any(o.get("output_type") == "error" for o in c.outputs)]
    assert failing == [code_cells[-1]]
    assert run.html.exists()


def test_cli_notebook_exit_codes(
    run_id: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["notebook", "--run-id", run_id, "-p", "max_rerank_ndcg_drop", "-1"]) == 1
    captured = capsys.readouterr()
    assert "GateFailure" in captured.err
    assert f"reports/{run_id}/retrieval_evaluation.html" in captured.out
    assert main(["notebook", "--run-id", run_id, "-p", "bogus", "1"]) == 2
    assert "does not declare parameter(s) bogus" in capsys.readouterr().err


def test_parse_value() -> None:
    assert parse_value("0.8") == 0.8
    assert parse_value("null") is None
    assert parse_value('["lexical"]') == ["lexical"]
    assert parse_value("fixtures/x") == "fixtures/x"
    assert json.dumps(parse_value("true")) == "true"


COMPARE = ROOT / "notebooks" / "compare_reports.ipynb"


def test_compare_notebook_declares_its_model_and_ends_with_the_gate() -> None:
    assert set(declared_parameters(COMPARE)) == set(CompareParameters.model_fields)
    assert declared_parameters(COMPARE)["reports"]["default"] == "None"
    last = [c for c in nbformat.read(COMPARE, as_version=4).cells if c.cell_type == "code"][-1]
    assert "check_regressions(" in last.source


def test_compare_notebook_reads_a_list_of_reports(tmp_path: Path) -> None:
    defaults = {name: ast.literal_eval(p["default"]) for name, p in declared_parameters(COMPARE).items()}
    params = CompareParameters.from_namespace(defaults)
    sentinel = [object(), object()]
    assert params.systems(*sentinel) == (sentinel, ["base", "head"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="two or more"):
        CompareParameters.from_namespace({**defaults, "reports": ["a.json"]}).systems(*sentinel)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"report reports/missing-pytest\.json"):
        CompareParameters.from_namespace({**defaults, "reports": ["reports/missing-pytest.json", "b.json"]}).systems(
            *sentinel  # type: ignore[arg-type]
        )


def test_notebook_gates_another_fixture_as_evalkit_run_does(
    run_id: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The notebook is the CLI's twin: on a fixture that is not the synthetic one, with a gates.json of its own, the
    notebook and ``evalkit run`` (given the fixture's folder or its file) assess the same gates with the same
    outcomes. The bounds are set so that one gate passes and one fails, so the outcomes cannot agree by accident."""
    folder = ROOT / "reports" / run_id / "other-fixture"
    folder.mkdir(parents=True)
    for name in ("fixture.json", "aliases.json"):
        shutil.copy(ROOT / "tests" / "fixtures" / "tiny" / name, folder / name)
    gates = {
        "gates": [
            {"system": "lexical", "measure": "recall@10", "min": 0.01},
            {"system": "hybrid", "measure": "ndcg@10", "min": 1.01},
            {"system": "hybrid-rerank", "measure": "mrr@10", "min": 0.01},
        ]
    }
    (folder / "gates.json").write_text(json.dumps(gates), encoding="utf-8")
    relative = folder.relative_to(ROOT).as_posix()
    systems = ["lexical", "hybrid", "hybrid-rerank"]
    parameters = {"fixture": relative, "ablations": systems, "runs": 1, "no_gates": True}
    run = run_notebook(ROOT, parameters, run_id=f"{run_id}-nb")
    try:
        assert run.passed, run.error_message
        assert run.report is not None
        report = parse_report(run.report.read_bytes())
    finally:
        shutil.rmtree(run.run_dir, ignore_errors=True)
    notebook_gates = [(g.gate, g.value, g.threshold, g.passed) for g in report.gates]
    assert [(threshold, passed) for _, _, threshold, passed in notebook_gates] == [
        (0.01, True),
        (1.01, False),
        (0.01, True),
    ]
    monkeypatch.chdir(ROOT)
    for given in (relative, f"{relative}/fixture.json"):
        output = f"reports/{run_id}/cli-{len(given)}.json"
        args = ["run", "--fixture", given, "--ablations", ",".join(systems), "--runs", "1", "--no-gates"]
        assert main([*args, "--output", output]) == 0
        capsys.readouterr()
        cli_gates = [(g.gate, g.value, g.threshold, g.passed) for g in parse_report((ROOT / output).read_bytes()).gates]
        assert cli_gates == notebook_gates, given


def _notebook_of(root: Path, *sources: str) -> Path:
    notebook = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell("x = 1")
    parameters.metadata["tags"] = ["parameters"]
    notebook.cells = [parameters, *(nbformat.v4.new_code_cell(s) for s in sources)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = root / "notebooks" / "n.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(notebook, path)
    return path.relative_to(root)


def test_a_kernel_that_dies_is_a_failed_run_with_its_notebook_kept_and_no_kernel_log_on_stderr(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    notebook = _notebook_of(tmp_path, "print('ran')", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "2")
    run = run_notebook(tmp_path, {}, notebook=notebook, run_id="dies")
    assert run.error_name == "DeadKernelError"
    assert "the kernel died while a cell ran (killed from outside" in (run.error_message or "")
    executed = nbformat.read(run.notebook, as_version=4)
    assert [o.get("text") for o in executed.cells[1].outputs] == ["ran\n"]
    assert run.html.exists()
    assert "[IPKernelApp]" not in capfd.readouterr().err  # the kernel's own log lines are not the command's


def test_compare_notebook_gates_the_measures_it_is_given(run_id: str) -> None:
    """Reports scored under trec_eval's names hold none of the default gated measures: with `gate_measures` the
    notebook gates them (and draws its paper table) as `evalkit compare --gate-measures` does."""
    import evalkit
    from evalkit.reporting.report import report_json

    folder = ROOT / "reports" / run_id / "in"
    folder.mkdir(parents=True)
    qrels = {f"q{i:02d}": {f"d{i}": 1} for i in range(30)}
    base = {q: {d: 1.0 for d in judged} for q, judged in qrels.items()}
    head = {q: ({"x": 1.0} if i < 12 else dict(base[q])) for i, q in enumerate(qrels)}
    for name, run in (("base", base), ("head", head)):
        report = evalkit.score(qrels, {"sys": run}, measures=["ndcg_cut_10", "P_10"]).to_report()
        (folder / f"{name}.json").write_bytes(report_json(report))
    relative = f"reports/{run_id}/in"
    parameters = {
        "base": f"{relative}/base.json",
        "head": f"{relative}/head.json",
        "ablation": "sys",
        "measure": "ndcg_cut_10",
        "gate_measures": "ndcg_cut_10",
    }
    run = run_notebook(ROOT, parameters, notebook=Path("notebooks/compare_reports.ipynb"), run_id=f"{run_id}-nb")
    shutil.rmtree(ROOT / "reports" / f"{run_id}-nb", ignore_errors=True)
    assert run.error_name == "GateFailure", run.error_message
    assert "ndcg_cut_10" in (run.error_message or "")
    listed = {**parameters, "base": None, "head": None, "reports": [parameters["base"], parameters["head"]]}
    run = run_notebook(ROOT, listed, notebook=Path("notebooks/compare_reports.ipynb"), run_id=f"{run_id}-list")
    shutil.rmtree(ROOT / "reports" / f"{run_id}-list", ignore_errors=True)
    assert run.error_name == "GateFailure", run.error_message  # the reports gated, not a fresh default fixture
    assert "ndcg_cut_10" in (run.error_message or "")
