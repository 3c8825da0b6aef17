"""How a comparison prints a signed number: one sign convention, and no negative zero."""

from __future__ import annotations

import pytest

from evalkit.reporting.comparison import ComparisonRow
from evalkit.reporting.formatting import signed


@pytest.mark.parametrize(
    ("value", "decimals", "text"),
    [
        (0.3357, 4, "+0.3357"),
        (-0.6045, 4, "-0.6045"),
        (0.0, 4, "+0.0000"),
        (-0.0, 4, "+0.0000"),
        (-1e-17, 4, "+0.0000"),
        (-0.00004, 4, "+0.0000"),
        (-0.0004, 3, "+0.000"),
        (-0.0136, 3, "-0.014"),
    ],
)
def test_signed_never_prints_a_negative_zero(value: float, decimals: int, text: str) -> None:
    assert signed(value, decimals) == text


def test_a_row_of_no_difference_says_plus_zero() -> None:
    row = ComparisonRow(
        ablation="sys",
        measure="ndcg@10",
        slice="all",
        queries=3,
        base_mean=0.5,
        head_mean=0.5,
        difference=-1e-17,
        ci_low=-0.0,
        ci_high=0.0,
        p_value=1.0,
        p_one_sided=1.0,
        p_holm=1.0,
        gated=True,
        wins=0,
        ties=3,
        losses=0,
        higher_is_better=True,
        sd_difference=0.0,
    )
    assert row.evidence(0.95).startswith("difference +0.0000, 95% CI [+0.0000, +0.0000], p = 1")
