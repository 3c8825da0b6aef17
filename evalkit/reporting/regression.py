"""The regression gate: whether the head got worse, read over a comparison's gated rows.

:func:`find_regressions` reads the gate over a comparison's gated rows: a gated row that got worse by more than
``max_drop`` with a Holm-adjusted one-sided p below ``alpha`` fails, and :func:`check_regressions` raises the
package's :class:`~evalkit.reporting.gates.GateFailure` for it; with ``require_power`` an underpowered gated row
(:class:`~evalkit.reporting.power.RowPower`) fails too. Each gated row's power at other values of ``alpha`` and
``max_drop`` is derived again here (:func:`~evalkit.reporting.power.row_power`).

Before a drop counts, the gate asks whether label holes explain it (:mod:`evalkit.reporting.holes`): a gated row
whose head's top k is more unjudged than its base's by over ``max_unjudged_gap`` is tested again on condensed lists,
and a drop that does not survive there is reported as **holes**, with both shares, the number of unjudged chunks to
label and the ``evalkit pool`` command that lists them; ``require_judged`` fails such rows, as ``require_power``
fails underpowered ones. A drop that survives stays a regression.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from evalkit.reporting.comparison import (
    DEFAULT_GATE_MEASURES,
    Comparison,
    ComparisonRow,
    PairRow,
    PairwiseComparison,
)
from evalkit.reporting.formatting import signed
from evalkit.reporting.gates import GateFailure
from evalkit.reporting.holes import DEFAULT_MAX_UNJUDGED_GAP, GatedRow, Retest, retest_on_judged
from evalkit.reporting.power import RowPower, check_gate_arguments, repeated_hypotheses, row_power
from evalkit.reporting.report import GateOutcome


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
    holes: tuple[tuple[ComparisonRow, Retest], ...] = ()
    """Drops explained by label holes: the head's top k more unjudged than the base's by over max_unjudged_gap, and
    no regression on condensed lists (see :mod:`evalkit.reporting.holes`)."""
    retested: tuple[tuple[ComparisonRow, Retest], ...] = ()
    """Regressions whose head was more unjudged than its base, that survived the condensed-list test (or had no
    condensed form to be tested on)."""
    max_unjudged_gap: float = DEFAULT_MAX_UNJUDGED_GAP
    family_p_holm: Mapping[str, float] = field(default_factory=dict)
    """Row label -> the Holm p the gate read it by, where that is not the row's own ``p_holm`` (the comparison's):
    a retest puts its p in the gated family in place of its row's, which moves the other rows' Holm p."""
    scored_with_fixture: frozenset[str] = frozenset()
    """The sides (base and head, or the reports' labels) whose report was scored against a fixture (it has a
    ``corpus_sha256``), whose judgments ``evalkit pool --fixture`` reads; the others were scored against qrels."""
    ungated: str | None = None
    """Why the gate had nothing to read (no gated measure among those compared), or None: such a verdict is no
    pass, and :func:`check_regressions` refuses it."""

    @property
    def passed(self) -> bool:
        """True when nothing regressed."""
        return not self.regressions

    @property
    def queries_needed(self) -> int | None:
        """Most queries an underpowered row would need for an MDE of max_drop (None: none, or max_drop 0)."""
        needed = [n for r in self.underpowered if r.power and (n := r.power.queries_needed) and n > r.queries]
        return max(needed) if needed else None

    @property
    def to_label(self) -> int:
        """The most unjudged chunks a head's top k holds in a row reported as holes (0: none)."""
        return max((retest.head.unjudged for _, retest in self.holes), default=0)

    def outcomes(self, require_power: bool = False, require_judged: bool = False) -> tuple[GateOutcome, ...]:
        """One failed outcome per regression (and, with ``require_power``, per underpowered row; with
        ``require_judged``, per row reported as holes)."""
        failed = tuple(
            GateOutcome(
                gate=f"{row.label()} difference",
                value=row.difference,
                threshold=-self.max_drop if row.higher_is_better else self.max_drop,
                comparison=">=" if row.higher_is_better else "<=",
                passed=False,
                detail=f"{self.confidence:.0%} CI [{signed(row.ci_low)}, {signed(row.ci_high)}], one-sided "
                f"p = {row.p_one_sided:.4g}, Holm p = {self.decided_p_holm(row):.4g} < alpha {self.alpha:g}",
            )
            for row in self.regressions
        )
        if require_judged:
            failed += tuple(
                GateOutcome(
                    gate=f"{row.label()} unjudged share gap",
                    value=retest.gap,
                    threshold=self.max_unjudged_gap,
                    comparison="<=",
                    passed=False,
                    detail=f"holes: {retest.describe()}; label them (evalkit pool) before this row can be read",
                )
                for row, retest in self.holes
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
                detail=f"underpowered: {row.power.reason}; {_needed(row.power, row.queries)}",
            )
            for row in self.underpowered
            if row.power is not None
        )

    def decided_p_holm(self, row: ComparisonRow) -> float:
        """The Holm p the gate read `row` by (see :attr:`family_p_holm`)."""
        return self.family_p_holm.get(row.label(), row.p_holm)

    def evidence(self, row: ComparisonRow) -> str:
        """The row's evidence (its own Holm p, as the table has it) and, where the gate read it by another Holm p,
        that one, labelled."""
        text = row.evidence(self.confidence)
        decided = self.family_p_holm.get(row.label())
        if decided is None:
            return text
        return f"{text} (gate's Holm p = {decided:.4g}, with the retested rows' judged-only p in the family)"

    def pool_command(self, row: ComparisonRow, depth: int) -> str:
        """The ``evalkit pool`` command that lists the unjudged chunks of the row's two sides, against the
        judgments the way their reports were scored (a fixture when both were, else the qrels)."""
        fixture = all(side in self.scored_with_fixture for side in _sides(row))
        judgments = "--fixture DIR" if fixture else "--qrels FILE"
        return f"evalkit pool {judgments} --run BASE --run HEAD --depth {depth}"

    def describe(self) -> str:
        """Plain lines: FAIL per regression, the drops seen but not significant, those tolerated, then power."""
        retested = dict((id(row), retest) for row, retest in self.retested)
        lines = [
            f"FAIL  {row.label()}: {self.evidence(row)}" + _survived(retested.get(id(row))) for row in self.regressions
        ]
        for row, retest in self.holes:
            lines.append(
                f"holes  {row.label()}: {self.evidence(row)}; {retest.describe()}; {retest.judged_only()}: "
                f"not a regression, label holes. List them with `{self.pool_command(row, retest.head.k)}` "
                "(--require-judged fails on this)"
            )
        if self.ungated is not None:
            lines.append(f"NOT GATED  {self.ungated}")
        elif not self.regressions:
            lines.append(
                f"PASS  no gated measure dropped by more than {self.max_drop:g} with one-sided Holm p < "
                f"{self.alpha:g} in any slice ({self.gated} gated rows)"
            )
        for row in self.not_significant:
            lines.append(f"seen, not significant  {row.label()}: {self.evidence(row)}")
        for row in self.within_tolerance:
            lines.append(f"significant, within tolerance  {row.label()}: {self.evidence(row)}")
        for row in self.underpowered:
            if row.power is not None:
                lines.append(f"underpowered  {row.label()}: {row.power.reason}; {_needed(row.power, row.queries)}")
        if self.underpowered:
            needed = self.queries_needed
            lines.append(
                f"{len(self.underpowered)} of {self.gated} gated rows underpowered: their test could not have seen a "
                f"drop of {self.max_drop:g}"
                + (f"; up to {needed} queries would be needed at the observed spread" if needed else "")
                + ". No evidence here is not evidence of no regression (--require-power fails on this)"
            )
        return "\n".join(lines)


def _survived(retest: Retest | None) -> str:
    if retest is None:
        return ""
    if retest.condensed is None:
        return f"; {retest.describe()}, and {retest.judged_only()}"
    return f"; {retest.describe()}, yet {retest.judged_only()}: a regression, not holes"


def _needed(power: RowPower, queries: int) -> str:
    """What more queries would do for an underpowered row of ``queries`` queries."""
    if power.queries_needed is None:
        return "no number of queries detects a drop of 0"
    if power.queries_needed <= queries:  # the spread is small enough: too few queries differ
        return f"its {queries} queries are enough for MDE <= max drop; more of them would have to differ"
    return f"about {power.queries_needed} queries needed for MDE <= max drop"


def _sides(row: ComparisonRow) -> tuple[str, str]:
    """The labels of a row's base and head, as :attr:`Comparison.unjudged` names them."""
    return (row.base_system, row.head_system) if isinstance(row, PairRow) else ("base", "head")


def _scored_with_fixture(comparison: Comparison | PairwiseComparison) -> frozenset[str]:
    """The sides of `comparison` (as :func:`_sides` names them) whose report was scored against a fixture."""
    if isinstance(comparison, PairwiseComparison):
        sides = {s.label: s.report for s in comparison.systems}
    else:
        sides = {"base": comparison.base, "head": comparison.head}
    return frozenset(label for label, report in sides.items() if report.corpus_sha256 is not None)


def _key(row: ComparisonRow) -> tuple[str, ...]:
    return (row.ablation, row.measure, row.slice, *_sides(row))


def _retests(
    comparison: Comparison | PairwiseComparison,
    gated: list[ComparisonRow],
    max_unjudged_gap: float,
    alpha: float,
    max_drop: float,
) -> tuple[dict[int, Retest], list[float]]:
    """Each gated row's retest on judged evidence where label holes may explain it, and the family's Holm p."""
    shares = {(s.system, s.ablation, s.slice): s for s in comparison.unjudged}
    tests = {(t.base_system, t.head_system, t.ablation, t.measure, t.slice): t for t in comparison.judged_tests}
    plain = [
        GatedRow(**row.model_dump(include={"ablation", "measure", "slice", "p_one_sided", "p_holm"}), drop=row.drop)
        for row in gated
    ]
    sides = [_sides(row) for row in gated]
    same_as = repeated_hypotheses(gated, lambda r: (r.ablation, r.measure, *_sides(r)))
    return retest_on_judged(plain, sides, tests, shares, max_unjudged_gap, alpha, max_drop, same_as)


def find_regressions(
    comparison: Comparison | PairwiseComparison,
    alpha: float | None = None,
    max_drop: float | None = None,
    max_unjudged_gap: float = DEFAULT_MAX_UNJUDGED_GAP,
) -> RegressionVerdict:
    """Read the gate over the gated rows, at the comparison's alpha and max_drop unless given others.

    Of a :class:`~evalkit.reporting.comparison.PairwiseComparison`, the gate reads the pairs whose base is the first
    system (each other system a head), with the Holm p and power of the whole family of pairs.

    Other values re-derive every gated row's power. A row whose head's top k is more unjudged than its base's by over
    ``max_unjudged_gap`` is tested again on condensed lists (:mod:`evalkit.reporting.holes`); when there is such a
    row, every gated row's Holm p is that of the family with the retested rows' condensed p in their place.
    """
    alpha = comparison.alpha if alpha is None else alpha
    max_drop = comparison.max_drop if max_drop is None else max_drop
    check_gate_arguments(alpha, max_drop)
    gated = [
        row.model_copy(update={"power": row_power(row, comparison.family_size, alpha, max_drop, comparison.statistics)})
        for row in comparison.gate_rows()
    ]
    # The retest reads the whole gated family (every pair of several reports), so that Holm adjusts over as many
    # rows as the comparison's own p_holm does; the gate then reads its rows of the family.
    family = [r for r in comparison.rows if r.gated]
    position = {_key(r): i for i, r in enumerate(family)}
    found, adjusted = _retests(comparison, family, max_unjudged_gap, alpha, max_drop)
    retests = {g: found[position[_key(row)]] for g, row in enumerate(gated) if position[_key(row)] in found}
    # A retested row is decided by its retest (whose Holm p it carries); every other row by its Holm p in the family
    # with the retests' p in place, which a retest changes. Each row keeps its own p_holm, the comparison's.
    decided = [
        row.p_holm if g in retests or not found else adjusted[position[_key(row)]] for g, row in enumerate(gated)
    ]
    holes = {g: r for g, r in retests.items() if not r.survives(alpha, max_drop)}
    read = [g for g in range(len(gated)) if g not in holes]
    significant = [g for g in read if decided[g] < alpha and gated[g].drop > 0]
    regressions = tuple(gated[g] for g in significant if gated[g].drop > max_drop)
    return RegressionVerdict(
        alpha=alpha,
        max_drop=max_drop,
        confidence=comparison.statistics.confidence,
        gated=len(gated),
        regressions=regressions,
        not_significant=tuple(gated[g] for g in read if decided[g] >= alpha and gated[g].drop > max_drop),
        within_tolerance=tuple(gated[g] for g in significant if gated[g].drop <= max_drop),
        underpowered=tuple(
            gated[g] for g in read if (p := gated[g].power) and p.underpowered and gated[g] not in regressions
        ),
        holes=tuple((gated[g], r) for g, r in holes.items()),
        retested=tuple((gated[g], r) for g, r in retests.items() if g not in holes and gated[g] in regressions),
        max_unjudged_gap=max_unjudged_gap,
        scored_with_fixture=_scored_with_fixture(comparison),
        ungated=ungated_reason(comparison),
        family_p_holm={gated[g].label(): decided[g] for g in range(len(gated)) if decided[g] != gated[g].p_holm},
    )


def ungated_reason(comparison: Comparison | PairwiseComparison) -> str | None:
    """Why `comparison` gives the gate nothing to read (none of the gated measures is among those compared, as
    with reports scored under trec_eval's names), or None."""
    if comparison.gate_measures:
        return None
    compared = ", ".join(dict.fromkeys(r.measure for r in comparison.rows))
    return (
        f"none of the default gated measures ({', '.join(DEFAULT_GATE_MEASURES)}) is in the compared reports, so "
        f"nothing was gated: name the measures to gate with --gate-measures (compared: {compared})"
    )


def check_regressions(verdict: RegressionVerdict, require_power: bool = False, require_judged: bool = False) -> None:
    """Raise :class:`GateFailure` listing every regression (and underpowered row, with ``require_power``; and row
    reported as holes, with ``require_judged``); ``ValueError`` when the gate had nothing to read (a gate that checks
    no row is never a pass)."""
    if verdict.ungated is not None:
        raise ValueError(f"the regression gate cannot run: {verdict.ungated}")
    failed = verdict.outcomes(require_power, require_judged)
    if failed:
        raise GateFailure(failed)
