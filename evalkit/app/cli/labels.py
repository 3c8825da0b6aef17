"""``evalkit labels``: two reviewers' label files compared (``agree``) and merged into a new fixture version
(``merge``).

``evalkit labels agree A B --fixture DIR`` prints raw agreement, Krippendorff's alpha (ordinal), Cohen's kappa
(quadratic), span F1 and every disagreement, overall and per query language (:mod:`evalkit.measures.agreement`);
``--format json`` prints the JSON and ``--output`` writes it. ``evalkit labels merge --fixture DIR A B --version
X.Y.Z --output-dir NEW`` writes the merged fixture (:mod:`evalkit.data.label_merge`) with copies of the source's
aliases, gates and licence files. Every input is read and checked, and every output path vetted, before anything is
written, so a refusal writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.app.cli.options import EXIT_OK, Commands, add_input_limit, fixture_inputs, max_bytes
from evalkit.common.output import refuse_input_overwrite, refuse_non_empty_folder, resolve_output_path, write_atomic
from evalkit.data.fixture import ALIASES_FILE, FIXTURE_FILE, Fixture, fixture_json, load_fixture
from evalkit.data.inputs import clip, read_input_bytes
from evalkit.data.label_merge import (
    DEFAULT_OVERLAP_BOUND,
    check_overlap_bound,
    merge_labels,
    overruled_no_answers,
    reviewer_pair,
)
from evalkit.data.labels import LabelDecision, read_labels
from evalkit.data.schema import model_json
from evalkit.measures.agreement import (
    Agreement,
    Disagreement,
    SliceAgreement,
    Statistic,
    agreement,
    answers_of_no_answer_queries,
    reading,
)
from evalkit.reporting.gate_specs import BASELINES_FILE, GATES_FILE

__all__ = ["COPIED_FILES", "add_parser", "format_agreement"]

COPIED_FILES = (ALIASES_FILE, GATES_FILE, "LICENSE")
"""The files of the source fixture folder a merge copies, when present. ``baselines.json`` is not copied: it holds
the figures of the old version, which ``evalkit validate`` refuses for the new one (``evalkit baseline --write``
makes the new version's)."""


def _read(path: str, fixture: Fixture, limit: int) -> tuple[LabelDecision, ...]:
    return read_labels(Path(path), fixture, limit)


def _figure(statistic: Statistic) -> str:
    return "-" if statistic.value is None else f"{statistic.value:.4f}"


def _notes(name: str, row: SliceAgreement) -> list[str]:
    figures = {
        "raw agreement": row.raw_agreement,
        "alpha": row.krippendorff_alpha_ordinal,
        "kappa": row.cohen_kappa_quadratic,
        "span F1": row.span_f1_exact,
    }
    return [f"  {name} {what}: {s.reason}" for what, s in figures.items() if s.reason is not None]


def format_agreement(result: Agreement, reviewers: tuple[str, str], bound: float) -> str:
    """The agreement as text: a table per slice, the notes on degenerate figures, the confusion matrix and every
    disagreement (IDs, grades and offsets only: no text of the fixture)."""
    slices: list[tuple[str, SliceAgreement]] = [("all", result), *sorted(result.by_language.items())]
    header = f"{'slice':<6}{'pairs':>7}{'raw':>9}{'alpha':>9}{'kappa':>9}{'span F1':>9}{'overlap':>9}  reading"
    lines = [f"agreement of {reviewers[0]!r} (A) and {reviewers[1]!r} (B), span overlap bound {bound:g}", header]
    for name, row in slices:
        lines.append(
            f"{name:<6}{row.pairs:>7}{_figure(row.raw_agreement):>9}{_figure(row.krippendorff_alpha_ordinal):>9}"
            f"{_figure(row.cohen_kappa_quadratic):>9}{_figure(row.span_f1_exact):>9}{_figure(row.span_f1_overlap):>9}"
            f"  {reading(row.krippendorff_alpha_ordinal.value, row.krippendorff_alpha_ordinal.reason)}"
        )
    notes = [note for name, row in slices for note in _notes(name, row)]
    if notes:
        lines += ["notes:", *notes]
    lines += ["confusion (rows: A's grade 0-3, columns: B's grade 0-3):"]
    lines += [f"  {grade}: " + " ".join(f"{count:>5}" for count in row) for grade, row in enumerate(result.confusion)]
    lines.append(f"disagreements: {len(result.disagreements)}")
    lines += [_pair_line(d) for d in result.disagreements]
    if result.one_sided:
        lines.append(f"decided by one reviewer only: {len(result.one_sided)} (a merge needs each adjudicated)")
        lines += [_pair_line(d) for d in result.one_sided]
    return "\n".join(lines) + "\n"


def _pair_line(d: Disagreement) -> str:
    """One pair of the listing: IDs, both grades (``-`` for a reviewer who did not decide it) and spans."""
    overlap = "" if d.span_f1_overlap is None else f", overlap F1 {d.span_f1_overlap:.2f}"
    grades = " / ".join("-" if grade is None else str(grade) for grade in (d.grade_a, d.grade_b))
    spans = " / ".join(str([list(s) for s in spans]) for spans in (d.spans_a, d.spans_b))
    return f"  {d.query_id} {d.chunk_id} [{d.language}]: grade {grades}, spans {spans}{overlap}"


def agree(args: argparse.Namespace) -> int:
    """``evalkit labels agree``: both files read and checked, the agreement printed (and written with --output)."""
    bound = check_overlap_bound(args.overlap_bound)
    limit = max_bytes(args)
    fixture = load_fixture(Path(args.fixture), limit).fixture
    first, second = _read(args.a, fixture, limit), _read(args.b, fixture, limit)
    result = agreement(first, second, fixture, bound)
    data = model_json(result)
    target = resolve_output_path(args.output, Path.cwd()) if args.output is not None else None
    if target is not None:
        inputs = [*fixture_inputs(Path(args.fixture)), Path(args.a), Path(args.b)]
        refuse_input_overwrite(target, inputs, args.output)
    reviewers = (first[0].reviewer if first else clip(args.a), second[0].reviewer if second else clip(args.b))
    print(data.decode("utf-8") if args.format == "json" else format_agreement(result, reviewers, bound), end="")
    answers = answers_of_no_answer_queries(first, second, fixture)
    if answers:  # no disagreement of theirs, yet what a merge refuses until the adjudicator grades them
        print(
            f"note: {len(answers)} chunk(s) the fixture answers a query with that a reviewer called unanswered "
            "(a pool does not show chunks already judged): the adjudicator grades them, 1-3 to overrule the no-answer "
            "decision, 0 to keep it; first: " + ", ".join(f"{d.query_id}/{d.chunk_id}" for d in answers[:3]),
            file=sys.stderr if args.format == "json" else sys.stdout,
        )
    if target is not None:
        write_atomic(target, data)
        stream = sys.stderr if args.format == "json" else sys.stdout  # stdout stays one JSON document
        print(f"agreement written to {target.relative_to(Path.cwd().resolve())}", file=stream)
    return EXIT_OK


def _outputs(args: argparse.Namespace, merged: Fixture, source: Path, limit: int) -> dict[Path, bytes]:
    """Every file the merge writes, by vetted target: the merged fixture.json and the copied files."""
    folder = source if source.is_dir() else source.parent
    files = {FIXTURE_FILE: fixture_json(merged)}
    for name in COPIED_FILES:
        if (folder / name).exists():
            files[name] = read_input_bytes(folder / name, limit)
    inputs = [*fixture_inputs(source), *(Path(p) for p in (args.a, args.b, args.adjudicated) if p is not None)]
    targets: dict[Path, bytes] = {}
    for name, data in files.items():
        requested = f"{args.output_dir.rstrip('/')}/{name}"
        target = resolve_output_path(requested, Path.cwd())
        refuse_input_overwrite(target, inputs, requested)
        refuse_non_empty_folder(args.output_dir, target.parent)
        targets[target] = data
    return targets


def merge(args: argparse.Namespace) -> int:
    """``evalkit labels merge``: every file read and the merge checked, then the new fixture folder written."""
    bound = check_overlap_bound(args.overlap_bound)
    limit = max_bytes(args)
    source = Path(args.fixture)
    fixture = load_fixture(source, limit).fixture
    first, second = _read(args.a, fixture, limit), _read(args.b, fixture, limit)
    adjudicated = None if args.adjudicated is None else _read(args.adjudicated, fixture, limit)
    merged = merge_labels(fixture, first, second, adjudicated, args.version, bound)
    targets = _outputs(args, merged, source, limit)
    workspace = Path.cwd().resolve()
    for target, data in targets.items():
        write_atomic(target, data)
        print(f"wrote {target.relative_to(workspace)}")
    left, right = reviewer_pair(first, second)
    judged = {d.key: d for d in adjudicated or ()}
    overruled = overruled_no_answers(left, right, judged)
    pairs = (left.keys() | right.keys() | judged.keys()) - overruled
    decisions = sum((key in left) + (key in right) for key in overruled)  # both reviewers' when both made it
    dropped = f"; {decisions} no-answer decision(s) dropped, the adjudicator having graded a chunk of the query"
    print(
        f"fixture {merged.fixture_id} {merged.fixture_version} (from {fixture.fixture_version}): {len(pairs)} "
        f"pair(s) merged, {len(judged)} of them adjudicated" + (dropped if overruled else "")
    )
    folder = source if source.is_dir() else source.parent
    if (folder / BASELINES_FILE).exists():
        print(f"{BASELINES_FILE} not copied (it holds the old version's figures): run `evalkit baseline --write`")
    return EXIT_OK


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fixture", required=True, help="the fixture directory (or fixture.json) labelled")
    parser.add_argument(
        "--overlap-bound",
        type=float,
        default=DEFAULT_OVERLAP_BOUND,
        help="spans of one pair agree when their token-level F1 is at least this, in [0, 1] (default: %(default)s)",
    )
    add_input_limit(parser)


def add_parser(commands: Commands) -> None:
    """``evalkit labels agree`` and ``evalkit labels merge``."""
    labels = commands.add_parser("labels", help="compare two reviewers' label files, or merge them into a fixture")
    actions = labels.add_subparsers(dest="action", required=True)
    agreeing = actions.add_parser("agree", help="agreement of two reviewers' label files, and their disagreements")
    agreeing.add_argument("a", metavar="A", help="reviewer A's label file (JSON lines)")
    agreeing.add_argument("b", metavar="B", help="reviewer B's label file (JSON lines)")
    _add_common(agreeing)
    agreeing.add_argument("--format", choices=("text", "json"), default="text", help="what is printed")
    agreeing.add_argument("--output", default=None, help="write the agreement as JSON to this workspace-relative path")
    agreeing.set_defaults(handler=agree)
    merging = actions.add_parser("merge", help="merge two reviewers' (and an adjudicator's) labels into a fixture")
    merging.add_argument("a", metavar="A", help="reviewer A's label file (JSON lines)")
    merging.add_argument("b", metavar="B", help="reviewer B's label file (JSON lines)")
    _add_common(merging)
    merging.add_argument("--adjudicated", default=None, help="the adjudicator's label file: its decisions win")
    merging.add_argument("--version", required=True, help="the new fixture_version, MAJOR.MINOR.PATCH")
    merging.add_argument("--output-dir", required=True, help="workspace-relative folder to write (new or empty)")
    merging.set_defaults(handler=merge)
