"""``evalkit export``: write a fixture in a layout other IR tools read (BEIR, TREC)."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalkit.app.cli.options import EXIT_OK, Commands, fixture_inputs
from evalkit.common.output import refuse_input_overwrite, resolve_output_path, write_atomic
from evalkit.data.fixture import load_fixture


def export(args: argparse.Namespace) -> int:
    """``evalkit export``: the fixture written in BEIR or TREC layout, every target checked before any is written."""
    from evalkit.data.beir import beir_files
    from evalkit.data.trec import trec_files

    fixture = load_fixture(Path(args.fixture)).fixture
    if args.format == "beir":
        files = beir_files(fixture, args.split)
    else:
        files = trec_files(fixture, args.topics_format, args.gains)
    workspace = Path.cwd()
    inputs = fixture_inputs(Path(args.fixture))
    targets = {}
    for name, data in files.items():
        requested = f"{args.output_dir.rstrip('/')}/{name}"
        target = resolve_output_path(requested, workspace)
        refuse_input_overwrite(target, inputs, requested)
        targets[target] = data
    for target, data in targets.items():
        write_atomic(target, data)
        print(f"wrote {target.relative_to(workspace.resolve())}")
    return EXIT_OK


def add_parser(commands: Commands) -> None:
    """``evalkit export`` and its formats."""
    exporter = commands.add_parser("export", help="write a fixture in a format other IR tools read")
    formats = exporter.add_subparsers(dest="format", required=True)
    beir = formats.add_parser("beir", help="corpus.jsonl, queries.jsonl and qrels/<split>.tsv")
    beir.add_argument("--split", default="test", help="name of the qrels file (default: %(default)s)")
    trec = formats.add_parser("trec", help="corpus.jsonl, topics.jsonl or topics.tsv and qrels.txt")
    trec.add_argument(
        "--topics-format",
        choices=["jsonl", "tsv"],
        default="jsonl",
        help="tsv loses languages, tags and spans (default: %(default)s)",
    )
    _add_gains_argument(trec)
    for parser in (beir, trec):
        parser.add_argument("fixture", help="fixture directory or fixture.json")
        parser.add_argument("--output-dir", required=True, help="workspace-relative directory to write")
        parser.set_defaults(handler=export)


def _add_gains_argument(parser: argparse.ArgumentParser) -> None:
    from evalkit.data.trec import DEFAULT_QRELS_GAINS, QRELS_GAINS

    parser.add_argument(
        "--gains",
        choices=sorted(QRELS_GAINS),
        default=DEFAULT_QRELS_GAINS,
        help="relevance written in qrels.txt: raw writes each grade as it is ('evalkit import trec' reads it back "
        "into the same judgments; trec_eval's ndcg_cut is then linear-gain nDCG); exponential writes 2^g - 1 for "
        "grade g >= 1 (0 otherwise), so that trec_eval's ndcg_cut_10 reproduces evalkit's ndcg@10 "
        "(default: %(default)s)",
    )
