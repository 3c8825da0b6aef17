"""Quality gates: seed thresholds on the reranked path plus committed per-ablation context baselines.

:func:`evaluate_gates` computes every gate's outcome; :func:`check_gates` raises :class:`GateFailure`, whose
message lists every failing gate with its value and bound. Baselines live beside the fixture in
``baselines.json`` and are regenerated for review with ``evalkit baseline --write`` (see the README for when that
is justified).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError

from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES, InputError, cap_problems, clip, read_json_file
from evalkit.data.schema import (
    SLICES,
    Identifier,
    Slice,
    StrictModel,
    UnitFloat,
    model_json,
)
from evalkit.evaluation import Evaluation
from evalkit.reporting.report import GateOutcome, Report, build_report

BASELINES_FILE = "baselines.json"
BASELINE_ABLATIONS: tuple[str, ...] = ("lexical", "token-hash-vector", "alias-vector", "hybrid")
BASELINE_MEASURES: tuple[str, ...] = ("context_precision", "context_recall")
BASELINE_SLICES: tuple[Slice, ...] = SLICES
RERANKED = "hybrid-rerank"
FLOAT_SLACK = 1e-12
HYBRID = "hybrid"
MAX_BASELINE_TOLERANCE = 0.05
"""The largest tolerance ``baselines.json`` may set: a larger one would let the baseline gates pass anything."""


class GateThresholds(StrictModel):
    """The seed gates on the reranked path (any finite bound: an impossible one simply fails)."""

    min_reranked_mrr_at_10: float = Field(
        default=0.78, allow_inf_nan=False, description="hybrid-rerank mrr@10 at least this"
    )
    min_reranked_ndcg_at_10: float = Field(
        default=0.75, allow_inf_nan=False, description="hybrid-rerank ndcg@10 at least this"
    )
    max_no_answer_fpr: float = Field(
        default=0.34, allow_inf_nan=False, description="hybrid-rerank no_answer_fpr at most this"
    )
    max_rerank_ndcg_drop: float = Field(
        default=0.05, allow_inf_nan=False, description="hybrid ndcg@10 minus hybrid-rerank ndcg@10 at most this"
    )

    @classmethod
    def from_values(cls, source: object) -> GateThresholds:
        """Thresholds read from any object with attributes of the same names (CLI arguments, notebook parameters).

        Raises:
            ValueError: one line per invalid threshold, naming it (and its ``--option``) and the reason.
        """
        try:
            return cls.model_validate({name: getattr(source, name) for name in cls.model_fields})
        except ValidationError as exc:
            raise ValueError("invalid gate threshold(s): " + "; ".join(_threshold_problems(exc))) from None


def _threshold_problems(error: ValidationError) -> list[str]:
    problems = []
    for item in error.errors(include_url=False):
        name = str(item["loc"][0]) if item["loc"] else "(thresholds)"
        problems.append(f"{name} (--{name.replace('_', '-')}): {item['msg']}")
    return problems


class Baselines(StrictModel):
    """Committed context precision/recall floors per ablation and slice for one fixture version."""

    fixture_id: Identifier
    fixture_version: Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")]
    tolerance: Annotated[float, Field(ge=0.0, le=MAX_BASELINE_TOLERANCE, allow_inf_nan=False)] = Field(
        default=0.001, description=f"a value may fall this far below its floor (at most {MAX_BASELINE_TOLERANCE})"
    )
    ablations: dict[str, dict[str, dict[str, UnitFloat]]] = Field(
        description="ablation -> slice (all, en, zh) -> measure -> floor"
    )


class GateFailure(Exception):
    """One or more gates failed; the message lists each with its value and bound."""

    def __init__(self, failed: Sequence[GateOutcome]) -> None:
        self.failed = tuple(failed)
        lines = [f"  - {_describe(g)}" for g in self.failed]
        super().__init__(f"{len(self.failed)} quality gate(s) failed:\n" + "\n".join(lines))


def _describe(gate: GateOutcome) -> str:
    value = "missing" if gate.value is None else f"{gate.value:.4f}"
    text = f"{gate.gate} = {value}, required {gate.comparison} {gate.threshold:.4f}"
    return f"{text} ({gate.detail})" if gate.detail else text


def _metric(report: Report, ablation: str, slice_name: str, measure: str) -> float | None:
    result = report.ablations.get(ablation)
    if result is None:
        return None
    value = result.metrics.get(slice_name, {}).get(measure)  # type: ignore[call-overload]
    return None if value is None else float(value)


def _gate(name: str, value: float | None, threshold: float, comparison: Literal[">=", "<="]) -> GateOutcome:
    if value is None:
        return GateOutcome(
            gate=name,
            value=None,
            threshold=threshold,
            comparison=comparison,
            passed=False,
            detail="not evaluated",
        )
    # Bounds are inclusive; FLOAT_SLACK absorbs rounding (0.80 - 0.75 is 0.05000000000000004 in binary).
    passed = value >= threshold - FLOAT_SLACK if comparison == ">=" else value <= threshold + FLOAT_SLACK
    return GateOutcome(gate=name, value=value, threshold=threshold, comparison=comparison, passed=passed)


def _seed_gates(report: Report, thresholds: GateThresholds) -> Iterable[GateOutcome]:
    yield _gate(
        f"{RERANKED} mrr@10",
        _metric(report, RERANKED, "all", "mrr@10"),
        thresholds.min_reranked_mrr_at_10,
        ">=",
    )
    yield _gate(
        f"{RERANKED} ndcg@10",
        _metric(report, RERANKED, "all", "ndcg@10"),
        thresholds.min_reranked_ndcg_at_10,
        ">=",
    )
    yield _gate(
        f"{RERANKED} no_answer_fpr",
        _metric(report, RERANKED, "all", "no_answer_fpr"),
        thresholds.max_no_answer_fpr,
        "<=",
    )
    hybrid = _metric(report, HYBRID, "all", "ndcg@10")
    reranked = _metric(report, RERANKED, "all", "ndcg@10")
    drop = None if hybrid is None or reranked is None else hybrid - reranked
    yield _gate("rerank ndcg@10 drop vs hybrid", drop, thresholds.max_rerank_ndcg_drop, "<=")


def _baseline_gates(report: Report, baselines: Baselines) -> Iterable[GateOutcome]:
    for ablation, slices in sorted(baselines.ablations.items()):
        for slice_name, measures in sorted(slices.items()):
            for measure, floor in sorted(measures.items()):
                value = _metric(report, ablation, slice_name, measure)
                bound = max(floor - baselines.tolerance, 0.0)
                yield _gate(f"{ablation} {measure} [{slice_name}] baseline", value, bound, ">=")


def evaluate_gates(
    report: Report, thresholds: GateThresholds, baselines: Baselines | None = None
) -> tuple[GateOutcome, ...]:
    """Every gate's outcome; baselines of another fixture ID or version are refused."""
    outcomes = list(_seed_gates(report, thresholds))
    if baselines is not None:
        if (baselines.fixture_id, baselines.fixture_version) != (report.fixture_id, report.fixture_version):
            raise ValueError(
                f"baselines are for {baselines.fixture_id} {baselines.fixture_version}, the report is for "
                f"{report.fixture_id} {report.fixture_version}: regenerate them with `evalkit baseline --write`"
            )
        outcomes.extend(_baseline_gates(report, baselines))
    return tuple(outcomes)


def assess(evaluation: Evaluation, thresholds: GateThresholds, baselines: Baselines | None = None) -> Report:
    """The evaluation's report with every gate's outcome in it; nothing is raised here (see :func:`check_gates`)."""
    report = build_report(evaluation)
    return report.model_copy(update={"gates": evaluate_gates(report, thresholds, baselines)})


def check_gates(outcomes: Sequence[GateOutcome]) -> None:
    """Raise :class:`GateFailure` listing every failed gate; return quietly when all passed."""
    failed = [g for g in outcomes if not g.passed]
    if failed:
        raise GateFailure(failed)


def format_gates(outcomes: Sequence[GateOutcome]) -> str:
    """One line per gate: PASS or FAIL, the gate, its value and its bound."""
    return "\n".join(f"{'PASS' if g.passed else 'FAIL'}  {_describe(g)}" for g in outcomes)


def baselines_from_report(report: Report) -> Baselines:
    """Floors equal to this report's context metrics (rounded to 6 places) for the baseline ablations."""
    missing = [a for a in BASELINE_ABLATIONS if a not in report.ablations]
    if missing:
        raise ValueError(f"cannot write baselines: ablation(s) {', '.join(missing)} were not run")
    table: dict[str, dict[str, dict[str, float]]] = {}
    for ablation in BASELINE_ABLATIONS:
        table[ablation] = {}
        for slice_name in BASELINE_SLICES:
            row = {}
            for measure in BASELINE_MEASURES:
                value = _metric(report, ablation, slice_name, measure)
                if value is not None:
                    row[measure] = round(value, 6)
            table[ablation][slice_name] = row
    return Baselines(fixture_id=report.fixture_id, fixture_version=report.fixture_version, ablations=table)


def baselines_json(baselines: Baselines) -> bytes:
    """Stable serialization of baselines."""
    return model_json(baselines)


def _locate(loc: tuple[int | str, ...]) -> str:
    return ".".join(clip(str(part)) for part in loc) or "(top level)"


def load_baselines(fixture_dir: Path, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> Baselines | None:
    """The fixture's committed baselines, or None when it has none.

    The file is read like every input (a regular file within the size limit, strict JSON: see
    :mod:`evalkit.data.inputs`); the tolerance must be finite and at most :data:`MAX_BASELINE_TOLERANCE`.

    Raises:
        ValueError: naming the file and each problem with its field.
    """
    path = fixture_dir / BASELINES_FILE
    if not path.exists():
        return None
    try:
        text, _ = read_json_file(path, max_bytes)
    except InputError as exc:
        raise ValueError(f"invalid {BASELINES_FILE} in {clip(fixture_dir.name)}: {exc.reason}") from None
    try:
        return Baselines.model_validate_json(text)
    except ValidationError as exc:
        problems = [f"field {_locate(tuple(e['loc']))!r}: {e['msg']}" for e in exc.errors(include_url=False)]
        listing = "\n".join(f"  - {p}" for p in cap_problems(problems))
        raise ValueError(
            f"invalid {BASELINES_FILE} in {clip(fixture_dir.name)}: {len(problems)} problem(s)\n{listing}"
        ) from None


def check_baselines_match(baselines: Baselines, fixture_id: str, fixture_version: str) -> None:
    """Refuse baselines written for another fixture ID or version (as :func:`evaluate_gates` would)."""
    if (baselines.fixture_id, baselines.fixture_version) != (fixture_id, fixture_version):
        raise ValueError(
            f"{BASELINES_FILE} is for {baselines.fixture_id} {baselines.fixture_version}, the fixture is "
            f"{fixture_id} {fixture_version}: regenerate it with `evalkit baseline --write`"
        )
