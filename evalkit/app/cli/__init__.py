"""The ``evalkit`` command: run the evaluation, validate fixtures, regenerate baselines.

Exit codes: 0 success, 1 a quality gate (or the determinism check) failed, 2 invalid input. Invalid input is
reported as one clear message on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from evalkit.app.cli import baseline, compare, export, imports, labels, notebook, pool, run, score, validate
from evalkit.app.cli.options import (
    DEFAULT_CACHE_DIR,
    DEFAULT_FIXTURE,
    EXIT_GATE,
    EXIT_INPUT,
    EXIT_OK,
)
from evalkit.app.headless import DEFAULT_NOTEBOOK
from evalkit.app.signals import EXIT_SIGINT, EXIT_SIGTERM, Terminated, with_signals
from evalkit.common.output import OutputPathError
from evalkit.data.fixture import FixtureError
from evalkit.reporting.gates import GateFailure
from evalkit.retrieval.embeddings import ProviderUnavailableError
from evalkit.runs.evaluation import DeterminismError
from evalkit.runs.pipeline import format_settings

__all__ = [
    "DEFAULT_CACHE_DIR",
    "DEFAULT_FIXTURE",
    "DEFAULT_NOTEBOOK",
    "EXIT_GATE",
    "EXIT_INPUT",
    "EXIT_OK",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "Terminated",
    "build_parser",
    "format_settings",
    "main",
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the evalkit command: one subcommand per module of this package."""
    parser = argparse.ArgumentParser(prog="evalkit", description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    for command in (run, validate, baseline, notebook, imports, score, export, compare, pool, labels):
        command.add_parser(commands)
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


def main(argv: Sequence[str] | None = None) -> int:
    """The ``evalkit`` command (the console script enters through :func:`evalkit.app.launch.main`).

    SIGINT (Ctrl-C) prints one line and exits 130; SIGTERM removes any temporary file being written and exits 143.
    """
    return with_signals(lambda: _dispatch(argv))


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
