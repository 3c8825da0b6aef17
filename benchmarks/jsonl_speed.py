"""Reading a JSONL run: evalkit's reader beside pyarrow's JSON reader alone, the same run as a TREC file, and the
line-by-line reading evalkit keeps for files its columnar reading leaves to it.

The run is ``benchmarks/score_speed.py``'s (seeded: ``--queries`` queries x ``--depth`` results, IDs ``q<int>`` and
``d<int>``, scores rounded to 2 decimals), written once as TREC and once as JSONL (one line a query) into
``--workdir`` (reused when present). Timed in this process, with Arrow's and BLAS's threads pinned to
``--threads``, each reader ``--repeat`` times in turn (median and range shown):

- pyarrow: ``pyarrow.json.read_json`` of the JSONL file with the run's schema (the parse alone, the floor);
- evalkit JSONL: ``evalkit.data.runs.read_jsonl_run`` (the guards, pyarrow's parse, the checks, the run's columns);
- evalkit TREC: ``evalkit.data.runs.read_trec_run`` of the same run as a TREC file;
- evalkit line by line: the same reader with its columnar reading turned off (what every JSONL run took before).
  It is run ``--line-repeat`` times (default 1; 0 skips it): at 1,000,000 results it takes several seconds.

The script checks that the two JSONL readings give the same run (IDs, codes, scores bit for bit).

    python benchmarks/jsonl_speed.py                       # 10,000 queries x 100: 1,000,000 results
    python benchmarks/jsonl_speed.py --queries 100000      # 10 million results (the line-by-line reading: minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "ARROW_NUM_THREADS")


def write_files(folder: Path, queries: int, depth: int, seed: int) -> tuple[Path, Path]:
    """The TREC run of ``score_speed.py`` and the same run as JSONL (one line a query), written once."""
    from score_speed import write_data

    _, trec, _ = write_data(folder, queries, depth, seed)
    jsonl = trec.with_suffix(".jsonl")
    if not jsonl.exists():
        partial = jsonl.with_suffix(".partial")
        with trec.open(encoding="utf-8") as source, partial.open("w", encoding="utf-8") as out:
            query, results = None, []
            for line in source:
                fields = line.split()
                if fields[0] != query and query is not None:
                    out.write(json.dumps({"query_id": query, "results": results}) + "\n")
                    results = []
                query = fields[0]
                results.append({"chunk_id": fields[2], "score": float(fields[4])})
            if query is not None:
                out.write(json.dumps({"query_id": query, "results": results}) + "\n")
        partial.rename(jsonl)
    return trec, jsonl


def timed(work: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--line-repeat", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/evalkit-jsonl-speed"))
    args = parser.parse_args()
    for name in THREAD_VARIABLES:
        os.environ[name] = str(args.threads)

    import numpy as np
    import pyarrow as pa
    from pyarrow import json as pa_json

    import evalkit.data.runs as runs

    pa.set_cpu_count(args.threads)
    args.workdir.mkdir(parents=True, exist_ok=True)
    trec, jsonl = write_files(args.workdir, args.queries, args.depth, args.seed)
    options = pa_json.ParseOptions(explicit_schema=runs.JSONL_SCHEMA)

    def line_by_line() -> Any:
        columnar = runs.read_json_lines
        runs.read_json_lines = lambda *_: None  # type: ignore[assignment]
        try:
            return runs.read_jsonl_run(jsonl)
        finally:
            runs.read_json_lines = columnar

    readers: dict[str, Callable[[], Any]] = {
        "pyarrow read_json (floor)": lambda: pa_json.read_json(jsonl, parse_options=options),
        "evalkit JSONL": lambda: runs.read_jsonl_run(jsonl),
        "evalkit TREC (same run)": lambda: runs.read_trec_run(trec),
    }
    times: dict[str, list[float]] = {name: [] for name in [*readers, "evalkit JSONL line by line"]}
    results: dict[str, Any] = {}
    for _ in range(args.repeat):
        for name, work in readers.items():
            seconds, results[name] = timed(work)
            times[name].append(seconds)
    for _ in range(args.line_repeat):
        seconds, results["line"] = timed(line_by_line)
        times["evalkit JSONL line by line"].append(seconds)
    new, old = results["evalkit JSONL"], results.get("line")
    same = old is None or (
        new.queries.equals(old.queries)
        and np.array_equal(new.query, old.query)
        and new.doc_ids.equals(old.doc_ids)
        and np.array_equal(new.scores.view(np.int64), old.scores.view(np.int64))
    )
    lines = len(new.query)
    print(f"{args.queries:,} queries x {args.depth}: {lines:,} results, {jsonl.stat().st_size / 1e6:.0f} MB of JSONL")
    print(f"{args.threads} thread(s), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    reference = statistics.median(times["evalkit JSONL"])
    print(f"{'reader':<30} {'median s':>9} {'range s':>15} {'/ evalkit JSONL':>16}")
    for name, values in times.items():
        if not values:
            continue
        median = statistics.median(values)
        spread = f"{min(values):.3f}-{max(values):.3f}"
        print(f"{name:<30} {median:>9.3f} {spread:>15} {median / reference:>15.2f}x")
    if old is not None:
        print(f"the columnar and line-by-line readings give the same run: {same}")
    if not same:
        raise SystemExit("the two JSONL readings differ")


if __name__ == "__main__":
    main()
