"""Quality gates: bounds on measures of named systems, read as data.

A gate (:class:`GateSpec`) bounds one measure of one system over one slice: ``min``, ``max``, ``max_drop_vs``
(another system's value minus this one's) or ``baseline`` (a committed floor less a tolerance). An evaluation's
gates (:func:`collect_gates`) are the fixture's ``gates.json``, with the named thresholds (:class:`GateThresholds`)
and ``--gate`` options (:func:`parse_gate`) in place of the entries they name, then the floors of ``baselines.json``
(regenerated for review with ``evalkit baseline --write``; the README says when that is justified).
:func:`evaluate_gates` skips a gate on a system that was not run and fails one whose value is missing;
:func:`check_gates` raises :class:`GateFailure`, listing every failing gate with its value and bound.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from evalkit.data.fixture import Fixture
from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES, InputError, cap_problems, clip, read_json_file, shorten
from evalkit.data.schema import (
    SLICES,
    Identifier,
    RecordProblems,
    SemanticVersion,
    Slice,
    StrictModel,
    UnitFloat,
    child,
    describe_validation_error,
    model_json,
    privacy_problem,
    validation_problems,
)
from evalkit.measures.registry import parse_measure
from evalkit.reporting.report import GateOutcome, Report, ReportedEvaluation, build_report

GATES_FILE = "gates.json"
BASELINES_FILE = "baselines.json"
BASELINE_ABLATIONS: tuple[str, ...] = ("lexical", "token-hash-vector", "alias-vector", "hybrid")
BASELINE_MEASURES: tuple[str, ...] = ("context_precision", "context_recall")
BASELINE_SLICES: tuple[Slice, ...] = SLICES
RERANKED = "hybrid-rerank"
FLOAT_SLACK = 1e-12
HYBRID = "hybrid"
DROP_GATE = f"rerank ndcg@10 drop vs {HYBRID}"
"""The name of the seed gate on the drop of ndcg@10 from hybrid to hybrid-rerank."""
MAX_BASELINE_TOLERANCE = 0.05
"""The largest tolerance ``baselines.json`` may set: a larger one would let the baseline gates pass anything."""
BOUND_FIELDS = ("min", "max", "max_drop_vs", "baseline")  # the kinds of bound: a gate has exactly one
GATE_FORM = "SYSTEM MEASURE[SLICE] >= X"  # a --gate option (<= X for an upper bound; [SLICE] is optional)
GATE_OPTION_HELP = (
    f"a gate '{GATE_FORM}' or '... <= X', SLICE all (the default), en or zh, e.g. 'hybrid-rerank ndcg@10 >= 0.8' "
    f"or 'lexical recall@10[zh] >= 0.9'; replaces the {GATES_FILE} gate of the same system, measure, slice and "
    "direction, else adds one (repeatable)"
)

_Model = TypeVar("_Model", bound=StrictModel)
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
Tolerance = Annotated[float, Field(ge=0.0, le=MAX_BASELINE_TOLERANCE, allow_inf_nan=False)]


def _no_private_name(value: str) -> str:
    problem = privacy_problem(value)
    if problem is not None:
        raise ValueError(f"looks like {problem}; gate names go into reports, which carry no paths or credentials")
    return value


GateName = Annotated[
    str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$"), AfterValidator(_no_private_name)
]


class DropBound(StrictModel):
    """A bound on a drop: the other system's value minus the gated system's value, at most ``max``."""

    system: Identifier = Field(description="the system compared against")
    max: FiniteFloat = Field(description="the largest drop allowed")


class BaselineBound(StrictModel):
    """A committed floor: the value at least ``floor - tolerance`` (and at least 0)."""

    floor: UnitFloat = Field(description="the value measured when the floor was written")
    tolerance: Tolerance = Field(default=0.001, description="how far below its floor the value may fall")


class GateSpec(StrictModel):
    """One gate: a bound on one measure of one system over one slice (exactly one of the bound fields)."""

    system: Identifier = Field(description="the system gated: an ablation ID, a retriever's or a run's name")
    measure: str = Field(max_length=100, description="a measure name such as mrr@10, ndcg@10 or no_answer_fpr")
    slice: Slice = Field(default="all", description="every query, or the queries of one language")
    min: FiniteFloat | None = Field(default=None, description="the value at least this")
    max: FiniteFloat | None = Field(default=None, description="the value at most this")
    max_drop_vs: DropBound | None = Field(default=None, description="another system's value minus this one's")
    baseline: BaselineBound | None = Field(default=None, description="a committed floor (from baselines.json)")
    name: GateName | None = Field(default=None, description="the gate's name in the output (default: its fields)")

    @field_validator("measure")
    @classmethod
    def _known_measure(cls, value: str) -> str:
        return parse_measure(value).name  # an unknown name raises ValueError listing the valid ones

    @model_validator(mode="after")
    def _one_bound(self) -> Self:
        given = [name for name in BOUND_FIELDS if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(BOUND_FIELDS)}; found {' and '.join(given) or 'none'}")
        return self

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What makes two gates the same gate: system, measure, slice and kind of bound (a drop's other system)."""
        kind = next(name for name in BOUND_FIELDS if getattr(self, name) is not None)
        other = "" if self.max_drop_vs is None else f" {self.max_drop_vs.system}"
        return (self.system, self.measure, self.slice, kind + other)

    @property
    def systems(self) -> set[str]:
        """Every system the gate reads."""
        return {self.system} if self.max_drop_vs is None else {self.system, self.max_drop_vs.system}

    @property
    def label(self) -> str:
        """The name shown: ``name``, else ``SYSTEM MEASURE`` with `` [SLICE]`` unless all and the kind of bound."""
        if self.name is not None:
            return self.name
        if self.baseline is not None:
            return f"{self.system} {self.measure} [{self.slice}] baseline"
        text = f"{self.system} {self.measure}" + ("" if self.slice == "all" else f" [{self.slice}]")
        return text if self.max_drop_vs is None else f"{text} drop vs {self.max_drop_vs.system}"

    @property
    def comparison(self) -> Literal[">=", "<="]:
        """How the value must compare with :attr:`threshold`."""
        return ">=" if self.min is not None or self.baseline is not None else "<="

    @property
    def threshold(self) -> float:
        """The bound the value is compared with."""
        if self.baseline is not None:
            return max(self.baseline.floor - self.baseline.tolerance, 0.0)
        if self.max_drop_vs is not None:
            return self.max_drop_vs.max
        return next(bound for bound in (self.min, self.max) if bound is not None)


class GateFile(StrictModel):
    """``gates.json``: the gates of every evaluation of the fixture beside it, in the order they are reported."""

    gates: tuple[GateSpec, ...] = Field(description="the gates; no two with the same system, measure, slice, bound")

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        first: dict[tuple[str, str, str, str], int] = {}  # each key's first entry
        problems = [
            f"entry {index} ({gate.label}): the same gate as entry {first[gate.key]}; keep one"
            for index, gate in enumerate(self.gates)
            if first.setdefault(gate.key, index) != index
        ]
        if problems:
            raise RecordProblems(problems)
        return self


def _threshold_gate(name: str, value: float) -> GateSpec:
    """The seed gate that the threshold `name` of :class:`GateThresholds` bounds by `value`."""
    seeds: dict[str, tuple[str, dict[str, object]]] = {
        "min_reranked_mrr_at_10": ("mrr@10", {"min": value}),
        "min_reranked_ndcg_at_10": ("ndcg@10", {"min": value}),
        "max_no_answer_fpr": ("no_answer_fpr", {"max": value}),
        "max_rerank_ndcg_drop": ("ndcg@10", {"max_drop_vs": {"system": HYBRID, "max": value}, "name": DROP_GATE}),
    }
    measure, bound = seeds[name]
    return GateSpec.model_validate({"system": RERANKED, "measure": measure, **bound})


class GateThresholds(StrictModel):
    """Bounds of the four seed gates by name (CLI options, notebook parameters); None keeps the gates.json entry.

    Any finite bound is accepted: an impossible one simply fails.
    """

    min_reranked_mrr_at_10: FiniteFloat | None = Field(default=None, description="hybrid-rerank mrr@10 at least this")
    min_reranked_ndcg_at_10: FiniteFloat | None = Field(default=None, description="hybrid-rerank ndcg@10 at least this")
    max_no_answer_fpr: FiniteFloat | None = Field(default=None, description="hybrid-rerank no_answer_fpr at most this")
    max_rerank_ndcg_drop: FiniteFloat | None = Field(
        default=None, description="hybrid ndcg@10 minus hybrid-rerank ndcg@10 at most this"
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

    def gates(self) -> tuple[GateSpec, ...]:
        """The seed gates whose bound is set here (the drop gate named ``rerank ndcg@10 drop vs hybrid``)."""
        return tuple(_threshold_gate(name, value) for name, value in self if value is not None)


def _threshold_problems(error: ValidationError) -> list[str]:
    return validation_problems(error, None, _threshold_named)


def _threshold_named(raw: Any, loc: tuple[int | str, ...]) -> str:
    del raw  # the threshold's name is the whole description
    name = str(loc[0]) if loc else "(thresholds)"
    return f"{name} (--{name.replace('_', '-')})"


_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_GATE_OPTION = re.compile(
    rf"\s*(?P<system>[^\s\[\]<>=]+)\s+(?P<measure>[^\s\[\]<>=]+)\s*(?:\[(?P<slice>[^\]]*)\])?"
    rf"\s*(?P<op>>=|<=)\s*(?P<bound>{_NUMBER})\s*"
)


def parse_gate(text: str, option: str = "--gate") -> GateSpec:
    """The gate written ``SYSTEM MEASURE[SLICE] >= X`` (or ``<= X``); SLICE is all (the default), en or zh.

    Raises:
        ValueError: naming `option` and the text, with the expected form when it is malformed, else the invalid
            field (an unknown measure lists the valid names).
    """
    match = _GATE_OPTION.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{option} {shorten(text)}: expected '{GATE_FORM}' or '... <= X' (SLICE: all, en or zh; default all), "
            "e.g. 'hybrid-rerank ndcg@10 >= 0.8' or 'lexical recall@10[zh] >= 0.9'"
        )
    fields: dict[str, object] = {
        "system": match["system"],
        "measure": match["measure"],
        "min" if match["op"] == ">=" else "max": float(match["bound"]),
    }
    if match["slice"] is not None:
        fields["slice"] = match["slice"].strip()
    try:
        return GateSpec.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc, f"{option} {shorten(text)}")) from None


def merge_gates(gates: Sequence[GateSpec], overrides: Iterable[GateSpec]) -> tuple[GateSpec, ...]:
    """`gates` with each override in place of the gate with its :attr:`~GateSpec.key` (keeping that gate's name
    when the override has none), the others appended in order; of two overrides of one gate the later wins."""
    merged = list(gates)
    for override in overrides:
        index = next((i for i, gate in enumerate(merged) if gate.key == override.key), None)
        if index is None:
            merged.append(override)
        else:
            merged[index] = override.model_copy(update={"name": override.name or merged[index].name})
    return tuple(merged)


def _locate(loc: tuple[int | str, ...]) -> str:
    return ".".join(clip(str(part)) for part in loc) or "(top level)"


def _locate_field(raw: Any, loc: tuple[int | str, ...]) -> str:
    return f"field {_locate(loc)!r}"


def _locate_entry(raw: Any, loc: tuple[int | str, ...]) -> str:
    """``entry 3 (hybrid ndcg@10), field 'slice'`` for a problem in ``gates[3]``; the field alone otherwise."""
    if len(loc) < 2 or loc[0] != "gates" or not isinstance(loc[1], int):
        return _locate_field(raw, loc)
    entry = child(child(raw, "gates"), loc[1])
    named = [child(entry, "system"), child(entry, "measure")]
    label = f" ({clip(' '.join(named))})" if all(isinstance(part, str) for part in named) else ""
    where = f"entry {loc[1]}{label}"
    return f"{where}, field {_locate(loc[2:])!r}" if loc[2:] else where


def load_gate_file(fixture_dir: Path, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> GateFile | None:
    """The fixture's ``gates.json``, or None when it has none (read like :func:`load_baselines`).

    Raises:
        ValueError: naming the file and each problem with its entry (index, system and measure) and field.
    """
    return _read_fixture_file(fixture_dir / GATES_FILE, GateFile, max_bytes, _locate_entry)


def _read_fixture_file(
    path: Path, model: type[_Model], max_bytes: int, locate: Callable[[Any, tuple[int | str, ...]], str]
) -> _Model | None:
    if not path.exists():
        return None
    where = f"invalid {path.name} in {clip(path.parent.name)}"
    try:
        text, raw = read_json_file(path, max_bytes)
        return model.model_validate_json(text)
    except InputError as exc:
        raise ValueError(f"{where}: {exc.reason}") from None
    except ValidationError as exc:
        problems = validation_problems(exc, raw, locate)
        listing = "\n".join(f"  - {p}" for p in cap_problems(problems))
        raise ValueError(f"{where}: {len(problems)} problem(s)\n{listing}") from None


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


def collect_gates(
    fixture_dir: Path | None,
    fixture: Fixture,
    *,
    thresholds: GateThresholds | None = None,
    options: Sequence[str] = (),
    systems: Collection[str] | None = None,
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> tuple[GateSpec, ...]:
    """Every gate of an evaluation of `fixture`: the entries of ``gates.json`` in `fixture_dir` (none without the
    file, or when `fixture_dir` is None), with the bounds set in `thresholds` and then the ``--gate`` `options` in
    place of the entries they name (or added), followed by the floors of ``baselines.json``.

    Raises:
        ValueError: a malformed option, an invalid gate file, baselines of another fixture, or (when `systems`, the
            systems to evaluate, is given) an option naming a system outside it: it would be skipped unseen.
    """
    parsed = tuple(parse_gate(text) for text in options)
    strangers = [gate.label for gate in parsed if systems is not None and gate.system not in systems]
    if systems is not None and strangers:
        evaluated = ", ".join(sorted(systems)) or "none"
        raise ValueError(f"--gate {'; '.join(strangers)}: no such system is evaluated here (systems: {evaluated})")
    gate_file = None if fixture_dir is None else load_gate_file(fixture_dir, max_bytes)
    gates = () if gate_file is None else gate_file.gates
    gates = merge_gates(merge_gates(gates, () if thresholds is None else thresholds.gates()), parsed)
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
    value = "missing" if gate.value is None else f"{gate.value:.4f}"
    text = f"{gate.gate} = {value}, required {gate.comparison} {gate.threshold:.4f}"
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
    evaluation: ReportedEvaluation,
    gates: Sequence[GateSpec] | GateThresholds,
    baselines: Baselines | None = None,
    requested: Iterable[str] = (),
) -> Report:
    """The evaluation's report with the outcome of every gate in it (see :func:`evaluate_gates`); nothing is raised
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
    return _read_fixture_file(fixture_dir / BASELINES_FILE, Baselines, max_bytes, _locate_field)


def check_baselines_match(baselines: Baselines, fixture_id: str, fixture_version: str) -> None:
    """Refuse baselines written for another fixture ID or version."""
    if (baselines.fixture_id, baselines.fixture_version) != (fixture_id, fixture_version):
        raise ValueError(
            f"{BASELINES_FILE} is for {baselines.fixture_id} {baselines.fixture_version}, the fixture is "
            f"{fixture_id} {fixture_version}: regenerate it with `evalkit baseline --write`"
        )
