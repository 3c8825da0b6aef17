"""Charts of an evaluation: per-language metrics, latency distributions and the effect of reranking.

Figures are readable on their own (title, axis labels with units, a legend for en and zh) and deterministic when
saved: a fixed SVG hash salt and no dates or software versions in the metadata, so the same data gives the same
bytes. Labels are ASCII, so no CJK font is needed and no glyph goes missing.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from evalkit.common.output import write_atomic
from evalkit.measures.results import ScoredEvaluation
from evalkit.reporting.frames import language_metrics_frame, latency_frame, rerank_delta_frame
from evalkit.reporting.report import Report

CHART_MEASURES = ("recall@10", "mrr@10", "ndcg@10", "context_precision", "context_recall")
LANGUAGE_COLORS = {"en": "#1f77b4", "zh": "#d62728"}
NO_LANGUAGE_COLOR = "#7f7f7f"
"""A query whose language the report does not know (scored without topics): grey, "unknown" in the legend."""
SVG_HASH_SALT = "evalkit"
FIGURE_RC: Any = {"svg.hashsalt": SVG_HASH_SALT, "svg.fonttype": "path", "font.family": "DejaVu Sans"}
"""Matplotlib settings of every evalkit figure: fixed SVG hash salt and fonts, so bytes are reproducible."""


def plot_language_metrics(report: Report, measures: Sequence[str] = CHART_MEASURES) -> Figure:
    """Grouped bars per measure: one group per ablation, en beside zh (one bar a group when the fixture's queries
    are of one language)."""
    frame = language_metrics_frame(report, measures)
    ablations = list(report.ablations)
    languages = [language for language in LANGUAGE_COLORS if (frame.language == language).any()] or ["en", "zh"]
    width = 0.8 / len(languages)
    offsets = [width * (i - (len(languages) - 1) / 2) for i in range(len(languages))]
    with matplotlib.rc_context(FIGURE_RC):
        figure = Figure(figsize=(3.2 * len(measures), 4.2), layout="constrained")
        axes = figure.subplots(1, len(measures), sharey=True, squeeze=False)[0]
        positions = np.arange(len(ablations))
        for axis, measure in zip(axes, measures, strict=True):
            for offset, language in zip(offsets, languages, strict=True):
                rows = frame[(frame.measure == measure) & (frame.language == language)].set_index("ablation")
                values = [float(rows.value.get(a, np.nan)) for a in ablations]
                errors = _interval_errors(report, ablations, language, measure, values)
                axis.bar(
                    positions + offset,
                    values,
                    width=width,
                    label=language,
                    color=LANGUAGE_COLORS[language],
                    yerr=errors,
                    capsize=2,
                    error_kw={"elinewidth": 0.8},
                )
            axis.set_title(measure)
            axis.set_xticks(positions, ablations, rotation=45, ha="right")
            axis.set_ylim(0, 1.05)
            axis.grid(axis="y", alpha=0.3)
        axes[0].set_ylabel("score (0 to 1, macro-averaged over queries; bars: 95% CI)")
        handles, labels = axes[0].get_legend_handles_labels()
        figure.legend(handles, labels, title="query language", loc="outside right center")
        figure.suptitle(f"Retrieval metrics per language: {report.fixture_id} {report.fixture_version}")
    return figure


def _interval_errors(
    report: Report, ablations: Sequence[str], language: str, measure: str, values: Sequence[float]
) -> np.ndarray:
    """Error bar lengths (below, above) from the report's bootstrap intervals; 0 where there is none."""
    errors = np.zeros((2, len(ablations)))
    for column, (ablation, value) in enumerate(zip(ablations, values, strict=True)):
        interval = report.ablations[ablation].intervals.get(language, {}).get(measure)  # type: ignore[call-overload]
        if interval is not None and not np.isnan(value):
            errors[:, column] = (max(value - interval[0], 0.0), max(interval[1] - value, 0.0))
    return errors


def plot_latency(evaluation: ScoredEvaluation) -> Figure:
    """Box plots of per-query latency per ablation (all runs), on a log scale."""
    frame = latency_frame(evaluation)
    ablations = list(evaluation.ablations)
    samples = [frame.loc[frame.ablation == a, "latency_ms"].to_numpy() for a in ablations]
    with matplotlib.rc_context(FIGURE_RC):
        figure = Figure(figsize=(8, 4.5), layout="constrained")
        axis = figure.subplots()
        axis.boxplot(samples, tick_labels=ablations, showfliers=True, whis=(5, 95))
        axis.set_yscale("log")
        axis.set_ylabel("latency per query (ms, log scale)")
        axis.set_xlabel("ablation (whiskers: 5th to 95th percentile)")
        axis.set_title(f"Query latency, {evaluation.runs} run(s) x {len(evaluation.fixture.queries)} queries")
        axis.grid(axis="y", alpha=0.3, which="both")
    return figure


def per_query_bars(
    values: Sequence[float], languages: Sequence[str], height: float, labels: tuple[str, str], title: str
) -> Figure:
    """One bar per query (already sorted), coloured by query language, with a zero line; ``labels`` are the x and y
    axis labels and ``title`` is given the counts of positive and negative values as ``{up}`` and ``{down}``."""
    with matplotlib.rc_context(FIGURE_RC):
        figure = Figure(figsize=(10, height), layout="constrained")
        axis = figure.subplots()
        colors = [LANGUAGE_COLORS.get(language, NO_LANGUAGE_COLOR) for language in languages]
        axis.bar(np.arange(len(values)), values, color=colors, width=0.8)
        axis.axhline(0, color="black", linewidth=0.8)
        unknown = any(language not in LANGUAGE_COLORS for language in languages)
        shown = [language for language in LANGUAGE_COLORS if language in set(languages)]
        shown = shown or ([] if unknown else list(LANGUAGE_COLORS))
        handles = [Patch(color=LANGUAGE_COLORS[language], label=language) for language in shown]
        if unknown:
            handles.append(Patch(color=NO_LANGUAGE_COLOR, label="unknown"))
        axis.legend(handles=handles, title="query language")
        axis.set_xticks([])
        axis.set_xlabel(labels[0])
        axis.set_ylabel(labels[1])
        array = np.asarray(values, dtype=np.float64)
        axis.set_title(title.format(up=int((array > 0).sum()), down=int((array < 0).sum())))
        axis.grid(axis="y", alpha=0.3)
    return figure


def plot_rerank_delta(evaluation: ScoredEvaluation) -> Figure:
    """Per answerable query, the change in nDCG@10 from hybrid to hybrid-rerank, coloured by language."""
    frame = rerank_delta_frame(evaluation)
    labels = (f"answerable queries, sorted by change ({len(frame)} queries)", "nDCG@10 change (rerank minus hybrid)")
    title = "Effect of reranking per query: {up} improved, {down} worse"
    return per_query_bars(frame.delta.tolist(), frame.language.tolist(), 4.5, labels, title)


def figure_bytes(figure: Figure, suffix: str) -> bytes:
    """The figure as PNG or SVG bytes with the deterministic settings (hash salt, no dates or versions)."""
    metadata = {"Software": None} if suffix == "png" else {"Date": None, "Creator": None}
    buffer = io.BytesIO()
    with matplotlib.rc_context(FIGURE_RC):
        figure.savefig(buffer, format=suffix, metadata=metadata, dpi=110)
    return buffer.getvalue()


def as_image(figure: Figure) -> Any:
    """An IPython PNG image of the figure, for ``display()`` in a notebook (figures are built without pyplot,
    so no backend hook would show them)."""
    from IPython.display import Image

    return Image(data=figure_bytes(figure, "png"), format="png")


def save_figure(figure: Figure, folder: Path, name: str) -> list[Path]:
    """Write ``name``.png and ``name``.svg into ``folder`` with deterministic bytes; return the paths."""
    written = []
    for suffix in ("png", "svg"):
        path = folder / f"{name}.{suffix}"
        write_atomic(path, figure_bytes(figure, suffix))
        written.append(path)
    return written


def save_all(figures: Mapping[str, Figure], folder: Path | None) -> list[Path]:
    """Save every named figure as PNG and SVG into ``folder``; nothing when folder is None."""
    if folder is None:
        return []
    return [path for name, figure in figures.items() for path in save_figure(figure, folder, name)]
