"""Did it get better? Two reports compared query by query, with intervals, paired tests and a regression gate.

For every ablation in both reports, every measure and every slice (all, en, zh), :func:`compare_reports` gives the
two means, the paired difference ``head - base`` with its bootstrap interval, the two-sided sign-flip permutation
p-value, the one-sided p-value of "head is worse", and the per-query wins, ties and losses (a win is a query the head
does better on: higher for every measure but ``no_answer_fpr``, where lower is better).

Two families are corrected by Holm's method, each on its own. The **gated** family holds the gated measures (by
default ndcg@10 and recall@10) x ablations x slices (all beside each language), adjusted over their one-sided
p-values: these rows decide the gate. Every other row is **exploratory**, adjusted over its two-sided p-values. Each
gated row also carries its power (:class:`RowPower`): the minimum detectable effect and the smallest p-value the
sign-flip test can reach with the queries that differ. A row whose interval and test disagree says why.

Two reports are comparable only over the same queries and judgments (``judgments_sha256``); anything else may
differ (that is usually the point) and is named in :attr:`Comparison.notes`. :func:`find_regressions` and
:func:`check_regressions` are the gate: a gated row that got worse by more than ``max_drop`` with a Holm-adjusted
one-sided p below ``alpha`` fails, raising the package's :class:`~evalkit.reporting.gates.GateFailure`; with
``require_power`` an underpowered gated row fails too.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from pydantic import Field

from evalkit.ablations import ALL_ABLATION_IDS
from evalkit.data.schema import SLICES, Identifier, Sha256, Slice, StrictModel, UnitFloat, model_json
from evalkit.measures.metrics import NO_ANSWER_FPR
from evalkit.measures.statistics import (
    StatisticsSettings,
    holm_adjust,
    minimum_detectable_effect,
    paired_bootstrap_intervals,
    queries_needed,
    sign_flip_p_floor,
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

COMPARISON_SCHEMA_VERSION: Literal[2] = 2
LOWER_IS_BETTER: Final = frozenset({str(NO_ANSWER_FPR)})
"""Measures where a smaller value is better; every other measure is better when larger."""
DEFAULT_ALPHA: Final = 0.05
DEFAULT_MAX_DROP: Final = 0.01
DEFAULT_GATE_MEASURES: Final = ("ndcg@10", "recall@10")
"""The primary measures the gate checks unless told otherwise; every other measure is exploratory."""
GATED_SLICES: Final[tuple[Slice, ...]] = SLICES
"""The gate looks at each language on its own (a drop in one fails even when the other hides it) and at all queries
together (a change that hurts both languages a little is a regression too)."""


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


class RowPower(StrictModel):
    """What the gate's test on one gated row could have seen (Webber, Moffat and Zobel 2008).

    The minimum detectable effect is the normal approximation ``(z_{1-a} + z_{0.8}) * sd / sqrt(n)`` at the row's
    level ``a = alpha / family size`` (the level Holm asks of the first row; no row is tested more leniently than
    ``alpha``, so this is the level that guarantees detection whatever the other rows show). It assumes i.i.d.
    paired differences and ``n`` large enough for the central limit theorem, with the observed ``sd`` taken as true.
    """

    alpha: UnitFloat = Field(description="the row's level: alpha divided by the gated family size")
    mde: float = Field(ge=0.0, description="drop detected with 80% power by a one-sided test at the row's level")
    p_floor: UnitFloat = Field(description="smallest one-sided sign-flip p attainable with the discordant queries")
    queries_needed: int | None = Field(description="queries for an MDE of max_drop at the same sd; None: max_drop 0")
    underpowered: bool = Field(description="MDE above max_drop, or p_floor above the row's level")
    reason: str = Field(description="why the row is underpowered, or empty")


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
    p_value: UnitFloat = Field(description="two-sided sign-flip permutation p-value (the table's p)")
    p_one_sided: UnitFloat = Field(description='one-sided sign-flip p-value of "head is worse" (the gate\'s p)')
    p_holm: UnitFloat = Field(
        description="Holm-adjusted within the row's family: gated rows over their one-sided p, exploratory rows "
        "over their two-sided p"
    )
    gated: bool = Field(description="in the gated family (a gated measure); else exploratory")
    wins: int = Field(ge=0, description="queries the head does better on")
    ties: int = Field(ge=0, description="queries with the same value")
    losses: int = Field(ge=0, description="queries the head does worse on")
    higher_is_better: bool
    sd_difference: float = Field(ge=0.0, description="standard deviation of the per-query differences (n - 1)")
    power: RowPower | None = Field(default=None, description="gated rows: what the test could have seen")
    disagreement: str | None = Field(
        default=None, description="why the interval and the two-sided test disagree on this row; None: they agree"
    )

    @property
    def drop(self) -> float:
        """How much worse the head is (positive: worse), whichever direction the measure improves in."""
        return -self.difference if self.higher_is_better else self.difference

    def label(self) -> str:
        """``ablation measure [slice]``."""
        return f"{self.ablation} {self.measure} [{self.slice}]"

    @property
    def discordant(self) -> int:
        """Queries whose value differs between base and head."""
        return self.wins + self.losses

    def evidence(self, confidence: float) -> str:
        """The difference with its interval and p-values, for messages."""
        text = (
            f"difference {self.difference:+.4f}, {confidence:.0%} CI [{self.ci_low:+.4f}, {self.ci_high:+.4f}], "
            f"p = {self.p_value:.4g}"
        )
        if self.gated:
            return f"{text}, one-sided p = {self.p_one_sided:.4g}, Holm p = {self.p_holm:.4g}"
        return f"{text}, Holm p = {self.p_holm:.4g} (exploratory)"


class Comparison(StrictModel):
    """The comparison of two reports: private like the reports (IDs, hashes and numbers)."""

    schema_version: Literal[2] = COMPARISON_SCHEMA_VERSION
    base: ReportIdentity
    head: ReportIdentity
    statistics: StatisticsSettings
    notes: tuple[str, ...] = Field(description="what differs between the two evaluations besides the results")
    only_in_base: tuple[str, ...] = Field(description="ablations not compared: in the base report only")
    only_in_head: tuple[str, ...] = Field(description="ablations not compared: in the head report only")
    gate_measures: tuple[str, ...] = Field(description="the gated measures (of those compared)")
    alpha: UnitFloat = Field(description="the gate's significance level, used for every row's power")
    max_drop: float = Field(ge=0.0, description="the gate's tolerated drop, used for every row's power")
    family_size: int = Field(ge=0, description="gated rows, corrected together by Holm over one-sided p-values")
    exploratory_family_size: int = Field(ge=0, description="the other rows, corrected together over two-sided p")
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
    # Oriented so that positive is better: the one-sided test of "head is worse" is the test of a negative mean.
    orientation = np.array([-1.0 if m in LOWER_IS_BETTER else 1.0 for _, m in keys])
    intervals = paired_bootstrap_intervals(before, after, settings)
    p_values = sign_flip_p_values(differences, settings)
    p_worse = sign_flip_p_values(differences * orientation, settings, "less")
    sds = differences.std(axis=0, ddof=1) if len(rows) > 1 else np.zeros(len(keys))
    out = []
    for column, ((label, _, _), measure) in enumerate(keys):
        better = differences[:, column] * orientation[column]
        row = ComparisonRow(
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
            p_one_sided=float(p_worse[column]),
            p_holm=1.0,
            gated=False,
            wins=int((better > 0).sum()),
            ties=int((better == 0).sum()),
            losses=int((better < 0).sum()),
            higher_is_better=bool(orientation[column] > 0),
            sd_difference=float(round(sds[column], 12)),
        )
        distinct = int(np.unique(differences[:, column]).size)
        out.append(row.model_copy(update={"disagreement": _disagreement(row, settings, distinct)}))
    return out


def _disagreement(row: ComparisonRow, settings: StatisticsSettings, distinct: int) -> str | None:
    """Why the interval and the two-sided test at the interval's level (1 - confidence) disagree, or None."""
    level = 1.0 - settings.confidence
    excludes_zero = row.ci_low > 0.0 or row.ci_high < 0.0
    if excludes_zero == (row.p_value < level):
        return None
    if excludes_zero:
        floor = sign_flip_p_floor(row.discordant, row.queries, settings, one_sided=False)
        if floor >= level:
            return (
                f"interval excludes 0 but p >= {level:g}: only {row.discordant} queries differ, so the sign-flip p "
                f"cannot go below {floor:.4g}; the percentile bootstrap treats those differences as the population"
            )
        return (
            f"interval excludes 0 but p >= {level:g}: the percentile bootstrap over {distinct} distinct differences "
            "is narrower than the test"
        )
    return (
        f"p < {level:g} but the interval includes 0: the percentile bootstrap over {distinct} distinct differences "
        "is wider than the test near the boundary"
    )


def _measures(pairs: Sequence[Pair]) -> tuple[str, ...]:
    """The measures both sides of every pair hold, in the base's column order (the standard set first)."""
    if not pairs:
        return ()
    shared = [m for m in pairs[0][1] if all(m in p[1] and m in p[2] for p in pairs)]
    standard = [m for m in (*ANSWERABLE_MEASURES, *NO_ANSWER_MEASURES) if m in shared]
    return (*standard, *(m for m in shared if m not in standard))


def gate_measures(pairs: Sequence[Pair], measures: Sequence[str] | None) -> tuple[str, ...]:
    """The gated measures: ``measures`` (each must be compared), or the defaults among those compared."""
    known = _measures(pairs)
    if measures is None:
        return tuple(m for m in DEFAULT_GATE_MEASURES if m in known)
    unknown = sorted(set(measures) - set(known))
    if unknown:
        raise ValueError(f"unknown gated measure(s) {', '.join(unknown)}; compared: {', '.join(sorted(known))}")
    return tuple(dict.fromkeys(measures))


def row_power(
    row: ComparisonRow, family_size: int, alpha: float, max_drop: float, settings: StatisticsSettings
) -> RowPower:
    """A gated row's power at ``alpha / family_size``: its MDE, p floor and the queries an MDE of max_drop needs."""
    level = alpha / max(family_size, 1)
    mde = minimum_detectable_effect(row.sd_difference, row.queries, level)
    floor = sign_flip_p_floor(row.discordant, row.queries, settings)
    reasons = []
    if mde > max_drop:
        reasons.append(f"MDE {mde:.4f} > max drop {max_drop:g}")
    # No discordant query: base and head agree everywhere; there is no drop for the floor to hide.
    if row.discordant and floor > level:
        reasons.append(
            f"{row.discordant} discordant queries cannot reach p < {level:.3g} (the floor is {floor:.3g}): "
            "significance is out of reach whatever the data"
        )
    return RowPower(
        alpha=level,
        mde=float(round(mde, 12)),
        p_floor=floor,
        queries_needed=queries_needed(row.sd_difference, max_drop, level),
        underpowered=bool(reasons),
        reason="; ".join(reasons),
    )


def _families(
    rows: Sequence[ComparisonRow], gated: Collection[str], alpha: float, max_drop: float, settings: StatisticsSettings
) -> tuple[ComparisonRow, ...]:
    """Mark the gated rows, Holm-adjust each family on its own p-values, and give every gated row its power."""
    marked = [r.model_copy(update={"gated": r.measure in gated and r.slice in GATED_SLICES}) for r in rows]
    family = [i for i, r in enumerate(marked) if r.gated]
    others = [i for i, r in enumerate(marked) if not r.gated]
    updates: dict[int, dict[str, object]] = {}
    for i, p in zip(family, holm_adjust([marked[i].p_one_sided for i in family]), strict=True):
        updates[i] = {"p_holm": float(p), "power": row_power(marked[i], len(family), alpha, max_drop, settings)}
    for i, p in zip(others, holm_adjust([marked[i].p_value for i in others]), strict=True):
        updates[i] = {"p_holm": float(p), "power": None}
    return tuple(r.model_copy(update=updates[i]) for i, r in enumerate(marked))


def compared_rows(
    index: QueryIndex,
    pairs: Sequence[Pair],
    settings: StatisticsSettings,
    gated: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    max_drop: float = DEFAULT_MAX_DROP,
) -> tuple[ComparisonRow, ...]:
    """Rows of every pair, measure and slice in report order, Holm-adjusted within the gated and exploratory families.

    ``gated`` names the gated measures (default :data:`DEFAULT_GATE_MEASURES` among those compared).
    """
    _check_gate_arguments(alpha, max_drop)
    chosen = gate_measures(pairs, gated)
    raw: list[ComparisonRow] = []
    steps = [(slice_name, answerable) for slice_name in SLICES for answerable in (True, False)]
    for slice_name, answerable in progress(steps, "comparing", len(steps)):
        raw += _slice_rows(index, pairs, settings, slice_name, answerable)
    labels = [label for label, _, _ in pairs]
    measures = _measures(pairs)
    raw.sort(key=lambda r: (labels.index(r.ablation), measures.index(r.measure), SLICES.index(r.slice)))
    return _families(raw, chosen, alpha, max_drop, settings)


def compare_reports(
    base: Report,
    head: Report,
    gated: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    max_drop: float = DEFAULT_MAX_DROP,
) -> Comparison:
    """Compare every ablation present in both reports, every measure and slice, in two Holm families.

    ``gated`` names the gated measures (default ndcg@10 and recall@10, those of them compared); ``alpha`` and
    ``max_drop`` are the gate's, stored in the comparison and used for every gated row's power. Raises
    :class:`ComparisonError` naming what differs when the reports are not over the same queries and judgments, or
    lack per-query values; ``ValueError`` for an unknown gated measure or a bad alpha or max_drop.
    """
    _check_comparable(base, head)
    shared = _ordered(set(base.ablations) & set(head.ablations))
    pairs = [(a, base.ablations[a].per_query, head.ablations[a].per_query) for a in shared]
    rows = compared_rows(base.queries, pairs, head.statistics, gated, alpha, max_drop)
    return Comparison(
        base=_identity(base, "base"),
        head=_identity(head, "head"),
        statistics=head.statistics,
        notes=_notes(base, head),
        only_in_base=tuple(_ordered(set(base.ablations) - set(head.ablations))),
        only_in_head=tuple(_ordered(set(head.ablations) - set(base.ablations))),
        gate_measures=gate_measures(pairs, gated),
        alpha=alpha,
        max_drop=max_drop,
        family_size=sum(r.gated for r in rows),
        exploratory_family_size=sum(not r.gated for r in rows),
        rows=rows,
    )


def compare_ablations(report: Report, base: str, head: str) -> tuple[ComparisonRow, ...]:
    """Inside one evaluation: ``head`` against ``base`` over the same queries (rows labelled ``head vs base``).

    The same paired intervals, sign-flip tests and two Holm families as :func:`compare_reports`, over this pair's
    measures and slices. Raises ``ValueError`` naming a missing ablation.
    """
    for name in (base, head):
        if name not in report.ablations:
            raise ValueError(f"ablation {name!r} is not in the report; it holds {', '.join(report.ablations)}")
    pair = (f"{head} vs {base}", report.ablations[base].per_query, report.ablations[head].per_query)
    return compared_rows(report.queries, [pair], report.statistics)


@dataclass(frozen=True)
class RegressionVerdict:
    """The gate's reading of a comparison's gated rows: failing drops, drops that do not fail, and power."""

    alpha: float
    max_drop: float
    confidence: float
    gated: int
    """Rows in the gated family (gated measures x ablations x slices)."""
    regressions: tuple[ComparisonRow, ...]
    """Drops larger than max_drop with a Holm-adjusted one-sided p below alpha: the gate fails on these."""
    not_significant: tuple[ComparisonRow, ...]
    """Drops larger than max_drop whose Holm-adjusted one-sided p is not below alpha: no evidence of a change."""
    within_tolerance: tuple[ComparisonRow, ...]
    """Significant drops no larger than max_drop: real perhaps, but tolerated."""
    underpowered: tuple[ComparisonRow, ...] = ()
    """Gated rows (not regressions) whose test could not have seen a drop of max_drop (see :class:`RowPower`)."""

    @property
    def passed(self) -> bool:
        """True when nothing regressed."""
        return not self.regressions

    @property
    def queries_needed(self) -> int | None:
        """Most queries an underpowered row would need for an MDE of max_drop (None: none, or max_drop 0)."""
        needed = [r.power.queries_needed for r in self.underpowered if r.power and r.power.queries_needed]
        return max(needed) if needed else None

    def outcomes(self, require_power: bool = False) -> tuple[GateOutcome, ...]:
        """One failed outcome per regression (and, with ``require_power``, per underpowered row)."""
        failed = tuple(
            GateOutcome(
                gate=f"{row.label()} difference",
                value=row.difference,
                threshold=-self.max_drop if row.higher_is_better else self.max_drop,
                comparison=">=" if row.higher_is_better else "<=",
                passed=False,
                detail=f"{self.confidence:.0%} CI [{row.ci_low:+.4f}, {row.ci_high:+.4f}], one-sided "
                f"p = {row.p_one_sided:.4g}, Holm p = {row.p_holm:.4g} < alpha {self.alpha:g}",
            )
            for row in self.regressions
        )
        if not require_power:
            return failed
        return failed + tuple(
            GateOutcome(
                gate=f"{row.label()} minimum detectable effect",
                value=row.power.mde,
                threshold=self.max_drop,
                comparison="<=",
                passed=False,
                detail=f"underpowered: {row.power.reason}; {_needed(row.power)}",
            )
            for row in self.underpowered
            if row.power is not None
        )

    def describe(self) -> str:
        """Plain lines: FAIL per regression, the drops seen but not significant, those tolerated, then power."""
        lines = [f"FAIL  {row.label()}: {row.evidence(self.confidence)}" for row in self.regressions]
        if not self.regressions:
            lines.append(
                f"PASS  no gated measure dropped by more than {self.max_drop:g} with one-sided Holm p < "
                f"{self.alpha:g} in any slice ({self.gated} gated rows)"
            )
        for row in self.not_significant:
            lines.append(f"seen, not significant  {row.label()}: {row.evidence(self.confidence)}")
        for row in self.within_tolerance:
            lines.append(f"significant, within tolerance  {row.label()}: {row.evidence(self.confidence)}")
        for row in self.underpowered:
            if row.power is not None:
                lines.append(f"underpowered  {row.label()}: {row.power.reason}; {_needed(row.power)}")
        if self.underpowered:
            needed = self.queries_needed
            lines.append(
                f"{len(self.underpowered)} of {self.gated} gated rows underpowered: their test could not have seen a "
                f"drop of {self.max_drop:g}"
                + (f"; up to {needed} queries would be needed at the observed spread" if needed else "")
                + ". No evidence here is not evidence of no regression (--require-power fails on this)"
            )
        return "\n".join(lines)


def _needed(power: RowPower) -> str:
    if power.queries_needed is None:
        return "no number of queries detects a drop of 0"
    return f"about {power.queries_needed} queries needed for MDE <= max drop"


def _check_gate_arguments(alpha: float, max_drop: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not max_drop >= 0.0:
        raise ValueError(f"max_drop must be >= 0, got {max_drop}")


def find_regressions(
    comparison: Comparison, alpha: float | None = None, max_drop: float | None = None
) -> RegressionVerdict:
    """Read the gate over the gated family, at the comparison's alpha and max_drop unless given others.

    Other values re-derive every gated row's power; the Holm-adjusted p-values do not depend on them.
    """
    alpha = comparison.alpha if alpha is None else alpha
    max_drop = comparison.max_drop if max_drop is None else max_drop
    _check_gate_arguments(alpha, max_drop)
    gated = [
        row.model_copy(update={"power": row_power(row, comparison.family_size, alpha, max_drop, comparison.statistics)})
        for row in comparison.rows
        if row.gated
    ]
    significant = [row for row in gated if row.p_holm < alpha and row.drop > 0]
    regressions = tuple(row for row in significant if row.drop > max_drop)
    return RegressionVerdict(
        alpha=alpha,
        max_drop=max_drop,
        confidence=comparison.statistics.confidence,
        gated=len(gated),
        regressions=regressions,
        not_significant=tuple(row for row in gated if row.p_holm >= alpha and row.drop > max_drop),
        within_tolerance=tuple(row for row in significant if row.drop <= max_drop),
        underpowered=tuple(r for r in gated if r.power and r.power.underpowered and r not in regressions),
    )


def check_regressions(verdict: RegressionVerdict, require_power: bool = False) -> None:
    """Raise :class:`GateFailure` listing every regression (and underpowered row, with ``require_power``)."""
    failed = verdict.outcomes(require_power)
    if failed:
        raise GateFailure(failed)


def format_comparison(comparison: Comparison) -> str:
    """A plain-text table, one row per ablation, measure and slice, then the families, marks and notes.

    ``p`` is two-sided; ``p worse`` is the one-sided p of "head is worse" the gate uses; ``Holm p`` is adjusted
    within the row's family (``gate``: gated, over one-sided p; ``expl``: exploratory, over two-sided p). ``MDE`` is
    a gated row's minimum detectable effect (``!`` after it: underpowered); ``*`` marks an interval and test that
    disagree, explained below the table.
    """
    confidence = f"{comparison.statistics.confidence:.0%} CI"
    header = (
        f"{'ablation':<18} {'measure':<17} {'slice':<5} {'n':>5} {'base':>7} {'head':>7} {'diff':>8} "
        f"{confidence:>19} {'p':>7} {'p worse':>7} {'Holm p':>7} {'family':<6} {'MDE':>8} {'W/T/L':>11}"
    )
    lines = [header, "-" * len(header)]
    marks = []
    for row in comparison.rows:
        interval = f"[{row.ci_low:+.3f}, {row.ci_high:+.3f}]" + ("*" if row.disagreement else " ")
        mde = "" if row.power is None else f"{row.power.mde:.3f}" + ("!" if row.power.underpowered else " ")
        lines.append(
            f"{row.ablation:<18} {row.measure:<17} {row.slice:<5} {row.queries:>5} {row.base_mean:>7.3f} "
            f"{row.head_mean:>7.3f} {row.difference:>+8.3f} {interval:>19} {row.p_value:>7.4f} "
            f"{row.p_one_sided:>7.4f} {row.p_holm:>7.4f} {'gate' if row.gated else 'expl':<6} {mde:>8} "
            f"{f'{row.wins}/{row.ties}/{row.losses}':>11}"
        )
        if row.disagreement:
            marks.append(f"* {row.label()}: {row.disagreement}")
    lines.append(
        f"{comparison.family_size} gated comparisons ({', '.join(comparison.gate_measures) or 'none'} x ablations x "
        f"all, en, zh): Holm over their one-sided p (p worse); {comparison.exploratory_family_size} exploratory "
        "comparisons: Holm over their two-sided p. p is two-sided."
    )
    lines.append(
        f"MDE: drop a one-sided test at alpha {comparison.alpha:g} / {comparison.family_size} detects with 80% "
        f"power (normal approximation); ! marks an underpowered row (MDE > max drop {comparison.max_drop:g}, or "
        "too few discordant queries to reach that alpha)"
    )
    lines += marks
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
