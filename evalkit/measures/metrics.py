"""Numbers over many queries: macro means of per-query values, overall and per language, and the latency summary;
and :data:`METRICS_VERSION`, the version of the measure definitions.

Each measure gives one value per query (:mod:`evalkit.measures.kernels`, through :mod:`evalkit.measures.core`);
averaging and slicing are this separate step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
from pydantic import Field

from evalkit.data.fixture import Query
from evalkit.data.schema import LANGUAGES, StrictModel
from evalkit.measures.registry import NO_ANSWER_FPR, STANDARD_MEASURES

__all__ = ["METRICS_VERSION", "LatencySummary", "aggregate", "latency_summary", "mean"]

METRICS_VERSION: Final = "2"
"""Version of the measure definitions; bump when any formula, edge-case policy or the standard set changes. It is
hashed into the evaluation definition, so that reports computed under different definitions are never compared
silently.

2: recall@1 joined the standard measures (the real-data benchmark reports it)."""


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean ``sum(values) / len(values)``, summed exactly with ``math.fsum``.

    Edge case: no values -> ``ValueError("no queries")``: a mean over no query is undefined, and NaN would not
    survive a JSON report.
    """
    if len(values) == 0:
        raise ValueError("no queries")
    return math.fsum(values) / len(values)


def aggregate(queries: Sequence[Query], per_query: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Macro averages per measure: ``all`` and each language; no-answer FPR over the no-answer queries."""
    slices: dict[str, list[Query]] = {"all": list(queries)}
    for language in LANGUAGES:
        slices[language] = [q for q in queries if q.language == language]
    table: dict[str, dict[str, float]] = {}
    for name, members in slices.items():
        answerable = [q for q in members if q.answerable]
        unanswerable = [q for q in members if not q.answerable]
        row: dict[str, float] = {}
        if answerable:
            for measure in STANDARD_MEASURES:
                row[measure.name] = mean([per_query[q.query_id][measure.name] for q in answerable])
        if unanswerable:
            row[NO_ANSWER_FPR.name] = mean([per_query[q.query_id][NO_ANSWER_FPR.name] for q in unanswerable])
        table[name] = row
    return table


class LatencySummary(StrictModel):
    """Summary of per-query latencies in milliseconds."""

    count: int = Field(description="Number of samples.")
    min_ms: float = Field(description="Smallest sample, ms.")
    median_ms: float = Field(description="Median (50th percentile, linear interpolation), ms.")
    p95_ms: float = Field(description="95th percentile by numpy.percentile(method='linear'), ms.")
    max_ms: float = Field(description="Largest sample, ms.")
    mean_ms: float = Field(description="Arithmetic mean (math.fsum), ms.")


def latency_summary(samples_ms: Sequence[float]) -> LatencySummary:
    """Count, min, median, p95, max and mean of latency samples in milliseconds.

    Percentiles use ``numpy.percentile(..., method="linear")`` (Hyndman & Fan type 7, numpy's default): the
    value at fractional position ``(n - 1) * q / 100`` of the sorted samples, linearly interpolated.

    Edge cases: no samples -> ``ValueError``; a negative or non-finite sample -> ``ValueError``.
    """
    if len(samples_ms) == 0:
        raise ValueError("no latency samples")
    values = np.asarray(samples_ms, dtype=np.float64)
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError("latency samples must be finite and >= 0 ms")
    median, p95 = np.percentile(values, [50.0, 95.0], method="linear")
    return LatencySummary(
        count=len(values),
        min_ms=float(values.min()),
        median_ms=float(median),
        p95_ms=float(p95),
        max_ms=float(values.max()),
        mean_ms=math.fsum(samples_ms) / len(samples_ms),
    )
