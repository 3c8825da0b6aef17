"""``evalkit validate``: check a fixture against the strict schema, with its baselines and gates files."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalkit.app.cli.options import EXIT_OK, Commands, add_input_limit, max_bytes
from evalkit.data.fixture import load_fixture
from evalkit.reporting.gate_specs import BASELINES_FILE, GATES_FILE, load_gate_file
from evalkit.reporting.gates import (
    check_baselines_match,
    check_baselines_regenerated,
    load_baselines,
    refuse_unevaluated,
)


def validate(args: argparse.Namespace) -> int:
    """``evalkit validate``: the fixture, its baselines.json (each floor as ``evalkit baseline`` regenerates it) and
    gates.json checked; a one-line description."""
    location = Path(args.path)
    loaded = load_fixture(location, max_bytes(args))
    fixture = loaded.fixture
    # Read baselines.json and gates.json too, so that a folder validate accepts is not refused by run.
    folder = location if location.is_dir() else location.parent
    baselines = load_baselines(folder, max_bytes(args))
    if baselines is not None:
        check_baselines_match(baselines, fixture.fixture_id, fixture.fixture_version)
    gate_file = load_gate_file(folder, max_bytes(args))
    if gate_file is not None:
        refuse_unevaluated(gate_file.gates, f"{GATES_FILE}")
    if baselines is not None:  # the floors regenerated as `evalkit baseline` does: seconds at a thousand queries
        from evalkit.runs.pipeline import regenerate_baselines  # only with a baselines.json: the retrieval path

        check_baselines_regenerated(baselines, regenerate_baselines(loaded, runs=1))
    floors = 0 if baselines is None else sum(len(m) for s in baselines.ablations.values() for m in s.values())
    answerable = sum(1 for q in fixture.queries if q.answerable)
    print(
        f"fixture {fixture.fixture_id} {fixture.fixture_version} is valid: {len(fixture.documents)} documents, "
        f"{len(fixture.chunks)} chunks, {len(fixture.queries)} queries ({answerable} answerable, "
        f"{len(fixture.queries) - answerable} no-answer), {len(loaded.aliases.groups)} alias groups"
        + ("" if baselines is None else f", {BASELINES_FILE} matches ({floors} floor(s))")
        + ("" if gate_file is None else f", {GATES_FILE} holds {len(gate_file.gates)} gate(s)")
    )
    return EXIT_OK


def add_parser(commands: Commands) -> None:
    """``evalkit validate`` and its options."""
    parser = commands.add_parser("validate", help="check a fixture against the strict schema")
    parser.add_argument("path", help="fixture directory or fixture.json")
    add_input_limit(parser)
    parser.set_defaults(handler=validate)
