"""Batch metrics against pytrec_eval (and ranx when installed): nDCG@10, recall@10 and MRR@10, as time ratios;
with ``--set incomplete``, bpref and infAP (trec_eval's names) against pytrec_eval's.

Runs are random but seeded: each query has 100 ranked results (drawn from 20,000 chunk IDs) and 1 to 5 judged
chunks with grades 1 to 3, two of them planted in the ranking on average. Both tools are timed from the same
plain-Python inputs, in batches of 100,000 queries so that a million queries fit in memory, and the times are
summed:

- evalkit: rankings (lists of chunk IDs in rank order, as the runner holds them) and grade dicts, through the
  scoring core's ``rank_lists`` and ``score_ranked`` (the registry's batch kernels, which the fixture path and
  ``evalkit score`` share);
- pytrec_eval: the run as ``{qid: {docid: score}}`` and the qrels as ``{qid: {docid: grade}}``, through
  ``RelevanceEvaluator(qrels, {ndcg_cut, recall, recip_rank}).evaluate(run)`` (trec_eval sorts by score itself,
  and computes every cutoff of the measure families it is given, so it does somewhat more work than evalkit).

BLAS threads are pinned to one (threadpoolctl) so that the figures are not thread contention. Ratios from one run
are what to compare: absolute times on a shared machine move by 2x between runs.

With ``--set incomplete`` each query has 5 to 29 judged chunks with grades -1 (pooled, not judged) to 3, about
half of them planted in the ranking, so that bpref and infAP have judged non-relevant, pooled-unjudged and unjudged
documents to read; both tools read the whole ranking (neither measure has a cutoff). ranx has neither measure.

    python benchmarks/metrics_speed.py [--set standard|incomplete] [--queries 10000 1000000] [--batch 100000]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import platform
import time
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from evalkit.measures.core import depth_of, score_ranked
from evalkit.measures.metrics import mean
from evalkit.measures.ranked import rank_lists
from evalkit.measures.registry import MeasureDef, parse_measures

DEPTH = 100
CHUNK_POOL = 20_000
MEASURES = parse_measures(["ndcg@10", "recall@10", "mrr@10"])
INCOMPLETE = parse_measures(["bpref", "infAP"])
SETS = {"standard": (MEASURES, {"ndcg_cut", "recall", "recip_rank"}), "incomplete": (INCOMPLETE, {"bpref", "infAP"})}
"""Per ``--set``: evalkit's measures and the pytrec_eval families that compute them."""

Batch = tuple[list[str], list[list[str]], list[list[float]], list[dict[str, int]]]


def make_batch(rng: np.random.Generator, start: int, size: int) -> Batch:
    """Query IDs, rankings (with descending scores) and grade dicts of `size` random queries."""
    ids = rng.integers(0, CHUNK_POOL, size=(size, DEPTH))
    names = np.char.add("c", ids.astype(str)).tolist()
    qids = [f"q{start + i}" for i in range(size)]
    scores = np.sort(rng.random((size, DEPTH)), axis=1)[:, ::-1].tolist()
    judged = rng.integers(1, 6, size=size)
    grades: list[dict[str, int]] = []
    for row, count in enumerate(judged):
        planted = rng.choice(DEPTH, size=2, replace=False)
        chosen = [names[row][int(p)] for p in planted] + [f"c{int(x)}" for x in rng.integers(0, CHUNK_POOL, count)]
        grades.append({c: int(g) for c, g in zip(chosen[:count], rng.integers(1, 4, size=count), strict=False)})
    return qids, names, scores, grades


def make_incomplete_batch(rng: np.random.Generator, start: int, size: int) -> Batch:
    """:func:`make_batch`'s rankings with 5 to 29 judged chunks a query, grades -1 to 3, about half of them planted
    in the ranking."""
    qids, names, scores, _ = make_batch(rng, start, size)
    grades: list[dict[str, int]] = []
    for row, count in enumerate(rng.integers(5, 30, size=size).tolist()):
        planted = [names[row][int(p)] for p in rng.choice(DEPTH, size=count // 2, replace=False)]
        chosen = planted + [f"c{int(x)}" for x in rng.integers(0, CHUNK_POOL, count - len(planted))]
        grades.append({c: int(g) for c, g in zip(chosen, rng.integers(-1, 4, size=count), strict=True)})
    return qids, names, scores, grades


def time_evalkit(batch: Batch, measures: tuple[MeasureDef, ...] = MEASURES) -> float:
    _, rankings, _, grades = batch
    started = time.perf_counter()
    ranked = rank_lists(rankings, grades, depth=depth_of(measures))
    values, _ = score_ranked(ranked, measures)
    _ = {name: mean(v.tolist()) for name, v in values.items()}
    return time.perf_counter() - started


def time_pytrec_eval(batch: Batch, families: frozenset[str] = frozenset(SETS["standard"][1])) -> float:
    import pytrec_eval

    qids, rankings, scores, grades = batch
    started = time.perf_counter()
    run = {q: dict(zip(r, s, strict=True)) for q, r, s in zip(qids, rankings, scores, strict=True)}
    qrels = dict(zip(qids, grades, strict=True))
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(families))
    results = evaluator.evaluate(run)
    _ = sum(next(iter(r.values())) for r in results.values())
    return time.perf_counter() - started


def time_ranx(batch: Batch) -> float:
    from ranx import Qrels, Run, evaluate

    qids, rankings, scores, grades = batch
    started = time.perf_counter()
    run = Run({q: dict(zip(r, s, strict=True)) for q, r, s in zip(qids, rankings, scores, strict=True)})
    evaluate(Qrels(dict(zip(qids, grades, strict=True))), run, ["ndcg@10", "recall@10", "mrr@10"])
    return time.perf_counter() - started


def measure(
    total: int, batch_size: int, tools: dict[str, Callable[[Batch], float]], make: Callable[..., Batch] = make_batch
) -> dict[str, float]:
    rng = np.random.default_rng(0)
    seconds = dict.fromkeys(tools, 0.0)
    for start in range(0, total, batch_size):
        batch = make(rng, start, min(batch_size, total - start))
        for name, tool in tools.items():
            seconds[name] += tool(batch)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--set", choices=sorted(SETS), default="standard", help="which measures (%(default)s)")
    args = parser.parse_args()
    measures, families = SETS[args.set]
    make = make_incomplete_batch if args.set == "incomplete" else make_batch
    tools: dict[str, Callable[[Batch], float]] = {
        "evalkit": functools.partial(time_evalkit, measures=measures),
        "pytrec_eval": functools.partial(time_pytrec_eval, families=frozenset(families)),
    }
    if args.set == "standard" and importlib.util.find_spec("ranx") is not None:
        tools["ranx"] = time_ranx
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    names = ", ".join(m.name for m in measures)
    print(f"measures: {names}; {DEPTH} results per query; BLAS threads pinned to 1")
    if args.set == "standard" and "ranx" not in tools:
        print("ranx: not installed, left out")
    with threadpool_limits(limits=1):
        tools["evalkit"](make(np.random.default_rng(1), 0, 1000))  # warm-up: imports, first allocations
        for total in args.queries:
            seconds = measure(total, args.batch, tools, make)
            row = ", ".join(f"{name} {s:.2f} s" for name, s in seconds.items())
            ratio = seconds["pytrec_eval"] / seconds["evalkit"]
            print(f"{total:>9,} queries: {row}; evalkit is {ratio:.1f}x faster than pytrec_eval")


if __name__ == "__main__":
    main()
