"""Gates as data: the gates.json schema, --gate options, overrides, and which gates are evaluated or skipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.app.cli import main
from evalkit.app.cli.options import fixture_inputs
from evalkit.app.notebook import EvaluationParameters
from evalkit.common.output import ENV_VAR
from evalkit.data.fixture import LoadedFixture
from evalkit.reporting.build import build_report
from evalkit.reporting.gate_specs import (
    GATE_FORM,
    GATES_FILE,
    GateSpec,
    GateThresholds,
    load_gate_file,
    merge_gates,
    parse_gate,
)
from evalkit.reporting.gates import assess, collect_gates, evaluate_gates, load_baselines
from evalkit.reporting.report import GateOutcome, Report, parse_report
from evalkit.runs.ablations import ABLATION_IDS
from evalkit.runs.evaluation import Evaluation

from ..conftest import SYNTHETIC_DIR, TINY_DIR

SEED_FILE = load_gate_file(SYNTHETIC_DIR)
assert SEED_FILE is not None
SEED = SEED_FILE.gates


def _value(report: Report, system: str, slice_name: str, measure: str) -> float:
    return float(report.ablations[system].metrics[slice_name][measure])  # type: ignore[index]


def _outcome(name: str, value: float, threshold: float, comparison: Literal[">=", "<="]) -> GateOutcome:
    passed = value >= threshold - 1e-12 if comparison == ">=" else value <= threshold + 1e-12
    return GateOutcome(gate=name, value=value, threshold=threshold, comparison=comparison, passed=passed)


def _seed_outcomes_as_hard_coded(report: Report) -> list[GateOutcome]:
    """The gates of the synthetic fixture as they were hard-coded: four seed gates, then every baseline floor."""
    rerank, hybrid = "hybrid-rerank", "hybrid"
    outcomes = [
        _outcome("hybrid-rerank mrr@10", _value(report, rerank, "all", "mrr@10"), 0.78, ">="),
        _outcome("hybrid-rerank ndcg@10", _value(report, rerank, "all", "ndcg@10"), 0.75, ">="),
        _outcome("hybrid-rerank no_answer_fpr", _value(report, rerank, "all", "no_answer_fpr"), 0.34, "<="),
        _outcome(
            "rerank ndcg@10 drop vs hybrid",
            _value(report, hybrid, "all", "ndcg@10") - _value(report, rerank, "all", "ndcg@10"),
            0.05,
            "<=",
        ),
    ]
    baselines = load_baselines(SYNTHETIC_DIR)
    assert baselines is not None and baselines.tolerance == 0.001
    for ablation in ("alias-vector", "hybrid", "lexical", "token-hash-vector"):
        for slice_name in ("all", "en", "zh"):
            for measure in ("context_precision", "context_recall"):
                floor = baselines.ablations[ablation][slice_name][measure]
                value = _value(report, ablation, slice_name, measure)
                name = f"{ablation} {measure} [{slice_name}] baseline"
                outcomes.append(_outcome(name, value, max(floor - 0.001, 0.0), ">="))
    return outcomes


# --- the synthetic fixture's gates are what they were --------------------------------------------------------------


def test_synthetic_gates_are_unchanged(synthetic: LoadedFixture, synthetic_evaluation: Evaluation) -> None:
    gates = collect_gates(SYNTHETIC_DIR, synthetic.fixture)
    report = assess(synthetic_evaluation, gates, requested=ABLATION_IDS)
    assert list(report.gates) == _seed_outcomes_as_hard_coded(report)
    assert all(g.passed for g in report.gates) and len(report.gates) == 28


def test_default_threshold_options_and_notebook_parameters_give_the_same_gates(
    synthetic: LoadedFixture, synthetic_evaluation: Evaluation
) -> None:
    unset = collect_gates(SYNTHETIC_DIR, synthetic.fixture, thresholds=GateThresholds())
    seed_values = GateThresholds(
        min_reranked_mrr_at_10=0.78, min_reranked_ndcg_at_10=0.75, max_no_answer_fpr=0.34, max_rerank_ndcg_drop=0.05
    )
    assert collect_gates(SYNTHETIC_DIR, synthetic.fixture, thresholds=seed_values) == unset
    params = EvaluationParameters.model_validate(
        {
            "fixture": "fixtures/synthetic-bilingual-v1",
            "ablations": list(ABLATION_IDS),
            "runs": 1,
            "report_output": None,
            "figures_dir": None,
            **seed_values.model_dump(),
        }
    )
    assert params.gates(synthetic.fixture) == unset
    report = build_report(synthetic_evaluation)
    assert evaluate_gates(report, params.gates(synthetic.fixture)) == evaluate_gates(report, unset)


def test_a_notebook_threshold_of_none_keeps_the_file_entry(synthetic: LoadedFixture) -> None:
    values: dict[str, Any] = {"fixture": "fixtures/synthetic-bilingual-v1", "ablations": ["lexical"], "runs": 1}
    values |= {"report_output": None, "figures_dir": None, "max_no_answer_fpr": 0.2, "max_rerank_ndcg_drop": None}
    params = EvaluationParameters.model_validate(
        {**values, "min_reranked_mrr_at_10": 0.9, "min_reranked_ndcg_at_10": None}
    )
    thresholds = [g.threshold for g in params.gates(synthetic.fixture)[:4]]
    assert thresholds == [0.9, 0.75, 0.2, 0.05]


# --- --gate options ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hybrid-rerank ndcg@10 >= 0.8", {"system": "hybrid-rerank", "measure": "ndcg@10", "min": 0.8}),
        ("lexical recall@10[zh] >= 0.9", {"system": "lexical", "measure": "recall@10", "slice": "zh", "min": 0.9}),
        ("  lexical   recall@10 [ en ]<=.5 ", {"system": "lexical", "measure": "recall@10", "slice": "en", "max": 0.5}),
        ("my-run ndcg_cut_10[all] >= 1e-3", {"system": "my-run", "measure": "ndcg_cut_10", "min": 0.001}),
        ("run.v2:a no_answer_fpr <= 0", {"system": "run.v2:a", "measure": "no_answer_fpr", "max": 0.0}),
        ("x P_5 >= -0.5", {"system": "x", "measure": "P_5", "min": -0.5}),
    ],
)
def test_valid_gate_options(text: str, expected: dict[str, Any]) -> None:
    assert parse_gate(text) == GateSpec.model_validate(expected)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hybrid-rerank ndcg@10",
        "hybrid-rerank ndcg@10 > 0.8",
        "hybrid-rerank ndcg@10 == 0.8",
        "hybrid-rerank ndcg@10 => 0.8",
        "hybrid-rerank >= 0.8",
        "a b c >= 0.8",
        "x ndcg@10 >= 0.8 extra",
        "x ndcg@10 >= nan",
        "x ndcg@10 >= inf",
        "x ndcg@10 >= 0,8",
        "x ndcg@10 >= 1_0",
        "x ndcg@10[zh >= 0.8",
        "x ndcg@10[zh]] >= 0.8",
        "x ndcg@10 >=",
    ],
)
def test_malformed_gate_options_name_the_option_and_the_form(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_gate(text)
    message = str(info.value)
    assert message.startswith(f"--gate {text!r}: expected '{GATE_FORM}'")
    assert "'hybrid-rerank ndcg@10 >= 0.8'" in message


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (
            "hybrid-rerank f1@10 >= 0.8",
            ["field 'measure'", "unknown measure 'f1@10'", "ndcg[(gain=exponential|linear)][@k]"],
        ),
        ("hybrid-rerank ndcg >= 0.8 ", []),  # valid: ndcg without a cutoff (trec_eval's)
        (
            "hybrid-rerank precision >= 0.8",
            ["field 'measure'", "malformed measure 'precision'", "precision[(rel=<integer>)]@k"],
        ),
        ("lexical precision(rel=2)@5[zh] >= 0.5", []),  # valid: a typed parameter in parentheses
        ("lexical recall@10[fr] >= 0.9", ["field 'slice'", "'all', 'en' or 'zh'"]),
        ("a/b ndcg@10 >= 0.1", ["field 'system'"]),
        ("x ndcg@10 >= 1e999", ["field 'min'", "finite"]),
    ],
)
def test_invalid_gate_fields_name_the_option_and_the_field(text: str, fragments: list[str]) -> None:
    if not fragments:
        assert parse_gate(text).measure in ("ndcg", "precision(rel=2)@5")
        return
    with pytest.raises(ValueError) as info:
        parse_gate(text, option="--check")
    message = str(info.value)
    assert message.startswith(f"--check {text!r}: ")
    for fragment in fragments:
        assert fragment in message


SYSTEMS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,20}", fullmatch=True)
MEASURES = st.sampled_from(["mrr@10", "ndcg@10", "recall@5", "context_recall", "no_answer_fpr", "ndcg_cut_10", "P_5"])
BOUNDS = st.floats(min_value=-10, max_value=10, allow_nan=False)


@given(system=SYSTEMS, measure=MEASURES, slice_name=st.sampled_from([None, "all", "en", "zh"]), bound=BOUNDS)
def test_gate_options_round_trip(system: str, measure: str, slice_name: str | None, bound: float) -> None:
    for op, field in ((">=", "min"), ("<=", "max")):
        text = f"{system} {measure}{'' if slice_name is None else f'[{slice_name}]'} {op} {bound!r}"
        gate = parse_gate(text)
        assert (gate.system, gate.measure, gate.slice, getattr(gate, field)) == (
            system,
            measure,
            slice_name or "all",
            bound,
        )
        assert gate.label == f"{system} {measure}" + ("" if slice_name in (None, "all") else f" [{slice_name}]")


@given(st.text(max_size=60))
def test_any_gate_text_parses_or_raises_value_error(text: str) -> None:
    try:
        parse_gate(text)
    except ValueError as exc:
        assert str(exc).startswith("--gate ")


# --- overrides -----------------------------------------------------------------------------------------------------


def test_a_gate_option_replaces_the_file_entry_of_its_system_measure_slice_and_direction() -> None:
    merged = merge_gates(SEED, [parse_gate("hybrid-rerank ndcg@10 >= 0.8")])
    assert [g.label for g in merged] == [g.label for g in SEED]
    assert merged[1].min == 0.8
    assert merged[3] == SEED[3], "the drop gate on the same measure is another gate"
    added = merge_gates(
        SEED, [parse_gate("hybrid-rerank ndcg@10 <= 0.99"), parse_gate("hybrid-rerank ndcg@10[zh] >= 0.5")]
    )
    assert [g.label for g in added[4:]] == ["hybrid-rerank ndcg@10", "hybrid-rerank ndcg@10 [zh]"]
    assert added[:4] == SEED


def test_an_override_keeps_the_name_of_the_entry_it_replaces() -> None:
    drop = GateSpec.model_validate(
        {"system": "hybrid-rerank", "measure": "ndcg@10", "max_drop_vs": {"system": "hybrid", "max": 0.1}}
    )
    assert drop.label == "hybrid-rerank ndcg@10 drop vs hybrid"
    merged = merge_gates(SEED, [drop])
    assert (merged[3].label, merged[3].threshold) == ("rerank ndcg@10 drop vs hybrid", 0.1)


def test_thresholds_and_gate_options_override_the_file(synthetic: LoadedFixture) -> None:
    thresholds = GateThresholds(min_reranked_mrr_at_10=0.9, max_rerank_ndcg_drop=0.01)
    gates = collect_gates(SYNTHETIC_DIR, synthetic.fixture, thresholds=thresholds)
    assert [g.threshold for g in gates[:4]] == [0.9, 0.75, 0.34, 0.01]
    gates = collect_gates(
        SYNTHETIC_DIR, synthetic.fixture, thresholds=thresholds, options=["hybrid-rerank ndcg@10 >= 0.5"]
    )
    assert [g.threshold for g in gates[:4]] == [0.9, 0.5, 0.34, 0.01]


@pytest.mark.parametrize(
    ("thresholds", "options", "named"),
    [
        (
            GateThresholds(min_reranked_mrr_at_10=0.99),
            ["hybrid-rerank mrr@10 >= 0.5"],
            "--min-reranked-mrr-at-10 0.99 and --gate 'hybrid-rerank mrr@10 >= 0.5'",
        ),
        (
            GateThresholds(),
            ["hybrid ndcg@10 >= 0.9", "lexical ndcg@10 >= 0.1", "hybrid ndcg@10 >= 0.5"],
            "--gate 'hybrid ndcg@10 >= 0.9' and --gate 'hybrid ndcg@10 >= 0.5'",
        ),
        (
            GateThresholds(max_no_answer_fpr=0.3),
            ["hybrid-rerank no_answer_fpr <= 0.3"],
            "--max-no-answer-fpr 0.3 and --gate 'hybrid-rerank no_answer_fpr <= 0.3'",
        ),
    ],
)
def test_two_options_setting_one_gate_are_refused_naming_both(
    synthetic: LoadedFixture, thresholds: GateThresholds, options: list[str], named: str
) -> None:
    # The later one used to replace the earlier without a word, so a stricter bound could vanish.
    with pytest.raises(ValueError, match="conflicting gate options") as info:
        collect_gates(SYNTHETIC_DIR, synthetic.fixture, thresholds=thresholds, options=options)
    assert named in str(info.value)


def test_options_on_one_measure_in_either_direction_or_slice_are_distinct_gates(synthetic: LoadedFixture) -> None:
    options = ["hybrid-rerank mrr@10 <= 0.99", "hybrid-rerank mrr@10[zh] >= 0.5"]
    gates = collect_gates(
        SYNTHETIC_DIR, synthetic.fixture, thresholds=GateThresholds(min_reranked_mrr_at_10=0.6), options=options
    )
    assert [g.label for g in gates[4:6]] == ["hybrid-rerank mrr@10", "hybrid-rerank mrr@10 [zh]"]
    assert (gates[0].threshold, gates[4].threshold, gates[5].threshold) == (0.6, 0.99, 0.5)


@pytest.mark.parametrize(
    "flags",
    [
        ["--min-reranked-mrr-at-10", "0.99", "--gate", "hybrid-rerank mrr@10 >= 0.5"],
        ["--gate", "hybrid-rerank mrr@10 >= 0.5", "--min-reranked-mrr-at-10", "0.99"],
        ["--gate", "hybrid-rerank mrr@10 >= 0.9", "--gate", "hybrid-rerank mrr@10 >= 0.5"],
    ],
)
def test_cli_run_and_score_refuse_two_options_setting_one_gate(
    capsys: pytest.CaptureFixture[str], workspace: Path, flags: list[str]
) -> None:
    run_file = workspace / "hybrid-rerank.trec"
    run_file.write_text("q-en-001 Q0 en-trash-01 1 1.0 hybrid-rerank\n", encoding="utf-8")
    commands = (
        ["run", "--fixture", "fx", "--runs", "1", "--no-cache", "--ablations", "hybrid-rerank"],
        ["score", "--fixture", "fx", "--run", str(run_file)],
    )
    for argv in commands:
        assert main([*argv, *flags]) == 2
        out, err = capsys.readouterr()
        assert "PASS" not in out and "FAIL" not in out and err.count("conflicting gate options") == 1
        assert "hybrid-rerank mrr@10 >= 0.5'" in err and "0.9" in err


def test_score_against_qrels_refuses_two_gate_options_and_fixture_thresholds(
    capsys: pytest.CaptureFixture[str], workspace: Path
) -> None:
    """With --qrels there is no gates.json: a threshold option would replace nothing, and was ignored."""
    (workspace / "q.txt").write_text("q1 0 d1 1\n", encoding="utf-8")
    (workspace / "r.trec").write_text("q1 Q0 d1 1 1.0 sys\n", encoding="utf-8")
    base = ["score", "--qrels", "q.txt", "--run", "r.trec"]
    assert main([*base, "--gate", "sys ndcg@10 >= 0.5", "--gate", "sys ndcg@10 >= 0.1"]) == 2
    assert "--gate 'sys ndcg@10 >= 0.5' and --gate 'sys ndcg@10 >= 0.1' set the same gate" in capsys.readouterr().err
    assert main([*base, "--min-reranked-mrr-at-10", "0.99"]) == 2
    assert "--min-reranked-mrr-at-10 0.99 replaces a fixture's gates.json entry" in capsys.readouterr().err
    assert main([*base, "--gate", "sys ndcg@10 >= 0.5", "--gate", "sys ndcg@10 <= 1"]) == 0  # two directions


def test_without_gates_file_only_thresholds_options_and_baselines_apply(tiny: LoadedFixture, tmp_path: Path) -> None:
    assert collect_gates(TINY_DIR, tiny.fixture) == ()
    options = ["lexical recall@10 >= 0.5"]
    gates = collect_gates(TINY_DIR, tiny.fixture, thresholds=GateThresholds(max_no_answer_fpr=0.3), options=options)
    assert [g.label for g in gates] == ["hybrid-rerank no_answer_fpr", "lexical recall@10"]
    assert collect_gates(None, tiny.fixture, options=options) == (parse_gate(options[0]),)


def test_a_gate_option_on_a_system_not_evaluated_is_refused(tiny: LoadedFixture) -> None:
    with pytest.raises(ValueError, match=r"--gate hybrid-rerenk ndcg@10: no such system is evaluated here"):
        collect_gates(TINY_DIR, tiny.fixture, options=["hybrid-rerenk ndcg@10 >= 0.5"], systems=["lexical"])


# --- evaluated, not evaluated, skipped -----------------------------------------------------------------------------


def test_gates_on_systems_not_run_are_skipped_and_missing_values_of_requested_ones_fail(
    tiny_evaluation: Evaluation,
) -> None:
    full = build_report(tiny_evaluation)
    lexical = full.model_copy(update={"ablations": {"lexical": full.ablations["lexical"]}})
    gates = (*SEED, parse_gate("lexical recall@10 >= 0.1"), parse_gate("lexical recall@7 >= 0.1"))
    outcomes = evaluate_gates(lexical, gates)
    assert [(g.gate, g.passed, g.detail) for g in outcomes] == [
        ("lexical recall@10", True, ""),
        ("lexical recall@7", False, "not evaluated"),  # a measure the report does not hold
    ]
    asked = evaluate_gates(lexical, gates, requested=["lexical", "hybrid-rerank"])
    assert [g.gate for g in asked if g.detail == "not evaluated"] == [
        "hybrid-rerank mrr@10",
        "hybrid-rerank ndcg@10",
        "hybrid-rerank no_answer_fpr",
        "lexical recall@7",
    ], "the drop gate also names hybrid, which was not asked for"
    drop = evaluate_gates(lexical, SEED[3:], requested=["hybrid-rerank", "hybrid"])
    assert [(g.gate, g.detail) for g in drop] == [("rerank ndcg@10 drop vs hybrid", "not evaluated")]
    only_rerank = full.model_copy(update={"ablations": {"hybrid-rerank": full.ablations["hybrid-rerank"]}})
    assert [g.gate for g in evaluate_gates(only_rerank, SEED)] == [g.label for g in SEED[:3]]


# --- the CLI -------------------------------------------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current directory holding a copy of the tiny fixture with the seed gates.json, in ``fx``."""
    ws = tmp_path / "ws"
    shutil.copytree(TINY_DIR, ws / "fx")
    shutil.copy(SYNTHETIC_DIR / GATES_FILE, ws / "fx")
    monkeypatch.chdir(ws)
    monkeypatch.delenv(ENV_VAR, raising=False)
    return ws


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["run", "--fixture", "fx", "--runs", "1", "--no-cache", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_cli_gate_option_overrides_and_adds(capsys: pytest.CaptureFixture[str], workspace: Path) -> None:
    code, out, err = _run(capsys, "--gate", "hybrid-rerank ndcg@10 >= 1.01", "--gate", "lexical recall@10[zh] >= 0.1")
    assert code == 1
    assert "1 quality gate(s) failed" in err and "hybrid-rerank ndcg@10 = 1.0000, required >= 1.0100" in err
    lines = [line for line in out.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert [line.split(" = ")[0] for line in lines] == [
        "PASS  hybrid-rerank mrr@10",
        "FAIL  hybrid-rerank ndcg@10",
        "PASS  hybrid-rerank no_answer_fpr",
        "PASS  rerank ndcg@10 drop vs hybrid",
        "PASS  lexical recall@10 [zh]",
    ]


def test_cli_gate_on_a_measure_the_run_never_evaluates_is_refused(
    capsys: pytest.CaptureFixture[str], workspace: Path
) -> None:
    """recall@7 is a known name a fixture run never computes: the gate could only fail as "not evaluated" (it was
    exit 1 on every run); it is refused before anything runs."""
    code, out, err = _run(capsys, "--ablations", "lexical", "--gate", "lexical recall@7 >= 0.1")
    assert (code, out) == (2, "")
    assert "gate 'recall@7' on lexical: a fixture run does not evaluate this measure" in err


@pytest.mark.parametrize(
    ("gate", "fragments"),
    [
        ("hybrid-rerank ndcg@10 > 0.8", ["--gate 'hybrid-rerank ndcg@10 > 0.8'", f"expected '{GATE_FORM}'"]),
        ("hybrid-rerank f1@10 >= 0.8", ["--gate 'hybrid-rerank f1@10 >= 0.8'", "unknown measure 'f1@10'"]),
        ("hybrid ndcg@10 >= 0.8", ["--gate hybrid ndcg@10: no such system is evaluated here", "(systems: lexical)"]),
    ],
)
def test_cli_refuses_a_bad_gate_option_with_exit_2(
    capsys: pytest.CaptureFixture[str], workspace: Path, gate: str, fragments: list[str]
) -> None:
    code, out, err = _run(capsys, "--ablations", "lexical", "--gate", gate)
    assert (code, out) == (2, "")
    for fragment in fragments:
        assert fragment in err
    assert sorted(p.name for p in workspace.iterdir()) == ["fx"], "refused before anything ran"


def test_cli_refuses_to_write_the_report_over_gates_json(capsys: pytest.CaptureFixture[str], workspace: Path) -> None:
    before = (workspace / "fx" / GATES_FILE).read_bytes()
    code, _, err = _run(capsys, "--output", f"fx/{GATES_FILE}")
    assert code == 2 and "would overwrite it" in err
    assert (workspace / "fx" / GATES_FILE).read_bytes() == before
    assert Path("fx") / GATES_FILE in fixture_inputs(Path("fx"))
    assert Path("fx") / GATES_FILE in fixture_inputs(Path("fx") / "fixture.json")


def test_cli_report_carries_only_the_gates_evaluated(capsys: pytest.CaptureFixture[str], workspace: Path) -> None:
    code, _, _ = _run(capsys, "--ablations", "lexical,hybrid-rerank", "--output", "r.json")
    assert code == 0
    report = parse_report((workspace / "r.json").read_bytes())
    assert [g.gate for g in report.gates] == [g.label for g in SEED[:3]]


# --- invalid gates.json --------------------------------------------------------------------------------------------


GOOD = {"system": "lexical", "measure": "recall@10", "min": 0.5}


@pytest.mark.parametrize(
    ("entries", "fragments"),
    [
        ([GOOD, {**GOOD, "colour": "blue"}], ["entry 1 (lexical recall@10), field 'colour'", "Extra inputs"]),
        ([{**GOOD, "max": 0.9}], ["entry 0 (lexical recall@10)", "exactly one of min, max", "found min and max"]),
        ([{"system": "lexical", "measure": "recall@10"}], ["entry 0 (lexical recall@10)", "found none"]),
        ([GOOD, GOOD, {**GOOD, "slice": "fr"}], ["entry 2 (lexical recall@10), field 'slice'", "'all', 'en' or 'zh'"]),
        ([{**GOOD, "measure": "f1@10"}], ["entry 0 (lexical f1@10), field 'measure'", "unknown measure 'f1@10'"]),
        ([{**GOOD, "min": "0.5"}], ["entry 0 (lexical recall@10), field 'min'", "valid number"]),
        (
            [{**GOOD, "min": None, "max_drop_vs": {"system": "hybrid", "max": 0.1, "min": 0}}],
            ["entry 0 (lexical recall@10), field 'max_drop_vs.min'", "Extra inputs"],
        ),
        ([GOOD, {**GOOD, "min": 0.6}], ["entry 1 (lexical recall@10): the same gate as entry 0"]),
        ([{**GOOD, "name": "/etc/passwd"}], ["entry 0 (lexical recall@10), field 'name'", "looks like"]),
    ],
)
def test_invalid_gates_file_is_refused_naming_entry_and_field(
    tmp_path: Path, entries: list[dict[str, Any]], fragments: list[str]
) -> None:
    (tmp_path / GATES_FILE).write_text(json.dumps({"gates": entries}), encoding="utf-8")
    with pytest.raises(ValueError) as info:
        load_gate_file(tmp_path)
    message = str(info.value)
    assert message.startswith(f"invalid {GATES_FILE} in {tmp_path.name}: ")
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"gates": []', "is not JSON"),
        ("[]", "field '(top level)'"),
        ('{"gates": [], "version": 1}', "field 'version'"),
        ("{}", "field 'gates': Field required"),
    ],
)
def test_gates_file_that_is_no_gate_list_is_refused(tmp_path: Path, text: str, fragment: str) -> None:
    (tmp_path / GATES_FILE).write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=GATES_FILE) as info:
        load_gate_file(tmp_path)
    assert fragment in str(info.value)


def test_cli_validate_and_run_refuse_an_invalid_gates_file(capsys: pytest.CaptureFixture[str], workspace: Path) -> None:
    gates = workspace / "fx" / GATES_FILE
    assert main(["validate", "fx"]) == 0
    assert "gates.json holds 4 gate(s)" in capsys.readouterr().out
    gates.write_text(json.dumps({"gates": [{**GOOD, "max": 1.0}]}), encoding="utf-8")
    for argv in (["validate", "fx"], ["run", "--fixture", "fx", "--runs", "1"]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and "invalid gates.json in fx" in err and "entry 0 (lexical recall@10)" in err
