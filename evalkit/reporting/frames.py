"""pandas views of an evaluation and its report, for notebooks and exports.

Every frame built from the report holds IDs and numbers only. :func:`drilldown_frame` adds query and span text
only when asked (``show_text=True``), so an executed notebook is as private as the report by default.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from evalkit.data.schema import SLICES, ablation_order
from evalkit.measures.registry import STANDARD_MEASURES
from evalkit.measures.results import CONTEXT_K, ScoredEvaluation
from evalkit.reporting.report import Report

METRIC_COLUMNS = [*(str(m) for m in STANDARD_MEASURES), "no_answer_fpr"]


def metrics_frame(report: Report) -> pd.DataFrame:
    """One row per ablation and slice (all, en, zh, those the report holds); one column per standard measure, or
    per measure the report holds when it holds none of them (a score report under trec_eval's names), plus latency
    for 'all' (None where nothing was timed: a run file's)."""
    held = [m for result in report.ablations.values() for values in result.metrics.values() for m in values]
    columns = METRIC_COLUMNS if set(METRIC_COLUMNS) & set(held) else list(dict.fromkeys(held))
    rows = []
    for ablation_id, result in sorted(report.ablations.items(), key=lambda item: ablation_order(item[0])):
        for slice_name in (s for s in SLICES if s == "all" or s in result.metrics):
            values = result.metrics.get(slice_name, {})
            row: dict[str, object] = {"ablation": ablation_id, "slice": slice_name}
            row.update({m: values.get(m) for m in columns})
            timed = slice_name == "all" and result.latency_ms.count > 0
            row["p50_ms"] = result.latency_ms.median_ms if timed else None
            row["p95_ms"] = result.latency_ms.p95_ms if timed else None
            rows.append(row)
    return pd.DataFrame(rows).set_index(["ablation", "slice"])


def language_metrics_frame(report: Report, measures: Sequence[str]) -> pd.DataFrame:
    """Long form (ablation, language, measure, value) of the per-language aggregates, for charts."""
    rows = [
        {"ablation": ablation_id, "language": language, "measure": measure, "value": result.metrics[language][measure]}
        for ablation_id, result in report.ablations.items()
        for language in ("en", "zh")
        for measure in measures
        if measure in result.metrics.get(language, {})
    ]
    return pd.DataFrame(rows, columns=["ablation", "language", "measure", "value"])


def latency_frame(evaluation: ScoredEvaluation) -> pd.DataFrame:
    """Every latency sample (all runs) in milliseconds, one row per query execution."""
    rows = [
        {"ablation": ablation_id, "latency_ms": sample}
        for ablation_id, result in evaluation.ablations.items()
        for sample in result.latency_samples_ms
    ]
    return pd.DataFrame(rows, columns=["ablation", "latency_ms"])


def rerank_delta_frame(
    evaluation: ScoredEvaluation, base: str = "hybrid", reranked: str = "hybrid-rerank"
) -> pd.DataFrame:
    """Per answerable query: nDCG@10 of ``base`` and ``reranked`` and their difference, largest gain first."""
    if base not in evaluation.ablations or reranked not in evaluation.ablations:
        raise ValueError(f"both {base!r} and {reranked!r} must have been run")
    before = evaluation.ablations[base].per_query
    after = evaluation.ablations[reranked].per_query
    rows = [
        {
            "query_id": q.query_id,
            "language": q.language,
            "base_ndcg@10": before[q.query_id]["ndcg@10"],
            "reranked_ndcg@10": after[q.query_id]["ndcg@10"],
        }
        for q in evaluation.fixture.queries
        if q.answerable
    ]
    frame = pd.DataFrame(rows)
    frame["delta"] = frame["reranked_ndcg@10"] - frame["base_ndcg@10"]
    return frame.sort_values(["delta", "query_id"], ascending=[False, True]).reset_index(drop=True)


def failures_frame(report: Report) -> pd.DataFrame:
    """Every ID-only failure of every ablation."""
    rows = [
        {
            "ablation": ablation_id,
            "query_id": f.query_id,
            "language": f.language,
            "kind": f.kind,
            "chunk_id": f.chunk_id,
            "grade": f.grade,
            "rank": f.rank,
            "returned": f.returned,
        }
        for ablation_id, result in report.ablations.items()
        for f in result.failures
    ]
    columns = ["ablation", "query_id", "language", "kind", "chunk_id", "grade", "rank", "returned"]
    return pd.DataFrame(rows, columns=columns)


def failing_query_ids(evaluation: ScoredEvaluation) -> list[str]:
    """Queries with at least one failure in any ablation, sorted."""
    return sorted({f.query_id for result in evaluation.ablations.values() for f in result.failures})


def drilldown_frame(evaluation: ScoredEvaluation, query_ids: Sequence[str], show_text: bool = False) -> pd.DataFrame:
    """Per query, judged chunk and ablation: the chunk's rank and whether its spans reached the context.

    A no-answer query gets one row per ablation with the number of results it returned. With ``show_text``
    the query text and the span text are added (private: keep such a notebook out of shared reports).
    """
    queries = {q.query_id: q for q in evaluation.fixture.queries}
    missing = [q for q in query_ids if q not in queries]
    if missing:
        raise ValueError(f"unknown query ID(s): {', '.join(missing)}")
    rows = []
    for query_id in query_ids:
        query = queries[query_id]
        for ablation_id, result in evaluation.ablations.items():
            ranking = next(r.chunk_ids for r in result.results if r.query_id == query_id)
            base: dict[str, object] = {"query_id": query_id, "language": query.language, "ablation": ablation_id}
            if show_text:
                base["query_text"] = query.text
            if not query.answerable:
                rows.append({**base, "chunk_id": None, "grade": None, "rank": None, "returned": len(ranking)})
                continue
            for judgment in sorted(query.judgments, key=lambda j: (-j.grade, j.chunk_id)):
                rank = ranking.index(judgment.chunk_id) + 1 if judgment.chunk_id in ranking else None
                row = {
                    **base,
                    "chunk_id": judgment.chunk_id,
                    "grade": judgment.grade,
                    "rank": rank,
                    "returned": len(ranking),
                    "spans_in_context": len(judgment.spans) if rank is not None and rank <= CONTEXT_K else 0,
                }
                if show_text:
                    row["span_text"] = " | ".join(s.text for s in judgment.spans)
                rows.append(row)
    return pd.DataFrame(rows)


def rank_pivot(drilldown: pd.DataFrame) -> pd.DataFrame:
    """Ranks from :func:`drilldown_frame` as a table: one row per query and judged chunk, one column per ablation."""
    judged = drilldown[drilldown.chunk_id.notna()]
    ablations = list(dict.fromkeys(drilldown.ablation))
    table = judged.pivot(index=["query_id", "chunk_id", "grade"], columns="ablation", values="rank")
    return table.reindex(columns=ablations)
