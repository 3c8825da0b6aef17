"""`evalkit run --calibrate`, `evalkit score --floor` and the notebooks' `calibrate` parameter: clear refusals,
printed and recorded choices, byte-identical reports across processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.app.cli import main
from evalkit.app.notebook import BenchmarkParameters, EvaluationParameters
from evalkit.reporting.report import parse_report, report_json
from evalkit.runs.precomputed import score

from ..conftest import ROOT, SYNTHETIC_DIR

RUN = ["run", "--fixture", str(SYNTHETIC_DIR), "--runs", "1", "--no-gates"]


@pytest.fixture
def out() -> Iterator[str]:
    name = f"reports/pytest-{uuid.uuid4().hex[:8]}"
    yield name
    shutil.rmtree(ROOT / name, ignore_errors=True)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--calibrate", "0"], "--calibrate must be a fraction strictly between 0 and 1, got 0.0"),
        (["--calibrate", "1.5"], "--calibrate must be a fraction strictly between 0 and 1, got 1.5"),
        (["--calibrate", "nan"], "--calibrate must be a fraction strictly between 0 and 1, got nan"),
        (["--calibrate", "0.01"], "--calibrate 0.01: the en no-answer queries (8) would leave the calibration part"),
        (["--calibrate-seed", "4"], "--calibrate-seed needs --calibrate FRACTION"),
        (["--calibrate", "0.5", "--calibrate-seed", "-1"], "--calibrate-seed must be a whole number of at least 0"),
        (["--calibrate", "0.5", "--ray", "local"], "--calibrate runs in this process"),
    ],
)
def test_bad_calibration_options_exit_2_naming_the_option(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*RUN, *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert "Traceback" not in captured.err


def test_a_calibrated_run_prints_and_records_its_choices(out: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "--calibrate", "0.5", "--calibrate-seed", "2", "--output", f"{out}/r.json"]) == 0
    printed = capsys.readouterr().out
    report = parse_report((ROOT / out / "r.json").read_bytes())
    record = report.calibration
    assert record is not None and record.seed == 2 and record.fusion is not None
    assert f"split sha256 {record.split_sha256[:16]}" in printed
    assert f"fusion chosen on hybrid: {record.fusion.chosen}" in printed
    assert "floor of hybrid-rerank" in printed
    assert len(report.queries.query_ids) == record.evaluation_queries == 42
    settings = report.retrieval_settings
    assert settings is not None and settings.lexical_weight == record.fusion.settings.lexical_weight
    assert f"lexical_weight={settings.lexical_weight}" in printed


def test_calibrated_reports_are_byte_identical_across_processes(out: str) -> None:
    argv = [*RUN, "--calibrate", "0.4", "--ablations", "lexical,alias-vector,hybrid,hybrid-rerank"]
    written = []
    for seed in ("1", "987"):
        target = f"{out}/r{seed}.json"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        code = "import sys; from evalkit.app.cli import main; sys.exit(main(sys.argv[1:]))"
        done = subprocess.run([sys.executable, "-c", code, *argv, "--output", target], cwd=ROOT, env=env, check=False)
        assert done.returncode == 0
        written.append(_without_latency((ROOT / target).read_bytes()))
    assert written[0] == written[1]


def _without_latency(data: bytes) -> object:
    report = parse_report(data).model_dump(mode="json")
    for ablation in report["ablations"].values():
        ablation.pop("latency_ms")
    return report


def test_score_floor_withholds_queries_below_it() -> None:
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d9": 0}}
    run = {"q1": {"d1": 0.9, "d2": 0.2}, "q2": {"d2": 0.3, "d1": 0.1}, "q3": {"d3": 0.4}}
    plain = score(qrels, run, measures=["recall@10"])
    floored = score(qrels, run, measures=["recall@10"], floor=0.35)
    assert plain.per_query["recall@10"].dropna().to_dict() == {"q1": 1.0, "q2": 1.0}
    assert floored.per_query["recall@10"].dropna().to_dict() == {"q1": 1.0, "q2": 0.0}
    assert any("floor 0.35: 1 query(ies) whose best score is below it return nothing" in n for n in floored.notes)
    fpr_plain = score(qrels, run).aggregate["no_answer_fpr"]
    assert fpr_plain == 1.0
    assert score(qrels, run, floor=0.5).aggregate["no_answer_fpr"] == 0.0
    with pytest.raises(ValueError, match="floor must be a finite number"):
        score(qrels, run, floor=float("inf"))


def test_the_floor_is_written_into_the_report_and_its_definition() -> None:
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    run = {"q1": {"d1": 0.9}, "q2": {"d2": 0.3}}
    plain = score(qrels, run, measures=["recall@10"]).to_report()
    floored = score(qrels, run, measures=["recall@10"], floor=0.35).to_report()
    assert [a.system.abstention_floor for a in floored.ablations.values() if a.system] == [0.35]
    assert '"abstention_floor"' not in report_json(plain).decode()  # absent without a floor: bytes unchanged
    assert '"abstention_floor": 0.35' in report_json(floored).decode()
    assert parse_report(report_json(floored)) == floored
    assert floored.evaluation_definition_hash != plain.evaluation_definition_hash


def test_score_floor_goes_with_qrels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "x.trec"
    run.write_text("q-en-001 Q0 en-trash-01 1 1.0 mine\n", encoding="utf-8")
    assert main(["score", "--fixture", str(SYNTHETIC_DIR), "--run", str(run), "--floor", "0.5"]) == 2
    assert "--floor goes with --qrels" in capsys.readouterr().err


def test_score_missing_skip_goes_with_qrels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "x.trec"
    run.write_text("q-en-001 Q0 en-trash-01 1 1.0 mine\n", encoding="utf-8")
    assert main(["score", "--fixture", str(SYNTHETIC_DIR), "--run", str(run), "--missing", "skip"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--missing skip goes with --qrels" in err and "Traceback" not in err


def test_score_floor_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.trec"
    qrels.write_text("q1 0 d1 1\nq2 0 d2 1\n", encoding="utf-8")
    run.write_text("q1 Q0 d1 1 0.9 r\nq2 Q0 d2 1 0.3 r\n", encoding="utf-8")
    argv = ["score", "--qrels", str(qrels), "--run", str(run), "--measures", "recall@10", "--format", "trec"]
    assert main(argv) == 0
    assert capsys.readouterr().out.split() == ["recall@10", "all", "1.0000"]
    assert main([*argv, "--floor", "0.5"]) == 0
    assert capsys.readouterr().out.split() == ["recall@10", "all", "0.5000"]


def _evaluation_values(**changes: object) -> dict[str, object]:
    values: dict[str, object] = {
        "fixture": "fixtures/synthetic-bilingual-v1",
        "ablations": ["lexical"],
        "runs": 1,
        "report_output": None,
        "figures_dir": None,
        "min_reranked_mrr_at_10": None,
        "min_reranked_ndcg_at_10": None,
        "max_no_answer_fpr": None,
        "max_rerank_ndcg_drop": None,
    }
    return {**values, **changes}


def test_notebook_calibrate_parameter_is_validated() -> None:
    assert EvaluationParameters.model_validate(_evaluation_values(calibrate=0.5)).calibrate == 0.5
    assert EvaluationParameters.model_validate(_evaluation_values()).calibrate is None
    for bad in (0.0, 1.0, 2.5):
        with pytest.raises(ValueError, match="calibrate must be a fraction strictly between 0 and 1"):
            EvaluationParameters.model_validate(_evaluation_values(calibrate=bad))


def test_benchmark_notebook_calibrate_reaches_the_config() -> None:
    values: dict[str, object] = {
        "data_dir": "../shared/data",
        "settings": ["en/paragraph"],
        "ablations": ["lexical"],
        "held_out_fraction": 0.1,
        "seed": 0,
        "max_articles": 6,
        "runs": 1,
        "rerank_min_score": 0.0,
        "cache_dir": ".cache/evalkit/embeddings",
        "summary_output": None,
        "figures_dir": None,
    }
    plain = BenchmarkParameters.model_validate(values)
    assert plain.config.calibration is None
    assert "calibration" not in plain.config.model_dump(mode="json"), "summaries without calibration are unchanged"
    calibrated = BenchmarkParameters.model_validate({**values, "calibrate": 0.5, "calibrate_seed": 3})
    options = calibrated.config.calibration
    assert options is not None and (options.fraction, options.seed) == (0.5, 3)
    with pytest.raises(ValueError, match="calibrate must be a fraction"):
        BenchmarkParameters.model_validate({**values, "calibrate": 1.0})


def test_notebook_shards_without_ray_are_refused() -> None:
    """As the CLI refuses --shards without --ray: the notebook ignored shards 4 and ran in one process."""
    with pytest.raises(ValueError, match="shards: needs ray"):
        EvaluationParameters.model_validate(_evaluation_values(shards=4))
    assert EvaluationParameters.model_validate(_evaluation_values(shards=3, ray="local")).shards == 3
    assert EvaluationParameters.model_validate(_evaluation_values(shards=1)).ray is None
