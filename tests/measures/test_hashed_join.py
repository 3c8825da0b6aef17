"""The join by hashes of the IDs (evalkit.measures.run_join): the same values and counts as the exact join by codes,
also when hashes clash (forced here): a clash between judgments, between a line and a judgment, or between two
lines, of one query or of two, sends the block to the exact join."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.data.columns import string_hashes
from evalkit.data.qrels import qrels_from_mapping
from evalkit.data.runs import run_from_rankings
from evalkit.measures import run_join
from evalkit.measures.core import score_run
from evalkit.measures.registry import parse_measures

MEASURES = parse_measures(["map", "recip_rank", "ndcg", "Rprec", "bpref", "infAP", "ndcg_cut_10", "P_5", "judged@10"])
Hashes = Callable[[pa.Array], npt.NDArray[np.uint64]]


@given(st.lists(st.text(max_size=20), max_size=60), st.integers(0, 5))
def test_equal_ids_hash_equal_and_unequal_ones_apart(texts: list[str], cut: int) -> None:
    values = pa.array(["pad"] * cut + texts).slice(cut)  # a slice: the hashes read from its offset
    hashes = string_hashes(values).tolist()
    for i, a in enumerate(texts):
        for j, b in enumerate(texts):
            assert (hashes[i] == hashes[j]) == (a == b), (a, b)


@given(st.lists(st.text(max_size=30), min_size=1, max_size=40))
def test_a_strings_hash_is_its_own_whatever_else_the_array_holds(texts: list[str]) -> None:
    """The judgments and the run lines are hashed apart: an ID must hash alike in both, whatever the longest ID
    beside it (mixing once per eight bytes of the longest string in the array, "d" hashed apart from "d" beside
    "dxxxxxxxx")."""
    together = string_hashes(pa.array(texts)).tolist()
    assert together == [int(string_hashes(pa.array([text]))[0]) for text in texts]


@pytest.mark.parametrize("seed", range(3))
def test_short_judged_ids_are_found_among_longer_ids_of_the_run(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Judgments of IDs of up to eight bytes, runs that also return IDs past eight (and past sixteen): the hashed
    join and the recip_rank probe find every judged line, as the exact join does."""
    rng = np.random.default_rng(seed)
    short = [f"d{i}" for i in range(40)]
    longer = [f"doc-{i:06d}" for i in range(30)] + [f"document-{i:012d}" for i in range(30)]
    judgments, rankings = {}, {}
    for q in range(30):
        judged = rng.choice(len(short), size=int(rng.integers(1, 6)), replace=False)
        judgments[f"q{q}"] = {short[d]: int(g) for d, g in zip(judged, rng.integers(0, 4, len(judged)), strict=True)}
        docs = [*(short[d] for d in rng.choice(len(short), 20)), *(longer[d] for d in rng.choice(len(longer), 60))]
        order = rng.permutation(len(docs))
        rankings[f"q{q}"] = [(docs[i], float(np.round(rng.random(), 1))) for i in order]
    with monkeypatch.context() as exact:
        _exact(exact)
        expected = _scores(judgments, rankings)
    assert _scores(judgments, rankings) == expected
    tied = run_from_rankings("a", {"q": [("d", 0.5)] * 4 + [("dxxxxxxxx", 0.5)]})
    values = score_run(qrels_from_mapping({"q": {"d": 1}}), tied, parse_measures(["P_1", "recip_rank"]), "trec_eval")
    assert (values.values["P_1"][0], values.values["recip_rank"][0]) == (0.0, 0.5)  # dxxxxxxxx first: ID descending


def _case(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, list[tuple[str, float]]]]:
    """Judgments of 40 queries and a run of many lines a query: repeats, ties, the same IDs in several queries,
    IDs past eight bytes, Chinese ones."""
    rng = np.random.default_rng(seed)
    pool = [f"d{i}" for i in range(30)] + [f"document-{i:012d}" for i in range(20)] + [f"文档{i}" for i in range(10)]
    judgments, rankings = {}, {}
    for q in range(40):
        judged = rng.choice(len(pool), size=int(rng.integers(1, 15)), replace=False)
        judgments[f"q{q}"] = {pool[d]: int(g) for d, g in zip(judged, rng.integers(0, 4, len(judged)), strict=True)}
        docs = rng.choice(len(pool), size=int(rng.integers(1, 120)))  # with repeats
        scores = np.round(rng.random(len(docs)), 1)
        rankings[f"q{q}"] = [(pool[d], float(s)) for d, s in zip(docs, scores, strict=True)]
    return judgments, rankings


def _scores(judgments: dict[str, dict[str, int]], rankings: dict[str, list[tuple[str, float]]]) -> tuple[object, ...]:
    result = score_run(qrels_from_mapping(judgments), run_from_rankings("r", rankings), MEASURES, "trec_eval")
    values = {name: [None if np.isnan(v) else v for v in column.tolist()] for name, column in result.values.items()}
    return result.counts, values  # NaN as None: every value compared with ==


def _exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_join, "_match_hashed", lambda *_: None)


@pytest.mark.parametrize(
    "clash",
    [
        pytest.param(lambda values: np.zeros(len(values), dtype=np.uint64), id="every ID one hash"),
        pytest.param(lambda values: np.asarray(string_hashes(values)) & np.uint64(3), id="four hashes"),
        pytest.param(None, id="the same hash in two queries"),
    ],
)
def test_clashing_hashes_give_the_exact_joins_values(monkeypatch: pytest.MonkeyPatch, clash: Hashes | None) -> None:
    judgments, rankings = _case(1)
    with monkeypatch.context() as exact:
        _exact(exact)
        expected = _scores(judgments, rankings)
    assert expected[0].duplicates > 0  # type: ignore[attr-defined]
    assert _scores(judgments, rankings) == expected  # the hashed join, unforced
    exact_join = run_join._match_codes
    calls: list[int] = []
    monkeypatch.setattr(run_join, "_match_codes", lambda *args: (calls.append(1), exact_join(*args))[1])
    if clash is None:  # the query row left out of the identity: one ID in two queries clashes
        monkeypatch.setattr(run_join, "_mixed", lambda hashes, row: hashes.view(np.int64))
    else:
        monkeypatch.setattr(run_join, "string_hashes", clash)
    assert _scores(judgments, rankings) == expected
    assert calls  # a clash was met and the block joined again exactly


def test_the_hashed_join_is_taken_when_nothing_clashes(monkeypatch: pytest.MonkeyPatch) -> None:
    judgments, rankings = _case(2)
    calls: list[int] = []
    exact_join = run_join._match_codes
    monkeypatch.setattr(run_join, "_match_codes", lambda *args: (calls.append(1), exact_join(*args))[1])
    _scores(judgments, rankings)
    assert not calls


FILLER = 30
"""Unjudged lines a query gets (its own IDs): enough for the join by hashes, not the sort."""
JUDGED = {"q1": {"a": 2, "b": 0}, "q2": {"c": 1}}


def _alike(*ids: str) -> Hashes:
    """Hashes with ``ids`` all given one hash."""

    def hashes(values: pa.Array) -> npt.NDArray[np.uint64]:
        found = string_hashes(values)
        found[np.isin(np.array(values.to_pylist(), dtype=object), list(ids))] = np.uint64(12345)
        return found

    return hashes


@pytest.mark.parametrize(
    ("rankings", "alike", "rows_apart"),
    [
        pytest.param({"q1": [("x1", 0.9), ("x2", 0.8), ("a", 0.7)]}, ("x1", "x2"), False, id="two lines of a query"),
        pytest.param({"q1": [("x1", 0.9)], "q2": [("x1", 0.8)]}, (), True, id="one ID in two queries"),
        pytest.param({"q1": [("x2", 0.9)]}, ("x2", "a"), False, id="a line and a judgment"),
        pytest.param({"q2": [("b", 0.8), ("c", 0.7)]}, (), True, id="a judgment of another query"),
    ],
)
def test_each_clash_is_caught_and_joined_exactly(
    monkeypatch: pytest.MonkeyPatch,
    rankings: dict[str, list[tuple[str, float]]],
    alike: tuple[str, ...],
    rows_apart: bool,
) -> None:
    given = {"q1": [], "q2": [], **rankings}
    rankings = {q: [*pairs, *((f"{q}-f{i}", 0.05) for i in range(FILLER))] for q, pairs in given.items()}
    with monkeypatch.context() as exact:
        _exact(exact)
        expected = _scores(JUDGED, rankings)
    exact_join = run_join._match_codes
    calls: list[int] = []
    monkeypatch.setattr(run_join, "_match_codes", lambda *args: (calls.append(1), exact_join(*args))[1])
    monkeypatch.setattr(run_join, "string_hashes", _alike(*alike))
    if rows_apart:  # the query row left out of the identity
        monkeypatch.setattr(run_join, "_mixed", lambda hashes, row: hashes.view(np.int64))
    assert _scores(JUDGED, rankings) == expected
    assert calls  # the clash was caught


def _probe_case(
    judgments: dict[str, dict[str, int]], rankings: dict[str, list[str]]
) -> tuple[npt.NDArray[np.int64], pa.Array, run_join.Judged, list[bool]]:
    """A block's lines and judgments as the probe reads them (query rows by sorted query name), and per line
    whether its query's judgments name its document, told by Python's dicts."""
    names = sorted({*judgments, *rankings})
    judged_pairs = [
        (names.index(q), doc, grade) for q, docs in sorted(judgments.items()) for doc, grade in docs.items()
    ]
    judged = run_join.Judged(
        np.array([row for row, _, _ in judged_pairs], dtype=np.int64),
        pa.chunked_array([pa.array([doc for _, doc, _ in judged_pairs], type=pa.string())]),
        np.array([grade for _, _, grade in judged_pairs], dtype=np.int64),
        np.arange(len(judged_pairs), dtype=np.int64),
    )
    lines = [(names.index(q), doc) for q, docs in rankings.items() for doc in docs]
    row = np.array([r for r, _ in lines], dtype=np.int64)
    truth = [doc in judgments.get(names[r], {}) for r, doc in lines]
    return row, pa.array([doc for _, doc in lines], type=pa.string()), judged, truth


@pytest.mark.parametrize(
    "clash",
    [
        pytest.param(None, id="no clash"),
        pytest.param(lambda values: np.zeros(len(values), dtype=np.uint64), id="every ID one hash"),
        pytest.param(lambda values: np.asarray(string_hashes(values)) & np.uint64(3), id="four hashes"),
    ],
)
@pytest.mark.parametrize("rows_apart", [False, True])
def test_the_probe_finds_the_judged_lines(
    monkeypatch: pytest.MonkeyPatch, clash: Hashes | None, rows_apart: bool
) -> None:
    judgments, rankings = _case(3)
    row, returned, judged, truth = _probe_case(judgments, {q: [d for d, _ in pairs] for q, pairs in rankings.items()})
    if clash is not None:
        monkeypatch.setattr(run_join, "string_hashes", clash)
    if rows_apart:  # the query row left out of the identity: one ID judged in two queries clashes
        monkeypatch.setattr(run_join, "_mixed", lambda hashes, row: hashes.view(np.int64))
    assert any(truth) and not all(truth)
    assert run_join.judged_lines(row, returned, judged).tolist() == truth
    assert (
        run_join.judged_lines(row, pa.chunked_array([returned.slice(0, 7), returned.slice(7)]), judged).tolist()
        == truth
    )


@pytest.mark.parametrize(
    ("rankings", "alike", "rows_apart"),
    [
        pytest.param({"q1": ["x", "a", "y"]}, ("x", "a"), False, id="a line and a judgment"),
        pytest.param({"q1": ["c"], "q2": ["a", "c"]}, (), True, id="a judgment of another query"),
    ],
)
def test_a_line_that_shares_a_judgments_hash_is_not_judged(
    monkeypatch: pytest.MonkeyPatch, rankings: dict[str, list[str]], alike: tuple[str, ...], rows_apart: bool
) -> None:
    row, returned, judged, truth = _probe_case(JUDGED, rankings)
    monkeypatch.setattr(run_join, "string_hashes", _alike(*alike))
    if rows_apart:
        monkeypatch.setattr(run_join, "_mixed", lambda hashes, row: hashes.view(np.int64))
    probe = run_join.JudgedProbe(judged, returned.type)
    assert not probe.clash  # the probe itself, not the codes, tells the lines apart
    assert probe.lines(row, returned).tolist() == truth
    assert truth.count(False) >= 1
