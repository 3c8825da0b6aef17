"""What the subcommands share: exit codes, default paths, and the options several of them take."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from evalkit.data.fixture import ALIASES_FILE, FIXTURE_FILE
from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES
from evalkit.measures.ties import DEFAULT_TIE_POLICY, TIE_POLICIES
from evalkit.reporting.gate_specs import BASELINES_FILE, GATES_FILE, GateThresholds

if TYPE_CHECKING:
    from evalkit.runs.pipeline import Outcome

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""The subparsers of ``evalkit``, to which each subcommand module adds its parser."""

DEFAULT_FIXTURE = Path("fixtures") / "synthetic-bilingual-v1"
DEFAULT_CACHE_DIR = Path(".cache") / "evalkit"
EXIT_OK, EXIT_GATE, EXIT_INPUT = 0, 1, 2


def max_bytes(args: argparse.Namespace, default: int = DEFAULT_MAX_INPUT_BYTES) -> int:
    """The input size limit in bytes from ``--max-input-mb`` (``default`` when not given or the command has no such
    flag)."""
    megabytes = getattr(args, "max_input_mb", None)
    if megabytes is None:
        return default
    return int(megabytes * 2**20)


def megabytes(text: str) -> float:
    """``--max-input-mb``'s value: a finite number of MiB above 0 (argparse refuses anything else with exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of MiB above 0, got {text!r}")
    return value


def fixture_inputs(fixture: Path) -> list[Path]:
    """The files a run over `fixture` (a folder or its fixture.json) reads, which no output may overwrite."""
    folder = fixture if fixture.is_dir() else fixture.parent
    files = [fixture / FIXTURE_FILE] if fixture.is_dir() else [fixture]
    return [*files, folder / ALIASES_FILE, folder / BASELINES_FILE, folder / GATES_FILE]


def add_input_limit(parser: argparse.ArgumentParser) -> None:
    """``--max-input-mb``."""
    parser.add_argument(
        "--max-input-mb",
        type=megabytes,
        default=None,
        help=f"refuse input files larger than this many MiB (default: {DEFAULT_MAX_INPUT_BYTES // 2**20})",
    )


def add_ties_argument(parser: argparse.ArgumentParser) -> None:
    """``--ties``."""
    parser.add_argument(
        "--ties",
        choices=list(TIE_POLICIES),
        default=DEFAULT_TIE_POLICY,
        help="tie policy: evalkit (score desc, chunk ID asc) or trec_eval (float32 score desc, ID desc)",
    )


def add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    """One ``--<threshold>`` option per seed gate threshold; unset, the fixture's gates.json entry holds."""
    for name, field in GateThresholds.model_fields.items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=float,
            default=None,
            help=f"{field.description}: replaces the {GATES_FILE} entry or adds it (default: the entry's bound)",
        )


def save_report(outcome: Outcome, target: Path | None, workspace: Path) -> None:
    """Write the report to `target` (from :func:`~evalkit.runs.pipeline.report_target`) and say where; nothing
    when it is None."""
    from evalkit.runs.pipeline import write_outcome  # imported by the commands that have an outcome: a lookup

    if target is not None:
        write_outcome(outcome, target)
        print(f"report written to {target.relative_to(workspace.resolve())}")


def enforce(outcome: Outcome, no_gates: bool) -> int:
    """Raise :class:`~evalkit.reporting.gates.GateFailure` when a gate failed, unless ``--no-gates`` (said)."""
    from evalkit.runs.pipeline import enforce_gates  # as in save_report

    if not enforce_gates(outcome, no_gates):
        print("gates not enforced (--no-gates)")
    return EXIT_OK
