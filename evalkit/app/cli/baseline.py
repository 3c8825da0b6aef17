"""``evalkit baseline``: print (or write) a fixture's context baselines for review."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.app.cli.options import DEFAULT_FIXTURE, EXIT_OK, Commands, add_input_limit, max_bytes
from evalkit.common.output import write_atomic
from evalkit.data.fixture import load_fixture
from evalkit.reporting.gate_specs import BASELINES_FILE
from evalkit.reporting.gates import baselines_json
from evalkit.runs.pipeline import regenerate_baselines


def baseline(args: argparse.Namespace) -> int:
    """``evalkit baseline``: the context baselines of the baseline ablations, printed or written for review."""
    fixture_dir = Path(args.fixture)
    data = baselines_json(regenerate_baselines(load_fixture(fixture_dir, max_bytes(args))))
    if args.write:
        write_atomic(fixture_dir / BASELINES_FILE, data)
        print(f"baselines written to {fixture_dir / BASELINES_FILE}: review the diff before committing")
    else:
        sys.stdout.write(data.decode("utf-8"))
    return EXIT_OK


def add_parser(commands: Commands) -> None:
    """``evalkit baseline`` and its options."""
    parser = commands.add_parser("baseline", help="print (or --write) context baselines for review")
    parser.add_argument("--fixture", default=str(DEFAULT_FIXTURE), help="fixture directory")
    parser.add_argument("--write", action="store_true", help=f"overwrite the fixture's {BASELINES_FILE}")
    add_input_limit(parser)
    parser.set_defaults(handler=baseline)
