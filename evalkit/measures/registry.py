"""The measure registry: every measure declared once, with its parameters, reference function and batch kernel.

A measure is a *family* (``ndcg``, ``recall``, ...) with parameters: a cutoff ``k`` and, for nDCG, a gain
(``exponential`` ``2**g - 1``, as evalkit's ``ndcg@k``; ``linear`` ``g``, as trec_eval's ``ndcg_cut_k``). Each
family declares:

- its per-query **reference** function, pure over plain data (the definition, written for reading);
- its **kernel**, the same values for every query of a :class:`~evalkit.measures.ranked.Ranked` at once;
- whether it needs gold spans (context measures) and which queries it is defined on (answerable queries, or
  the no-answer ones for ``no_answer_fpr``).

Names are parsed by :func:`parse_measure` in two vocabularies. evalkit's: ``recall@k``, ``precision@k``,
``success@k``, ``mrr@k``, ``ndcg@k``, ``map@k``, ``rprec``, ``judged@k``, ``context_precision``,
``context_recall``, ``no_answer_fpr`` (``recall``, ``mrr`` and ``ndcg`` without ``@k`` use the whole ranking).
trec_eval's, with trec_eval's meaning: ``ndcg_cut_k`` and ``ndcg`` (linear gain), ``recip_rank`` (no cutoff),
``P_k``, ``recall_k``, ``success_k``, ``map``, ``map_cut_k``, ``Rprec`` (``map``, spelled alike in both, is
trec_eval's). A measure keeps the name it was asked by
(the report key, the column name); :attr:`MeasureDef.definition` spells out every parameter, and reports carry
it, so two reports never compare different definitions under one name.

Common rules: a document is relevant when its grade is at least 1; grades of 0 or below are judged, not
relevant, and give no gain. Under evalkit's names, ranking measures are defined on answerable queries (at least one
relevant document; the others are no-answer queries, which ``no_answer_fpr`` scores); under trec_eval's names
(``map`` included) on every judged query, one without a relevant document scoring 0, as trec_eval scores it
(:attr:`MeasureDef.no_relevant`). An empty ranking scores 0. Rankings are deduplicated before any cutoff (first
occurrence kept).

:func:`register_measure` adds a user's measure, a function of one ranking and its judgments; it then flows through
batch scoring (one Python call per query), intervals, ``compare`` and the notebooks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from evalkit.data.inputs import clip
from evalkit.measures import metrics
from evalkit.measures.ranked import Ranked

__all__ = [
    "DEFAULT_SCORE_MEASURES",
    "FAMILIES",
    "Family",
    "MeasureDef",
    "QueryCase",
    "parse_measure",
    "parse_measures",
    "reference_value",
    "register_measure",
    "unregister_measure",
]

FloatArray = npt.NDArray[np.float64]
Cutoff = Literal["required", "optional", "none"]
Gain = Literal["exponential", "linear"]
NoRelevant = Literal["skip", "zero"]
EVERY_JUDGED_QUERY: Final = "no_relevant=zero"
"""What a measure's definition holds when it is defined on every judged query (trec_eval's names)."""


class QueryCase(NamedTuple):
    """One query as the reference functions read it: its ranking (in order) and its judgments."""

    ranking: Sequence[str]
    grades: Mapping[str, int]
    chunk_lengths: Mapping[str, int] | None = None
    spans: Mapping[str, Sequence[tuple[int, int]]] | None = None


@dataclass(frozen=True)
class MeasureDef:
    """One measure as asked: the name it is reported under, its family and parameters."""

    name: str
    family: str
    cutoff: int | None = None
    gain: Gain | None = None
    no_relevant: NoRelevant = "skip"
    """A judged query without a relevant document: ``skip`` (evalkit's names: a no-answer query, which
    ``no_answer_fpr`` scores) or ``zero`` (trec_eval's names: it scores 0 and counts in the mean, as trec_eval's)."""

    @property
    def definition(self) -> str:
        """Every parameter spelled out, e.g. ``ndcg(cutoff=10, gain=linear, no_relevant=zero)``."""
        spec = FAMILIES[self.family] if self.family in FAMILIES else _USER[self.family]
        parts = []
        if spec.cutoff != "none":
            parts.append(f"cutoff={self.cutoff if self.cutoff is not None else 'none'}")
        if self.gain is not None:
            parts.append(f"gain={self.gain}")
        if self.no_relevant != "skip":
            parts.append(f"no_relevant={self.no_relevant}")
        prefix = "user:" if spec.user else ""
        return f"{prefix}{self.family}({', '.join(parts)})"

    @property
    def spec(self) -> Family:
        """The family's declaration."""
        return FAMILIES.get(self.family) or _USER[self.family]

    def __str__(self) -> str:
        return self.name


Kernel = Callable[[Ranked, MeasureDef], FloatArray]
Reference = Callable[[QueryCase, MeasureDef], float]


@dataclass(frozen=True)
class Family:
    """A measure family's declaration (see the module docstring)."""

    name: str
    reference: Reference
    kernel: Kernel
    cutoff: Cutoff = "required"
    needs_spans: bool = False
    no_answer: bool = False
    description: str = ""
    user: bool = False
    default_gain: Gain | None = field(default=None)


# ----------------------------------------------------------------------------------------------------
# Kernels: one value per query of a Ranked (values of queries a measure is not defined on are discarded later)
# ----------------------------------------------------------------------------------------------------


def _within(ranked: Ranked, k: int | None) -> npt.NDArray[np.bool_]:
    return np.ones(len(ranked.rank), dtype=bool) if k is None else ranked.rank <= k


def _hits(ranked: Ranked, k: int | None) -> npt.NDArray[np.bool_]:
    hits: npt.NDArray[np.bool_] = (ranked.grade >= 1) & _within(ranked, k)
    return hits


def _ratio(top: npt.NDArray[np.float64] | npt.NDArray[np.int64], bottom: npt.NDArray[np.int64]) -> FloatArray:
    values: FloatArray = np.divide(
        top.astype(np.float64), bottom, out=np.zeros(len(bottom), dtype=np.float64), where=bottom > 0
    )
    return values


def _recall(ranked: Ranked, m: MeasureDef) -> FloatArray:
    return _ratio(ranked.count(_hits(ranked, m.cutoff)), ranked.relevant())


def _precision(ranked: Ranked, m: MeasureDef) -> FloatArray:
    values: FloatArray = ranked.count(_hits(ranked, m.cutoff)) / float(m.cutoff or 1)
    return values


def _success(ranked: Ranked, m: MeasureDef) -> FloatArray:
    values: FloatArray = (ranked.count(_hits(ranked, m.cutoff)) > 0).astype(np.float64)
    return values


def _reciprocal_rank(ranked: Ranked, m: MeasureDef) -> FloatArray:
    hits = _hits(ranked, m.cutoff)
    rows, first = np.unique(ranked.row[hits], return_index=True)
    values = np.zeros(ranked.n, dtype=np.float64)
    values[rows] = 1.0 / ranked.rank[hits][first]
    return values


def _discounts(ranks: npt.NDArray[np.int64]) -> FloatArray:
    """``log2(rank + 1)`` with ``math.log2`` (the reference's and trec_eval's libm log2, not numpy's)."""
    top = int(ranks.max()) if len(ranks) else 0
    table = np.array([math.log2(rank + 1) for rank in range(1, top + 1)], dtype=np.float64)
    values: FloatArray = table[ranks - 1] if len(ranks) else np.zeros(0)
    return values


def _gains(grades: npt.NDArray[np.int64], gain: Gain | None) -> FloatArray:
    values: FloatArray = grades.astype(np.float64) if gain == "linear" else np.exp2(grades.astype(np.float64)) - 1.0
    return values


def _ndcg(ranked: Ranked, m: MeasureDef) -> FloatArray:
    mask = _hits(ranked, m.cutoff)
    dcg = ranked.sums(mask, _gains(ranked.grade[mask], m.gain) / _discounts(ranked.rank[mask]))
    ideal = ranked.ideal_rank <= (m.cutoff or np.iinfo(np.int64).max)
    idcg = ranked.ideal_sums(ideal, _gains(ranked.ideal_grade[ideal], m.gain) / _discounts(ranked.ideal_rank[ideal]))
    values: FloatArray = np.divide(dcg, idcg, out=np.zeros(ranked.n), where=idcg > 0)
    return values


def _average_precision(ranked: Ranked, m: MeasureDef) -> FloatArray:
    hits = _hits(ranked, m.cutoff)
    rows = ranked.row[hits]
    starts = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=ranked.n))[:-1]))
    so_far = np.arange(len(rows), dtype=np.int64) - starts[rows] + 1
    total = ranked.sums(hits, so_far / ranked.rank[hits])
    return _ratio(total, ranked.relevant())


def _r_precision(ranked: Ranked, m: MeasureDef) -> FloatArray:
    relevant = ranked.relevant()
    mask = (ranked.grade >= 1) & (ranked.rank <= relevant[ranked.row])
    return _ratio(ranked.count(mask), relevant)


def _judged(ranked: Ranked, m: MeasureDef) -> FloatArray:
    values: FloatArray = ranked.count(ranked.judged & _within(ranked, m.cutoff)) / float(m.cutoff or 1)
    return values


def _spans(ranked: Ranked) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int64]]:
    if ranked.span_chars is None or ranked.lengths is None or ranked.total_span_chars is None:
        raise ValueError("context measures need gold spans: score against a fixture with answer spans")
    if np.any(ranked.total_span_chars[ranked.relevant() > 0] == 0):
        raise ValueError("gold spans cover no characters: context metrics need at least one non-empty span")
    found = np.asarray(np.bincount(ranked.row, weights=ranked.span_chars, minlength=ranked.n), dtype=np.float64)
    returned = np.asarray(np.bincount(ranked.row, weights=ranked.lengths, minlength=ranked.n), dtype=np.float64)
    return found, returned, ranked.total_span_chars


def _context_precision(ranked: Ranked, m: MeasureDef) -> FloatArray:
    found, returned, _ = _spans(ranked)
    values: FloatArray = np.divide(found, returned, out=np.zeros(ranked.n), where=returned > 0)
    return values


def _context_recall(ranked: Ranked, m: MeasureDef) -> FloatArray:
    found, _, total = _spans(ranked)
    return _ratio(found, total)


def _no_answer_fpr(ranked: Ranked, m: MeasureDef) -> FloatArray:
    values: FloatArray = (ranked.returned() > 0).astype(np.float64)
    return values


# ----------------------------------------------------------------------------------------------------
# Reference functions (the definitions, one query at a time)
# ----------------------------------------------------------------------------------------------------


def _top(case: QueryCase, k: int | None) -> tuple[str, ...]:
    ranking = metrics.dedupe_ranking(case.ranking)
    return ranking if k is None else ranking[:k]


def _positive(case: QueryCase) -> dict[str, int]:
    positive = {c: g for c, g in case.grades.items() if g >= 1}
    if not positive:
        raise ValueError(
            "relevant has no chunk with grade >= 1: ranking measures are defined only on answerable queries"
        )
    return positive


def _ref_recall(case: QueryCase, m: MeasureDef) -> float:
    positive = _positive(case)
    return sum(1 for c in _top(case, m.cutoff) if c in positive) / len(positive)


def _ref_precision(case: QueryCase, m: MeasureDef) -> float:
    """``|relevant in the first k| / k`` (k, not the number returned: trec_eval's ``P_k``)."""
    positive = _positive(case)
    return sum(1 for c in _top(case, m.cutoff) if c in positive) / (m.cutoff or 1)


def _ref_success(case: QueryCase, m: MeasureDef) -> float:
    """1 when a relevant document is in the first k, else 0 (trec_eval's ``success_k``)."""
    positive = _positive(case)
    return 1.0 if any(c in positive for c in _top(case, m.cutoff)) else 0.0


def _ref_reciprocal_rank(case: QueryCase, m: MeasureDef) -> float:
    positive = _positive(case)
    return next((1.0 / rank for rank, c in enumerate(_top(case, m.cutoff), 1) if c in positive), 0.0)


def _ref_ndcg(case: QueryCase, m: MeasureDef) -> float:
    positive = _positive(case)
    gain = metrics.GAINS[m.gain or "exponential"]
    top = _top(case, m.cutoff)
    dcg = math.fsum(gain(positive.get(c, 0)) / math.log2(r + 1) for r, c in enumerate(top, 1) if c in positive)
    ideal = sorted(positive.values(), reverse=True)[: m.cutoff]
    return dcg / math.fsum(gain(g) / math.log2(r + 1) for r, g in enumerate(ideal, 1))


def _ref_average_precision(case: QueryCase, m: MeasureDef) -> float:
    """``sum over relevant d in the first k of precision at d's rank / |relevant|`` (trec_eval ``map``,
    ``map_cut_k``: the denominator is every relevant document, retrieved or not)."""
    positive = _positive(case)
    found, terms = 0, []
    for rank, c in enumerate(_top(case, m.cutoff), 1):
        if c in positive:
            found += 1
            terms.append(found / rank)
    return math.fsum(terms) / len(positive)


def _ref_r_precision(case: QueryCase, m: MeasureDef) -> float:
    """``|relevant in the first R| / R`` with R the number of relevant documents (trec_eval ``Rprec``)."""
    positive = _positive(case)
    return sum(1 for c in _top(case, len(positive)) if c in positive) / len(positive)


def _ref_judged(case: QueryCase, m: MeasureDef) -> float:
    """``|judged documents in the first k| / k``, a grade of 0 or below counting as judged (ir_measures'
    ``Judged@k``): how much of what the system returned the judgments can speak for."""
    _positive(case)
    return sum(1 for c in _top(case, m.cutoff) if c in case.grades) / (m.cutoff or 1)


def _context_case(case: QueryCase) -> tuple[Sequence[str], Mapping[str, int], Mapping[str, Sequence[tuple[int, int]]]]:
    if case.chunk_lengths is None or case.spans is None:
        raise ValueError("context measures need chunk lengths and gold spans")
    return case.ranking, case.chunk_lengths, case.spans


def _ref_context_precision(case: QueryCase, m: MeasureDef) -> float:
    return metrics.context_precision(*_context_case(case))


def _ref_context_recall(case: QueryCase, m: MeasureDef) -> float:
    return metrics.context_recall(*_context_case(case))


def _ref_no_answer_fpr(case: QueryCase, m: MeasureDef) -> float:
    return metrics.returned_any(case.ranking)


FAMILIES: Final[dict[str, Family]] = {
    family.name: family
    for family in (
        Family("recall", _ref_recall, _recall, "optional", description="relevant in the first k / all relevant"),
        Family("precision", _ref_precision, _precision, description="relevant in the first k / k"),
        Family("success", _ref_success, _success, description="1 if a relevant document is in the first k"),
        Family("mrr", _ref_reciprocal_rank, _reciprocal_rank, "optional", description="1 / rank of the first relevant"),
        Family("ndcg", _ref_ndcg, _ndcg, "optional", description="DCG / ideal DCG", default_gain="exponential"),
        Family("map", _ref_average_precision, _average_precision, "optional", description="average precision"),
        Family("rprec", _ref_r_precision, _r_precision, "none", description="precision at rank R = |relevant|"),
        Family("judged", _ref_judged, _judged, description="judged documents in the first k / k"),
        Family(
            "context_precision",
            _ref_context_precision,
            _context_precision,
            "none",
            needs_spans=True,
            description="gold-span characters / characters of the first 5 results",
        ),
        Family(
            "context_recall",
            _ref_context_recall,
            _context_recall,
            "none",
            needs_spans=True,
            description="gold-span characters in the first 5 results / all gold-span characters",
        ),
        Family(
            "no_answer_fpr",
            _ref_no_answer_fpr,
            _no_answer_fpr,
            "none",
            no_answer=True,
            description="1 if a no-answer query returned anything",
        ),
    )
}
"""The built-in families by evalkit name."""

_USER: dict[str, Family] = {}

MAX_CUTOFF: Final = 1_000_000_000
"""The largest cutoff k a measure name may give (larger ones are refused by name, not overflowed)."""

_EVALKIT_NAME = re.compile(r"(?P<family>[a-z][a-z0-9_]*)(?:@(?P<cutoff>[1-9][0-9]*))?")
_TREC_CUT = re.compile(r"(?P<family>ndcg_cut|P|recall|success|map_cut)_(?P<cutoff>[1-9][0-9]*)")
_TREC_CUT_FAMILY: Final = {
    "ndcg_cut": "ndcg",
    "P": "precision",
    "recall": "recall",
    "success": "success",
    "map_cut": "map",
}
_TREC_PLAIN: Final = {
    "recip_rank": ("mrr", None),
    "map": ("map", None),
    "Rprec": ("rprec", None),
    "ndcg": ("ndcg", "linear"),
}

DEFAULT_SCORE_MEASURES: Final = tuple(str(m) for m in metrics.STANDARD_MEASURES if not FAMILIES[m.name].needs_spans)
"""What ``evalkit score`` reports when no measure is named (``no_answer_fpr`` joins when there are no-answer
queries, and the context measures when a fixture with spans is given)."""


def _valid_names() -> str:
    evalkit = [
        f"{n}@k" if f.cutoff == "required" else (f"{n}[@k]" if f.cutoff == "optional" else n)
        for n, f in {**FAMILIES, **_USER}.items()
    ]
    return ", ".join(
        [*evalkit, "ndcg_cut_k", "ndcg", "recip_rank", "P_k", "recall_k", "success_k", "map_cut_k", "Rprec"]
    )


def parse_measure(name: str) -> MeasureDef:
    """The measure called ``name`` (see the module docstring); an unknown or malformed name raises ``ValueError``
    listing the valid forms."""
    text = name.strip()
    cut = _TREC_CUT.fullmatch(text)
    if cut is not None:
        family = _TREC_CUT_FAMILY[cut["family"]]
        gain: Gain | None = "linear" if family == "ndcg" else None
        return MeasureDef(text, family, _cutoff(cut["cutoff"], name), gain, "zero")
    if text in _TREC_PLAIN:  # map too: a script written for trec_eval gets trec_eval's map
        family, plain_gain = _TREC_PLAIN[text]
        return MeasureDef(text, family, None, plain_gain, "zero")  # type: ignore[arg-type]
    match = _EVALKIT_NAME.fullmatch(text)
    spec = None if match is None else (FAMILIES.get(match["family"]) or _USER.get(match["family"]))
    if match is None or spec is None:
        raise ValueError(f"unknown measure {name!r}; valid: {_valid_names()}")
    cutoff = None if match["cutoff"] is None else _cutoff(match["cutoff"], name)
    if (spec.cutoff == "required" and cutoff is None) or (spec.cutoff == "none" and cutoff is not None):
        form = f"{spec.name}@k" if spec.cutoff == "required" else spec.name
        raise ValueError(f"malformed measure {name!r}: write it {form}; valid: {_valid_names()}")
    return MeasureDef(text, spec.name, cutoff, spec.default_gain)


def _cutoff(digits: str, name: str) -> int:
    """The cutoff ``digits`` spell, refused by name past :data:`MAX_CUTOFF` (never an integer overflow later)."""
    if len(digits) > len(str(MAX_CUTOFF)) or int(digits) > MAX_CUTOFF:
        raise ValueError(f"malformed measure {clip(repr(name))}: a cutoff is at most {MAX_CUTOFF:,}")
    return int(digits)


def parse_measures(names: Sequence[str]) -> tuple[MeasureDef, ...]:
    """Each name parsed, in order; a name given twice is refused."""
    parsed = tuple(parse_measure(n) for n in names)
    seen = [m.name for m in parsed]
    repeated = sorted({n for n in seen if seen.count(n) > 1})
    if repeated:
        raise ValueError(f"measure(s) named more than once: {', '.join(repeated)}")
    return parsed


def reference_value(measure: MeasureDef, case: QueryCase) -> float:
    """The measure's value for one query by its reference function (0 for a query without a relevant document
    under trec_eval's names)."""
    if measure.no_relevant == "zero" and not any(g >= 1 for g in case.grades.values()):
        return 0.0
    return measure.spec.reference(case, measure)


UserFunction = Callable[[Sequence[str], Mapping[str, int], "int | None"], float]


def register_measure(name: str, function: UserFunction, *, cutoff: bool = False, description: str = "") -> None:
    """Register a measure ``function(ranking, grades, k)`` -> a value in [0, 1], defined on answerable queries.

    ``ranking`` is the query's deduplicated ranking in order, ``grades`` its judgments (document -> grade), ``k``
    the cutoff (``name@k``) when ``cutoff`` is true, else None. The name must be new and lower-case
    (``[a-z][a-z0-9_]*``). Its kernel calls ``function`` once per query.
    """
    taken = name in FAMILIES or name in _USER or name in _TREC_PLAIN or _TREC_CUT.fullmatch(name) is not None
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or taken:
        raise ValueError(f"cannot register measure {name!r}: the name must be new and match [a-z][a-z0-9_]*")

    def reference(case: QueryCase, m: MeasureDef) -> float:
        _positive(case)
        value = float(function(metrics.dedupe_ranking(case.ranking), case.grades, m.cutoff))
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"measure {m.name} returned {value!r}; a registered measure's values lie in [0, 1]")
        return value

    def kernel(ranked: Ranked, m: MeasureDef) -> FloatArray:
        if ranked.doc_ids is None or ranked.judgments is None:
            raise ValueError(f"measure {m.name} needs document IDs: the rankings carry none")
        values = np.zeros(ranked.n, dtype=np.float64)
        starts = np.searchsorted(ranked.row, np.arange(ranked.n + 1))
        relevant = ranked.relevant()
        for query in np.flatnonzero(relevant > 0).tolist():
            ranking = ranked.doc_ids[starts[query] : starts[query + 1]]
            values[query] = reference(QueryCase(ranking, ranked.judgments[query]), m)
        return values

    _USER[name] = Family(name, reference, kernel, "required" if cutoff else "none", description=description, user=True)


def unregister_measure(name: str) -> None:
    """Remove a registered measure (built-in ones cannot be removed)."""
    if name not in _USER:
        raise ValueError(f"{name!r} is not a registered measure")
    del _USER[name]
