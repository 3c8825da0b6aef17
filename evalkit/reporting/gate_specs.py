"""What a quality gate is and how gates are read: :class:`GateSpec` (a bound on one measure of one system over one
slice: ``min``, ``max``, ``max_drop_vs`` or ``baseline``), the fixture's ``gates.json`` (:func:`load_gate_file`), the
named thresholds (:class:`GateThresholds`) and ``--gate`` options (:func:`parse_gate`, :func:`distinct_gates`,
:func:`merge_gates`).
Collecting an evaluation's gates and checking them is :mod:`evalkit.reporting.gates`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES, InputError, cap_problems, clip, read_json_file, shorten
from evalkit.data.schema import (
    SLICES,
    Identifier,
    RecordProblems,
    Slice,
    StrictModel,
    UnitFloat,
    child,
    describe_validation_error,
    privacy_problem,
    validation_problems,
)
from evalkit.measures.registry import parse_measure

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
    "direction, else adds one (repeatable; two options setting one gate, this or a threshold option, are refused)"
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
        return tuple(gate for _, gate in self.flagged_gates())

    def flagged_gates(self) -> tuple[tuple[str, GateSpec], ...]:
        """Each seed gate set here with its option as given, ``--min-reranked-mrr-at-10 0.99``."""
        return tuple(
            (f"--{name.replace('_', '-')} {value!r}", _threshold_gate(name, value))
            for name, value in self
            if value is not None
        )


def _threshold_problems(error: ValidationError) -> list[str]:
    return validation_problems(error, None, _threshold_named)


def _threshold_named(raw: Any, loc: tuple[int | str, ...]) -> str:
    del raw  # the threshold's name is the whole description
    name = str(loc[0]) if loc else "(thresholds)"
    return f"{name} (--{name.replace('_', '-')})"


_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_GATE_OPTION = re.compile(
    rf"\s*(?P<system>[^\s\[\]<>=]+)\s+(?P<measure>[^\s\[\]<>=()]+(?:\([^()\s]*\)(?:@\d+)?)?)"
    rf"\s*(?:\[(?P<slice>[^\]]*)\])?"
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


def distinct_gates(flagged: Sequence[tuple[str, GateSpec]]) -> tuple[GateSpec, ...]:
    """The gates of the command line (each with its option as given), refused when two are the same gate.

    Raises:
        ValueError: naming both options of each pair with one :attr:`~GateSpec.key` (system, measure, slice and
            direction): of ``>= 0.99`` and ``>= 0.5`` on one measure, which was meant is not evalkit's to guess.
    """
    first: dict[tuple[str, str, str, str], int] = {}  # each key's first option
    problems = [
        f"{flagged[first[gate.key]][0]} and {option} set the same gate ({gate.label} {gate.comparison} ...); give one"
        for index, (option, gate) in enumerate(flagged)
        if first.setdefault(gate.key, index) != index
    ]
    if problems:
        raise ValueError("conflicting gate options: " + "; ".join(problems))
    return tuple(gate for _, gate in flagged)


def merge_gates(gates: Sequence[GateSpec], overrides: Iterable[GateSpec]) -> tuple[GateSpec, ...]:
    """`gates` with each override in place of the gate with its :attr:`~GateSpec.key` (keeping that gate's name
    when the override has none), the others appended in order; of two overrides of one gate the later wins, so
    the command line's gates are first checked by :func:`distinct_gates`."""
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


def locate_field(raw: Any, loc: tuple[int | str, ...]) -> str:
    return f"field {_locate(loc)!r}"


def _locate_entry(raw: Any, loc: tuple[int | str, ...]) -> str:
    """``entry 3 (hybrid ndcg@10), field 'slice'`` for a problem in ``gates[3]``; the field alone otherwise."""
    if len(loc) < 2 or loc[0] != "gates" or not isinstance(loc[1], int):
        return locate_field(raw, loc)
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
    return read_fixture_file(fixture_dir / GATES_FILE, GateFile, max_bytes, _locate_entry)


def read_fixture_file(
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
