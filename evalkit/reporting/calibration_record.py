"""What a calibrated run split and chose, as the report and the benchmark summary record it.

A calibrated evaluation (:mod:`evalkit.runs.calibration`) chooses a fusion and each abstaining system's floor on
the calibration part of the queries and reports on the rest; :class:`CalibrationRecord` holds the split's identity
and every choice with its outcome on both parts. The records are schema models (IDs, names and numbers), so a report
read back validates them like the rest of the report.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evalkit.data.schema import NonNegativeFloat, Sha256, StrictModel, UnitFloat
from evalkit.data.settings import FusionName
from evalkit.measures.abstention import AbstentionPoint

__all__ = ["CalibrationRecord", "FloorRecord", "FusionChoice", "FusionRecord", "SignalName"]

SignalName = Literal["term-coverage", "top-score"]
"""The declared confidence signals (:data:`evalkit.runs.calibration.SIGNALS`)."""


class FusionChoice(StrictModel):
    """One declared fusion: a method of :data:`evalkit.retrieval.fusion.FUSION_METHODS` and the two weights."""

    fusion: FusionName = Field(description="fusion method")
    lexical_weight: NonNegativeFloat = Field(description="weight of lexical hits")
    vector_weight: NonNegativeFloat = Field(description="weight of vector hits")


class FusionRecord(StrictModel):
    """The fusion chosen on the calibration part, and the calibration score of every declared one."""

    system: str = Field(description="the fusing ablation the choice was made on (its provider's candidates)")
    chosen: str = Field(description="name of the chosen fusion in the declared set")
    settings: FusionChoice = Field(description="the chosen method and weights, applied to every fusing system")
    measure: str = Field(description="what was maximized over the answerable calibration queries")
    candidates: dict[str, float] = Field(description="declared fusion -> its mean on the calibration part")


class FloorRecord(StrictModel):
    """The abstention floor chosen for one system on the calibration part, and its outcome on each part."""

    signal: SignalName = Field(description="the confidence signal the floor applies to")
    floor: float | None = Field(description="queries whose confidence is below it (or NaN) return nothing")
    calibration: AbstentionPoint = Field(description="outcome on the calibration part (where it was chosen)")
    evaluation: AbstentionPoint = Field(description="outcome on the evaluation part (reported, not chosen on)")


class CalibrationRecord(StrictModel):
    """What a calibrated run split and chose: written into the report and printed."""

    fraction: float = Field(gt=0.0, lt=1.0, description="share of each stratum in the calibration part")
    seed: int = Field(description="seed of the split")
    split_sha256: Sha256 = Field(description="SHA-256 of the calibration and evaluation ID lists")
    calibration_queries: int = Field(ge=1, description="queries the choices were made on")
    evaluation_queries: int = Field(ge=1, description="queries every reported number comes from")
    max_recall_loss: UnitFloat = Field(description="recall@10 a floor may cost on the calibration part")
    fusion: FusionRecord | None = Field(description="the fusion choice; None when no system fuses")
    floors: dict[str, FloorRecord] = Field(description="abstaining ablation -> its floor")
