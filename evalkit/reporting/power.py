"""What the regression gate's test on one gated row could have seen, and the gate's parameters.

:class:`RowPower` says what the test on one gated row could have seen: the minimum detectable effect and the
smallest p-value the sign-flip test can reach with the queries that differ (:func:`row_power`). :func:`disagreement`
says why a row's interval and two-sided test disagree. A comparison (:mod:`evalkit.reporting.comparison`) gives each
row these as it makes it; the gate (:mod:`evalkit.reporting.regression`) reads them. :func:`repeated_hypotheses`
says which rows of a family test what another row tests, so that Holm and the power level count each once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Protocol, TypeVar

from pydantic import Field

from evalkit.data.schema import StrictModel, UnitFloat
from evalkit.measures.statistics import (
    StatisticsSettings,
    minimum_detectable_effect,
    queries_needed,
    sign_flip_p_floor,
)

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_MAX_DROP",
    "GateFamilies",
    "PairedRow",
    "RowPower",
    "check_gate_arguments",
    "disagreement",
    "family_sizes",
    "repeated_hypotheses",
    "row_power",
]

DEFAULT_ALPHA: Final = 0.05
DEFAULT_MAX_DROP: Final = 0.01


class FamilyRow(Protocol):
    """What :func:`repeated_hypotheses` reads of a compared row."""

    @property
    def ablation(self) -> str: ...
    @property
    def measure(self) -> str: ...
    @property
    def slice(self) -> str: ...
    @property
    def queries(self) -> int: ...
    @property
    def gated(self) -> bool: ...


Row = TypeVar("Row", bound=FamilyRow)


def repeated_hypotheses(rows: Sequence[Row], key: Callable[[Row], tuple[str, ...]] | None = None) -> list[int]:
    """Per row, the position of the row whose hypothesis it tests again (its own when none): a language slice whose
    row holds as many queries as the ``all`` row of the same ablation and measure holds the same queries (a slice is
    a subset of all), so on a one-language fixture its test is the ``all`` row's. ``key`` tells the rows of one
    ablation and measure apart (default: both; the pairs of several reports add their systems)."""

    def same(row: Row) -> tuple[str, ...]:
        return (row.ablation, row.measure) if key is None else key(row)

    whole = {(same(r), r.queries): i for i, r in enumerate(rows) if r.slice == "all"}
    return [i if r.slice == "all" else whole.get((same(r), r.queries), i) for i, r in enumerate(rows)]


def family_sizes(rows: Sequence[FamilyRow]) -> tuple[int, int]:
    """``family_size`` and ``exploratory_family_size``: the hypotheses each family tests, a repeat counted once."""
    gated, exploratory = ([r for r in rows if r.gated is g] for g in (True, False))
    return len(set(repeated_hypotheses(gated))), len(set(repeated_hypotheses(exploratory)))


class PairedRow(Protocol):
    """What power reads of a compared row (:class:`evalkit.reporting.comparison.ComparisonRow`): its queries, the
    spread of its paired differences, its interval and two-sided p."""

    @property
    def queries(self) -> int: ...
    @property
    def discordant(self) -> int: ...
    @property
    def sd_difference(self) -> float: ...
    @property
    def ci_low(self) -> float: ...
    @property
    def ci_high(self) -> float: ...
    @property
    def p_value(self) -> float: ...


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
    row: PairedRow, family_size: int, alpha: float, max_drop: float, settings: StatisticsSettings
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


def disagreement(row: PairedRow, settings: StatisticsSettings, distinct: int) -> str | None:
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
        ge=0,
        description="gated hypotheses (of every pair), corrected together by Holm over one-sided p; a language "
        "slice that holds every query of all (a one-language fixture) tests what all tests and counts once",
    )
    exploratory_family_size: int = Field(
        ge=0, description="the other rows' hypotheses, corrected together over two-sided p (a repeat counted once)"
    )


def check_gate_arguments(alpha: float, max_drop: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not max_drop >= 0.0:
        raise ValueError(f"max_drop must be >= 0, got {max_drop}")
