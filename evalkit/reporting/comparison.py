"""Did it get better? Two reports compared query by query, with intervals and paired tests.

For every ablation in both reports, every measure and every slice (all, en, zh), :func:`compare_reports` gives the
two means, the paired difference ``head - base`` with its bootstrap interval, the two-sided sign-flip permutation
p-value, the one-sided p-value of "head is worse", and the per-query wins, ties and losses (a win is a query the head
does better on: higher for every measure but ``no_answer_fpr``, where lower is better).

Two families are corrected by Holm's method, each on its own. The **gated** family holds the gated measures (by
default ndcg@10 and recall@10) x ablations x slices (all beside each language), adjusted over their one-sided
p-values: these rows decide the gate. Every other row is **exploratory**, adjusted over its two-sided p-values. Each
gated row also carries its power (:class:`~evalkit.reporting.power.RowPower`). A row whose interval and test
disagree says why.

Two reports are comparable only over the same queries and judgments (``judgments_sha256``); anything else may
differ (that is usually the point) and is named in :attr:`Comparison.notes`. :func:`compare_many` compares two or
more reports pair by pair in the same two families. The gate that reads a comparison is
:mod:`evalkit.reporting.regression`.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from typing import Final, Literal

import numpy as np
from pydantic import Field

from evalkit.common.progress import progress
from evalkit.data.schema import SLICES, Identifier, Sha256, Slice, StrictModel, UnitFloat, ablation_order
from evalkit.measures.registry import NO_ANSWER_FPR
from evalkit.measures.statistics import StatisticsSettings, holm_adjust, paired_bootstrap_intervals, sign_flip_p_values
from evalkit.reporting.comparison_notes import ComparisonError, left_out_notes, report_notes, shared_ablations
from evalkit.reporting.formatting import signed
from evalkit.reporting.holes import (
    JudgedTest,
    UnjudgedShare,
    compared,
    first_against_others,
    holes_notes,
    unjudged_shares,
)
from evalkit.reporting.per_query import (
    ANSWERABLE_MEASURES,
    NO_ANSWER_MEASURES,
    QUERY_KINDS,
    PerQueryColumns,
    QueryIndex,
    every_query_measures,
    restricted,
    shared_queries,
    split_measures,
)
from evalkit.reporting.power import (
    DEFAULT_ALPHA,
    DEFAULT_MAX_DROP,
    GateFamilies,
    RowPower,
    check_gate_arguments,
    disagreement,
    family_sizes,
    repeated_hypotheses,
    row_power,
)
from evalkit.reporting.report import REGENERATE, Report

COMPARISON_SCHEMA_VERSION: Literal[2] = 2
LOWER_IS_BETTER: Final = frozenset({str(NO_ANSWER_FPR)})
"""Measures where a smaller value is better; every other measure is better when larger."""
DEFAULT_GATE_MEASURES: Final = ("ndcg@10", "recall@10")
"""The primary measures the gate checks unless told otherwise; every other measure is exploratory."""
GATED_SLICES: Final[tuple[Slice, ...]] = SLICES
"""The gate looks at each language on its own (a drop in one fails even when the other hides it) and at all queries
together (a change that hurts both languages a little is a regression too)."""


class ReportIdentity(StrictModel):
    """What identifies one side of a comparison: IDs and hashes only, each the report's field of the same name."""

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
        interval = f"[{signed(self.ci_low)}, {signed(self.ci_high)}]"
        text = f"difference {signed(self.difference)}, {confidence:.0%} CI {interval}, p = {self.p_value:.4g}"
        if self.gated:
            return f"{text}, one-sided p = {self.p_one_sided:.4g}, Holm p = {self.p_holm:.4g}"
        return f"{text}, Holm p = {self.p_holm:.4g} (exploratory)"


class Comparison(GateFamilies):
    """The comparison of two reports: private like the reports (IDs, hashes and numbers)."""

    schema_version: Literal[2] = COMPARISON_SCHEMA_VERSION
    base: ReportIdentity
    head: ReportIdentity
    statistics: StatisticsSettings
    notes: tuple[str, ...] = Field(description="what differs between the two evaluations besides the results")
    only_in_base: tuple[str, ...] = Field(description="ablations not compared: in the base report only")
    only_in_head: tuple[str, ...] = Field(description="ablations not compared: in the head report only")
    rows: tuple[ComparisonRow, ...]
    unjudged: tuple[UnjudgedShare, ...] = Field(default=(), description="each side's unjudged share of its top k")
    judged_tests: tuple[JudgedTest, ...] = Field(default=(), description="gated rows tested on judged evidence only")

    def gate_rows(self) -> tuple[ComparisonRow, ...]:
        """The rows the regression gate reads: the gated family."""
        return tuple(r for r in self.rows if r.gated)


class PairRow(ComparisonRow):
    """One ablation, measure and slice of one pair of systems: ``head_system`` against ``base_system``."""

    base_system: str = Field(description="label of the pair's base: the earlier report")
    head_system: str = Field(description="label of the pair's head: the later report")
    p_holm_two_sided: UnitFloat = Field(
        description="gated: Holm over the gated family's two-sided p (told apart?); exploratory: p_holm"
    )

    def label(self) -> str:
        """``head vs base: ablation measure [slice]``."""
        return f"{self.head_system} vs {self.base_system}: {super().label()}"


class SystemIdentity(StrictModel):
    """One system of a pairwise comparison: its label (file name stem or ``--label``) and its report."""

    label: str = Field(min_length=1)
    report: ReportIdentity


class PairwiseComparison(GateFamilies):
    """Two or more reports, each later one against each earlier one, in one gated and one exploratory family."""

    schema_version: Literal[2] = COMPARISON_SCHEMA_VERSION
    systems: tuple[SystemIdentity, ...] = Field(min_length=2, description="in the order given; the first is the base")
    statistics: StatisticsSettings = Field(description="the last report's settings, used for every pair")
    notes: tuple[str, ...] = Field(description="what differs from the first report besides the results")
    ablations: tuple[str, ...] = Field(description="ablations compared: those in every report")
    not_compared: tuple[str, ...] = Field(description="ablations missing from some report")
    rows: tuple[PairRow, ...]
    unjudged: tuple[UnjudgedShare, ...] = Field(default=(), description="each report's unjudged share of its top k")
    judged_tests: tuple[JudgedTest, ...] = Field(default=(), description="gated rows tested on judged evidence only")

    def gate_rows(self) -> tuple[PairRow, ...]:
        """The rows the regression gate reads: gated rows of each later system against the first."""
        first = self.systems[0].label
        return tuple(r for r in self.rows if r.gated and r.base_system == first)


def _identity(report: Report, side: str) -> ReportIdentity:
    if report.judgments_sha256 is None:
        raise ComparisonError(f"{side} report has no judgments_sha256; {REGENERATE}")
    return ReportIdentity(**{name: getattr(report, name) for name in ReportIdentity.model_fields})


def _check_comparable(base: Report, head: Report) -> None:
    base_id, head_id = _identity(base, "base"), _identity(head, "head")
    if base_id.judgments_sha256 != head_id.judgments_sha256:
        raise ComparisonError(
            "reports are not over the same queries and judgments: judgments_sha256 differs "
            f"(base {base_id.judgments_sha256[:12]} of fixture {base.fixture_id} {base.fixture_version}, "
            f"head {head_id.judgments_sha256[:12]} of fixture {head.fixture_id} {head.fixture_version})"
        )
    if not base.queries.query_ids or not head.queries.query_ids:
        raise ComparisonError(f"reports hold no per-query values; {REGENERATE}")
    base_defs, head_defs = base.measure_definitions(), head.measure_definitions()
    differing = sorted(m for m in base_defs.keys() & head_defs.keys() if base_defs[m] != head_defs[m])
    if differing:
        name = differing[0]
        raise ComparisonError(
            f"measure {name} is defined differently in the two reports (base {base_defs[name]}, head "
            f"{head_defs[name]}): compare reports whose measures agree"
        )


def _shared_queries(reports: Sequence[Report], labels: Sequence[str]) -> tuple[QueryIndex, list[list[int]]]:
    try:
        return shared_queries([r.queries for r in reports], labels)
    except ValueError as exc:
        raise ComparisonError(str(exc)) from None


Pair = tuple[str, PerQueryColumns, PerQueryColumns]
"""A label (the ablation) with the base and head per-query columns it compares."""


def _column(columns: PerQueryColumns, label: str, measure: str, rows: Sequence[int], side: str) -> np.ndarray:
    if measure not in columns:
        raise ComparisonError(f"{side}: ablation {label} has no per-query values for {measure}")
    column = columns[measure]
    return np.array([column[row] for row in rows], dtype=np.float64)


def _slice_rows(
    index: QueryIndex,
    pairs: Sequence[Pair],
    settings: StatisticsSettings,
    slice_name: Slice,
    answerable: bool | None,
    every: Collection[str] = (),
) -> list[ComparisonRow]:
    """Every pair and measure of one slice and query kind (None: measures defined on every query), in one vectorized
    call (Holm p still unset)."""
    rows = index.members(slice_name, answerable)
    if not rows or not pairs:
        return []
    measures = split_measures(_measures(pairs), every)[QUERY_KINDS.index(answerable)]
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
        out.append(row.model_copy(update={"disagreement": disagreement(row, settings, distinct)}))
    return out


def _measures(pairs: Sequence[Pair]) -> tuple[str, ...]:
    """The measures both sides of every pair hold, in the base's column order (the standard set first)."""
    if not pairs:
        return ()
    shared = [m for m in pairs[0][1] if all(m in p[1] and m in p[2] for p in pairs)]
    standard = [m for m in (*ANSWERABLE_MEASURES, *NO_ANSWER_MEASURES) if m in shared]
    return (*standard, *(m for m in shared if m not in standard))


def gate_measures(pairs: Sequence[Pair], measures: Sequence[str] | None) -> tuple[str, ...]:
    """The gated measures: ``measures`` (each must be compared; a string is one name), or the defaults compared."""
    known = _measures(pairs)
    if measures is None:
        return tuple(m for m in DEFAULT_GATE_MEASURES if m in known)
    measures = (measures,) if isinstance(measures, str) else measures
    unknown = sorted(set(measures) - set(known))
    if unknown:
        raise ValueError(f"unknown gated measure(s) {', '.join(unknown)}; compared: {', '.join(sorted(known))}")
    return tuple(dict.fromkeys(measures))


def _families(
    rows: Sequence[ComparisonRow], gated: Collection[str], alpha: float, max_drop: float, settings: StatisticsSettings
) -> tuple[ComparisonRow, ...]:
    """Mark the gated rows, Holm-adjust each family on its own p-values (each hypothesis counted once:
    :func:`repeated_hypotheses`), and give every gated row its power."""
    marked = [r.model_copy(update={"gated": r.measure in gated and r.slice in GATED_SLICES}) for r in rows]
    updates: dict[int, dict[str, object]] = {}
    for is_gated in (True, False):
        family = [i for i, r in enumerate(marked) if r.gated is is_gated]
        members = [marked[i] for i in family]
        same_as = repeated_hypotheses(members)
        p_values = [r.p_one_sided if is_gated else r.p_value for r in members]
        size = len(set(same_as))
        for i, p in zip(family, holm_adjust(p_values, same_as), strict=True):
            power = row_power(marked[i], size, alpha, max_drop, settings) if is_gated else None
            updates[i] = {"p_holm": float(p), "power": power}
    return tuple(r.model_copy(update=updates[i]) for i, r in enumerate(marked))


def compared_rows(
    index: QueryIndex,
    pairs: Sequence[Pair],
    settings: StatisticsSettings,
    gated: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    max_drop: float = DEFAULT_MAX_DROP,
    every: Collection[str] = (),
) -> tuple[ComparisonRow, ...]:
    """Rows of every pair, measure and slice in report order, Holm-adjusted within the gated and exploratory families.

    ``gated`` names the gated measures (default :data:`DEFAULT_GATE_MEASURES` among those compared); ``every`` the
    measures defined on every query (trec_eval's names), compared over all of a slice's queries.
    """
    check_gate_arguments(alpha, max_drop)
    chosen = gate_measures(pairs, gated)
    raw: list[ComparisonRow] = []
    steps = [(slice_name, answerable) for slice_name in SLICES for answerable in QUERY_KINDS]
    for slice_name, answerable in progress(steps, "comparing", len(steps)):
        raw += _slice_rows(index, pairs, settings, slice_name, answerable, every)
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
    index, (base_rows, head_rows) = _shared_queries([base, head], ["base", "head"])
    left_out = left_out_notes([base, head], ["base", "head"], index)
    shared = shared_ablations([base, head], ["base", "head"])
    pairs = [(a, restricted(compared(base, a), base_rows), restricted(compared(head, a), head_rows)) for a in shared]
    every = every_query_measures(base.measure_definitions())
    rows = compared_rows(index, pairs, head.statistics, gated, alpha, max_drop, every)
    family_size, exploratory_family_size = family_sizes(rows)
    g, s = gate_measures(pairs, gated), head.statistics
    return Comparison(
        base=_identity(base, "base"),
        head=_identity(head, "head"),
        statistics=head.statistics,
        notes=(*report_notes(base, head), *left_out, *holes_notes([base, head], ["base", "head"], shared)),
        only_in_base=tuple(sorted(set(base.ablations) - set(head.ablations), key=ablation_order)),
        only_in_head=tuple(sorted(set(head.ablations) - set(base.ablations), key=ablation_order)),
        gate_measures=gate_measures(pairs, gated),
        alpha=alpha,
        max_drop=max_drop,
        family_size=family_size,
        exploratory_family_size=exploratory_family_size,
        rows=rows,
        unjudged=(
            *unjudged_shares(base, "base", index, base_rows, shared),
            *unjudged_shares(head, "head", index, head_rows, shared),
        ),
        judged_tests=first_against_others([base, head], ["base", "head"], index, [base_rows, head_rows], shared, g, s),
    )


def _two_sided_holm(rows: Sequence[ComparisonRow]) -> list[float]:
    """Per row: gated rows Holm-adjusted over the gated family's two-sided p; exploratory rows their p_holm."""
    family = [k for k, r in enumerate(rows) if r.gated]
    adjusted = [r.p_holm for r in rows]
    members = [rows[k] for k in family]
    for k, p in zip(family, holm_adjust([r.p_value for r in members], repeated_hypotheses(members)), strict=True):
        adjusted[k] = float(p)
    return adjusted


def compare_many(
    reports: Sequence[Report],
    labels: Sequence[str],
    gated: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    max_drop: float = DEFAULT_MAX_DROP,
) -> PairwiseComparison:
    """Every pair of two or more reports: each later report (head) against each earlier one (base).

    The rows of all pairs form one gated family (Holm over one-sided p, as in :func:`compare_reports`; beside it,
    Holm over the same family's two-sided p says which systems can be told apart) and one exploratory family. The
    gate reads the pairs whose base is the first report. Raises :class:`ComparisonError` naming a report that cannot
    be compared with the first, ``ValueError`` unless there are two or more reports with one unique label each.
    """
    if len(reports) < 2 or len(labels) != len(reports) or len(set(labels)) != len(labels) or not all(labels):
        raise ValueError(f"give two or more reports, one unique label each: {len(reports)} reports, labels {labels}")
    for label, report in zip(labels[1:], reports[1:], strict=True):
        try:
            _check_comparable(reports[0], report)
        except ComparisonError as exc:
            raise ComparisonError(f"{label} against {labels[0]}: {exc}") from None
    index, query_rows = _shared_queries(reports, labels)
    held = [set(r.ablations) for r in reports]
    shared = shared_ablations(reports, labels)
    pairs: list[Pair] = []
    meta: list[dict[str, str]] = []
    for i, j in itertools.combinations(range(len(reports)), 2):
        for a in shared:
            base_columns = restricted(compared(reports[i], a), query_rows[i])
            head_columns = restricted(compared(reports[j], a), query_rows[j])
            pairs.append((str(len(pairs)), base_columns, head_columns))
            meta.append({"ablation": a, "base_system": labels[i], "head_system": labels[j]})
    statistics = reports[-1].statistics
    every = every_query_measures(reports[0].measure_definitions())
    rows = compared_rows(index, pairs, statistics, gated, alpha, max_drop, every)
    family_size, exploratory_family_size = family_sizes(rows)
    g, two_sided = gate_measures(pairs, gated), _two_sided_holm(rows)
    out = [
        PairRow(**{**dict(r), **meta[int(r.ablation)], "p_holm_two_sided": two_sided[k]}) for k, r in enumerate(rows)
    ]
    notes = [
        f"{label} vs {labels[0]}: {note}"
        for label, r in zip(labels[1:], reports[1:], strict=True)
        for note in report_notes(reports[0], r)
        if not note.startswith("the statistics settings differ")
    ]
    notes += left_out_notes(reports, labels, index)
    if any(r.statistics != statistics for r in reports):
        notes.append("the statistics settings differ between the reports: the last report's settings are used")
    return PairwiseComparison(
        systems=tuple(SystemIdentity(label=n, report=_identity(r, n)) for n, r in zip(labels, reports, strict=True)),
        statistics=statistics,
        notes=tuple(notes),
        ablations=tuple(shared),
        not_compared=tuple(sorted(set.union(*held) - set(shared), key=ablation_order)),
        gate_measures=gate_measures(pairs, gated),
        alpha=alpha,
        max_drop=max_drop,
        family_size=family_size,
        exploratory_family_size=exploratory_family_size,
        rows=tuple(out),
        unjudged=tuple(
            share
            for label, report, rows_of in zip(labels, reports, query_rows, strict=True)
            for share in unjudged_shares(report, label, index, rows_of, shared)
        ),
        judged_tests=first_against_others(reports, labels, index, query_rows, shared, g, statistics),
    )


def compare_ablations(report: Report, base: str, head: str) -> tuple[ComparisonRow, ...]:
    """Inside one evaluation: ``head`` against ``base`` over the same queries (rows labelled ``head vs base``).

    The same paired intervals, sign-flip tests and two Holm families as :func:`compare_reports`, over this pair's
    measures and slices. Raises ``ValueError`` naming a missing ablation.
    """
    for name in (base, head):
        if name not in report.ablations:
            raise ValueError(f"ablation {name!r} is not in the report; it holds {', '.join(report.ablations)}")
    pair = (f"{head} vs {base}", compared(report, base), compared(report, head))
    every = every_query_measures(report.measure_definitions())
    return compared_rows(report.queries, [pair], report.statistics, every=every)
