"""Agreement of two reviewers' label files, over the pairs both decided, overall and per query language.

For the ``N`` pairs (query, chunk) both reviewers decided, with grades ``a_i`` and ``b_i`` in the value domain
0-3:

- **raw agreement**: ``#{i: a_i = b_i} / N``;
- **Krippendorff's alpha, ordinal** (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"), value
  domain 0, 1, 2, 3 (the ``krippendorff`` package defaults to interval): with the coincidence matrix
  ``o[c, k] = #{i: (a_i, b_i) = (c, k)} + #{i: (b_i, a_i) = (c, k)}``, ``n_c = sum_k o[c, k]``, ``n = 2N`` and the
  ordinal distance ``d[c, k] = (sum_{g=min(c,k)}^{max(c,k)} n_g - (n_c + n_k) / 2)^2``,
  ``alpha = 1 - (n - 1) sum o d / sum_{c,k} n_c n_k d``;
- **Cohen's kappa, quadratic weights** (Cohen 1968): with the confusion matrix ``O`` (rows reviewer A), weights
  ``w[i, j] = (i - j)^2`` and expected counts ``E = rowsums(O) colsums(O)^T / N``,
  ``kappa = 1 - sum w O / sum w E``;
- **span agreement**, over the pairs both graded 1-3: the mean over pairs of the exact span F1
  (:func:`~evalkit.data.label_merge.span_exact_f1`, 1 when the span sets are equal) and of the token-level overlap F1
  (:func:`~evalkit.data.label_merge.span_overlap_f1`: Chinese counted by character, English by word, as the CMRC
  2018 scorer segments text).

The usual reading of alpha (Krippendorff 2004): at least 0.8 is good; 0.667 to 0.8 is fair, for tentative
conclusions only; below 0.667 the labels are not reliable. Kappa is read alike.

Degenerate cases give a defined value and a ``reason``, never NaN: no pairs -> ``None`` ("no pairs"); one grade
only (both reviewers gave every pair the same single grade, so both disagreements are 0) -> 1.0, recording the
agreement but no reliability; full agreement -> 1.0; a single pair -> the formula's value, said to mean nothing;
no pair both graded 1-3 -> span agreement ``None``.

A **disagreement** is a pair whose grades differ, or whose spans (both graded 1-3, same grade) are below the
overlap bound (:func:`~evalkit.data.label_merge.decisions_agree`, bound
:data:`~evalkit.data.label_merge.DEFAULT_OVERLAP_BOUND`): exactly the pairs ``evalkit labels merge`` needs an
adjudicated decision for. Languages are the queries' (as everywhere in evalkit: a slice is the queries of a language).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
from pydantic import Field

from evalkit.data.fixture import Fixture
from evalkit.data.label_merge import (
    DEFAULT_OVERLAP_BOUND,
    Key,
    check_overlap_bound,
    decisions_agree,
    pair_order,
    reviewer_pair,
    span_exact_f1,
    span_overlap_f1,
)
from evalkit.data.labels import LabelDecision
from evalkit.data.schema import LANGUAGES, Language, StrictModel

__all__ = [
    "GRADES",
    "Agreement",
    "Disagreement",
    "SliceAgreement",
    "Statistic",
    "agreement",
    "answers_of_no_answer_queries",
    "cohen_kappa_quadratic",
    "disagreements",
    "krippendorff_alpha_ordinal",
    "reading",
    "to_adjudicate",
]

GRADES: tuple[int, ...] = (0, 1, 2, 3)
"""The value domain of the grades."""

Spans = tuple[tuple[int, int], ...]
GOOD, TENTATIVE = 0.8, 0.667
"""The usual bounds of alpha: at least 0.8 good, at least 0.667 fair (tentative conclusions only)."""


_ONE_GRADE = "one grade only"
_SINGLE_PAIR = "a single pair"


def reading(alpha: float | None, reason: str | None = None) -> str:
    """The usual reading of an alpha value: ``good`` (>= 0.8), ``fair, tentative`` (0.667 to 0.8), ``not
    reliable`` (below 0.667); ``nothing to read`` for None (no pairs). With the degenerate ``reason`` a
    :class:`Statistic` gives, a 1.0 of one grade only reads ``no variation`` and a coefficient of a single pair
    ``nothing to read``: neither is reliability."""
    if alpha is None or (reason is not None and _SINGLE_PAIR in reason):
        return "nothing to read"
    if reason is not None and reason.startswith(_ONE_GRADE):
        return "no variation: agreement, not reliability"
    if alpha >= GOOD:
        return "good (>= 0.8)"
    return "fair, tentative (0.667-0.8)" if alpha >= TENTATIVE else "not reliable (< 0.667)"


class Statistic(StrictModel):
    """One agreement figure, with why it is degenerate when it is (``reason`` None otherwise)."""

    value: Annotated[float, Field(allow_inf_nan=False)] | None = Field(
        description="the figure; None only when there is nothing to measure"
    )
    reason: str | None = Field(default=None, description="why the value is degenerate or missing")


class Disagreement(StrictModel):
    """A pair the two reviewers decided differently (grades that differ, or spans below the overlap bound), or, in
    :attr:`Agreement.one_sided`, a chunk only one of them decided (the other's grade None, spans empty)."""

    query_id: str
    chunk_id: str = Field(description="the chunk (two no-answer decisions, grade 0 without spans, always agree)")
    language: Language = Field(description="the query's language")
    grade_a: int | None = Field(description="reviewer A's grade; None: A did not decide the pair")
    grade_b: int | None = Field(description="reviewer B's grade; None: B did not decide the pair")
    spans_a: Spans
    spans_b: Spans
    reviewer_a: str
    reviewer_b: str
    span_f1_overlap: float | None = Field(description="token-level F1 of the spans when both graded 1-3, else None")


class SliceAgreement(StrictModel):
    """Agreement over the pairs of one slice (every pair, or the pairs of one query language)."""

    pairs: int = Field(ge=0, description="pairs both reviewers decided")
    raw_agreement: Statistic
    krippendorff_alpha_ordinal: Statistic
    cohen_kappa_quadratic: Statistic
    span_f1_exact: Statistic = Field(description="mean exact span F1 over the pairs both graded 1-3")
    span_f1_overlap: Statistic = Field(description="mean token-level span F1 over the pairs both graded 1-3")
    confusion: tuple[tuple[int, ...], ...] = Field(description="4x4 counts: row = reviewer A's grade, column = B's")
    disagreements: tuple[Disagreement, ...]


class Agreement(SliceAgreement):
    """Agreement over every pair both reviewers decided, and per query language; and the chunks only one of them
    decided, which a merge needs an adjudicated decision for as it does for the disagreements."""

    by_language: dict[Language, SliceAgreement]
    one_sided: tuple[Disagreement, ...] = Field(
        default=(), description="(query, chunk) pairs only one reviewer decided, by query ID, then chunk ID"
    )


IntArray = npt.NDArray[np.int64]
Grades = Sequence[int] | npt.NDArray[np.integer[Any]]
"""Grades 0-3 of one reviewer, one per pair, as a sequence or an integer array."""


def _confusion(a: IntArray, b: IntArray) -> npt.NDArray[np.float64]:
    counts = np.zeros((len(GRADES), len(GRADES)), dtype=np.float64)
    np.add.at(counts, (a, b), 1.0)
    return counts


def _degenerate(a: IntArray, b: IntArray) -> Statistic | None:
    """The value and reason of a degenerate grade sample, or None for an ordinary one."""
    if len(a) == 0:
        return Statistic(value=None, reason="no pairs: the two files decide no pair in common")
    single = f"; {_SINGLE_PAIR}: a coefficient of one pair says nothing about reliability" if len(a) == 1 else ""
    if np.all(a == b) and np.all(a == a[0]):
        return Statistic(
            value=1.0,
            reason=f"{_ONE_GRADE}: both reviewers gave every pair grade {int(a[0])}, so there is no variation to "
            f"measure reliability against (1.0 records the agreement, not reliability){single}",
        )
    if np.all(a == b):
        return Statistic(value=1.0, reason=f"full agreement: both reviewers gave every pair the same grade{single}")
    return None


def _single_pair(a: IntArray, value: float) -> Statistic:
    reason = f"{_SINGLE_PAIR}: a coefficient of one pair says nothing about reliability" if len(a) == 1 else None
    return Statistic(value=value, reason=reason)


def _as_grades(values: Grades) -> IntArray:
    array = np.asarray(values)
    if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"grades must be integers, got {array.dtype}")
    return array.astype(np.int64).reshape(-1)


def _grades(a: Grades, b: Grades) -> tuple[IntArray, IntArray]:
    x, y = _as_grades(a), _as_grades(b)
    if x.shape != y.shape:
        raise ValueError(f"the two reviewers' grades differ in number: {len(x)} and {len(y)}")
    if np.any((x < GRADES[0]) | (x > GRADES[-1]) | (y < GRADES[0]) | (y > GRADES[-1])):
        raise ValueError(f"grades must be in {GRADES[0]}-{GRADES[-1]}")
    return x, y


def krippendorff_alpha_ordinal(a: Grades, b: Grades) -> Statistic:
    """Krippendorff's alpha at ordinal level, value domain 0-3, of two reviewers' grades of the same pairs (see the
    module docstring for the formula and the degenerate cases)."""
    x, y = _grades(a, b)
    degenerate = _degenerate(x, y)
    if degenerate is not None:
        return degenerate
    coincidence = _confusion(x, y) + _confusion(y, x)
    totals = coincidence.sum(axis=1)
    cumulative = np.concatenate(([0.0], np.cumsum(totals)))
    low, high = np.minimum.outer(GRADES, GRADES), np.maximum.outer(GRADES, GRADES)
    distance = (cumulative[high + 1] - cumulative[low] - (totals[:, None] + totals[None, :]) / 2) ** 2
    n = totals.sum()
    observed = float((coincidence * distance).sum())
    expected = float((np.outer(totals, totals) * distance).sum())
    return _single_pair(x, 1.0 - (n - 1) * observed / expected)


def cohen_kappa_quadratic(a: Grades, b: Grades) -> Statistic:
    """Cohen's kappa with quadratic weights, labels 0-3, of reviewer A's grades `a` and B's `b` (see the module
    docstring for the formula and the degenerate cases)."""
    x, y = _grades(a, b)
    degenerate = _degenerate(x, y)
    if degenerate is not None:
        return degenerate
    observed = _confusion(x, y)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / len(x)
    weights = np.subtract.outer(GRADES, GRADES).astype(np.float64) ** 2
    return _single_pair(x, 1.0 - float((weights * observed).sum()) / float((weights * expected).sum()))


Indexed = dict[Key, LabelDecision]
"""One reviewer's decisions by pair (:func:`~evalkit.data.label_merge.reviewer_pair`)."""


def _pairs(left: Indexed, right: Indexed) -> list[tuple[Key, LabelDecision, LabelDecision]]:
    return [(key, left[key], right[key]) for key in sorted(left.keys() & right.keys(), key=pair_order)]


def _names(a: Sequence[LabelDecision], b: Sequence[LabelDecision]) -> tuple[str, str]:
    return (a[0].reviewer if a else "A", b[0].reviewer if b else "B")


def _one_sided(
    left: Indexed, right: Indexed, names: tuple[str, str], languages: dict[str, Language]
) -> tuple[Disagreement, ...]:
    """The chunks only one reviewer decided (a no-answer decision of one reviewer needs no adjudication: see
    :func:`~evalkit.data.label_merge.merge_labels`), each with the other's grade None."""
    found = []
    for key in sorted(left.keys() ^ right.keys(), key=pair_order):
        query_id, chunk_id = key
        if chunk_id is None:
            continue
        one, other = left.get(key), right.get(key)
        found.append(
            Disagreement(
                query_id=query_id,
                chunk_id=chunk_id,
                language=languages[query_id],
                grade_a=None if one is None else one.grade,
                grade_b=None if other is None else other.grade,
                spans_a=() if one is None else one.spans,
                spans_b=() if other is None else other.spans,
                reviewer_a=names[0],
                reviewer_b=names[1],
                span_f1_overlap=None,
            )
        )
    return tuple(found)


def _languages(fixture: Fixture) -> dict[str, Language]:
    return {q.query_id: q.language for q in fixture.queries}


def _disagreements(
    pairs: list[tuple[Key, LabelDecision, LabelDecision]], fixture: Fixture, bound: float
) -> tuple[Disagreement, ...]:
    texts = {c.chunk_id: c.text for c in fixture.chunks}
    languages = _languages(fixture)
    found = []
    for (query_id, chunk_id), one, other in pairs:
        if chunk_id is None:
            continue  # two no-answer decisions: grade 0 without spans, always agreed
        text = texts.get(chunk_id, "")
        if decisions_agree(one, other, text, bound):
            continue
        relevant = one.grade >= 1 and other.grade >= 1
        found.append(
            Disagreement(
                query_id=query_id,
                chunk_id=chunk_id,
                language=languages[query_id],
                grade_a=one.grade,
                grade_b=other.grade,
                spans_a=one.spans,
                spans_b=other.spans,
                reviewer_a=one.reviewer,
                reviewer_b=other.reviewer,
                span_f1_overlap=span_overlap_f1(text, one.spans, other.spans) if relevant else None,
            )
        )
    return tuple(found)


def disagreements(
    a: Sequence[LabelDecision],
    b: Sequence[LabelDecision],
    fixture: Fixture,
    overlap_bound: float = DEFAULT_OVERLAP_BOUND,
) -> tuple[Disagreement, ...]:
    """Every pair both reviewers decided differently (see the module docstring), by query ID, then chunk ID.

    Raises:
        ValueError: both sides by one reviewer, a side with two reviewers or a pair twice, a bound outside [0, 1].
    """
    return _disagreements(_pairs(*reviewer_pair(a, b)), fixture, check_overlap_bound(overlap_bound))


def to_adjudicate(
    a: Sequence[LabelDecision],
    b: Sequence[LabelDecision],
    fixture: Fixture,
    overlap_bound: float = DEFAULT_OVERLAP_BOUND,
) -> tuple[Disagreement, ...]:
    """Every pair :func:`~evalkit.data.label_merge.merge_labels` needs an adjudicated decision for: the
    disagreements, the chunks only one reviewer decided, and the chunks the fixture answers a query with that a
    reviewer decided has no answer, by query ID, then chunk ID.

    Raises:
        ValueError: as :func:`disagreements`.
    """
    bound = check_overlap_bound(overlap_bound)
    left, right = reviewer_pair(a, b)
    names, languages = _names(a, b), _languages(fixture)
    one_sided = _one_sided(left, right, names, languages)
    answered = _answers_of_no_answer_queries(left, right, fixture, names, languages)
    found = (*_disagreements(_pairs(left, right), fixture, bound), *one_sided, *answered)
    return tuple(sorted(found, key=lambda d: pair_order((d.query_id, d.chunk_id))))


def answers_of_no_answer_queries(
    a: Sequence[LabelDecision], b: Sequence[LabelDecision], fixture: Fixture
) -> tuple[Disagreement, ...]:
    """The part of :func:`to_adjudicate` that is no disagreement of the reviewers': the chunks the fixture grades 1-3
    of a query a reviewer decided has no answer, which neither reviewer decided (see below)."""
    left, right = reviewer_pair(a, b)
    return _answers_of_no_answer_queries(left, right, fixture, _names(a, b), _languages(fixture))


def _answers_of_no_answer_queries(
    left: Indexed, right: Indexed, fixture: Fixture, names: tuple[str, str], languages: dict[str, Language]
) -> tuple[Disagreement, ...]:
    """The chunks the fixture grades 1-3 of a query a reviewer decided has no answer, which neither reviewer
    decided (a pool does not show a chunk already judged): the merge refuses the query until the adjudicator grades
    them (1-3 overrules the no-answer decisions, 0 keeps them). Both grades None: neither reviewer decided it."""
    no_answer = {query_id for query_id, chunk_id in (*left, *right) if chunk_id is None}
    decided = left.keys() | right.keys()
    return tuple(
        Disagreement(
            query_id=q.query_id,
            chunk_id=j.chunk_id,
            language=languages[q.query_id],
            grade_a=None,
            grade_b=None,
            spans_a=(),
            spans_b=(),
            reviewer_a=names[0],
            reviewer_b=names[1],
            span_f1_overlap=None,
        )
        for q in fixture.queries
        if q.query_id in no_answer
        for j in q.judgments
        if j.grade >= 1 and (q.query_id, j.chunk_id) not in decided
    )


def _span_means(pairs: list[tuple[Key, LabelDecision, LabelDecision]], texts: dict[str, str]) -> tuple[Statistic, ...]:
    relevant = [(key, x, y) for key, x, y in pairs if x.grade >= 1 and y.grade >= 1]
    if not relevant:
        missing = "no pair both reviewers judged relevant (grade 1-3): no spans to compare"
        return Statistic(value=None, reason=missing), Statistic(value=None, reason=missing)
    exact = [span_exact_f1(x.spans, y.spans) for _, x, y in relevant]
    overlap = [span_overlap_f1(texts[key[1] or ""], x.spans, y.spans) for key, x, y in relevant]
    return Statistic(value=float(np.mean(exact))), Statistic(value=float(np.mean(overlap)))


def _slice(pairs: list[tuple[Key, LabelDecision, LabelDecision]], fixture: Fixture, bound: float) -> SliceAgreement:
    x = np.asarray([one.grade for _, one, _ in pairs], dtype=np.int64)
    y = np.asarray([other.grade for _, _, other in pairs], dtype=np.int64)
    if len(pairs):
        raw = _single_pair(x, float(np.mean(x == y)))
    else:
        raw = Statistic(value=None, reason="no pairs: the two files decide no pair in common")
    exact, overlap = _span_means(pairs, {c.chunk_id: c.text for c in fixture.chunks})
    return SliceAgreement(
        pairs=len(pairs),
        raw_agreement=raw,
        krippendorff_alpha_ordinal=krippendorff_alpha_ordinal(x, y),
        cohen_kappa_quadratic=cohen_kappa_quadratic(x, y),
        span_f1_exact=exact,
        span_f1_overlap=overlap,
        confusion=tuple(tuple(int(v) for v in row) for row in _confusion(x, y)),
        disagreements=_disagreements(pairs, fixture, bound),
    )


def agreement(
    a: Sequence[LabelDecision],
    b: Sequence[LabelDecision],
    fixture: Fixture,
    overlap_bound: float = DEFAULT_OVERLAP_BOUND,
) -> Agreement:
    """Agreement of reviewer A's decisions `a` and reviewer B's `b` (each as :func:`~evalkit.data.labels.read_labels`
    returns them) over the pairs both decided, overall and per language of the fixture's queries (``en``, ``zh``).

    Raises:
        ValueError: both sides by one reviewer, a side with two reviewers or a pair twice, a bound outside [0, 1],
            or a query the fixture does not hold.
    """
    bound = check_overlap_bound(overlap_bound)
    left, right = reviewer_pair(a, b)
    pairs = _pairs(left, right)
    languages = _languages(fixture)
    unknown = sorted({key[0] for key in left.keys() | right.keys()} - languages.keys())
    if unknown:
        raise ValueError(f"the labels name queries the fixture does not hold: {', '.join(unknown[:5])}")
    overall = _slice(pairs, fixture, bound)
    held = set(languages.values())  # a language the fixture's queries lack has no slice, as everywhere in evalkit
    by_language = {
        lang: _slice([p for p in pairs if languages[p[0][0]] == lang], fixture, bound)
        for lang in LANGUAGES
        if lang in held
    }
    return Agreement(
        **{name: getattr(overall, name) for name in SliceAgreement.model_fields},
        by_language=by_language,
        one_sided=_one_sided(left, right, _names(a, b), languages),
    )
