"""``evalkit score``: score run files against qrels (no corpus) or against a fixture (with answer spans).

``--qrels`` takes TREC or BEIR qrels and goes through the scoring core alone
(:func:`evalkit.runs.precomputed.score`): no database, analyzer or embedding is built. ``--fixture`` scores the runs
as external systems of the fixture, which adds the context measures (they need answer spans) and the fixture's gates.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path

from evalkit.app.cli.options import (
    DEFAULT_FIXTURE,
    Commands,
    add_gate_arguments,
    add_ties_argument,
    enforce,
    fixture_inputs,
    megabytes,
    save_report,
)
from evalkit.app.cli.options import max_bytes as input_limit
from evalkit.common.output import ENV_VAR
from evalkit.data.fixture import Fixture, load_fixture
from evalkit.data.inputs import clip, shorten
from evalkit.data.run_coverage import check_run
from evalkit.data.runs import Run, read_run
from evalkit.data.tables import DEFAULT_MAX_TABLE_BYTES
from evalkit.measures.core import MISSING_POLICIES
from evalkit.measures.registry import measure_list
from evalkit.reporting.gate_specs import GATE_OPTION_HELP, GateThresholds, distinct_gates, parse_gate
from evalkit.reporting.gates import collect_gates, format_gates
from evalkit.reporting.report import SystemReport, report_json
from evalkit.runs.pipeline import Outcome, ScoreRequest, report_target, run_pipeline

__all__ = ["FORMATS", "add_parser", "score_fixture", "score_qrels", "score_runs"]

FORMATS = ("table", "json", "trec")


def _measures(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = measure_list(text)
    if not names:
        raise ValueError("--measures names no measure")
    return names


def _rendered(outcome: Outcome, args: argparse.Namespace) -> str:
    """What ``--format`` prints: the summary table (with the gates when there are any), the JSON report, or
    trec_eval's layout."""
    result = outcome.scored
    if args.format == "json":
        return report_json(outcome.report).decode("utf-8")
    if args.format == "trec":
        return result.format_trec(per_query=args.per_query) + "\n"
    text = outcome.summary()
    if args.per_query:
        text += "\n\n" + result.per_query.to_string(float_format=lambda v: f"{v:.4f}", na_rep="-")
    return text + "\n"


def score_runs(args: argparse.Namespace) -> int:
    """``evalkit score``: against qrels alone (the scoring core, no corpus) or against a fixture."""
    if args.qrels is not None:
        if args.fixture is not None:
            raise ValueError("give --qrels or --fixture, not both")
        return score_qrels(args)
    if args.topics is not None or args.measures is not None or args.format != "table" or args.per_query:
        raise ValueError("--topics, --measures, --format and --per-query go with --qrels")
    if args.floor is not None:
        raise ValueError("--floor goes with --qrels")
    if args.missing != "zero":
        raise ValueError(
            f"--missing {args.missing} goes with --qrels: against a fixture a query a run does not name is an empty "
            "ranking (a system that abstains writes no line for it), scored as one"
        )
    return score_fixture(args)


def score_fixture(args: argparse.Namespace) -> int:
    """``evalkit score --fixture``: the runs read with the columnar reader and scored against the fixture (context
    measures, failures, the fixture's gates)."""
    workspace = Path.cwd()
    args.fixture = args.fixture or str(DEFAULT_FIXTURE)
    fixture_dir = Path(args.fixture)
    loaded = load_fixture(fixture_dir, input_limit(args))
    runs, systems = _run_files([Path(p) for p in args.run], loaded.fixture, input_limit(args, DEFAULT_MAX_TABLE_BYTES))
    gates = collect_gates(
        fixture_dir,
        loaded.fixture,
        thresholds=GateThresholds.from_values(args),
        options=args.gate,
        systems=set(systems),
        max_bytes=input_limit(args),
    )
    inputs = [*fixture_inputs(fixture_dir), *(Path(p) for p in args.run)]
    target = report_target(args.output, workspace, inputs)
    request = ScoreRequest(None, runs, ties=args.ties, gates=gates, fixture=loaded.fixture, systems=systems)
    outcome = run_pipeline(request)
    print(outcome.summary())
    save_report(outcome, target, workspace)
    return enforce(outcome, args.no_gates)


def _run_files(paths: Sequence[Path], fixture: Fixture, max_bytes: int) -> tuple[list[Run], dict[str, SystemReport]]:
    """Each run file read (columnar) as a system of `fixture`, by its run ID, with its provenance; its coverage is
    printed; two runs named alike are refused."""
    runs: list[Run] = []
    systems: dict[str, SystemReport] = {}
    for path in paths:
        run = read_run(path, max_bytes)
        coverage = check_run(run, (q.query_id for q in fixture.queries), (c.chunk_id for c in fixture.chunks))
        if run.name in systems:
            raise ValueError(f"run ID {run.name!r} of {path.name} is used by another run; rename the file or tag")
        counts = {
            "lines": run.lines,
            "missing_queries": len(coverage.missing_queries),
            "unjudged_queries": coverage.unjudged_queries,
            "unknown_chunks": len(coverage.unknown_chunks),
        }
        with path.open("rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        systems[run.name] = SystemReport(kind="run-file", sha256=digest, counts=counts)
        runs.append(run)
        print(f"run {run.name} ({path.name}): {coverage.describe()}")
    return runs, systems


def score_qrels(args: argparse.Namespace) -> int:
    """``evalkit score --qrels``: every input read and checked, the report built when it is written or printed or
    gated, then the output printed and written."""
    workspace = Path.cwd()
    inputs = [Path(args.qrels), *(Path(r) for r in args.run), *([Path(args.topics)] if args.topics else [])]
    target = report_target(args.output, workspace, inputs)
    max_bytes = input_limit(args, DEFAULT_MAX_TABLE_BYTES)
    given = [Path(r).resolve() for r in args.run]
    twice = sorted({str(p) for p in given if given.count(p) > 1})
    if twice:
        raise ValueError(f"the same run file is given twice: {clip(twice[0])}")
    flagged = GateThresholds.from_values(args).flagged_gates()
    if flagged:
        raise ValueError(
            f"{flagged[0][0]} replaces a fixture's gates.json entry, and --qrels has no fixture: give --fixture, "
            f"or write the bound as --gate (e.g. '{flagged[0][1].label} {flagged[0][1].comparison} ...')"
        )
    gates = distinct_gates([(f"--gate {shorten(text)}", parse_gate(text)) for text in args.gate])
    run_input = Path(args.run[0]) if len(args.run) == 1 else _named_runs(args.run, max_bytes)
    request = ScoreRequest(
        Path(args.qrels),
        run_input,
        measures=_measures(args.measures),
        ties=args.ties,
        languages=Path(args.topics) if args.topics else None,
        missing=args.missing,
        max_bytes=max_bytes,
        floor=args.floor,
        gates=gates,
    )
    outcome = run_pipeline(request)
    if target is not None or request.gates:
        outcome.report  # noqa: B018 - built (or refused) before anything is printed or written
    quiet = target is not None and args.format == "json"  # the report goes to the file, not twice
    sys.stdout.write(outcome.summary() + "\n" if quiet else _rendered(outcome, args))
    if args.format != "table" and not quiet:  # stdout stays machine-readable; the rest goes to stderr
        for note in outcome.notes:
            print(f"note: {note}", file=sys.stderr)
        if request.gates:
            print(format_gates(outcome.report.gates), file=sys.stderr)
    save_report(outcome, target, workspace)
    if request.gates:
        return enforce(outcome, args.no_gates)
    return 0


def _named_runs(paths: list[str], max_bytes: int) -> dict[str, object]:
    """Several run files, each named by its tag (or file name); two runs named alike are refused."""
    from evalkit.data.runs import read_run

    runs: dict[str, object] = {}
    named: dict[str, str] = {}
    for path in paths:
        run = read_run(Path(path), max_bytes)
        if run.name in runs:
            raise ValueError(
                f"run ID {run.name!r} of {clip(path)} is also the ID of {clip(named[run.name])}; rename a file or "
                "change a tag"
            )
        runs[run.name], named[run.name] = run, path
    return runs


def add_parser(commands: Commands) -> None:
    """``evalkit score`` and its options."""
    parser = commands.add_parser(
        "score", help="score run files (TREC or JSONL) against qrels (no corpus needed) or against a fixture"
    )
    parser.add_argument(
        "--fixture",
        default=None,
        help=f"fixture directory, for context measures and the fixture's gates (default: {DEFAULT_FIXTURE} "
        "when --qrels is not given)",
    )
    parser.add_argument(
        "--run", action="append", required=True, help="run file: .jsonl is JSONL, anything else TREC (repeatable)"
    )
    add_ties_argument(parser)
    _add_qrels_arguments(parser)
    parser.add_argument(
        "--output",
        default=None,
        help=f"workspace-relative path the JSON report is written to, whatever --format prints (default: ${ENV_VAR})",
    )
    add_gate_arguments(parser)
    parser.add_argument("--gate", action="append", default=[], metavar="GATE", help=GATE_OPTION_HELP)
    parser.add_argument("--no-gates", action="store_true", help="print the gates but do not fail on them")
    parser.set_defaults(handler=score_runs)


def _add_qrels_arguments(score_parser: argparse.ArgumentParser) -> None:
    """The options of ``evalkit score`` for the qrels path."""
    score_parser.add_argument(
        "--qrels",
        default=None,
        help="TREC (qid iter docid grade) or BEIR TSV qrels, optionally .gz: score without a corpus "
        "(default: none, score against --fixture)",
    )
    score_parser.add_argument(
        "--topics",
        default=None,
        help="TSV (qid<TAB>text) or JSONL topics with optional language: per-language slices (default: one slice)",
    )
    score_parser.add_argument(
        "--measures",
        default=None,
        help="comma-separated measures, evalkit's (ndcg@10, recall@10, mrr@10, precision@k, success@k, "
        "map@k, rprec, judged@k) or trec_eval's (ndcg_cut_10, recip_rank, P_10, recall_100, map, Rprec) "
        "(default: recall@1,recall@5,recall@10,mrr@10,ndcg@10)",
    )
    score_parser.add_argument(
        "--missing",
        choices=MISSING_POLICIES,
        default="zero",
        help="judged queries absent from a run: zero scores them 0 (trec_eval -c), skip leaves them out "
        "(trec_eval without -c); with --qrels",
    )
    score_parser.add_argument(
        "--floor",
        type=float,
        default=None,
        metavar="SCORE",
        help="abstention floor on the runs' scores: a query whose best score is below it returns nothing, as the "
        "system would with the floor (e.g. one chosen by 'evalkit run --calibrate'); with --qrels "
        "(default: none)",
    )
    score_parser.add_argument("--per-query", action="store_true", help="also print every query's values")
    score_parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table (for people), json (the report evalkit compare reads) or trec (trec_eval's layout)",
    )
    score_parser.add_argument(
        "--max-input-mb",
        type=megabytes,
        default=None,
        help=f"refuse a qrels, run or topics file larger than this (default: {DEFAULT_MAX_TABLE_BYTES // 2**20} MiB)",
    )
