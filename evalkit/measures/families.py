"""Every built-in measure family, declared once, in the manner of ir_measures' declarations.

A declaration (:class:`~evalkit.measures.declaration.Family`) names the family, gives its formula in one line, its
typed parameters (:class:`~evalkit.measures.declaration.Param`), its per-query reference function and its batch
kernel (from the family's own module under :mod:`evalkit.measures.kernels`, as ranx keeps one file per metric), what
it does with unjudged documents, which queries it is defined on and its trec_eval names. Adding a family is a module
under ``kernels/`` and one declaration here; :mod:`evalkit.measures.registry` parses names into these declarations
and ``docs/measures.md`` renders its table from them (:mod:`evalkit.measures.docs`).
"""

from __future__ import annotations

from typing import Final

from evalkit.measures.declaration import MAX_CUTOFF, MAX_LEVEL, Family, Param, TrecName
from evalkit.measures.kernels import (
    average_precision,
    bpref,
    condensed_map,
    condensed_mrr,
    condensed_ndcg,
    condensed_precision,
    condensed_recall,
    context_precision,
    context_recall,
    infap,
    judged,
    mrr,
    ndcg,
    no_answer_fpr,
    precision,
    recall,
    rprec,
    success,
    unj,
)

__all__ = [
    "AVERAGE_PRECISION",
    "BPREF",
    "BUILT_IN",
    "CONDENSED_AVERAGE_PRECISION",
    "CONDENSED_MRR",
    "CONDENSED_NDCG",
    "CONDENSED_OF",
    "CONDENSED_PRECISION",
    "CONDENSED_RECALL",
    "CONTEXT_PRECISION",
    "CONTEXT_RECALL",
    "GAIN",
    "INFAP",
    "JUDGED",
    "K_OR_WHOLE",
    "MRR",
    "NDCG",
    "NO_ANSWER_FPR_FAMILY",
    "PRECISION",
    "RECALL",
    "REL",
    "RPREC",
    "SUCCESS",
    "UNJ",
    "K",
]

K: Final = Param("k", "the cutoff: the first k results", int, minimum=1, maximum=MAX_CUTOFF, required=True)
"""A cutoff the name must give (``precision@5``)."""
K_OR_WHOLE: Final = Param(
    "k", "the cutoff: the first k results; without it the whole ranking", int, minimum=1, maximum=MAX_CUTOFF
)
"""A cutoff the name may give (``recall@5``; ``recall``: the whole ranking)."""
GAIN: Final = Param(
    "gain",
    "the gain of a grade g: exponential 2^g - 1, linear g",
    str,
    ("exponential", "linear"),
    default="exponential",
)
"""The gain of a grade (evalkit's default first: exponential)."""
REL: Final = Param(
    "rel",
    "the grade from which a document counts as relevant (grades below it count as judged, not relevant)",
    int,
    minimum=1,
    maximum=MAX_LEVEL,
    default=1,
)
"""The relevance level, as ir_measures' ``rel`` and trec_eval's ``-l``: ``precision(rel=2)@5``."""

_CONDENSED: Final = "(Sakai 2007; ir_measures' judged_only)"
_REMOVED: Final = (("unjudged", "removed"),)

RECALL = Family(
    "recall",
    "|R in the first k| / |R|",
    recall.reference,
    recall.kernel,
    "not_relevant",
    (K_OR_WHOLE, REL),
    trec_eval=(TrecName("recall", cut=True),),
    positions="judged",
)
PRECISION = Family(
    "precision",
    "|R in the first k| / k (k, not the number returned)",
    precision.reference,
    precision.kernel,
    "not_relevant",
    (K, REL),
    trec_eval=(TrecName("P", cut=True),),
    positions="judged",
)
SUCCESS = Family(
    "success",
    "1 when a relevant document is in the first k, else 0",
    success.reference,
    success.kernel,
    "not_relevant",
    (K, REL),
    trec_eval=(TrecName("success", cut=True),),
    positions="judged",
)
MRR = Family(
    "mrr",
    "1 / rank of the first relevant document within k, 0 when none",
    mrr.reference,
    mrr.kernel,
    "not_relevant",
    (K_OR_WHOLE, REL),
    trec_eval=(TrecName("recip_rank", cut=False),),
    uncut_reach="first_relevant",
    positions="judged",
)
NDCG = Family(
    "ndcg",
    "DCG@k / IDCG@k, discount log2(rank + 1); IDCG from all judged grades sorted descending (Järvelin and "
    "Kekäläinen 2002; Burges et al. 2005)",
    ndcg.reference,
    ndcg.kernel,
    "not_relevant",
    (K_OR_WHOLE, GAIN),
    trec_eval=(TrecName("ndcg_cut", cut=True, gain="linear"), TrecName("ndcg", cut=False, gain="linear")),
    positions="judged",
)
AVERAGE_PRECISION = Family(
    "map",
    "sum over relevant documents within k of the precision at their rank, / |R|",
    average_precision.reference,
    average_precision.kernel,
    "not_relevant",
    (K_OR_WHOLE, REL),
    trec_eval=(TrecName("map", cut=False), TrecName("map_cut", cut=True)),
    positions="judged",
)
RPREC = Family(
    "rprec",
    "|R in the first |R|| / |R|",
    rprec.reference,
    rprec.kernel,
    "not_relevant",
    (REL,),
    trec_eval=(TrecName("Rprec", cut=False),),
    positions="judged",
)
JUDGED = Family(
    "judged",
    "judged documents (grade 0 or more; a negative grade is trec_eval's pooled, not judged) in the first k / "
    "results in the first k (min(k, returned)), as ir_measures' Judged@k but for negative grades: how much of a run "
    "the judgments speak for",
    judged.reference,
    judged.kernel,
    "not_judged",
    (K,),
    fixed=(("denominator", "returned"),),
    positions="cutoff",
)
UNJ = Family(
    "unj",
    "1 - judged@k: documents absent from the judgments in the first k / results in the first k (min(k, returned)); "
    "trec_eval's unj divides by k",
    unj.reference,
    unj.kernel,
    "not_judged",
    (K,),
    fixed=(("denominator", "returned"),),
    positions="cutoff",
)
BPREF = Family(
    "bpref",
    "(1 / |R|) sum over returned relevant d of (1 - min(judged non-relevant above d, |R|) / min(|N|, |R|)), N the "
    "judged non-relevant documents (Buckley and Voorhees 2004)",
    bpref.reference,
    bpref.kernel,
    "skipped",
    (REL,),
    trec_eval=(TrecName("bpref", cut=False),),
    positions="judged",
)
INFAP = Family(
    "infap",
    "(1 / |R|) sum over returned relevant d of the estimated precision at d, pooled-but-unjudged documents (negative "
    "grades) above d taken as relevant in the proportion of the judged ones (Yilmaz and Aslam 2006)",
    infap.reference,
    infap.kernel,
    "inferred",
    trec_eval=(TrecName("infAP", cut=False),),
    positions="judged",
)
CONDENSED_NDCG = Family(
    "condensed_ndcg",
    "ndcg on the condensed list: unjudged documents (absent, or a negative grade) removed, then the cutoff "
    + _CONDENSED,
    condensed_ndcg.reference,
    condensed_ndcg.kernel,
    "removed",
    NDCG.params,
    fixed=_REMOVED,
    condensed=True,
    positions="judged",
)
CONDENSED_AVERAGE_PRECISION = Family(
    "condensed_map",
    "map on the condensed list: unjudged documents (absent, or a negative grade) removed, then the cutoff "
    + _CONDENSED,
    condensed_map.reference,
    condensed_map.kernel,
    "removed",
    AVERAGE_PRECISION.params,
    fixed=_REMOVED,
    condensed=True,
    positions="judged",
)
CONDENSED_PRECISION = Family(
    "condensed_precision",
    "precision on the condensed list: unjudged documents (absent, or a negative grade) removed, then the cutoff "
    + _CONDENSED,
    condensed_precision.reference,
    condensed_precision.kernel,
    "removed",
    PRECISION.params,
    fixed=_REMOVED,
    condensed=True,
    positions="judged",
)
CONDENSED_RECALL = Family(
    "condensed_recall",
    "recall on the condensed list: unjudged documents (absent, or a negative grade) removed, then the cutoff "
    + _CONDENSED,
    condensed_recall.reference,
    condensed_recall.kernel,
    "removed",
    RECALL.params,
    fixed=_REMOVED,
    condensed=True,
    positions="judged",
)
CONDENSED_MRR = Family(
    "condensed_mrr",
    "mrr on the condensed list: unjudged documents (absent, or a negative grade) removed, then the cutoff "
    + _CONDENSED,
    condensed_mrr.reference,
    condensed_mrr.kernel,
    "removed",
    MRR.params,
    fixed=_REMOVED,
    condensed=True,
    positions="judged",
)
CONTEXT_PRECISION = Family(
    "context_precision",
    "characters of annotated answer spans inside the returned context (the first 5 results) / all its characters; "
    "spans of a chunk unioned, a duplicated chunk counted once; no result: 0",
    context_precision.reference,
    context_precision.kernel,
    "not_relevant",
    needs_spans=True,
)
CONTEXT_RECALL = Family(
    "context_recall",
    "the same span characters / all annotated span characters of the query",
    context_recall.reference,
    context_recall.kernel,
    "not_relevant",
    needs_spans=True,
)
NO_ANSWER_FPR_FAMILY = Family(
    "no_answer_fpr",
    "no-answer queries that returned any result / all no-answer queries",
    no_answer_fpr.reference,
    no_answer_fpr.kernel,
    "any_result",
    defined_on="no_answer",
)

BUILT_IN: Final[tuple[Family, ...]] = (
    RECALL,
    PRECISION,
    SUCCESS,
    MRR,
    NDCG,
    AVERAGE_PRECISION,
    RPREC,
    JUDGED,
    UNJ,
    BPREF,
    INFAP,
    CONDENSED_NDCG,
    CONDENSED_AVERAGE_PRECISION,
    CONDENSED_PRECISION,
    CONDENSED_RECALL,
    CONDENSED_MRR,
    CONTEXT_PRECISION,
    CONTEXT_RECALL,
    NO_ANSWER_FPR_FAMILY,
)
"""Every built-in family, in the order of the docs table and of the valid names an error lists."""

CONDENSED_OF: Final[dict[str, str]] = {
    plain.name: condensed.name
    for plain, condensed in (
        (NDCG, CONDENSED_NDCG),
        (AVERAGE_PRECISION, CONDENSED_AVERAGE_PRECISION),
        (PRECISION, CONDENSED_PRECISION),
        (RECALL, CONDENSED_RECALL),
        (MRR, CONDENSED_MRR),
    )
}
"""The plain families that have a condensed-list form (Sakai 2007), and its family: what ``compare`` retests a drop
on when the head's top k holds more unjudged documents than the base's."""
