"""`evalkit.score` and `evalkit score --qrels`: any run against any qrels, no corpus, every output form."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import evalkit
from evalkit.app.cli import main
from evalkit.reporting.comparison import ComparisonError, compare_reports
from evalkit.reporting.report import parse_report, report_json
from evalkit.runs import run_sources

from ..conftest import ROOT, TINY_DIR

QRELS = {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d4": 1}, "q3": {"d5": 0}, "q4": {"d6": 3}}
"""q3 has no relevant document (no-answer); q4 is judged but absent from RUN."""
RUN = {"q1": {"d2": 3.0, "d1": 2.0, "d9": 2.0}, "q2": {"d4": 1.0}, "q3": {"d5": 1.0}, "q9": {"d1": 1.0}}


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _trec_qrels(qrels: dict[str, dict[str, int]]) -> str:
    return "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())


def _trec_run(run: dict[str, dict[str, float]], tag: str = "sys") -> str:
    return "".join(
        f"{q}\tQ0\t{d}\t{rank}\t{s!r}\t{tag}\n"
        for q, docs in run.items()
        for rank, (d, s) in enumerate(docs.items(), 1)
    )


def test_hand_computed_values_and_counts() -> None:
    result = evalkit.score(QRELS, RUN, measures=["recall@2", "mrr@10", "P_2", "judged@2", "map"])
    frame = result.per_query
    assert list(frame.index) == ["q1", "q2", "q3", "q4"]
    assert list(frame.columns) == ["recall@2", "mrr@10", "P_2", "judged@2", "map"]
    # q1: d2 (3.0, judged 0), then d1 and d9 tie at 2.0: the evalkit policy puts d1 (ID ascending) first.
    assert frame.loc["q1", "recall@2"] == 0.5 and frame.loc["q1", "mrr@10"] == 0.5
    assert frame.loc["q1", "P_2"] == 0.5 and frame.loc["q1", "judged@2"] == 1.0
    assert frame.loc["q1", "map"] == (1 / 2) / 2
    assert frame.loc["q2"].tolist() == [1.0, 1.0, 0.5, 1.0, 1.0]  # judged@2: 1 judged of 1 result (ir_measures)
    assert frame.loc["q3", ["recall@2", "mrr@10", "judged@2"]].isna().all(), "evalkit's names skip a no-answer query"
    assert frame.loc["q3", ["P_2", "map"]].tolist() == [0.0, 0.0], "trec_eval's names score it 0, as trec_eval does"
    assert frame.loc["q4"].tolist() == [0.0, 0.0, 0.0, 0.0, 0.0], "a judged query missing from the run scores 0"
    assert result.aggregate["recall@2"] == (0.5 + 1.0 + 0.0) / 3
    notes = " ".join(result.notes)
    assert "1 judged query(ies) missing" in notes and "1 run query(ies) without judgments" in notes


def test_default_measures_add_no_answer_fpr_when_a_query_has_no_relevant_document() -> None:
    result = evalkit.score(QRELS, RUN)
    assert list(result.per_query.columns) == ["recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "no_answer_fpr"]
    assert result.per_query.loc["q3", "no_answer_fpr"] == 1.0
    assert np.isnan(result.per_query.loc["q1", "no_answer_fpr"])


def test_ties_change_the_order_as_declared() -> None:
    evalkit_ties = evalkit.score(QRELS, RUN, measures=["recall@2"], ties="evalkit").per_query
    trec_ties = evalkit.score(QRELS, RUN, measures=["recall@2"], ties="trec_eval").per_query
    assert evalkit_ties.loc["q1", "recall@2"] == 0.5  # d2, d1
    assert trec_ties.loc["q1", "recall@2"] == 0.0  # d2, d9: trec_eval breaks ties by document ID descending


def test_missing_skip_leaves_out_judged_queries_absent_from_the_run() -> None:
    result = evalkit.score(QRELS, RUN, measures=["recall@10"], missing="skip")
    assert list(result.per_query.index) == ["q1", "q2", "q3"]
    assert result.aggregate["recall@10"] == (0.5 + 1.0) / 2


def test_paths_dicts_and_dataframes_give_the_same_values(tmp_path: Path) -> None:
    qrels_path = _write(tmp_path, "qrels.txt", _trec_qrels(QRELS))
    run_path = _write(tmp_path, "run.trec", _trec_run(RUN))
    qrels_frame = pd.DataFrame(
        [(q, d, g) for q, docs in QRELS.items() for d, g in docs.items()], columns=["query_id", "doc_id", "grade"]
    )
    run_frame = pd.DataFrame(
        [(q, d, s) for q, docs in RUN.items() for d, s in docs.items()], columns=["qid", "docid", "score"]
    )
    measures = ["ndcg@10", "ndcg_cut_10", "recip_rank", "Rprec"]
    from_dicts = evalkit.score(QRELS, RUN, measures=measures).per_query
    from_paths = evalkit.score(qrels_path, run_path, measures=measures).per_query
    from_frames = evalkit.score(qrels_frame, run_frame, measures=measures).per_query
    pd.testing.assert_frame_equal(from_dicts, from_paths)
    pd.testing.assert_frame_equal(from_dicts, from_frames)
    assert from_dicts.loc["q1", "ndcg@10"] != from_dicts.loc["q1", "ndcg_cut_10"], "exponential vs linear gain"


def test_the_judgments_hash_does_not_depend_on_the_order_of_the_lines(tmp_path: Path) -> None:
    lines = _trec_qrels(QRELS).splitlines(keepends=True)
    forward = _write(tmp_path, "forward.txt", "".join(lines))
    backward = _write(tmp_path, "backward.txt", "".join(reversed(lines)))
    changed = _write(tmp_path, "changed.txt", "".join(lines[:-1]))
    run_path = _write(tmp_path, "run.trec", _trec_run(RUN))

    def judgments(path: Path) -> str | None:
        return evalkit.score(path, run_path, measures=["ndcg@10"]).to_report().judgments_sha256

    assert judgments(forward) == judgments(backward)
    assert judgments(forward) != judgments(changed)


def test_several_runs_by_name() -> None:
    other = {"q1": {"d1": 1.0}, "q2": {"d9": 1.0}}
    result = evalkit.score(QRELS, {"base": RUN, "head": other}, measures=["recall@1"])
    assert list(result.per_query.columns) == [("base", "recall@1"), ("head", "recall@1")]
    assert result.aggregate == {"base": {"recall@1": 1 / 3}, "head": {"recall@1": 0.5 / 3}}
    assert result["head"].aggregate == {"recall@1": 0.5 / 3}
    with pytest.raises(KeyError, match="no run named 'x'"):
        result["x"]


def test_a_grade_past_what_exponential_gain_can_take_is_refused_not_scored_zero() -> None:
    """2^1024 is past a float: ndcg@10 of a perfect ranking came out 0. Exponential gain takes grades up to 512;
    past that it is refused, naming the measure; linear gain takes any grade."""
    run = {"q1": {"d1": 2.0, "d2": 1.0}}
    assert evalkit.score({"q1": {"d1": 512, "d2": 1}}, run, measures=["ndcg@10"]).aggregate == {"ndcg@10": 1.0}
    with pytest.raises(ValueError, match=r"ndcg@10 has gain 2\^grade - 1, and a grade of 1024 is past the 512"):
        evalkit.score({"q1": {"d1": 1024}}, run, measures=["ndcg@10", "ndcg_cut_10"])
    linear = evalkit.score({"q1": {"d1": 10**15, "d2": 1}}, run, measures=["ndcg_cut_10"], ties="trec_eval")
    assert linear.aggregate == {"ndcg_cut_10": 1.0}


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ([RUN, RUN], "run 'run': a list is not a run: give a path, a DataFrame"),
        ({"q1": [("d1", 1.0)]}, "run 'run': query 'q1': results must be {docid: score}"),
    ],
)
def test_a_run_of_the_wrong_shape_is_a_clear_value_error(run: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        evalkit.score(QRELS, run, measures=["recall@1"])


def test_a_run_with_no_judged_query_is_refused(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Queries of a run the judgments do not hold are left out and counted; a run none of whose queries they hold
    is the run of another collection: refused (exit 2), named, rather than scored 0 everywhere."""
    with pytest.raises(ValueError, match=r"run a: none of its 2 query\(ies\) is in the judgments"):
        evalkit.score(QRELS, {"a": {"q8": {"d1": 1.0}, "q9": {"d1": 1.0}}})
    partly = evalkit.score(QRELS, {"a": {"q1": {"d1": 1.0}, "q9": {"d1": 1.0}}}, measures=["recall@10"])
    assert any("1 run query(ies) without judgments ignored" in note for note in partly.notes)
    _write(files, "elsewhere.trec", _trec_run({"q9": {"d1": 1.0}}, tag="sys"))
    assert main(["score", "--qrels", "qrels.txt", "--run", "elsewhere.trec"]) == 2
    assert "run sys: none of its 1 query(ies) is in the judgments (qrels.txt)" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["empty.trec", "empty.jsonl", "empty.trec.gz"])
def test_an_empty_run_file_is_refused_not_scored_zero(
    files: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run file with no line (a retrieval job that wrote nothing) is refused, as pool refuses it, on the qrels
    path and the fixture path alike, instead of scoring every judged query 0."""
    (files / name).write_bytes(gzip.compress(b"") if name.endswith(".gz") else b"")
    assert main(["score", "--qrels", "qrels.txt", "--run", name]) == 2
    assert "run empty: holds no result line, so there is nothing to score" in capsys.readouterr().err
    assert main(["score", "--fixture", str(TINY_DIR), "--run", name]) == 2
    assert "run empty: holds no result line" in capsys.readouterr().err
    with pytest.raises(ValueError, match="run a: holds no result line"):
        evalkit.score("qrels.txt", {"a": name})


def test_a_run_naming_queries_with_no_result_under_any_is_refused(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Queries listed with empty rankings and nothing else (a JSONL job that wrote `"results": []` for every query,
    a mapping of empty dicts) are refused as an empty file is, on every path: there is nothing to score."""
    blank = "".join(json.dumps({"query_id": q, "results": []}) + "\n" for q in ("q1", "q2"))
    _write(files, "blank.jsonl", blank)
    assert main(["score", "--qrels", "qrels.txt", "--run", "blank.jsonl"]) == 2
    assert "run blank: holds no result line (2 query(ies) named, none with a result)" in capsys.readouterr().err
    assert main(["score", "--fixture", str(TINY_DIR), "--run", "blank.jsonl"]) == 2
    assert "holds no result line (2 query(ies) named" in capsys.readouterr().err
    pool = ["pool", "--qrels", "qrels.txt", "--run", "blank.jsonl", "--depth", "10", "--output", "pool.jsonl"]
    assert main(pool) == 2
    assert "run blank: holds no result line" in capsys.readouterr().err and not (files / "pool.jsonl").exists()
    with pytest.raises(ValueError, match="run b: holds no result line"):
        evalkit.score(QRELS, {"a": {"q1": {"d1": 1.0}}, "b": {"q1": {}}})
    # One query without results beside others with some is a run that answered that query with nothing: scored.
    kept = evalkit.score(QRELS, {"a": {"q1": {"d1": 1.0}, "q2": {}}}, measures=["recall@10"])
    assert kept.runs[0].counts is not None and kept.runs[0].counts.lines == 1


@pytest.mark.parametrize("streamed", [False, True])
def test_a_floor_above_every_score_abstains_on_every_query_and_is_scored(
    files: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    """The floor models a system that abstains; one above every score abstains everywhere, which is scored (all
    zeros, no_answer_fpr 0), not refused as a run that holds nothing: the run held lines before its floor."""
    if streamed:
        monkeypatch.setattr(run_sources, "STREAM_SCORE_BYTES", 0)
    _write(files, "run.trec", _trec_run({"q1": {"d1": 3.0, "d2": 2.0}, "q2": {"d4": 5.0}}, tag="sys"))
    assert main(["score", "--qrels", "qrels.txt", "--run", "run.trec", "--floor", "6"]) == 0
    assert "sys: floor 6: 2 query(ies) whose best score is below it return nothing" in capsys.readouterr().out
    floored = evalkit.score(QRELS, {"q1": {"d1": 0.4}, "q3": {"d5": 0.2}}, floor=0.5)
    assert floored.aggregate["ndcg@10"] == 0.0 and floored.aggregate["no_answer_fpr"] == 0.0


def test_an_empty_named_run_is_named_in_the_refusal() -> None:
    """An empty mapping tells nothing of the shape: the first value that does decides, so {"A": {}, "B": run} is
    two runs and the refusal names A (it was one run whose query 'B' had a 'score' that was a dict)."""
    good = {"q1": {"d1": 0.9}}
    for runs, name in (({"A": {}, "B": good}, "A"), ({"A": good, "B": {}}, "B"), ({"r": {}}, "r")):
        with pytest.raises(ValueError, match=rf"^run {name}: holds no result line"):
            evalkit.score(QRELS, runs)
    single = evalkit.score(QRELS, {"q1": {}, "q2": {"d4": 1.0}}, measures=["recall@10"])  # a query without results
    assert [r.name for r in single.runs] == ["run"] and single.runs[0].counts is not None
    assert single.runs[0].counts.lines == 1


def test_integer_keys_of_a_languages_mapping_are_their_digits() -> None:
    """A DataFrame's integer query IDs are read as their digits; a languages mapping with the same integer keys
    named no query and the language slices disappeared. Keys of other types are refused, naming the key."""
    qrels = pd.DataFrame({"query_id": [1, 2], "doc_id": ["d1", "d2"], "relevance": [1, 1]})
    run = pd.DataFrame({"query_id": [1, 2], "doc_id": ["d1", "d2"], "score": [1.0, 1.0]})
    result = evalkit.score(qrels, run, measures=["recall@10"], languages={1: "en", 2: "zh"})
    assert ("run", "en") in result.means and ("run", "zh") in result.means
    with pytest.raises(ValueError, match=r"languages: query key 1\.5 is not a string or an integer"):
        evalkit.score(qrels, run, measures=["recall@10"], languages={1.5: "en"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="languages: query '2' has language 'fr'"):
        evalkit.score(qrels, run, measures=["recall@10"], languages={1: "en", "2": "fr"})  # type: ignore[dict-item]


@pytest.mark.parametrize("missing", [None, float("nan")])
def test_a_missing_id_in_a_dataframe_names_its_row_and_column(missing: object) -> None:
    """A missing ID became the query or document "nan" (or was refused naming neither row nor column)."""
    qrels = pd.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["d1", missing], "relevance": [1, 1]})
    with pytest.raises(ValueError, match=r"^qrels DataFrame row 1: column 'doc_id': ID .* is missing$"):
        evalkit.score(qrels, {"q1": {"d1": 1.0}})
    run = pd.DataFrame({"query_id": ["q1", missing], "doc_id": ["d1", "d2"], "score": [1.0, 1.0]})
    with pytest.raises(ValueError, match=r"^run DataFrame row 1: column 'query_id': ID .* is missing$"):
        evalkit.score({"q1": {"d1": 1}}, run)


def test_one_run_of_several_keeps_its_own_notes() -> None:
    both = evalkit.score(QRELS, {"a": RUN, "b": {"q1": {"d1": 1.0}}}, measures=["recall@10"])
    assert any(n.startswith("b: ") for n in both.notes) and any(n.startswith("a: ") for n in both.notes)
    alone = both["a"]
    assert any(n.startswith("a: ") for n in alone.notes) and not any(n.startswith("b: ") for n in alone.notes)


def test_numpy_scalar_scores_are_numbers() -> None:
    """Scores computed with numpy (float32, int64) are real numbers: taken, not refused as not finite."""
    import numpy as np

    run = {"q1": {"d1": np.float32(2.5), "d2": np.int64(3)}, "q2": {"d4": np.float64(1.0)}}
    values = evalkit.score(QRELS, run, measures=["recall@1"]).per_query["recall@1"]
    assert values.fillna(-1).tolist() == [0.0, 1.0, -1, 0.0]  # q3 has no relevant document: no recall


def test_one_run_given_by_name_is_keyed_by_its_name() -> None:
    """{name: run} with one entry is shaped like several runs (the caller named it); a bare run is not."""
    named = evalkit.score(QRELS, {"base": RUN}, measures=["recall@1"])
    assert named.aggregate == {"base": {"recall@1": 1 / 3}}
    assert list(named.per_query.columns) == [("base", "recall@1")]
    assert named["base"].aggregate == {"recall@1": 1 / 3}
    assert evalkit.score(QRELS, RUN, measures=["recall@1"]).aggregate == {"recall@1": 1 / 3}


def test_one_run_taken_from_several_keeps_the_abstention_floor() -> None:
    """result[name] is that run's result with everything else kept: its report records the floor."""
    result = evalkit.score(QRELS, {"a": RUN, "b": RUN}, measures=["recall@1"], floor=1.5)
    alone = result["a"]
    assert alone.floor == 1.5
    report = alone.to_report()
    assert [a.system.abstention_floor for a in report.ablations.values() if a.system] == [1.5]


def test_languages_give_slices_and_topics_are_detected(tmp_path: Path) -> None:
    topics = _write(tmp_path, "topics.tsv", "q1\t如何重置两步验证\nq2\tHow do I reset my password\nq3\t回收站在哪里\n")
    result = evalkit.score(QRELS, RUN, measures=["recall@10"], languages=topics)
    assert result.slices == ("all", "en", "zh")
    assert result.means[("run", "zh")]["recall@10"] == 0.5  # q1 (q3 has no relevant document)
    assert result.means[("run", "en")]["recall@10"] == 1.0
    assert evalkit.score(QRELS, RUN, measures=["recall@10"]).slices == ("all",)


def test_span_measures_are_left_out_with_a_note() -> None:
    result = evalkit.score(QRELS, RUN, measures=["ndcg@10", "context_precision"])
    assert list(result.per_query.columns) == ["ndcg@10"]
    assert any("context_precision left out" in note and "--fixture" in note for note in result.notes)
    with pytest.raises(ValueError, match="no measure left"):
        evalkit.score(QRELS, RUN, measures=["context_recall"])


def test_report_round_trips_and_compares() -> None:
    better = {**RUN, "q4": {"d6": 1.0}}
    base = evalkit.score(QRELS, {"sys": RUN}, measures=["ndcg@10", "recall@10"]).to_report()
    head = evalkit.score(QRELS, {"sys": better}, measures=["ndcg@10", "recall@10"]).to_report()
    assert parse_report(report_json(base)) == base
    assert base.measures == {
        "ndcg@10": "ndcg(cutoff=10, gain=exponential)",
        "recall@10": "recall(cutoff=10)",
        # the unjudged share beside every score, and the condensed-list forms compare's holes check reads
        "judged@10": "judged(cutoff=10, denominator=returned)",
        "unj@10": "unj(cutoff=10, denominator=returned)",
        "condensed_ndcg@10": "condensed_ndcg(cutoff=10, gain=exponential, unjudged=removed)",
        "condensed_recall@10": "condensed_recall(cutoff=10, unjudged=removed)",
    }
    assert base.companions == ("condensed_ndcg@10", "condensed_recall@10")
    assert base.corpus_sha256 is None and base.retrieval_settings is None
    comparison = compare_reports(base, head)
    assert {row.measure for row in comparison.rows} == {"ndcg@10", "recall@10"}
    row = next(r for r in comparison.rows if r.measure == "recall@10" and r.slice == "all")
    assert row.difference == pytest.approx(1 / 3) and row.wins == 1
    redefined = head.model_copy(update={"measures": {**head.measures, "ndcg@10": "ndcg(cutoff=10, gain=linear)"}})
    with pytest.raises(ComparisonError, match="ndcg@10 is defined differently"):
        compare_reports(base, redefined)


def test_trec_eval_names_carry_queries_without_a_relevant_document_through_report_and_compare() -> None:
    """q3 has no relevant document: P_2 (trec_eval's name) scores it 0 in the report, its interval and compare rows
    cover all four queries; recall@2 (evalkit's) leaves it out. A report missing such a value is refused."""
    better = {**RUN, "q4": {"d6": 1.0}}
    base = evalkit.score(QRELS, {"sys": RUN}, measures=["P_2", "recall@2"]).to_report()
    head = evalkit.score(QRELS, {"sys": better}, measures=["P_2", "recall@2"]).to_report()
    assert parse_report(report_json(base)) == base
    columns = base.ablations["sys"].per_query
    assert columns["P_2"] == (0.5, 0.5, 0.0, 0.0) and columns["recall@2"][2] is None
    assert base.ablations["sys"].metrics["all"]["P_2"] == 0.25
    rows = {(r.measure, r.slice): r for r in compare_reports(base, head).rows}
    assert rows[("P_2", "all")].queries == 4 and rows[("recall@2", "all")].queries == 3
    assert rows[("P_2", "all")].difference == pytest.approx(0.5 / 4)
    metrics = {"all": {**base.ablations["sys"].metrics["all"], "P_2": 1 / 3}}
    holed = base.ablations["sys"].model_copy(
        update={"per_query": {**columns, "P_2": (0.5, 0.5, None, 0.0)}, "metrics": metrics}
    )
    with pytest.raises(ValueError, match=r"per_query\['P_2'\] value missing for query q3"):
        parse_report(report_json(base.model_copy(update={"ablations": {"sys": holed}})))


def test_report_holds_ids_and_numbers_only() -> None:
    report = report_json(evalkit.score(QRELS, {"sys": RUN}).to_report()).decode("utf-8")
    for document in ("d1", "d2", "d4", "d9"):
        assert f'"{document}"' not in report


def test_registered_measure_flows_to_the_report_and_compare() -> None:
    def first_is_relevant(ranking: object, grades: dict[str, int], k: int | None) -> float:
        ranked = list(ranking)  # type: ignore[call-overload]
        return 1.0 if ranked and grades.get(ranked[0], 0) >= 1 else 0.0

    evalkit.register_measure("top_hit", first_is_relevant)
    try:
        result = evalkit.score(QRELS, {"sys": RUN}, measures=["top_hit", "recall@1"])
        assert result.per_query[("sys", "top_hit")].tolist()[:2] == [0.0, 1.0]
        report = result.to_report()
        assert report.measures["top_hit"] == "user:top_hit()"
        assert any(r.measure == "top_hit" for r in compare_reports(report, report).rows)
    finally:
        evalkit.unregister_measure("top_hit")
    with pytest.raises(ValueError, match="unknown measure 'top_hit'"):
        evalkit.parse_measure("top_hit")


def test_html_repr_shows_the_table_and_the_notes() -> None:
    text = evalkit.score(QRELS, RUN, measures=["recall@10"])._repr_html_()
    assert "<table" in text and "recall@10" in text and "missing from the run" in text


# ---------------------------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "qrels.txt", _trec_qrels(QRELS))
    _write(tmp_path, "run.trec", _trec_run(RUN))
    return tmp_path


def test_cli_trec_format_is_trec_eval_layout(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["score", "--qrels", "qrels.txt", "--run", "run.trec", "--measures", "P_2,map", "--format", "trec"])
    assert code == 0
    captured = capsys.readouterr()
    # q3 has no relevant document: trec_eval's names score it 0 and count it, as trec_eval does (q1..q4: 4 queries)
    # in trec_eval's order (map before P), whatever order --measures names them in
    assert captured.out == ("map                   \tall\t0.3125\nP_2                   \tall\t0.2500\n")
    assert "1 judged query(ies) missing from the run" in captured.err  # notes go to stderr, not into the layout
    assert (
        main(
            [
                "score",
                "--qrels",
                "qrels.txt",
                "--run",
                "run.trec",
                "--measures",
                "P_2",
                "--format",
                "trec",
                "--per-query",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "P_2                   \tq1\t0.5000",
        "P_2                   \tq2\t0.5000",
        "P_2                   \tq3\t0.0000",
        "P_2                   \tall\t0.2500",  # q4, judged but not in the run, counts in all only (-c), as 0
    ]


def test_cli_table_is_the_default_and_notes_the_counts(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--qrels", "qrels.txt", "--run", "run.trec"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["system", "slice", "recall@1", "recall@5"]
    assert "sys      all" in out and "1 judged query(ies) missing" in out
    assert "FAIL" not in out and "not evaluated" not in out


def test_cli_json_output_is_a_report_compare_reads(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--qrels", "qrels.txt", "--run", "run.trec", "--format", "json", "--output", "a.json"]) == 0
    _write(files, "run2.trec", _trec_run({**RUN, "q4": {"d6": 9.0}}, tag="sys"))
    assert main(["score", "--qrels", "qrels.txt", "--run", "run2.trec", "--format", "json", "--output", "b.json"]) == 0
    report = parse_report((files / "a.json").read_bytes())
    assert set(report.ablations) == {"sys"} and report.queries.query_ids == ("q1", "q2", "q3", "q4")
    capsys.readouterr()
    assert main(["compare", "a.json", "b.json"]) == 0
    assert "recall@10" in capsys.readouterr().out


def test_cli_refuses_bad_input_with_exit_2(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(files, "bad.txt", "q1 0 d1 1\nq1 0 d2 high\n")
    assert main(["score", "--qrels", "bad.txt", "--run", "run.trec"]) == 2
    err = capsys.readouterr().err
    assert "bad.txt line 2" in err and "grade" in err and "Traceback" not in err
    assert main(["score", "--qrels", "qrels.txt", "--run", "run.trec", "--measures", "ndcg@ten"]) == 2
    assert "unknown measure 'ndcg@ten'" in capsys.readouterr().err
    assert main(["score", "--qrels", "qrels.txt", "--run", "missing.trec"]) == 2
    assert "not found" in capsys.readouterr().err


def test_cli_output_onto_an_input_is_refused(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (files / "run.trec").read_bytes()
    assert main(["score", "--qrels", "qrels.txt", "--run", "run.trec", "--output", "run.trec"]) == 2
    assert "input" in capsys.readouterr().err
    assert (files / "run.trec").read_bytes() == before


def test_cli_builds_no_retrieval_path(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.retrieval import database, service, text

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the qrels path must not build a retrieval path")

    monkeypatch.setattr(database.KnowledgeDatabase, "__init__", refuse)
    monkeypatch.setattr(service.KnowledgeService, "__init__", refuse)
    monkeypatch.setattr(text, "analyze", refuse, raising=False)
    assert main(["score", "--qrels", "qrels.txt", "--run", "run.trec", "--format", "json"]) == 0


def test_json_output_is_identical_across_processes(files: Path) -> None:
    outputs = []
    for seed in ("0", "1234"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        command = [
            sys.executable,
            "-m",
            "evalkit.app.cli",
            "score",
            "--qrels",
            "qrels.txt",
            "--run",
            "run.trec",
            "--format",
            "json",
            "--measures",
            "ndcg@10,map,judged@5",
        ]
        done = subprocess.run(command, cwd=files, env=env, capture_output=True, check=True)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] and json.loads(outputs[0])["schema_version"] == 2
    assert (ROOT / "evalkit").is_dir()


def test_cli_gates_only_when_asked(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["score", "--qrels", "qrels.txt", "--run", "run.trec", "--measures", "recall@10"]
    assert main([*argv, "--gate", "sys recall@10 >= 0.3"]) == 0
    assert "PASS  sys recall@10" in capsys.readouterr().out
    assert main([*argv, "--gate", "sys recall@10 >= 0.9"]) == 1
    assert "sys recall@10" in capsys.readouterr().err
    assert main([*argv, "--gate", "sys recall@10 >= 0.9", "--no-gates"]) == 0
    assert main([*argv, "--gate", "other recall@10 >= 0.9"]) == 2
    assert "not one of the runs" in capsys.readouterr().err
    assert main([*argv, "--gate", "sys ndcg@ten >= 0.9"]) == 2
    assert main([*argv, "--format", "json", "--output", "g.json", "--gate", "sys recall@10 >= 0.3"]) == 0
    assert [g.passed for g in parse_report((files / "g.json").read_bytes()).gates] == [True]


def test_the_compare_views_show_every_measure_of_a_score_report() -> None:
    from evalkit.reporting.comparison_views import interval_frame

    report = evalkit.score(QRELS, {"sys": RUN}, measures=["ndcg@10", "map", "judged@5"]).to_report()
    table = interval_frame(report)
    assert {"ndcg@10", "map", "judged@5"} <= set(table.columns)
    assert "recall@1" not in table.columns, "a measure the report does not hold is not a column"


def test_json_report_refuses_query_ids_it_cannot_carry_with_a_clean_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "qrels.txt", "a/b 0 d1 1\nq#2 0 d3 1\n")
    _write(tmp_path, "run.trec", "a/b Q0 d1 1 3.0 sys\nq#2 Q0 d3 1 1.0 sys\n")
    argv = ["score", "--qrels", "qrels.txt", "--run", "run.trec"]
    assert main(argv) == 0  # the table needs no report IDs
    capsys.readouterr()
    assert main([*argv, "--format", "json", "--output", "r.json"]) == 2
    err = capsys.readouterr().err
    assert "query ID 'a/b' (2 such ID(s))" in err and "validation error" not in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


def test_cli_gate_on_a_measure_not_scored_is_refused(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["score", "--qrels", "qrels.txt", "--run", "run.trec", "--measures", "P_1"]
    assert main([*argv, "--gate", "sys ndcg@10 >= 0.5"]) == 2
    captured = capsys.readouterr()
    assert "--gate names measure 'ndcg@10'" in captured.err and "P_1" in captured.err and captured.out == ""


def test_cli_gate_on_a_slice_without_queries_is_refused(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A gate on a language slice that no query is in cannot be evaluated: the command line is refused (exit 2),
    naming the gate and the slices there are, rather than failing as a gate (exit 1)."""
    argv = ["score", "--qrels", "qrels.txt", "--run", "run.trec", "--measures", "recall@10"]
    assert main([*argv, "--gate", "sys recall@10[zh] >= 0.1"]) == 2
    captured = capsys.readouterr()
    assert "slice 'zh', which has no queries here (slices: all): give --topics" in captured.err
    assert captured.out == "" and "Traceback" not in captured.err
    _write(files, "topics.tsv", "q1\tHow do I reset my password\nq2\tWhere is the bin\n")
    with_topics = [*argv, "--topics", "topics.tsv"]
    assert main([*with_topics, "--gate", "sys recall@10[zh] >= 0.1"]) == 2
    assert "(slices: all, en): no evaluated query has it" in capsys.readouterr().err
    assert main([*with_topics, "--gate", "sys recall@10[en] >= 0.1"]) == 0
    capsys.readouterr()
    _write(files, "first.trec", _trec_run({"q1": {"d1": 1.0}}, tag="sys"))
    _write(files, "second.trec", _trec_run({"q2": {"d4": 1.0}}, tag="other"))
    skipped = [
        "score",
        "--qrels",
        "qrels.txt",
        "--run",
        "first.trec",
        "--run",
        "second.trec",
        "--measures",
        "recall@10",
    ]
    assert main([*skipped, "--missing", "skip", "--gate", "sys recall@10 >= 0.1"]) == 2
    assert "slice 'all', which has no queries here" in capsys.readouterr().err


def test_cli_runs_in_two_folders_may_share_a_file_name(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two run files called alike in two folders are two runs (they were refused as one file given twice); one
    file given twice, however spelled, and two runs with one ID are refused, naming the files."""
    (files / "a").mkdir()
    (files / "b").mkdir()
    _write(files, "a/run.trec", _trec_run(RUN, tag="first"))
    _write(files, "b/run.trec", _trec_run({"q1": {"d1": 1.0}}, tag="second"))
    argv = ["score", "--qrels", "qrels.txt", "--measures", "recall@1", "--format", "trec"]
    assert main([*argv, "--run", "a/run.trec", "--run", "b/run.trec"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sorted(line.split("\t")[2] for line in lines if line.startswith("runid")) == ["first", "second"]
    assert main([*argv, "--run", "a/run.trec", "--run", "b/../a/run.trec"]) == 2
    assert "the same run file is given twice: " in capsys.readouterr().err
    _write(files, "b/other.trec", _trec_run(RUN, tag="first"))
    assert main([*argv, "--run", "a/run.trec", "--run", "b/other.trec"]) == 2
    assert "run ID 'first' of b/other.trec is also the ID of a/run.trec" in capsys.readouterr().err


def test_trec_format_prints_as_trec_eval_q_and_c_do(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """trec_eval prints measures in its table's order (cutoffs ascending) whatever order -m names them, and under -q
    a line per query only for the queries the run names; -c counts the others in the means only."""
    measures = "ndcg_cut_10,P_10,recall@1,P_5,map,recip_rank"
    argv = ["score", "--qrels", "qrels.txt", "--run", "run.trec", "--measures", measures, "--ties", "trec_eval"]
    assert main([*argv, "--format", "trec", "--per-query"]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    named = sorted(set(RUN) & set(QRELS))
    assert sorted({query for _, query, _ in lines} - {"all"}) == named  # q4 is judged, not in the run: all only
    first = [name.strip() for name, query, _ in lines if query == named[0]]
    assert first == ["map", "recip_rank", "P_5", "P_10", "ndcg_cut_10", "recall@1"]
    assert [name.strip() for name, query, _ in lines if query == "all"] == first


def test_cli_trec_format_names_each_run_when_there_are_several(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(files, "other.trec", _trec_run({"q2": {"d4": 1.0}}, tag="other"))
    argv = ["score", "--qrels", "qrels.txt", "--run", "run.trec", "--run", "other.trec", "--measures", "P_1"]
    assert main([*argv, "--format", "trec", "--per-query"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "runid                 \tall\tsys"  # q3, without a relevant document, scores 0 (trec_eval)
    # per query, only the queries each run names (sys: q1-q3, other: q2), as trec_eval -q prints them
    assert "runid                 \tall\tother" in lines and len(lines) == (1 + 3 + 1) + (1 + 1 + 1)


def test_measures_given_as_one_string_is_one_name() -> None:
    result = evalkit.score(QRELS, RUN, measures="recall@1")
    assert list(result.per_query.columns) == ["recall@1"]
    with pytest.raises(ValueError, match="names no measure"):
        evalkit.score(QRELS, RUN, measures=[])


def test_notes_say_what_was_left_uncounted() -> None:
    both = {"a": {"q1": {"d1": 1.0}}, "b": {"q2": {"d1": 1.0}}}
    nothing = evalkit.score(QRELS, both, measures=["recall@10"], missing="skip")
    assert any("nothing was scored" in note for note in nothing.notes)
    partial = evalkit.score(QRELS, RUN, measures=["recall@10"], languages={"q1": "en", "q77": "zh"})
    assert any("3 judged query(ies) without a language" in n and "1 topic(s) naming" in n for n in partial.notes)
    assert not any(n.startswith("topics:") for n in evalkit.score(QRELS, RUN, measures=["recall@10"]).notes)


@pytest.mark.parametrize(
    ("qrels", "run", "message"),
    [
        ({"q1": {"d1": 1}}, {"q1": {"d1": "x"}}, "run 'run': query 'q1' document 'd1': score 'x' is not a number"),
        ({"q1": {"d1": 1}}, {"q1": {"d1": True}}, "score True is not a number"),
        ({"q1": {"d1": 1}}, {"q1": {"d1": None}}, "score None is not a number"),
        ({"q1": {"d1": 1}}, {"q1": {"d1": float("nan")}}, "score nan is not finite"),
        ({"q1": {"d1": 1}}, {"q1": {"d1": 10**400}}, "(401 characters) is out of the floating-point range"),
        ({1: {"d1": 1}}, {"q1": {"d1": 1.0}}, "query 1: IDs are strings"),
        ({"q1": {2: 1}}, {"q1": {"d1": 1.0}}, "document ID 2 is not a string"),
        ({"q1": {"d1": 1}}, {1: {"d1": 1.0}}, "query 1: query and document IDs are strings"),
        # IDs given in Python are held to what the files are held to (they were accepted as they came)
        ({"q1": {"d1": 1}}, {"q1": {"d\x01": 1.0}}, r"run 'run': field 'doc_id': 'd\x01' holds a control"),
        ({"q1": {"d1": 1}}, {"q1": {"d\u202e": 1.0}}, r"field 'doc_id': 'd\u202e' holds a control or bidirectional"),
        ({"q1": {"d1": 1}}, {"q1": {"": 1.0}}, "field 'doc_id': '' is empty or holds whitespace"),
        ({"q1": {"d1": 1}}, {"q\x00": {"d1": 1.0}}, r"field 'query_id': 'q\x00' holds a control"),
        (
            {"q1": {"d1": 1}},
            {"a\x01": {"q1": {"d1": 1.0}}, "b": {"q1": {"d1": 1.0}}},
            r"runs: field 'run name': 'a\x01'",
        ),
        ({"q1": {"d1": 10**30}}, {"q1": {"d1": 1.0}}, "a grade is past 64 bits"),
        (
            {"q1": {"d1": 1}},
            pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": pd.array([pd.NA], dtype="Float64")}),
            "run DataFrame row 0: score <NA> is not a number",
        ),
        (
            {"q1": {"d1": 1}},
            pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": ["abc"]}),
            "run DataFrame row 0: score 'abc' is not a number",
        ),
        (
            {"q1": {"d1": 1}},
            pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "score": [2.0, "1.5"]}),
            "run DataFrame row 1: score '1.5' is not a number",  # as in a dict: text is not a score
        ),
        (
            {"q1": {"d1": 1}},
            pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "score": [True, False]}),
            "run DataFrame row 0: score True is not a number",
        ),
        (  # a missing grade makes pandas turn the column to floats: the row at fault is named, not the first
            pd.DataFrame({"query_id": ["q1", "q1", "q1"], "doc_id": ["d1", "d2", "d3"], "grade": [1, 2, None]}),
            {"q1": {"d1": 1.0}},
            "qrels DataFrame row 2: query 'q1' document 'd3': grade nan is not an integer",
        ),
        (
            pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "grade": [1.5]}),
            {"q1": {"d1": 1.0}},
            "qrels DataFrame row 0: query 'q1' document 'd1': grade 1.5 is not an integer",
        ),
    ],
)
def test_wrongly_typed_python_input_is_a_clear_value_error(qrels: object, run: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        evalkit.score(qrels, run)  # type: ignore[arg-type]


def test_a_grade_column_pandas_made_float_is_read_as_integers() -> None:
    frame = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "grade": [1.0, 0.0]})
    assert evalkit.score(frame, {"q1": {"d1": 2.0, "d2": 1.0}}, measures=["P_1"]).aggregate == {"P_1": 1.0}


def test_means_under_the_trec_eval_policy_add_query_by_query_as_trec_eval() -> None:
    """P_1000 of 0.001, 0.001, 0.007 and 0.01: exactly 0.00475, printed 0.0047; trec_eval adds the values one by one
    in query-ID order (0.004750000000000001) and prints 0.0048. The trec_eval policy prints what trec_eval prints."""
    sizes = {"q1": 1, "q2": 1, "q3": 7, "q4": 10}
    qrels = {q: {f"d{i}": 1 for i in range(n)} for q, n in sizes.items()}
    run = {q: {f"d{i}": 1.0 for i in range(n)} for q, n in sizes.items()}
    trec = evalkit.score(qrels, run, measures=["P_1000"], ties="trec_eval")
    exact = evalkit.score(qrels, run, measures=["P_1000"], ties="evalkit")
    assert trec.per_query["P_1000"].tolist() == exact.per_query["P_1000"].tolist() == [0.001, 0.001, 0.007, 0.01]
    assert trec.aggregate["P_1000"] == (((0.001 + 0.001) + 0.007) + 0.01) / 4 == 0.004750000000000001
    assert exact.aggregate["P_1000"] == 0.00475
    assert trec.format_trec().endswith("\tall\t0.0048")
    assert exact.format_trec().endswith("\tall\t0.0047")


def test_every_door_shows_the_measures_in_one_order() -> None:
    from evalkit.reporting.summary import format_outcome

    qrels = {"q1": {"a": 2, "b": 0}, "q2": {"c": 1}}
    run = {"q1": {"a": 0.9, "b": 0.5}, "q2": {"d": 0.4, "c": 0.3}}
    result = evalkit.score(qrels, run, measures=["ndcg@10", "recall@10", "P_5", "recall@5", "map"])
    report = result.to_report()
    fresh = format_outcome(report)
    reread = format_outcome(parse_report(report_json(report)))  # a report's keys come back sorted by name
    assert fresh == reread
    header = fresh.splitlines()[0].split()
    assert header[2:] == ["recall@5", "recall@10", "P_5", "ndcg@10", "map", "judged@10", "unj@10"]
    assert result.format_table().splitlines()[0].split() == header
