"""Condensed-list average precision (``condensed_map``: the whole condensed list): the unjudged documents removed from
the ranking, then ``map`` computed on what remains, its cutoff counting judged results only (Sakai 2007)."""

from __future__ import annotations

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels import average_precision
from evalkit.measures.kernels.shared import condense, condensed_case
from evalkit.measures.ranked import Ranked

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``map``'s reference on the condensed ranking: ``dedupe(ranking)`` with every document not judged with a
    grade >= 0 removed, order kept; the cutoff k then counts judged results (the k-th may lie deeper in the run).

    Reference: Sakai, "Alternatives to Bpref", SIGIR 2007 (AP'); ir_measures' ``AP(judged_only=True)@k``, equal to
    trec_eval's ``-J`` (judged documents only) on the plain measure.

    Unjudged documents (absent from the judgments, or with a negative grade: trec_eval's pooled, not judged) are
    removed from the ranking before the cutoff applies (a condensed list, Sakai 2007), and the plain measure is
    computed on what remains.

    Edge cases: no relevant document -> ``ValueError`` (answerable queries only, as ``map``); empty ranking, or
    every result unjudged -> 0; duplicates removed before condensing (first occurrence kept); ties are ordered by the
    tie policy before condensing, so condensing keeps their order.
    """
    return average_precision.reference(condensed_case(case), m)


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once: ``map``'s kernel on the condensed rankings."""
    return average_precision.kernel(condense(ranked), m)
