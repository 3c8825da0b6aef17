"""TREC run files out: one per system, so trec_eval, ranx or ir_measures can check evalkit's numbers.

Each query's results are written in the order evalkit scored them (the evaluation's tie policy), deduplicated, each
chunk with its best score, ranks from 1, tag = the system ID. Scores are written in their shortest exact form, so
``evalkit score`` of these files with the same tie policy reproduces every metric of the evaluation. trec_eval
itself orders by 32-bit score descending, then document ID descending: it reproduces evalkit's per-query values for
an evaluation run with ``--ties trec_eval`` (and, with the default policy, wherever no two results tie).

Every file's bytes are built (and every query ID, chunk ID and tag checked by
:func:`~evalkit.data.trec.trec_run_bytes`) before the first one is written, so an ID that would forge lines (a
chunk ID with a newline, from a user's retriever) leaves no file behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evalkit.common.output import write_atomic
from evalkit.data.trec import trec_run_bytes
from evalkit.measures.results import ScoredEvaluation, ScoredSystem
from evalkit.measures.ties import order_ranking


def ranked_results(result: ScoredSystem, ties: str) -> dict[str, list[tuple[str, float]]]:
    """Per query, the scored ranking: (chunk ID, best score) in the tie policy's order."""
    rankings: dict[str, list[tuple[str, float]]] = {}
    for query in result.results:
        pairs = tuple(zip(query.chunk_ids, query.scores, strict=True))
        best: dict[str, float] = {}
        for chunk_id, score in pairs:
            best[chunk_id] = max(score, best.get(chunk_id, score))
        rankings[query.query_id] = [(chunk_id, best[chunk_id]) for chunk_id in order_ranking(pairs, ties)]
    return rankings


def trec_run_name(system_id: str) -> str:
    """The file name of a system's run: ``<system>.trec``."""
    return f"{system_id}.trec"


def trec_runs(evaluation: ScoredEvaluation) -> dict[str, bytes]:
    """File name (:func:`trec_run_name`) to TREC run bytes, for every system of the evaluation.

    Raises:
        ValueError: a query ID, chunk ID or system ID that is empty or holds whitespace or a control character.
    """
    return {
        trec_run_name(system_id): trec_run_bytes(ranked_results(result, evaluation.tie_policy), system_id)
        for system_id, result in sorted(evaluation.ablations.items())
    }


def write_trec_files(files: Mapping[str, bytes], folder: Path) -> list[Path]:
    """Write run files built by :func:`trec_runs` into an already-resolved folder (atomically, one at a time)."""
    written = []
    for name, data in files.items():
        write_atomic(folder / name, data)
        written.append(folder / name)
    return written


def write_trec_runs(evaluation: ScoredEvaluation, folder: Path) -> list[Path]:
    """Write every system's run file into an already-resolved folder; all are built before any is written."""
    return write_trec_files(trec_runs(evaluation), folder)
