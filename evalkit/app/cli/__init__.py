"""The ``evalkit`` command: run the evaluation, validate fixtures, regenerate baselines.

Exit codes: 0 success, 1 a quality gate (or the determinism check) failed, 2 invalid input. Invalid input is
reported as one clear message on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from evalkit.app.cli.options import (
    DEFAULT_CACHE_DIR,
    DEFAULT_FIXTURE,
    EXIT_GATE,
    EXIT_INPUT,
    EXIT_OK,
)
from evalkit.app.signals import EXIT_SIGINT, EXIT_SIGTERM, say, with_signals
from evalkit.common.interrupts import Terminated

__all__ = [
    "COMMANDS",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_FIXTURE",
    "EXIT_GATE",
    "EXIT_INPUT",
    "EXIT_OK",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "Terminated",
    "build_parser",
    "command_modules",
    "main",
]

COMMANDS: dict[str, str] = {
    "run": "run",
    "validate": "validate",
    "baseline": "baseline",
    "notebook": "notebook",
    "import": "imports",
    "score": "score",
    "export": "export",
    "compare": "compare",
    "pool": "pool",
    "labels": "labels",
}
"""Each subcommand, in the order ``evalkit --help`` lists them, and the module of this package that declares and runs
it. A command imports its own module only (``evalkit compare`` does not load the retrieval path)."""

_EXIT_CODES = (
    ("evalkit.reporting.gates", "GateFailure", EXIT_GATE, ""),
    ("evalkit.runs.evaluation", "DeterminismError", EXIT_GATE, "determinism check failed: "),
    ("evalkit.retrieval.embeddings", "ProviderUnavailableError", EXIT_INPUT, ""),
)
"""The exceptions, besides ``ValueError``, ``OSError`` and ``MemoryError`` (exit 2), that end a command with an exit
code and one line: ``(module, class, exit code, message prefix)``. Each is looked up only if its module was
imported, which it was if the command raised it."""


def _named(argv: Sequence[str] | None) -> str | None:
    """The subcommand `argv` names (its first word: ``evalkit`` itself takes no option but ``--help``), if known."""
    args = sys.argv[1:] if argv is None else list(argv)
    return args[0] if args and args[0] in COMMANDS else None


def command_modules(argv: Sequence[str] | None = None) -> list[ModuleType]:
    """The modules of the subcommands a parser for `argv` declares (imported here): the one it names, or all of them
    when it names none (``--help``, or a missing or mistyped command, which argparse answers by listing them)."""
    named = _named(argv)
    modules = [COMMANDS[named]] if named is not None else list(COMMANDS.values())
    return [importlib.import_module(f"{__name__}.{module}") for module in modules]


def build_parser(argv: Sequence[str] | None = ()) -> argparse.ArgumentParser:
    """The argument parser of the evalkit command: one subcommand per module of this package, or only the one
    `argv` names (:func:`command_modules`; the default, no arguments, declares them all)."""
    parser = argparse.ArgumentParser(prog="evalkit", description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    for command in command_modules(argv):
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
    args = build_parser(argv).parse_args(argv)
    try:
        code: int = args.handler(args)
    except (ValueError, OSError, MemoryError) as exc:  # refused input: FixtureError, OutputPathError, ...
        say(f"evalkit: {exc}")
        return EXIT_INPUT
    except Exception as exc:
        for module, name, exit_code, prefix in _EXIT_CODES:
            known = getattr(sys.modules.get(module), name, None)
            if known is not None and isinstance(exc, known):
                say(f"evalkit: {prefix}{exc}")
                return exit_code
        raise
    return code
