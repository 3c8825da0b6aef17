"""The one summary view: a plain-text table, one row per system and slice, one column per measure.

``evalkit run``, ``evalkit score`` (both paths), ``evalkit notebook`` and the notebooks print this table, from a
report (:func:`report_rows`) or from a result not yet made into one (:meth:`evalkit.runs.precomputed.ScoreResult.
summary_rows`, so that a text table costs no bootstrap). Values have four decimals, as trec_eval prints them; a
measure not defined on any query of a slice shows ``-``; the latency columns appear when some system was timed.
Beside the measures, ``judged@k`` and ``unj@k`` (k the largest cutoff asked) say how much of each system's top k the
judgments speak for; the condensed-list forms a report carries for ``compare`` (``Report.companions``) are not
shown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from evalkit.data.schema import SLICES, ablation_order
from evalkit.measures.registry import display_order
from evalkit.reporting.gates import format_gates
from evalkit.reporting.report import Report

__all__ = ["NO_GATES", "SummaryRow", "format_outcome", "format_summary", "report_rows"]

NO_GATES = "no gates: none names a system evaluated here"


@dataclass(frozen=True)
class SummaryRow:
    """One system and slice: its aggregates and, for the ``all`` slice of a timed system, its latency."""

    system: str
    slice: str
    values: dict[str, float] = field(default_factory=dict)
    latency_ms: tuple[float, float] | None = None
    """Median and p95 in milliseconds (None: not timed, or not the ``all`` slice)."""


def report_rows(report: Report) -> list[SummaryRow]:
    """The rows of a report: every system in ablation order, then ``all`` and each language that has queries."""
    rows = []
    for system_id, result in sorted(report.ablations.items(), key=lambda item: ablation_order(item[0])):
        for slice_name in SLICES:
            counts = result.query_counts.get(slice_name)
            if slice_name != "all" and (counts is None or counts.answerable + counts.no_answer == 0):
                continue
            latency = result.latency_ms
            timed = slice_name == "all" and latency.count > 0
            rows.append(
                SummaryRow(
                    system_id,
                    slice_name,
                    dict(result.metrics.get(slice_name, {})),
                    (latency.median_ms, latency.p95_ms) if timed else None,
                )
            )
    return rows


def _cell(value: float | None, width: int) -> str:
    return f"{'-':>{width}}" if value is None or math.isnan(value) else f"{value:>{width}.4f}"


def format_summary(rows: Sequence[SummaryRow], measures: Sequence[str], notes: Sequence[str] = ()) -> str:
    """The table of `rows` with one column per measure of `measures`, then one ``note:`` line per note."""
    timed = any(row.latency_ms is not None for row in rows)
    headers = [*measures, *(("p50 ms", "p95 ms") if timed else ())]
    widths = [max(8, len(h)) for h in headers]
    name_width = max([8, *(len(row.system) for row in rows)])
    header = f"{'system':<{name_width}} {'slice':<5} " + " ".join(
        f"{h:>{w}}" for h, w in zip(headers, widths, strict=True)
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        values: list[float | None] = [row.values.get(m) for m in measures]
        if timed:
            values += list(row.latency_ms) if row.latency_ms is not None else [None, None]
        cells = " ".join(_cell(v, w) for v, w in zip(values, widths, strict=True))
        lines.append(f"{row.system:<{name_width}} {row.slice:<5} {cells}")
    return "\n".join([*lines, *(f"note: {note}" for note in notes)])


def format_outcome(report: Report, notes: Sequence[str] = ()) -> str:
    """The report's summary table and notes, a blank line, then one line per gate (or that no gate applies)."""
    shown = display_order([m for m in report.measure_definitions() if m not in report.companions])
    summary = format_summary(report_rows(report), shown, notes)
    return f"{summary}\n\n{format_gates(report.gates) or NO_GATES}"
