"""The report: contents, privacy, stable serialization and schema-version handling."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from evalkit.data.fixture import LoadedFixture
from evalkit.evaluation import Evaluation, make_providers
from evalkit.reporting.report import Report, ReportVersionError, build_report, parse_report, report_json
from evalkit.retrieval.embeddings import canonical_json, fingerprint

_HEX64 = re.compile(r"[0-9a-f]{64}")


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for key, value in node.items() for s in (key, *_strings(value))]
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    return []


def _private_values(loaded: LoadedFixture, evaluation: Evaluation) -> list[str]:
    fixture = loaded.fixture
    values = [d.title for d in fixture.documents]
    values += [c.text for c in fixture.chunks]
    values += [q.text for q in fixture.queries]
    values += [s.text for q in fixture.queries for j in q.judgments for s in j.spans if len(s.text) >= 12]
    values += [t for g in loaded.aliases.groups for t in g.terms if not t.isascii()]
    providers = make_providers(list(a.ablation for a in evaluation.ablations.values()), loaded)
    values += [fingerprint(p) for p in providers.values()]
    values += [canonical_json(dict(p.definition)).decode() for p in providers.values()]
    values.append(fixture.attribution)
    return values


def _assert_private(loaded: LoadedFixture, evaluation: Evaluation) -> None:
    serialized = report_json(build_report(evaluation)).decode("utf-8")
    assert serialized.isascii(), "a report is IDs and numbers: any non-ASCII character is leaked text"
    leaked = [value for value in _private_values(loaded, evaluation) if value in serialized]
    assert leaked == []
    known_hashes = {
        evaluation.corpus_sha256,
        evaluation.evaluation_definition_hash,
        evaluation.provider_definitions_hash,
        evaluation.projection_sha256,
    }
    for text in _strings(json.loads(serialized)):
        # Every string is short and structural: no prose can hide in a long free-text value.
        assert len(text) <= 160, text
        if _HEX64.search(text):
            assert text in known_hashes, f"unexpected hash-like value {text}"


def test_tiny_report_discloses_no_private_value(tiny: LoadedFixture, tiny_evaluation: Evaluation) -> None:
    _assert_private(tiny, tiny_evaluation)


def test_synthetic_report_discloses_no_private_value(
    synthetic: LoadedFixture, synthetic_evaluation: Evaluation
) -> None:
    _assert_private(synthetic, synthetic_evaluation)


def test_report_carries_required_fields(tiny_evaluation: Evaluation) -> None:
    report = build_report(tiny_evaluation)
    data = json.loads(report_json(report))
    for field in (
        "schema_version",
        "fixture_id",
        "fixture_version",
        "corpus_sha256",
        "evaluation_definition_hash",
        "provider_definitions_hash",
    ):
        assert field in data
    assert data["schema_version"] == 1
    assert data["corpus_sha256"] == tiny_evaluation.corpus_sha256
    hybrid = data["ablations"]["hybrid-rerank"]
    assert set(hybrid["metrics"]) == {"all", "en", "zh"}
    assert set(hybrid["metrics"]["en"]) == {
        "recall@1",
        "recall@5",
        "recall@10",
        "mrr@10",
        "ndcg@10",
        "context_precision",
        "context_recall",
        "no_answer_fpr",
    }
    assert set(hybrid["latency_ms"]) == {"count", "min_ms", "median_ms", "p95_ms", "max_ms", "mean_ms"}
    expected = tiny_evaluation.ablations["hybrid-rerank"].aggregates["zh"]["ndcg@10"]
    assert hybrid["metrics"]["zh"]["ndcg@10"] == expected


def test_failures_are_reported_by_id(tiny_evaluation: Evaluation) -> None:
    report = build_report(tiny_evaluation)
    lexical = report.ablations["lexical"]
    assert len(lexical.failures) == len(tiny_evaluation.ablations["lexical"].failures) > 0
    for failure in lexical.failures:
        assert failure.query_id in failure.message


def test_round_trip_and_stable_bytes(tiny_evaluation: Evaluation) -> None:
    report = build_report(tiny_evaluation)
    data = report_json(report)
    assert parse_report(data) == report
    assert report_json(build_report(tiny_evaluation)) == data
    assert data.endswith(b"\n")
    assert list(json.loads(data)) == sorted(json.loads(data))


@pytest.mark.parametrize("version", [0, 2, "1", None])
def test_other_schema_versions_are_refused(tiny_evaluation: Evaluation, version: object) -> None:
    data = json.loads(report_json(build_report(tiny_evaluation)))
    data["schema_version"] = version
    with pytest.raises(ReportVersionError, match="regenerate"):
        parse_report(json.dumps(data))


def test_unknown_report_fields_are_refused(tiny_evaluation: Evaluation) -> None:
    data = json.loads(report_json(build_report(tiny_evaluation)))
    data["query_texts"] = ["leak"]
    with pytest.raises(ValueError, match="invalid report"):
        parse_report(json.dumps(data))


def test_report_model_rejects_metric_outside_unit_interval(tiny_evaluation: Evaluation) -> None:
    data = json.loads(report_json(build_report(tiny_evaluation)))
    data["ablations"]["lexical"]["metrics"]["all"]["ndcg@10"] = 1.5
    with pytest.raises(ValueError):
        Report.model_validate_json(json.dumps(data))
