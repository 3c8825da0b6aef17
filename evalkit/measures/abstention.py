"""Calibrated abstention: a floor on a query's confidence below which the system returns nothing.

A query *abstains* when its confidence (for example the top score of its ranking) is below the floor, or when its
ranking was empty (confidence ``NaN``); otherwise its whole ranking is returned. As the floor rises:

- the no-answer false-positive rate is the fraction of no-answer queries that do not abstain;
- recall@10 is the mean over answerable queries of their recall@10, counted as 0 for those that abstain; the loss
  is measured against no floor (where only the NaN queries abstain).

:func:`abstention_curve` gives both at every floor that changes a decision; :func:`calibrate_floor` chooses a floor
on one part of the queries and reports it on the other (a seeded ``numpy.random.Generator`` split, stratified by
answerability), so the reported trade-off is measured on queries the floor was not chosen on.

The rule for choosing: the lowest-FPR floor whose recall@10 loss against no floor, on the calibration queries, is at
most ``max_recall_loss``; among floors with the same FPR the lowest. It has no other knob.

:mod:`evalkit.runs.calibration` applies the same rule in every calibrated run (``evalkit run --calibrate``), over its
declared confidence signals, and withholds the results of queries below the chosen floor.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from pydantic import Field

from evalkit.data.schema import StrictModel, UnitFloat

DEFAULT_MAX_RECALL_LOSS = 0.05
DEFAULT_CALIBRATION_FRACTION = 0.5


class AbstentionPoint(StrictModel):
    """The outcome of one floor: abstain below it."""

    floor: float | None = Field(description="confidence floor; None: no floor")
    no_answer_fpr: UnitFloat = Field(description="fraction of no-answer queries that returned results")
    recall_at_10: UnitFloat = Field(description="mean recall@10 over answerable queries, 0 for those that abstain")
    recall_loss: float = Field(description="recall@10 without a floor minus recall@10 at this floor")


class CalibratedFloor(StrictModel):
    """A floor chosen on calibration queries and its trade-off measured on held-out ones."""

    floor: float | None = Field(description="the chosen floor; None: no floor (none did better within budget)")
    max_recall_loss: UnitFloat = Field(description="recall@10 loss allowed on the calibration queries")
    seed: int = Field(description="seed of the calibration / held-out split")
    calibration_queries: int = Field(ge=0, description="queries the floor was chosen on")
    held_out_queries: int = Field(ge=0, description="queries the floor is reported on")
    calibration: AbstentionPoint = Field(description="the floor's outcome on the calibration queries")
    held_out: AbstentionPoint = Field(description="the floor's outcome on the held-out queries")


def _arrays(
    confidence: ArrayLike, answerable: ArrayLike, recall: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    conf = np.asarray(confidence, dtype=np.float64)
    ans = np.asarray(answerable, dtype=bool)
    rec = np.asarray(recall, dtype=np.float64)
    if not (conf.shape == ans.shape == rec.shape) or conf.ndim != 1:
        raise ValueError(
            f"confidence, answerable and recall must be equal-length lists; got {conf.shape}, {ans.shape}, {rec.shape}"
        )
    if np.isinf(conf).any():
        raise ValueError("confidence: infinite values are not allowed (NaN marks an empty ranking)")
    if ((rec < 0) | (rec > 1) | np.isnan(rec)).any():
        raise ValueError("recall: every value must be in [0, 1]")
    return conf, ans, rec


def outcome_at(floor: float | None, confidence: ArrayLike, answerable: ArrayLike, recall: ArrayLike) -> AbstentionPoint:
    """FPR and recall@10 when queries with confidence below ``floor`` (or NaN) abstain; None: only NaN abstains.

    With no no-answer queries the FPR is 0; with no answerable queries recall@10 and its loss are 0.
    """
    conf, ans, rec = _arrays(confidence, answerable, recall)
    answers = ~np.isnan(conf) if floor is None else np.nan_to_num(conf, nan=-np.inf) >= floor
    negatives = ~ans
    fpr = float(answers[negatives].mean()) if negatives.any() else 0.0
    base = float(np.where(np.isnan(conf), 0.0, rec)[ans].mean()) if ans.any() else 0.0
    kept = float(np.where(answers, rec, 0.0)[ans].mean()) if ans.any() else 0.0
    return AbstentionPoint(floor=floor, no_answer_fpr=fpr, recall_at_10=kept, recall_loss=base - kept)


def candidate_floors(confidence: ArrayLike) -> list[float | None]:
    """Every floor that changes a decision: None (no floor), then each distinct confidence, ascending."""
    conf = np.asarray(confidence, dtype=np.float64)
    return [None, *(float(v) for v in np.unique(conf[~np.isnan(conf)]))]


def abstention_curve(confidence: ArrayLike, answerable: ArrayLike, recall: ArrayLike) -> list[AbstentionPoint]:
    """The outcome at every candidate floor, from no floor upwards (the same values as :func:`outcome_at` at each,
    computed in one pass over the sorted confidences)."""
    conf, ans, rec = _arrays(confidence, answerable, recall)
    floors = candidate_floors(conf)
    finite = np.array([f for f in floors if f is not None], dtype=np.float64)
    seen = ~np.isnan(conf)
    negatives = np.sort(conf[~ans & seen])
    n_negatives = int((~ans).sum())
    order = np.argsort(conf[ans & seen], kind="stable")
    answered = conf[ans & seen][order]
    # recall kept at a floor: the sum of recall over answerable queries at or above it (suffix sums)
    suffix = np.concatenate([np.cumsum(rec[ans & seen][order][::-1])[::-1], [0.0]])
    n_answerable = int(ans.sum())
    passing_negatives = len(negatives) - np.searchsorted(negatives, finite, side="left")
    kept = suffix[np.searchsorted(answered, finite, side="left")]
    base = float(suffix[0]) / n_answerable if n_answerable else 0.0
    fprs = [len(negatives) / n_negatives if n_negatives else 0.0] + [
        float(n) / n_negatives if n_negatives else 0.0 for n in passing_negatives
    ]
    recalls = [base] + [float(k) / n_answerable if n_answerable else 0.0 for k in kept]
    return [
        AbstentionPoint(floor=f, no_answer_fpr=fpr, recall_at_10=r, recall_loss=base - r)
        for f, fpr, r in zip(floors, fprs, recalls, strict=True)
    ]


def choose_floor(points: Sequence[AbstentionPoint], max_recall_loss: float) -> AbstentionPoint:
    """The lowest-FPR point whose recall loss is at most ``max_recall_loss`` (the lowest floor on a tie).

    The no-floor point always qualifies (loss 0), so a choice always exists.
    """
    if not points:
        raise ValueError("no abstention points to choose from")
    allowed = [p for p in points if p.recall_loss <= max_recall_loss + 1e-12]
    if not allowed:
        raise ValueError(f"no floor loses at most {max_recall_loss} recall@10; the curve must start at no floor")
    return min(allowed, key=lambda p: (p.no_answer_fpr, -np.inf if p.floor is None else p.floor))


def calibration_mask(answerable: ArrayLike, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A boolean mask of calibration queries: ``fraction`` of the answerable and of the no-answer queries each."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"calibration fraction must be between 0 and 1, got {fraction}")
    ans = np.asarray(answerable, dtype=bool)
    mask = np.zeros(ans.shape, dtype=bool)
    for group in (np.flatnonzero(ans), np.flatnonzero(~ans)):
        chosen = rng.permutation(group)[: round(fraction * len(group))]
        mask[chosen] = True
    return mask


def calibrate_floor(
    confidence: ArrayLike,
    answerable: ArrayLike,
    recall: ArrayLike,
    seed: int = 0,
    max_recall_loss: float = DEFAULT_MAX_RECALL_LOSS,
    calibration_fraction: float = DEFAULT_CALIBRATION_FRACTION,
) -> CalibratedFloor:
    """Choose a floor on a seeded, stratified calibration part of the queries; report it on the rest."""
    if not 0.0 <= max_recall_loss <= 1.0:
        raise ValueError(f"max_recall_loss must be in [0, 1], got {max_recall_loss}")
    conf, ans, rec = _arrays(confidence, answerable, recall)
    mask = calibration_mask(ans, calibration_fraction, np.random.default_rng(seed))
    chosen = choose_floor(abstention_curve(conf[mask], ans[mask], rec[mask]), max_recall_loss)
    return CalibratedFloor(
        floor=chosen.floor,
        max_recall_loss=max_recall_loss,
        seed=seed,
        calibration_queries=int(mask.sum()),
        held_out_queries=int((~mask).sum()),
        calibration=chosen,
        held_out=outcome_at(chosen.floor, conf[~mask], ans[~mask], rec[~mask]),
    )
