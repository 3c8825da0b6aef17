"""Integrity of what evalkit reads and writes: a report's numbers and text are checked before `evalkit compare` uses
them, and the TREC writers refuse IDs that would break or forge lines."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.app.cli import main
from evalkit.data.fixture import load_fixture
from evalkit.data.ids import check_trec_field
from evalkit.data.schema import SLICES
from evalkit.data.trec import qrels_text, trec_run_bytes
from evalkit.measures.metrics import LatencySummary
from evalkit.reporting.build import build_report
from evalkit.reporting.per_query import ANSWERABLE_MEASURES, NO_ANSWER_MEASURES, QueryIndex
from evalkit.reporting.report import (
    AblationReport,
    GateOutcome,
    QueryCounts,
    Report,
    check_report_integrity,
    parse_report,
    report_json,
)
from evalkit.runs.evaluation import Evaluation

from ..conftest import TINY_DIR

Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def report_data(tiny_evaluation: Evaluation) -> bytes:
    return report_json(build_report(tiny_evaluation))


def edited(data: bytes, edit: Edit) -> str:
    raw = json.loads(data)
    edit(raw)
    return json.dumps(raw)


def lexical(raw: dict[str, Any]) -> dict[str, Any]:
    ablation: dict[str, Any] = raw["ablations"]["lexical"]
    return ablation


def first_answerable(raw: dict[str, Any]) -> int:
    return int(raw["queries"]["answerable"].index(True))


def set_per_query(value: float) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        lexical(raw)["per_query"]["ndcg@10"][first_answerable(raw)] = value

    return edit


def set_per_query_and_means(value: float) -> Edit:
    """The per-query value and every aggregate over it, edited consistently: only the range check can refuse it."""

    def edit(raw: dict[str, Any]) -> None:
        set_per_query(value)(raw)
        column, languages = lexical(raw)["per_query"]["ndcg@10"], raw["queries"]["languages"]
        for slice_name, row in lexical(raw)["metrics"].items():
            values = [
                v for v, lang in zip(column, languages, strict=True) if v is not None and slice_name in ("all", lang)
            ]
            row["ndcg@10"] = math.fsum(values) / len(values)

    return edit


def setter(*path: str | int, value: Any) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        node: Any = raw
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


# --- numbers ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (set_per_query(5.0), r"ablation lexical: per_query\['ndcg@10'\] value 5\.0 for query \S+ is not in \[0, 1\]"),
        (set_per_query(-1e308), r"per_query\['ndcg@10'\] value -1e\+308 for query"),
        (
            set_per_query_and_means(5.0),
            r"field 'ablations\.lexical\.metrics\.all\.ndcg@10': Input should be less than or equal to 1",
        ),
        (set_per_query(0.0), r"metrics\[all\]\['ndcg@10'\] = \S+ is not the mean of per_query\['ndcg@10'\]"),
        (setter("ablations", "lexical", "metrics", "en", "recall@5", value=0.0), r"metrics\[en\]\['recall@5'\]"),
        (setter("ablations", "lexical", "query_counts", "zh", "answerable", value=99), r"query_counts\[zh\] says 99"),
        (setter("ablations", "lexical", "latency_ms", "p95_ms", value=-1.0), r"latency_ms\.p95_ms -1\.0 is not"),
        (setter("ablations", "lexical", "intervals", "all", "mrr@10", value=[0.5, 7.0]), r"intervals\[all\]"),
        (setter("ablations", "lexical", "intervals", "all", "mrr@10", value=[0.9, 0.1]), r"is not an interval"),
        (setter("measures", value={"ndcg@10": "ndcg(cutoff=10, gain=exponential)"}), r"does not declare"),
    ],
)
def test_a_report_with_numbers_evalkit_cannot_write_is_refused_naming_the_field(
    report_data: bytes, edit: Edit, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        parse_report(edited(report_data, edit))


def test_a_refused_report_is_told_in_sentences_not_a_validation_dump(report_data: bytes) -> None:
    with pytest.raises(ValueError) as refused:
        parse_report(edited(report_data, set_per_query_and_means(5.0)))
    assert "errors.pydantic.dev" not in str(refused.value) and "input_value=" not in str(refused.value)
    assert str(refused.value).startswith("invalid report: field 'ablations.lexical.metrics.")


def test_infinite_numbers_are_refused(report_data: bytes, tiny_evaluation: Evaluation) -> None:
    marker = 0.123456789012345  # a value no report holds, replaced by a number JSON can spell but a float cannot
    for edit in (set_per_query(marker), setter("ablations", "lexical", "latency_ms", "max_ms", value=marker)):
        text = edited(report_data, edit)
        assert text.count(repr(marker)) == 1
        with pytest.raises(ValueError, match=r"out of range|not in \[0, 1\]|not a finite"):
            parse_report(text.replace(repr(marker), "1e999"))
    report = build_report(tiny_evaluation)
    gate = GateOutcome(gate="g", value=math.inf, threshold=0.0, comparison=">=", passed=True)
    with pytest.raises(ValueError, match=r"gates\[0\] \(g\): value inf is not a finite number"):
        check_report_integrity(report.model_copy(update={"gates": (gate,)}))
    ablation = report.ablations["lexical"]
    latency = ablation.latency_ms.model_copy(update={"max_ms": math.inf})
    ablations = {**report.ablations, "lexical": ablation.model_copy(update={"latency_ms": latency})}
    with pytest.raises(ValueError, match=r"ablation lexical: latency_ms\.max_ms inf is not a finite number >= 0"):
        check_report_integrity(report.model_copy(update={"ablations": ablations}))


def test_nan_and_duplicate_keys_are_refused(report_data: bytes) -> None:
    marker = 0.123456789012345
    text = edited(report_data, set_per_query(marker)).replace(repr(marker), "NaN")
    with pytest.raises(ValueError, match="report is not JSON"):
        parse_report(text)
    with pytest.raises(ValueError, match="duplicate key 'runs'"):
        parse_report('{"schema_version": 2, "runs": 1, "runs": 2}')


def test_reports_evalkit_writes_pass(report_data: bytes, tiny_evaluation: Evaluation) -> None:
    report = parse_report(report_data)
    check_report_integrity(report)
    assert report == build_report(tiny_evaluation)


def _report(values: Sequence[float], no_answer: Sequence[float]) -> Report:
    """A report over answerable `values` (alternately en, zh) and no-answer values, its aggregates computed from
    the unrounded values and its columns rounded, as evalkit writes them."""
    n, k = len(values), len(no_answer)
    ids = tuple(f"q{i:04d}" for i in range(n + k))
    languages = tuple("en" if i % 2 == 0 else "zh" for i in range(n + k))
    index = QueryIndex(query_ids=ids, languages=languages, answerable=tuple([True] * n + [False] * k))  # type: ignore[arg-type]
    rounded = [round(v, 6) for v in values]
    per_query = {m: tuple([*rounded, *([None] * k)]) for m in ANSWERABLE_MEASURES}
    per_query.update({m: tuple([*([None] * n), *no_answer]) for m in NO_ANSWER_MEASURES})
    metrics: dict[str, dict[str, float]] = {}
    for slice_name in ("all", "en", "zh"):
        chosen = [v for v, lang in zip(values, languages, strict=False) if slice_name in ("all", lang)]
        fpr = [v for v, lang in zip(no_answer, languages[n:], strict=True) if slice_name in ("all", lang)]
        row = {m: math.fsum(chosen) / len(chosen) for m in ANSWERABLE_MEASURES} if chosen else {}
        row.update({m: math.fsum(fpr) / len(fpr) for m in NO_ANSWER_MEASURES} if fpr else {})
        if row:
            metrics[slice_name] = row
    counts = {
        s: QueryCounts(answerable=len(index.members(s, True)), no_answer=len(index.members(s, False))) for s in SLICES
    }
    ablation = AblationReport(
        mode="hybrid",
        metrics=metrics,  # type: ignore[arg-type]
        query_counts=counts,
        latency_ms=LatencySummary(count=0, min_ms=0.0, median_ms=0.0, p95_ms=0.0, max_ms=0.0, mean_ms=0.0),
        failures=(),
        per_query=per_query,
    )
    return Report(
        fixture_id="fx",
        fixture_version="1.0.0",
        corpus_sha256=None,
        evaluation_definition_hash="1" * 64,
        provider_definitions_hash=None,
        deterministic_projection_sha256="3" * 64,
        runs=1,
        retrieval_settings=None,
        ablations={"hybrid": ablation},
        judgments_sha256="4" * 64,
        queries=index,
    )


@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=60),
    st.lists(st.sampled_from([0.0, 1.0]), max_size=10),
)
def test_any_report_evalkit_could_write_is_accepted_and_reparsed(values: list[float], no_answer: list[float]) -> None:
    """Aggregates of unrounded values beside rounded columns pass: the slack covers the rounding, not more."""
    report = _report(values, no_answer)
    assert parse_report(report_json(report)) == report


def test_an_aggregate_moved_past_the_rounding_slack_is_refused() -> None:
    values = np.linspace(0.0, 1.0, 7).tolist()
    report = _report(values, [0.0])
    row = report.ablations["hybrid"].metrics["all"]
    moved = {**row, "ndcg@10": row["ndcg@10"] + 1e-6}
    ablation = report.ablations["hybrid"].model_copy(
        update={"metrics": {**report.ablations["hybrid"].metrics, "all": moved}}
    )
    with pytest.raises(ValueError, match=r"metrics\[all\]\['ndcg@10'\]"):
        check_report_integrity(report.model_copy(update={"ablations": {"hybrid": ablation}}))


# --- text ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (setter("fixture_version", value="1.0.0\x1b[31m"), "fixture_version"),
        (setter("fixture_version", value="1.0.0\u202e"), "fixture_version"),
        (setter("metrics_version", value="2\nnote: forged"), "metrics_version"),
        (setter("ablations", "lexical", "mode", value="lex\u2066ical"), "ablations.lexical.mode"),
        (setter("ablations", "lexical", "failures", 0, "message", value="\x9b2J"), "ablations.lexical.failures[0]"),
        (setter("measures", "ndcg@10", value="ndcg(cutoff=10)\x1b]0;title\x07"), "measures.ndcg@10"),
    ],
)
def test_control_and_bidi_characters_are_refused_naming_the_field(report_data: bytes, edit: Edit, field: str) -> None:
    with pytest.raises(ValueError, match=f"report field {re.escape(field)}"):
        parse_report(edited(report_data, edit))


def test_a_control_character_in_a_key_is_refused_without_echoing_it(report_data: bytes) -> None:
    def edit(raw: dict[str, Any]) -> None:
        lexical(raw)["per_query"]["\x1b[2Jndcg"] = lexical(raw)["per_query"]["ndcg@10"]

    with pytest.raises(ValueError, match=r"ablations\.lexical\.per_query: key '\\x1b\[2Jndcg'") as info:
        parse_report(edited(report_data, edit))
    assert "\x1b" not in str(info.value)


def test_the_schema_refuses_control_characters_in_free_text(tiny_evaluation: Evaluation) -> None:
    report = build_report(tiny_evaluation)
    with pytest.raises(ValueError, match="U\\+001B"):
        Report.model_validate({**report.model_dump(), "fixture_version": "\x1b[31m"}, strict=False)


# --- evalkit compare -------------------------------------------------------------------------------------------


@pytest.fixture
def compare_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report_data: bytes) -> Path:
    monkeypatch.chdir(tmp_path)
    Path("base.json").write_bytes(report_data)
    return tmp_path


def compare(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "\x1b" not in out + err and "\u202e" not in out + err, "input text reached the terminal unescaped"
    return code, err


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (set_per_query(5.0), "per_query['ndcg@10'] value 5.0"),
        (set_per_query(-1e308), "per_query['ndcg@10'] value -1e+308"),
        (setter("fixture_version", value="\x1b[31m1.0.0"), "fixture_version"),
        (setter("fixture_version", value="1.0.0\u202e"), "fixture_version"),
    ],
)
def test_compare_refuses_a_tampered_report_with_exit_2_naming_file_and_field(
    compare_dir: Path, report_data: bytes, capsys: pytest.CaptureFixture[str], edit: Edit, field: str
) -> None:
    Path("head.json").write_text(edited(report_data, edit), encoding="utf-8")
    code, err = compare(capsys, "base.json", "head.json", "--output", "c.json")
    assert code == 2
    assert "head report head.json" in err and field in err
    assert not Path("c.json").exists()


def test_compare_reads_reports_through_the_guarded_reader(
    compare_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = compare(capsys, "base.json", "base.json", "--max-input-mb", "0.001")
    assert code == 2 and "base report base.json: cannot be read: it is larger than the input limit" in err
    os.mkfifo("pipe.json")
    code, err = compare(capsys, "base.json", "pipe.json")  # would block forever with Path.read_bytes
    assert code == 2 and "head report pipe.json: cannot be read: it is a FIFO" in err
    code, err = compare(capsys, ".", "base.json")
    assert code == 2 and "it is a directory" in err


# --- TREC writers ----------------------------------------------------------------------------------------------

FORGED = "c1 Q0 forged 1 99.0 x\nq1"


@pytest.mark.parametrize(
    ("rankings", "tag", "field"),
    [
        ({"q1": [(FORGED, 1.0)]}, "run", "chunk ID (query q1)"),
        ({"q1": [("c1\r", 1.0)]}, "run", "chunk ID"),
        ({"q1": [("c\u202e1", 1.0)]}, "run", "chunk ID"),
        ({"q1": [("", 1.0)]}, "run", "chunk ID"),
        ({"q1 Q0 c9 1 9.0 run\nq2": [("c1", 1.0)]}, "run", "query ID"),
        ({"q\t1": [("c1", 1.0)]}, "run", "query ID"),
        ({"q1": [("c1", 1.0)]}, "run\nq2 Q0 c2 1 9.0 run", "run tag"),
        ({"q1": [("c1", 1.0)]}, "my run", "run tag"),
    ],
)
def test_trec_run_bytes_refuses_ids_that_would_forge_lines(
    rankings: dict[str, list[tuple[str, float]]], tag: str, field: str
) -> None:
    with pytest.raises(ValueError, match=rf"^{re.escape(field)} .* cannot be written to a TREC file"):
        trec_run_bytes(rankings, tag)


@given(st.text(max_size=8), st.text(max_size=8), st.text(max_size=8))
def test_a_written_run_line_always_has_six_columns_holding_the_ids(query: str, chunk: str, tag: str) -> None:
    try:
        data = trec_run_bytes({query: [(chunk, 0.5)]}, tag)
    except ValueError:
        return
    (line,) = data.decode("utf-8").splitlines()
    assert line.split() == [query, "Q0", chunk, "1", "0.5", tag]


def test_qrels_text_refuses_a_chunk_id_that_would_forge_lines() -> None:
    fixture = load_fixture(TINY_DIR).fixture
    query = next(q for q in fixture.queries if q.judgments)
    judgment = query.judgments[0].model_copy(update={"chunk_id": "c1 1\nq9 0 forged"})
    forged = query.model_copy(update={"judgments": (judgment, *query.judgments[1:])})
    queries = tuple(forged if q is query else q for q in fixture.queries)
    with pytest.raises(ValueError, match="chunk ID 'c1 1\\\\nq9 0 forged' cannot be written to a TREC file"):
        qrels_text(fixture.model_copy(update={"queries": queries}))


def test_check_trec_field_passes_identifiers() -> None:
    assert check_trec_field("zh-trash-01:v2.1_x", "chunk ID") == "zh-trash-01:v2.1_x"
    assert check_trec_field("文件-1", "chunk ID") == "文件-1"


class ForgingRetriever:
    """A user's retriever whose chunk IDs are not the fixture's: one holds a newline and a forged run line."""

    name = "forging"

    def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
        return [(FORGED, 1.0)]


def forging() -> ForgingRetriever:
    return ForgingRetriever()


def test_a_fixture_free_run_with_a_forging_id_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--fixture", str(TINY_DIR), "--ablations", "", "--retriever", f"{__name__}:forging"]
    code = main([*argv, "--runs", "1", "--no-gates", "--trec-runs", "runs", "--output", "report.json"])
    err = capsys.readouterr().err
    assert code == 2
    assert "system forging: query q-en-001: result 0: field 'chunk_id': " in err  # refused as the retriever answers
    assert "is empty or holds whitespace" in err
    assert not Path("runs").exists() and not Path("report.json").exists(), "nothing is written"
