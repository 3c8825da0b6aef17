"""Condensed-list reciprocal rank (``condensed_mrr``: the whole condensed list): the unjudged documents removed from
the ranking, then ``mrr`` computed on what remains, its cutoff counting judged results only (Sakai 2007)."""

from __future__ import annotations

from evalkit.measures.declaration import FloatArray, MeasureDef, QueryCase
from evalkit.measures.kernels import mrr
from evalkit.measures.kernels.shared import condense, condensed_case
from evalkit.measures.ranked import Ranked

__all__ = ["kernel", "reference"]


def reference(case: QueryCase, m: MeasureDef) -> float:
    """``mrr``'s reference on the condensed ranking: ``dedupe(ranking)`` with every document not judged with a
    grade >= 0 removed, order kept; the cutoff k then counts judged results (the k-th may lie deeper in the run).

    Reference: Sakai, "Alternatives to Bpref", SIGIR 2007; ir_measures' ``RR(judged_only=True)`` (which takes no
    cutoff: ``condensed_mrr@k`` is it with ranks past k scoring 0), equal to trec_eval's ``-J`` (judged documents
    only) on the plain measure.

    Unjudged documents (absent from the judgments, or with a negative grade: trec_eval's pooled, not judged) are
    removed from the ranking before the cutoff applies (a condensed list, Sakai 2007), and the plain measure is
    computed on what remains.

    Edge cases: no relevant document -> ``ValueError`` (answerable queries only, as ``mrr``); empty ranking, or
    every result unjudged -> 0; duplicates removed before condensing (first occurrence kept); ties are ordered by the
    tie policy before condensing, so condensing keeps their order.
    """
    return mrr.reference(condensed_case(case), m)


def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
    """:func:`reference` for every query at once: ``mrr``'s kernel on the condensed rankings."""
    return mrr.kernel(condense(ranked), m)
