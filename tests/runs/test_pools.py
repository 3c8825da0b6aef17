"""Pools to label (`evalkit.runs.pools`): the unjudged pairs of the union of the runs' top k, hand-computed on tiny
cases, ordered as the scoring core orders runs, with the counts and judged@k before and after labelling."""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evalkit
from evalkit.data.qrels import Qrels, qrels_from_mapping
from evalkit.data.runs import Run, run_from_rankings
from evalkit.measures.run_order import rank_run
from evalkit.measures.ties import SUMMATION_OF, order_ranking
from evalkit.runs import pools
from evalkit.runs.pools import Pool, PoolEntry, PoolPairs, RunPoolCounts, build_pool, format_pool_counts, pool_jsonl

QRELS = qrels_from_mapping(
    {
        "q1": {"d1": 2, "d2": 0, "d3": -1},  # relevant, judged not relevant, pooled but not judged
        "q2": {"e1": 1},
        "q3": {"f1": 0},  # no relevant document: judged@k is not defined there
    }
)
A = run_from_rankings(
    "a",
    {
        "q1": [("d1", 9.0), ("x", 8.0), ("d3", 7.0), ("deep", 1.0)],
        "q2": [("e1", 5.0), ("y", 5.0)],  # a tie: ID ascending (evalkit) puts e1 first
        "q9": [("z", 1.0)],  # a query the judgments do not hold
    },
)
B = run_from_rankings("b", {"q1": [("x", 3.0), ("d2", 2.0), ("w", 1.0)], "q3": [("f1", 2.0), ("v", 1.0)]})


def _pairs(pool: Pool) -> list[tuple[str, str, tuple[tuple[str, int], ...]]]:
    return [(e.query_id, e.doc_id, e.runs) for e in pool.entries]


def test_union_of_top_k_keeps_unjudged_pairs_only_in_order() -> None:
    pool = build_pool(QRELS, [A, B], depth=3)
    # a's top 3: q1 d1 x d3 (d3 has grade -1: pooled), q2 e1 y; b's: q1 x d2 w, q3 f1 v.
    assert _pairs(pool) == [
        ("q1", "x", (("b", 1), ("a", 2))),
        ("q1", "d3", (("a", 3),)),
        ("q1", "w", (("b", 3),)),
        ("q2", "y", (("a", 2),)),
        ("q3", "v", (("b", 2),)),
    ]
    assert [e.best_rank for e in pool.entries] == [1, 3, 3, 2, 2]


def test_judged_grades_are_never_pooled_and_minus_one_always_is() -> None:
    pool = build_pool(QRELS, [A, B], depth=10)
    pooled = {(e.query_id, e.doc_id) for e in pool.entries}
    assert ("q1", "d3") in pooled  # grade -1: trec_eval's "pooled, not judged"
    assert not pooled & {("q1", "d1"), ("q1", "d2"), ("q2", "e1"), ("q3", "f1")}  # grades 2, 0, 1, 0
    assert ("q1", "deep") in pooled and ("q1", "deep") not in {
        (e.query_id, e.doc_id) for e in build_pool(QRELS, [A], 3).entries
    }


def test_the_same_pool_whatever_the_order_of_the_runs() -> None:
    forward, backward = build_pool(QRELS, [A, B], 3), build_pool(QRELS, [B, A], 3)
    assert forward.entries == backward.entries
    assert [c.run for c in backward.counts] == ["b", "a"]


def test_ties_follow_the_tie_policy() -> None:
    qrels = qrels_from_mapping({"q": {"j": 1}})
    run = run_from_rankings("t", {"q": [("m", 1.0), ("a", 1.0), ("z", 1.0), ("j", 2.0)]})
    # evalkit: score descending, then ID ascending -> j a m z; trec_eval: ID descending -> j z m a.
    assert _pairs(build_pool(qrels, [run], 2, "evalkit")) == [("q", "a", (("t", 2),))]
    assert _pairs(build_pool(qrels, [run], 2, "trec_eval")) == [("q", "z", (("t", 2),))]


def test_trec_eval_ties_are_read_in_float32() -> None:
    qrels = qrels_from_mapping({"q": {"j": 1}})
    run = run_from_rankings("t", {"q": [("a", 1.0), ("b", 1.0 + 1e-12), ("j", 2.0)]})
    assert _pairs(build_pool(qrels, [run], 2, "evalkit")) == [("q", "b", (("t", 2),))]  # b scores higher
    assert _pairs(build_pool(qrels, [run], 2, "trec_eval")) == [("q", "b", (("t", 2),))]  # a tie: ID descending
    run = run_from_rankings("t", {"q": [("b", 1.0), ("a", 1.0 + 1e-12), ("j", 2.0)]})
    assert _pairs(build_pool(qrels, [run], 2, "evalkit")) == [("q", "a", (("t", 2),))]
    assert _pairs(build_pool(qrels, [run], 2, "trec_eval")) == [("q", "b", (("t", 2),))]


def test_duplicates_keep_their_best_placed_line() -> None:
    qrels = qrels_from_mapping({"q": {"j": 1}})
    run = run_from_rankings("t", {"q": [("x", 3.0), ("j", 2.5), ("x", 2.0), ("y", 1.0)]})
    # deduplicated: x (rank 1), j (2), y (3); the second x is not a rank of its own
    assert _pairs(build_pool(qrels, [run], 3)) == [("q", "x", (("t", 1),)), ("q", "y", (("t", 3),))]
    assert build_pool(qrels, [run], 3).counts[0].pairs == 2


def test_counts_pairs_in_all_and_only_this_run() -> None:
    pool = build_pool(QRELS, [A, B], depth=3)
    a, b = pool.counts
    assert (a.run, a.pairs, a.only, a.left_out) == ("a", 3, 2, 1)  # x (also b's), d3, y; q9 left out
    assert (b.run, b.pairs, b.only, b.left_out) == ("b", 3, 2, 0)  # x, w, v


def test_judged_at_k_today_and_once_labelled() -> None:
    pool = build_pool(QRELS, [A, B], depth=3)
    a, b = pool.counts
    # Defined on q1 and q2 (q3 has no relevant document). a: q1 d1 x d3 -> 1/3 (d3's -1 is not judged),
    # q2 e1 y -> 1/2; labelled: every result judged -> 1 and 1.
    assert a.judged_now == pytest.approx((1 / 3 + 1 / 2) / 2, abs=1e-15)
    assert a.judged_labelled == 1.0
    # b: q1 x d2 w -> 1/3; q2 not named -> 0 (an empty ranking), before and after.
    assert b.judged_now == pytest.approx((1 / 3 + 0) / 2, abs=1e-15)
    assert b.judged_labelled == 0.5


def test_judged_today_equals_the_scoring_cores_judged_at_k() -> None:
    """Without negative grades, judged@k today is evalkit's judged@k as `evalkit score` reports it."""
    judgments = {"q1": {"d1": 2, "d2": 0}, "q2": {"e1": 1}, "q3": {"f1": 0}}
    for run in (A, B):
        scored = evalkit.score(judgments, run, measures=["judged@3"])
        (counts,) = build_pool(qrels_from_mapping(judgments), [run], 3).counts
        assert counts.judged_now == scored.aggregate["judged@3"]


def test_judged_at_k_is_none_without_a_relevant_judgment() -> None:
    qrels = qrels_from_mapping({"q": {"j": 0}})
    (counts,) = build_pool(qrels, [run_from_rankings("t", {"q": [("j", 1.0), ("x", 0.5)]})], 5).counts
    assert (counts.judged_now, counts.judged_labelled, counts.pairs) == (None, None, 1)
    assert "judged@5" in format_pool_counts(build_pool(qrels, [run_from_rankings("t", {"q": [("j", 1.0)]})], 5))


@pytest.mark.parametrize("depth", [0, -1, True])
def test_a_depth_below_one_is_refused(depth: int) -> None:
    with pytest.raises(ValueError, match="--depth"):
        build_pool(QRELS, [A], depth)


def test_a_run_with_no_judged_query_is_refused() -> None:
    stranger = run_from_rankings("stranger", {"p1": [("x", 1.0)], "p2": [("y", 1.0)]})
    with pytest.raises(ValueError, match=r"run stranger: none of its 2 query\(ies\) is in the judgments"):
        build_pool(QRELS, [A, stranger], 3)
    with pytest.raises(ValueError, match="run empty: holds no result line"):  # as evalkit score refuses it
        build_pool(QRELS, [run_from_rankings("empty", {})], 3)


def test_two_runs_named_alike_and_an_unknown_tie_policy_are_refused() -> None:
    with pytest.raises(ValueError, match="two runs are named 'a'"):
        build_pool(QRELS, [A, A], 3)
    with pytest.raises(ValueError, match="unknown tie policy"):
        build_pool(QRELS, [A], 3, "random")


def test_jsonl_lines_with_language_and_chunk_id() -> None:
    entries = (PoolEntry("q1", "x", (("b", 1), ("a", 2))), PoolEntry("q2", "y", (("a", 2),)))
    pool = Pool(3, "evalkit", PoolPairs.from_entries(entries), ())
    lines = pool_jsonl(pool, {"q1": "en"}, chunk_ids=True).decode("utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "query_id": "q1",
            "language": "en",
            "doc_id": "x",
            "chunk_id": "x",
            "best_rank": 1,
            "runs": [{"run": "b", "rank": 1}, {"run": "a", "rank": 2}],
        },
        {"query_id": "q2", "doc_id": "y", "chunk_id": "y", "best_rank": 2, "runs": [{"run": "a", "rank": 2}]},
    ]
    assert pool.entries == entries
    assert pool_jsonl(Pool(3, "evalkit", PoolPairs.from_entries(()), ())) == b""


def test_counts_text_names_every_run_and_the_left_out_queries() -> None:
    text = format_pool_counts(build_pool(QRELS, [A, B], 3))
    assert text.splitlines()[0].startswith("pool: 5 unjudged pair(s) in 3 query(ies) to label")
    assert "judged@3 now" in text and "judged@3 labelled" in text
    assert "note: a: 1 query(ies) not in the judgments (left out)" in text
    assert "note: b" not in text
    assert RunPoolCounts("a", 3, 2, (1 / 3 + 1 / 2) / 2, 1.0, 1) == build_pool(QRELS, [A, B], 3).counts[0]


def _random_case(seed: int) -> tuple[Qrels, list[Run]]:
    """Tie-heavy runs (scores from 4 values, repeated documents) over 6 queries, with grades -1 to 2."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(12)]
    judgments = {
        f"q{q}": {d: int(rng.integers(-1, 3)) for d in rng.choice(docs, size=5, replace=False).tolist()}
        for q in range(6)
    }
    runs = [
        run_from_rankings(
            f"r{r}",
            {
                f"q{q}": [(str(d), float(rng.choice([0.5, 1.0, 1.5, 2.0]))) for d in rng.choice(docs, size=9).tolist()]
                for q in range(7)
            },
        )
        for r in range(3)
    ]
    return qrels_from_mapping(judgments), runs


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
@pytest.mark.parametrize("seed", range(5))
def test_pool_equals_the_tie_policies_own_ordering(seed: int, ties: str) -> None:
    """The pool equals one built from each query's ranking as the tie policy orders it (the reference
    `order_ranking`), cut at k, keeping pairs absent from the judgments or graded negative."""
    qrels, runs = _random_case(seed)
    grades = qrels.as_dict()
    expected: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for run in runs:
        for query_id, pairs in run.rankings.items():
            if query_id not in grades:
                continue
            for rank, doc in enumerate(order_ranking(pairs, ties)[:4], 1):
                if grades[query_id].get(doc, -1) < 0:
                    expected.setdefault((query_id, doc), []).append((run.name, rank))
    pool = build_pool(qrels, runs, 4, ties)
    assert {(e.query_id, e.doc_id): sorted(e.runs) for e in pool.entries} == {
        key: sorted(value) for key, value in expected.items()
    }
    keys = [(e.query_id, e.best_rank, e.doc_id) for e in pool.entries]
    assert keys == sorted(keys)


_ID_CHARACTERS = 'ab"\\é中😀'
"""IDs to pool: a quote and a backslash (which JSON escapes), and non-ASCII ones, one past the BMP."""
_ids = st.text(alphabet=_ID_CHARACTERS, min_size=1, max_size=3)
_scores = st.sampled_from([0.5, 1.0, 1.0 + 1e-12, 2.0])  # ties, and a tie only in float32 (trec_eval's policy)
Rankings = dict[str, list[tuple[str, float]]]


@st.composite
def _pool_cases(draw: st.DrawFn) -> tuple[dict[str, dict[str, int]], dict[str, Rankings], int, str]:
    """Judgments (grades -2 to 2) over a few queries, and runs repeating documents, with a query the judgments do
    not hold ("?") and names that sort differently by code point and by appearance."""
    queries = draw(st.lists(_ids, min_size=1, max_size=4, unique=True))
    docs = draw(st.lists(_ids, min_size=1, max_size=6, unique=True))
    judgments = {
        q: draw(st.dictionaries(st.sampled_from(docs), st.integers(-2, 2), min_size=1, max_size=4)) for q in queries
    }
    ranking = st.lists(st.tuples(st.sampled_from(docs), _scores), min_size=1, max_size=8)
    names = draw(st.lists(st.sampled_from(["b", "a", 'q"', "中", "Z\\", "😀"]), min_size=1, max_size=4, unique=True))
    runs = {}
    for name in names:
        first = {queries[0]: draw(ranking)}  # a run with no judged query is refused
        runs[name] = first | draw(st.dictionaries(st.sampled_from([*queries, "?"]), ranking, max_size=5))
    return judgments, runs, draw(st.integers(1, 5)), draw(st.sampled_from(["evalkit", "trec_eval"]))


def _reference_pool(
    qrels: Qrels, runs: list[Run], depth: int, ties: str, languages: dict[str, str], chunk_ids: bool
) -> tuple[bytes, list[PoolEntry], list[tuple[str, int, int, int]], list[float | None]]:
    """The pool one pair at a time, in Python objects, as evalkit built it before its pools were columns: each
    run's top `depth` as the scoring core orders it (`rank_run` with IDs; a position is judged when its query's
    judgments give its ID a grade of 0 or more, read from a dict, not from the join), a dict of pairs, a sort by a
    Python key, `json.dumps` per line. Returns the JSON lines, the entries, each run's (name, pairs, only, left
    out) and its judged@k today (judged results in the top k over how many there are, over the queries with a
    relevant judgment)."""
    query_ids = qrels.queries.to_pylist()
    brought: dict[tuple[str, str], list[tuple[str, int]]] = {}
    named: dict[str, list[tuple[str, str]]] = {}
    judged_now: list[float | None] = []
    for run in runs:
        named[run.name], shares = [], []
        ranked_run = rank_run(run, qrels, ties, SUMMATION_OF[ties], depth, with_ids=True)
        for rows, ranked in ranked_run.blocks():
            for local, row in enumerate(rows.tolist()):
                at = np.flatnonzero(ranked.row == local).tolist()
                grades = (ranked.judgments or [])[local]
                ids = ranked.doc_ids or []
                top = [(ids[i], int(ranked.rank[i]), grades.get(ids[i], -1) >= 0) for i in at]
                if max(grades.values()) >= 1:
                    shares.append(sum(judged for _, _, judged in top) / len(top) if top else 0.0)
                for doc, rank, judged in top:
                    if not judged:
                        brought.setdefault((query_ids[row], doc), []).append((run.name, rank))
                        named[run.name].append((query_ids[row], doc))
        judged_now.append(sum(shares) / len(shares) if shares else None)
    entries = sorted(
        (PoolEntry(q, d, tuple(sorted(by, key=lambda r: (r[1], r[0])))) for (q, d), by in brought.items()),
        key=lambda e: (e.query_id, e.best_rank, e.doc_id),
    )
    lines = []
    for entry in entries:
        row: dict[str, object] = {"query_id": entry.query_id}
        if entry.query_id in languages:
            row["language"] = languages[entry.query_id]
        row["doc_id"] = entry.doc_id
        if chunk_ids:
            row["chunk_id"] = entry.doc_id
        row["best_rank"] = entry.best_rank
        row["runs"] = [{"run": name, "rank": rank} for name, rank in entry.runs]
        lines.append(json.dumps(row, ensure_ascii=False) + "\n")
    judged_queries = set(query_ids)
    counts = [
        (
            run.name,
            len(named[run.name]),
            sum(1 for pair in named[run.name] if len(brought[pair]) == 1),
            sum(q not in judged_queries for q in run.queries.to_pylist()),
        )
        for run in runs
    ]
    return "".join(lines).encode("utf-8"), entries, counts, judged_now


@settings(max_examples=300, deadline=None)
@given(_pool_cases(), st.dictionaries(_ids, st.sampled_from(["en", "zh", 'x"\\', "中文"])), st.booleans())
def test_pool_bytes_and_counts_equal_a_pair_by_pair_reference(
    case: tuple[dict[str, dict[str, int]], dict[str, Rankings], int, str], languages: dict[str, str], chunk_ids: bool
) -> None:
    """The columnar pool writes the bytes and counts of the straightforward one (ties, duplicates, negative
    grades, quotes, backslashes and non-ASCII IDs, several runs, both tie policies)."""
    judgments, rankings, depth, ties = case
    qrels, runs = (
        qrels_from_mapping(judgments),
        [run_from_rankings(name, ranking) for name, ranking in rankings.items()],
    )
    pool = build_pool(qrels, runs, depth, ties)
    data, entries, counts, judged_now = _reference_pool(qrels, runs, depth, ties, languages, chunk_ids)
    assert pool_jsonl(pool, languages, chunk_ids) == data
    assert list(pool.entries) == entries
    assert [(c.run, c.pairs, c.only, c.left_out) for c in pool.counts] == counts
    assert [c.judged_now for c in pool.counts] == pytest.approx(judged_now, abs=1e-12)
    queries = len({e.query_id for e in entries})
    assert (
        format_pool_counts(pool)
        .splitlines()[0]
        .startswith(f"pool: {len(entries)} unjudged pair(s) in {queries} query(ies) to label")
    )


def test_lines_written_block_by_block_are_the_lines_written_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pairs assembled a few at a time (blocks ending inside a query, and between a pair's runs) give the bytes of
    one block."""
    qrels, runs = _random_case(7)
    pool = build_pool(qrels, runs, 5)
    whole = pool_jsonl(pool, {"q1": "中文"}, chunk_ids=True)
    monkeypatch.setattr(pools, "POOL_LINES_BLOCK", 3)
    assert len(pool.pairs) > 3 * 3
    assert pool_jsonl(pool, {"q1": "中文"}, chunk_ids=True) == whole
    assert whole.count(b"\n") == len(pool.entries)


def test_an_iterator_of_runs_is_pooled_one_run_at_a_time() -> None:
    """Each run is let go before the next is taken (the CLI reads each run file when the pool asks for it, so it
    holds one run at a time), and the pool is the pool of the list."""
    taken: list[weakref.ref[Run]] = []

    def runs() -> Iterator[Run]:
        for run in (A, B):
            copy = run_from_rankings(run.name, run.rankings)
            gc.collect()
            assert [ref() for ref in taken] == [None] * len(taken)
            taken.append(weakref.ref(copy))
            yield copy
            del copy

    pool = build_pool(QRELS, runs(), 3)
    assert len(taken) == 2
    assert pool.entries == build_pool(QRELS, [A, B], 3).entries
    assert pool.counts == build_pool(QRELS, [A, B], 3).counts
    with pytest.raises(ValueError, match="at least one run"):
        build_pool(QRELS, iter(()), 3)
