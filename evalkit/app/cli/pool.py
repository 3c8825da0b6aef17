"""``evalkit pool``: the unjudged (query, document) pairs in the union of the runs' top k, to be labelled.

The judgments come from qrels (``--qrels``, TREC or BEIR, languages from ``--topics``) or from a fixture
(``--fixture``: every query kept, no-answer ones too, with its language); each run is read by the columnar run
reader, one at a time as the pool takes it. The pool (:func:`evalkit.runs.pools.build_pool`) goes out as JSON
lines, to ``--output`` (written atomically, a workspace-relative path) or to stdout; what each run adds and its
``judged@k`` today and once labelled go to stdout with ``--output``, to stderr without. Every input is read and the
pool built before anything is written, so a refusal writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from evalkit.app.cli.options import Commands, add_ties_argument, fixture_inputs, megabytes
from evalkit.app.cli.options import max_bytes as input_limit
from evalkit.common.output import refuse_input_overwrite, resolve_output_path, write_atomic
from evalkit.data.fixture import load_fixture
from evalkit.data.inputs import clip
from evalkit.data.loading import load_languages, load_qrels
from evalkit.data.qrels import Qrels
from evalkit.data.run_stream import run_file_name
from evalkit.data.runs import Run, read_run
from evalkit.data.schema import is_identifier
from evalkit.data.tables import DEFAULT_MAX_TABLE_BYTES
from evalkit.runs.fixture_runs import fixture_qrels
from evalkit.runs.pools import build_pool, format_pool_counts, pool_jsonl

__all__ = ["add_parser", "pool_runs"]


def _judgments(args: argparse.Namespace) -> tuple[Qrels, Mapping[str, str], list[Path]]:
    """The judgments as qrels, each query's language where known, and the files they came from."""
    if (args.qrels is None) == (args.fixture is None):
        raise ValueError("give --qrels FILE or --fixture DIR (exactly one)")
    if args.fixture is not None:
        if args.topics is not None:
            raise ValueError("--topics goes with --qrels (a fixture's queries carry their language)")
        fixture = load_fixture(Path(args.fixture), input_limit(args)).fixture
        return (
            fixture_qrels(fixture),
            {q.query_id: q.language for q in fixture.queries},
            fixture_inputs(Path(args.fixture)),
        )
    table_limit = input_limit(args, DEFAULT_MAX_TABLE_BYTES)
    qrels = load_qrels(Path(args.qrels), table_limit)
    topics = [] if args.topics is None else [Path(args.topics)]
    languages = load_languages(None if args.topics is None else Path(args.topics), table_limit)
    return qrels, languages, [Path(args.qrels), *topics]


def _runs(paths: list[str], max_bytes: int) -> Iterator[Run]:
    """Each run file read by the columnar reader when the pool asks for it (one run held at a time); the same file
    twice is refused at once. Two files holding runs of one name (a base and a head that `evalkit compare` paired by
    that name) are both pooled: a later one takes its file name, or failing that its name and its place among the
    runs (``hybrid-2``), with a note on stderr."""
    given = [Path(p).resolve() for p in paths]
    twice = sorted({str(p) for p in given if given.count(p) > 1})
    if twice:
        raise ValueError(f"the same run file is given twice: {clip(twice[0])}")
    return _named_apart(paths, max_bytes)


def _named_apart(paths: list[str], max_bytes: int) -> Iterator[Run]:
    names = [run_file_name(Path(p), max_bytes) for p in paths]  # a first line each: the names every run carries
    taken, seen = set(names), set()
    for place, (path, name) in enumerate(zip(paths, names, strict=True), start=1):
        run = read_run(Path(path), max_bytes)
        if name in seen:
            stem = Path(path).name.split(".")[0]
            apart, suffix = (stem if is_identifier(stem) and stem not in taken else f"{name}-{place}"), place
            while apart in taken:
                suffix += 1
                apart = f"{name}-{suffix}"
            print(
                f"note: run {place} ({clip(path)}) is pooled as {apart!r}: {name!r} names an earlier run",
                file=sys.stderr,
            )
            taken.add(apart)
            run = replace(run, name=apart)
        seen.add(name)
        yield run


def pool_runs(args: argparse.Namespace) -> int:
    """``evalkit pool``: read everything, build the pool, then print or write it (nothing written on refusal)."""
    if args.depth < 1:
        raise ValueError(f"--depth must be at least 1, got {args.depth}")
    workspace = Path.cwd()
    qrels, languages, inputs = _judgments(args)
    target = None
    if args.output is not None:  # $GOODBUDDY_RETRIEVAL_EVAL_OUTPUT names a report, not a pool: not read here
        target = resolve_output_path(args.output, workspace)
        refuse_input_overwrite(target, [*inputs, *(Path(r) for r in args.run)], args.output)
    runs = _runs(args.run, input_limit(args, DEFAULT_MAX_TABLE_BYTES))
    pool = build_pool(qrels, runs, args.depth, args.ties)
    data = pool_jsonl(pool, languages, chunk_ids=args.fixture is not None)
    counts = format_pool_counts(pool)
    if target is None:
        sys.stdout.write(data.decode("utf-8"))
        sys.stdout.flush()
        print(counts, file=sys.stderr)
        return 0
    write_atomic(target, data)
    print(f"{counts}\nwrote {clip(args.output)}")
    return 0


def add_parser(commands: Commands) -> None:
    """``evalkit pool`` and its options."""
    parser = commands.add_parser(
        "pool", help="the unjudged pairs in the union of the runs' top k, as JSON lines to label (a pool)"
    )
    parser.add_argument("--qrels", default=None, help="TREC or BEIR qrels, optionally .gz (or give --fixture)")
    parser.add_argument("--fixture", default=None, help="fixture directory whose judgments are pooled against")
    parser.add_argument(
        "--run", action="append", required=True, help="run file: .jsonl is JSONL, anything else TREC (repeatable)"
    )
    parser.add_argument("--depth", type=int, required=True, metavar="K", help="pool each run's top K results")
    add_ties_argument(parser)
    parser.add_argument(
        "--topics", default=None, help="with --qrels: TSV or JSONL topics, for each pair's language (default: none)"
    )
    parser.add_argument(
        "--output",
        default=None,
        help="workspace-relative path the JSON lines are written to, atomically (default: stdout)",
    )
    parser.add_argument(
        "--max-input-mb",
        type=megabytes,
        default=None,
        help=f"refuse a qrels, run or topics file larger than this (default: {DEFAULT_MAX_TABLE_BYTES // 2**20} MiB)",
    )
    parser.set_defaults(handler=pool_runs)
