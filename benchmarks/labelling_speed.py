"""The labelling loop at the size of a real pool: loading the pairs, saving decision after decision, agreement.

Data: the CMRC 2018 trial set (``--data``, default ``../shared/data/cmrc2018-trial/cmrc2018_trial.json``) imported
into a fixture in a temporary folder, its lexical and hybrid-rerank rankings written as TREC runs by ``evalkit run
--preset benchmark``, and ``evalkit pool --depth 10`` of the two (12,622 unjudged pairs on the trial set). Then, in
this process:

- ``load_tasks`` of the pool;
- a :class:`~evalkit.app.labelling.LabellingSession` recording ``--decisions`` decisions one after the other (each
  written to the label file at once, atomically) with its progress read after each, as the notebook does: the mean
  time of the first 50 decisions and of the last 50 (their ratio should stay near 1: a decision's cost must not
  grow with the file);
- ``evalkit.measures.agreement.agreement`` of two reviewers' files over every pooled pair (grades drawn with a seeded
  ``numpy.random.Generator``, a span on each relevant one), beside its peers for the two statistics alone:
  ``krippendorff.alpha`` (ordinal) and scikit-learn's ``cohen_kappa_score`` (quadratic), when installed.

    python benchmarks/labelling_speed.py [--decisions 2000] [--data PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from evalkit.app.cli import main as evalkit_main
from evalkit.app.labelling import LabellingSession
from evalkit.data.fixture import load_fixture
from evalkit.data.label_tasks import LabelTask, load_tasks
from evalkit.data.labels import LabelDecision, labels_jsonl
from evalkit.measures.agreement import agreement

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "cmrc2018-trial" / "cmrc2018_trial.json"


def _cli(*argv: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        code = evalkit_main(list(argv))
    if code != 0:
        raise SystemExit(f"evalkit {' '.join(argv)} exited {code}")


def _reviewer(tasks: list[LabelTask], name: str, rng: np.random.Generator) -> list[LabelDecision]:
    grades = rng.choice(4, size=len(tasks), p=[0.55, 0.15, 0.15, 0.15])
    return [
        LabelDecision(
            query_id=t.query_id,
            chunk_id=t.chunk_id,
            grade=int(g),
            spans=((0, min(5, len(t.chunk_text))),) if g else (),
            reviewer=name,
        )
        for t, g in zip(tasks, grades, strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a SQuAD-format file (CMRC 2018 trial set)")
    parser.add_argument("--decisions", type=int, default=2000)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    folder = Path(tempfile.mkdtemp(prefix="evalkit-labelling-"))
    os.chdir(folder)
    started = time.perf_counter()
    _cli(
        "import",
        "squad",
        str(args.data),
        "--output-dir",
        "fx",
        "--fixture-id",
        "bench",
        "--language",
        "zh",
        "--license",
        "CC-BY-SA-4.0",
        "--attribution",
        "CMRC 2018",
    )
    _cli(
        "run",
        "--fixture",
        "fx",
        "--preset",
        "benchmark",
        "--runs",
        "1",
        "--no-gates",
        "--no-cache",
        "--ablations",
        "lexical,hybrid-rerank",
        "--trec-runs",
        "runs",
    )
    _cli(
        "pool",
        "--fixture",
        "fx",
        "--run",
        "runs/lexical.trec",
        "--run",
        "runs/hybrid-rerank.trec",
        "--depth",
        "10",
        "--output",
        "pool.jsonl",
    )
    print(f"fixture, runs and pool made in {time.perf_counter() - started:.1f} s (not timed below)")
    fixture = load_fixture(Path("fx")).fixture

    started = time.perf_counter()
    tasks = list(load_tasks(fixture, Path("pool.jsonl")))
    print(f"load_tasks: {len(tasks):,} pairs in {time.perf_counter() - started:.2f} s")

    session = LabellingSession(tasks, Path("ana.jsonl"), "ana", fixture)
    count = min(args.decisions, len(tasks))
    costs = []
    for i in range(count):
        started = time.perf_counter()
        if i % 3 == 0:
            session.mark(0, 1)
            session.record(2)
        else:
            session.record(0)
        session.progress()
        costs.append(time.perf_counter() - started)
    first, last = np.mean(costs[:50]) * 1e3, np.mean(costs[-50:]) * 1e3
    print(
        f"a decision (record + progress): first 50 {first:.2f} ms, last 50 of {count:,} {last:.2f} ms, "
        f"ratio {last / first:.2f}"
    )

    rng = np.random.default_rng(0)
    a, b = _reviewer(tasks, "ana", rng), _reviewer(tasks, "bo", rng)
    Path("a.jsonl").write_bytes(labels_jsonl(a))
    started = time.perf_counter()
    result = agreement(a, b, fixture)
    ours = time.perf_counter() - started
    print(f"agreement of {result.pairs:,} pairs (alpha, kappa, span F1, disagreements, per language): {ours:.2f} s")
    x = np.array([d.grade for d in a])
    y = np.array([d.grade for d in b])
    try:
        import krippendorff
        from sklearn.metrics import cohen_kappa_score
    except ImportError:
        print("krippendorff or scikit-learn not installed: peers left out")
        return
    started = time.perf_counter()
    alpha = krippendorff.alpha(reliability_data=np.vstack([x, y]), level_of_measurement="ordinal")
    kappa = cohen_kappa_score(x, y, weights="quadratic")
    peers = time.perf_counter() - started
    print(
        f"peers, the two statistics alone (krippendorff.alpha + cohen_kappa_score): {peers:.3f} s; "
        f"evalkit / peers {ours / peers:.1f}x (evalkit also computes span F1 and lists the disagreements)"
    )
    print(
        f"alpha {alpha:.4f} (evalkit {result.krippendorff_alpha_ordinal.value:.4f}), "
        f"kappa {kappa:.4f} (evalkit {result.cohen_kappa_quadratic.value:.4f})"
    )


if __name__ == "__main__":
    main()
