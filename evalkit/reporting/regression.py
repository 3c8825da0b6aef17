"""The regression gate: what a comparison's gated rows could see, and whether the head got worse.

:class:`RowPower` says what the gate's test on one gated row could have seen: the minimum detectable effect and the
smallest p-value the sign-flip test can reach with the queries that differ (:func:`row_power`).
:func:`disagreement` says why a row's interval and two-sided test disagree. :func:`find_regressions` reads the gate
over a comparison's gated rows: a gated row that got worse by more than ``max_drop`` with a Holm-adjusted one-sided
p below ``alpha`` fails, and :func:`check_regressions` raises the package's
:class:`~evalkit.reporting.gates.GateFailure` for it; with ``require_power`` an underpowered gated row fails too.

The comparison itself (:mod:`evalkit.reporting.comparison`) builds on this module: it gives each gated row its power
when it makes the row. This module reads comparisons but does not import that module at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pydantic import Field

from evalkit.data.schema import StrictModel, UnitFloat
from evalkit.measures.statistics import (
    StatisticsSettings,
    minimum_detectable_effect,
    queries_needed,
    sign_flip_p_floor,
)
from evalkit.reporting.gates import GateFailure
from evalkit.reporting.report import GateOutcome

if TYPE_CHECKING:
    from evalkit.reporting.comparison import Comparison, ComparisonRow, PairwiseComparison

DEFAULT_ALPHA: Final = 0.05
DEFAULT_MAX_DROP: Final = 0.01


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


def disagreement(row: ComparisonRow, settings: StatisticsSettings, distinct: int) -> str | None:
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


class GateFamilies(StrictModel):
    """How the rows of a comparison (of two reports, or of every pair of several) were gated and corrected."""

    gate_measures: tuple[str, ...] = Field(description="the gated measures (of those compared)")
    alpha: UnitFloat = Field(description="the gate's significance level, used for every row's power")
    max_drop: float = Field(ge=0.0, description="the gate's tolerated drop, used for every row's power")
    family_size: int = Field(
        ge=0, description="gated rows (of every pair), corrected together by Holm over one-sided p"
    )
    exploratory_family_size: int = Field(ge=0, description="the other rows, corrected together over two-sided p")


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


def check_gate_arguments(alpha: float, max_drop: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not max_drop >= 0.0:
        raise ValueError(f"max_drop must be >= 0, got {max_drop}")


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
