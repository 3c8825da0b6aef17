"""Two reviewers' label files, and an adjudicator's, merged into a new version of the fixture.

A pair (query, chunk) both reviewers decided is **agreed** when :func:`decisions_agree` holds: the same grade and,
for grade 1-3, spans that are equal or whose token-level F1 (:func:`span_overlap_f1`) is at least the overlap bound
(:data:`DEFAULT_OVERLAP_BOUND`). Anything else is a **disagreement**: grades that differ, or spans below the bound.
:mod:`evalkit.measures.agreement` uses the same definition, so the disagreements it lists are exactly the pairs
:func:`merge_labels` needs an adjudicated decision for.

:func:`merge_labels` takes, per pair:

- the adjudicator's decision, whenever there is one (it wins over both reviewers);
- else an agreed pair's grade, with the union of both reviewers' spans (equal spans stay as they are; spans that
  differ within the bound are united, so the merge does not depend on which file is reviewer A, and no character
  either reviewer marked as answer is lost);
- else nothing: a disagreement, or a chunk only one reviewer decided, is refused, every one listed.

A no-answer decision (``chunk_id`` null) that only one reviewer made needs no adjudication: the merge keeps it unless
a chunk of that query is merged with grade 1-3, which can only come from the adjudicator (a reviewer's own file may
not hold both, see :func:`~evalkit.data.labels.read_labels`); then the adjudicator has overruled it, and it is
dropped. So is a no-answer decision both reviewers made, when the adjudicator grades a chunk of its query 1-3 (a
chunk the fixture already judged relevant, say, which the reviewers' pool did not show them). The adjudicator is a
third person: a file of either reviewer's is refused as the adjudicated labels.

The merged decisions replace, pair by pair, the fixture's judgments of the labelled queries: the judgment of a
decided chunk is replaced in place, a newly judged chunk is appended (in the fixture's chunk order), and a judgment
no decision names is kept (a pool holds only unjudged pairs, so its labels add to the judgments, never drop them). A
no-answer decision (``chunk_id`` null) adds no judgment; a query merged as no-answer while one of its chunks is graded
1-3 is refused. The result carries the new ``fixture_version`` and is validated by the strict fixture schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from evalkit.data.fixture import Fixture, parse_fixture
from evalkit.data.labels import LabelDecision, same_person

__all__ = [
    "DEFAULT_OVERLAP_BOUND",
    "LabelMergeError",
    "check_overlap_bound",
    "decisions_agree",
    "merge_labels",
    "overruled_no_answers",
    "pair_order",
    "reviewer_pair",
    "span_exact_f1",
    "span_overlap_f1",
    "span_tokens",
]

DEFAULT_OVERLAP_BOUND = 0.5
"""Two reviewers' spans of one pair agree when their token-level F1 (:func:`span_overlap_f1`) is at least this. At
0.5, a span nested in the other may be as short as a third of it: ``"30 days"`` in ``"for 30 days"`` gives 0.8,
in ``"stay in the trash for 30 days"`` exactly 0.5, in ``"Deleted notes stay in the trash for 30 days"`` 0.4."""

Key = tuple[str, str | None]
"""A pair decided: ``(query_id, chunk_id)``, chunk None for a no-answer decision."""

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_TOKEN = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])[^\W_])+")
"""A token: one Chinese character, or a run of other letters and digits (a word); punctuation and space are none."""
_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
"""The rule of :data:`evalkit.data.schema.SemanticVersion`, checked first for a message that names the option."""


class LabelMergeError(ValueError):
    """Label files that cannot be merged; ``problems`` lists every pair left undecided or in contradiction."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        listing = "\n".join(f"  - {p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(f"cannot merge the labels: {count} problem(s), each needs an adjudicated decision\n{listing}")


def pair_order(key: Key) -> tuple[str, bool, str]:
    """Sort key of a pair: by query ID, the no-answer decision first, then by chunk ID."""
    return (key[0], key[1] is not None, key[1] or "")


def check_overlap_bound(bound: float) -> float:
    """`bound` when it is a finite number in [0, 1]; else ``ValueError``."""
    if not isinstance(bound, (int, float)) or isinstance(bound, bool) or not 0.0 <= float(bound) <= 1.0:
        raise ValueError(f"the overlap bound must be a number in [0, 1], got {bound!r}")
    return float(bound)


def span_tokens(text: str) -> tuple[tuple[int, int], ...]:
    """The ``[start, end)`` offsets of the tokens of `text`, as the CMRC 2018 scorer segments mixed text: each
    Chinese character is a token and every other run of letters and digits a word (``"导出 PDF 文件"`` has the tokens
    ``导 出 PDF 文 件``); punctuation and whitespace are no tokens (the scorer drops punctuation)."""
    return tuple(m.span() for m in _TOKEN.finditer(text))


@lru_cache(maxsize=1024)
def _token_bounds(text: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The starts and the ends of the tokens of `text` (:func:`span_tokens`), made once per chunk text: a chunk is
    in many pairs (on the CMRC 2018 trial set's 12,622 pooled pairs, 55 a chunk), and tokenizing its text for each
    pair was most of ``evalkit labels agree`` (12 of 15 s)."""
    tokens = span_tokens(text)
    starts = np.fromiter((t[0] for t in tokens), dtype=np.int64, count=len(tokens))
    ends = np.fromiter((t[1] for t in tokens), dtype=np.int64, count=len(tokens))
    return starts, ends


def _covered(text: str, spans: Iterable[Sequence[int]]) -> set[int]:
    """Indices of the tokens of `text` that share at least one character with a span (two binary searches a
    span)."""
    starts, ends = _token_bounds(text)
    if not len(starts):
        return set()
    covered: set[int] = set()
    for start, end in spans:
        first = int(np.searchsorted(ends, start, side="right"))  # tokens ending at or before the span start
        last = int(np.searchsorted(starts, end, side="left"))  # tokens starting before the span end
        covered.update(range(first, last))
    return covered


def span_exact_f1(spans_a: Iterable[Sequence[int]], spans_b: Iterable[Sequence[int]]) -> float:
    """Span-level F1 of exact matches: ``2 |A & B| / (|A| + |B|)`` over the two sets of ``(start, end)`` spans; 1.0
    exactly when the sets are equal (two empty sets included)."""
    a = {(int(s[0]), int(s[1])) for s in spans_a}
    b = {(int(s[0]), int(s[1])) for s in spans_b}
    return 1.0 if not a and not b else 2 * len(a & b) / (len(a) + len(b))


def span_overlap_f1(text: str, spans_a: Iterable[Sequence[int]], spans_b: Iterable[Sequence[int]]) -> float:
    """Token-level F1 of two span sets over one text: ``2 |T(A) & T(B)| / (|T(A)| + |T(B)|)``, where ``T(S)`` is
    the set of tokens of `text` (:func:`span_tokens`) that share a character with a span of ``S``.

    Tokens are counted by position, since both span sets index the same text (the CMRC 2018 scorer, which has only
    strings, takes their longest common run of tokens; for two spans of one text that is the run they share). A
    token cut by a span counts as covered, so ``"tras"`` and ``"trash"`` agree fully here (and not exactly).
    Edge cases: when neither set covers a token (spans of punctuation or space only) the F1 is 1.0 for equal sets,
    else 0.0; when one set covers none, 0.0.
    """
    a, b = list(spans_a), list(spans_b)
    covered_a, covered_b = _covered(text, a), _covered(text, b)
    if not covered_a and not covered_b:
        return span_exact_f1(a, b) if span_exact_f1(a, b) == 1.0 else 0.0
    return 2 * len(covered_a & covered_b) / (len(covered_a) + len(covered_b))


def decisions_agree(a: LabelDecision, b: LabelDecision, text: str, bound: float = DEFAULT_OVERLAP_BOUND) -> bool:
    """True when two decisions on one pair agree: the same grade and, for grade 1-3, equal spans or spans whose
    :func:`span_overlap_f1` over the chunk's `text` is at least `bound`."""
    if a.grade != b.grade:
        return False
    if a.grade == 0 or a.spans == b.spans:
        return True
    return span_overlap_f1(text, a.spans, b.spans) >= bound


def _union(spans: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The union of half-open spans: sorted, disjoint; overlapping or touching spans become one."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def _index(decisions: Sequence[LabelDecision], side: str) -> dict[Key, LabelDecision]:
    """Decisions by pair; ``ValueError`` for a pair decided twice or two reviewers on one side."""
    by_key: dict[Key, LabelDecision] = {}
    for decision in decisions:
        if decision.key in by_key:
            raise ValueError(f"the {side} labels decide query {decision.query_id!r}, chunk {decision.chunk_id!r} twice")
        by_key[decision.key] = decision
    reviewers = sorted({d.reviewer for d in decisions})
    if len(reviewers) > 1:
        raise ValueError(f"the {side} labels are by {len(reviewers)} reviewers ({', '.join(reviewers[:3])}): one only")
    return by_key


def reviewer_pair(a: Sequence[LabelDecision], b: Sequence[LabelDecision]) -> tuple[dict[Key, LabelDecision], ...]:
    """Both sides indexed by pair (see :func:`_index`); ``ValueError`` when both are by the same reviewer."""
    left, right = _index(a, "first"), _index(b, "second")
    if a and b and same_person(a[0].reviewer, b[0].reviewer):
        named = repr(a[0].reviewer) if a[0].reviewer == b[0].reviewer else f"{a[0].reviewer!r} ({b[0].reviewer!r})"
        raise ValueError(f"both label files are by reviewer {named}: agreement needs two reviewers")
    return left, right


def _describe(key: Key, a: LabelDecision | None, b: LabelDecision | None, text: str, bound: float) -> str:
    pair = f"query {key[0]!r}, " + ("no-answer decision" if key[1] is None else f"chunk {key[1]!r}")
    if a is None or b is None:
        only = [d for d in (a, b) if d is not None]
        who = f"{only[0].reviewer!r} (grade {only[0].grade})" if only else "no reviewer"
        return f"{pair}: only {who} decided it"
    if a.grade != b.grade:
        return f"{pair}: grade {a.grade} by {a.reviewer!r}, {b.grade} by {b.reviewer!r}"
    spans = f"spans {[list(x) for x in a.spans]} by {a.reviewer!r}, {[list(x) for x in b.spans]} by {b.reviewer!r}"
    overlap = span_overlap_f1(text, a.spans, b.spans)
    return f"{pair}: grade {a.grade} from both, {spans} (span overlap F1 {overlap:.2f}, below the bound {bound:g})"


def _merged(
    a: dict[Key, LabelDecision],
    b: dict[Key, LabelDecision],
    adjudicated: dict[Key, LabelDecision],
    texts: dict[str, str],
    bound: float,
) -> tuple[dict[Key, tuple[int, tuple[tuple[int, int], ...]]], list[str]]:
    """The merged (grade, spans) of every pair, and the description of every pair left undecided."""
    merged: dict[Key, tuple[int, tuple[tuple[int, int], ...]]] = {}
    undecided: list[str] = []
    overruled = overruled_no_answers(a, b, adjudicated)
    for key in sorted(a.keys() | b.keys() | adjudicated.keys(), key=pair_order):
        one, other = a.get(key), b.get(key)
        if key in adjudicated:
            merged[key] = (adjudicated[key].grade, adjudicated[key].spans)
        elif key in overruled:  # a no-answer decision of a query the adjudicator answered
            continue
        elif one is not None and other is not None and decisions_agree(one, other, texts.get(key[1] or "", ""), bound):
            merged[key] = (one.grade, _union((*one.spans, *other.spans)))
        elif key[1] is None:  # one reviewer's no-answer decision, not overruled: kept
            merged[key] = (0, ())
        else:
            undecided.append(_describe(key, one, other, texts.get(key[1] or "", ""), bound))
    return merged, undecided


def overruled_no_answers(
    a: dict[Key, LabelDecision],
    b: dict[Key, LabelDecision],
    adjudicated: dict[Key, LabelDecision],
) -> set[Key]:
    """The no-answer decisions the merge drops: those of the reviewers, one's or both, that the adjudicator did not
    decide, of queries where the adjudicator graded a chunk 1-3 (a no-answer decision is grade 0 always, so
    answering the query is how an adjudicator overrules it, even one both reviewers made: say the query's answer is
    a chunk the fixture already judged, which a pool does not show again)."""
    answered = {q for (q, chunk), d in adjudicated.items() if chunk is not None and d.grade >= 1}
    return {key for key in a.keys() | b.keys() if key[1] is None and key[0] in answered and key not in adjudicated}


def _query_judgments(
    query: dict[str, Any],
    decided: dict[str, tuple[int, tuple[tuple[int, int], ...]]],
    texts: dict[str, str],
    chunk_order: list[str],
) -> list[dict[str, Any]]:
    """The query's judgments (raw JSON) with the decided chunks replaced in place and the new ones appended."""

    def judgment(chunk_id: str) -> dict[str, Any]:
        grade, spans = decided[chunk_id]
        text = texts[chunk_id]
        return {"chunk_id": chunk_id, "grade": grade, "spans": [{"start": s, "text": text[s:e]} for s, e in spans]}

    kept = [judgment(j["chunk_id"]) if j["chunk_id"] in decided else j for j in query["judgments"]]
    known = {j["chunk_id"] for j in kept}
    return kept + [judgment(c) for c in chunk_order if c in decided and c not in known]


def merge_labels(
    fixture: Fixture,
    a: Sequence[LabelDecision],
    b: Sequence[LabelDecision],
    adjudicated: Sequence[LabelDecision] | None,
    version: str,
    overlap_bound: float = DEFAULT_OVERLAP_BOUND,
) -> Fixture:
    """A new version of `fixture` with the merged decisions of reviewers `a` and `b` (see the module docstring).

    Raises:
        ValueError: `version` is not ``X.Y.Z`` or is the fixture's own; both files are by one reviewer; a side
            decides a pair twice or holds two reviewers; the adjudicated labels are by one of the two reviewers;
            the bound is not in [0, 1].
        LabelMergeError: listing every pair left undecided (a disagreement without an adjudicated decision, or a
            chunk only one reviewer decided), every query merged as no-answer that has a chunk graded 1-3, and,
            when the merged labels would answer every no-answer query of a language, each of those queries.
        FixtureError: the merged fixture breaks the schema (e.g. a language left without an answerable query).
    """
    if not isinstance(version, str) or _VERSION.fullmatch(version) is None:
        raise ValueError(f"the new version must be MAJOR.MINOR.PATCH in ASCII digits, got {version!r}")
    if version == fixture.fixture_version:
        raise ValueError(f"the new version {version} is the fixture's own: give a new one")
    bound = check_overlap_bound(overlap_bound)
    left, right = reviewer_pair(a, b)
    reviewers = {d.reviewer for d in (*a[:1], *b[:1])}
    third = adjudicated[0].reviewer if adjudicated else None
    if third is not None and any(same_person(third, r) for r in reviewers):
        raise ValueError(
            f"the adjudicated labels are by {third!r}, who labelled one of the two files: the "
            "adjudicator is a third person"
        )
    texts = {c.chunk_id: c.text for c in fixture.chunks}
    merged, problems = _merged(left, right, _index(adjudicated or (), "adjudicated"), texts, bound)
    data = fixture.model_dump(mode="json")
    chunk_order = [c.chunk_id for c in fixture.chunks]
    by_query: dict[str, dict[str, tuple[int, tuple[tuple[int, int], ...]]]] = {}
    for (query_id, chunk_id), value in merged.items():
        if chunk_id is not None:
            by_query.setdefault(query_id, {})[chunk_id] = value
    for query in data["queries"]:
        decided = by_query.get(query["query_id"], {})
        if decided:
            query["judgments"] = _query_judgments(query, decided, texts, chunk_order)
        if (query["query_id"], None) in merged:
            problems.extend(
                f"query {query['query_id']!r}: merged as no answer (chunk_id null), yet chunk {j['chunk_id']!r} "
                f"has grade {j['grade']}: the adjudicator grades that chunk 1-3 (which overrules the no-answer "
                "decisions) or 0"
                for j in query["judgments"]
                if j["grade"] >= 1
            )
    problems += _answered_no_answer(fixture, data["queries"])
    if problems:
        raise LabelMergeError(problems)
    data["fixture_version"] = version
    return parse_fixture(json.dumps(data, ensure_ascii=False), f"the merged fixture {fixture.fixture_id} {version}")


def _answered_no_answer(fixture: Fixture, merged_queries: list[dict[str, Any]]) -> list[str]:
    """For a language whose no-answer queries the merged labels all answered (a fixture needs one per language, see
    :mod:`evalkit.data.fixture`), each of them with the relevant chunks that answered it: which decisions did it."""
    answered = {q["query_id"]: [j for j in q["judgments"] if j["grade"] >= 1] for q in merged_queries}
    problems = []
    for language in sorted({q.language for q in fixture.queries}):
        before = [q.query_id for q in fixture.queries if q.language == language and not q.answerable]
        if before and all(answered[query_id] for query_id in before):
            problems += [
                f"query {query_id!r} ({language}): a no-answer query, now answered by {_chunks(answered[query_id])}; "
                f"every no-answer query in {language} would be answered, and a fixture needs one per language"
                for query_id in before
            ]
    return problems


def _chunks(judgments: list[dict[str, Any]], shown: int = 3) -> str:
    named = ", ".join(f"chunk {j['chunk_id']!r} grade {j['grade']}" for j in judgments[:shown])
    return named + (f" and {len(judgments) - shown} more" if len(judgments) > shown else "")
