"""One pipeline for every front door: what was asked is evaluated or scored, reported, assessed against the gates,
described, written and enforced.

A front door turns its options into a :class:`Request` (systems run over a fixture: ``evalkit run``, ``evalkit score
--fixture``, the notebooks, Ray, calibration) or a :class:`ScoreRequest` (precomputed runs against qrels: ``evalkit
score --qrels``) and calls :func:`run_pipeline`. Either way the :class:`Outcome` holds one report, made by the one
builder (:func:`evalkit.reporting.build.build_report`) when it is first needed, so that a text table of a large run
costs no bootstrap; :meth:`Outcome.summary` is the one summary view (:mod:`evalkit.reporting.summary`),
:func:`write_outcome` the one writer and :func:`enforce_gates` the one enforcement. The front doors print; the text
comes from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.common.output import (
    ENV_VAR,
    output_path_from_env,
    refuse_input_overwrite,
    resolve_output_path,
)
from evalkit.data.loading import QrelsInput
from evalkit.data.tables import DEFAULT_MAX_TABLE_BYTES
from evalkit.measures.registry import display_order
from evalkit.measures.ties import DEFAULT_TIE_POLICY
from evalkit.reporting.gate_specs import BASELINE_ABLATIONS, GateSpec
from evalkit.reporting.gates import Baselines, assess, baselines_from_report, check_gates
from evalkit.reporting.report import Report, SystemReport, write_report
from evalkit.reporting.summary import NO_GATES, format_outcome, format_summary
from evalkit.retrieval.presets import DEFAULT_PRESET, PRESETS
from evalkit.runs.ablations import Ablation, ExternalMode, external_ablation, select_ablations
from evalkit.runs.calibration import calibrated_evaluation
from evalkit.runs.cluster import evaluate_on_ray
from evalkit.runs.evaluation import evaluate
from evalkit.runs.fixture_runs import score_fixture_runs
from evalkit.runs.precomputed import ScoreResult, score

if TYPE_CHECKING:
    from evalkit.data.fixture import Fixture, LoadedFixture
    from evalkit.data.settings import RetrievalSettings
    from evalkit.retrieval.embedding_cache import EmbeddingCache
    from evalkit.retrieval.retriever import Retriever
    from evalkit.runs.calibration import CalibrationOptions
    from evalkit.runs.cluster import ClusterOptions
    from evalkit.runs.evaluation import Evaluation

__all__ = [
    "Outcome",
    "Request",
    "ScoreRequest",
    "check_gates_apply",
    "enforce_gates",
    "evaluate_request",
    "format_settings",
    "regenerate_baselines",
    "report_target",
    "run_pipeline",
    "systems_of",
    "write_outcome",
]


@dataclass(frozen=True)
class Request:
    """What a front door asks for: the systems to evaluate over a fixture, how, and the gates to assess."""

    loaded: LoadedFixture
    """The fixture with its aliases."""
    systems: tuple[Ablation, ...]
    """Every system evaluated: the built-in ablations asked for, then the external systems (see :func:`systems_of`)."""
    retrievers: Mapping[str, Retriever] = field(default_factory=dict)
    """What answers for each external system (a user's retriever, an HTTP service, a run file), by system ID."""
    settings: RetrievalSettings | None = None
    """The retrieval settings of the built-in ablations (None: the default preset)."""
    runs: int = 2
    """Runs compared for determinism."""
    ties: str = DEFAULT_TIE_POLICY
    """The tie policy of the rankings."""
    cache: EmbeddingCache | None = None
    """The on-disk embedding cache, or None."""
    cluster: ClusterOptions | None = None
    """Search sharded on Ray (the same report), or None: in this process."""
    calibration: CalibrationOptions | None = None
    """Choose fusion and floors on a calibration split and report on the rest (in this process), or None."""
    gates: tuple[GateSpec, ...] = ()
    """The gates assessed (usually from :func:`evalkit.reporting.gates.collect_gates`)."""


@dataclass(frozen=True)
class ScoreRequest:
    """What ``evalkit score`` asks for: precomputed runs scored against qrels (see :func:`evalkit.score`) or, when
    `fixture` is given, against a fixture (:func:`evalkit.runs.fixture_runs.score_fixture_runs`)."""

    qrels: QrelsInput | None
    """The judgments: a qrels path, a mapping or a DataFrame (None: the fixture's)."""
    runs: Any
    """One run or ``{name: run}`` (paths, mappings, DataFrames or read runs)."""
    measures: Sequence[str] | None = None
    """Measure names (None: the default set)."""
    ties: str = DEFAULT_TIE_POLICY
    languages: Mapping[str, str] | Path | None = None
    """Each query's language (a mapping or a topics file), for the language slices."""
    missing: str = "zero"
    max_bytes: int = DEFAULT_MAX_TABLE_BYTES
    floor: float | None = None
    gates: tuple[GateSpec, ...] = ()
    fixture: Fixture | None = None
    """Score against this fixture (context measures, failures, no-answer queries) instead of qrels: `runs` are then
    read runs, and `measures`, `languages`, `missing` and `floor` keep their defaults."""
    systems: Mapping[str, SystemReport] = field(default_factory=dict)
    """With a fixture: each run's provenance as the front door read it, by run name."""


@dataclass(frozen=True)
class Outcome:
    """What a request gave: the fixture evaluation or the scored runs behind it, and its report with the outcome of
    every gate in it, built on first use."""

    gates: tuple[GateSpec, ...] = ()
    requested: tuple[str, ...] = ()
    evaluation: Evaluation | None = None
    """The fixture evaluation (a :class:`Request`), or None."""
    result: ScoreResult | None = None
    """The precomputed runs scored against qrels (a :class:`ScoreRequest`), or None."""

    @cached_property
    def report(self) -> Report:
        """The report, from the one builder, with the gates assessed (nothing raised for a failed gate here)."""
        if self.result is not None:
            return assess(self.result.report_source(), self.gates, requested=self.requested)
        if self.evaluation is None:
            raise ValueError("an outcome holds an evaluation or a result")
        return assess(self.evaluation, self.gates, requested=self.requested)

    @property
    def evaluated(self) -> Evaluation:
        """The fixture evaluation; ValueError for an outcome of precomputed runs scored against qrels."""
        if self.evaluation is None:
            raise ValueError("precomputed runs scored against qrels have no fixture evaluation")
        return self.evaluation

    @property
    def scored(self) -> ScoreResult:
        """The precomputed runs scored against qrels; ValueError for an outcome of a fixture evaluation."""
        if self.result is None:
            raise ValueError("a fixture evaluation has no scored precomputed runs")
        return self.result

    @property
    def notes(self) -> tuple[str, ...]:
        """What the front door prints under the summary: the counts that shape the numbers."""
        return () if self.result is None else self.result.notes

    def summary(self) -> str:
        """The summary table and notes, then the gates (when some gate applies, or when a fixture was evaluated).

        Scored runs that no gate names are summed up without building the report: a table costs no bootstrap."""
        result = self.result
        if result is not None and not any(g.systems <= set(self.requested) for g in self.gates):
            table = format_summary(result.summary_rows(), display_order([m.name for m in result.measures]), self.notes)
            return table if result.fixture is None else f"{table}\n\n{NO_GATES}"
        return format_outcome(self.report, self.notes)


def systems_of(
    built_in: Sequence[Ablation], retrievers: Mapping[str, Retriever], mode: ExternalMode = "retriever"
) -> tuple[Ablation, ...]:
    """The systems of an evaluation: the `built_in` ablations, then one external system per entry of `retrievers`
    (each a ``retriever`` or a ``run`` file), in their order."""
    return (*built_in, *(external_ablation(system_id, mode) for system_id in retrievers))


def evaluate_request(request: Request) -> Evaluation:
    """The evaluation `request` asks for: in this process, sharded on Ray (the same report), or with fusion and floors
    chosen on a calibration split and evaluated on the rest (in this process)."""
    r = request
    if r.calibration is not None:
        if r.cluster is not None:
            raise ValueError("calibration runs in this process; it cannot be combined with Ray")
        settings = PRESETS[DEFAULT_PRESET] if r.settings is None else r.settings
        return calibrated_evaluation(
            r.loaded, r.systems, settings, r.calibration, r.runs, r.cache, r.retrievers, r.ties
        )
    if r.cluster is not None:
        return evaluate_on_ray(r.loaded, r.systems, r.cluster, r.settings, r.runs, r.cache, r.retrievers, r.ties)
    return evaluate(r.loaded, r.systems, r.settings, runs=r.runs, cache=r.cache, systems=r.retrievers, ties=r.ties)


def run_pipeline(request: Request | ScoreRequest) -> Outcome:
    """Evaluate (or score) what `request` asks for; its report, with the gates assessed, is built on first use
    (nothing is raised for a failed gate here: see :func:`enforce_gates`)."""
    if isinstance(request, ScoreRequest) and request.fixture is not None:
        scored = score_fixture_runs(request.fixture, request.runs, request.ties, request.systems)
        return Outcome(request.gates, tuple(r.name for r in scored.runs), result=scored)
    if isinstance(request, ScoreRequest):
        if request.qrels is None:
            raise ValueError("a score request needs qrels or a fixture")
        result = score(
            request.qrels,
            request.runs,
            measures=request.measures,
            ties=request.ties,
            languages=request.languages,
            missing=request.missing,
            max_bytes=request.max_bytes,
            floor=request.floor,
        )
        check_gates_apply(result, request.gates)
        return Outcome(request.gates, tuple(r.name for r in result.runs), result=result)
    evaluation = evaluate_request(request)
    requested = tuple(system.ablation_id for system in request.systems)
    return Outcome(request.gates, requested, evaluation=evaluation)


def check_gates_apply(result: ScoreResult, gates: Sequence[GateSpec]) -> None:
    """Refuse a gate on a run, measure or slice the scored runs do not have (ValueError naming it)."""
    unknown = sorted({s for g in gates for s in g.systems} - {r.name for r in result.runs})
    if unknown:
        raise ValueError(f"--gate names system {unknown[0]!r}, which is not one of the runs scored here")
    scored = [m.name for m in result.measures]
    unscored = sorted({g.measure for g in gates} - set(scored))
    if unscored:
        raise ValueError(
            f"--gate names measure {unscored[0]!r}, which is not one of the measures scored here "
            f"({', '.join(scored)}); add it to --measures"
        )
    empty = [g for g in gates if g.slice not in result.slices or not result.query_ids]
    if empty:
        if not result.query_ids:
            how = "no judged query was evaluated (see the notes)"
        elif not result.languages:
            how = "give --topics to have language slices"
        else:
            how = "no evaluated query has it"
        raise ValueError(
            f"--gate {empty[0].label!r} is on slice {empty[0].slice!r}, which has no queries here "
            f"(slices: {', '.join(result.slices)}): {how}"
        )


def report_target(requested: str | None, workspace: Path, inputs: Sequence[Path]) -> Path | None:
    """Where the report goes: the workspace-relative `requested` path, else ``$EVALKIT_OUTPUT``, else nowhere;
    refused when unsafe or when it is one of the `inputs`. Checked before anything is evaluated."""
    target = (
        resolve_output_path(requested, workspace)
        if requested is not None
        else output_path_from_env(os.environ, workspace)
    )
    if target is not None:
        refuse_input_overwrite(target, inputs, requested or os.environ.get(ENV_VAR))
    return target


def format_settings(settings: RetrievalSettings) -> str:
    """The settings in one line, nested fields dotted (``reranker.min_score=0.3``)."""
    flat: dict[str, object] = {}
    for name, value in settings.model_dump(mode="json").items():
        if isinstance(value, dict):
            flat.update({f"{name}.{inner}": v for inner, v in value.items()})
        else:
            flat[name] = value
    return ", ".join(f"{name}={value}" for name, value in flat.items())


def write_outcome(outcome: Outcome, target: Path | None) -> Path | None:
    """Write the JSON report atomically to an already-resolved `target` (the one writer); nothing when it is None."""
    return write_report(outcome.report, target)


def enforce_gates(outcome: Outcome, no_gates: bool = False) -> bool:
    """Raise :class:`~evalkit.reporting.gates.GateFailure` listing every failed gate, unless `no_gates`; True when
    the gates were enforced (the front door says when they were not)."""
    if no_gates:
        return False
    check_gates(outcome.report.gates)
    return True


def regenerate_baselines(loaded: LoadedFixture, runs: int = 2) -> Baselines:
    """The floors ``evalkit baseline`` writes for `loaded`: its baseline ablations evaluated `runs` times (two check
    that they are deterministic; the floors are the same with one, as ``evalkit validate`` uses)."""
    outcome = run_pipeline(Request(loaded, select_ablations(BASELINE_ABLATIONS), runs=runs))
    return baselines_from_report(outcome.report)
