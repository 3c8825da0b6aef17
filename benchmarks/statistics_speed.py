"""Speed of the statistics behind `evalkit compare` and the report's intervals at the issue's scale.

Times, with 10,000 resamples over 20,000 queries (the defaults): the bootstrap interval of one mean, the paired
bootstrap interval and the sign-flip test of one measure, and the same for 40 columns at once (5 ablations x 8
measures, as one slice of a report). scipy's bootstrap of one mean is timed beside it for reference.

    python benchmarks/statistics_speed.py [--queries N] [--resamples B] [--repeat R] [--no-scipy]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

from evalkit.measures.statistics import (
    StatisticsSettings,
    bootstrap_mean_intervals,
    paired_bootstrap_intervals,
    sign_flip_p_values,
)


def _time(label: str, repeat: int, call: Callable[[], object]) -> None:
    """Wall time and CPU time (all threads of this process: on a shared machine the wall time also counts waiting)."""
    timings, cpu = [], []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        call()
        timings.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    print(
        f"{label:<48} wall median {statistics.median(timings):6.2f} s, min {min(timings):6.2f} s; "
        f"CPU median {statistics.median(cpu):6.2f} s ({repeat} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-scipy", action="store_true", help="skip scipy's bootstrap (slow at this scale)")
    args = parser.parse_args()
    settings = StatisticsSettings(resamples=args.resamples)
    rng = np.random.default_rng(0)
    base, head = rng.random((args.queries, 40)), rng.random((args.queries, 40))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{args.queries} queries, {args.resamples} resamples")
    _time("bootstrap interval of one mean", args.repeat, lambda: bootstrap_mean_intervals(base[:, 0], settings))
    _time(
        "paired bootstrap interval, one measure",
        args.repeat,
        lambda: paired_bootstrap_intervals(base[:, 0], head[:, 0], settings),
    )
    _time("sign-flip test, one measure", args.repeat, lambda: sign_flip_p_values(head[:, 0] - base[:, 0], settings))
    _time(
        "paired bootstrap interval, 40 columns", args.repeat, lambda: paired_bootstrap_intervals(base, head, settings)
    )
    _time("sign-flip test, 40 columns", args.repeat, lambda: sign_flip_p_values(head - base, settings))
    if not args.no_scipy:
        from scipy import stats

        _time(
            "scipy.stats.bootstrap (percentile) of one mean",
            1,
            lambda: stats.bootstrap(
                (base[:, 0],), np.mean, method="percentile", n_resamples=args.resamples, random_state=rng
            ),
        )


if __name__ == "__main__":
    main()
