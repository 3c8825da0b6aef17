"""The regression gate: whether the head got worse, read over a comparison's gated rows.

:func:`find_regressions` reads the gate over a comparison's gated rows: a gated row that got worse by more than
``max_drop`` with a Holm-adjusted one-sided p below ``alpha`` fails, and :func:`check_regressions` raises the
package's :class:`~evalkit.reporting.gates.GateFailure` for it; with ``require_power`` an underpowered gated row
(:class:`~evalkit.reporting.power.RowPower`) fails too. Each gated row's power at other values of ``alpha`` and
``max_drop`` is derived again here (:func:`~evalkit.reporting.power.row_power`).
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.reporting.comparison import Comparison, ComparisonRow, PairwiseComparison
from evalkit.reporting.gates import GateFailure
from evalkit.reporting.power import RowPower, check_gate_arguments, row_power
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


def find_regressions(
    comparison: Comparison | PairwiseComparison, alpha: float | None = None, max_drop: float | None = None
) -> RegressionVerdict:
    """Read the gate over the gated rows, at the comparison's alpha and max_drop unless given others.

    Of a :class:`~evalkit.reporting.comparison.PairwiseComparison`, the gate reads the pairs whose base is the first
    system (each other system a head), with the Holm p and power of the whole family of pairs.

    Other values re-derive every gated row's power; the Holm-adjusted p-values do not depend on them.
    """
    alpha = comparison.alpha if alpha is None else alpha
    max_drop = comparison.max_drop if max_drop is None else max_drop
    check_gate_arguments(alpha, max_drop)
    gated = [
        row.model_copy(update={"power": row_power(row, comparison.family_size, alpha, max_drop, comparison.statistics)})
        for row in comparison.gate_rows()
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
