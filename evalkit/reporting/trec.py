"""TREC run files out: one per ablation, so trec_eval, ranx or ir_measures can check evalkit's numbers.

Each query's results are written in the order evalkit scored them (the evaluation's tie policy), deduplicated, each
chunk with its best score, ranks from 1, tag = the ablation ID. Scores are written in their shortest exact form, so
``evalkit score`` of these files with the same tie policy reproduces every metric of the evaluation. trec_eval
itself orders by 32-bit score descending, then document ID descending: it reproduces evalkit's per-query values for
an evaluation run with ``--ties trec_eval`` (and, with the default policy, wherever no two results tie).
"""

from __future__ import annotations

from pathlib import Path

from evalkit.data.runs import trec_run_bytes
from evalkit.evaluation import AblationResult, Evaluation
from evalkit.measures.ties import order_ranking
from evalkit.output import write_atomic


def ranked_results(result: AblationResult, ties: str) -> dict[str, list[tuple[str, float]]]:
    """Per query, the scored ranking: (chunk ID, best score) in the tie policy's order."""
    rankings: dict[str, list[tuple[str, float]]] = {}
    for query in result.results:
        pairs = tuple(zip(query.chunk_ids, query.scores, strict=True))
        best: dict[str, float] = {}
        for chunk_id, score in pairs:
            best[chunk_id] = max(score, best.get(chunk_id, score))
        rankings[query.query_id] = [(chunk_id, best[chunk_id]) for chunk_id in order_ranking(pairs, ties)]
    return rankings


def trec_runs(evaluation: Evaluation) -> dict[str, bytes]:
    """File name (``<ablation>.trec``) to TREC run bytes, for every ablation of the evaluation."""
    return {
        f"{ablation_id}.trec": trec_run_bytes(ranked_results(result, evaluation.tie_policy), ablation_id)
        for ablation_id, result in sorted(evaluation.ablations.items())
    }


def write_trec_runs(evaluation: Evaluation, folder: Path) -> list[Path]:
    """Write every ablation's run file into an already-resolved folder (atomically, one file at a time)."""
    written = []
    for name, data in trec_runs(evaluation).items():
        write_atomic(folder / name, data)
        written.append(folder / name)
    return written
