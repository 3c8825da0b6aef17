"""What each family declares it reads of a ranking (:data:`~evalkit.measures.declaration.Positions`), and the
scorer that builds only those positions.

- Every built-in family's kernel gives the same values on rankings that keep only the positions it declares (judged
  ones; for ``cutoff`` families also every position within k) as on whole rankings; the check can fail: a ``cutoff``
  family loses values when its unjudged positions are dropped too.
- :func:`unjudged_reach` is the deepest rank any measure of a set reads an unjudged position at.
- Scoring a run with the unread positions dropped gives exactly the values and counts of scoring it with every
  position, under both tie policies, block by block.
- ``recip_rank`` reads each query down to its first relevant document only, with the values of whole rankings.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from evalkit.data.qrels import Qrels, qrels_from_mapping
from evalkit.data.runs import Run, run_from_rankings
from evalkit.measures import core, run_order
from evalkit.measures.core import score_ranked, score_run, unjudged_reach
from evalkit.measures.ranked import Ranked, rank_lists
from evalkit.measures.registry import FAMILIES, MeasureDef, parse_measure, parse_measures

CUTOFFS = (1, 3, 10, None)


def _rankings(seed: int, queries: int = 1_500) -> tuple[list[list[str]], list[dict[str, int]]]:
    """Seeded rankings (0 to 40 long, duplicates, most documents unjudged) and grades -1 to 3 (some queries with
    none relevant, some with no judgment at all)."""
    rng = np.random.default_rng(seed)
    rankings, grades = [], []
    for _ in range(queries):
        size = int(rng.choice([0, 1, 2, 5, 10, 20, 40]))
        rankings.append([f"d{int(d)}" for d in rng.integers(0, 80, size)])
        judged = rng.choice(80, size=int(rng.integers(0, 12)), replace=False)
        grades.append({f"d{int(d)}": int(rng.integers(-1, 4)) for d in judged})
    return rankings, grades


def _measures(family: str) -> list[MeasureDef]:
    spec = FAMILIES[family]
    if spec.cutoff == "none":
        return [parse_measure(family)]
    return [
        parse_measure(family if k is None else f"{family}@{k}")
        for k in CUTOFFS
        if k is not None or spec.cutoff == "optional"
    ]


def _kept(ranked: Ranked, unjudged_to: int) -> Ranked:
    """``ranked`` with the positions of unjudged documents past rank ``unjudged_to`` dropped."""
    keep = ranked.judged | (ranked.rank <= unjudged_to)
    return replace(
        ranked,
        row=ranked.row[keep],
        rank=ranked.rank[keep],
        grade=ranked.grade[keep],
        judged=ranked.judged[keep],
        doc_ids=None,
        span_chars=None,
        lengths=None,
        qrels_row=None if ranked.qrels_row is None else ranked.qrels_row[keep],
    )


def _tied_run(seed: int, docs: int, levels: int, longest: int, queries: int, judged: int) -> tuple[Qrels, Run]:
    """Seeded judgments (grades -1 to 3, ``judged`` a query, some repeated; 20 queries more than the run names)
    and a run of 0 to ``longest`` lines a query from ``docs`` documents with ``levels`` distinct scores (ties,
    duplicates)."""
    rng = np.random.default_rng(seed)
    rankings = {
        f"q{q:03d}": [
            (f"d{int(d)}", float(s)) for d, s in zip(rng.integers(0, docs, n), rng.integers(0, levels, n), strict=True)
        ]
        for q, n in enumerate(rng.integers(0, longest, queries))
    }
    grades = {
        f"q{q:03d}": {f"d{int(d)}": int(rng.integers(-1, 4)) for d in rng.integers(0, docs, judged)}
        for q in range(queries + 20)
    }
    return qrels_from_mapping(grades), run_from_rankings("r", rankings)


def _values(ranked: Ranked, measure: MeasureDef) -> np.ndarray:
    values, _ = score_ranked(ranked, [measure])
    return values[measure.name]


@pytest.mark.parametrize("family", sorted(f for f, spec in FAMILIES.items() if spec.positions != "all"))
def test_each_family_reads_only_the_positions_it_declares(family: str) -> None:
    rankings, grades = _rankings(seed=20261207)
    whole = rank_lists(rankings, grades)
    assert (~whole.judged).sum() > 5 * whole.judged.sum() / 2  # most positions are unjudged ones
    for measure in _measures(family):
        reach = unjudged_reach([measure])
        assert reach is not None
        trimmed = _kept(whole, reach)
        assert len(trimmed.rank) < len(whole.rank)
        assert np.array_equal(_values(trimmed, measure), _values(whole, measure), equal_nan=True), measure.name


@pytest.mark.parametrize("name", ["judged@10", "unj@3"])
def test_the_check_fails_when_a_family_reads_more_than_it_declares(name: str) -> None:
    """A family that reads unjudged positions within its cutoff, given rankings without them, scores otherwise."""
    rankings, grades = _rankings(seed=20261207)
    whole = rank_lists(rankings, grades)
    measure = parse_measure(name)
    assert not np.array_equal(_values(_kept(whole, 0), measure), _values(whole, measure), equal_nan=True)


def test_the_unjudged_reach_of_a_measure_set() -> None:
    def reach(names: list[str], unjudged_k: int | None = None) -> int | None:
        return unjudged_reach(parse_measures(names), unjudged_k)

    assert reach(["ndcg@10", "map", "recip_rank", "bpref", "infAP", "condensed_ndcg@5"]) == 0
    assert reach(["ndcg@10", "map"], unjudged_k=10) == 10
    assert reach(["ndcg@10", "judged@20", "unj@5"], unjudged_k=10) == 20
    assert reach(["ndcg@10", "no_answer_fpr"]) is None  # it reads how many results a query has
    assert reach([]) is None
    assert all(spec.positions in ("judged", "cutoff", "all") for spec in FAMILIES.values())
    assert FAMILIES["no_answer_fpr"].positions == "all"


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
def test_dropping_unread_positions_changes_no_value_or_count(ties: str, monkeypatch: pytest.MonkeyPatch) -> None:
    qrels, run = _tied_run(seed=17, docs=60, levels=4, longest=60, queries=300, judged=9)
    names = [
        f
        for family, spec in sorted(FAMILIES.items())
        if not spec.needs_spans and spec.defined_on != "no_answer"
        for f in (family if spec.cutoff == "none" else f"{family}@5",)
    ]
    measures = parse_measures(list(dict.fromkeys([*names, "recip_rank", "ndcg", "map", "Rprec", "bpref", "infAP"])))
    built: list[int] = []
    real_rank_run = run_order.rank_run

    def spy(*args: object, **kwargs: object) -> run_order.RankedRun:
        ranked = real_rank_run(*args, **kwargs)  # type: ignore[arg-type]
        built.append(-1 if ranked._reading.keep_unjudged is None else ranked._reading.keep_unjudged)
        return ranked

    monkeypatch.setattr(core, "rank_run", spy)
    for lines in (7, 10**6):
        monkeypatch.setattr(run_order, "BLOCK_LINES", lines)
        for unjudged_k in (None, 3):
            dropped = score_run(qrels, run, measures, ties, unjudged_k=unjudged_k)
            with monkeypatch.context() as every:
                every.setattr(core, "unjudged_reach", lambda *_: None)
                whole = score_run(qrels, run, measures, ties, unjudged_k=unjudged_k)
            assert dropped.counts == whole.counts
            assert whole.unjudged is None or np.array_equal(dropped.unjudged, whole.unjudged)  # type: ignore[arg-type]
            for m in measures:
                assert np.array_equal(dropped.values[m.name], whole.values[m.name], equal_nan=True), (lines, m.name)
    assert built[0] == 5 and -1 in built  # judged@5 and unj@5 read the first 5; the comparison read every position
    assert whole.counts is not None and whole.counts.duplicates > 0


def test_recip_rank_reads_down_to_the_first_relevant_document_only() -> None:
    """recip_rank's values need a query's lines down to its first relevant one (the whole tie there): duplicates
    past it are not read (so not counted), those before it are."""
    qrels = qrels_from_mapping({"q1": {"a": 0, "c": 1}, "q2": {"z": 0}})
    run = run_from_rankings(
        "r",
        {
            "q1": [("a", 5.0), ("b", 4.0), ("a", 3.5), ("c", 3.0), ("d", 3.0), ("e", 1.0), ("e", 0.5)],
            "q2": [("y", 2.0), ("y", 1.0)],  # nothing relevant: read to the depth of the other measures only
        },
    )
    scores = score_run(qrels, run, parse_measures(["recip_rank"]), ties="trec_eval")
    assert scores.values["recip_rank"].tolist() == [0.25, 0.0]  # a, b, d (ties by ID descending), c: rank 4
    assert scores.counts is not None and scores.counts.duplicates == 1  # a again; not e, past c, nor y, past 1
    whole = score_run(qrels, run, parse_measures(["recip_rank", "map"]), ties="trec_eval")
    assert whole.values["recip_rank"].tolist() == [0.25, 0.0]
    assert whole.counts is not None and whole.counts.duplicates == 3


@pytest.mark.parametrize("ties", ["evalkit", "trec_eval"])
def test_reading_to_the_first_relevant_document_gives_the_values_of_whole_rankings(
    ties: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    qrels, run = _tied_run(seed=23, docs=50, levels=6, longest=80, queries=400, judged=6)
    sets = [
        ["recip_rank"],
        ["ndcg_cut_10", "recall_10", "recip_rank"],
        ["mrr(rel=2)", "recip_rank", "P_5"],
        ["mrr(rel=3)", "judged@20"],
    ]
    levels: list[tuple[int, ...]] = []
    real = core.first_relevant_levels

    def spy(measures: object) -> tuple[int, ...]:
        levels.append(real(measures))  # type: ignore[arg-type]
        return levels[-1]

    monkeypatch.setattr(core, "first_relevant_levels", spy)
    for names in sets:
        measures = parse_measures(names)
        for lines in (5, 10**6):
            monkeypatch.setattr(run_order, "BLOCK_LINES", lines)
            for unjudged_k in (None, 10):
                reach = score_run(qrels, run, measures, ties, unjudged_k=unjudged_k)
                with monkeypatch.context() as whole_rankings:
                    whole_rankings.setattr(core, "first_relevant_levels", lambda *_: ())
                    whole = score_run(qrels, run, measures, ties, unjudged_k=unjudged_k)
                for m in measures:
                    assert np.array_equal(reach.values[m.name], whole.values[m.name], equal_nan=True), (names, m.name)
                if unjudged_k is not None:
                    assert np.array_equal(reach.unjudged, whole.unjudged)  # type: ignore[arg-type]
                assert reach.counts is not None and whole.counts is not None
                assert reach.counts.duplicates < whole.counts.duplicates  # fewer lines read
    assert (1, 2) in levels and (3,) in levels
    assert np.nanmean(whole.values["mrr(rel=3)"]) > 0
