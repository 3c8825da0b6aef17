"""The built-in measure families, one module each (as ranx keeps one file per metric).

Each module holds the family's per-query reference function (the definition, with its formula, edge cases and what
it does with unjudged documents), its batch kernel, and its :class:`~evalkit.measures.declaration.Family`
declaration. Adding a family touches one module here and the tuple below; :mod:`evalkit.measures.registry` parses
names into them and ``docs/measures.md`` renders its table from them (:mod:`evalkit.measures.docs`).
"""

from __future__ import annotations

from typing import Final

from evalkit.measures.declaration import Family
from evalkit.measures.families.average_precision import AVERAGE_PRECISION
from evalkit.measures.families.bpref import BPREF
from evalkit.measures.families.condensed_map import CONDENSED_AVERAGE_PRECISION
from evalkit.measures.families.condensed_mrr import CONDENSED_MRR
from evalkit.measures.families.condensed_ndcg import CONDENSED_NDCG
from evalkit.measures.families.condensed_precision import CONDENSED_PRECISION
from evalkit.measures.families.condensed_recall import CONDENSED_RECALL
from evalkit.measures.families.context_precision import CONTEXT_PRECISION
from evalkit.measures.families.context_recall import CONTEXT_RECALL
from evalkit.measures.families.infap import INFAP
from evalkit.measures.families.judged import JUDGED
from evalkit.measures.families.mrr import MRR
from evalkit.measures.families.ndcg import NDCG
from evalkit.measures.families.no_answer_fpr import NO_ANSWER_FPR_FAMILY
from evalkit.measures.families.precision import PRECISION
from evalkit.measures.families.recall import RECALL
from evalkit.measures.families.rprec import RPREC
from evalkit.measures.families.success import SUCCESS
from evalkit.measures.families.unj import UNJ

__all__ = ["BUILT_IN"]

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
