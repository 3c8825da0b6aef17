"""``evalkit run``: the ablations and any external systems over a fixture, summarised, written and gated."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from evalkit.app.cli.options import (
    DEFAULT_CACHE_DIR,
    DEFAULT_FIXTURE,
    EXIT_GATE,
    Commands,
    add_gate_arguments,
    add_input_limit,
    add_ties_argument,
    enforce,
    fixture_inputs,
    max_bytes,
    save_report,
)
from evalkit.app.plugins import load_retrievers
from evalkit.common.output import ENV_VAR, refuse_input_overwrite, resolve_output_path
from evalkit.data.fixture import LoadedFixture, load_fixture
from evalkit.data.schema import ablation_order
from evalkit.measures.results import ScoredEvaluation
from evalkit.reporting.gate_specs import GATE_OPTION_HELP, GateThresholds
from evalkit.reporting.gates import collect_gates, refuse_unevaluated
from evalkit.reporting.report import Report
from evalkit.reporting.run_files import trec_run_name, trec_runs, write_trec_files
from evalkit.retrieval.embedding_cache import EmbeddingCache
from evalkit.retrieval.presets import DEFAULT_PRESET, PRESETS, default_settings_note, resolve_settings
from evalkit.runs.ablations import ABLATION_IDS, Ablation, parse_ablations
from evalkit.runs.calibration import calibration_options, format_calibration
from evalkit.runs.cluster import ClusterOptions
from evalkit.runs.pipeline import Request, format_settings, report_target, run_pipeline, systems_of

MAX_RUNS = 10
"""Upper bound of --runs (the determinism check needs 2; more only repeats the latency samples)."""


def run(args: argparse.Namespace) -> int:
    """``evalkit run``: every input checked, then the systems evaluated, the report printed, written and gated."""
    workspace = Path.cwd()
    fixture_dir = Path(args.fixture)
    loaded = load_fixture(fixture_dir, max_bytes(args))
    retrievers = load_retrievers(args.retriever, [Path(path) for path in args.retriever_config])
    external = systems_of((), retrievers)
    systems = (*(parse_ablations(args.ablations) if args.ablations.strip() or not retrievers else ()), *external)
    requested = [system.ablation_id for system in systems]
    gates = collect_gates(
        fixture_dir,
        loaded.fixture,
        thresholds=GateThresholds.from_values(args),
        options=args.gate,
        systems=requested,
        max_bytes=max_bytes(args),
    )
    refuse_unevaluated(gates, "evalkit run")
    cluster = _cluster_options(args)
    calibration = calibration_options(args.calibrate, args.calibrate_seed)
    if calibration is not None and cluster is not None:
        raise ValueError("--calibrate runs in this process; it cannot be combined with --ray")
    if not 1 <= args.runs <= MAX_RUNS:
        raise ValueError(f"--runs must be between 1 and {MAX_RUNS}, got {args.runs}")
    if args.max_failed_queries is not None and args.max_failed_queries < 0:
        raise ValueError(f"--max-failed-queries must be a whole number of at least 0, got {args.max_failed_queries}")
    settings_label, settings = resolve_settings(args.preset, None if args.settings is None else Path(args.settings))
    _check_backends(systems, loaded)
    cache = None if args.no_cache else EmbeddingCache(Path(args.cache_dir))
    # Only now, with every input checked, may the output path's missing folders be created.
    inputs = _run_inputs(args, fixture_dir)
    target = report_target(args.output, workspace, inputs)
    trec_folder = _trec_folder(args.trec_runs, workspace, requested, inputs)
    request = Request(loaded, systems, retrievers, settings, args.runs, args.ties, cache, cluster, calibration, gates)
    outcome = run_pipeline(request)
    if cluster is not None:
        print(f"evalkit: searched {cluster.shards} shard(s) on Ray ({cluster.address})", file=sys.stderr)
    report, evaluation = outcome.report, outcome.evaluated
    print(f"evalkit: fixture {report.fixture_id} {report.fixture_version}, {report.runs} run(s), deterministic")
    print(f"retrieval settings: {settings_label} ({format_settings(evaluation.settings)})")
    note = default_settings_note(report.fixture_id)
    if args.preset is None and args.settings is None and calibration is None and note is not None:
        print(note)
    if evaluation.calibration is not None:
        print(format_calibration(evaluation.calibration))
    print(outcome.summary())
    _note_unknown_chunks(evaluation, retrievers, loaded)
    trec_files = {} if trec_folder is None else trec_runs(evaluation)  # IDs checked before anything is written
    save_report(outcome, target, workspace)
    if trec_folder is not None:
        written = write_trec_files(trec_files, trec_folder)
        print(f"{len(written)} TREC run file(s) written to {trec_folder.relative_to(workspace.resolve())}")
        _note_trec_folder(trec_folder, written, evaluation.calibration is not None)
    if not _failed_queries_within(report, args.max_failed_queries):
        return EXIT_GATE
    return enforce(outcome, args.no_gates)


def _check_backends(systems: Sequence[Ablation], loaded: LoadedFixture) -> None:
    """Raise when an optional backend the systems need (a model's extra, bm25s) is missing: checked before the
    cache is primed, so that a run refused for a missing extra writes no embedding either."""
    from evalkit.retrieval.embeddings import fingerprint, import_backend
    from evalkit.runs.ablations import BASELINE_MODE
    from evalkit.runs.evaluation import make_providers

    for provider in make_providers(systems, loaded).values():
        fingerprint(provider)  # names the model's files and version: raises when its extra is missing
    if any(system.mode == BASELINE_MODE for system in systems):
        import_backend("bm25s", "bm25")


def _trec_folder(requested: str | None, workspace: Path, systems: Sequence[str], inputs: Sequence[Path]) -> Path | None:
    """The workspace-relative folder for --trec-runs, each system's run file in it checked like --output and
    against the run's `inputs` (missing folders are created at write time)."""
    if requested is None:
        return None
    folder = resolve_output_path(requested.rstrip("/") + "/.folder", workspace).parent
    for system in systems:
        name = f"{requested.rstrip('/')}/{trec_run_name(system)}"
        refuse_input_overwrite(resolve_output_path(name, workspace), inputs, name)
    return folder


def _run_inputs(args: argparse.Namespace, fixture: Path) -> list[Path]:
    """The files `evalkit run` reads, which no output may overwrite: the fixture's, ``--settings``, each
    ``--retriever-config`` and the module file of each ``--retriever`` (imported by now)."""
    files = [*fixture_inputs(fixture), *(Path(p) for p in args.retriever_config)]
    files += [] if args.settings is None else [Path(args.settings)]
    for spec in args.retriever:
        origin = getattr(sys.modules.get(spec.partition(":")[0]), "__file__", None)
        files += [Path(origin)] if isinstance(origin, str) else []
    return files


def _note_unknown_chunks(evaluation: ScoredEvaluation, retrievers: Mapping[str, object], loaded: LoadedFixture) -> None:
    """For each retriever of the run, how many distinct chunk IDs it returned that the fixture does not hold (they
    score as not relevant: a retriever answering with document IDs scores 0 everywhere), as a run file's coverage
    line counts them; counts only, no ID."""
    known = {chunk.chunk_id for chunk in loaded.fixture.chunks}
    for system_id in retrievers:
        result = evaluation.ablations.get(system_id)
        unknown = set() if result is None else {c for q in result.results for c in q.chunk_ids} - known
        if unknown:
            print(
                f"note: {system_id} returned {len(unknown)} chunk ID(s) the fixture does not hold, scored as not "
                "relevant (are they chunk IDs, not document IDs?)"
            )


def _note_trec_folder(folder: Path, written: Sequence[Path], calibrated: bool) -> None:
    """What the written TREC files do not say: other run files left in the folder by earlier runs (beside this
    run's, they would be scored as its systems), and that a calibrated run's files hold its evaluation queries
    only (the calibration queries are not in them, so scoring them against the whole fixture counts those 0)."""
    mine = set(written)
    others = sum(1 for p in folder.glob("*.trec") if p not in mine)
    if others:
        print(f"note: {others} other TREC run file(s) in that folder were not written by this run")
    if calibrated:
        print("note: the TREC files hold the evaluation split's queries only, not the calibration queries")


def _failed_queries_within(report: Report, bound: int | None) -> bool:
    """Print every system's failed queries; False when one has more than ``bound``."""
    within = True
    for system_id, result in sorted(report.ablations.items(), key=lambda item: ablation_order(item[0])):
        if result.query_errors:
            kinds = Counter(error.kind for error in result.query_errors)
            by_kind = ", ".join(
                f"{kind} {n}" for kind, n in sorted(kinds.items(), key=lambda item: (-item[1], item[0]))
            )
            print(f"{system_id}: {len(result.query_errors)} query(ies) failed and scored as empty rankings ({by_kind})")
            if bound is not None and len(result.query_errors) > bound:
                print(
                    f"evalkit: {system_id} failed {len(result.query_errors)} queries (> --max-failed-queries {bound})"
                )
                within = False
    return within


def _cluster_options(args: argparse.Namespace) -> ClusterOptions | None:
    """The Ray options of ``--ray``/``--shards``; None runs in this process (``--shards`` alone is refused)."""
    if args.ray is None:
        if args.shards is not None:
            raise ValueError("--shards needs --ray local|ADDRESS")
        return None
    return ClusterOptions(address=args.ray, shards=1 if args.shards is None else args.shards)


def add_parser(commands: Commands) -> None:
    """``evalkit run`` and its options."""
    parser = commands.add_parser("run", help="run the ablations, print the summary and check the gates")
    parser.add_argument("--fixture", default=str(DEFAULT_FIXTURE), help="fixture directory (default: %(default)s)")
    parser.add_argument(
        "--ablations", default=",".join(ABLATION_IDS), help="comma-separated ablation IDs (default: all five)"
    )
    parser.add_argument(
        "--runs", type=int, default=2, help=f"runs compared for determinism, 1 to {MAX_RUNS} (default: %(default)s)"
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--preset",
        default=None,
        choices=sorted(PRESETS),
        help=f"named retrieval settings (default: {DEFAULT_PRESET}; benchmark for real corpora, see README)",
    )
    source.add_argument(
        "--settings", default=None, help="JSON file of retrieval settings, unknown keys refused (default: none)"
    )
    parser.add_argument(
        "--cache-dir",
        default=str(DEFAULT_CACHE_DIR),
        help="on-disk embedding cache, so a rerun embeds nothing (default: %(default)s)",
    )
    parser.add_argument("--no-cache", action="store_true", help="embed without the on-disk cache (default: off)")
    parser.add_argument(
        "--output",
        default=None,
        help=f"write the JSON report to this workspace-relative path (default: ${ENV_VAR}, else nothing)",
    )
    add_gate_arguments(parser)
    parser.add_argument("--gate", action="append", default=[], metavar="GATE", help=GATE_OPTION_HELP)
    parser.add_argument(
        "--no-gates", action="store_true", help="print the gates but do not fail on them (e.g. for another fixture)"
    )
    _add_system_arguments(parser)
    add_input_limit(parser)
    _add_cluster_arguments(parser)
    _add_calibration_arguments(parser)
    parser.set_defaults(handler=run)


def _add_system_arguments(parser: argparse.ArgumentParser) -> None:
    """Options for external retrievers, the tie policy and TREC run files."""
    parser.add_argument(
        "--retriever",
        action="append",
        default=[],
        metavar="MODULE:FACTORY",
        help="your own retriever, 'package.module:factory', run as one more ablation (repeatable); "
        "with --ablations '' it runs alone",
    )
    parser.add_argument(
        "--retriever-config", action="append", default=[], metavar="FILE", help="an HTTP retriever's JSON config"
    )
    parser.add_argument(
        "--max-failed-queries",
        type=int,
        default=None,
        help="exit 1 when an external retriever fails more queries than this (default: no bound)",
    )
    add_ties_argument(parser)
    parser.add_argument("--trec-runs", default=None, metavar="DIR", help="write one TREC run file per ablation here")


def _add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``--ray`` and ``--shards``: the same report, searched by shard actors on Ray."""
    parser.add_argument(
        "--ray",
        default=None,
        metavar="local|ADDRESS",
        help="run on Ray: 'local' starts an instance here, else a cluster address (default: no Ray; evalkit[ray])",
    )
    parser.add_argument(
        "--shards", type=int, default=None, help="with --ray: split the corpus into N shard actors (default: 1)"
    )


def _add_calibration_arguments(parser: argparse.ArgumentParser) -> None:
    """``--calibrate`` and ``--calibrate-seed`` (see evalkit/runs/calibration.py)."""
    parser.add_argument(
        "--calibrate",
        type=float,
        default=None,
        metavar="FRACTION",
        help="choose fusion and abstention floors on this share of the queries (stratified by language and "
        "answerability) and report on the rest only (default: none, every query evaluated with the settings as given)",
    )
    parser.add_argument(
        "--calibrate-seed", type=int, default=None, metavar="N", help="seed of the calibration split (default: 0)"
    )
