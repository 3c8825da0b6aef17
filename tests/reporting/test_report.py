"""The report: contents, privacy, stable serialization and schema-version handling."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest

from evalkit.common.hashing import canonical_json
from evalkit.data.fixture import LoadedFixture
from evalkit.data.judgments import fixture_judgments, judgments_sha256
from evalkit.measures.core import score_companions
from evalkit.measures.ties import order_ranking
from evalkit.reporting.build import build_report
from evalkit.reporting.per_query import QueryIndex
from evalkit.reporting.report import Report, ReportVersionError, parse_report, report_json
from evalkit.retrieval.embeddings import fingerprint
from evalkit.runs.evaluation import Evaluation, make_providers

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
        judgments_sha256(fixture_judgments(evaluation.fixture)),
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
    assert data["schema_version"] == 2
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
        # beside them: the unjudged share of the top 10, and the condensed-list forms compare's holes check reads
        "judged@10",
        "unj@10",
        "condensed_recall@1",
        "condensed_recall@5",
        "condensed_recall@10",
        "condensed_mrr@10",
        "condensed_ndcg@10",
    }
    assert data["companions"] == [
        "condensed_recall@1",
        "condensed_recall@5",
        "condensed_recall@10",
        "condensed_mrr@10",
        "condensed_ndcg@10",
    ]
    assert hybrid["unjudged"]["k"] == 10 and len(hybrid["unjudged"]["per_query"]) == len(data["queries"]["query_ids"])
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


_SCALAR = r'(?:-?[0-9][0-9.eE+-]*|null|true|false|"[A-Za-z0-9._:-]*")'
_FLAT_ARRAY = re.compile(rf"\[\s+({_SCALAR}(?:,\s+{_SCALAR})*)\s+\]")


def test_report_bytes_are_indented_json_with_flat_arrays_on_one_line(synthetic_evaluation: Evaluation) -> None:
    # The layout as json.dumps writes it (sorted keys, indent 2), with every array of numbers and IDs joined onto one
    # line: what reports have always looked like, now written without a pass of the pure-Python encoder.
    report = build_report(synthetic_evaluation)
    text = json.dumps(report.model_dump(mode="json"), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    flat = _FLAT_ARRAY.sub(lambda match: "[" + re.sub(r",\s+", ",", match.group(1)) + "]", text)
    assert report_json(report).decode("utf-8") == flat


@pytest.mark.parametrize("version", [0, 1, 3, "2", None])
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


def test_per_query_values_are_columns_aligned_with_the_query_index(tiny_evaluation: Evaluation) -> None:
    report = build_report(tiny_evaluation)
    index = report.queries
    assert list(index.query_ids) == sorted(q.query_id for q in tiny_evaluation.fixture.queries)
    result = tiny_evaluation.ablations["lexical"]
    queries = {q.query_id: q for q in tiny_evaluation.fixture.queries}
    columns = report.ablations["lexical"].per_query
    companions, counts = score_companions(
        [queries[q] for q in index.query_ids],
        [order_ranking(tuple(zip(r.chunk_ids, r.scores, strict=True))) for r in result.results],
    )
    unjudged = report.ablations["lexical"].unjudged
    assert unjudged is not None and unjudged.per_query == tuple(counts[q] for q in index.query_ids)
    for row, query_id in enumerate(index.query_ids):
        for measure, column in columns.items():
            expected = {**result.per_query[query_id], **companions[query_id]}.get(measure)
            assert column[row] == (None if expected is None else round(expected, 6)), (query_id, measure)
    assert sum(v is not None for v in columns["no_answer_fpr"]) == index.answerable.count(False)


def test_every_aggregate_has_an_interval_around_it(synthetic_evaluation: Evaluation) -> None:
    report = build_report(synthetic_evaluation)
    for ablation_id, ablation in report.ablations.items():
        assert set(ablation.intervals) == set(ablation.metrics)
        for slice_name, row in ablation.metrics.items():
            # the condensed companions are read per query by compare's holes check, and carry no interval
            shown = {m: v for m, v in row.items() if m not in report.companions}
            assert set(ablation.intervals[slice_name]) == set(shown), (ablation_id, slice_name)
            for measure, value in shown.items():
                low, high = ablation.intervals[slice_name][measure]
                assert low - 1e-9 <= value <= high + 1e-9, (ablation_id, slice_name, measure)
    rerank = report.ablations["hybrid-rerank"].intervals["all"]["ndcg@10"]
    assert 0.0 < rerank[1] - rerank[0] < 0.3, "85 queries give an informative, non-degenerate interval"


def test_misaligned_per_query_columns_are_refused_naming_ablation_and_measure(tiny_evaluation: Evaluation) -> None:
    data = json.loads(report_json(build_report(tiny_evaluation)))
    data["ablations"]["lexical"]["per_query"]["ndcg@10"].pop()
    with pytest.raises(ValueError, match=r"ablation lexical: per_query\['ndcg@10'\] has"):
        parse_report(json.dumps(data))
    data = json.loads(report_json(build_report(tiny_evaluation)))
    column = data["ablations"]["lexical"]["per_query"]["no_answer_fpr"]
    data["ablations"]["lexical"]["per_query"]["no_answer_fpr"] = [0.0 if v is None else v for v in column]
    with pytest.raises(ValueError, match="value present for query"):
        parse_report(json.dumps(data))


def test_a_version_1_report_is_refused_with_how_to_regenerate(tiny_evaluation: Evaluation) -> None:
    data = json.loads(report_json(build_report(tiny_evaluation)))
    data["schema_version"] = 1
    with pytest.raises(
        ReportVersionError, match=r"reads 2\); regenerate it with the command that made it \(`evalkit run --output"
    ):
        parse_report(json.dumps(data))


def test_a_20000_query_report_stays_a_few_megabytes(tiny_evaluation: Evaluation) -> None:
    report = build_report(tiny_evaluation)
    n = 20_000
    rng = np.random.default_rng(0)
    index = QueryIndex(
        query_ids=tuple(f"q-{i:05d}" for i in range(n)),
        languages=tuple("en" if i % 2 else "zh" for i in range(n)),  # type: ignore[arg-type]
        answerable=tuple(i % 10 != 0 for i in range(n)),
    )
    ablations = {}
    for ablation_id, ablation in report.ablations.items():
        columns: dict[str, tuple[float | None, ...]] = {}
        for measure in ablation.per_query:
            no_answer = measure == "no_answer_fpr"
            values = np.round(rng.random(n), 6)
            columns[measure] = tuple(
                float(v) if answerable != no_answer else None
                for v, answerable in zip(values, index.answerable, strict=True)
            )
        ablations[ablation_id] = ablation.model_copy(update={"per_query": columns})
    big = report.model_copy(update={"queries": index, "ablations": ablations})
    size = len(report_json(big))
    # 14 per-query columns (7 measures, judged@10 and unj@10, 5 condensed companions) of 20,000 values, 5 ablations
    assert size < 14_000_000, f"{size / 1e6:.1f} MB for {n} queries and {len(ablations)} ablations"
