"""What differs between two reports besides their results, said beside a comparison (:attr:`Comparison.notes`)."""

from __future__ import annotations

from evalkit.reporting.report import Report

__all__ = ["report_notes"]


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
