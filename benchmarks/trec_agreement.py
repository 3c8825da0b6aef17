"""evalkit's trec_eval names against pytrec_eval on real qrels files: per query with ``==``, and the means.

For every qrels file given (or every ``qrels*`` file in a folder given), the script writes a seeded, tie-heavy TREC
run for its queries (a random share of each query's judged documents and up to 60 unjudged ones, scores rounded to
one decimal so that many tie, 5% of the judged queries left out), then scores it from the files:

- evalkit: ``evalkit.score(qrels_file, run_file, measures=ALIASES, ties="trec_eval")``;
- pytrec_eval: ``parse_qrel`` of the same file, ``RelevanceEvaluator(qrels, families).evaluate(run)``.

It prints, per file: the queries and judgments, the grades seen, whether both tools read the same judgments,
the per-query values that differ (compared with ``==``, every alias, every query pytrec_eval scores), and whether
the means over the run's queries (evalkit's ``missing="skip"``, trec_eval's default without ``-c``) are equal to
the last bit and to trec_eval's four printed decimals. It exits 1 when any value differs, 0 otherwise. A file that
evalkit refuses (conflicting judgments: a diversity qrels whose second column is a subtopic, say) is listed with
evalkit's message and left out.

The qrels are not in this repository: any TREC qrels files will do. The figures in ``benchmarks/RESULTS.md`` come
from the 49 files of ``topics-and-qrels/`` in the anserini 0.12.0 fat jar (in the pyserini 0.12.0 wheel on PyPI):

    python benchmarks/trec_agreement.py --qrels DIR_OR_FILES... [--seed 0] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

ALIASES = (
    "ndcg_cut_10",
    "ndcg_cut_100",
    "ndcg",
    "recip_rank",
    "P_10",
    "P_100",
    "recall_100",
    "recall_1000",
    "map",
    "map_cut_100",
    "Rprec",
    "success_10",
)
FAMILIES = {"ndcg_cut", "ndcg", "recip_rank", "P", "recall", "map", "map_cut", "Rprec", "success"}
MAX_UNJUDGED = 60
MAX_JUDGED_RETURNED = 150
LEFT_OUT = 0.05


def write_run(judgments: dict[str, dict[str, int]], path: Path, seed: int) -> dict[str, dict[str, float]]:
    """A seeded, tie-heavy run for the judged queries, written to ``path`` (TREC) and returned as pytrec_eval's dict
    (queries without a line are not in it: trec_eval would not see them either)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lines: list[str] = []
    run: dict[str, dict[str, float]] = {}
    for query in sorted(judgments):
        judged = sorted(judgments[query])
        returned = min(len(judged), int(rng.integers(0, MAX_JUDGED_RETURNED)))
        docs = [str(d) for d in rng.choice(judged, size=returned, replace=False)] if returned else []
        docs += [f"unjudged-{query}-{i}" for i in range(int(rng.integers(0, MAX_UNJUDGED)))]
        if rng.random() < LEFT_OUT or not docs:
            continue
        scores = np.round(rng.random(len(docs)), 1)
        order = np.argsort(-scores, kind="stable")
        run[query] = {}
        for rank, i in enumerate(order.tolist(), start=1):
            lines.append(f"{query} Q0 {docs[i]} {rank} {scores[i]} agreement\n")
            run[query][docs[i]] = float(scores[i])
    path.write_text("".join(lines), encoding="utf-8")
    return run


def check(qrels_path: Path, folder: Path, seed: int) -> tuple[str, int, int]:
    """One qrels file: its line of the table, the values compared and the values that differ."""
    import numpy as np
    import pytrec_eval

    import evalkit

    started = time.perf_counter()
    try:
        ours = evalkit.load_qrels(qrels_path).as_dict()
    except ValueError as exc:
        return f"{qrels_path.name}: refused by evalkit: {str(exc).splitlines()[0]}", 0, 0
    with qrels_path.open(encoding="utf-8") as stream:
        theirs: dict[str, dict[str, int]] = pytrec_eval.parse_qrel(stream)
    same_judgments = ours == theirs
    run_path = folder / f"{qrels_path.name}.run"
    run = write_run(ours, run_path, zlib.crc32(qrels_path.name.encode()) ^ seed)
    per_query = evalkit.score(qrels_path, run_path, measures=list(ALIASES), ties="trec_eval").per_query
    peer: dict[str, dict[str, Any]] = pytrec_eval.RelevanceEvaluator(theirs, FAMILIES).evaluate(run)
    compared = differ = 0
    for query, values in peer.items():
        for alias in ALIASES:
            compared += 1
            differ += query not in per_query.index or float(per_query.at[query, alias]) != values[alias]
    skip = evalkit.score(qrels_path, run_path, measures=list(ALIASES), ties="trec_eval", missing="skip").aggregate
    means = {alias: float(np.cumsum([peer[q][alias] for q in sorted(peer)])[-1]) / len(peer) for alias in ALIASES}
    exact = all(skip[a] == means[a] for a in ALIASES)  # type: ignore[index]
    printed = all(f"{skip[a]:.4f}" == f"{means[a]:.4f}" for a in ALIASES)  # type: ignore[index]
    grades = sorted({g for judged in ours.values() for g in judged.values()})
    line = (
        f"{qrels_path.name}: {len(ours):,} queries, {sum(map(len, ours.values())):,} judgments, grades {grades}; "
        f"same judgments: {same_judgments}; {len(peer):,} queries scored, {differ} of {compared:,} values differ; "
        f"means equal: {exact} (printed: {printed}); {time.perf_counter() - started:.1f} s"
    )
    return line, compared, differ + (not same_judgments) + (not exact)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--qrels", nargs="+", type=Path, required=True, help="qrels files, or folders of qrels* files")
    parser.add_argument("--seed", type=int, default=0, help="seed of the runs (default: 0)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the runs are written (default: a temp dir)")
    args = parser.parse_args(argv)
    files = sorted(
        f for given in args.qrels for f in ([given] if given.is_file() else sorted(given.glob("qrels*"))) if f.is_file()
    )
    if not files:
        print("no qrels file given", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.workdir or Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        total = failed = 0
        for path in files:
            line, compared, problems = check(path, folder, args.seed)
            print(line, flush=True)
            total, failed = total + compared, failed + problems
    print(f"{len(files)} qrels files, {total:,} per-query values compared, {failed} difference(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
