"""A large TREC run file is scored a segment of whole query groups at a time (evalkit.runs.run_sources): the same
values, counts, notes, hash and report as the run read whole; a run not grouped by query takes the whole read and
says so; a bad line is named as the whole read names it. The size thresholds are lowered so that small files
stream, in many segments."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import evalkit
from evalkit.data import run_stream, runs, tables
from evalkit.data.runs import RunFileError
from evalkit.measures import core
from evalkit.reporting.report import report_json
from evalkit.runs import run_sources

MEASURES = ["ndcg@10", "recall@5", "mrr@10", "map", "recip_rank", "bpref", "P_5", "precision(rel=2)@5"]


def _files(folder: Path, seed: int, grouped: bool = True) -> tuple[Path, Path]:
    """Qrels of 300 queries and a run of about 12,000 lines: ties, duplicates, unknown and missing queries."""
    rng = np.random.default_rng(seed)
    qrels, lines = [], []
    for q in range(300):
        judged = rng.choice(200, size=int(rng.integers(1, 12)), replace=False)
        qrels += [f"q{q:03d} 0 d{d} {int(g)}" for d, g in zip(judged, rng.integers(0, 4, len(judged)), strict=True)]
        if q % 17 == 0:
            continue  # a judged query the run leaves out
        query = f"q{q:03d}" if q % 29 else f"x{q:03d}"  # a run query the qrels do not judge
        docs = rng.choice(200, size=int(rng.integers(1, 80)))  # with repeats: duplicate lines
        scores = np.sort(np.round(rng.random(len(docs)), 1))[::-1]  # many ties
        lines += [f"{query} Q0 d{d} {r} {s:.1f} sys" for r, (d, s) in enumerate(zip(docs, scores, strict=True), 1)]
    if not grouped:
        lines.append(lines[0].replace(" 1 ", " 999 "))  # the first query again, at the end
    (folder / "qrels.txt").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    (folder / "run.trec").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / "qrels.txt", folder / "run.trec"


@pytest.fixture
def streaming(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every run file streams, parsed in blocks of 8 KiB and handed on about every 700 lines; returns the line
    count of every segment scored."""
    monkeypatch.setattr(run_sources, "STREAM_SCORE_BYTES", 0)
    monkeypatch.setattr(run_stream, "SEGMENT_LINES", 700)
    monkeypatch.setattr(tables, "_PARSE_BLOCK", 8192)
    sizes: list[int] = []
    add = core.RunScorer.add

    def recording(self: core.RunScorer, run: evalkit.Run) -> None:
        sizes.append(run.lines)
        add(self, run)

    monkeypatch.setattr(core.RunScorer, "add", recording)
    return sizes


def _scored(qrels: Path, run: Path, **options: object) -> evalkit.ScoreResult:
    return evalkit.score(qrels, run, measures=MEASURES, ties="trec_eval", **options)  # type: ignore[arg-type]


def _same(whole: evalkit.ScoreResult, streamed: evalkit.ScoreResult) -> None:
    for a, b in zip(whole.runs, streamed.runs, strict=True):
        assert a.name == b.name
        assert a.counts == b.counts
        np.testing.assert_array_equal(a.evaluated, b.evaluated)
        for name, column in a.values.items():
            np.testing.assert_array_equal(column, b.values[name], err_msg=name)  # NaN where NaN, else ==
    assert whole.run_hashes == streamed.run_hashes


def test_a_grouped_run_streams_in_segments_to_the_same_scores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    qrels, run = _files(tmp_path, seed=1)
    whole = _scored(qrels, run)
    sizes: list[int] = []
    with monkeypatch.context() as patch:
        patch.setattr(run_sources, "STREAM_SCORE_BYTES", 0)
        patch.setattr(run_stream, "SEGMENT_LINES", 700)
        patch.setattr(tables, "_PARSE_BLOCK", 8192)
        add = core.RunScorer.add
        patch.setattr(core.RunScorer, "add", lambda self, part: (sizes.append(part.lines), add(self, part))[1])
        streamed = _scored(qrels, run)
        scored = list(sizes)
        report = report_json(streamed.to_report())  # reads the file again, a segment at a time, for condensed forms
    assert len(sizes) == 2 * len(scored)
    sizes = scored
    assert len(sizes) >= 10, sizes  # many segments, none of them the whole run
    assert max(sizes) < 700 + 400 + 80, sizes  # a segment: its threshold, one parsed block, one query's lines
    assert sum(sizes) == whole.runs[0].counts.lines  # type: ignore[union-attr]
    _same(whole, streamed)
    assert whole.notes == streamed.notes
    assert report_json(whole.to_report()) == report  # condensed forms, read again a segment at a time, too


def test_a_floor_withholds_the_same_queries_streamed(tmp_path: Path, streaming: list[int]) -> None:
    qrels, run = _files(tmp_path, seed=2)
    streamed = _scored(qrels, run, floor=0.5)
    assert len(streaming) > 1
    run_sources_threshold = run_sources.STREAM_SCORE_BYTES
    run_sources.STREAM_SCORE_BYTES = 1 << 40  # type: ignore[misc]
    try:
        whole = _scored(qrels, run, floor=0.5)
    finally:
        run_sources.STREAM_SCORE_BYTES = run_sources_threshold  # type: ignore[misc]
    _same(whole, streamed)
    assert [n for n in whole.notes if "floor" in n] == [n for n in streamed.notes if "floor" in n]
    assert any(
        "floor 0.5:" in n and not n.endswith(": 0 query(ies) whose best score is below it return nothing")
        for n in streamed.notes
    )


def test_a_run_not_grouped_by_query_is_read_whole_and_says_so(tmp_path: Path, streaming: list[int]) -> None:
    qrels, run = _files(tmp_path, seed=3, grouped=False)
    streamed = _scored(qrels, run)
    assert any("not grouped by query" in n and "slower path" in n for n in streamed.notes), streamed.notes
    run_sources_threshold = run_sources.STREAM_SCORE_BYTES
    run_sources.STREAM_SCORE_BYTES = 1 << 40  # type: ignore[misc]
    try:
        whole = _scored(qrels, run)
    finally:
        run_sources.STREAM_SCORE_BYTES = run_sources_threshold  # type: ignore[misc]
    _same(whole, streamed)
    assert not any("not grouped" in n for n in whole.notes)


def test_a_line_with_an_extra_column_is_read_whole_in_blocks_and_says_so(
    tmp_path: Path, streaming: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One line past the first segments carries a seventh column (ignored, as trec_eval ignores it): the run is read
    whole, line by line a block at a time, with a note naming the slower path, to the scores of the same run
    without it."""
    monkeypatch.setattr(runs, "_IRREGULAR_BLOCK", 500)  # several blocks of the line-by-line read
    qrels, run = _files(tmp_path, seed=5)
    plain = _scored(qrels, run)
    lines = run.read_text(encoding="utf-8").splitlines()
    lines[3000] += " a-comment"
    run.write_text("\n".join(lines) + "\n", encoding="utf-8")
    streamed = _scored(qrels, run)
    assert any("could not be read a segment at a time" in n and "slower path" in n for n in streamed.notes)
    _same(plain, streamed)


def test_a_bad_line_past_the_first_segments_is_named_as_the_whole_read_names_it(
    tmp_path: Path, streaming: list[int]
) -> None:
    qrels, run = _files(tmp_path, seed=4)
    lines = run.read_text(encoding="utf-8").splitlines()
    lines[9000] = lines[9000].replace(" sys", " sys\x1b[31m")  # an ANSI escape in the tag of line 9001
    run.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RunFileError, match="line 9001") as streamed:
        _scored(qrels, run)
    assert len(streaming) >= 5  # it had scored segments before the bad block
    run_sources_threshold = run_sources.STREAM_SCORE_BYTES
    run_sources.STREAM_SCORE_BYTES = 1 << 40  # type: ignore[misc]
    try:
        with pytest.raises(RunFileError) as whole:
            _scored(qrels, run)
    finally:
        run_sources.STREAM_SCORE_BYTES = run_sources_threshold  # type: ignore[misc]
    assert str(streamed.value) == str(whole.value)


def test_several_run_files_stream_by_name(tmp_path: Path, streaming: list[int]) -> None:
    qrels, run = _files(tmp_path, seed=5)
    result = evalkit.score(qrels, {"a": run, "b": {"q001": {"d1": 1.0}}}, measures=["ndcg@10"])
    assert [r.name for r in result.runs] == ["a", "b"]
    assert not math.isnan(result.aggregate["a"]["ndcg@10"])
    assert result["a"].aggregate["ndcg@10"] == result.aggregate["a"]["ndcg@10"]


def test_a_streamed_run_shows_its_lines_on_a_terminal_only(
    tmp_path: Path, streaming: list[int], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = _files(tmp_path, seed=6)
    monkeypatch.setenv("EVALKIT_PROGRESS", "0")
    _scored(qrels, run)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("EVALKIT_PROGRESS", "1")
    _scored(qrels, run)
    assert "scoring sys" in capsys.readouterr().err


# --- JSONL run files ------------------------------------------------------------------------------------------


def _as_jsonl(run: Path, repeat_first: bool = False) -> Path:
    """The TREC run as JSONL, one line a query in file order; with ``repeat_first`` the first query comes again
    on a last line (its results apart: not grouped)."""
    lines: dict[str, list[dict[str, object]]] = {}
    for line in run.read_text(encoding="utf-8").splitlines():
        query, _, doc, _, score, _ = line.split()
        lines.setdefault(query, []).append({"chunk_id": doc, "score": float(score)})
    records = [{"query_id": q, "results": results} for q, results in lines.items()]
    if repeat_first:
        records.append({"query_id": records[0]["query_id"], "results": [{"chunk_id": "d999", "score": 0.0}]})
    path = run.with_name("sys.jsonl")
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _whole(qrels: Path, run: Path, **options: object) -> evalkit.ScoreResult:
    threshold = run_sources.STREAM_SCORE_BYTES
    run_sources.STREAM_SCORE_BYTES = 1 << 40  # type: ignore[misc]
    try:
        return _scored(qrels, run, **options)
    finally:
        run_sources.STREAM_SCORE_BYTES = threshold  # type: ignore[misc]


def test_a_jsonl_run_streams_in_segments_of_lines_to_the_same_scores_and_hash(
    tmp_path: Path, streaming: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_stream, "SEGMENT_BYTES", 20_000)
    qrels, trec = _files(tmp_path, seed=6)
    run = _as_jsonl(trec)
    streamed = _scored(qrels, run)
    assert len(streaming) >= 10, streaming  # many segments, none of them the whole run
    assert sum(streaming) == streamed.runs[0].counts.lines  # type: ignore[union-attr]
    whole = _whole(qrels, run)
    _same(whole, streamed)
    assert streamed.runs[0].name == "sys" and whole.notes == streamed.notes
    _same(_whole(qrels, trec), streamed)  # the same run as TREC (named by its tag, sys): the same values and hash


def test_a_jsonl_run_not_grouped_or_with_a_bad_line_is_read_whole(
    tmp_path: Path, streaming: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_stream, "SEGMENT_BYTES", 20_000)
    qrels, trec = _files(tmp_path, seed=7)
    run = _as_jsonl(trec, repeat_first=True)
    streamed = _scored(qrels, run)
    assert any("not grouped by query" in n and "slower path" in n for n in streamed.notes), streamed.notes
    _same(_whole(qrels, run), streamed)
    lines = run.read_text(encoding="utf-8").splitlines()
    lines[250] = lines[250].replace('"score": ', '"score": NaN, "x": ', 1)
    run.write_text("\n".join(lines) + "\n", encoding="utf-8")
    streaming.clear()
    with pytest.raises(RunFileError, match="line 251") as refused:
        _scored(qrels, run)
    assert len(streaming) >= 5  # it had scored segments before the bad one
    with pytest.raises(RunFileError) as whole:
        _whole(qrels, run)
    assert str(refused.value) == str(whole.value)
