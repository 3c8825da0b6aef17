"""What several families read: a query's first k results and its relevant documents (reference functions), and the
same over a :class:`~evalkit.measures.ranked.Ranked` (kernels); and the condensed lists (Sakai 2007) that the
``condensed_*`` families score.

A document is relevant when its grade is at least 1; grade 0 is judged, not relevant; a negative grade is trec_eval's
"pooled, not judged", unjudged for ``judged@k``, ``unj@k`` and the condensed lists. Rankings are
deduplicated before any cutoff (first occurrence kept). A condensed list keeps, in order, the documents judged with
a grade of 0 or more: one absent from the judgments, or with a negative grade (trec_eval's "pooled, not judged"), is
removed, as trec_eval's ``-J`` and ir_measures' ``judged_only`` remove it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from evalkit.measures.declaration import QueryCase
from evalkit.measures.ranked import Ranked, dedupe_ranking, group_ranks

__all__ = [
    "at_level",
    "at_level_case",
    "condense",
    "condensed_case",
    "context_inputs",
    "hits",
    "ratio",
    "relevant_grades",
    "running_count",
    "top",
    "within",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def top(case: QueryCase, k: int | None) -> tuple[str, ...]:
    """The query's deduplicated ranking, cut at ``k`` (None: the whole ranking)."""
    ranking = dedupe_ranking(case.ranking)
    return ranking if k is None else ranking[:k]


def relevant_grades(case: QueryCase) -> dict[str, int]:
    """The judged-relevant documents (grade >= 1) and their grades; ``ValueError`` when there are none (a ranking
    measure under evalkit's names is defined only on answerable queries)."""
    positive = {c: g for c, g in case.grades.items() if g >= 1}
    if not positive:
        raise ValueError(
            "relevant has no chunk with grade >= 1: ranking measures are defined only on answerable queries"
        )
    return positive


def context_inputs(case: QueryCase) -> tuple[Mapping[str, int], Mapping[str, Sequence[tuple[int, int]]]]:
    """The chunk lengths and gold spans a context measure reads (``ValueError`` when the case has none)."""
    if case.chunk_lengths is None or case.spans is None:
        raise ValueError("context measures need chunk lengths and gold spans")
    return case.chunk_lengths, case.spans


def within(ranked: Ranked, k: int | None) -> BoolArray:
    """The positions in the first ``k`` of their query (None: every position)."""
    return np.ones(len(ranked.rank), dtype=bool) if k is None else ranked.rank <= k


def hits(ranked: Ranked, k: int | None) -> BoolArray:
    """The positions of relevant documents in the first ``k``."""
    found: BoolArray = (ranked.grade >= 1) & within(ranked, k)
    return found


def ratio(numerator: npt.NDArray[np.float64] | npt.NDArray[np.int64], denominator: npt.NDArray[np.int64]) -> FloatArray:
    """Per query ``numerator / denominator``, 0 where the denominator is 0."""
    values: FloatArray = np.divide(
        numerator.astype(np.float64),
        denominator,
        out=np.zeros(len(denominator), dtype=np.float64),
        where=denominator > 0,
    )
    return values


def condensed_case(case: QueryCase) -> QueryCase:
    """The case with its ranking deduplicated and condensed: only documents judged with a grade >= 0, in order."""
    kept = tuple(c for c in dedupe_ranking(case.ranking) if case.grades.get(c, -1) >= 0)
    return case._replace(ranking=kept)


def condense(ranked: Ranked) -> Ranked:
    """:func:`condensed_case` for every query at once: the positions of documents judged with a grade >= 0, ranked
    again from 1 in their order (the context measures' span columns are dropped)."""
    keep = ranked.judged & (ranked.grade >= 0)
    row = ranked.row[keep]
    ids = ranked.doc_ids
    return replace(
        ranked,
        row=row,
        rank=group_ranks(row, ranked.n),
        grade=ranked.grade[keep],
        judged=ranked.judged[keep],
        doc_ids=None if ids is None else [ids[i] for i in np.flatnonzero(keep).tolist()],
        qrels_row=None if ranked.qrels_row is None else ranked.qrels_row[keep],
        span_chars=None,
        lengths=None,
    )


def running_count(ranked: Ranked, mask: BoolArray) -> npt.NDArray[np.int64]:
    """Per position, how many positions of its query, up to and including it, satisfy ``mask``."""
    total = np.cumsum(mask, dtype=np.int64)
    starts = np.searchsorted(ranked.row, np.arange(ranked.n))  # each query's first position (rows ascending)
    before = np.concatenate(([0], total))[starts]  # how many positions before that one satisfy the mask
    counts: npt.NDArray[np.int64] = total - np.repeat(before, ranked.returned())
    return counts


def at_level_case(case: QueryCase, rel: int) -> QueryCase:
    """The case with the grades from 1 up to ``rel - 1`` lowered to 0 (judged, not relevant): a measure with
    relevance level ``rel`` (``precision(rel=2)@5``, trec_eval's ``-l``) reads these grades. Unchanged when ``rel``
    is 1."""
    if rel == 1:
        return case
    return case._replace(grades={c: g if g >= rel else min(g, 0) for c, g in case.grades.items()})


def at_level(ranked: Ranked, rel: int) -> Ranked:
    """:func:`at_level_case` for every query at once: grades 1 to ``rel - 1`` become 0 in the rankings, leave the
    ideal rankings (a prefix of each, which are sorted by grade descending) and join the judged non-relevant
    counts."""
    if rel == 1:
        return ranked
    keep = ranked.ideal_grade >= rel
    lowered = np.bincount(ranked.ideal_row[~keep], minlength=ranked.n).astype(np.int64)
    judgments = ranked.judgments
    return replace(
        ranked,
        grade=np.where(ranked.grade >= rel, ranked.grade, np.minimum(ranked.grade, 0)),
        ideal_row=ranked.ideal_row[keep],
        ideal_rank=ranked.ideal_rank[keep],
        ideal_grade=ranked.ideal_grade[keep],
        nonrelevant=None if ranked.nonrelevant is None else ranked.nonrelevant + lowered,
        judgments=None
        if judgments is None
        else [{c: g if g >= rel else min(g, 0) for c, g in query.items()} for query in judgments],
    )
