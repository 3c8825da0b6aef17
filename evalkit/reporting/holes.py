"""Label holes or evidence? The unjudged share of each side of a comparison, and the gated rows it explains.

A team labels what its current system returns; a new system surfaces chunks nobody judged, and every plain measure
counts them as not relevant. So a drop of the head is evidence only when it is not explained by the head's top k
holding more unjudged chunks than the base's. :func:`unjudged_shares` reads, for each side, ablation and slice, the
share of the top k that is unjudged (``unj@k`` = 1 - ``judged@k``, the mean over the slice's queries where it is
defined, k the largest cutoff the report's measures read) and how many unjudged results the top k holds
(:class:`~evalkit.reporting.report.UnjudgedCounts`), over the queries both sides share whose judgments hold a chunk
judged not relevant (grade 0). Judgments of relevant chunks alone leave every other chunk unjudged by design: there
a worse system's top k is more unjudged *because* it finds fewer relevant chunks, so the share cannot tell holes
from misses, and such queries are left out of the check (the plain test decides).

:func:`judged_tests` and :func:`retest_on_judged` are the gate's second look (:mod:`evalkit.reporting.regression`).
A gated row whose head share exceeds the base share by more than ``max_unjudged_gap``
(:data:`DEFAULT_MAX_UNJUDGED_GAP`) is tested again **on judged evidence only**: on condensed lists (Sakai 2007:
unjudged documents removed, then scored; the row's measure's ``condensed_`` form, which reports carry for this, see
``Report.companions``), with the head given the benefit of the doubt on every query whose top k holds an unjudged
chunk (a query where the head scores below the base there counts as a tie: its unjudged chunks could be the relevant
ones the judgments miss). Both apply to the queries whose judgments hold a chunk judged not relevant, as the shares
do; every other query takes part with its plain values, since there an unjudged chunk cannot be told from a miss.
The one-sided sign-flip p of that test takes the place of the plain one in the same Holm family as the other gated
rows. A drop that survives (larger than ``max_drop`` with a Holm p below alpha) stays a regression; one that does
not is a **hole**: more labels, not a worse system. Condensed lists alone cannot clear a better system scored
against a pool of the worse one when runs are no deeper than k: the head's relevant finds are unjudged, and count
against it on condensed lists too; the benefit of the doubt is what lets the judgments speak only where they can. A
suspect row whose measure has no condensed form (trec_eval's names, say), or reads another depth than the k the
unjudged counts were taken at (``ndcg@10`` in a report that also scores ``recall@100``: the counts are of the top
100, while ``ndcg@10`` reads 10), cannot be retested and is judged on its plain test, with a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from pydantic import Field

from evalkit.data.schema import SLICES, Slice, StrictModel
from evalkit.measures.registry import condensed_form, parse_measure
from evalkit.measures.statistics import StatisticsSettings, holm_adjust, sign_flip_p_values
from evalkit.reporting.formatting import signed
from evalkit.reporting.per_query import PerQueryColumns, QueryIndex
from evalkit.reporting.report import Report

__all__ = [
    "DEFAULT_MAX_UNJUDGED_GAP",
    "JudgedTest",
    "Retest",
    "UnjudgedShare",
    "compared",
    "condensed_name",
    "first_against_others",
    "holes_notes",
    "judged_tests",
    "retest_on_judged",
    "unjudged_shares",
]

DEFAULT_MAX_UNJUDGED_GAP: Final = 0.1
"""How much larger the head's unjudged share of its top k may be than the base's (0.1: ten points) before a drop is
tested again on judged documents only. A default by reasoning, not tuned on a data set: below it, the unjudged
chunks the head adds could move a mean by at most about as much as the default ``max_drop`` of a handful of
queries."""


class UnjudgedShare(StrictModel):
    """One side's unjudged share of its top k, for one ablation and slice, over the queries both sides share."""

    system: str = Field(description="the side: base or head (two reports), or a report's label (several)")
    ablation: str
    slice: Slice
    k: int = Field(ge=1, description="the depth: the largest cutoff the report's measures read")
    share: float = Field(ge=0.0, le=1.0, description="unj@k: 1 - the mean judged@k over the slice's queries")
    unjudged: int = Field(ge=0, description="unjudged results in the top k of the slice's queries: what to label")
    queries: int = Field(ge=1, description="queries the share is the mean over")


def _judged_column(report: Report, ablation: str) -> tuple[int, tuple[float | None, ...]] | None:
    """The report's k and judged@k column for the ablation (None: the report does not carry them)."""
    counts = report.ablations[ablation].unjudged
    if counts is None:
        return None
    column = report.ablations[ablation].per_query.get(f"judged@{counts.k}")
    return None if column is None else (counts.k, column)


def unjudged_shares(
    report: Report, label: str, index: QueryIndex, rows: Sequence[int], ablations: Sequence[str]
) -> tuple[UnjudgedShare, ...]:
    """Each ablation's and slice's :class:`UnjudgedShare` of `report` (called `label`) over the shared queries
    (`index`, the report's row of each in `rows`); none for an ablation the report has no unjudged counts for."""
    out = []
    for ablation in ablations:
        found = _judged_column(report, ablation)
        if found is None:
            continue
        k, judged = found
        counts = report.ablations[ablation].unjudged
        per_query = counts.per_query if counts is not None else ()
        pooled = counts.pooled_queries if counts is not None else ()
        for slice_name in SLICES:
            members = [r for r in index.members(slice_name, None) if pooled[rows[r]]]
            # A query that returned nothing has judged@k 0 and no unjudged result: it has no top k to be unjudged.
            members = [r for r in members if not (judged[rows[r]] == 0 and not per_query[rows[r]])]
            values = [v for r in members if (v := judged[rows[r]]) is not None]
            if not values:
                continue
            share = min(1.0, max(0.0, 1.0 - float(np.mean(values))))
            unjudged = sum(c for r in members if (c := per_query[rows[r]]) is not None)
            out.append(
                UnjudgedShare(
                    system=label,
                    ablation=ablation,
                    slice=slice_name,
                    k=k,
                    share=share,
                    unjudged=unjudged,
                    queries=len(values),
                )
            )
    return tuple(out)


def compared(report: Report, ablation: str) -> PerQueryColumns:
    """The ablation's per-query columns that a comparison's rows test: all but what the report carries for the holes
    check (its ``companions``) and the judged shares (``judged@k``, ``unj@k`` at any depth), which describe the
    judgments rather than the system (a head wholly unjudged would "win" every query on ``unj@k``); the check
    reads them on its own (:func:`unjudged_shares`, :func:`judged_tests`)."""
    result = report.ablations[ablation]
    return {
        m: column
        for m, column in result.per_query.items()
        if m not in report.companions and not m.startswith(("judged@", "unj@"))
    }


def holes_notes(reports: Sequence[Report], labels: Sequence[str], ablations: Sequence[str]) -> tuple[str, ...]:
    """A note for each report whose compared ablations carry no unjudged counts (written before reports had them):
    the holes check cannot look at those rows, and the plain test alone decides."""
    return tuple(
        f"{label} report carries no unjudged counts (written before evalkit recorded them): label holes cannot be "
        "told from evidence; regenerate it for the holes check"
        for label, report in zip(labels, reports, strict=True)
        if any(report.ablations[a].unjudged is None for a in ablations)
    )


def condensed_name(measure: str) -> str | None:
    """The name of `measure`'s condensed-list form (``ndcg@10`` -> ``condensed_ndcg@10``), or None."""
    try:
        form = condensed_form(parse_measure(measure))
    except ValueError:
        return None
    return None if form is None else form.name


class JudgedTest(StrictModel):
    """A gated row tested on judged evidence only (see the module docstring)."""

    base_system: str
    head_system: str
    ablation: str
    measure: str = Field(description="the gated measure")
    slice: Slice
    condensed: str = Field(
        description="its condensed-list form, tested where the judgments hold a grade-0 chunk (elsewhere the plain "
        "values are)"
    )
    queries: int = Field(ge=1)
    doubtful: int = Field(
        ge=0, description="queries whose judgments hold a grade-0 chunk and whose head top k holds an unjudged chunk"
    )
    drop: float = Field(description="base - head: the mean of the per-query drops, after the benefit of the doubt")
    p_one_sided: float = Field(ge=0.0, le=1.0, description='one-sided sign-flip p of "head is worse"')


def judged_tests(
    reports: tuple[Report, Report],
    sides: tuple[str, str],
    index: QueryIndex,
    rows: tuple[Sequence[int], Sequence[int]],
    ablations: Sequence[str],
    measures: Sequence[str],
    settings: StatisticsSettings,
) -> tuple[JudgedTest, ...]:
    """Each gated measure's (`measures`) :class:`JudgedTest` per ablation and slice, of `reports` (base, head; called
    `sides`, their rows of the shared `index` in `rows`); none where a report lacks the condensed column or the head
    its unjudged counts."""
    base, head = reports
    out = []
    for ablation, measure in ((a, m) for a in ablations for m in measures):
        name = condensed_name(measure)
        before = base.ablations[ablation].per_query.get(name or "")
        after = head.ablations[ablation].per_query.get(name or "")
        counts = head.ablations[ablation].unjudged
        if name is None or before is None or after is None or counts is None:
            continue
        pooled = counts.pooled_queries
        plain = (base.ablations[ablation].per_query.get(measure), head.ablations[ablation].per_query.get(measure))
        for slice_name in SLICES:
            keep = [
                (b, a, (counts.per_query[rows[1][r]] or 0) if pooled[rows[1][r]] else 0)
                for r in index.members(slice_name, None)
                if (b := _value(before, plain[0], rows[0][r], pooled[rows[1][r]])) is not None
                and (a := _value(after, plain[1], rows[1][r], pooled[rows[1][r]])) is not None
            ]
            if not keep:
                continue
            values = np.array(keep, dtype=np.float64)
            differences = values[:, 1] - values[:, 0]
            doubtful = values[:, 2] > 0  # pooled queries whose head top k holds an unjudged chunk
            differences = np.where(doubtful, np.maximum(differences, 0.0), differences)
            p = float(sign_flip_p_values(differences[:, None], settings, "less")[0])
            out.append(
                JudgedTest(
                    base_system=sides[0],
                    head_system=sides[1],
                    ablation=ablation,
                    measure=measure,
                    slice=slice_name,
                    condensed=name,
                    queries=len(keep),
                    doubtful=int(doubtful.sum()),
                    drop=float(-differences.mean()),
                    p_one_sided=p,
                )
            )
    return tuple(out)


def _depth_differs(measure: str, *depths: int) -> bool:
    """Whether `measure` reads other ranks than the top k the unjudged counts of either side were taken at (a
    measure of no cutoff reads every rank): its unjudged share and the queries given the benefit of the doubt would
    then be those of other ranks than it reads."""
    try:
        cutoff = parse_measure(measure).cutoff
    except ValueError:
        return False
    return any(cutoff != k for k in depths)


def _not_retested(measure: str, base_k: int, head_k: int) -> str:
    """Why a suspect row was not tested again on judged documents."""
    if condensed_name(measure) is None:
        return "its measure has no condensed-list form to test it on judged documents"
    cutoff = parse_measure(measure).cutoff
    reads = "every rank" if cutoff is None else f"the top {cutoff}"
    counted = f"the top {head_k}" if base_k == head_k else f"the base's top {base_k} and the head's top {head_k}"
    return (
        f"the reports' unjudged counts are of {counted}, while {measure} reads {reads}, so its holes cannot be told "
        "from evidence (score both reports without measures deeper than it, or gate a measure at that depth)"
    )


def _value(
    condensed: Sequence[float | None], plain: Sequence[float | None] | None, row: int, pooled: bool
) -> float | None:
    """A query's value in the retest: its condensed value where its judgments hold a chunk judged not relevant, else
    the plain measure's (where unjudged chunks cannot be told from misses, the plain test decides)."""
    if pooled:
        return condensed[row]
    return None if plain is None else plain[row]


def first_against_others(
    reports: Sequence[Report],
    labels: Sequence[str],
    index: QueryIndex,
    rows: Sequence[Sequence[int]],
    ablations: Sequence[str],
    measures: Sequence[str],
    settings: StatisticsSettings,
) -> tuple[JudgedTest, ...]:
    """:func:`judged_tests` of each later report (a head) against the first (the base), as the gate reads them."""
    return tuple(
        test
        for j in range(1, len(reports))
        for test in judged_tests(
            (reports[0], reports[j]), (labels[0], labels[j]), index, (rows[0], rows[j]), ablations, measures, settings
        )
    )


class GatedRow(StrictModel):
    """What the retest reads of a gated comparison row (see :class:`~evalkit.reporting.comparison.ComparisonRow`)."""

    ablation: str
    measure: str
    slice: Slice
    drop: float
    p_one_sided: float
    p_holm: float


@dataclass(frozen=True)
class Retest:
    """A gated row's second look: both sides' unjudged shares, and the condensed row it was tested again on."""

    base: UnjudgedShare
    head: UnjudgedShare
    condensed: str | None
    """The condensed measure it was tested on (None: the measure has none, so it was not retested)."""
    condensed_difference: float | None
    """head - base on the condensed measure, as the row's ``difference`` (after the benefit of the doubt)."""
    condensed_p_holm: float | None
    not_retested: str = ""
    """Why it was not tested again on judged documents (empty when it was)."""

    @property
    def gap(self) -> float:
        """How much larger the head's unjudged share is than the base's."""
        return self.head.share - self.base.share

    def survives(self, alpha: float, max_drop: float) -> bool:
        """Whether the drop is still a regression on judged documents (True when it could not be retested)."""
        if self.condensed_difference is None or self.condensed_p_holm is None:
            return True
        return -self.condensed_difference > max_drop and self.condensed_p_holm < alpha

    def judged_only(self) -> str:
        """The retest's difference (head - base, as a row's) and Holm p, or that there was none."""
        if self.condensed_difference is None or self.condensed_p_holm is None:
            return self.not_retested
        return (
            f"on judged documents only ({self.condensed}, the head given the benefit of the doubt where its top k "
            f"holds unjudged chunks) the difference is {signed(self.condensed_difference)} with the retest's Holm "
            f"p = {self.condensed_p_holm:.4g}"
        )

    def describe(self) -> str:
        """Both shares and what there is to label."""
        return (
            f"the head's top {self.head.k} is {self.head.share:.1%} unjudged against the base's {self.base.share:.1%} "
            f"({self.head.unjudged} unjudged chunk(s) in the head's top {self.head.k} to label)"
        )


def retest_on_judged(
    rows: Sequence[GatedRow],
    sides: Sequence[tuple[str, str]],
    tests: Mapping[tuple[str, str, str, str, Slice], JudgedTest],
    shares: Mapping[tuple[str, str, Slice], UnjudgedShare],
    max_unjudged_gap: float,
    alpha: float,
    max_drop: float,
    same_as: Sequence[int] | None = None,
) -> tuple[dict[int, Retest], list[float]]:
    """The gated rows (each with its ``(base, head)`` side labels in `sides`) whose head is more unjudged than its
    base by over `max_unjudged_gap` and which the plain test would call a regression (a drop over `max_drop` with a
    Holm p below `alpha`), each retested on judged evidence (its test in `tests`,
    keyed ``(base, head, ablation, measure, slice)``); and the Holm p of every gated row over the family with the
    retested rows' one-sided p in place of their own (each hypothesis counted once: `same_as`, as
    :func:`~evalkit.measures.statistics.holm_adjust` reads it)."""
    if not 0.0 <= max_unjudged_gap <= 1.0:
        raise ValueError(f"max_unjudged_gap must be in [0, 1], got {max_unjudged_gap}")
    suspects: dict[int, tuple[UnjudgedShare, UnjudgedShare, JudgedTest | None]] = {}
    for position, (row, (base_side, head_side)) in enumerate(zip(rows, sides, strict=True)):
        base = shares.get((base_side, row.ablation, row.slice))
        head = shares.get((head_side, row.ablation, row.slice))
        regression = row.drop > max_drop and row.p_holm < alpha
        if base is None or head is None or not regression:
            continue
        elsewhere = _depth_differs(row.measure, head.k, base.k)
        if head.share - base.share <= max_unjudged_gap and not (elsewhere and head.share > 0):
            continue
        # at another depth the shares say nothing of the ranks the measure reads: not retested, said so below
        test = None if elsewhere else tests.get((base_side, head_side, row.ablation, row.measure, row.slice))
        suspects[position] = (base, head, test)
    p_values = [
        test.p_one_sided
        if (suspect := suspects.get(i)) is not None and (test := suspect[2]) is not None
        else r.p_one_sided
        for i, r in enumerate(rows)
    ]
    adjusted = [float(p) for p in holm_adjust(p_values, same_as)] if rows else []
    retests = {
        i: Retest(
            base,
            head,
            None if test is None else test.condensed,
            None if test is None else -test.drop,
            None if test is None else adjusted[i],
            "" if test is not None else _not_retested(rows[i].measure, base.k, head.k),
        )
        for i, (base, head, test) in suspects.items()
    }
    return retests, adjusted
