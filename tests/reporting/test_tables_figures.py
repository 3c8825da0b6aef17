"""Notebook views: pandas tables (IDs and numbers unless asked) and deterministic, legible figures."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from evalkit.reporting.build import build_report
from evalkit.reporting.figures import (
    per_query_bars,
    plot_language_metrics,
    plot_latency,
    plot_rerank_delta,
    save_all,
    save_figure,
)
from evalkit.reporting.frames import (
    drilldown_frame,
    failing_query_ids,
    failures_frame,
    latency_frame,
    metrics_frame,
    rank_pivot,
    rerank_delta_frame,
)
from evalkit.runs.evaluation import Evaluation


def test_metrics_frame_rows_and_values(tiny_evaluation: Evaluation) -> None:
    frame = metrics_frame(build_report(tiny_evaluation))
    assert list(frame.index.get_level_values(0).unique()) == [
        "lexical",
        "token-hash-vector",
        "alias-vector",
        "hybrid",
        "hybrid-rerank",
    ]
    assert frame.loc[("hybrid", "zh"), "ndcg@10"] == tiny_evaluation.ablations["hybrid"].aggregates["zh"]["ndcg@10"]
    assert frame.loc[("lexical", "all"), "p50_ms"] == tiny_evaluation.ablations["lexical"].latency.median_ms


def test_metrics_frame_of_a_score_report_shows_its_measures_and_no_latency() -> None:
    """A report scored under trec_eval's names without languages: its measures as columns (every cell was None),
    the all slice only, and no latency (a run file is not timed; it showed 0.0 ms)."""
    import evalkit

    report = evalkit.score({"q1": {"d1": 1}, "q2": {"d2": 1}}, {"q1": {"d1": 1.0}}, ["ndcg_cut_10", "map"]).to_report()
    frame = metrics_frame(report)
    assert list(frame.index) == [("run", "all")]
    assert frame.loc[("run", "all"), "ndcg_cut_10"] == 0.5 and frame.loc[("run", "all"), "map"] == 0.5
    assert frame.loc[("run", "all"), "p50_ms"] is None and frame.loc[("run", "all"), "p95_ms"] is None


def test_latency_frame_has_every_sample(tiny_evaluation: Evaluation) -> None:
    frame = latency_frame(tiny_evaluation)
    assert len(frame) == sum(len(r.latency_samples_ms) for r in tiny_evaluation.ablations.values())
    assert (frame.latency_ms >= 0).all()


def test_rerank_delta_is_the_difference(tiny_evaluation: Evaluation) -> None:
    frame = rerank_delta_frame(tiny_evaluation)
    answerable = [q.query_id for q in tiny_evaluation.fixture.queries if q.answerable]
    assert sorted(frame.query_id) == sorted(answerable)
    row = frame.iloc[0]
    expected = (
        tiny_evaluation.ablations["hybrid-rerank"].per_query[row.query_id]["ndcg@10"]
        - tiny_evaluation.ablations["hybrid"].per_query[row.query_id]["ndcg@10"]
    )
    assert row.delta == expected
    assert list(frame.delta) == sorted(frame.delta, reverse=True)


def test_failures_frame_matches_the_report(tiny_evaluation: Evaluation) -> None:
    report = build_report(tiny_evaluation)
    frame = failures_frame(report)
    assert len(frame) == sum(len(r.failures) for r in report.ablations.values())
    assert set(frame.query_id) == set(failing_query_ids(tiny_evaluation))


def test_drilldown_is_private_unless_asked(tiny_evaluation: Evaluation) -> None:
    ids = failing_query_ids(tiny_evaluation)
    private = drilldown_frame(tiny_evaluation, ids)
    texts = {q.text for q in tiny_evaluation.fixture.queries}
    assert not any(isinstance(v, str) and v in texts for v in private.to_numpy().ravel())
    shown = drilldown_frame(tiny_evaluation, ids, show_text=True)
    assert set(shown.query_text) <= texts and "span_text" in shown.columns
    with pytest.raises(ValueError, match="unknown query ID"):
        drilldown_frame(tiny_evaluation, ["q-nope"])


def test_rank_pivot_has_one_column_per_ablation(tiny_evaluation: Evaluation) -> None:
    query = next(q for q in tiny_evaluation.fixture.queries if q.answerable)
    pivot = rank_pivot(drilldown_frame(tiny_evaluation, [query.query_id]))
    assert list(pivot.columns) == list(tiny_evaluation.ablations)
    assert len(pivot) == len(query.judgments)
    ranking = next(r.chunk_ids for r in tiny_evaluation.ablations["lexical"].results if r.query_id == query.query_id)
    judgment = query.judgments[0]
    expected = ranking.index(judgment.chunk_id) + 1 if judgment.chunk_id in ranking else None
    value = pivot.loc[(query.query_id, judgment.chunk_id, judgment.grade), "lexical"]
    assert (expected is None and value != value) or value == expected  # NaN when not returned


def test_figures_are_labelled_and_draw_without_warnings(tiny_evaluation: Evaluation) -> None:
    report = build_report(tiny_evaluation)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph or layout problem would raise here
        figures = [plot_language_metrics(report), plot_latency(tiny_evaluation), plot_rerank_delta(tiny_evaluation)]
        for figure in figures:
            figure.canvas.draw()
    metrics, latency, delta = figures
    assert metrics._suptitle is not None and "Retrieval metrics per language" in metrics._suptitle.get_text()
    assert [t.get_text() for t in metrics.legends[0].get_texts()] == ["en", "zh"]
    assert "ms" in latency.axes[0].get_ylabel()
    assert "nDCG@10" in delta.axes[0].get_ylabel()
    assert [t.get_text() for t in delta.axes[0].get_legend().get_texts()] == ["en", "zh"]


def test_saved_figures_are_byte_identical_and_undated(tiny_evaluation: Evaluation, tmp_path: Path) -> None:
    report = build_report(tiny_evaluation)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = save_figure(plot_language_metrics(report), tmp_path / "a", "m")
    second = save_figure(plot_language_metrics(report), tmp_path / "b", "m")
    assert [p.name for p in first] == ["m.png", "m.svg"]
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes()
    svg = first[1].read_text(encoding="utf-8")
    assert "<dc:date>" not in svg
    assert "Matplotlib v" not in svg and b"Software" not in first[0].read_bytes()


def test_save_all_writes_nothing_without_a_folder(tiny_evaluation: Evaluation, tmp_path: Path) -> None:
    figure = plot_latency(tiny_evaluation)
    assert save_all({"latency": figure}, None) == []
    written = save_all({"latency": figure}, tmp_path)
    assert sorted(p.name for p in written) == ["latency.png", "latency.svg"]


_SVG_PROBE = """
import sys
from pathlib import Path
from evalkit.runs.ablations import ABLATION_IDS, select_ablations
from evalkit.runs.evaluation import evaluate
from evalkit.reporting.figures import plot_language_metrics, save_figure
from evalkit.data.fixture import load_fixture
from evalkit.reporting.build import build_report
evaluation = evaluate(load_fixture(sys.argv[1]), select_ablations(list(ABLATION_IDS)), runs=1)
save_figure(plot_language_metrics(build_report(evaluation)), Path(sys.argv[2]), "m")
"""


def test_svg_is_identical_across_processes(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from ..conftest import ROOT, TINY_DIR

    outputs = []
    for seed in ("0", "777"):
        folder = tmp_path / seed
        folder.mkdir()
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", _SVG_PROBE, str(TINY_DIR), str(folder)], env=env, cwd=ROOT, check=True)
        outputs.append((folder / "m.svg").read_bytes())
    assert outputs[0] == outputs[1]


def test_a_fixture_of_one_language_is_charted_with_that_language_only(tiny_evaluation: Evaluation) -> None:
    report = build_report(tiny_evaluation)
    chinese = report.model_copy(
        update={
            "ablations": {
                name: result.model_copy(update={"metrics": {k: v for k, v in result.metrics.items() if k != "en"}})
                for name, result in report.ablations.items()
            }
        }
    )
    figure = plot_language_metrics(chinese)
    figure.canvas.draw()
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["zh"]
    bars = figure.axes[0].patches
    assert len(bars) == len(report.ablations) and {round(b.get_width(), 3) for b in bars} == {0.8}
    assert [round(b.get_x() + b.get_width() / 2, 3) for b in bars] == list(range(len(report.ablations)))
    delta = per_query_bars([0.5, -0.25], ["zh", "zh"], 3.0, ("query", "change"), "{up} up, {down} down")
    assert [t.get_text() for t in delta.axes[0].get_legend().get_texts()] == ["zh"]
    unknown = per_query_bars([0.5, -0.25], [None, None], 3.0, ("query", "change"), "{up} up, {down} down")  # type: ignore[list-item]
    assert [t.get_text() for t in unknown.axes[0].get_legend().get_texts()] == ["unknown"]  # no en/zh patches
