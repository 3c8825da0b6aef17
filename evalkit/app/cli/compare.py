"""``evalkit compare``: two or more reports compared query by query, with the regression gate."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.app.cli.options import EXIT_OK, Commands, add_input_limit, max_bytes
from evalkit.common.output import refuse_input_overwrite, resolve_output_path, write_atomic
from evalkit.data.inputs import clip
from evalkit.measures.registry import measure_list
from evalkit.reporting.holes import DEFAULT_MAX_UNJUDGED_GAP
from evalkit.reporting.report import parse_report


def compare(args: argparse.Namespace) -> int:
    """``evalkit compare``: every report read and checked, then the comparison printed, written and gated."""
    from evalkit.data.inputs import InputError, read_input_bytes
    from evalkit.reporting.comparison import (
        Comparison,
        PairwiseComparison,
        compare_many,
        compare_reports,
    )
    from evalkit.reporting.comparison_views import comparison_json, format_comparison, format_pairwise, pairwise_table
    from evalkit.reporting.regression import check_regressions, find_regressions

    names: list[str] = args.reports
    if len(names) < 2:
        raise ValueError(f"compare needs two or more reports, got {len(names)}")
    stems = [Path(n).stem for n in names]
    labels = args.label or (stems if len(set(stems)) == len(stems) else names)
    if len(labels) != len(names):
        raise ValueError(f"give --label once per report: {len(names)} reports, {len(labels)} labels")
    unprintable = [label for label in labels if not label.isprintable()]
    if unprintable:
        raise ValueError(
            f"report label {clip(unprintable[0])} holds a character that does not print (a newline, an escape): "
            "rename the file or give --label"
        )
    measures = measure_list(args.gate_measures) if args.gate_measures else None
    reports = []
    for i, name in enumerate(names):
        side = ("base" if i == 0 else "head") if len(names) == 2 else f"report {i + 1}"
        try:
            reports.append(parse_report(read_input_bytes(Path(name), max_bytes(args))))
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
    verdict = find_regressions(comparison, max_unjudged_gap=args.max_unjudged_gap)
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
    if args.format != "text":  # stdout is the paper table; what the gate read of it (holes, regressions) goes beside
        print(verdict.describe(), file=sys.stderr)
    if target is not None:
        write_atomic(target, comparison_json(comparison))
        written = f"comparison written to {target.relative_to(Path.cwd().resolve())}"
        print(written, file=sys.stderr if args.format != "text" else sys.stdout)  # a paper table's stdout is the table
    if args.fail_on_regression or args.require_power or args.require_judged:
        check_regressions(verdict, args.require_power, args.require_judged)
    return EXIT_OK


def add_parser(commands: Commands) -> None:
    """``evalkit compare`` and its options."""
    parser = commands.add_parser(
        "compare",
        help="compare two or more reports query by query: paired differences, intervals, tests, regression gate",
    )
    parser.add_argument(
        "reports",
        nargs="+",
        metavar="REPORT",
        help="reports (JSON written by `evalkit run --output` or `evalkit score --output`) over the same queries and "
        "judgments: the first is the base, each other a head; with three or more, each later report is compared with "
        "each earlier one",
    )
    parser.add_argument(
        "--label",
        action="append",
        default=None,
        metavar="NAME",
        help="name of a report in the tables, once per report in order (default: the file name stems)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "markdown", "latex"),
        default="text",
        help="text: the full table and the gate (default); markdown or latex: a paper table of the gated measures",
    )
    parser.add_argument("--output", default=None, help="write the comparison as JSON to this workspace-relative path")
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a gated row (measure x ablation x slice: all, en, zh) of a head against the first report "
        "dropped by more than --max-drop with a Holm-adjusted one-sided p < --alpha",
    )
    parser.add_argument(
        "--require-power",
        action="store_true",
        help="exit 1 when a gated row is underpowered: its minimum detectable effect exceeds --max-drop, or too few "
        "queries differ for the test to reach its alpha (implies --fail-on-regression)",
    )
    parser.add_argument(
        "--max-unjudged-gap",
        type=float,
        default=DEFAULT_MAX_UNJUDGED_GAP,
        help="how much larger (0-1) the head's unjudged share of its top k may be than the base's before a drop is "
        "tested again on judged documents only (condensed lists); a drop that does not survive is reported as "
        "label holes, not a regression (default: %(default)s)",
    )
    parser.add_argument(
        "--require-judged",
        action="store_true",
        help="exit 1 when a gated drop is explained by label holes (the head's top k more unjudged than the base's "
        "beyond --max-unjudged-gap, and no regression on judged documents): label them first (implies "
        "--fail-on-regression)",
    )
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level (default: %(default)s)")
    parser.add_argument(
        "--max-drop", type=float, default=0.01, help="tolerated drop of a measure's mean (default: %(default)s)"
    )
    parser.add_argument(
        "--gate-measures",
        default=None,
        help="comma-separated measures the gate checks (default: ndcg@10,recall@10); the others are exploratory",
    )
    add_input_limit(parser)
    parser.set_defaults(handler=compare)
