"""``evalkit notebook``: run a notebook headless with papermill into its own folder under reports/."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.app.cli.options import EXIT_GATE, EXIT_INPUT, EXIT_OK, Commands
from evalkit.app.headless import DEFAULT_NOTEBOOK, parse_value, run_notebook
from evalkit.app.notebook import project_root
from evalkit.reporting.report import parse_report
from evalkit.reporting.summary import format_outcome

CHECK_FAILURES = frozenset({"GateFailure", "DeterminismError"})
"""Errors of a notebook run that mean a check failed (exit 1); any other error is bad input (exit 2)."""


def notebook(args: argparse.Namespace) -> int:
    """``evalkit notebook``: the notebook run headless into reports/<run-id>/, its summary and files listed."""
    root = project_root()  # as the kernel finds it: the folder with pyproject.toml beside evalkit/
    parameters = {name: parse_value(value) for name, value in args.parameter}
    run = run_notebook(root, parameters, notebook=Path(args.notebook), run_id=args.run_id, replace=args.replace_run)
    if run.report is not None:
        report = parse_report(run.report.read_bytes())
        print(format_outcome(report))
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


def add_parser(commands: Commands) -> None:
    """``evalkit notebook`` and its options."""
    parser = commands.add_parser(
        "notebook", help="run a notebook headless into reports/<run-id>/ (notebook, figures, report, HTML)"
    )
    parser.add_argument("--notebook", default=str(DEFAULT_NOTEBOOK), help="notebook path (default: %(default)s)")
    parser.add_argument("--run-id", default=None, help="folder name under reports/ (default: UTC time)")
    parser.add_argument(
        "--replace-run", action="store_true", help="allow reusing an existing --run-id (its files are overwritten)"
    )
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="set a notebook parameter; VALUE is JSON when it parses (0.8, true, null, [...]), else a string",
    )
    parser.set_defaults(handler=notebook)
