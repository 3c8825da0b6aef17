"""Wall time of the whole evaluation suite (five ablations, determinism double run) on a fixture.

Interpreter start-up is excluded; fixture loading, database seeding, embedding, retrieval, scoring and the
determinism comparison are included. The first repetition also pays one-off costs (rjieba's dictionary, the
Snowball stemmer), so it is reported separately as "cold".

    python benchmarks/suite_wall_time.py [--fixture DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

from evalkit.data.fixture import load_fixture
from evalkit.runs.ablations import ABLATION_IDS, select_ablations
from evalkit.runs.evaluation import evaluate

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", default=str(ROOT / "fixtures" / "synthetic-bilingual-v1"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    ablations = select_ablations(list(ABLATION_IDS))
    timings = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        evaluation = evaluate(load_fixture(args.fixture), ablations, runs=2)
        timings.append(time.perf_counter() - started)
    queries = len(evaluation.fixture.queries)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"fixture: {evaluation.fixture.fixture_id}, {queries} queries x {len(ablations)} ablations x 2 runs")
    print(f"cold (first in process): {timings[0]:.3f} s")
    warm = timings[1:] or timings
    print(f"warm: median {statistics.median(warm):.3f} s, min {min(warm):.3f} s over {len(warm)} repetitions")


if __name__ == "__main__":
    main()
