"""One pipeline for every front door: what was asked is evaluated, assessed against the gates, described, written and
enforced.

The command line (``evalkit run``, ``evalkit score --fixture``) and the notebook parameters
(:class:`evalkit.app.notebook.EvaluationParameters`) each turn their options into a :class:`Request` and call
:func:`run_pipeline` (or :func:`evaluate_request` alone). They print :func:`format_outcome`, write with
:func:`write_outcome` and finish with :func:`enforce_gates`: the front doors print, the text comes from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.common.output import (
    ENV_VAR,
    output_path_from_env,
    refuse_input_overwrite,
    resolve_output_path,
    write_atomic,
)
from evalkit.data.schema import SLICES, ablation_order
from evalkit.measures.metrics import STANDARD_MEASURES
from evalkit.measures.ties import DEFAULT_TIE_POLICY
from evalkit.reporting.gate_specs import GateSpec
from evalkit.reporting.gates import assess, check_gates, format_gates
from evalkit.reporting.report import Report, report_json
from evalkit.retrieval.presets import DEFAULT_PRESET, PRESETS
from evalkit.runs.ablations import Ablation, ExternalMode, external_ablation
from evalkit.runs.calibration import calibrated_evaluation
from evalkit.runs.cluster import evaluate_on_ray
from evalkit.runs.evaluation import evaluate

if TYPE_CHECKING:
    from evalkit.data.fixture import LoadedFixture
    from evalkit.data.settings import RetrievalSettings
    from evalkit.retrieval.embedding_cache import EmbeddingCache
    from evalkit.retrieval.retriever import Retriever
    from evalkit.runs.calibration import CalibrationOptions
    from evalkit.runs.cluster import ClusterOptions
    from evalkit.runs.evaluation import Evaluation

__all__ = [
    "NO_GATES",
    "Outcome",
    "Request",
    "enforce_gates",
    "evaluate_request",
    "format_outcome",
    "format_settings",
    "format_summary",
    "report_target",
    "run_pipeline",
    "systems_of",
    "write_outcome",
]

NO_GATES = "no gates: none names a system evaluated here"
SUMMARY_COLUMNS = tuple(str(m) for m in STANDARD_MEASURES)
SUMMARY_HEADERS = ("R@1", "R@5", "R@10", "MRR@10", "nDCG@10", "ctxP", "ctxR", "noansFPR", "p50 ms", "p95 ms")


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
class Outcome:
    """The evaluation a :class:`Request` asked for and its report, with the outcome of every gate in it."""

    evaluation: Evaluation
    report: Report


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


def run_pipeline(request: Request) -> Outcome:
    """Evaluate what `request` asks for and assess its gates (nothing is raised for a failed gate here: see
    :func:`enforce_gates`)."""
    evaluation = evaluate_request(request)
    requested = [system.ablation_id for system in request.systems]
    return Outcome(evaluation, assess(evaluation, request.gates, requested=requested))


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


def format_summary(report: Report) -> str:
    """A plain-text table: one row per system and slice (all, then each language that has queries)."""
    width = max([18, *(len(system_id) for system_id in report.ablations)])
    header = f"{'ablation':<{width}} {'slice':<5} " + " ".join(f"{h:>8}" for h in SUMMARY_HEADERS)
    lines = [header, "-" * len(header)]
    for system_id, result in sorted(report.ablations.items(), key=lambda item: ablation_order(item[0])):
        for slice_name in SLICES:
            counts = result.query_counts.get(slice_name)
            if slice_name != "all" and (counts is None or counts.answerable + counts.no_answer == 0):
                continue
            row = result.metrics.get(slice_name, {})
            cells = [_cell(row.get(m)) for m in (*SUMMARY_COLUMNS, "no_answer_fpr")]
            if slice_name == "all":
                latency = result.latency_ms  # count 0: a precomputed run, nothing measured
                cells += [
                    _cell(latency.median_ms if latency.count else None),
                    _cell(latency.p95_ms if latency.count else None),
                ]
            lines.append(f"{system_id:<{width}} {slice_name:<5} " + " ".join(cells))
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return f"{'-':>8}" if value is None else f"{value:8.3f}"


def format_outcome(report: Report) -> str:
    """The summary table, a blank line, then one line per gate (or that no gate applies)."""
    return f"{format_summary(report)}\n\n{format_gates(report.gates) or NO_GATES}"


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
    """Write the report atomically to an already-resolved `target`; nothing when it is None."""
    if target is not None:
        write_atomic(target, report_json(outcome.report))
    return target


def enforce_gates(outcome: Outcome, no_gates: bool = False) -> bool:
    """Raise :class:`~evalkit.reporting.gates.GateFailure` listing every failed gate, unless `no_gates`; True when
    the gates were enforced (the front door says when they were not)."""
    if no_gates:
        return False
    check_gates(outcome.report.gates)
    return True
