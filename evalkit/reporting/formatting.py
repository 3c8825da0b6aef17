"""Numbers as a comparison's messages and tables print them."""

from __future__ import annotations

__all__ = ["signed"]


def signed(value: float, decimals: int = 4) -> str:
    """`value` with its sign, to `decimals` places; a value that rounds to zero prints as ``+0.0000``, never
    ``-0.0000`` (a difference of -1e-17, or -0.0, is no drop)."""
    rounded = round(value, decimals) + 0.0  # adding 0.0 turns -0.0 into 0.0
    return f"{rounded:+.{decimals}f}"
