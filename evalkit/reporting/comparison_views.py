"""Tables and charts of a comparison, for the notebooks: IDs and numbers only, deterministic figures.

:func:`comparison_frame` is the comparison table; :func:`plot_forest` draws each paired difference with its
interval per measure and language; :func:`plot_per_query_differences` shows the per-query differences of one
ablation and measure; :func:`interval_frame` puts every aggregate of a report beside its interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from evalkit.ablations import ALL_ABLATION_IDS
from evalkit.data.schema import LANGUAGES, SLICES
from evalkit.reporting.comparison import ComparisonRow
from evalkit.reporting.figures import FIGURE_RC, LANGUAGE_COLORS, per_query_bars
from evalkit.reporting.per_query import ANSWERABLE_MEASURES, NO_ANSWER_MEASURES
from evalkit.reporting.report import Report

FOREST_MEASURES = ("recall@1", "recall@10", "mrr@10", "ndcg@10", "context_recall", "no_answer_fpr")


def comparison_frame(rows: Sequence[ComparisonRow]) -> pd.DataFrame:
    """One row per ablation, measure and slice: means, difference, interval, p-values, family, power, W/T/L.

    ``p`` is two-sided, ``p_worse`` the one-sided p of "head is worse" the gate tests, ``holm_p`` adjusted within
    the row's ``family`` (gate: over one-sided p; exploratory: over two-sided p). ``mde`` and ``underpowered`` are
    set on gated rows; ``disagreement`` says why the interval and the test disagree, empty when they agree.
    """
    frame = pd.DataFrame(
        [
            {
                "ablation": r.ablation,
                "measure": r.measure,
                "slice": r.slice,
                "n": r.queries,
                "base": r.base_mean,
                "head": r.head_mean,
                "difference": r.difference,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
                "p": r.p_value,
                "p_worse": r.p_one_sided,
                "holm_p": r.p_holm,
                "family": "gate" if r.gated else "exploratory",
                "mde": None if r.power is None else r.power.mde,
                "underpowered": None if r.power is None else r.power.underpowered,
                "wins": r.wins,
                "ties": r.ties,
                "losses": r.losses,
                "disagreement": r.disagreement or "",
            }
            for r in rows
        ]
    )
    return frame.set_index(["ablation", "measure", "slice"])


def interval_frame(report: Report) -> pd.DataFrame:
    """Every aggregate of a report with its bootstrap interval: rows (ablation, slice), cells 'mean [low, high]'."""
    standard = [*ANSWERABLE_MEASURES, *NO_ANSWER_MEASURES]
    held = {m for result in report.ablations.values() for m in result.per_query}
    order = [m for m in standard if m in held or not held] + sorted(held - set(standard))
    rows = []
    for ablation_id, result in sorted(
        report.ablations.items(),
        key=lambda item: ALL_ABLATION_IDS.index(item[0]) if item[0] in ALL_ABLATION_IDS else 99,
    ):
        for slice_name in SLICES:
            values, intervals = result.metrics.get(slice_name, {}), result.intervals.get(slice_name, {})
            row: dict[str, object] = {"ablation": ablation_id, "slice": slice_name}
            for measure in order:
                if measure in values and measure in intervals:
                    low, high = intervals[measure]
                    row[measure] = f"{values[measure]:.3f} [{low:.3f}, {high:.3f}]"
                else:
                    row[measure] = "-"
            rows.append(row)
    return pd.DataFrame(rows).set_index(["ablation", "slice"])


def plot_forest(rows: Sequence[ComparisonRow], measures: Sequence[str] = FOREST_MEASURES) -> Figure:
    """Forest plot: per measure a panel, per ablation the en and zh paired differences with their intervals."""
    shown = [m for m in measures if any(r.measure == m for r in rows)]
    ablations = list(dict.fromkeys(r.ablation for r in rows))
    by_key: dict[tuple[str, str, str], ComparisonRow] = {(r.ablation, r.measure, r.slice): r for r in rows}
    with matplotlib.rc_context(FIGURE_RC):
        figure = Figure(figsize=(3.0 * max(len(shown), 1), 0.6 * len(ablations) + 2.2), layout="constrained")
        axes = figure.subplots(1, max(len(shown), 1), sharey=True, squeeze=False)[0]
        positions = np.arange(len(ablations))
        for axis, measure in zip(axes, shown, strict=False):
            for offset, language in ((-0.15, "en"), (0.15, "zh")):
                found = [by_key.get((a, measure, language)) for a in ablations]
                centre = np.array([np.nan if r is None else r.difference for r in found])
                low = np.array([np.nan if r is None else r.difference - r.ci_low for r in found])
                high = np.array([np.nan if r is None else r.ci_high - r.difference for r in found])
                axis.errorbar(
                    centre,
                    positions + offset,
                    xerr=np.vstack([low, high]),
                    fmt="o",
                    color=LANGUAGE_COLORS[language],
                    capsize=3,
                    label=language,
                )
            axis.axvline(0, color="black", linewidth=0.8)
            axis.set_title(measure)
            axis.set_xlabel("head minus base (mean, 95% CI)")
            axis.grid(axis="x", alpha=0.3)
        axes[0].set_yticks(positions, ablations)
        axes[0].invert_yaxis()
        handles = [Patch(color=LANGUAGE_COLORS[language], label=language) for language in LANGUAGES]
        figure.legend(handles=handles, title="query language", loc="outside right center")
        figure.suptitle("Paired differences per measure and language (no_answer_fpr: lower is better)")
    return figure


def per_query_difference_frame(base: Report, head: Report, ablation: str, measure: str) -> pd.DataFrame:
    """Per query where the measure is defined: base, head and head minus base, largest gain first."""
    if ablation not in base.ablations or ablation not in head.ablations:
        raise ValueError(f"ablation {ablation!r} is not in both reports")
    before = base.ablations[ablation].per_query.get(measure)
    after = head.ablations[ablation].per_query.get(measure)
    if before is None or after is None:
        raise ValueError(f"measure {measure!r} has no per-query values for ablation {ablation!r}")
    rows = [
        {"query_id": query_id, "language": language, "base": b, "head": h, "difference": h - b}
        for query_id, language, b, h in zip(base.queries.query_ids, base.queries.languages, before, after, strict=True)
        if b is not None and h is not None
    ]
    frame = pd.DataFrame(rows, columns=["query_id", "language", "base", "head", "difference"])
    return frame.sort_values(["difference", "query_id"], ascending=[False, True]).reset_index(drop=True)


def plot_per_query_differences(frame: pd.DataFrame, ablation: str, measure: str) -> Figure:
    """Bars of the per-query differences (from :func:`per_query_difference_frame`), coloured by language."""
    labels = (f"queries, sorted by difference ({len(frame)} queries)", f"{measure} difference (head minus base)")
    title = f"{ablation} {measure} per query: {{up}} better, {{down}} worse"
    return per_query_bars(frame.difference.tolist(), frame.language.tolist(), 4.2, labels, title)
