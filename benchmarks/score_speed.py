"""Scoring a run file against a qrels file from disk: wall time and peak memory beside pytrec_eval, ranx, trec_eval.

The work measured, for every tool alike: parse the qrels and the run from disk, compute nDCG@10, recall@10 and
MRR@10 for every query, then their means. The tools:

- evalkit, its own names: ``evalkit.runs.precomputed.score(qrels, run, measures=["ndcg@10", "recall@10", "mrr@10"])``
  (default tie policy), then ``.aggregate``;
- evalkit, trec_eval's names: the same with ``["ndcg_cut_10", "recall_10", "recip_rank"]`` and
  ``ties="trec_eval"``: the definitions pytrec_eval and trec_eval compute;
- pytrec_eval: ``parse_qrel``, ``parse_run``, ``RelevanceEvaluator(qrels, {ndcg_cut_10, recall_10,
  recip_rank}).evaluate(run)``, then the means;
- ranx (when installed): ``Qrels.from_file`` and ``Run.from_file`` (``kind="trec"``), then ``evaluate(qrels, run,
  ["ndcg@10", "recall@10", "mrr@10"])``; numba compiles its kernels on a tiny run first, outside the timing;
- the trec_eval binary (when on PATH): ``trec_eval -m ndcg_cut.10 -m recall.10 -m recip_rank qrels run``.

Each tool runs in its own fresh Python process (this script with ``--child``), so its peak RSS (VmHWM, read when
the work is done, imports included) is its own; the trec_eval binary's is the kernel's ``ru_maxrss`` of that
process. "wall s" is the work above, after the imports; "process s" the whole child, interpreter start and imports
included. BLAS, OpenMP, numba and Arrow thread pools are pinned to ``--threads`` (default 1) in every child; Arrow's
pool follows ``OMP_NUM_THREADS``. The script imports numpy, pyarrow and pandas inside the functions that generate
and compare the data, so that a child starts from a bare interpreter. Time ratios (peer s / evalkit s, above 1:
evalkit is faster) are what to compare: absolute times on a shared machine move by 2x between runs. So every
tool runs ``--repeat`` times (default 6), in turn, round after round, and the table shows each tool's median and
its range; the ratios divide medians. The rounds run the tools in every rotation of their order, forwards then
backwards, so that over ``2 x tools`` rounds every tool runs right after every other one equally often (the
default of 6 balances the three tools without ranx). On the virtual machines these figures come from, a
process that starts right after another has freed gigabytes pays for first touching memory the host has taken
back (evalkit's reading took 0.5 to 0.7 s longer right after pytrec_eval than right after evalkit), and a fixed
order would charge that to one tool only.

Data, seeded (``numpy.random.Generator``) and written to a temporary folder (or ``--workdir``, where files of the
same size and seed are reused): ``--queries`` queries x ``--depth`` results, document IDs ``d<int>`` drawn without
repeats per query from a corpus of 1,000,000, scores rounded to 2 decimals (many ties, so the tie policy
matters); 1 to 20 judgments per query with grades 0 to 3, at least one relevant, about half of them on documents
the run returned. The script checks that evalkit (trec_eval names, ``ties="trec_eval"``) and pytrec_eval give equal
per-query values (``==``) and prints the number of mismatches.

    python benchmarks/score_speed.py                                 # 100,000 queries x 100: 10 million run lines
    python benchmarks/score_speed.py --queries 2000                  # a quick check
    python benchmarks/score_speed.py --queries 1000000 --skip ranx   # the scale target, below

The scale target: "1,000,000 queries x 100 results: completes within 4 GB, time beside pytrec_eval's" (100 million
run lines, about 3 GB on disk; pytrec_eval's dicts need far more memory than that: ``--skip pytrec_eval`` on a
small machine). The script prints evalkit's peak RSS against ``--budget-mb``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

CORPUS = 1_000_000
MAX_JUDGED = 20
BATCH_QUERIES = 20_000
TAG = "bench"
EVALKIT_MEASURES = ("ndcg@10", "recall@10", "mrr@10")
TREC_MEASURES = ("ndcg_cut_10", "recall_10", "recip_rank")
TREC_EVAL_ARGS = ("-m", "ndcg_cut.10", "-m", "recall.10", "-m", "recip_rank")
WHOLE_MEASURES = ("map", "recip_rank", "ndcg", "Rprec", "bpref", "infAP")
"""``--set whole``: measures without a cutoff, which read every line of every query (trec_eval's names)."""
PEERS = ("pytrec_eval", "ranx", "trec_eval", "pyarrow")
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMBA_NUM_THREADS",
)

Result = dict[str, Any]


# --- data ---------------------------------------------------------------------------------------------------------


def _distinct_rows(rng: Any, rows: int, depth: int) -> Any:
    """Document numbers, ``rows x depth``, no number twice in a row (a row with a repeat is drawn again)."""
    import numpy as np

    docs = rng.integers(0, CORPUS, size=(rows, depth))
    while True:
        ordered = np.sort(docs, axis=1)
        again = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
        if not len(again):
            return docs
        docs[again] = rng.integers(0, CORPUS, size=(len(again), depth))


def _ids(prefix: str, numbers: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(prefix, pa.array(numbers).cast(pa.string()), "")


def _run_batch(first: int, docs: Any, scores: Any) -> Any:
    import numpy as np
    import pyarrow as pa

    rows, depth = docs.shape
    return pa.table(
        {
            "query": _ids("q", np.repeat(np.arange(first, first + rows), depth)),
            "q0": pa.array(["Q0"] * (rows * depth)),
            "doc": _ids("d", docs.ravel()),
            "rank": pa.array(np.tile(np.arange(1, depth + 1), rows)),
            "score": pa.array(scores.ravel()),
            "tag": pa.array([TAG] * (rows * depth)),
        }
    )


def _qrels_batch(rng: Any, first: int, docs: Any) -> Any:
    """1 to 20 judgments per query, grades 0-3 (the first one relevant), about half on documents of the run."""
    import numpy as np
    import pyarrow as pa

    rows, depth = docs.shape
    counts = rng.integers(1, MAX_JUDGED + 1, size=rows)
    places = np.argsort(rng.random((rows, depth)), axis=1)[:, :MAX_JUDGED]
    in_run = rng.random((rows, MAX_JUDGED)) < 0.5
    judged = np.where(in_run, np.take_along_axis(docs, places, axis=1), rng.integers(0, CORPUS, (rows, MAX_JUDGED)))
    grades = rng.integers(0, 4, size=(rows, MAX_JUDGED))
    grades[:, 0] = rng.integers(1, 4, size=rows)
    row = np.repeat(np.arange(rows), MAX_JUDGED)
    used = (np.arange(MAX_JUDGED) < counts[:, None]).ravel()
    row, doc, grade = row[used], judged.ravel()[used], grades.ravel()[used]
    _, first_seen = np.unique(row * CORPUS + doc, return_index=True)  # a document judged twice keeps its first grade
    keep = np.sort(first_seen)
    return pa.table(
        {
            "query": _ids("q", row[keep] + first),
            "iteration": pa.array(np.zeros(len(keep), dtype=np.int64)),
            "doc": _ids("d", doc[keep]),
            "grade": pa.array(grade[keep]),
        }
    )


def write_data(folder: Path, queries: int, depth: int, seed: int) -> tuple[Path, Path, str]:
    """The qrels and run files (reused when ``folder`` already holds them) and a line describing them."""
    import numpy as np
    import pyarrow.csv as csv

    qrels_path = folder / f"qrels-{queries}x{depth}-seed{seed}.txt"
    run_path = folder / f"run-{queries}x{depth}-seed{seed}.txt"
    started = time.perf_counter()
    reused = qrels_path.exists() and run_path.exists()
    if not reused:
        rng = np.random.default_rng(seed)
        options = csv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
        run_writer = qrels_writer = None
        for first in range(0, queries, BATCH_QUERIES):
            rows = min(BATCH_QUERIES, queries - first)
            docs = _distinct_rows(rng, rows, depth)
            scores = np.round(np.sort(rng.random((rows, depth)), axis=1)[:, ::-1], 2)
            run, qrels = _run_batch(first, docs, scores), _qrels_batch(rng, first, docs)
            run_writer = run_writer or csv.CSVWriter(run_path, run.schema, write_options=options)
            qrels_writer = qrels_writer or csv.CSVWriter(qrels_path, qrels.schema, write_options=options)
            run_writer.write_table(run)
            qrels_writer.write_table(qrels)
        for writer in (run_writer, qrels_writer):
            if writer is not None:
                writer.close()
    with qrels_path.open("rb") as stream:
        judgments = sum(chunk.count(b"\n") for chunk in iter(lambda: stream.read(1 << 24), b""))
    how = "reused" if reused else f"generated in {time.perf_counter() - started:.1f} s"
    description = (
        f"data: {queries:,} queries x {depth} results = {queries * depth:,} run lines "
        f"({run_path.stat().st_size / 1e6:,.0f} MB), {judgments:,} judgments ({qrels_path.stat().st_size / 1e6:,.1f} "
        f"MB), corpus {CORPUS:,} documents, scores rounded to 2 decimals, seed {seed}; {how} in {folder}"
    )
    return qrels_path, run_path, description


# --- the children: one tool each, in a fresh process ---------------------------------------------------------------


def _peak_rss_mb() -> float:
    """This process's peak resident set so far (VmHWM), in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _version(*distributions: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    for name in distributions:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return ""


def _time_calls(
    module: Any, names: tuple[str, ...], totals: dict[str, float], spans: list[tuple[float, float]] | None = None
) -> None:
    """Wrap ``module.<name>`` so that the seconds spent in each call add up in ``totals[name]`` (and each call's
    start and end go to ``spans``: calls on two threads overlap)."""
    for name in names:
        original = getattr(module, name, None)
        if original is None:
            continue

        def timed(*args: Any, _original: Callable[..., Any] = original, _name: str = name, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                ended = time.perf_counter()
                totals[_name] = totals.get(_name, 0.0) + ended - started
                if spans is not None:
                    spans.append((started, ended))

        setattr(module, name, timed)


def child_evalkit(args: argparse.Namespace) -> Result:
    """``evalkit.runs.precomputed.score`` from the two paths, then ``.aggregate``; phases timed by wrapping the
    functions ``score`` calls (read_qrels_file and read_run, through evalkit.data.loading; score_run)."""
    import evalkit.data.loading as loading
    import evalkit.runs.precomputed as scoring

    phases: dict[str, float] = {}
    reads: list[tuple[float, float]] = []
    _time_calls(loading, ("read_qrels_file", "read_run"), phases, reads)
    _time_calls(scoring, ("score_run",), phases)
    started = time.perf_counter()
    result = scoring.score(Path(args.qrels), Path(args.run), measures=args.measures.split(","), ties=args.ties)
    scored = time.perf_counter()
    means = result.aggregate
    finished = time.perf_counter()
    # with more than one thread the qrels are read beside the run: count the time either read ran once
    reading = max(end for _, end in reads) - min(start for start, _ in reads) if reads else 0.0
    phases["both reads"] = reading
    phases["rest of score()"] = scored - started - reading - phases.get("score_run", 0.0)
    phases["aggregate"] = finished - scored
    peak = _peak_rss_mb()
    if args.out:
        result.per_query.to_parquet(args.out)
    return {"wall": finished - started, "peak_mb": peak, "phases": phases, "means": means, "version": "this tree"}


def child_pytrec_eval(args: argparse.Namespace) -> Result:
    import pytrec_eval

    measures = args.measures.split(",")
    started = time.perf_counter()
    with open(args.qrels) as stream:
        qrels = pytrec_eval.parse_qrel(stream)
    parsed_qrels = time.perf_counter()
    with open(args.run) as stream:
        run = pytrec_eval.parse_run(stream)
    parsed_run = time.perf_counter()
    values = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
    evaluated = time.perf_counter()
    means = {m: math.fsum(v[m] for v in values.values()) / len(values) for m in measures}
    finished = time.perf_counter()
    peak = _peak_rss_mb()
    if args.out:
        with open(args.out, "w") as stream:
            json.dump({q: [v[m] for m in measures] for q, v in values.items()}, stream)
    phases = {
        "parse_qrel": parsed_qrels - started,
        "parse_run": parsed_run - parsed_qrels,
        "evaluate": evaluated - parsed_run,
        "means": finished - evaluated,
    }
    version = _version("pytrec-eval-terrier", "pytrec_eval")
    return {"wall": finished - started, "peak_mb": peak, "phases": phases, "means": means, "version": version}


def child_ranx(args: argparse.Namespace) -> Result:
    from ranx import Qrels, Run, evaluate

    measures = args.measures.split(",")
    # numba compiles (per ID width) here, untimed: IDs as wide as the data's widest
    wide = f"d{CORPUS - 1}"
    evaluate(Qrels({"q0": {wide: 1}}), Run({"q0": {wide: 1.0, f"d{CORPUS - 2}": 0.5}}), measures)
    started = time.perf_counter()
    qrels = Qrels.from_file(args.qrels, kind="trec")
    parsed_qrels = time.perf_counter()
    run = Run.from_file(args.run, kind="trec")
    parsed_run = time.perf_counter()
    means = evaluate(qrels, run, measures)
    finished = time.perf_counter()
    phases = {
        "Qrels.from_file": parsed_qrels - started,
        "Run.from_file": parsed_run - parsed_qrels,
        "evaluate": finished - parsed_run,
    }
    means = {m: float(v) for m, v in means.items()}
    return {
        "wall": finished - started,
        "peak_mb": _peak_rss_mb(),
        "phases": phases,
        "means": means,
        "version": _version("ranx"),
    }


def child_pyarrow(args: argparse.Namespace) -> Result:
    """The parse floor: ``pyarrow.csv.read_csv`` of the run into its query, document and score columns, on one
    thread whatever ``--threads`` says (the same types evalkit reads them as: strings and float64)."""
    import pyarrow as pa
    import pyarrow.csv as csv

    names = ["query", "q0", "doc", "rank", "score", "tag"]
    started = time.perf_counter()
    table = csv.read_csv(
        args.run,
        read_options=csv.ReadOptions(column_names=names, use_threads=False),
        parse_options=csv.ParseOptions(delimiter=" "),
        convert_options=csv.ConvertOptions(
            column_types={"query": pa.string(), "doc": pa.string(), "score": pa.float64()},
            include_columns=["query", "doc", "score"],
        ),
    )
    finished = time.perf_counter()
    return {
        "wall": finished - started,
        "peak_mb": _peak_rss_mb(),
        "phases": {"read_csv": finished - started},
        "means": {"lines": float(table.num_rows)},
        "version": _version("pyarrow"),
    }


CHILDREN: dict[str, Callable[[argparse.Namespace], Result]] = {
    "pyarrow": child_pyarrow,
    "evalkit": child_evalkit,
    "pytrec_eval": child_pytrec_eval,
    "ranx": child_ranx,
}


# --- the parent: run each child, compare, print -------------------------------------------------------------------


def _child_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
    return env


def _spawn(command: list[str], folder: Path, label: str, threads: int) -> tuple[float, float, int, str]:
    """Run ``command``: (process seconds, peak RSS MB from ru_maxrss, exit code, stderr tail)."""
    stem = folder / label.replace(" ", "_").replace("(", "").replace(")", "")
    with open(f"{stem}.stdout", "wb") as out, open(f"{stem}.stderr", "wb") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=_child_env(threads))
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    tail = Path(f"{stem}.stderr").read_text(errors="replace").strip().splitlines()[-25:]
    return seconds, usage.ru_maxrss / 1024, process.returncode, "\n".join(tail)


def run_child(tool: str, label: str, paths: dict[str, Path], extra: list[str], threads: int) -> Result:
    """One Python tool in a fresh interpreter; its result (or the failure, with the stderr tail)."""
    folder = paths["folder"]
    result_path = folder / f"{label.replace(' ', '_')}.result.json"
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        tool,
        "--qrels",
        str(paths["qrels"]),
        "--run",
        str(paths["run"]),
        "--result",
        str(result_path),
        *extra,
    ]
    seconds, _, code, tail = _spawn(command, folder, label, threads)
    if code != 0 or not result_path.exists():
        return {"label": label, "error": f"exit code {code}\n{tail}", "process": seconds}
    return {"label": label, "process": seconds, **json.loads(result_path.read_text())}


def run_trec_eval(paths: dict[str, Path], threads: int) -> Result:
    binary = shutil.which("trec_eval")
    if binary is None:
        return {"label": "trec_eval", "error": "not found on PATH, left out"}
    command = [binary, *TREC_EVAL_ARGS, str(paths["qrels"]), str(paths["run"])]
    seconds, peak, code, tail = _spawn(command, paths["folder"], "trec_eval", threads)
    if code != 0:
        return {"label": "trec_eval", "error": f"exit code {code}\n{tail}", "process": seconds}
    means = {}
    for line in (paths["folder"] / "trec_eval.stdout").read_text().splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] == "all":
            means[fields[0]] = float(fields[2])
    return {"label": "trec_eval", "wall": seconds, "process": seconds, "peak_mb": peak, "means": means}


def count_mismatches(evalkit_values: Path, pytrec_values: Path, measures: tuple[str, ...]) -> str:
    """Per measure, the queries where evalkit's value is not ``==`` pytrec_eval's (a query one tool lacks counts)."""
    import pandas as pd

    ours = pd.read_parquet(evalkit_values)
    theirs = pd.DataFrame.from_dict(json.loads(pytrec_values.read_text()), orient="index", columns=list(measures))
    ours, theirs = ours.align(theirs, join="outer")
    parts = []
    for measure in measures:
        a, b = ours[measure], theirs[measure]
        differ = ~((a == b) | (a.isna() & b.isna()))
        parts.append(f"{measure} {int(differ.sum())}")
    return f"{len(ours):,} queries; mismatches: " + ", ".join(parts)


def balanced_orders(plan: list[Any]) -> list[list[Any]]:
    """The orders the rounds run the tools in: every rotation of ``plan``, then every rotation of it reversed. Over
    these ``2 * len(plan)`` rounds each tool runs right after each other tool equally often (twice)."""
    backwards = plan[::-1]
    forwards = [[*plan[i:], *plan[:i]] for i in range(len(plan))]
    return forwards + [[*backwards[i:], *backwards[:i]] for i in range(len(plan))]


def summarise(rounds: list[list[Result]]) -> list[Result]:
    """One row per tool: the median wall and process seconds over the rounds (each tool runs once a round, in a
    balanced order, so that a slow spell of the shared machine falls on every tool alike), every round's wall, and
    the largest peak RSS. A tool that failed in any round shows that failure."""
    merged = []
    for position in range(len(rounds[0])):
        runs = [r[position] for r in rounds]
        failed = next((r for r in runs if "error" in r), None)
        if failed is not None:
            merged.append(failed)
            continue
        walls = [r["wall"] for r in runs]
        merged.append(
            {
                **runs[-1],
                "wall": statistics.median(walls),
                "process": statistics.median(r["process"] for r in runs),
                "peak_mb": max(r["peak_mb"] for r in runs),
                "walls": walls,
            }
        )
    return merged


def _ratio(row: Result, reference: Result | None) -> str:
    if reference is None or "wall" not in row or "wall" not in reference:
        return "-"
    return f"{row['wall'] / reference['wall']:.2f}"


def print_table(rows: list[Result]) -> None:
    ours = next((r for r in rows if r["label"] == "evalkit"), None)
    trec = next((r for r in rows if r["label"] == "evalkit trec names"), None)
    header = (
        f"{'tool':<20} {'version':>10} {'wall s':>9} {'wall range':>13} {'process s':>10} {'peak RSS MB':>12} "
        f"{'vs evalkit':>11} {'vs evalkit trec':>16}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        if "error" in row:
            print(f"{row['label']:<20} {row['error'].splitlines()[0]}")
            continue
        walls = row.get("walls", [row["wall"]])
        spread = f"{min(walls):.2f}-{max(walls):.2f}"
        print(
            f"{row['label']:<20} {row.get('version', '')[:10]:>10} {row['wall']:>9.2f} {spread:>13} "
            f"{row['process']:>10.2f} {row['peak_mb']:>12,.0f} {_ratio(row, ours):>11} {_ratio(row, trec):>16}"
        )
    print(
        "wall s: the median over the rounds (wall range: fastest-slowest); vs evalkit: the tool's median wall s / "
        "evalkit's (above 1: evalkit is faster); 'vs evalkit trec' divides by evalkit with trec_eval's names and "
        "ties (the definitions pytrec_eval and trec_eval compute)"
    )


def print_details(rows: list[Result]) -> None:
    for row in rows:
        if "error" in row:
            if "\n" in row["error"]:
                print(f"{row['label']} failed:\n{row['error']}")
            continue
        phases = ", ".join(f"{name} {s:.2f} s" for name, s in row.get("phases", {}).items())
        means = ", ".join(f"{name} {v:.4f}" for name, v in row["means"].items())
        print(f"{row['label']}: {phases or 'one process'} (last round); means: {means}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--depth", type=int, default=100, help="results per query")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated, from " + ", ".join(PEERS))
    parser.add_argument("--skip", default="", help="comma-separated peers to leave out (slow ones at scale)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP/numba/Arrow threads in every child")
    parser.add_argument(
        "--set",
        choices=("cutoff", "whole"),
        default="cutoff",
        help="cutoff: nDCG@10, recall@10, MRR@10; whole: " + ", ".join(WHOLE_MEASURES) + " (trec_eval's names)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=6,
        help="rounds; each tool runs once a round, in balanced orders, and its median is shown",
    )
    parser.add_argument("--workdir", type=Path, help="keep the data here (default: a temporary folder)")
    parser.add_argument("--budget-mb", type=float, default=4096, help="evalkit's peak RSS is checked against this")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    for name in ("qrels", "run", "result", "out", "measures", "ties"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = {p for p in (args.peers + "," + args.skip).split(",") if p} - set(PEERS)
    if unknown:
        parser.error(f"unknown peer(s) {', '.join(sorted(unknown))}; valid: {', '.join(PEERS)}")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def measure(args: argparse.Namespace, folder: Path) -> None:
    qrels, run, description = write_data(folder, args.queries, args.depth, args.seed)
    print(description, flush=True)
    peers = [p for p in args.peers.split(",") if p and p not in args.skip.split(",")]
    paths = {"folder": folder, "qrels": qrels, "run": run}
    evalkit_values, pytrec_values = folder / "evalkit_trec.values.parquet", folder / "pytrec_eval.values.json"
    compare = "pytrec_eval" in peers
    trec_measures = WHOLE_MEASURES if args.set == "whole" else TREC_MEASURES
    own_measures = WHOLE_MEASURES if args.set == "whole" else EVALKIT_MEASURES
    evalkit_trec = ["--ties", "trec_eval", "--measures", ",".join(trec_measures)]
    plan: list[tuple[str, str, list[str]]] = [
        ("evalkit", "evalkit", ["--ties", "evalkit", "--measures", ",".join(own_measures)]),
        ("evalkit", "evalkit trec names", [*evalkit_trec, *(["--out", str(evalkit_values)] if compare else [])]),
    ]
    if compare:
        pytrec = ["--measures", ",".join(trec_measures), "--out", str(pytrec_values)]
        plan.append(("pytrec_eval", "pytrec_eval", pytrec))
    if "pyarrow" in peers:
        plan.append(("pyarrow", "pyarrow parse (1 thread)", []))
    if "ranx" in peers and args.set == "cutoff":
        plan.append(("ranx", "ranx", ["--measures", ",".join(EVALKIT_MEASURES)]))
    rounds = []
    orders = balanced_orders(plan)
    for round_number in range(args.repeat):
        results: dict[str, Result] = {}
        for tool, label, extra in orders[round_number % len(orders)]:
            print(f"round {round_number + 1}/{args.repeat}: running {label} ...", flush=True)
            results[label] = run_child(tool, label, paths, extra, args.threads)
        rows = [results[label] for _, label, _ in plan]
        if "trec_eval" in peers and args.set == "cutoff":
            rows.append(run_trec_eval(paths, args.threads))
        rounds.append(rows)
    rows = summarise(rounds)
    print()
    print_details(rows)
    if compare and evalkit_values.exists() and pytrec_values.exists():
        print(
            "per-query agreement, evalkit (trec_eval names, ties=trec_eval) vs pytrec_eval, with ==: "
            + count_mismatches(evalkit_values, pytrec_values, trec_measures)
        )
    for row in rows[:2]:
        if "peak_mb" in row:
            verdict = "within" if row["peak_mb"] <= args.budget_mb else "OVER"
            print(f"{row['label']}: peak RSS {row['peak_mb']:,.0f} MB, {verdict} the {args.budget_mb:,.0f} MB budget")
    floor = next((r for r in rows if r["label"].startswith("pyarrow") and "wall" in r), None)
    for row in rows[:2]:
        if floor is not None and "wall" in row:
            print(f"{row['label']}: wall {row['wall'] / floor['wall']:.2f}x pyarrow's one-thread parse of the run")
    print()
    print_table(rows)
    print(
        f"machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {args.threads} thread(s) per tool; date: {datetime.now():%Y-%m-%d %H:%M}; "
        f"command: python {shlex.join(sys.argv)}"
    )


def main() -> None:
    args = parse_args()
    if args.child:
        result = CHILDREN[args.child](args)
        Path(args.result).write_text(json.dumps(result))
        return
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        measure(args, args.workdir)
        return
    with tempfile.TemporaryDirectory(prefix="score_speed-") as folder:
        measure(args, Path(folder))


if __name__ == "__main__":
    main()
