"""What a measure family declares, and a measure as asked: the types the declarations, the kernels and the registry
share.

A *family* (``ndcg``, ``recall``, ...) is declared once, in :mod:`evalkit.measures.families`, as a :class:`Family`,
in the manner of ir_measures' declarations: its typed parameters (:class:`Param`: the cutoff ``k`` it requires or
allows, the gains it takes, the grade ``rel`` from which a document counts as relevant), its per-query **reference**
function (the definition, written for reading) and its batch **kernel** (the same values for every query of a
:class:`~evalkit.measures.ranked.Ranked` at once), both from its own module under :mod:`evalkit.measures.kernels`
(one module per family, as ranx keeps one file per metric), what it does with unjudged documents, which queries it
is defined on, and its trec_eval names. A :class:`MeasureDef` is one measure as asked (``ndcg@10``,
``precision(rel=2)@5``, ``ndcg_cut_10``): the family with every parameter set, spelled out by
:attr:`MeasureDef.definition`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from evalkit.measures.ranked import Ranked

__all__ = [
    "EVERY_JUDGED_QUERY",
    "GAIN_TEXT",
    "MAX_CUTOFF",
    "UNJUDGED",
    "Cutoff",
    "DefinedOn",
    "Family",
    "Gain",
    "Kernel",
    "MeasureDef",
    "NoRelevant",
    "Param",
    "ParamValue",
    "Positions",
    "QueryCase",
    "Reference",
    "TrecName",
    "UncutReach",
    "Unjudged",
    "UnjudgedPolicy",
]

FloatArray = npt.NDArray[np.float64]
Cutoff = Literal["required", "optional", "none"]
"""Whether a family's evalkit name must give a cutoff (``recall@5``), may (``recall``: the whole ranking) or must
not."""
Gain = Literal["exponential", "linear"]
"""The gain of a grade g: ``exponential`` 2^g - 1 (Burges et al. 2005), ``linear`` g (Järvelin and Kekäläinen 2002)."""
NoRelevant = Literal["skip", "zero"]
"""A judged query without a relevant document: ``skip`` (evalkit's names: a no-answer query, which ``no_answer_fpr``
scores) or ``zero`` (trec_eval's names: it scores 0 and counts in the mean, as trec_eval's)."""
DefinedOn = Literal["answerable", "no_answer"]
"""The queries a family is defined on under evalkit's names: those with a relevant document, or those without."""
UncutReach = Literal["whole", "first_relevant"]
"""How deep a family reads a ranking when it is given no cutoff: ``whole``, every rank; ``first_relevant``, down to
the first document of grade >= its ``rel`` (the whole tie at that rank included), as ``recip_rank`` does."""
Positions = Literal["judged", "cutoff", "all"]
"""Which positions of a ranking a family's kernel reads: ``judged``, only those of judged documents, at their ranks
(never an unjudged one, nor how many a query has); ``cutoff``, every position within its cutoff ``k`` and none past
it; ``all``, any (the default, and a registered measure's). On rankings that keep the positions a family reads, and
drop others, its values are the same (tested for every built-in family)."""
Unjudged = Literal["not_relevant", "not_judged", "any_result", "as_given", "removed", "skipped", "inferred"]
"""What a family does with a returned document absent from the judgments (see :data:`UNJUDGED`)."""

EVERY_JUDGED_QUERY: Final = "no_relevant=zero"
"""What a measure's definition holds when it is defined on every judged query (trec_eval's names)."""

GAIN_TEXT: Final[dict[Gain, str]] = {"exponential": "gain 2^grade - 1", "linear": "gain = grade"}

MAX_CUTOFF: Final = 1_000_000_000
"""The largest cutoff k a measure name may give (larger ones are refused by name, not overflowed)."""

MAX_LEVEL: Final = 512
"""The largest relevance level ``rel`` a measure name may give (real qrels grade 0 to 16)."""

ParamValue = int | str
"""The value of a :class:`Param`: an integer, or a name from a closed vocabulary."""


@dataclass(frozen=True)
class Param:
    """One typed parameter a family declares, as ir_measures declares ``P(rel=2)@5`` or ``nDCG(gains=...)@10``.

    ``k`` is written ``@k`` after the name; every other parameter in parentheses, ``ndcg(gain=linear)@10``. A
    parameter without a default must be given (``required``)."""

    name: str
    description: str
    """What it means, in one line (the docs table)."""
    kind: type[int] | type[str]
    choices: tuple[str, ...] = ()
    """The names a ``str`` parameter takes (a closed vocabulary)."""
    minimum: int | None = None
    maximum: int | None = None
    default: ParamValue | None = None
    """Its value when not given (None: the parameter is optional and its absence means something of its own, as
    ``k`` absent means the whole ranking; or it is ``required``)."""
    required: bool = False

    def parse(self, text: str, measure: str) -> ParamValue:
        """The value `text` spells; ``ValueError`` naming the measure, the parameter and what it takes."""
        if self.kind is int:
            if not text.isascii() or not text.isdigit() or len(text) > 12:
                raise ValueError(f"measure {measure}: parameter {self.name} takes an integer, not {text!r}")
            value = int(text)
            low = self.minimum if self.minimum is not None else 0
            if value < low or (self.maximum is not None and value > self.maximum):
                top = f" and at most {self.maximum:,}" if self.maximum is not None else ""
                raise ValueError(f"measure {measure}: parameter {self.name} is at least {low}{top}, not {value}")
            return value
        if text not in self.choices:
            raise ValueError(
                f"measure {measure}: parameter {self.name} takes one of {', '.join(self.choices)}, not {text!r}"
            )
        return text

    @property
    def form(self) -> str:
        """How it is written in a name: ``@k``, ``gain=exponential|linear``, ``rel=<integer>``."""
        if self.name == "k":
            return "@k"
        values = "|".join(self.choices) if self.choices else "<integer>"
        return f"{self.name}={values}"


class UnjudgedPolicy(NamedTuple):
    """One way of treating unjudged documents: a short label (the docs table) and the statement that the
    reference function's docstring of every family with this policy carries word for word."""

    label: str
    statement: str


UNJUDGED: Final[dict[Unjudged, UnjudgedPolicy]] = {
    "not_relevant": UnjudgedPolicy(
        "not relevant",
        "Unjudged documents (absent from the judgments) count as not relevant: they stay in the ranking and add "
        "nothing (no condensed list).",
    ),
    "not_judged": UnjudgedPolicy(
        "what it counts",
        "Unjudged documents (absent from the judgments) are what it measures: they stay in the ranking and are the "
        "results it does not count.",
    ),
    "any_result": UnjudgedPolicy(
        "a result like any other",
        "Unjudged documents (absent from the judgments) count as results like any other: only whether anything was "
        "returned matters.",
    ),
    "as_given": UnjudgedPolicy(
        "the function's own",
        "Unjudged documents (absent from the judgments) are absent from the grades the function receives; what it "
        "does with them is the function's own.",
    ),
    "removed": UnjudgedPolicy(
        "removed (condensed list)",
        "Unjudged documents (absent from the judgments, or with a negative grade: trec_eval's pooled, not judged) "
        "are removed from the ranking before the cutoff applies (a condensed list, Sakai 2007), and the plain "
        "measure is computed on what remains.",
    ),
    "skipped": UnjudgedPolicy(
        "skipped",
        "Unjudged documents (absent from the judgments, or with a negative grade: trec_eval's pooled, not judged) "
        "are skipped: only the order of judged relevant and judged non-relevant documents counts.",
    ),
    "inferred": UnjudgedPolicy(
        "not relevant; pooled ones inferred",
        "Unjudged documents absent from the judgments count as not relevant where they stand; documents with a "
        "negative grade (trec_eval's pooled, not judged) are taken to be relevant in the proportion of the judged "
        "documents above them.",
    ),
}
"""Every policy for unjudged documents, by name. The plain measures count them as not relevant; the condensed-list
forms (``condensed_ndcg@k`` and the like) remove them before scoring and carry names of their own."""


class QueryCase(NamedTuple):
    """One query as the reference functions read it: its ranking (in order) and its judgments."""

    ranking: Sequence[str]
    grades: Mapping[str, int]
    chunk_lengths: Mapping[str, int] | None = None
    spans: Mapping[str, Sequence[tuple[int, int]]] | None = None


@dataclass(frozen=True)
class TrecName:
    """A trec_eval name of a family, with trec_eval's meaning: ``stem_k`` when ``cut``, else the bare ``stem`` (the
    whole ranking); ``gain`` when trec_eval's gain is not the family's default."""

    stem: str
    cut: bool
    gain: Gain | None = None

    @property
    def form(self) -> str:
        """How it is written, ``k`` standing for the cutoff: ``ndcg_cut_k``, ``recip_rank``."""
        return f"{self.stem}_k" if self.cut else self.stem


@dataclass(frozen=True)
class MeasureDef:
    """One measure as asked: the name it is reported under, its family and parameters."""

    name: str
    spec: Family = field(repr=False)
    """The family's declaration."""
    cutoff: int | None = None
    gain: Gain | None = None
    no_relevant: NoRelevant = "skip"
    """See :data:`NoRelevant`."""
    rel: int = 1
    """The grade from which a document counts as relevant (a family's ``rel`` parameter; 1 for every other)."""

    @property
    def family(self) -> str:
        """The family's name."""
        return self.spec.name

    @property
    def definition(self) -> str:
        """Every parameter spelled out, e.g. ``ndcg(cutoff=10, gain=linear, no_relevant=zero)``."""
        parts = []
        if self.spec.cutoff != "none":
            parts.append(f"cutoff={self.cutoff if self.cutoff is not None else 'none'}")
        if self.gain is not None:
            parts.append(f"gain={self.gain}")
        if self.rel != 1:  # grade >= 1 is every measure's rule: spelled out only when a name moves it
            parts.append(f"rel={self.rel}")
        parts += [f"{key}={value}" for key, value in self.spec.fixed]
        if self.no_relevant != "skip":
            parts.append(f"no_relevant={self.no_relevant}")
        prefix = "user:" if self.spec.user else ""
        return f"{prefix}{self.family}({', '.join(parts)})"

    def __str__(self) -> str:
        return self.name


Kernel = Callable[[Ranked, MeasureDef], FloatArray]
"""One value per query of a :class:`~evalkit.measures.ranked.Ranked` (values of queries the measure is not defined on
are discarded by the scoring core)."""
Reference = Callable[[QueryCase, MeasureDef], float]
"""The value of one query, pure over plain data."""


@dataclass(frozen=True)
class Family:
    """A measure family's declaration (see the module docstring)."""

    name: str
    description: str
    """The formula in one line (the docs table)."""
    reference: Reference
    kernel: Kernel
    unjudged: Unjudged
    params: tuple[Param, ...] = ()
    """Its typed parameters (:class:`Param`), ``k`` first when it has one."""
    defined_on: DefinedOn = "answerable"
    needs_spans: bool = False
    """Whether it reads gold answer spans (a fixture's; qrels have none)."""
    trec_eval: tuple[TrecName, ...] = ()
    fixed: tuple[tuple[str, str], ...] = ()
    """Parameters with a single value, spelled out in the definition so that a change of meaning changes it."""
    user: bool = False
    condensed: bool = False
    """Whether its cutoff applies after unjudged documents are removed (a condensed list), so that it reads the
    whole ranking whatever its cutoff."""
    positions: Positions = "all"
    """Which positions of a ranking its kernel reads (see :data:`Positions`); the columnar scorer builds no position
    that no measure of the set reads."""
    uncut_reach: UncutReach = "whole"
    """How deep it reads a ranking without a cutoff (see :data:`UncutReach`)."""

    def param(self, name: str) -> Param | None:
        """Its parameter called `name`, None when it has none."""
        return next((p for p in self.params if p.name == name), None)

    @property
    def cutoff(self) -> Cutoff:
        """Whether its evalkit name must give a cutoff (``recall@5``), may, or must not (see :data:`Cutoff`)."""
        k = self.param("k")
        return "none" if k is None else ("required" if k.required else "optional")

    @property
    def gains(self) -> tuple[Gain, ...]:
        """The gains it takes, evalkit's default first (none: the family has no gain)."""
        gain = self.param("gain")
        if gain is None:
            return ()
        return tuple(g for g in GAIN_TEXT if g == gain.default) + tuple(
            g for g in GAIN_TEXT if g in gain.choices and g != gain.default
        )

    @property
    def default_gain(self) -> Gain | None:
        """The gain of the family's evalkit name (None: no gain)."""
        return self.gains[0] if self.gains else None

    @property
    def doc(self) -> str:
        """The reference function's docstring: the formula, the edge cases and what it does with unjudged documents."""
        return self.reference.__doc__ or ""
