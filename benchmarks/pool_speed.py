"""``evalkit pool`` of two big runs: wall time and peak memory beside pyarrow reading the same two run files.

The data are ``benchmarks/score_speed.py``'s (seeded: ``--queries`` queries x ``--depth`` results, document IDs
``d<int>`` from a corpus of 1,000,000, scores rounded to 2 decimals): its qrels and run of seed 0, and its run of
seed 1 with the tag ``other`` (so that the two runs are named apart), written once into ``--workdir`` (reused when
present). Each tool runs in its own process, ``--repeat`` times, in turn (the order reversed every other round),
with Arrow's and BLAS's threads pinned to ``--threads``; "wall s" is the whole process (interpreter start, imports,
reading, pooling, writing), "peak MB" its ``ru_maxrss``. The table shows each tool's median and range, and its
ratio to the reference:

- pyarrow: ``pyarrow.csv.read_csv`` of both run files into their query, document and score columns, one thread
  (the floor: any pool of two runs reads them);
- evalkit: ``evalkit pool --qrels Q --run A --run B --depth K --output pool.jsonl``;
- evalkit (``--other-tree DIR``, optional): the same command with ``PYTHONPATH=DIR``, an older checkout of the
  package (``git worktree add DIR <commit>``), for a before/after on one machine. The outputs are compared byte for
  byte, and the script says whether they are identical.

    python benchmarks/pool_speed.py --workdir /tmp/poolbench                           # 2 x 10 million lines
    python benchmarks/pool_speed.py --workdir /tmp/poolbench --other-tree /tmp/old     # before/after
    python benchmarks/pool_speed.py --queries 2000                                     # a quick check
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "ARROW_NUM_THREADS")
NAMES = ["query", "q0", "doc", "rank", "score", "tag"]


def write_files(folder: Path, queries: int, depth: int) -> tuple[Path, Path, Path]:
    """The qrels and run of seed 0 and the run of seed 1 retagged ``other``, written once."""
    from score_speed import TAG, write_data

    qrels, first, _ = write_data(folder, queries, depth, 0)
    _, seed_one, _ = write_data(folder, queries, depth, 1)
    second = seed_one.with_name(seed_one.stem + "-other.txt")
    if not second.exists():
        partial = second.with_suffix(".partial")
        with seed_one.open("rb") as source, partial.open("wb") as out:
            while lines := source.readlines(1 << 24):
                out.write(b"".join(lines).replace(f" {TAG}\n".encode(), b" other\n"))
        partial.rename(second)
    return qrels, first, second


def child_pyarrow(runs: list[str]) -> None:
    """The reference: both runs read by pyarrow's CSV reader (three columns, one thread)."""
    import pyarrow as pa
    import pyarrow.csv as csv

    lines = 0
    for run in runs:
        table = csv.read_csv(
            run,
            read_options=csv.ReadOptions(column_names=NAMES, use_threads=False),
            parse_options=csv.ParseOptions(delimiter=" "),
            convert_options=csv.ConvertOptions(
                column_types={"query": pa.string(), "doc": pa.string(), "score": pa.float64()},
                include_columns=["query", "doc", "score"],
            ),
        )
        lines += table.num_rows
    print(f"{lines} lines")


def run_once(command: list[str], folder: Path, env: dict[str, str]) -> tuple[float, float]:
    """Run ``command`` in ``folder``: (wall seconds, peak RSS MB); a failure stops the script with its stderr."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{shlex.join(command)} failed:\n{stderr[-3000:]}")
    return seconds, usage.ru_maxrss / 1024


def tools(args: argparse.Namespace, files: tuple[Path, Path, Path]) -> list[tuple[str, list[str], dict[str, str]]]:
    """Each tool's label, command and environment."""
    qrels, first, second = files
    env = dict(os.environ) | dict.fromkeys(THREAD_VARIABLES, str(args.threads))
    reference = [sys.executable, str(Path(__file__).resolve()), "--child", str(first), str(second)]
    pool = [sys.executable, "-m", "evalkit", "pool", "--qrels", str(qrels), "--run", str(first), "--run", str(second)]
    pool += ["--depth", str(args.pool_depth), "--ties", args.ties]
    plan = [
        ("pyarrow read of both runs", reference, env),
        ("evalkit pool", [*pool, "--output", "pool.jsonl"], env),
    ]
    if args.other_tree is not None:
        other = env | {"PYTHONPATH": str(args.other_tree.resolve())}
        plan.append((f"evalkit pool ({args.other_tree})", [*pool, "--output", "pool-other.jsonl"], other))
    return plan


def summarise(label: str, values: list[tuple[float, float]], reference: tuple[float, float] | None) -> str:
    wall, peak = [w for w, _ in values], [p for _, p in values]
    wall_text = f"{statistics.median(wall):.2f} ({min(wall):.2f}-{max(wall):.2f})"
    peak_text = f"{statistics.median(peak):,.0f} ({min(peak):,.0f}-{max(peak):,.0f})"
    row = f"{label:<40} {wall_text:>20} {peak_text:>24}"
    if reference is not None:
        row += f"  {statistics.median(wall) / reference[0]:>5.2f}x {statistics.median(peak) / reference[1]:>5.2f}x"
    return row


def measure(args: argparse.Namespace, folder: Path) -> None:
    files = write_files(folder, args.queries, args.depth)
    print(f"data: {args.queries:,} queries x {args.depth} results per run, two runs, qrels of seed 0, in {folder}")
    plan = tools(args, files)
    times: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in plan}
    for round_number in range(args.repeat):
        for label, command, env in plan if round_number % 2 == 0 else plan[::-1]:
            print(f"round {round_number + 1}/{args.repeat}: {label} ...", flush=True)
            times[label].append(run_once(command, folder, env))
    output = folder / "pool.jsonl"
    digest = hashlib.sha256(output.read_bytes()).hexdigest()[:16]
    with output.open("rb") as stream:
        pairs = sum(chunk.count(b"\n") for chunk in iter(lambda: stream.read(1 << 24), b""))
    print(f"\npool.jsonl: {pairs:,} pairs, {output.stat().st_size / 1e6:,.1f} MB, sha256 {digest}...")
    if args.other_tree is not None:
        same = filecmp.cmp(output, folder / "pool-other.jsonl", shallow=False)
        print(f"pool.jsonl and pool-other.jsonl: {'identical' if same else 'DIFFERENT'}")
    reference_label = plan[0][0]
    reference = (
        statistics.median(w for w, _ in times[reference_label]),
        statistics.median(p for _, p in times[reference_label]),
    )
    print(f"\n{'tool':<40} {'wall s (range)':>20} {'peak MB (range)':>24}  ratios to {reference_label}")
    for label, values in times.items():
        print(summarise(label, values, None if label == reference_label else reference))
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{args.threads} thread(s); date: {datetime.now():%Y-%m-%d %H:%M}; command: python {shlex.join(sys.argv)}"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--depth", type=int, default=100, help="results per query in each run")
    parser.add_argument("--pool-depth", type=int, default=10, help="evalkit pool --depth")
    parser.add_argument("--ties", default="evalkit", choices=["evalkit", "trec_eval"])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (each tool once a round)")
    parser.add_argument("--threads", type=int, default=1, help="Arrow and BLAS threads in every child")
    parser.add_argument("--workdir", type=Path, help="keep the data here (default: a temporary folder)")
    parser.add_argument("--other-tree", type=Path, help="also run evalkit from this checkout (PYTHONPATH)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.child:
        child_pyarrow(args.child)
        return
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        measure(args, args.workdir.resolve())
        return
    with tempfile.TemporaryDirectory(prefix="pool_speed-") as folder:
        measure(args, Path(folder))


if __name__ == "__main__":
    main()
