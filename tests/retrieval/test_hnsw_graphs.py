"""Tests for the hnsw index's graphs: rows cut into graphs of ``graph_rows``, stored as ``dtype`` and rescored
with the float32 rows, the same in every process, and settings at their defaults written as before."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

from evalkit.data.settings import HnswSettings, RetrievalSettings
from evalkit.retrieval import vector_index
from evalkit.retrieval.embeddings import l2_normalize
from evalkit.retrieval.vector_index import (
    HnswIndex,
    IndexPlan,
    estimated_mib,
    exact_top,
    expansion_for,
    recall_at,
    row_scores,
)

pytest.importorskip("usearch")

ROWS = l2_normalize(np.random.default_rng(0).standard_normal((2000, 24))).astype(np.float32)
QUERIES = l2_normalize(np.random.default_rng(1).standard_normal((40, 24))).astype(np.float32)


def test_new_fields_at_their_defaults_leave_the_settings_bytes_as_before() -> None:
    assert "hnsw" not in RetrievalSettings().model_dump(mode="json")
    written = RetrievalSettings(hnsw=HnswSettings(expansion_search=64)).model_dump(mode="json")["hnsw"]
    assert written == {"connectivity": 32, "expansion_add": 128, "expansion_search": 64, "build_threads": 1}
    chosen = HnswSettings(graph_rows=5000, dtype="f32", rescored=30).model_dump(mode="json")
    assert (chosen["graph_rows"], chosen["dtype"], chosen["rescored"]) == (5000, "f32", 30)
    with pytest.raises(ValueError, match="dtype"):
        HnswSettings.model_validate({"dtype": "b1"})


@pytest.mark.parametrize("dtype", ["i8", "f16", "f32"])
def test_rows_are_cut_into_graphs_and_every_graph_is_searched(dtype: str) -> None:
    index = HnswIndex([ROWS[:1000], ROWS[1000:1500], ROWS[1500:]], 24, HnswSettings(graph_rows=700, dtype=dtype))
    assert [graph.size for graph in index.graphs] == [700, 700, 600]
    exact = [scores for _, scores in exact_top([ROWS], QUERIES, 10)]
    assert recall_at(index, exact, QUERIES) >= 0.99
    found, scores = index.search(QUERIES[0], 30)
    assert len(set(found.tolist())) == 30 and {p // 700 for p in found.tolist()} == {0, 1, 2}
    assert np.array_equal(scores, row_scores(ROWS[found], QUERIES[0]))  # rescored from the float32 rows
    assert np.array_equal(index.rows([1999, 3, 701]), ROWS[[1999, 3, 701]])  # float32, not the graph's i8 copy
    assert np.array_equal(np.concatenate(list(index.blocks())), ROWS)


def test_a_corpus_of_one_graph_matches_the_single_graph() -> None:
    one = HnswIndex([ROWS], 24, HnswSettings())
    assert len(one.graphs) == 1
    cut = HnswIndex([ROWS], 24, HnswSettings(graph_rows=2000))
    assert [one.search(q, 10)[0].tolist() for q in QUERIES] == [cut.search(q, 10)[0].tolist() for q in QUERIES]


def test_a_query_searches_the_graphs_on_several_threads_with_the_results_of_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = HnswIndex([ROWS], 24, HnswSettings(graph_rows=300, dtype="i8"))
    assert len(index.graphs) == 7
    searched_on: set[str] = set()
    search = type(index.graphs[0]).search

    def recording(graph: object, *args: object, **kwargs: object) -> object:
        searched_on.add(threading.current_thread().name)
        return search(graph, *args, **kwargs)

    monkeypatch.setattr(type(index.graphs[0]), "search", recording)
    results = {}
    for workers in (1, 2, 3):
        monkeypatch.setattr(vector_index, "scoring_threads", lambda workers=workers: workers)
        results[workers] = [(p.tolist(), s.tolist()) for p, s in (index.search(q, 20) for q in QUERIES)]
    assert results[1] == results[2] == results[3]
    assert threading.current_thread().name in searched_on
    assert any(name.startswith("evalkit-each") for name in searched_on)


def test_the_graphs_are_the_same_in_every_process() -> None:
    script = (
        "import numpy as np; from evalkit.data.settings import HnswSettings; "
        "from evalkit.retrieval.embeddings import l2_normalize; from evalkit.retrieval.vector_index import HnswIndex; "
        "m = l2_normalize(np.random.default_rng(0).standard_normal((2000, 24))).astype(np.float32); "
        "q = l2_normalize(np.random.default_rng(1).standard_normal((40, 24))).astype(np.float32); "
        "i = HnswIndex([m[:1000], m[1000:]], 24, HnswSettings(graph_rows=700)); "
        "print([i.search(x, 10)[0].tolist() for x in q])"
    )
    index = HnswIndex([ROWS[:1000], ROWS[1000:]], 24, HnswSettings(graph_rows=700))
    here = str([index.search(query, 10)[0].tolist() for query in QUERIES])
    for seed in ("0", "99"):
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env={"PYTHONHASHSEED": seed}, check=True
        )
        assert out.stdout.strip() == here


def test_the_memory_estimate_counts_the_graph_rows_and_the_float32_rows() -> None:
    i8 = IndexPlan("hnsw", "set", HnswSettings())
    f32 = IndexPlan("hnsw", "set", HnswSettings(dtype="f32"))
    assert estimated_mib(i8, 1 << 20, 512, 0) == 1 * 512 + 4 * 512 + 8 * 32 + 320
    assert estimated_mib(f32, 1 << 20, 512, 0) == 4 * 512 + 8 * 32 + 320


def test_expansion_search_left_to_the_corpus_shares_a_bounded_work_among_the_graphs() -> None:
    assert [expansion_for(graphs) for graphs in (1, 2, 5, 6, 10, 40)] == [512, 512, 512, 426, 256, 256]
    left = HnswIndex([ROWS], 24, HnswSettings(graph_rows=300))
    assert len(left.graphs) == 7 and left.expansion_search == 365
    assert {graph.expansion_search for graph in left.graphs} == {365}
    chosen = HnswIndex([ROWS], 24, HnswSettings(graph_rows=300, expansion_search=64))
    assert {graph.expansion_search for graph in chosen.graphs} == {64}


@pytest.mark.parametrize(("name", "code", "line"), [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")])
def test_a_signal_while_a_graph_is_built_ends_as_the_signal_does(name: str, code: int, line: str) -> None:
    """usearch checks for signals while it adds rows and turns the handler's exception into a RuntimeError: the
    command must still end with the signal's exit code and one line, not a traceback and exit 1."""
    script = (
        "import os, signal, sys, threading\n"
        "import numpy as np\n"
        "from evalkit.app.signals import with_signals\n"
        "from evalkit.data.settings import HnswSettings\n"
        "from evalkit.retrieval.vector_index import HnswIndex\n"
        "rows = np.random.default_rng(0).standard_normal((300_000, 64)).astype(np.float32)\n"
        "def build():\n"
        f"    threading.Timer(0.5, os.kill, (os.getpid(), signal.{name})).start()\n"
        "    HnswIndex([rows], 64, HnswSettings(graph_rows=300_000))\n"
        "    return 0\n"
        "sys.exit(with_signals(build))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == code, done.stderr
    assert done.stderr.startswith(f"evalkit: {line} ({name})") and "Traceback" not in done.stderr, done.stderr
