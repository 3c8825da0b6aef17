"""Did it get better? Two reports compared query by query, with intervals, paired tests and a regression gate.

For every ablation in both reports, every measure and every slice (all, en, zh), :func:`compare_reports` gives the
two means, the paired difference ``head - base`` with its bootstrap interval, the two-sided sign-flip permutation
p-value, the Holm-adjusted p-value over the whole family of comparisons, and the per-query wins, ties and losses
(a win is a query the head does better on: higher for every measure but ``no_answer_fpr``, where lower is better).

Two reports are comparable only over the same queries and judgments (``judgments_sha256``); anything else may
differ (that is usually the point) and is named in :attr:`Comparison.notes`. :func:`find_regressions` and
:func:`check_regressions` are the gate: a measure that got worse in a language by more than ``max_drop`` with a
Holm-adjusted p below ``alpha`` fails, raising the package's :class:`~evalkit.reporting.gates.GateFailure`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from pydantic import Field

from evalkit.ablations import ALL_ABLATION_IDS
from evalkit.data.schema import LANGUAGES, SLICES, Identifier, Sha256, Slice, StrictModel, UnitFloat, model_json
from evalkit.measures.metrics import NO_ANSWER_FPR
from evalkit.measures.statistics import (
    StatisticsSettings,
    holm_adjust,
    paired_bootstrap_intervals,
    sign_flip_p_values,
)
from evalkit.progress import progress
from evalkit.reporting.gates import GateFailure
from evalkit.reporting.per_query import (
    ANSWERABLE_MEASURES,
    NO_ANSWER_MEASURES,
    PerQueryColumns,
    QueryIndex,
    split_measures,
)
from evalkit.reporting.report import GateOutcome, Report

COMPARISON_SCHEMA_VERSION: Literal[1] = 1
LOWER_IS_BETTER: Final = frozenset({str(NO_ANSWER_FPR)})
"""Measures where a smaller value is better; every other measure is better when larger."""
DEFAULT_ALPHA: Final = 0.05
DEFAULT_MAX_DROP: Final = 0.01
GATED_SLICES: Final[tuple[Slice, ...]] = LANGUAGES
"""The gate looks at each language on its own: a drop in one language fails even when the other hides it."""


class ComparisonError(ValueError):
    """Two reports that cannot be compared query by query."""


class ReportIdentity(StrictModel):
    """What identifies one side of a comparison: IDs and hashes only."""

    fixture_id: Identifier
    fixture_version: str
    judgments_sha256: Sha256
    corpus_sha256: Sha256 | None
    evaluation_definition_hash: Sha256
    provider_definitions_hash: Sha256 | None
    metrics_version: str


class ComparisonRow(StrictModel):
    """One ablation, measure and slice compared over the same queries."""

    ablation: str
    measure: str
    slice: Slice
    queries: int = Field(ge=1, description="queries the measure is defined on in this slice")
    base_mean: float
    head_mean: float
    difference: float = Field(description="head_mean - base_mean: the mean of the per-query differences")
    ci_low: float = Field(description="low end of the bootstrap interval of the mean difference")
    ci_high: float = Field(description="high end of the bootstrap interval of the mean difference")
    p_value: UnitFloat = Field(description="two-sided sign-flip permutation p-value")
    p_holm: UnitFloat = Field(description="p_value adjusted by Holm's method over every row of the comparison")
    wins: int = Field(ge=0, description="queries the head does better on")
    ties: int = Field(ge=0, description="queries with the same value")
    losses: int = Field(ge=0, description="queries the head does worse on")
    higher_is_better: bool

    @property
    def drop(self) -> float:
        """How much worse the head is (positive: worse), whichever direction the measure improves in."""
        return -self.difference if self.higher_is_better else self.difference

    def label(self) -> str:
        """``ablation measure [slice]``."""
        return f"{self.ablation} {self.measure} [{self.slice}]"

    def evidence(self, confidence: float) -> str:
        """The difference with its interval and p-values, for messages."""
        return (
            f"difference {self.difference:+.4f}, {confidence:.0%} CI [{self.ci_low:+.4f}, {self.ci_high:+.4f}], "
            f"p = {self.p_value:.4g}, Holm p = {self.p_holm:.4g}"
        )


class Comparison(StrictModel):
    """The comparison of two reports: private like the reports (IDs, hashes and numbers)."""

    schema_version: Literal[1] = COMPARISON_SCHEMA_VERSION
    base: ReportIdentity
    head: ReportIdentity
    statistics: StatisticsSettings
    notes: tuple[str, ...] = Field(description="what differs between the two evaluations besides the results")
    only_in_base: tuple[str, ...] = Field(description="ablations not compared: in the base report only")
    only_in_head: tuple[str, ...] = Field(description="ablations not compared: in the head report only")
    family_size: int = Field(ge=0, description="comparisons corrected for together by Holm's method")
    rows: tuple[ComparisonRow, ...]


def _identity(report: Report, side: str) -> ReportIdentity:
    if report.judgments_sha256 is None:
        raise ComparisonError(f"{side} report has no judgments_sha256; regenerate it with `evalkit run --output PATH`")
    return ReportIdentity(
        fixture_id=report.fixture_id,
        fixture_version=report.fixture_version,
        judgments_sha256=report.judgments_sha256,
        corpus_sha256=report.corpus_sha256,
        evaluation_definition_hash=report.evaluation_definition_hash,
        provider_definitions_hash=report.provider_definitions_hash,
        metrics_version=report.metrics_version,
    )


def _check_comparable(base: Report, head: Report) -> None:
    base_id, head_id = _identity(base, "base"), _identity(head, "head")
    if base_id.judgments_sha256 != head_id.judgments_sha256:
        raise ComparisonError(
            "reports are not over the same queries and judgments: judgments_sha256 differs "
            f"(base {base_id.judgments_sha256[:12]} of fixture {base.fixture_id} {base.fixture_version}, "
            f"head {head_id.judgments_sha256[:12]} of fixture {head.fixture_id} {head.fixture_version})"
        )
    if base.queries != head.queries:
        raise ComparisonError("reports list different queries (queries) although their judgments_sha256 agree")
    if not base.queries.query_ids:
        raise ComparisonError("reports hold no per-query values; regenerate them with `evalkit run --output PATH`")
    base_defs, head_defs = base.measure_definitions(), head.measure_definitions()
    differing = sorted(m for m in base_defs.keys() & head_defs.keys() if base_defs[m] != head_defs[m])
    if differing:
        name = differing[0]
        raise ComparisonError(
            f"measure {name} is defined differently in the two reports (base {base_defs[name]}, head "
            f"{head_defs[name]}): compare reports whose measures agree"
        )


def _notes(base: Report, head: Report) -> tuple[str, ...]:
    notes = []
    if base.fixture_version != head.fixture_version:
        notes.append(f"fixture version differs: base {base.fixture_version}, head {head.fixture_version}")
    if base.corpus_sha256 != head.corpus_sha256:
        notes.append("the corpus differs (corpus_sha256): documents or chunks changed")
    if base.provider_definitions_hash != head.provider_definitions_hash:
        notes.append("the embedding providers differ (provider_definitions_hash)")
    if base.metrics_version != head.metrics_version:
        notes.append(
            f"the metric definitions differ: metrics_version base {base.metrics_version}, head {head.metrics_version}"
        )
    if base.statistics != head.statistics:
        notes.append("the statistics settings differ: the head report's settings are used")
    if base.evaluation_definition_hash != head.evaluation_definition_hash:
        notes.append(
            "the evaluation definition differs (evaluation_definition_hash): retrieval settings, ablation "
            "definitions, providers, corpus, metric or analyzer version"
        )
    return tuple(notes)


def _ordered(ablations: Collection[str]) -> list[str]:
    return sorted(
        ablations, key=lambda a: (ALL_ABLATION_IDS.index(a) if a in ALL_ABLATION_IDS else len(ALL_ABLATION_IDS), a)
    )


Pair = tuple[str, PerQueryColumns, PerQueryColumns]
"""A label (the ablation) with the base and head per-query columns it compares."""


def _column(columns: PerQueryColumns, label: str, measure: str, rows: Sequence[int], side: str) -> np.ndarray:
    if measure not in columns:
        raise ComparisonError(f"{side}: ablation {label} has no per-query values for {measure}")
    column = columns[measure]
    return np.array([column[row] for row in rows], dtype=np.float64)


def _slice_rows(
    index: QueryIndex, pairs: Sequence[Pair], settings: StatisticsSettings, slice_name: Slice, answerable: bool
) -> list[ComparisonRow]:
    """Every pair and measure of one slice and query kind, in one vectorized call (Holm p still unset)."""
    rows = index.members(slice_name, answerable)
    if not rows or not pairs:
        return []
    measures = split_measures(_measures(pairs))[0 if answerable else 1]
    keys = [(pair, m) for pair in pairs for m in measures]
    if not keys:
        return []
    before = np.column_stack([_column(p[1], p[0], m, rows, "base") for p, m in keys])
    after = np.column_stack([_column(p[2], p[0], m, rows, "head") for p, m in keys])
    differences = after - before
    intervals = paired_bootstrap_intervals(before, after, settings)
    p_values = sign_flip_p_values(differences, settings)
    out = []
    for column, ((label, _, _), measure) in enumerate(keys):
        higher = measure not in LOWER_IS_BETTER
        better = differences[:, column] if higher else -differences[:, column]
        out.append(
            ComparisonRow(
                ablation=label,
                measure=measure,
                slice=slice_name,
                queries=len(rows),
                base_mean=float(before[:, column].mean()),
                head_mean=float(after[:, column].mean()),
                difference=float(differences[:, column].mean()),
                ci_low=float(intervals[column, 0]),
                ci_high=float(intervals[column, 1]),
                p_value=float(p_values[column]),
                p_holm=1.0,
                wins=int((better > 0).sum()),
                ties=int((better == 0).sum()),
                losses=int((better < 0).sum()),
                higher_is_better=higher,
            )
        )
    return out


def _measures(pairs: Sequence[Pair]) -> tuple[str, ...]:
    """The measures both sides of every pair hold, in the base's column order (the standard set first)."""
    if not pairs:
        return ()
    shared = [m for m in pairs[0][1] if all(m in p[1] and m in p[2] for p in pairs)]
    standard = [m for m in (*ANSWERABLE_MEASURES, *NO_ANSWER_MEASURES) if m in shared]
    return (*standard, *(m for m in shared if m not in standard))


def compared_rows(index: QueryIndex, pairs: Sequence[Pair], settings: StatisticsSettings) -> tuple[ComparisonRow, ...]:
    """Rows of every pair, measure and slice in report order, with Holm-adjusted p-values over all of them."""
    raw: list[ComparisonRow] = []
    steps = [(slice_name, answerable) for slice_name in SLICES for answerable in (True, False)]
    for slice_name, answerable in progress(steps, "comparing", len(steps)):
        raw += _slice_rows(index, pairs, settings, slice_name, answerable)
    labels = [label for label, _, _ in pairs]
    measures = _measures(pairs)
    raw.sort(key=lambda r: (labels.index(r.ablation), measures.index(r.measure), SLICES.index(r.slice)))
    adjusted = holm_adjust([r.p_value for r in raw])
    return tuple(r.model_copy(update={"p_holm": float(p)}) for r, p in zip(raw, adjusted, strict=True))


def compare_reports(base: Report, head: Report) -> Comparison:
    """Compare every ablation present in both reports, every measure and slice; Holm over the whole family.

    Raises :class:`ComparisonError` naming what differs when the reports are not over the same queries and
    judgments, or lack per-query values.
    """
    _check_comparable(base, head)
    shared = _ordered(set(base.ablations) & set(head.ablations))
    pairs = [(a, base.ablations[a].per_query, head.ablations[a].per_query) for a in shared]
    rows = compared_rows(base.queries, pairs, head.statistics)
    return Comparison(
        base=_identity(base, "base"),
        head=_identity(head, "head"),
        statistics=head.statistics,
        notes=_notes(base, head),
        only_in_base=tuple(_ordered(set(base.ablations) - set(head.ablations))),
        only_in_head=tuple(_ordered(set(head.ablations) - set(base.ablations))),
        family_size=len(rows),
        rows=rows,
    )


def compare_ablations(report: Report, base: str, head: str) -> tuple[ComparisonRow, ...]:
    """Inside one evaluation: ``head`` against ``base`` over the same queries (rows labelled ``head vs base``).

    The same paired intervals and sign-flip tests as :func:`compare_reports`, Holm over this pair's measures and
    slices. Raises ``ValueError`` naming a missing ablation.
    """
    for name in (base, head):
        if name not in report.ablations:
            raise ValueError(f"ablation {name!r} is not in the report; it holds {', '.join(report.ablations)}")
    pair = (f"{head} vs {base}", report.ablations[base].per_query, report.ablations[head].per_query)
    return compared_rows(report.queries, [pair], report.statistics)


@dataclass(frozen=True)
class RegressionVerdict:
    """The gate's reading of a comparison: failing drops, and the drops seen that do not fail."""

    alpha: float
    max_drop: float
    confidence: float
    regressions: tuple[ComparisonRow, ...]
    """Drops larger than max_drop with a Holm-adjusted p below alpha: the gate fails on these."""
    not_significant: tuple[ComparisonRow, ...]
    """Drops larger than max_drop whose Holm-adjusted p is not below alpha: no evidence of a change."""
    within_tolerance: tuple[ComparisonRow, ...]
    """Significant drops no larger than max_drop: real perhaps, but tolerated."""

    @property
    def passed(self) -> bool:
        """True when nothing regressed."""
        return not self.regressions

    def outcomes(self) -> tuple[GateOutcome, ...]:
        """One failed gate outcome per regression, naming ablation, measure, language, difference, CI and p."""
        return tuple(
            GateOutcome(
                gate=f"{row.label()} difference",
                value=row.difference,
                threshold=-self.max_drop if row.higher_is_better else self.max_drop,
                comparison=">=" if row.higher_is_better else "<=",
                passed=False,
                detail=f"{self.confidence:.0%} CI [{row.ci_low:+.4f}, {row.ci_high:+.4f}], Holm p = {row.p_holm:.4g} "
                f"< alpha {self.alpha:g}",
            )
            for row in self.regressions
        )

    def describe(self) -> str:
        """Plain lines: FAIL per regression, then the drops seen but not significant and those tolerated."""
        lines = [f"FAIL  {row.label()}: {row.evidence(self.confidence)}" for row in self.regressions]
        if not self.regressions:
            lines.append(
                f"PASS  no measure dropped by more than {self.max_drop:g} with Holm p < {self.alpha:g} in any language"
            )
        for row in self.not_significant:
            lines.append(f"seen, not significant  {row.label()}: {row.evidence(self.confidence)}")
        for row in self.within_tolerance:
            lines.append(f"significant, within tolerance  {row.label()}: {row.evidence(self.confidence)}")
        return "\n".join(lines)


def find_regressions(
    comparison: Comparison,
    alpha: float = DEFAULT_ALPHA,
    max_drop: float = DEFAULT_MAX_DROP,
    measures: Sequence[str] | None = None,
) -> RegressionVerdict:
    """Read the gate: per language, every gated measure (default: all) of every compared ablation."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not max_drop >= 0.0:
        raise ValueError(f"max_drop must be >= 0, got {max_drop}")
    known = {row.measure for row in comparison.rows}
    unknown = sorted(set(measures or ()) - known)
    if unknown:
        raise ValueError(f"unknown gated measure(s) {', '.join(unknown)}; compared: {', '.join(sorted(known))}")
    gated = [
        row
        for row in comparison.rows
        if row.slice in GATED_SLICES and (measures is None or row.measure in measures) and row.drop > 0
    ]
    significant = [row for row in gated if row.p_holm < alpha]
    return RegressionVerdict(
        alpha=alpha,
        max_drop=max_drop,
        confidence=comparison.statistics.confidence,
        regressions=tuple(row for row in significant if row.drop > max_drop),
        not_significant=tuple(row for row in gated if row.p_holm >= alpha and row.drop > max_drop),
        within_tolerance=tuple(row for row in significant if row.drop <= max_drop),
    )


def check_regressions(verdict: RegressionVerdict) -> None:
    """Raise :class:`GateFailure` listing every regression; return quietly when there is none."""
    if not verdict.passed:
        raise GateFailure(verdict.outcomes())


_HEADERS = ("ablation", "measure", "slice", "n", "base", "head", "diff", "95% CI", "p", "Holm p", "W/T/L")


def format_comparison(comparison: Comparison) -> str:
    """A plain-text table, one row per ablation, measure and slice, then the notes."""
    confidence = f"{comparison.statistics.confidence:.0%} CI"
    header = (
        f"{'ablation':<18} {'measure':<17} {'slice':<5} {'n':>5} {'base':>7} {'head':>7} {'diff':>8} "
        f"{confidence:>19} {'p':>7} {'Holm p':>7} {'W/T/L':>11}"
    )
    lines = [header, "-" * len(header)]
    for row in comparison.rows:
        interval = f"[{row.ci_low:+.3f}, {row.ci_high:+.3f}]"
        lines.append(
            f"{row.ablation:<18} {row.measure:<17} {row.slice:<5} {row.queries:>5} {row.base_mean:>7.3f} "
            f"{row.head_mean:>7.3f} {row.difference:>+8.3f} {interval:>19} {row.p_value:>7.4f} {row.p_holm:>7.4f} "
            f"{f'{row.wins}/{row.ties}/{row.losses}':>11}"
        )
    lines.append(f"{comparison.family_size} comparisons; p-values Holm-adjusted over all of them")
    lines += [f"note: {note}" for note in comparison.notes]
    if comparison.only_in_base or comparison.only_in_head:
        lines.append(
            f"not compared: base only {', '.join(comparison.only_in_base) or '-'}; "
            f"head only {', '.join(comparison.only_in_head) or '-'}"
        )
    return "\n".join(lines)


def comparison_json(comparison: Comparison) -> bytes:
    """Stable serialization: sorted keys, two-space indent, trailing newline."""
    return model_json(comparison)


def parse_comparison(text: str | bytes) -> Comparison:
    """Load a comparison written by :func:`comparison_json`."""
    return Comparison.model_validate_json(text)
