"""Reports and comparisons beside scoring: the JSON report and ``evalkit compare`` against the text table.

Three steps, each ``python -m evalkit`` in its own fresh process, side by side in one run:

- table: ``evalkit score --qrels Q --run R`` (the text table: scoring alone, no report);
- json: ``evalkit score --qrels Q --run R --format json --output report.json`` (scoring, the report with its
  bootstrap intervals and companion measures, written and printed);
- compare: ``evalkit compare base.json head.json`` (two such reports read, checked and compared: paired intervals,
  sign-flip tests, Holm, power, label holes).

The two reports compared are written once before the rounds: the first run file (seed ``--seed``) and a second one
(the run of seed ``--seed + 1``), both against the first qrels. Each round runs the three steps once, in a rotated
order, ``--repeat`` rounds (default 3); the table gives each step's median wall time, its range and its largest
peak RSS (the child's ``ru_maxrss``), and the ratios of the medians: json / table, and compare's seconds. Absolute
times on a shared machine move by 2x between runs; the ratio inside one run is what to read. BLAS, OpenMP and Arrow
thread pools are pinned to ``--threads`` (default 1) in every child, as in ``benchmarks/score_speed.py``, whose data
this script generates (seeded: ``--queries`` x ``--depth`` run lines, 1 to 20 judgments a query).

    python benchmarks/report_speed.py                       # 100,000 queries x 100 results: 10 million run lines
    python benchmarks/report_speed.py --queries 1000000     # the scale target: both steps within --budget-mb
"""

from __future__ import annotations

import argparse
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

from score_speed import THREAD_VARIABLES, write_data

STEPS = ("table", "json", "compare")


def _command(step: str, qrels: Path, run: Path) -> list[str]:
    evalkit = [sys.executable, "-m", "evalkit"]
    if step == "compare":
        # a report of a million queries is about 90 MB, past compare's default input limit of 64 MiB
        return [*evalkit, "compare", "base.json", "head.json", "--max-input-mb", "4096"]
    score = [*evalkit, "score", "--qrels", str(qrels), "--run", str(run)]
    return score if step == "table" else [*score, "--format", "json", "--output", "report.json"]


def _spawn(command: list[str], folder: Path, threads: int) -> tuple[float, float]:
    """Run ``command`` in ``folder`` (its output discarded): (wall seconds, peak RSS MB); raise when it fails."""
    env = {**os.environ, **dict.fromkeys(THREAD_VARIABLES, str(threads)), "EVALKIT_PROGRESS": "0"}
    with open(folder / "stderr.txt", "wb") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    # compare exits 1 when the gate fails (the second run is worse by design); anything else is a failure.
    if code not in (0, 1) or (code == 1 and "compare" not in command):
        tail = (folder / "stderr.txt").read_text(errors="replace")[-3000:]
        raise SystemExit(f"{shlex.join(command)} exited {code}:\n{tail}")
    return seconds, usage.ru_maxrss / 1024


def measure(args: argparse.Namespace, folder: Path) -> None:
    qrels, run, description = write_data(folder, args.queries, args.depth, args.seed)
    _, second_run, second = write_data(folder, args.queries, args.depth, args.seed + 1)
    print(description, flush=True)
    print(f"second run (its qrels unused): {second}", flush=True)
    for name, path in (("base.json", run), ("head.json", second_run)):
        command = [*_command("json", qrels, path)[:-1], name]
        seconds, peak = _spawn(command, folder, args.threads)
        print(f"wrote {name} in {seconds:.2f} s (peak {peak:,.0f} MB)", flush=True)
    times: dict[str, list[float]] = {step: [] for step in STEPS}
    peaks: dict[str, float] = dict.fromkeys(STEPS, 0.0)
    for round_number in range(args.repeat):
        order = STEPS[round_number % 3 :] + STEPS[: round_number % 3]
        for step in order:
            seconds, peak = _spawn(_command(step, qrels, run), folder, args.threads)
            times[step].append(seconds)
            peaks[step] = max(peaks[step], peak)
            print(f"round {round_number + 1}/{args.repeat}: {step} {seconds:.2f} s, peak {peak:,.0f} MB", flush=True)
    medians = {step: statistics.median(times[step]) for step in STEPS}
    print()
    print("| step | wall s, median (range) | peak RSS MB |")
    print("|---|---|---|")
    for step in STEPS:
        print(f"| {step} | {medians[step]:.2f} ({min(times[step]):.2f}-{max(times[step]):.2f}) | {peaks[step]:,.0f} |")
    print()
    print(f"json / table: {medians['json'] / medians['table']:.2f}; compare: {medians['compare']:.2f} s")
    for step in ("json", "compare"):
        verdict = "within" if peaks[step] <= args.budget_mb else "OVER"
        print(f"{step}: peak RSS {peaks[step]:,.0f} MB, {verdict} the {args.budget_mb:,.0f} MB budget")
    print(
        f"machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {args.threads} thread(s); date: {datetime.now():%Y-%m-%d %H:%M}; "
        f"command: python {shlex.join(sys.argv)}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--depth", type=int, default=100, help="results per query")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the three steps")
    parser.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP/Arrow threads in every child")
    parser.add_argument("--workdir", type=Path, help="keep the data here (default: a temporary folder)")
    parser.add_argument(
        "--budget-mb", type=float, default=2048, help="the json and compare peaks are checked against this"
    )
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        measure(args, args.workdir.resolve())
        return
    with tempfile.TemporaryDirectory(prefix="report_speed-") as folder:
        measure(args, Path(folder))


if __name__ == "__main__":
    main()
