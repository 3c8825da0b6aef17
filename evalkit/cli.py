"""The ``evalkit`` command: run the evaluation, validate fixtures, regenerate baselines.

Exit codes: 0 success, 1 a quality gate (or the determinism check) failed, 2 invalid input. Invalid input is
reported as one clear message on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from pydantic import ValidationError

from evalkit.ablations import ABLATION_IDS, ALL_ABLATION_IDS, parse_ablations
from evalkit.data.fixture import ALIASES_FILE, FIXTURE_FILE, FixtureError, load_fixture
from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES
from evalkit.data.schema import SLICES
from evalkit.evaluation import DeterminismError, evaluate
from evalkit.output import (
    ENV_VAR,
    OutputPathError,
    output_path_from_env,
    refuse_input_overwrite,
    resolve_output_path,
    write_atomic,
)
from evalkit.reporting.gates import (
    BASELINES_FILE,
    GateFailure,
    GateThresholds,
    assess,
    baselines_from_report,
    baselines_json,
    check_baselines_match,
    check_gates,
    format_gates,
    load_baselines,
)
from evalkit.reporting.report import Report, build_report, parse_report, report_json
from evalkit.retrieval.embeddings import ProviderUnavailableError
from evalkit.runner import DEFAULT_NOTEBOOK, parse_value, run_notebook

if TYPE_CHECKING:
    from evalkit.data.squad import SquadImportOptions

DEFAULT_FIXTURE = Path("fixtures") / "synthetic-bilingual-v1"
EXIT_OK, EXIT_GATE, EXIT_INPUT = 0, 1, 2
EXIT_SIGINT, EXIT_SIGTERM = 130, 143
CHECK_FAILURES = frozenset({"GateFailure", "DeterminismError"})
"""Errors of a notebook run that mean a check failed (exit 1); any other error is bad input (exit 2)."""
SUMMARY_COLUMNS = ("recall@5", "recall@10", "mrr@10", "ndcg@10", "context_precision", "context_recall")
SUMMARY_HEADERS = ("R@5", "R@10", "MRR@10", "nDCG@10", "ctxP", "ctxR", "noansFPR", "p50 ms", "p95 ms")


def format_summary(report: Report) -> str:
    """A plain-text table: one row per ablation and slice (all, en, zh)."""
    header = f"{'ablation':<18} {'slice':<5} " + " ".join(f"{h:>8}" for h in SUMMARY_HEADERS)
    lines = [header, "-" * len(header)]
    for ablation_id, result in sorted(report.ablations.items(), key=lambda item: ALL_ABLATION_IDS.index(item[0])):
        for slice_name in SLICES:
            row = result.metrics.get(slice_name, {})
            cells = [_cell(row.get(m)) for m in (*SUMMARY_COLUMNS, "no_answer_fpr")]
            if slice_name == "all":
                cells += [f"{result.latency_ms.median_ms:8.3f}", f"{result.latency_ms.p95_ms:8.3f}"]
            lines.append(f"{ablation_id:<18} {slice_name:<5} " + " ".join(cells))
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
    return [*files, folder / ALIASES_FILE, folder / BASELINES_FILE]


def _run(args: argparse.Namespace) -> int:
    workspace = Path.cwd()
    fixture_dir = Path(args.fixture)
    loaded = load_fixture(fixture_dir, _max_bytes(args))
    ablations = parse_ablations(args.ablations)
    baselines = load_baselines(fixture_dir, _max_bytes(args)) if fixture_dir.is_dir() else None
    thresholds = GateThresholds.from_values(args)
    if args.runs < 1:
        raise ValueError(f"--runs must be at least 1, got {args.runs}")
    # Only now, with every input checked, may the output path's missing folders be created.
    target = (
        resolve_output_path(args.output, workspace)
        if args.output is not None
        else output_path_from_env(os.environ, workspace)
    )
    if target is not None:
        refuse_input_overwrite(target, _fixture_inputs(fixture_dir), args.output or os.environ.get(ENV_VAR))
    report = assess(evaluate(loaded, ablations, runs=args.runs), thresholds, baselines)
    print(f"evalkit: fixture {report.fixture_id} {report.fixture_version}, {report.runs} run(s), deterministic")
    print(format_summary(report))
    print()
    print(format_gates(report.gates))
    if target is not None:
        write_atomic(target, report_json(report))
        print(f"report written to {target.relative_to(workspace.resolve())}")
    if args.no_gates:
        print("gates not enforced (--no-gates)")
        return EXIT_OK
    check_gates(report.gates)
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    location = Path(args.path)
    loaded = load_fixture(location, _max_bytes(args))
    fixture = loaded.fixture
    # Read baselines.json too, so that a folder validate accepts is not refused by run.
    baselines = load_baselines(location if location.is_dir() else location.parent, _max_bytes(args))
    if baselines is not None:
        check_baselines_match(baselines, fixture.fixture_id, fixture.fixture_version)
    answerable = sum(1 for q in fixture.queries if q.answerable)
    print(
        f"fixture {fixture.fixture_id} {fixture.fixture_version} is valid: {len(fixture.documents)} documents, "
        f"{len(fixture.chunks)} chunks, {len(fixture.queries)} queries ({answerable} answerable, "
        f"{len(fixture.queries) - answerable} no-answer), {len(loaded.aliases.groups)} alias groups"
        + ("" if baselines is None else f", {BASELINES_FILE} matches")
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
        from evalkit.benchmark import format_benchmark, load_summary

        print(format_benchmark(load_summary(run.summary)))
    print(f"\nfiles in {run.run_dir.relative_to(root.resolve())}:")
    for path in sorted(p for p in run.run_dir.rglob("*") if p.is_file()):
        print(f"  {path.relative_to(root.resolve())}")
    if run.error_name is None:
        return EXIT_OK
    print(f"evalkit: notebook failed with {run.error_name}: {run.error_message}", file=sys.stderr)
    return EXIT_GATE if run.error_name in CHECK_FAILURES else EXIT_INPUT


def _import_squad(args: argparse.Namespace) -> int:
    from evalkit.data.squad import fixture_json, import_cross_lingual, import_squad, read_squad

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
    )
    target = resolve_output_path(f"{args.output_dir.rstrip('/')}/fixture.json", Path.cwd())
    inputs = [Path(args.input)] + ([] if args.questions is None else [Path(args.questions)])
    refuse_input_overwrite(target, inputs, f"{args.output_dir.rstrip('/')}/fixture.json")
    corpus = read_squad(Path(args.input), _max_bytes(args))
    if args.questions is None:
        fixture = import_squad(corpus, options)
    elif args.question_language is None:
        raise ValueError("--questions needs --question-language")
    else:
        questions = read_squad(Path(args.questions), _max_bytes(args))
        fixture = import_cross_lingual(questions, corpus, args.question_language, options)
    write_atomic(target, fixture_json(fixture))
    answerable = sum(1 for q in fixture.queries if q.answerable)
    no_answer = len(fixture.queries) - answerable
    print(
        f"wrote {target.relative_to(Path.cwd().resolve())}: {len(fixture.documents)} documents, "
        f"{len(fixture.chunks)} chunks, {answerable} answerable and {no_answer} no-answer queries"
    )
    return EXIT_OK


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
    _add_input_limit(squad)
    squad.set_defaults(handler=_import_squad)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the evalkit command."""
    parser = argparse.ArgumentParser(prog="evalkit", description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the ablations, print the summary and check the gates")
    run.add_argument("--fixture", default=str(DEFAULT_FIXTURE), help="fixture directory (default: %(default)s)")
    run.add_argument(
        "--ablations", default=",".join(ABLATION_IDS), help="comma-separated ablation IDs (default: all five)"
    )
    run.add_argument("--runs", type=int, default=2, help="runs compared for determinism (default: %(default)s)")
    run.add_argument(
        "--output",
        default=None,
        help=f"write the JSON report to this workspace-relative path (default: ${ENV_VAR}, else nothing)",
    )
    defaults = GateThresholds()
    for name, field in GateThresholds.model_fields.items():
        run.add_argument(
            "--" + name.replace("_", "-"),
            type=float,
            default=getattr(defaults, name),
            help=f"{field.description} (default: %(default)s)",
        )
    run.add_argument(
        "--no-gates", action="store_true", help="print the gates but do not fail on them (e.g. for another fixture)"
    )
    _add_input_limit(run)
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
    return parser


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
    except (FixtureError, OutputPathError, ProviderUnavailableError, ValueError, OSError) as exc:
        print(f"evalkit: {exc}", file=sys.stderr)
        return EXIT_INPUT
    return code


if __name__ == "__main__":
    sys.exit(main())
