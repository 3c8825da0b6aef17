"""What differs between two reports besides their results, said beside a comparison (:attr:`Comparison.notes`), and
what they must share to be compared at all."""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.data.schema import ablation_order
from evalkit.reporting.report import Report

__all__ = ["ComparisonError", "report_notes", "shared_ablations"]


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
            "and a score report names a run by its TREC tag (the sixth column) or its JSONL run key: give the runs "
            "one name"
        )
    return sorted(shared, key=ablation_order)


def report_notes(base: Report, head: Report) -> tuple[str, ...]:
    """Each difference of fixture version, corpus, providers, metric definitions, statistics settings and
    evaluation definition, one line each."""
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
    if base.evaluation_definition_hash != head.evaluation_definition_hash:
        notes.append(
            "the evaluation definition differs (evaluation_definition_hash): retrieval settings, ablation "
            "definitions, providers, corpus, metric or analyzer version"
        )
    return tuple(notes)
