"""The ``evalkit`` command: run the evaluation, validate fixtures, regenerate baselines.

Exit codes: 0 success, 1 a quality gate (or the determinism check) failed, 2 invalid input. Invalid input is
reported as one clear message on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from evalkit.ablations import ABLATION_IDS, ALL_ABLATION_IDS, parse_ablations
from evalkit.data.fixture import FixtureError, load_fixture
from evalkit.data.schema import SLICES
from evalkit.evaluation import DeterminismError, evaluate
from evalkit.output import ENV_VAR, OutputPathError, output_path_from_env, resolve_output_path, write_atomic
from evalkit.reporting.gates import (
    BASELINES_FILE,
    GateFailure,
    GateThresholds,
    assess,
    baselines_from_report,
    baselines_json,
    check_gates,
    format_gates,
    load_baselines,
)
from evalkit.reporting.report import Report, build_report, parse_report, report_json
from evalkit.retrieval.embeddings import ProviderUnavailableError
from evalkit.runner import DEFAULT_NOTEBOOK, parse_value, run_notebook

DEFAULT_FIXTURE = Path("fixtures") / "synthetic-bilingual-v1"
EXIT_OK, EXIT_GATE, EXIT_INPUT = 0, 1, 2
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


def _run(args: argparse.Namespace) -> int:
    workspace = Path.cwd()
    fixture_dir = Path(args.fixture)
    loaded = load_fixture(fixture_dir)
    ablations = parse_ablations(args.ablations)
    baselines = load_baselines(fixture_dir) if fixture_dir.is_dir() else None
    thresholds = GateThresholds.from_values(args)
    if args.runs < 1:
        raise ValueError(f"--runs must be at least 1, got {args.runs}")
    # Only now, with every input checked, may the output path's missing folders be created.
    target = (
        resolve_output_path(args.output, workspace)
        if args.output is not None
        else output_path_from_env(os.environ, workspace)
    )
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
    loaded = load_fixture(Path(args.path))
    fixture = loaded.fixture
    answerable = sum(1 for q in fixture.queries if q.answerable)
    print(
        f"fixture {fixture.fixture_id} {fixture.fixture_version} is valid: {len(fixture.documents)} documents, "
        f"{len(fixture.chunks)} chunks, {len(fixture.queries)} queries ({answerable} answerable, "
        f"{len(fixture.queries) - answerable} no-answer), {len(loaded.aliases.groups)} alias groups"
    )
    return EXIT_OK


def _baseline(args: argparse.Namespace) -> int:
    fixture_dir = Path(args.fixture)
    evaluation = evaluate(load_fixture(fixture_dir), parse_ablations(",".join(ABLATION_IDS)), runs=2)
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
    run = run_notebook(root, parameters, notebook=Path(args.notebook), run_id=args.run_id)
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
    from evalkit.data.squad import SquadImportOptions, fixture_json, import_cross_lingual, import_squad, read_squad

    options = SquadImportOptions(
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
    corpus = read_squad(Path(args.input))
    if args.questions is None:
        fixture = import_squad(corpus, options)
    elif args.question_language is None:
        raise ValueError("--questions needs --question-language")
    else:
        questions = read_squad(Path(args.questions))
        fixture = import_cross_lingual(questions, corpus, args.question_language, options)
    target = resolve_output_path(f"{args.output_dir.rstrip('/')}/fixture.json", Path.cwd())
    write_atomic(target, fixture_json(fixture))
    answerable = sum(1 for q in fixture.queries if q.answerable)
    no_answer = len(fixture.queries) - answerable
    print(
        f"wrote {target.relative_to(Path.cwd().resolve())}: {len(fixture.documents)} documents, "
        f"{len(fixture.chunks)} chunks, {answerable} answerable and {no_answer} no-answer queries"
    )
    return EXIT_OK


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
    squad.set_defaults(handler=_import_squad)


def _compare(args: argparse.Namespace) -> int:
    from evalkit.reporting.comparison import (
        check_regressions,
        compare_reports,
        comparison_json,
        find_regressions,
        format_comparison,
    )

    measures = [m.strip() for m in args.gate_measures.split(",") if m.strip()] if args.gate_measures else None
    reports = []
    for side, name in (("base", args.base), ("head", args.head)):
        try:
            reports.append(parse_report(Path(name).read_bytes()))
        except ValueError as exc:
            raise ValueError(f"{side} report {name}: {exc}") from None
    comparison = compare_reports(reports[0], reports[1])
    verdict = find_regressions(comparison, args.alpha, args.max_drop, measures)
    # Only now, with every input checked, may the output path's missing folders be created.
    target = resolve_output_path(args.output, Path.cwd()) if args.output is not None else None
    print(format_comparison(comparison))
    print()
    print(verdict.describe())
    if target is not None:
        write_atomic(target, comparison_json(comparison))
        print(f"comparison written to {target.relative_to(Path.cwd().resolve())}")
    if args.fail_on_regression:
        check_regressions(verdict)
    return EXIT_OK


def _add_compare_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compare = commands.add_parser(
        "compare", help="compare two reports query by query: paired differences, intervals, tests, regression gate"
    )
    compare.add_argument("base", help="the base report (JSON written by `evalkit run --output`)")
    compare.add_argument("head", help="the head report, over the same queries and judgments")
    compare.add_argument("--output", default=None, help="write the comparison as JSON to this workspace-relative path")
    compare.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a gated measure dropped in a language by more than --max-drop with Holm p < --alpha",
    )
    compare.add_argument("--alpha", type=float, default=0.05, help="significance level (default: %(default)s)")
    compare.add_argument(
        "--max-drop", type=float, default=0.01, help="tolerated drop of a measure's mean (default: %(default)s)"
    )
    compare.add_argument(
        "--gate-measures", default=None, help="comma-separated measures the gate checks (default: every measure)"
    )
    compare.set_defaults(handler=_compare)


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
    run.set_defaults(handler=_run)

    validate = commands.add_parser("validate", help="check a fixture against the strict schema")
    validate.add_argument("path", help="fixture directory or fixture.json")
    validate.set_defaults(handler=_validate)

    baseline = commands.add_parser("baseline", help="print (or --write) context baselines for review")
    baseline.add_argument("--fixture", default=str(DEFAULT_FIXTURE), help="fixture directory")
    baseline.add_argument("--write", action="store_true", help=f"overwrite the fixture's {BASELINES_FILE}")
    baseline.set_defaults(handler=_baseline)
    notebook = commands.add_parser(
        "notebook", help="run a notebook headless into reports/<run-id>/ (notebook, figures, report, HTML)"
    )
    notebook.add_argument("--notebook", default=str(DEFAULT_NOTEBOOK), help="notebook path (default: %(default)s)")
    notebook.add_argument("--run-id", default=None, help="folder name under reports/ (default: UTC time)")
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
    _add_compare_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``evalkit`` console script."""
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
