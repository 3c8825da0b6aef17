"""A retrieved chunk with its score, and the one tie-breaking rule of every ranking."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Hit", "order_hits"]


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk with the score of the retriever that found it (higher is better)."""

    chunk_id: str
    score: float


def order_hits(hits: Iterable[Hit]) -> list[Hit]:
    """Score descending, then chunk ID ascending: the one tie-breaking rule of every ranking."""
    return sorted(hits, key=lambda hit: (-hit.score, hit.chunk_id))
