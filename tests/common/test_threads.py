"""Blocks made on several threads come back in order, stop cleanly, and give scoring the same values as one thread."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from evalkit.common import threads
from evalkit.common.threads import each, in_order, scoring_threads
from evalkit.data.qrels import qrels_from_mapping
from evalkit.data.runs import run_from_rankings
from evalkit.measures import run_order
from evalkit.measures.core import score_run
from evalkit.measures.registry import parse_measures


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_results_come_back_in_the_order_of_the_items(workers: int) -> None:
    def slow_for_early(item: int) -> tuple[int, str]:
        time.sleep(0.002 * (10 - item))  # early items finish last
        return item, threading.current_thread().name

    results = list(in_order(slow_for_early, list(range(10)), workers))
    assert [item for item, _ in results] == list(range(10))
    names = {name for _, name in results}
    assert (names == {threading.current_thread().name}) == (workers == 1)


def test_at_most_threads_and_one_items_are_started_ahead_of_the_consumer() -> None:
    started: list[int] = []
    lock = threading.Lock()

    def record(item: int) -> int:
        with lock:
            started.append(item)
        return item

    iterator = in_order(record, list(range(20)), 2)
    assert next(iterator) == 0
    time.sleep(0.05)
    assert len(started) <= 4  # the item yielded, two ahead of it, and one waiting for a thread
    iterator.close()
    time.sleep(0.05)
    assert len(started) <= 4  # closing cancels what had not started


def test_an_exception_in_the_work_is_raised_at_its_item() -> None:
    def fail_at_three(item: int) -> int:
        if item == 3:
            raise ValueError("item 3")
        return item

    seen: list[int] = []
    with pytest.raises(ValueError, match="item 3"):
        for value in in_order(fail_at_three, list(range(8)), 2):
            seen.append(value)
    assert seen == [0, 1, 2]


def test_the_thread_count_follows_arrows_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads.pa, "cpu_count", lambda: 1)
    assert scoring_threads() == 1
    monkeypatch.setattr(threads.pa, "cpu_count", lambda: 512)
    assert 1 <= scoring_threads() <= 512


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
def test_scoring_on_several_threads_gives_the_values_of_one(ties: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    rankings = {
        f"q{q:04d}": [
            (f"d{int(d)}", float(s)) for d, s in zip(rng.integers(0, 60, 30), rng.integers(0, 5, 30), strict=True)
        ]
        for q in range(400)
    }
    judgments = {
        q: {f"d{int(d)}": int(g) for d, g in zip(rng.integers(0, 60, 8), rng.integers(-1, 4, 8), strict=True)}
        for q in rankings
    }
    qrels, run = qrels_from_mapping(judgments), run_from_rankings("r", rankings)
    measures = parse_measures(["map", "recip_rank", "ndcg", "bpref", "infAP", "ndcg_cut_10"])
    monkeypatch.setattr(run_order, "BLOCK_LINES", 256)  # many blocks
    values = {}
    for workers in (1, 3):
        monkeypatch.setattr(run_order, "scoring_threads", lambda workers=workers: workers)
        scores = score_run(qrels, run, measures, ties)
        values[workers] = (scores.values, scores.counts)
    one, three = values[1], values[3]
    assert one[1] == three[1]
    assert one[1].duplicates > 0
    for name, column in one[0].items():
        assert np.array_equal(column, three[0][name], equal_nan=True), name


@pytest.mark.parametrize("workers", [1, 2])
def test_beside_runs_the_first_on_its_own_thread_and_returns_both(workers: int) -> None:
    names: list[str] = []

    def first() -> str:
        names.append(threading.current_thread().name)
        return "first"

    assert threads.beside(first, lambda: 2, workers) == ("first", 2)
    assert (names[0] == threading.current_thread().name) == (workers == 1)


@pytest.mark.parametrize("workers", [1, 2])
def test_beside_raises_the_first_error_as_if_the_first_ran_first(workers: int) -> None:
    def bad_first() -> int:
        time.sleep(0.02)  # fails after the second has failed
        raise ValueError("first")

    def bad_second() -> int:
        raise KeyError("second")

    with pytest.raises(ValueError, match="first"):
        threads.beside(bad_first, bad_second, workers)
    with pytest.raises(KeyError, match="second"):
        threads.beside(lambda: 1, bad_second, workers)
    with pytest.raises(ValueError, match="first"):
        threads.beside(bad_first, lambda: 2, workers)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_each_gives_the_items_results_in_order_on_lasting_threads(workers: int) -> None:
    def named(item: int) -> tuple[int, str]:
        time.sleep(0.002 * (item % 3))  # later items may finish first
        return item * item, threading.current_thread().name

    first = each(named, list(range(12)), workers)
    again = each(named, list(range(12)), workers)
    assert [value for value, _ in first] == [i * i for i in range(12)]
    used = {name for _, name in first + again}
    if workers == 1:
        assert used == {threading.current_thread().name}
    else:
        assert all(name.startswith("evalkit-each") for name in used) and len(used) <= workers


def test_each_raises_the_first_failing_item_in_order() -> None:
    def failing(item: int) -> int:
        if item in (2, 5):
            raise ValueError(f"item {item}")
        return item

    with pytest.raises(ValueError, match="item 2"):
        each(failing, list(range(8)), 2)


def test_each_in_a_forked_child_uses_threads_of_its_own() -> None:
    each(lambda item: item, [1, 2, 3], 2)  # the parent's pool exists
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            names = each(lambda item: threading.current_thread().name, list(range(6)), 2)
            os.write(write, ",".join(names).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        said = pipe.read()
    os.waitpid(child, 0)
    assert said and all(name.startswith("evalkit-each") for name in said.split(",")), said


def test_each_still_works_while_the_interpreter_shuts_down(tmp_path: Path) -> None:
    script = tmp_path / "late.py"
    script.write_text(
        "import atexit\n"
        "from evalkit.common.threads import each\n"
        "atexit.register(lambda: print(each(lambda item: item * 2, [1, 2, 3], 2)))\n",
        encoding="utf-8",
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "[2, 4, 6]", "")
