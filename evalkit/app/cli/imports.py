"""``evalkit import``: a SQuAD file, a BEIR folder or TREC files read into a fixture, every repair and skip reported."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ValidationError

from evalkit.app.cli.options import EXIT_OK, Commands, add_input_limit, max_bytes
from evalkit.common.output import refuse_input_overwrite, refuse_non_empty_folder, resolve_output_path, write_atomic
from evalkit.data.collection import COLLECTION_KINDS, CollectionOptions
from evalkit.data.fixture import FIXTURE_FILE, Fixture, fixture_json
from evalkit.data.inputs import clip
from evalkit.data.repairs import KIND_ACTIONS, SQUAD_KINDS, RepairKind, RepairLog, RepairPolicy
from evalkit.data.schema import validation_problems

if TYPE_CHECKING:
    from evalkit.data.schema import Language
    from evalkit.data.squad import SquadDataset
    from evalkit.data.squad.languages import TextKind

Options = TypeVar("Options", bound=BaseModel)


def _repair_log(args: argparse.Namespace) -> RepairLog:
    """The repair log of an import, with the policy of its ``--strict`` and ``--on-<kind>`` flags."""
    chosen = {kind: getattr(args, f"on_{kind}") for kind in KIND_ACTIONS if hasattr(args, f"on_{kind}")}
    if args.strict:
        return RepairLog(RepairPolicy.strict())
    return RepairLog(RepairPolicy.from_choices({k: v for k, v in chosen.items() if v is not None}))


def _import_outputs(output_dir: str, inputs: Sequence[Path]) -> tuple[Path, Path]:
    """The fixture and ``import_summary.json`` paths an import writes into the workspace-relative `output_dir`,
    checked before anything is read: refused when unsafe, when either is one of the import's `inputs`, or when the
    folder exists and is not empty (as ``evalkit labels merge`` refuses it: a fixture.json written beside another
    fixture's baselines.json or gates.json would be checked against them)."""
    from evalkit.data.repairs import SUMMARY_FILE

    targets = []
    for name in (FIXTURE_FILE, SUMMARY_FILE):
        requested = f"{output_dir.rstrip('/')}/{name}"
        target = resolve_output_path(requested, Path.cwd())
        refuse_input_overwrite(target, inputs, requested)
        targets.append(target)
    refuse_non_empty_folder(output_dir, targets[0].parent)  # after the input checks, whose refusal says more
    return targets[0], targets[1]


def _write_import(fixture: Fixture, log: RepairLog, source_format: str, outputs: tuple[Path, Path]) -> int:
    """Write the fixture and its import summary to `outputs` (from :func:`_import_outputs`); print both."""
    from evalkit.data.repairs import ImportSummary, format_import_summary, write_import_summary

    workspace = Path.cwd().resolve()
    target, summary_path = outputs
    answerable = sum(1 for q in fixture.queries if q.answerable)
    summary = ImportSummary.model_validate(
        {
            "source_format": source_format,
            "documents": len(fixture.documents),
            "chunks": len(fixture.chunks),
            "queries": len(fixture.queries),
            "answerable": answerable,
            "repairs": log.repairs(),
        }
    )
    write_atomic(target, fixture_json(fixture))
    write_import_summary(summary, summary_path.parent)
    no_answer = len(fixture.queries) - answerable
    print(
        f"wrote {target.relative_to(workspace)}: {len(fixture.documents)} documents, "
        f"{len(fixture.chunks)} chunks, {answerable} answerable and {no_answer} no-answer queries"
    )
    print(format_import_summary(summary))
    print(f"summary written to {summary_path.relative_to(workspace)}")
    return EXIT_OK


def _add_policy_flags(parser: argparse.ArgumentParser, kinds: Sequence[RepairKind]) -> None:
    """``--strict``, ``--on-<kind> ACTION`` for each of `kinds` and ``--allow-links-in-text``."""
    parser.add_argument("--strict", action="store_true", help="fail on every kind of problem (no repairs or skips)")
    for kind in kinds:
        actions, meaning = KIND_ACTIONS[kind]
        parser.add_argument(
            "--on-" + kind.replace("_", "-"),
            choices=actions,
            default=None,
            help=f"{meaning} (default: {actions[0]})",
        )
    parser.add_argument(
        "--allow-links-in-text",
        action="store_true",
        help="keep links, host names and paths in chunk and query text (credentials are always refused; "
        "default: refuse them)",
    )


def _import_squad(args: argparse.Namespace) -> int:
    from evalkit.data.squad import SquadImportOptions, import_cross_lingual, import_squad, read_squad

    options = _import_options(SquadImportOptions, args)
    if args.repair_window < 0:
        raise ValueError(f"--repair-window must be at least 0, got {args.repair_window}")
    inputs = [Path(args.input)] + ([] if args.questions is None else [Path(args.questions)])
    outputs = _import_outputs(args.output_dir, inputs)
    log = _repair_log(args)
    corpus = read_squad(Path(args.input), log, args.repair_window, max_bytes(args))
    if args.questions is None:
        _language_note(args.input, corpus, args.language, "--language", ("questions", "contexts"))
        fixture = import_squad(corpus, options, log)
    elif args.question_language is None:
        raise ValueError("--questions needs --question-language")
    else:
        questions = read_squad(Path(args.questions), log, args.repair_window, max_bytes(args))
        _language_note(args.input, corpus, args.language, "--language", ("contexts",))
        _language_note(args.questions, questions, args.question_language, "--question-language", ("questions",))
        fixture = import_cross_lingual(questions, corpus, args.question_language, options, log)
    return _write_import(fixture, log, "squad", outputs)


def _language_note(path: str, dataset: SquadDataset, language: Language, flag: str, kinds: Sequence[TextKind]) -> None:
    """Print a note on stderr when most of the file's sampled `kinds` read as the other language (not a refusal)."""
    from evalkit.data.squad.languages import language_note

    note = language_note(dataset, language, flag, kinds)
    if note is not None:
        print(f"note: {clip(path)}: {note}", file=sys.stderr)


def _import_options(model: type[Options], args: argparse.Namespace) -> Options:
    """The import options of `model` from the flags named like its fields, each problem naming its ``--option`` (no
    raw pydantic dump)."""
    values = {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = validation_problems(exc, None, _option_named)
        raise ValueError("invalid import option(s): " + "; ".join(problems)) from None


def _option_named(raw: object, loc: tuple[int | str, ...]) -> str:
    del raw  # the option is the whole description
    return f"--{str(loc[0]).replace('_', '-')}" if loc else "--options"


def add_parser(commands: Commands) -> None:
    """``evalkit import`` and its formats."""
    importer = commands.add_parser("import", help="import a dataset into a fixture")
    formats = importer.add_subparsers(dest="format", required=True)
    squad = formats.add_parser("squad", help="a SQuAD v1.1/v2.0 file (XQuAD included) into a fixture directory")
    squad.add_argument("input", help="SQuAD JSON file: the corpus (and the questions, unless --questions)")
    squad.add_argument("--output-dir", required=True, help="workspace-relative fixture directory to write")
    squad.add_argument("--fixture-id", required=True, help="ID of the new fixture")
    squad.add_argument("--fixture-version", default="1.0.0", help="version of the new fixture (default: %(default)s)")
    squad.add_argument("--language", required=True, choices=["en", "zh"], help="language of the corpus file")
    squad.add_argument("--questions", default=None, help="cross-lingual: take the questions from this parallel file")
    squad.add_argument("--question-language", choices=["en", "zh"], help="language of --questions")
    squad.add_argument("--chunking", choices=["paragraph", "sentence"], default="paragraph", help="chunk unit")
    squad.add_argument("--max-sentences", type=int, default=3, help="sentence chunking: sentences per chunk")
    squad.add_argument(
        "--held-out-fraction", type=float, default=0.1, help="gold paragraphs removed; their questions get no answer"
    )
    squad.add_argument("--seed", type=int, default=0, help="seed of the held-out choice (default: %(default)s)")
    squad.add_argument("--max-articles", type=int, default=None, help="first N articles only")
    squad.add_argument("--license", required=True, help="SPDX licence of the source, e.g. CC-BY-SA-4.0")
    squad.add_argument("--attribution", required=True, help="source and attribution, carried into the fixture")
    squad.add_argument(
        "--repair-window",
        type=int,
        default=8,
        help="an answer found this many characters from its offset is moved there (default: %(default)s)",
    )
    squad.add_argument(
        "--private-paragraphs",
        choices=["error", "hold_out"],
        default="error",
        help="a paragraph the privacy rules refuse: fail, or remove it like a held-out one (default: %(default)s)",
    )
    _add_policy_flags(squad, SQUAD_KINDS)
    add_input_limit(squad)
    squad.set_defaults(handler=_import_squad)
    _add_collection_import_parsers(formats)


def _import_beir(args: argparse.Namespace) -> int:
    from evalkit.data.beir import CORPUS_FILE, QUERIES_FILE, read_beir

    root = Path(args.input)
    outputs = _import_outputs(
        args.output_dir, [root / CORPUS_FILE, root / QUERIES_FILE, root / "qrels" / f"{args.split}.tsv"]
    )
    log = _repair_log(args)
    fixture = read_beir(root, args.split, _import_options(CollectionOptions, args), log, max_bytes(args))
    return _write_import(fixture, log, "beir", outputs)


def _import_trec(args: argparse.Namespace) -> int:
    from evalkit.data.trec import read_trec

    qrels, topics, corpus = Path(args.qrels), Path(args.topics), Path(args.corpus)
    outputs = _import_outputs(args.output_dir, [qrels, topics, corpus])
    log = _repair_log(args)
    fixture = read_trec(qrels, topics, corpus, _import_options(CollectionOptions, args), log, max_bytes(args))
    return _write_import(fixture, log, "trec", outputs)


def _add_collection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-dir", required=True, help="workspace-relative fixture directory to write")
    parser.add_argument("--fixture-id", required=True, help="ID of the new fixture")
    parser.add_argument("--fixture-version", default="1.0.0", help="version of the new fixture (default: %(default)s)")
    parser.add_argument("--license", required=True, help="SPDX licence of the source, e.g. CC-BY-SA-4.0")
    parser.add_argument("--attribution", required=True, help="source and attribution, carried into the fixture")
    parser.add_argument(
        "--language",
        choices=["en", "zh", "auto"],
        default="auto",
        help="language of records without metadata.language; auto: per record, zh when it has Han characters and "
        "at least two per Latin word (default: %(default)s)",
    )
    parser.add_argument(
        "--unjudged-queries",
        choices=["no-answer", "skip"],
        default="no-answer",
        help="a query without any qrel becomes a no-answer query, or is left out (default: %(default)s)",
    )
    _add_policy_flags(parser, COLLECTION_KINDS)


def _add_collection_import_parsers(formats: Commands) -> None:
    beir = formats.add_parser("beir", help="a BEIR directory (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    beir.add_argument("input", help="the BEIR directory")
    beir.add_argument("--split", default="test", help="qrels/<split>.tsv to read (default: %(default)s)")
    _add_collection_flags(beir)
    add_input_limit(beir)
    beir.set_defaults(handler=_import_beir)
    trec = formats.add_parser("trec", help="TREC qrels + topics (TSV or JSONL) + a JSONL corpus")
    trec.add_argument("--qrels", required=True, help="TREC qrels file: query-id iteration doc-id relevance")
    trec.add_argument("--topics", required=True, help="topics: .tsv (query-id<TAB>text) or JSONL")
    trec.add_argument("--corpus", required=True, help="JSONL corpus: _id, title, text, metadata")
    _add_collection_flags(trec)
    add_input_limit(trec)
    trec.set_defaults(handler=_import_trec)
