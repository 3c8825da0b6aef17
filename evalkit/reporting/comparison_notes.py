"""What differs between two reports besides their results, said beside a comparison (:attr:`Comparison.notes`), and
what they must share to be compared at all."""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.data.schema import ablation_order
from evalkit.reporting.per_query import QueryIndex
from evalkit.reporting.report import Report

__all__ = ["ComparisonError", "left_out_notes", "report_notes", "shared_ablations"]


class ComparisonError(ValueError):
    """Two reports that cannot be compared query by query."""


def shared_ablations(reports: Sequence[Report], labels: Sequence[str]) -> list[str]:
    """The ablations (or runs) every report holds, in ablation order. Raises :class:`ComparisonError` when there is
    none: nothing would be compared, and a gate would pass on no evidence."""
    shared = set.intersection(*(set(r.ablations) for r in reports))
    if not shared:
        held = "; ".join(f"{name} {', '.join(r.ablations) or 'none'}" for name, r in zip(labels, reports, strict=True))
        raise ComparisonError(
            f"the reports share no ablation or run, so nothing can be compared ({held}); runs are compared by name, "
            "and a score report names a run by its TREC tag (the sixth column), else by its file name (a JSONL run): "
            "give the runs one name"
        )
    return sorted(shared, key=ablation_order)


def report_notes(base: Report, head: Report) -> tuple[str, ...]:
    """Each difference of fixture version, corpus, providers, metric definitions, statistics settings and
    evaluation definition, one line each; of reports made from run files, the evaluation definition's parts that
    differ are named, and their run files (what is compared) are not a difference."""
    notes = []
    if base.fixture_version != head.fixture_version:
        notes.append(f"fixture version differs: base {base.fixture_version}, head {head.fixture_version}")
    if base.corpus_sha256 != head.corpus_sha256:
        notes.append("the corpus differs (corpus_sha256): documents or chunks changed")
    if base.provider_definitions_hash != head.provider_definitions_hash:
        notes.append("the embedding providers differ (provider_definitions_hash)")
    if base.metrics_version != head.metrics_version:
        notes.append(
            f"the metric definitions differ: metrics_version base {base.metrics_version}, head {head.metrics_version}"
        )
    if base.statistics != head.statistics:
        notes.append("the statistics settings differ: the head report's settings are used")
    definition = _definition_note(base, head)
    if definition is not None:
        notes.append(definition)
    return tuple(notes)


def _from_run_files(report: Report) -> bool:
    """Whether `report` was made by ``evalkit score`` from run files (against qrels or a fixture): no built-in
    retrieval ran, and every system is a run file."""
    return (
        report.retrieval_settings is None
        and bool(report.ablations)
        and all(r.system is not None and r.system.kind == "run-file" for r in report.ablations.values())
    )


def _scoring_definition(report: Report) -> dict[str, str]:
    """What a report made from run files records of its evaluation definition, as text, besides the measures (see
    :func:`_measures_part`), the run files themselves (each run's hash is in the definition: two runs compared
    always differ there) and what other notes name (the judgments, which must match, the corpus, the fixture
    version and the statistics settings)."""
    floors = {r.system.abstention_floor for r in report.ablations.values() if r.system is not None}
    return {
        "tie policy (--ties)": report.tie_policy,
        "judged queries a run does not name (--missing)": report.missing_queries,
        "abstention floor (--floor)": ", ".join(sorted("none" if f is None else f"{f:g}" for f in floors)),
        "fixture": report.fixture_id if report.corpus_sha256 is not None else "none (scored against qrels)",
    }


def _measures_part(base: Report, head: Report) -> list[str]:
    """The measures one report scored and the other did not (those both scored are defined alike, or the reports
    are refused)."""
    before, after = set(base.measure_definitions()), set(head.measure_definitions())
    if before == after:
        return []
    return [
        f"measures (base only: {', '.join(sorted(before - after)) or 'none'}; head only: "
        f"{', '.join(sorted(after - before)) or 'none'})"
    ]


def _run_files(report: Report) -> dict[str, str | None]:
    return {a: None if r.system is None else r.system.sha256 for a, r in report.ablations.items()}


def _definition_note(base: Report, head: Report) -> str | None:
    """What differs in the evaluation definition, or None when it is the same or only what a comparison compares
    (the run files) or another note names differs."""
    if base.evaluation_definition_hash == head.evaluation_definition_hash:
        return None
    if not (_from_run_files(base) and _from_run_files(head)):
        return (
            "the evaluation definition differs (evaluation_definition_hash): retrieval settings, ablation "
            "definitions, providers, corpus, metric or analyzer version"
        )
    before, after = _scoring_definition(base), _scoring_definition(head)
    parts = _measures_part(base, head)
    parts += [f"{name}: base {before[name]}, head {after[name]}" for name in before if before[name] != after[name]]
    if parts:
        return f"the evaluation definition differs (evaluation_definition_hash): {'; '.join(parts)}"
    named = (base.corpus_sha256, base.fixture_version, base.statistics) != (
        head.corpus_sha256,
        head.fixture_version,
        head.statistics,
    )
    if named or _run_files(base) != _run_files(head):
        return None
    return (
        "the evaluation definition differs (evaluation_definition_hash), though nothing the reports record of it "
        "does: were they written by different evalkit versions?"
    )


def left_out_notes(reports: Sequence[Report], labels: Sequence[str], shared: QueryIndex) -> list[str]:
    """A note for each report holding queries some other report does not (left out of the comparison, which reads
    the `shared` queries), naming the reports they are missing from and why, as those reports record it: scored
    with ``--missing skip`` (a judged query a run does not name is left out); else the queries have no judgments (a
    fixture's no-answer queries, which TREC qrels cannot hold), unless some of them have relevant judgments. (A
    calibrated report evaluates only its evaluation part, so its judgments hash differs from a full report's and
    the two are not compared at all.)"""
    kept = set(shared.query_ids)
    notes = []
    for label, report in zip(labels, reports, strict=True):
        extra = {q for q in report.queries.query_ids if q not in kept}
        if not extra:
            continue
        lacking = [(n, r) for n, r in zip(labels, reports, strict=True) if not extra <= set(r.queries.query_ids)]
        reasons = [
            f"{n} was scored with --missing skip, which leaves out each query one of its runs does not name"
            for n, r in lacking
            if r.missing_queries == "skip"
        ]
        judged = sum(a for q, a in zip(report.queries.query_ids, report.queries.answerable, strict=True) if q in extra)
        missing_from = ", ".join(n for n, _ in lacking)
        if reasons:
            what = f"{len(extra)} query(ies) of {label} are not in {missing_from} ({'; '.join(reasons)})"
        elif not judged:
            what = f"{len(extra)} query(ies) of {label} without judgments are not in {missing_from}"
        else:
            what = f"{len(extra)} query(ies) of {label} ({judged} with relevant judgments) are not in {missing_from}"
        notes.append(f"{what}: left out of the comparison")
    return notes
