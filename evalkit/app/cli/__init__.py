"""The ``evalkit`` command: run the evaluation, validate fixtures, regenerate baselines.

Exit codes: 0 success, 1 a quality gate (or the determinism check) failed, 2 invalid input. Invalid input is
reported as one clear message on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from pydantic import ValidationError

from evalkit.app.cli.score import add_score_arguments, score_qrels
from evalkit.app.plugins import load_http_retriever, load_retriever
from evalkit.app.runner import DEFAULT_NOTEBOOK, parse_value, run_notebook
from evalkit.common.output import (
    ENV_VAR,
    OutputPathError,
    output_path_from_env,
    refuse_input_overwrite,
    resolve_output_path,
    write_atomic,
)
from evalkit.data.collection import CollectionOptions
from evalkit.data.fixture import ALIASES_FILE, FIXTURE_FILE, Fixture, FixtureError, load_fixture
from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES
from evalkit.data.repairs import KIND_ACTIONS, RepairKind, RepairLog, RepairPolicy
from evalkit.data.runs import check_run, read_run
from evalkit.data.schema import SLICES
from evalkit.measures.ties import DEFAULT_TIE_POLICY, TIE_POLICIES
from evalkit.reporting.gates import (
    BASELINES_FILE,
    GATE_OPTION_HELP,
    GATES_FILE,
    GateFailure,
    GateThresholds,
    assess,
    baselines_from_report,
    baselines_json,
    check_baselines_match,
    check_gates,
    collect_gates,
    format_gates,
    load_baselines,
    load_gate_file,
)
from evalkit.reporting.report import Report, build_report, parse_report, report_json
from evalkit.reporting.trec import trec_run_name, trec_runs, write_trec_files
from evalkit.retrieval.embedding_cache import EmbeddingCache
from evalkit.retrieval.embeddings import ProviderUnavailableError
from evalkit.retrieval.presets import DEFAULT_PRESET, PRESETS, resolve_settings
from evalkit.retrieval.retriever import Retriever, RunRetriever
from evalkit.retrieval.service import RetrievalSettings
from evalkit.runs.ablations import ABLATION_IDS, Ablation, ablation_order, external_ablation, parse_ablations
from evalkit.runs.calibration import calibrated_evaluation, calibration_options, format_calibration
from evalkit.runs.cluster import ClusterOptions, evaluate_on_ray
from evalkit.runs.evaluation import DeterminismError, evaluate

if TYPE_CHECKING:
    from evalkit.data.squad import SquadImportOptions

DEFAULT_FIXTURE = Path("fixtures") / "synthetic-bilingual-v1"
DEFAULT_CACHE_DIR = Path(".cache") / "evalkit"
MAX_RUNS = 10
"""Upper bound of --runs (the determinism check needs 2; more only repeats the latency samples)."""
EXIT_OK, EXIT_GATE, EXIT_INPUT = 0, 1, 2
EXIT_SIGINT, EXIT_SIGTERM = 130, 143
CHECK_FAILURES = frozenset({"GateFailure", "DeterminismError"})
"""Errors of a notebook run that mean a check failed (exit 1); any other error is bad input (exit 2)."""
SUMMARY_COLUMNS = ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "context_precision", "context_recall")
SUMMARY_HEADERS = ("R@1", "R@5", "R@10", "MRR@10", "nDCG@10", "ctxP", "ctxR", "noansFPR", "p50 ms", "p95 ms")


def format_summary(report: Report) -> str:
    """A plain-text table: one row per ablation and slice (all, then each language that has queries)."""
    width = max([18, *(len(ablation_id) for ablation_id in report.ablations)])
    header = f"{'ablation':<{width}} {'slice':<5} " + " ".join(f"{h:>8}" for h in SUMMARY_HEADERS)
    lines = [header, "-" * len(header)]
    for ablation_id, result in sorted(report.ablations.items(), key=lambda item: ablation_order(item[0])):
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
            lines.append(f"{ablation_id:<{width}} {slice_name:<5} " + " ".join(cells))
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return f"{'-':>8}" if value is None else f"{value:8.3f}"


def _max_bytes(args: argparse.Namespace) -> int:
    """The input size limit in bytes from ``--max-input-mb`` (the default when the command has no such flag)."""
    megabytes = getattr(args, "max_input_mb", None)
    if megabytes is None:
        return DEFAULT_MAX_INPUT_BYTES
    if megabytes <= 0:
        raise ValueError(f"--max-input-mb must be positive, got {megabytes}")
    return int(megabytes * 2**20)


def _fixture_inputs(fixture: Path) -> list[Path]:
    """The files a run over `fixture` (a folder or its fixture.json) reads, which no output may overwrite."""
    folder = fixture if fixture.is_dir() else fixture.parent
    files = [fixture / FIXTURE_FILE] if fixture.is_dir() else [fixture]
    return [*files, folder / ALIASES_FILE, folder / BASELINES_FILE, folder / GATES_FILE]


def _run(args: argparse.Namespace) -> int:
    workspace = Path.cwd()
    fixture_dir = Path(args.fixture)
    loaded = load_fixture(fixture_dir, _max_bytes(args))
    external, systems = _external_systems(args)
    ablations = (*(parse_ablations(args.ablations) if args.ablations.strip() or not systems else ()), *external)
    requested = [a.ablation_id for a in ablations]
    gates = collect_gates(
        fixture_dir if fixture_dir.is_dir() else None,
        loaded.fixture,
        thresholds=GateThresholds.from_values(args),
        options=args.gate,
        systems=requested,
        max_bytes=_max_bytes(args),
    )
    cluster = _cluster_options(args)
    calibration = calibration_options(args.calibrate, args.calibrate_seed)
    if calibration is not None and cluster is not None:
        raise ValueError("--calibrate runs in this process; it cannot be combined with --ray")
    if not 1 <= args.runs <= MAX_RUNS:
        raise ValueError(f"--runs must be between 1 and {MAX_RUNS}, got {args.runs}")
    settings_label, settings = resolve_settings(args.preset, None if args.settings is None else Path(args.settings))
    # The optional backends the ablations need (a model's extra, bm25s) are checked before the cache is primed, so
    # a run refused for a missing extra writes no embedding either.
    from evalkit.retrieval.embeddings import fingerprint, import_backend
    from evalkit.runs.ablations import BASELINE_MODE
    from evalkit.runs.evaluation import make_providers

    for provider in make_providers(ablations, loaded).values():
        fingerprint(provider)  # names the model's files and version: raises when its extra is missing
    if any(a.mode == BASELINE_MODE for a in ablations):
        import_backend("bm25s", "bm25")
    cache = None if args.no_cache else EmbeddingCache(Path(args.cache_dir))
    # Only now, with every input checked, may the output path's missing folders be created.
    target = (
        resolve_output_path(args.output, workspace)
        if args.output is not None
        else output_path_from_env(os.environ, workspace)
    )
    inputs = _run_inputs(args, fixture_dir)
    if target is not None:
        refuse_input_overwrite(target, inputs, args.output or os.environ.get(ENV_VAR))
    trec_folder = _trec_folder(args.trec_runs, workspace, requested, inputs)
    if calibration is not None:
        evaluation = calibrated_evaluation(
            loaded, ablations, settings, calibration, args.runs, cache, systems, args.ties
        )
    elif cluster is None:
        evaluation = evaluate(loaded, ablations, settings, runs=args.runs, cache=cache, systems=systems, ties=args.ties)
    else:
        evaluation = evaluate_on_ray(loaded, ablations, cluster, settings, args.runs, cache, systems, args.ties)
        print(f"evalkit: searched {cluster.shards} shard(s) on Ray ({cluster.address})", file=sys.stderr)
    report = assess(evaluation, gates, requested=requested)
    print(f"evalkit: fixture {report.fixture_id} {report.fixture_version}, {report.runs} run(s), deterministic")
    print(f"retrieval settings: {settings_label} ({format_settings(evaluation.settings)})")
    if evaluation.calibration is not None:
        print(format_calibration(evaluation.calibration))
    print(format_summary(report))
    print()
    print(format_gates(report.gates) or "no gates: none names a system evaluated here")
    trec_files = {} if trec_folder is None else trec_runs(evaluation)  # IDs checked before anything is written
    if target is not None:
        write_atomic(target, report_json(report))
        print(f"report written to {target.relative_to(workspace.resolve())}")
    if trec_folder is not None:
        written = write_trec_files(trec_files, trec_folder)
        print(f"{len(written)} TREC run file(s) written to {trec_folder.relative_to(workspace.resolve())}")
    if not _failed_queries_within(report, args.max_failed_queries):
        return EXIT_GATE
    if args.no_gates:
        print("gates not enforced (--no-gates)")
        return EXIT_OK
    check_gates(report.gates)
    return EXIT_OK


def format_settings(settings: RetrievalSettings) -> str:
    """The settings in one line, nested fields dotted (``reranker.min_score=0.3``)."""
    flat: dict[str, object] = {}
    for name, value in settings.model_dump(mode="json").items():
        if isinstance(value, dict):
            flat.update({f"{name}.{inner}": v for inner, v in value.items()})
        else:
            flat[name] = value
    return ", ".join(f"{name}={value}" for name, value in flat.items())


def _validate(args: argparse.Namespace) -> int:
    location = Path(args.path)
    loaded = load_fixture(location, _max_bytes(args))
    fixture = loaded.fixture
    # Read baselines.json and gates.json too, so that a folder validate accepts is not refused by run.
    folder = location if location.is_dir() else location.parent
    baselines = load_baselines(folder, _max_bytes(args))
    if baselines is not None:
        check_baselines_match(baselines, fixture.fixture_id, fixture.fixture_version)
    gate_file = load_gate_file(folder, _max_bytes(args))
    answerable = sum(1 for q in fixture.queries if q.answerable)
    print(
        f"fixture {fixture.fixture_id} {fixture.fixture_version} is valid: {len(fixture.documents)} documents, "
        f"{len(fixture.chunks)} chunks, {len(fixture.queries)} queries ({answerable} answerable, "
        f"{len(fixture.queries) - answerable} no-answer), {len(loaded.aliases.groups)} alias groups"
        + ("" if baselines is None else f", {BASELINES_FILE} matches")
        + ("" if gate_file is None else f", {GATES_FILE} holds {len(gate_file.gates)} gate(s)")
    )
    return EXIT_OK


def _baseline(args: argparse.Namespace) -> int:
    fixture_dir = Path(args.fixture)
    evaluation = evaluate(load_fixture(fixture_dir, _max_bytes(args)), parse_ablations(",".join(ABLATION_IDS)), runs=2)
    data = baselines_json(baselines_from_report(build_report(evaluation)))
    if args.write:
        write_atomic(fixture_dir / BASELINES_FILE, data)
        print(f"baselines written to {fixture_dir / BASELINES_FILE}: review the diff before committing")
    else:
        sys.stdout.write(data.decode("utf-8"))
    return EXIT_OK


def _notebook(args: argparse.Namespace) -> int:
    root = Path.cwd()
    parameters = {name: parse_value(value) for name, value in args.parameter}
    run = run_notebook(root, parameters, notebook=Path(args.notebook), run_id=args.run_id, replace=args.replace_run)
    if run.report is not None:
        report = parse_report(run.report.read_bytes())
        print(format_summary(report))
        print()
        print(format_gates(report.gates))
    if run.summary is not None:
        from evalkit.runs.real_data import format_benchmark, load_summary

        print(format_benchmark(load_summary(run.summary)))
    print(f"\nfiles in {run.run_dir.relative_to(root.resolve())}:")
    for path in sorted(p for p in run.run_dir.rglob("*") if p.is_file()):
        print(f"  {path.relative_to(root.resolve())}")
    if run.error_name is None:
        return EXIT_OK
    print(f"evalkit: notebook failed with {run.error_name}: {run.error_message}", file=sys.stderr)
    return EXIT_GATE if run.error_name in CHECK_FAILURES else EXIT_INPUT


def _repair_log(args: argparse.Namespace) -> RepairLog:
    """The repair log of an import, with the policy of its ``--strict`` and ``--on-<kind>`` flags."""
    chosen = {kind: getattr(args, f"on_{kind}") for kind in KIND_ACTIONS if hasattr(args, f"on_{kind}")}
    if args.strict:
        return RepairLog(RepairPolicy.strict())
    return RepairLog(RepairPolicy.from_choices({k: v for k, v in chosen.items() if v is not None}))


def _import_outputs(output_dir: str, inputs: Sequence[Path]) -> tuple[Path, Path]:
    """The fixture and ``import_summary.json`` paths an import writes into the workspace-relative `output_dir`,
    checked before anything is read: refused when unsafe or when either is one of the import's `inputs`."""
    from evalkit.data.repairs import SUMMARY_FILE

    targets = []
    for name in (FIXTURE_FILE, SUMMARY_FILE):
        requested = f"{output_dir.rstrip('/')}/{name}"
        target = resolve_output_path(requested, Path.cwd())
        refuse_input_overwrite(target, inputs, requested)
        targets.append(target)
    return targets[0], targets[1]


def _write_import(fixture: Fixture, log: RepairLog, source_format: str, outputs: tuple[Path, Path]) -> int:
    """Write the fixture and its import summary to `outputs` (from :func:`_import_outputs`); print both."""
    from evalkit.data.repairs import ImportSummary, format_import_summary, write_import_summary
    from evalkit.data.squad import fixture_json

    workspace = Path.cwd().resolve()
    target, summary_path = outputs
    answerable = sum(1 for q in fixture.queries if q.answerable)
    summary = ImportSummary.model_validate(
        {
            "source_format": source_format,
            "documents": len(fixture.documents),
            "chunks": len(fixture.chunks),
            "queries": len(fixture.queries),
            "answerable": answerable,
            "repairs": log.repairs(),
        }
    )
    write_atomic(target, fixture_json(fixture))
    write_import_summary(summary, summary_path.parent)
    no_answer = len(fixture.queries) - answerable
    print(
        f"wrote {target.relative_to(workspace)}: {len(fixture.documents)} documents, "
        f"{len(fixture.chunks)} chunks, {answerable} answerable and {no_answer} no-answer queries"
    )
    print(format_import_summary(summary))
    print(f"summary written to {summary_path.relative_to(workspace)}")
    return EXIT_OK


def _add_policy_flags(parser: argparse.ArgumentParser, kinds: Sequence[RepairKind]) -> None:
    """``--strict``, ``--on-<kind> ACTION`` for each of `kinds` and ``--allow-links-in-text``."""
    parser.add_argument("--strict", action="store_true", help="fail on every kind of problem (no repairs or skips)")
    for kind in kinds:
        actions, meaning = KIND_ACTIONS[kind]
        parser.add_argument(
            "--on-" + kind.replace("_", "-"),
            choices=actions,
            default=None,
            help=f"{meaning} (default: {actions[0]})",
        )
    parser.add_argument(
        "--allow-links-in-text",
        action="store_true",
        help="keep links, host names and paths in chunk and query text (credentials are always refused; "
        "default: refuse them)",
    )


def _import_squad(args: argparse.Namespace) -> int:
    from evalkit.data.squad import import_cross_lingual, import_squad, read_squad

    options = _squad_options(
        fixture_id=args.fixture_id,
        fixture_version=args.fixture_version,
        language=args.language,
        chunking=args.chunking,
        max_sentences=args.max_sentences,
        held_out_fraction=args.held_out_fraction,
        seed=args.seed,
        max_articles=args.max_articles,
        license=args.license,
        attribution=args.attribution,
        private_paragraphs=args.private_paragraphs,
        allow_links_in_text=args.allow_links_in_text,
    )
    if args.repair_window < 0:
        raise ValueError(f"--repair-window must be at least 0, got {args.repair_window}")
    inputs = [Path(args.input)] + ([] if args.questions is None else [Path(args.questions)])
    outputs = _import_outputs(args.output_dir, inputs)
    log = _repair_log(args)
    corpus = read_squad(Path(args.input), log, args.repair_window, _max_bytes(args))
    if args.questions is None:
        fixture = import_squad(corpus, options, log)
    elif args.question_language is None:
        raise ValueError("--questions needs --question-language")
    else:
        questions = read_squad(Path(args.questions), log, args.repair_window, _max_bytes(args))
        fixture = import_cross_lingual(questions, corpus, args.question_language, options, log)
    return _write_import(fixture, log, "squad", outputs)


def _squad_options(**values: object) -> SquadImportOptions:
    """Import options validated with each problem naming its ``--option`` (no raw pydantic dump)."""
    from evalkit.data.squad import SquadImportOptions

    try:
        return SquadImportOptions.model_validate(values)
    except ValidationError as exc:
        problems = [
            f"--{str(item['loc'][0]).replace('_', '-') if item['loc'] else 'options'}: {item['msg']}"
            for item in exc.errors(include_url=False)
        ]
        raise ValueError("invalid import option(s): " + "; ".join(problems)) from None


def _add_input_limit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-input-mb",
        type=float,
        default=None,
        help=f"refuse input files larger than this many MiB (default: {DEFAULT_MAX_INPUT_BYTES // 2**20})",
    )


def _add_import_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    importer = commands.add_parser("import", help="import a dataset into a fixture")
    formats = importer.add_subparsers(dest="format", required=True)
    squad = formats.add_parser("squad", help="a SQuAD v1.1/v2.0 file (XQuAD included) into a fixture directory")
    squad.add_argument("input", help="SQuAD JSON file: the corpus (and the questions, unless --questions)")
    squad.add_argument("--output-dir", required=True, help="workspace-relative fixture directory to write")
    squad.add_argument("--fixture-id", required=True, help="ID of the new fixture")
    squad.add_argument("--fixture-version", default="1.0.0", help="version of the new fixture (default: %(default)s)")
    squad.add_argument("--language", required=True, choices=["en", "zh"], help="language of the corpus file")
    squad.add_argument("--questions", default=None, help="cross-lingual: take the questions from this parallel file")
    squad.add_argument("--question-language", choices=["en", "zh"], help="language of --questions")
    squad.add_argument("--chunking", choices=["paragraph", "sentence"], default="paragraph", help="chunk unit")
    squad.add_argument("--max-sentences", type=int, default=3, help="sentence chunking: sentences per chunk")
    squad.add_argument(
        "--held-out-fraction", type=float, default=0.1, help="gold paragraphs removed; their questions get no answer"
    )
    squad.add_argument("--seed", type=int, default=0, help="seed of the held-out choice (default: %(default)s)")
    squad.add_argument("--max-articles", type=int, default=None, help="first N articles only")
    squad.add_argument("--license", required=True, help="SPDX licence of the source, e.g. CC-BY-SA-4.0")
    squad.add_argument("--attribution", required=True, help="source and attribution, carried into the fixture")
    squad.add_argument(
        "--repair-window",
        type=int,
        default=8,
        help="an answer found this many characters from its offset is moved there (default: %(default)s)",
    )
    squad.add_argument(
        "--private-paragraphs",
        choices=["error", "hold_out"],
        default="error",
        help="a paragraph the privacy rules refuse: fail, or remove it like a held-out one (default: %(default)s)",
    )
    _add_policy_flags(
        squad,
        ["unknown_key", "answer_offset", "answer_missing", "question_without_answer", "blank_question", "blank_title"],
    )
    _add_input_limit(squad)
    squad.set_defaults(handler=_import_squad)
    _add_collection_import_parsers(formats)


_COLLECTION_KINDS: list[RepairKind] = [
    "unknown_key",
    "blank_text",
    "blank_title",
    "duplicate_id",
    "id_rewritten",
    "unknown_reference",
    "non_positive_grade",
    "grade_above_3",
    "missing_spans",
]


def _collection_options(args: argparse.Namespace) -> CollectionOptions:
    return CollectionOptions(
        fixture_id=args.fixture_id,
        fixture_version=args.fixture_version,
        license=args.license,
        attribution=args.attribution,
        language=args.language,
        unjudged_queries=args.unjudged_queries,
        allow_links_in_text=args.allow_links_in_text,
    )


def _import_beir(args: argparse.Namespace) -> int:
    from evalkit.data.beir import CORPUS_FILE, QUERIES_FILE, read_beir

    root = Path(args.input)
    outputs = _import_outputs(
        args.output_dir, [root / CORPUS_FILE, root / QUERIES_FILE, root / "qrels" / f"{args.split}.tsv"]
    )
    log = _repair_log(args)
    fixture = read_beir(root, args.split, _collection_options(args), log, _max_bytes(args))
    return _write_import(fixture, log, "beir", outputs)


def _import_trec(args: argparse.Namespace) -> int:
    from evalkit.data.trec import read_trec

    qrels, topics, corpus = Path(args.qrels), Path(args.topics), Path(args.corpus)
    outputs = _import_outputs(args.output_dir, [qrels, topics, corpus])
    log = _repair_log(args)
    fixture = read_trec(qrels, topics, corpus, _collection_options(args), log, _max_bytes(args))
    return _write_import(fixture, log, "trec", outputs)


def _add_collection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-dir", required=True, help="workspace-relative fixture directory to write")
    parser.add_argument("--fixture-id", required=True, help="ID of the new fixture")
    parser.add_argument("--fixture-version", default="1.0.0", help="version of the new fixture (default: %(default)s)")
    parser.add_argument("--license", required=True, help="SPDX licence of the source, e.g. CC-BY-SA-4.0")
    parser.add_argument("--attribution", required=True, help="source and attribution, carried into the fixture")
    parser.add_argument(
        "--language",
        choices=["en", "zh", "auto"],
        default="auto",
        help="language of records without metadata.language; auto: per record, zh when it has Han characters and "
        "at least two per Latin word (default: %(default)s)",
    )
    parser.add_argument(
        "--unjudged-queries",
        choices=["no-answer", "skip"],
        default="no-answer",
        help="a query without any qrel becomes a no-answer query, or is left out (default: %(default)s)",
    )
    _add_policy_flags(parser, _COLLECTION_KINDS)


def _add_collection_import_parsers(formats: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    beir = formats.add_parser("beir", help="a BEIR directory (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    beir.add_argument("input", help="the BEIR directory")
    beir.add_argument("--split", default="test", help="qrels/<split>.tsv to read (default: %(default)s)")
    _add_collection_flags(beir)
    _add_input_limit(beir)
    beir.set_defaults(handler=_import_beir)
    trec = formats.add_parser("trec", help="TREC qrels + topics (TSV or JSONL) + a JSONL corpus")
    trec.add_argument("--qrels", required=True, help="TREC qrels file: query-id iteration doc-id relevance")
    trec.add_argument("--topics", required=True, help="topics: .tsv (query-id<TAB>text) or JSONL")
    trec.add_argument("--corpus", required=True, help="JSONL corpus: _id, title, text, metadata")
    _add_collection_flags(trec)
    _add_input_limit(trec)
    trec.set_defaults(handler=_import_trec)


def _export(args: argparse.Namespace) -> int:
    from evalkit.data.beir import beir_files
    from evalkit.data.trec import trec_files

    fixture = load_fixture(Path(args.fixture)).fixture
    if args.format == "beir":
        files = beir_files(fixture, args.split)
    else:
        files = trec_files(fixture, args.topics_format, args.gains)
    workspace = Path.cwd()
    inputs = _fixture_inputs(Path(args.fixture))
    targets = {}
    for name, data in files.items():
        requested = f"{args.output_dir.rstrip('/')}/{name}"
        target = resolve_output_path(requested, workspace)
        refuse_input_overwrite(target, inputs, requested)
        targets[target] = data
    for target, data in targets.items():
        write_atomic(target, data)
        print(f"wrote {target.relative_to(workspace.resolve())}")
    return EXIT_OK


def _add_export_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    exporter = commands.add_parser("export", help="write a fixture in a format other IR tools read")
    formats = exporter.add_subparsers(dest="format", required=True)
    beir = formats.add_parser("beir", help="corpus.jsonl, queries.jsonl and qrels/<split>.tsv")
    beir.add_argument("--split", default="test", help="name of the qrels file (default: %(default)s)")
    trec = formats.add_parser("trec", help="corpus.jsonl, topics.jsonl or topics.tsv and qrels.txt")
    trec.add_argument(
        "--topics-format",
        choices=["jsonl", "tsv"],
        default="jsonl",
        help="tsv loses languages, tags and spans (default: %(default)s)",
    )
    _add_gains_argument(trec)
    for parser in (beir, trec):
        parser.add_argument("fixture", help="fixture directory or fixture.json")
        parser.add_argument("--output-dir", required=True, help="workspace-relative directory to write")
        parser.set_defaults(handler=_export)


def _add_gains_argument(parser: argparse.ArgumentParser) -> None:
    from evalkit.data.trec import DEFAULT_QRELS_GAINS, QRELS_GAINS

    parser.add_argument(
        "--gains",
        choices=sorted(QRELS_GAINS),
        default=DEFAULT_QRELS_GAINS,
        help="relevance written in qrels.txt: raw writes each grade as it is ('evalkit import trec' reads it back "
        "into the same judgments; trec_eval's ndcg_cut is then linear-gain nDCG); exponential writes 2^g - 1 for "
        "grade g >= 1 (0 otherwise), so that trec_eval's ndcg_cut_10 reproduces evalkit's ndcg@10 "
        "(default: %(default)s)",
    )


def _external_systems(args: argparse.Namespace) -> tuple[tuple[Ablation, ...], dict[str, Retriever]]:
    """The retrievers named by --retriever and --retriever-config, as external ablations."""
    loaded = [load_retriever(spec) for spec in args.retriever]
    loaded += [load_http_retriever(Path(path)) for path in args.retriever_config]
    systems = dict(loaded)
    if len(systems) != len(loaded):
        raise ValueError(f"external retrievers share an ID: {', '.join(sorted(a for a, _ in loaded))}")
    return tuple(external_ablation(a, "retriever") for a in systems), systems


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
    files = [*_fixture_inputs(fixture), *(Path(p) for p in args.retriever_config)]
    files += [] if args.settings is None else [Path(args.settings)]
    for spec in args.retriever:
        origin = getattr(sys.modules.get(spec.partition(":")[0]), "__file__", None)
        files += [Path(origin)] if isinstance(origin, str) else []
    return files


def _failed_queries_within(report: Report, bound: int | None) -> bool:
    """Print every ablation's failed queries; False when one has more than ``bound``."""
    within = True
    for ablation_id, result in sorted(report.ablations.items(), key=lambda item: ablation_order(item[0])):
        if result.query_errors:
            print(f"{ablation_id}: {len(result.query_errors)} query(ies) failed and scored as empty rankings")
            if bound is not None and len(result.query_errors) > bound:
                print(
                    f"evalkit: {ablation_id} failed {len(result.query_errors)} queries (> --max-failed-queries {bound})"
                )
                within = False
    return within


def _add_system_arguments(run: argparse.ArgumentParser) -> None:
    """`evalkit run`'s options for external retrievers, the tie policy and TREC run files."""
    run.add_argument(
        "--retriever",
        action="append",
        default=[],
        metavar="MODULE:FACTORY",
        help="your own retriever, 'package.module:factory', run as one more ablation (repeatable); "
        "with --ablations '' it runs alone",
    )
    run.add_argument(
        "--retriever-config", action="append", default=[], metavar="FILE", help="an HTTP retriever's JSON config"
    )
    run.add_argument(
        "--max-failed-queries",
        type=int,
        default=None,
        help="exit 1 when an external retriever fails more queries than this (default: no bound)",
    )
    _add_ties_argument(run)
    run.add_argument("--trec-runs", default=None, metavar="DIR", help="write one TREC run file per ablation here")


def _add_ties_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ties",
        choices=list(TIE_POLICIES),
        default=DEFAULT_TIE_POLICY,
        help="tie policy: evalkit (score desc, chunk ID asc) or trec_eval (float32 score desc, ID desc)",
    )


def _score(args: argparse.Namespace) -> int:
    """``evalkit score``: against qrels alone (the scoring core, no corpus) or against a fixture."""
    if args.qrels is not None:
        if args.fixture is not None:
            raise ValueError("give --qrels or --fixture, not both")
        return score_qrels(args)
    if args.topics is not None or args.measures is not None or args.format != "table" or args.per_query:
        raise ValueError("--topics, --measures, --format and --per-query go with --qrels")
    if args.floor is not None:
        raise ValueError("--floor goes with --qrels")
    return _score_fixture(args)


def _score_fixture(args: argparse.Namespace) -> int:
    """``evalkit score --fixture``: the runs as external systems of the fixture (context measures, gates)."""
    workspace = Path.cwd()
    args.fixture = args.fixture or str(DEFAULT_FIXTURE)
    fixture_dir = Path(args.fixture)
    loaded = load_fixture(fixture_dir)
    fixture = loaded.fixture
    systems: dict[str, Retriever] = {}
    for path in (Path(p) for p in args.run):
        run = read_run(path)
        coverage = check_run(run, (q.query_id for q in fixture.queries), (c.chunk_id for c in fixture.chunks))
        if run.name in systems:
            raise ValueError(f"run ID {run.name!r} of {path.name} is used by another run; rename the file or tag")
        counts = (
            ("lines", run.lines),
            ("missing_queries", len(coverage.missing_queries)),
            ("unknown_chunks", len(coverage.unknown_chunks)),
            ("duplicates", coverage.duplicates),
        )
        systems[run.name] = RunRetriever(run, hashlib.sha256(path.read_bytes()).hexdigest(), counts)
        print(f"run {run.name} ({path.name}): {coverage.describe()}")
    ablations = tuple(external_ablation(name, "run") for name in systems)
    gates = collect_gates(
        fixture_dir if fixture_dir.is_dir() else None,
        fixture,
        thresholds=GateThresholds.from_values(args),
        options=args.gate,
        systems=set(systems),
    )
    target = (
        resolve_output_path(args.output, workspace)
        if args.output is not None
        else output_path_from_env(os.environ, workspace)
    )
    if target is not None:
        refuse_input_overwrite(
            target,
            [*_fixture_inputs(fixture_dir), *(Path(p) for p in args.run)],
            args.output or os.environ.get(ENV_VAR),
        )
    evaluation = evaluate(loaded, ablations, runs=1, systems=systems, ties=args.ties)
    report = assess(evaluation, gates, requested=set(systems))
    print(format_summary(report))
    return _finish_gates(report, target, workspace, args.no_gates)


def _finish_gates(report: Report, target: Path | None, workspace: Path, no_gates: bool) -> int:
    """Print the gates, write the report, then enforce the gates (unless ``--no-gates``)."""
    print()
    print(format_gates(report.gates) if report.gates else "no gates: none names a system evaluated here")
    if target is not None:
        write_atomic(target, report_json(report))
        print(f"report written to {target.relative_to(workspace.resolve())}")
    if no_gates:
        print("gates not enforced (--no-gates)")
        return EXIT_OK
    check_gates(report.gates)
    return EXIT_OK


def _add_score_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    score = commands.add_parser(
        "score", help="score run files (TREC or JSONL) against qrels (no corpus needed) or against a fixture"
    )
    score.add_argument(
        "--fixture",
        default=None,
        help=f"fixture directory, for context measures and the fixture's gates (default: {DEFAULT_FIXTURE} "
        "when --qrels is not given)",
    )
    score.add_argument(
        "--run", action="append", required=True, help="run file: .jsonl is JSONL, anything else TREC (repeatable)"
    )
    _add_ties_argument(score)
    add_score_arguments(score, _add_ties_argument)
    score.add_argument("--output", default=None, help=f"workspace-relative JSON report path (default: ${ENV_VAR})")
    _add_gate_arguments(score)
    score.add_argument("--gate", action="append", default=[], metavar="GATE", help=GATE_OPTION_HELP)
    score.add_argument("--no-gates", action="store_true", help="print the gates but do not fail on them")
    score.set_defaults(handler=_score)


def _compare(args: argparse.Namespace) -> int:
    from evalkit.data.inputs import InputError, read_input_bytes
    from evalkit.reporting.comparison import (
        Comparison,
        PairwiseComparison,
        compare_many,
        compare_reports,
        comparison_json,
    )
    from evalkit.reporting.comparison_views import format_comparison, format_pairwise, pairwise_table
    from evalkit.reporting.regression import check_regressions, find_regressions

    names: list[str] = args.reports
    if len(names) < 2:
        raise ValueError(f"compare needs two or more reports, got {len(names)}")
    stems = [Path(n).stem for n in names]
    labels = args.label or (stems if len(set(stems)) == len(stems) else names)
    if len(labels) != len(names):
        raise ValueError(f"give --label once per report: {len(names)} reports, {len(labels)} labels")
    measures = [m.strip() for m in args.gate_measures.split(",") if m.strip()] if args.gate_measures else None
    reports = []
    for i, name in enumerate(names):
        side = ("base" if i == 0 else "head") if len(names) == 2 else f"report {i + 1}"
        try:
            reports.append(parse_report(read_input_bytes(Path(name), _max_bytes(args))))
        except InputError as exc:
            raise ValueError(f"{side} report {exc}") from None
        except ValueError as exc:
            raise ValueError(f"{side} report {name}: {exc}") from None
    # Two reports keep their comparison (table and JSON); more are compared pair by pair in one family.
    comparison: Comparison | PairwiseComparison = (
        compare_reports(reports[0], reports[1], measures, args.alpha, args.max_drop)
        if len(reports) == 2
        else compare_many(reports, labels, measures, args.alpha, args.max_drop)
    )
    verdict = find_regressions(comparison)
    if args.format != "text":
        many = comparison if isinstance(comparison, PairwiseComparison) else None
        text = pairwise_table(many or compare_many(reports, labels, measures, args.alpha, args.max_drop), args.format)
    elif isinstance(comparison, PairwiseComparison):
        text = f"{format_pairwise(comparison)}\n\n{verdict.describe()}\n"
    else:
        text = f"{format_comparison(comparison)}\n\n{verdict.describe()}\n"
    # Only now, with every input checked, may the output path's missing folders be created.
    target = resolve_output_path(args.output, Path.cwd()) if args.output is not None else None
    if target is not None:
        refuse_input_overwrite(target, [Path(n) for n in names], args.output)
    print(text, end="")
    if target is not None:
        write_atomic(target, comparison_json(comparison))
        print(f"comparison written to {target.relative_to(Path.cwd().resolve())}")
    if args.fail_on_regression or args.require_power:
        check_regressions(verdict, args.require_power)
    return EXIT_OK


def _add_compare_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compare = commands.add_parser(
        "compare",
        help="compare two or more reports query by query: paired differences, intervals, tests, regression gate",
    )
    compare.add_argument(
        "reports",
        nargs="+",
        metavar="REPORT",
        help="reports (JSON written by `evalkit run --output`) over the same queries and judgments: the first is the "
        "base, each other a head; with three or more, each later report is compared with each earlier one",
    )
    compare.add_argument(
        "--label",
        action="append",
        default=None,
        metavar="NAME",
        help="name of a report in the tables, once per report in order (default: the file name stems)",
    )
    compare.add_argument(
        "--format",
        choices=("text", "markdown", "latex"),
        default="text",
        help="text: the full table and the gate (default); markdown or latex: a paper table of the gated measures",
    )
    compare.add_argument("--output", default=None, help="write the comparison as JSON to this workspace-relative path")
    compare.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a gated row (measure x ablation x slice: all, en, zh) of a head against the first report "
        "dropped by more than --max-drop with a Holm-adjusted one-sided p < --alpha",
    )
    compare.add_argument(
        "--require-power",
        action="store_true",
        help="exit 1 when a gated row is underpowered: its minimum detectable effect exceeds --max-drop, or too few "
        "queries differ for the test to reach its alpha (implies --fail-on-regression)",
    )
    compare.add_argument("--alpha", type=float, default=0.05, help="significance level (default: %(default)s)")
    compare.add_argument(
        "--max-drop", type=float, default=0.01, help="tolerated drop of a measure's mean (default: %(default)s)"
    )
    compare.add_argument(
        "--gate-measures",
        default=None,
        help="comma-separated measures the gate checks (default: ndcg@10,recall@10); the others are exploratory",
    )
    _add_input_limit(compare)
    compare.set_defaults(handler=_compare)


def _add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    """One ``--<threshold>`` option per seed gate threshold; unset, the fixture's gates.json entry holds."""
    for name, field in GateThresholds.model_fields.items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=float,
            default=None,
            help=f"{field.description}: replaces the {GATES_FILE} entry or adds it (default: the entry's bound)",
        )


def _cluster_options(args: argparse.Namespace) -> ClusterOptions | None:
    """The Ray options of ``--ray``/``--shards``; None runs in this process (``--shards`` alone is refused)."""
    if args.ray is None:
        if args.shards is not None:
            raise ValueError("--shards needs --ray local|ADDRESS")
        return None
    return ClusterOptions(address=args.ray, shards=1 if args.shards is None else args.shards)


def _add_cluster_arguments(run: argparse.ArgumentParser) -> None:
    """``--ray`` and ``--shards`` of ``evalkit run``: the same report, searched by shard actors on Ray."""
    run.add_argument(
        "--ray",
        default=None,
        metavar="local|ADDRESS",
        help="run on Ray: 'local' starts an instance here, else a cluster address (default: no Ray; evalkit[ray])",
    )
    run.add_argument(
        "--shards", type=int, default=None, help="with --ray: split the corpus into N shard actors (default: 1)"
    )


def _add_calibration_arguments(run: argparse.ArgumentParser) -> None:
    """``--calibrate`` and ``--calibrate-seed`` of ``evalkit run`` (see evalkit/runs/calibration.py)."""
    run.add_argument(
        "--calibrate",
        type=float,
        default=None,
        metavar="FRACTION",
        help="choose fusion and abstention floors on this share of the queries (stratified by language and "
        "answerability) and report on the rest only (default: none, every query evaluated with the settings as given)",
    )
    run.add_argument(
        "--calibrate-seed", type=int, default=None, metavar="N", help="seed of the calibration split (default: 0)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the evalkit command."""
    parser = argparse.ArgumentParser(prog="evalkit", description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the ablations, print the summary and check the gates")
    run.add_argument("--fixture", default=str(DEFAULT_FIXTURE), help="fixture directory (default: %(default)s)")
    run.add_argument(
        "--ablations", default=",".join(ABLATION_IDS), help="comma-separated ablation IDs (default: all five)"
    )
    run.add_argument(
        "--runs", type=int, default=2, help=f"runs compared for determinism, 1 to {MAX_RUNS} (default: %(default)s)"
    )
    source = run.add_mutually_exclusive_group()
    source.add_argument(
        "--preset",
        default=None,
        choices=sorted(PRESETS),
        help=f"named retrieval settings (default: {DEFAULT_PRESET}; benchmark for real corpora, see README)",
    )
    source.add_argument(
        "--settings", default=None, help="JSON file of retrieval settings, unknown keys refused (default: none)"
    )
    run.add_argument(
        "--cache-dir",
        default=str(DEFAULT_CACHE_DIR),
        help="on-disk embedding cache, so a rerun embeds nothing (default: %(default)s)",
    )
    run.add_argument("--no-cache", action="store_true", help="embed without the on-disk cache (default: off)")
    run.add_argument(
        "--output",
        default=None,
        help=f"write the JSON report to this workspace-relative path (default: ${ENV_VAR}, else nothing)",
    )
    _add_gate_arguments(run)
    run.add_argument("--gate", action="append", default=[], metavar="GATE", help=GATE_OPTION_HELP)
    run.add_argument(
        "--no-gates", action="store_true", help="print the gates but do not fail on them (e.g. for another fixture)"
    )
    _add_system_arguments(run)
    _add_input_limit(run)
    _add_cluster_arguments(run)
    _add_calibration_arguments(run)
    run.set_defaults(handler=_run)

    validate = commands.add_parser("validate", help="check a fixture against the strict schema")
    validate.add_argument("path", help="fixture directory or fixture.json")
    _add_input_limit(validate)
    validate.set_defaults(handler=_validate)

    baseline = commands.add_parser("baseline", help="print (or --write) context baselines for review")
    baseline.add_argument("--fixture", default=str(DEFAULT_FIXTURE), help="fixture directory")
    baseline.add_argument("--write", action="store_true", help=f"overwrite the fixture's {BASELINES_FILE}")
    _add_input_limit(baseline)
    baseline.set_defaults(handler=_baseline)
    notebook = commands.add_parser(
        "notebook", help="run a notebook headless into reports/<run-id>/ (notebook, figures, report, HTML)"
    )
    notebook.add_argument("--notebook", default=str(DEFAULT_NOTEBOOK), help="notebook path (default: %(default)s)")
    notebook.add_argument("--run-id", default=None, help="folder name under reports/ (default: UTC time)")
    notebook.add_argument(
        "--replace-run", action="store_true", help="allow reusing an existing --run-id (its files are overwritten)"
    )
    notebook.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="set a notebook parameter; VALUE is JSON when it parses (0.8, true, null, [...]), else a string",
    )
    notebook.set_defaults(handler=_notebook)
    _add_import_parser(commands)
    _add_score_parser(commands)
    _add_export_parser(commands)
    _add_compare_parser(commands)
    _document_defaults(parser)
    return parser


def _document_defaults(parser: argparse.ArgumentParser) -> None:
    """Append each option's default (or that it is required) to its help, in every subcommand, unless it says so."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _document_defaults(sub)
        elif action.default is argparse.SUPPRESS or action.help in (None, argparse.SUPPRESS):
            continue  # --help and the like
        elif action.option_strings and "default" not in action.help:
            if action.required:
                action.help += " (required)"
            elif isinstance(action, argparse._StoreTrueAction):
                action.help += " (default: off)"
            elif action.default in (None, []):
                action.help += " (default: none)"
            else:
                action.help += " (default: %(default)s)"


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM, so that ``finally`` blocks (temporary files) run before exiting."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``evalkit`` console script.

    SIGINT (Ctrl-C) prints one line and exits 130; SIGTERM removes any temporary file being written and exits 143.
    """
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main_thread else None
    try:
        return _dispatch(argv)
    except KeyboardInterrupt:
        print("evalkit: interrupted (SIGINT); nothing partial was written", file=sys.stderr)
        return EXIT_SIGINT
    except Terminated:
        print("evalkit: terminated (SIGTERM); nothing partial was written", file=sys.stderr)
        return EXIT_SIGTERM
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _dispatch(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except GateFailure as exc:
        print(f"evalkit: {exc}", file=sys.stderr)
        return EXIT_GATE
    except DeterminismError as exc:
        print(f"evalkit: determinism check failed: {exc}", file=sys.stderr)
        return EXIT_GATE
    except (FixtureError, OutputPathError, ProviderUnavailableError, ValueError, OSError, MemoryError) as exc:
        print(f"evalkit: {exc}", file=sys.stderr)
        return EXIT_INPUT
    return code
