"""Quality gates: collecting an evaluation's gates and checking them (what a gate is, and how gates are read, is
:mod:`evalkit.reporting.gate_specs`).

An evaluation's gates (:func:`collect_gates`) are the fixture's ``gates.json``, with the named thresholds
(:class:`~evalkit.reporting.gate_specs.GateThresholds`) and ``--gate`` options
(:func:`~evalkit.reporting.gate_specs.parse_gate`) in place of the entries they name, then the floors of
``baselines.json`` (:class:`Baselines`, regenerated for review with ``evalkit baseline --write``).
:func:`evaluate_gates` skips a gate on a system that was not run and fails one whose value is missing;
:func:`check_gates` raises :class:`GateFailure`, listing every failing gate with its value and bound.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

from pydantic import Field, ValidationError

from evalkit.data.fixture import Fixture
from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES, cap_problems, clip, shorten
from evalkit.data.schema import (
    Identifier,
    SemanticVersion,
    StrictModel,
    UnitFloat,
    describe_validation_error,
    model_json,
)
from evalkit.measures.core import FIXTURE_COMPANIONS, FIXTURE_MEASURES
from evalkit.reporting.build import ReportedEvaluation, ReportSource, build_report
from evalkit.reporting.gate_specs import (
    BASELINE_ABLATIONS,
    BASELINE_MEASURES,
    BASELINE_SLICES,
    BASELINES_FILE,
    FLOAT_SLACK,
    MAX_BASELINE_TOLERANCE,
    BaselineBound,
    GateSpec,
    GateThresholds,
    Tolerance,
    distinct_gates,
    load_gate_file,
    locate_field,
    merge_gates,
    parse_gate,
    read_fixture_file,
)
from evalkit.reporting.report import GateOutcome, Report

BASELINE_SLACK = 1.5e-6
"""How far a committed floor may be from its regenerated value and still match: one unit in the sixth place, where
floors are rounded (a value on a rounding boundary may round either way on another machine), and some for binary."""


class Baselines(StrictModel):
    """Committed context precision/recall floors per ablation and slice for one fixture version."""

    fixture_id: Identifier
    fixture_version: SemanticVersion
    tolerance: Tolerance = Field(
        default=0.001, description=f"a value may fall this far below its floor (at most {MAX_BASELINE_TOLERANCE})"
    )
    ablations: dict[str, dict[str, dict[str, UnitFloat]]] = Field(
        description="ablation -> slice (all, en, zh) -> measure -> floor"
    )


def baseline_gates(baselines: Baselines) -> tuple[GateSpec, ...]:
    """One ``baseline`` gate per floor, ordered by ablation, slice and measure.

    Raises:
        ValueError: naming ``baselines.json`` and a floor that is no gate (an unknown slice or measure).
    """
    return tuple(
        _baseline_gate(ablation, slice_name, measure, BaselineBound(floor=floor, tolerance=baselines.tolerance))
        for ablation, slices in sorted(baselines.ablations.items())
        for slice_name, measures in sorted(slices.items())
        for measure, floor in sorted(measures.items())
    )


def _baseline_gate(ablation: str, slice_name: str, measure: str, bound: BaselineBound) -> GateSpec:
    try:
        return GateSpec.model_validate({"system": ablation, "measure": measure, "slice": slice_name, "baseline": bound})
    except ValidationError as exc:
        floor = f"invalid {BASELINES_FILE}: floor {clip(ablation)} [{clip(slice_name)}] {clip(measure)}"
        raise ValueError(describe_validation_error(exc, floor)) from None


def refuse_unevaluated(gates: Sequence[GateSpec], where: str) -> None:
    """Refuse a gate on a measure a fixture run does not evaluate (``map@10``, ``ndcg@99``): it could only ever
    fail, as "not evaluated", whatever the retrieval did (ValueError naming it and what is evaluated)."""
    evaluated = [str(m) for m in (*FIXTURE_MEASURES, *FIXTURE_COMPANIONS)]
    unknown = [gate for gate in gates if gate.measure not in evaluated]
    if unknown:
        raise ValueError(
            f"{where}: gate {shorten(unknown[0].measure)} on {unknown[0].system}: a fixture run does not evaluate "
            f"this measure, so the gate could never pass (evaluated: {', '.join(evaluated)})"
        )


def collect_gates(
    fixture_path: Path | None,
    fixture: Fixture,
    *,
    thresholds: GateThresholds | None = None,
    options: Sequence[str] = (),
    systems: Collection[str] | None = None,
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> tuple[GateSpec, ...]:
    """Every gate of an evaluation of `fixture`: the entries of ``gates.json`` in the fixture's folder (`fixture_path`
    itself, or the folder of a fixture file; none without the file, or when `fixture_path` is None), with the bounds
    set in `thresholds` and the ``--gate`` `options` in place of the entries they name (or added), followed by the
    floors of ``baselines.json``.

    Raises:
        ValueError: a malformed option, two options (thresholds or ``--gate``) setting the same gate, an invalid gate
            file, baselines of another fixture, or (when `systems`, the systems to evaluate, is given) an option
            naming a system outside it: it would be skipped unseen.
    """
    parsed = tuple(parse_gate(text) for text in options)
    strangers = [gate.label for gate in parsed if systems is not None and gate.system not in systems]
    if systems is not None and strangers:
        evaluated = ", ".join(sorted(systems)) or "none"
        raise ValueError(f"--gate {'; '.join(strangers)}: no such system is evaluated here (systems: {evaluated})")
    seeds = () if thresholds is None else thresholds.flagged_gates()
    flagged = ((f"--gate {shorten(text)}", gate) for text, gate in zip(options, parsed, strict=True))
    overrides = distinct_gates([*seeds, *flagged])
    fixture_dir = None if fixture_path is None else fixture_path if fixture_path.is_dir() else fixture_path.parent
    gate_file = None if fixture_dir is None else load_gate_file(fixture_dir, max_bytes)
    gates = merge_gates(() if gate_file is None else gate_file.gates, overrides)
    baselines = None if fixture_dir is None else load_baselines(fixture_dir, max_bytes)
    if baselines is None:
        return gates
    check_baselines_match(baselines, fixture.fixture_id, fixture.fixture_version)
    return (*gates, *baseline_gates(baselines))


class GateFailure(Exception):
    """One or more gates failed; the message lists each with its value and bound."""

    def __init__(self, failed: Sequence[GateOutcome]) -> None:
        self.failed = tuple(failed)
        lines = [f"  - {_describe(g)}" for g in self.failed]
        super().__init__(f"{len(self.failed)} quality gate(s) failed:\n" + "\n".join(lines))


def _describe(gate: GateOutcome) -> str:
    decimals = 4  # more where four would print a failed value as its bound (0.74996 is 0.7500, as is 0.75)
    if gate.value is not None and not gate.passed:
        while decimals < 12 and f"{gate.value:.{decimals}f}" == f"{gate.threshold:.{decimals}f}":
            decimals += 1
    value = "missing" if gate.value is None else f"{gate.value:.{decimals}f}"
    text = f"{gate.gate} = {value}, required {gate.comparison} {gate.threshold:.{decimals}f}"
    return f"{text} ({gate.detail})" if gate.detail else text


def _metric(report: Report, ablation: str, slice_name: str, measure: str) -> float | None:
    result = report.ablations.get(ablation)
    if result is None:
        return None
    value = result.metrics.get(slice_name, {}).get(measure)  # type: ignore[call-overload]
    return None if value is None else float(value)


def _outcome(report: Report, gate: GateSpec) -> GateOutcome:
    value = _metric(report, gate.system, gate.slice, gate.measure)
    if gate.max_drop_vs is not None:
        other = _metric(report, gate.max_drop_vs.system, gate.slice, gate.measure)
        value = None if value is None or other is None else other - value
    threshold, comparison = gate.threshold, gate.comparison
    # Bounds are inclusive; FLOAT_SLACK absorbs rounding (0.80 - 0.75 is 0.05000000000000004 in binary).
    passed = value is not None and (
        value >= threshold - FLOAT_SLACK if comparison == ">=" else value <= threshold + FLOAT_SLACK
    )
    detail = "" if value is not None else "not evaluated"
    return GateOutcome(
        gate=gate.label, value=value, threshold=threshold, comparison=comparison, passed=passed, detail=detail
    )


def evaluate_gates(report: Report, gates: Sequence[GateSpec], requested: Iterable[str] = ()) -> tuple[GateOutcome, ...]:
    """The outcome of every gate whose systems were all asked for (in the report, or in `requested`), in order.

    A gate naming a system that was not asked for is skipped; a gate on systems asked for whose value is missing
    (a system that produced nothing, a measure the report does not hold) fails as "not evaluated".
    """
    asked = set(report.ablations).union(requested)
    return tuple(_outcome(report, gate) for gate in gates if gate.systems <= asked)


def assess(
    evaluation: ReportSource | ReportedEvaluation,
    gates: Sequence[GateSpec] | GateThresholds,
    baselines: Baselines | None = None,
    requested: Iterable[str] = (),
) -> Report:
    """The report of `evaluation` (a fixture evaluation, or any :class:`ReportSource`) with the outcome of every gate
    in it (see :func:`evaluate_gates`); nothing is raised
    for a failed gate here (see :func:`check_gates`).

    `gates` are usually those of :func:`collect_gates`; thresholds stand for the seed gates they set. The floors of
    `baselines` (refused when written for another fixture) are added after them.
    """
    report = build_report(evaluation)
    specs = gates.gates() if isinstance(gates, GateThresholds) else tuple(gates)
    if baselines is not None:
        check_baselines_match(baselines, report.fixture_id, report.fixture_version)
        specs = (*specs, *baseline_gates(baselines))
    return report.model_copy(update={"gates": evaluate_gates(report, specs, requested)})


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


def load_baselines(fixture_dir: Path, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> Baselines | None:
    """The fixture's committed baselines, or None when it has none.

    The file is read like every input (a regular file within the size limit, strict JSON: see
    :mod:`evalkit.data.inputs`); the tolerance must be finite and at most :data:`MAX_BASELINE_TOLERANCE`.

    Raises:
        ValueError: naming the file and each problem with its field.
    """
    return read_fixture_file(fixture_dir / BASELINES_FILE, Baselines, max_bytes, locate_field)


def check_baselines_regenerated(committed: Baselines, regenerated: Baselines) -> None:
    """Refuse `committed` floors that differ from the `regenerated` ones (:func:`baselines_from_report` of the
    fixture they are for) by more than :data:`BASELINE_SLACK`, naming each with both values.

    Only the floors `committed` holds are compared: a floor left out gates nothing, a wrong one gates the wrong value
    (an edited judgment moves a floor by less than its tolerance, so the gate alone does not see it).
    """
    floors = regenerated.ablations
    problems = [
        f"{clip(ablation)} [{clip(slice_name)}] {clip(measure)}: {floor:.6f} in the file, "
        + ("not regenerated" if again is None else f"{again:.6f} regenerated")
        for ablation, slices in sorted(committed.ablations.items())
        for slice_name, measures in sorted(slices.items())
        for measure, floor in sorted(measures.items())
        for again in [floors.get(ablation, {}).get(slice_name, {}).get(measure)]
        if again is None or abs(again - floor) > BASELINE_SLACK
    ]
    if problems:
        listing = "\n".join(f"  - {problem}" for problem in cap_problems(problems))
        raise ValueError(
            f"{BASELINES_FILE} does not match the fixture: {len(problems)} floor(s) differ from what `evalkit "
            f"baseline` regenerates; review them and rewrite the file with `evalkit baseline --write`\n{listing}"
        )


def check_baselines_match(baselines: Baselines, fixture_id: str, fixture_version: str) -> None:
    """Refuse baselines written for another fixture ID or version."""
    if (baselines.fixture_id, baselines.fixture_version) != (fixture_id, fixture_version):
        raise ValueError(
            f"{BASELINES_FILE} is for {baselines.fixture_id} {baselines.fixture_version}, the fixture is "
            f"{fixture_id} {fixture_version}: regenerate it with `evalkit baseline --write`"
        )
