"""The measure registry: every family declared once (:mod:`evalkit.measures.families`), and names parsed into them.

Names are parsed by :func:`parse_measure` in two vocabularies. evalkit's: ``recall@k``, ``precision@k``, ``success@k``,
``mrr@k``, ``ndcg@k``, ``map@k``, ``rprec``, ``judged@k``, ``unj@k``, ``infap``, the condensed-list forms
``condensed_ndcg@k``, ``condensed_map@k``, ``condensed_precision@k``, ``condensed_recall@k``, ``condensed_mrr@k``, and
``context_precision``, ``context_recall``, ``no_answer_fpr`` (``recall``, ``mrr``, ``map`` and the condensed ``ndcg``,
``map``, ``recall`` and ``mrr`` without ``@k`` read the whole ranking). trec_eval's, with trec_eval's meaning, as each
family declares them: ``ndcg_cut_k`` and ``ndcg`` (linear gain), ``recip_rank`` (no cutoff), ``P_k``, ``recall_k``,
``success_k``, ``map``, ``map_cut_k``, ``Rprec``, ``bpref``, ``infAP`` (``map``, ``ndcg`` and ``bpref``, spelled alike
in both, are trec_eval's). An evalkit name may set a family's other typed parameters in parentheses, as ir_measures
writes them: ``ndcg(gain=linear)@10``, ``precision(rel=2)@5``, ``map(rel=2)`` (each family's parameters are in its
declaration; an unknown parameter or value is refused, naming what the family takes). A measure keeps the name it was
asked by (the report key, the column name); :attr:`MeasureDef.definition` spells out every parameter, and reports carry
it, so two reports never compare different definitions under one name.

Common rules: a document is relevant when its grade is at least 1 (at least ``rel`` for a measure that sets it: lower
grades then count as judged, not relevant, as trec_eval's ``-l``, and an answerable query none of whose documents
reaches it scores 0, as trec_eval scores it); grade 0 is judged, not relevant, and a negative grade
is read as trec_eval reads it, "pooled, not judged" (``-1``); neither gives gain. Under evalkit's names, ranking
measures are defined on answerable queries (at least one relevant document; the others are no-answer queries, which
``no_answer_fpr`` scores); under trec_eval's names on every judged query, one without a relevant document scoring 0, as
trec_eval scores it (:attr:`MeasureDef.no_relevant`). An empty ranking scores 0. Rankings are deduplicated before any
cutoff (first occurrence kept). Each family says what it does with unjudged documents
(:data:`~evalkit.measures.declaration.UNJUDGED`).

:func:`register_measure` adds a user's measure, a function of one ranking and its judgments; it then flows through batch
scoring (one Python call per query), intervals, ``compare`` and the notebooks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import numpy as np

from evalkit.data.inputs import clip
from evalkit.measures.declaration import (
    EVERY_JUDGED_QUERY,
    MAX_CUTOFF,
    UNJUDGED,
    Family,
    FloatArray,
    MeasureDef,
    Param,
    QueryCase,
    TrecName,
)
from evalkit.measures.families import BUILT_IN, CONDENSED_OF, K
from evalkit.measures.kernels.shared import at_level_case, relevant_grades
from evalkit.measures.ranked import Ranked, dedupe_ranking

__all__ = [
    "DEFAULT_JUDGED_K",
    "DEFAULT_SCORE_MEASURES",
    "EVERY_JUDGED_QUERY",
    "FAMILIES",
    "MAX_CUTOFF",
    "NO_ANSWER_FPR",
    "STANDARD_MEASURES",
    "Family",
    "MeasureDef",
    "QueryCase",
    "condensed_form",
    "condensed_forms",
    "display_order",
    "judged_k",
    "judged_share_measures",
    "measure_list",
    "parse_measure",
    "parse_measures",
    "reference_value",
    "register_measure",
    "trec_order",
    "unregister_measure",
]

FAMILIES: Final[dict[str, Family]] = {family.name: family for family in BUILT_IN}
"""The built-in families by evalkit name."""

_USER: dict[str, Family] = {}

_TREC_NAMES: Final[dict[str, tuple[Family, TrecName]]] = {
    trec.stem: (family, trec) for family in BUILT_IN for trec in family.trec_eval
}
_TREC_CUT: Final = re.compile(
    "(?P<stem>" + "|".join(re.escape(s) for s, (_, t) in _TREC_NAMES.items() if t.cut) + ")_(?P<cutoff>[1-9][0-9]*)"
)
_EVALKIT_NAME: Final = re.compile(
    r"(?P<family>[a-z][a-z0-9_]*)(?:\((?P<params>[^()]*)\))?(?:@(?P<cutoff>[1-9][0-9]*))?"
)
_ASSIGNMENT: Final = re.compile(r"\s*(?P<key>[a-z][a-z0-9_]*)\s*=\s*(?P<value>[^,=\s]+)\s*")


def _form(family: Family) -> str:
    """How a family's names are written: ``recall[(rel=<integer>)][@k]``, ``precision[(rel=<integer>)]@k``."""
    named = [p.form for p in family.params if p.name != "k"]
    text = family.name + (f"[({', '.join(named)})]" if named else "")
    return {"required": f"{text}@k", "optional": f"{text}[@k]", "none": text}[family.cutoff]


def _valid_names() -> str:
    evalkit = [_form(f) for f in {**FAMILIES, **_USER}.values()]
    return ", ".join([*evalkit, *(trec.form for _, trec in _TREC_NAMES.values())])


def _parameters(spec: Family, text: str | None, name: str) -> dict[str, object]:
    """The parameters written in parentheses, parsed by the family's declarations; ``ValueError`` naming the measure
    and what the family takes for an unknown, repeated or malformed one."""
    given: dict[str, object] = {}
    if text is None:
        return given
    takes = [p for p in spec.params if p.name != "k"]
    for part in text.split(","):
        assignment = _ASSIGNMENT.fullmatch(part)
        param: Param | None = None if assignment is None else spec.param(assignment["key"])
        if assignment is None or param is None or param.name == "k" or assignment["key"] in given:
            offered = ", ".join(p.form for p in takes) or "no parameter in parentheses"
            problem = "is repeated" if assignment is not None and assignment["key"] in given else "is not one it takes"
            raise ValueError(
                f"malformed measure {clip(repr(name))}: {clip(repr(part.strip()))} {problem}; {spec.name} takes "
                f"{offered}"
            )
        given[param.name] = param.parse(assignment["value"], clip(repr(name)))
    return given


def parse_measure(name: str) -> MeasureDef:
    """The measure called ``name`` (see the module docstring); an unknown or malformed name raises ``ValueError``
    listing the valid forms."""
    text = name.strip()
    cut = _TREC_CUT.fullmatch(text)
    if cut is not None:
        family, trec = _TREC_NAMES[cut["stem"]]
        return MeasureDef(text, family, _cutoff(cut["cutoff"], name), trec.gain or family.default_gain, "zero")
    plain = _TREC_NAMES.get(text)
    if plain is not None and not plain[1].cut:  # map too: a script written for trec_eval gets trec_eval's map
        family, trec = plain
        return MeasureDef(text, family, None, trec.gain or family.default_gain, "zero")
    match = _EVALKIT_NAME.fullmatch(text)
    spec = None if match is None else (FAMILIES.get(match["family"]) or _USER.get(match["family"]))
    if match is None or spec is None:
        raise ValueError(f"unknown measure {clip(repr(name))}; valid: {_valid_names()}")
    cutoff = None if match["cutoff"] is None else _cutoff(match["cutoff"], name)
    if (spec.cutoff == "required" and cutoff is None) or (spec.cutoff == "none" and cutoff is not None):
        raise ValueError(f"malformed measure {clip(repr(name))}: write it {_form(spec)}; valid: {_valid_names()}")
    given = _parameters(spec, match["params"], name)
    gain = given.get("gain", spec.default_gain)
    rel = given.get("rel", 1)
    return MeasureDef(text, spec, cutoff, gain, rel=rel)  # type: ignore[arg-type]  # checked by the Param


def _cutoff(digits: str, name: str) -> int:
    """The cutoff ``digits`` spell, refused by name past :data:`MAX_CUTOFF` (never an integer overflow later)."""
    if len(digits) > len(str(MAX_CUTOFF)) or int(digits) > MAX_CUTOFF:
        raise ValueError(f"malformed measure {clip(repr(name))}: a cutoff is at most {MAX_CUTOFF:,}")
    value = K.parse(digits, clip(repr(name)))
    return int(value)


def measure_list(text: str) -> list[str]:
    """The measure names of a comma-separated list (``--measures``), a comma inside parentheses kept in its name:
    ``ndcg(gain=linear)@10,P_5`` is two names."""
    return [name.strip() for name in re.split(r",(?![^()]*\))", text) if name.strip()]


def parse_measures(names: Sequence[str]) -> tuple[MeasureDef, ...]:
    """Each name parsed, in order; a name given twice is refused."""
    parsed = tuple(parse_measure(n) for n in names)
    seen = [m.name for m in parsed]
    repeated = sorted({n for n in seen if seen.count(n) > 1})
    if repeated:
        raise ValueError(f"measure(s) named more than once: {', '.join(repeated)}")
    return parsed


STANDARD_MEASURES: Final = parse_measures(
    ["recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "context_precision", "context_recall"]
)
"""The measures a fixture run reports on every answerable query, in report order."""

NO_ANSWER_FPR: Final = parse_measure("no_answer_fpr")
"""False-positive rate on no-answer queries: the mean of its per-query term over those queries."""

DEFAULT_SCORE_MEASURES: Final = tuple(m.name for m in STANDARD_MEASURES if not m.spec.needs_spans)
"""What ``evalkit score`` reports when no measure is named (``no_answer_fpr`` joins when there are no-answer
queries, and the context measures when a fixture with spans is given)."""


DEFAULT_JUDGED_K: Final = 10
"""The k of the unjudged share shown beside a score when no measure asked has a cutoff."""


def judged_k(measures: Sequence[MeasureDef]) -> int:
    """The k of the unjudged share shown beside `measures`: the largest cutoff asked, else
    :data:`DEFAULT_JUDGED_K`."""
    return max((m.cutoff for m in measures if m.cutoff is not None), default=DEFAULT_JUDGED_K)


def judged_share_measures(measures: Sequence[MeasureDef]) -> tuple[MeasureDef, ...]:
    """``judged@K`` and ``unj@K`` (K = :func:`judged_k`) that are not among `measures` already: the share of the top
    K the judgments speak for, and its complement, shown beside every score."""
    k = judged_k(measures)
    asked = {m.name for m in measures}
    return tuple(parse_measure(f"{name}@{k}") for name in ("judged", "unj") if f"{name}@{k}" not in asked)


_TREC_EVAL_ORDER: Final = (
    "map", "gm_map", "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P", "relstring", "recall", "infAP",
    "gm_bpref", "Rprec_mult", "utility", "11pt_avg", "binG", "G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg",
    "ndcg_cut", "map_cut", "relative_P", "success",
)  # fmt: skip
"""trec_eval's measure table (``measures.c``): the order it computes and prints measures in, whatever order ``-m``
names them."""


def trec_order(measures: Sequence[MeasureDef]) -> list[MeasureDef]:
    """``measures`` as trec_eval prints them: trec_eval's names in its table's order, a family's cutoffs ascending;
    evalkit's own names (which trec_eval does not print) after them, in the order asked."""

    def key(item: tuple[int, MeasureDef]) -> tuple[int, int, int]:
        position, measure = item
        root, _, cutoff = measure.name.rpartition("_")
        if root and cutoff.isdigit() and root in _TREC_EVAL_ORDER:
            return (_TREC_EVAL_ORDER.index(root), int(cutoff), position)
        if measure.name in _TREC_EVAL_ORDER:
            return (_TREC_EVAL_ORDER.index(measure.name), 0, position)
        return (len(_TREC_EVAL_ORDER), 0, position)

    return [measure for _, measure in sorted(enumerate(measures), key=key)]


def display_order(names: Sequence[str]) -> list[str]:
    """`names` in the order every summary table shows them, whatever order a report's keys came in: by family, as
    the families are declared (recall, precision, ... no_answer_fpr; registered measures after them), then cutoff
    (the whole ranking last), then name. A name that no longer parses comes last."""

    def key(name: str) -> tuple[int, int, str]:
        try:
            measure = parse_measure(name)
        except ValueError:
            return (len(FAMILIES) + len(_USER) + 1, 0, name)
        families = [*FAMILIES, *_USER]
        return (families.index(measure.family), measure.cutoff or MAX_CUTOFF + 1, name)

    return sorted(names, key=key)


def condensed_form(measure: MeasureDef) -> MeasureDef | None:
    """The condensed-list form of a plain measure asked by evalkit's name (``ndcg@10`` -> ``condensed_ndcg@10``),
    with the same cutoff and gain; None when it has none (trec_eval's names, the other families, the condensed forms
    themselves)."""
    family = CONDENSED_OF.get(measure.spec.name)
    if family is None or measure.no_relevant != "skip" or measure.spec.user:
        return None
    params = [f"gain={measure.gain}"] if measure.gain not in (None, FAMILIES[family].default_gain) else []
    params += [f"rel={measure.rel}"] if measure.rel != 1 else []
    written = family + (f"({','.join(params)})" if params else "")
    return parse_measure(written if measure.cutoff is None else f"{written}@{measure.cutoff}")


def condensed_forms(measures: Sequence[MeasureDef]) -> tuple[MeasureDef, ...]:
    """The condensed-list forms (:func:`condensed_form`) of `measures` not among them already, in their order."""
    asked = {m.name for m in measures}
    forms = [c for m in measures if (c := condensed_form(m)) is not None and c.name not in asked]
    return tuple({c.name: c for c in forms}.values())


def reference_value(measure: MeasureDef, case: QueryCase) -> float:
    """The measure's value for one query by its reference function (0 for a query without a relevant document
    under trec_eval's names, and for an answerable query none of whose documents reaches the measure's ``rel``)."""
    answerable = any(g >= 1 for g in case.grades.values())
    case = at_level_case(case, measure.rel)
    if not any(g >= 1 for g in case.grades.values()) and (measure.no_relevant == "zero" or answerable):
        return 0.0  # no document reaches the level: 0, as trec_eval scores a query without a relevant document
    return measure.spec.reference(case, measure)


UserFunction = Callable[[Sequence[str], Mapping[str, int], "int | None"], float]


def register_measure(name: str, function: UserFunction, *, cutoff: bool = False, description: str = "") -> None:
    """Register a measure ``function(ranking, grades, k)`` -> a value in [0, 1], defined on answerable queries.

    ``ranking`` is the query's deduplicated ranking in order, ``grades`` its judgments (document -> grade; an
    unjudged document is absent), ``k`` the cutoff (``name@k``) when ``cutoff`` is true, else None. The name must be
    new and lower-case (``[a-z][a-z0-9_]*``). Its kernel calls ``function`` once per query.
    """
    taken = name in FAMILIES or name in _USER or name in _TREC_NAMES or _TREC_CUT.fullmatch(name) is not None
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or taken:
        raise ValueError(f"cannot register measure {name!r}: the name must be new and match [a-z][a-z0-9_]*")

    def reference(case: QueryCase, m: MeasureDef) -> float:
        relevant_grades(case)
        value = float(function(dedupe_ranking(case.ranking), case.grades, m.cutoff))
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"measure {m.name} returned {value!r}; a registered measure's values lie in [0, 1]")
        return value

    reference.__doc__ = f"{description or name}: a registered function.\n\n{UNJUDGED['as_given'].statement}"

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

    _USER[name] = Family(name, description, reference, kernel, "as_given", (K,) if cutoff else (), user=True)


def unregister_measure(name: str) -> None:
    """Remove a registered measure (built-in ones cannot be removed)."""
    if name not in _USER:
        raise ValueError(f"{name!r} is not a registered measure")
    del _USER[name]
