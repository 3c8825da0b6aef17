"""Tie policies: how a ranking with equal scores is put in order before any measure sees it.

Evaluation tools break ties differently, so the same run can score differently in two tools. evalkit declares its
policy and records it in the report and the evaluation definition:

- ``evalkit`` (the default): score descending, then chunk ID ascending.
- ``trec_eval``: what trec_eval (and pytrec_eval) do: scores are rounded to 32-bit floats, then ordered descending,
  ties broken by document ID *descending* (byte order of the UTF-8 IDs, which is code-point order).

Both policies then remove duplicate chunk IDs, keeping the first (best-placed) occurrence, so a duplicate line of a
run counts once, at its best score. A NaN score has no place in a total order and raises ``ValueError`` naming the
chunk. (ranx keeps the insertion order of equal scores; no policy here imitates that.)

Policies are small named functions chosen from :data:`TIE_POLICIES`; :func:`tie_policy` refuses unknown names.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final, Literal

import numpy as np

from evalkit.data.runs import Ranking
from evalkit.measures.ranked import dedupe_ranking

__all__ = ["DEFAULT_TIE_POLICY", "SUMMATION_OF", "TIE_POLICIES", "TiePolicyName", "order_ranking", "tie_policy"]

TiePolicyName = Literal["evalkit", "trec_eval"]
"""The declared tie policies."""

DEFAULT_TIE_POLICY: Final[TiePolicyName] = "evalkit"

TiePolicy = Callable[[Ranking], tuple[str, ...]]


def _check_scores(pairs: Ranking) -> None:
    for chunk_id, score in pairs:
        if math.isnan(score):
            raise ValueError(f"score of chunk {chunk_id!r} is NaN")


def _evalkit_order(pairs: Ranking) -> tuple[str, ...]:
    """Score descending, then chunk ID ascending; duplicates keep their best-placed occurrence."""
    _check_scores(pairs)
    ordered = sorted(pairs, key=lambda pair: (-pair[1], pair[0]))
    return dedupe_ranking([chunk_id for chunk_id, _ in ordered])


def _trec_eval_order(pairs: Ranking) -> tuple[str, ...]:
    """trec_eval's order: 32-bit float score descending, then document ID descending."""
    _check_scores(pairs)
    with np.errstate(over="ignore"):  # beyond float32's range is +-inf, as trec_eval's C cast gives
        rounded = np.asarray([score for _, score in pairs], dtype=np.float32).tolist()
    keyed = sorted(zip(rounded, (chunk_id for chunk_id, _ in pairs), strict=True), reverse=True)
    return dedupe_ranking([chunk_id for _, chunk_id in keyed])


TIE_POLICIES: Final[dict[str, TiePolicy]] = {
    "evalkit": _evalkit_order,
    "trec_eval": _trec_eval_order,
}
"""Tie policies by name: each orders (chunk ID, score) pairs into a deduplicated ranking."""


SUMMATION_OF: Final[dict[str, str]] = {"evalkit": "exact", "trec_eval": "sequential"}
"""How nDCG adds its terms under each policy (see :data:`evalkit.measures.ranked.SUMMATIONS`): ``trec_eval`` adds
them one by one, as trec_eval does, so that its nDCG equals pytrec_eval's bit for bit; ``evalkit`` sums exactly."""


def tie_policy(name: str) -> TiePolicy:
    """The policy called ``name``; an unknown name raises ``ValueError`` listing the valid ones."""
    policy = TIE_POLICIES.get(name)
    if policy is None:
        raise ValueError(f"unknown tie policy {name!r}; valid: {', '.join(TIE_POLICIES)}")
    return policy


def order_ranking(pairs: Ranking, policy: str = DEFAULT_TIE_POLICY) -> tuple[str, ...]:
    """The chunk IDs of ``pairs`` (chunk ID, score) in the order of the named tie policy, deduplicated."""
    return tie_policy(policy)(pairs)
