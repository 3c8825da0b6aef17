"""Per-query retrieval and context metrics, in the style of ranx and ir_measures.

Every metric is a pure function over plain data that returns one value for one query. Averaging and
slicing (per language, per split) are separate steps: see :func:`mean`. A measure's identity is the typed,
hashable :class:`Measure` (text form ``recall@5``, ``ndcg@10``, ``context_precision``), used as the report
key; strings are parsed only at the boundary with :meth:`Measure.parse`.

Conventions shared by the ranking metrics (:func:`recall_at_k`, :func:`reciprocal_rank_at_k`,
:func:`ndcg_at_k`):

- ``ranking`` is taken as given. Producers order it deterministically with :func:`rank_by_score` (score
  descending, then chunk id ascending), so ties never depend on sort stability.
- Duplicate chunk ids are removed *before* the cutoff (first occurrence kept, see :func:`dedupe_ranking`): a
  duplicate can neither count twice nor push another chunk below the cutoff.
- ``relevant`` maps chunk id to an integer grade. A grade ``<= 0`` means "judged not relevant": allowed,
  ignored.
- These measures are defined only on answerable queries: ``relevant`` without any grade ``>= 1`` raises
  ``ValueError`` (the caller filters out no-answer queries, which are scored by :func:`returned_any`).
- An empty ranking scores ``0.0``; a cutoff ``k < 1`` raises ``ValueError``.

Bump :data:`METRICS_VERSION` whenever a formula or an edge-case policy changes: it is hashed into the
evaluation definition so that reports computed under different definitions are never compared silently.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, Literal, get_args

import numpy as np
from pydantic import Field, model_validator

from evalkit.data.schema import StrictModel

__all__ = [
    "GAINS",
    "METRICS_VERSION",
    "NO_ANSWER_FPR",
    "STANDARD_MEASURES",
    "LatencySummary",
    "Measure",
    "MeasureName",
    "context_overlap",
    "context_precision",
    "context_recall",
    "dedupe_ranking",
    "latency_summary",
    "mean",
    "measure_sort_key",
    "merge_intervals",
    "ndcg_at_k",
    "rank_by_score",
    "recall_at_k",
    "reciprocal_rank_at_k",
    "returned_any",
]

METRICS_VERSION: Final = "2"
"""Version of the metric definitions; bump when any formula, edge-case policy or the standard set changes.

2: recall@1 joined the standard measures (the real-data benchmark reports it)."""


# ----------------------------------------------------------------------------------------------------
# Measure identity
# ----------------------------------------------------------------------------------------------------

MeasureName = Literal["recall", "mrr", "ndcg", "context_precision", "context_recall", "no_answer_fpr"]
"""Closed vocabulary of measure names; the declaration order is the canonical report order."""

_MEASURE_NAMES: Final[tuple[str, ...]] = get_args(MeasureName)
_CUTOFF_MEASURES: Final = frozenset({"recall", "mrr", "ndcg"})
_MEASURE_TEXT: Final = re.compile(r"(?P<name>[a-z_]+)(?:@(?P<cutoff>[1-9][0-9]*))?")


def _valid_measure_forms() -> str:
    return ", ".join(f"{n}@K" if n in _CUTOFF_MEASURES else n for n in _MEASURE_NAMES)


class Measure(StrictModel):
    """Typed identity of one measure: a name and, for ranking measures, a cutoff.

    Text form: ``"<name>@<cutoff>"`` for ``recall``, ``mrr`` and ``ndcg`` (cutoff required, ``>= 1``), and
    the bare name for the others (cutoff must be ``None``). Frozen, hence hashable and equal by value: use it
    as a dict key. Sort with ``key=measure_sort_key`` for the canonical report order.
    """

    name: MeasureName = Field(description="Measure name from the closed vocabulary MeasureName.")
    cutoff: int | None = Field(
        default=None,
        description="Rank cutoff k (>= 1): required for recall, mrr and ndcg, must be None for the others.",
    )

    @model_validator(mode="after")
    def _check_cutoff(self) -> Measure:
        if self.name in _CUTOFF_MEASURES:
            if self.cutoff is None or self.cutoff < 1:
                raise ValueError(f"measure {self.name!r} needs a cutoff >= 1, got {self.cutoff!r}")
        elif self.cutoff is not None:
            raise ValueError(f"measure {self.name!r} takes no cutoff, got {self.cutoff!r}")
        return self

    def __str__(self) -> str:
        return self.name if self.cutoff is None else f"{self.name}@{self.cutoff}"

    @classmethod
    def parse(cls, text: str) -> Measure:
        """Parse the text form produced by ``str()`` (exact inverse: no spaces, lower case, no leading zeros).

        Raises ``ValueError`` listing the valid forms when ``text`` is not one of them.
        """
        match = _MEASURE_TEXT.fullmatch(text)
        if match is None or match["name"] not in _MEASURE_NAMES:
            raise ValueError(f"invalid measure {text!r}; valid forms: {_valid_measure_forms()}")
        name, cutoff_text = match["name"], match["cutoff"]
        if (name in _CUTOFF_MEASURES) != (cutoff_text is not None):
            raise ValueError(f"malformed measure {text!r}; valid forms: {_valid_measure_forms()}")
        cutoff = None if cutoff_text is None else int(cutoff_text)
        return cls.model_validate({"name": name, "cutoff": cutoff})


def measure_sort_key(measure: Measure) -> tuple[int, int]:
    """Canonical report order: by position of the name in ``MeasureName``, then by cutoff ascending."""
    return (_MEASURE_NAMES.index(measure.name), measure.cutoff or 0)


STANDARD_MEASURES: Final[tuple[Measure, ...]] = (
    Measure(name="recall", cutoff=1),
    Measure(name="recall", cutoff=5),
    Measure(name="recall", cutoff=10),
    Measure(name="mrr", cutoff=10),
    Measure(name="ndcg", cutoff=10),
    Measure(name="context_precision"),
    Measure(name="context_recall"),
)
"""The measures computed on every answerable query."""

NO_ANSWER_FPR: Final = Measure(name="no_answer_fpr")
"""False-positive rate on no-answer queries: the mean of :func:`returned_any` over those queries."""


# ----------------------------------------------------------------------------------------------------
# Ranking helpers
# ----------------------------------------------------------------------------------------------------


def rank_by_score(scores: Mapping[str, float]) -> tuple[str, ...]:
    """Order chunk ids by score descending, ties broken by chunk id ascending (never by insertion order).

    Raises ``ValueError`` naming the chunk id if a score is NaN (NaN has no place in a total order).
    """
    for chunk_id, score in scores.items():
        if math.isnan(score):
            raise ValueError(f"score of chunk {chunk_id!r} is NaN")
    return tuple(sorted(scores, key=lambda chunk_id: (-scores[chunk_id], chunk_id)))


def dedupe_ranking(ranking: Sequence[str]) -> tuple[str, ...]:
    """Keep the first occurrence of each chunk id, preserving order."""
    return tuple(dict.fromkeys(ranking))


def _check_cutoff(k: int) -> None:
    if k < 1:
        raise ValueError(f"cutoff k must be >= 1, got {k}")


def _positive_grades(relevant: Mapping[str, int]) -> dict[str, int]:
    """The judged-relevant chunks (grade >= 1); raise if there are none (the query is not answerable)."""
    positive = {chunk_id: grade for chunk_id, grade in relevant.items() if grade >= 1}
    if not positive:
        raise ValueError(
            "relevant has no chunk with grade >= 1: ranking measures are defined only on answerable queries"
        )
    return positive


def _top_k(ranking: Sequence[str], k: int) -> tuple[str, ...]:
    _check_cutoff(k)
    return dedupe_ranking(ranking)[:k]


# ----------------------------------------------------------------------------------------------------
# Ranking metrics (one value per answerable query)
# ----------------------------------------------------------------------------------------------------


def recall_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Recall at cutoff k: ``|R ∩ dedupe(ranking)[:k]| / |R|`` where ``R = {c : relevant[c] >= 1}``.

    Reference: Manning, Raghavan & Schütze, *Introduction to Information Retrieval* (2008), §8.3; trec_eval
    ``recall_k``.

    Edge cases: ``R`` empty (``relevant`` empty or all grades ``<= 0``) -> ``ValueError``; ``k < 1`` ->
    ``ValueError``; empty ranking -> ``0.0``; duplicates removed before the cutoff; ranking taken as given
    (ties are resolved upstream by :func:`rank_by_score`).
    """
    positive = _positive_grades(relevant)
    top = _top_k(ranking, k)
    return sum(1 for chunk_id in top if chunk_id in positive) / len(positive)


def reciprocal_rank_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Reciprocal rank at cutoff k: ``1 / r`` for the 1-based rank ``r`` of the first chunk with grade >= 1 in
    ``dedupe(ranking)[:k]``, or ``0.0`` if there is none. Its mean over queries is MRR@k.

    Reference: Voorhees, "The TREC-8 Question Answering Track Report" (1999); trec_eval ``recip_rank`` on a
    run truncated to k.

    Edge cases: as :func:`recall_at_k` (no relevant -> ``ValueError``, ``k < 1`` -> ``ValueError``, empty
    ranking -> ``0.0``, duplicates removed before the cutoff, ranking taken as given).
    """
    positive = _positive_grades(relevant)
    for rank, chunk_id in enumerate(_top_k(ranking, k), start=1):
        if chunk_id in positive:
            return 1.0 / rank
    return 0.0


def _exponential_gain(grade: int) -> float:
    return 2.0**grade - 1.0


def _linear_gain(grade: int) -> float:
    return float(grade)


GAINS: Final[dict[str, Callable[[int], float]]] = {
    "exponential": _exponential_gain,
    "linear": _linear_gain,
}
"""nDCG gain functions by name: ``exponential`` is ``2**grade - 1``, ``linear`` is ``grade``."""


def _dcg(grades: Iterable[int], gain_fn: Callable[[int], float]) -> float:
    return math.fsum(gain_fn(grade) / math.log2(rank + 1) for rank, grade in enumerate(grades, start=1))


def ndcg_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int, gain: str = "exponential") -> float:
    """Normalised discounted cumulative gain at cutoff k.

    ``DCG@k = sum_{i=1..k} g(grade_i) / log2(i + 1)`` over ``dedupe(ranking)[:k]``, where ``grade_i`` is the
    grade of the chunk at rank i (0 if unjudged or ``<= 0``). ``IDCG@k`` is the DCG of the ideal ordering: all
    positive judged grades sorted descending, cut at k. ``nDCG@k = DCG@k / IDCG@k``.

    Gains (``GAINS``): ``"exponential"`` ``g = 2**grade - 1`` (Burges et al., "Learning to Rank using Gradient
    Descent", ICML 2005; the default, as in ranx's ``ndcg_burges``), ``"linear"`` ``g = grade`` (Järvelin &
    Kekäläinen, "Cumulated Gain-based Evaluation of IR Techniques", TOIS 2002; trec_eval ``ndcg_cut``).

    Edge cases: unknown ``gain`` -> ``ValueError`` listing the valid names; no grade ``>= 1`` ->
    ``ValueError``; ``k < 1`` -> ``ValueError``; empty ranking -> ``0.0``; duplicates removed before the
    cutoff; grades ``<= 0`` contribute no gain (never a negative one); ranking taken as given.
    """
    gain_fn = GAINS.get(gain)
    if gain_fn is None:
        raise ValueError(f"unknown gain {gain!r}; valid gains: {', '.join(sorted(GAINS))}")
    positive = _positive_grades(relevant)
    top = _top_k(ranking, k)
    dcg = _dcg((positive.get(chunk_id, 0) for chunk_id in top), gain_fn)
    idcg = _dcg(sorted(positive.values(), reverse=True)[:k], gain_fn)
    return dcg / idcg


# ----------------------------------------------------------------------------------------------------
# Context metrics (character overlap with gold evidence spans)
# ----------------------------------------------------------------------------------------------------


def merge_intervals(intervals: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Union of half-open intervals ``[start, end)``: sorted, disjoint, non-adjacent, non-empty.

    Overlapping, nested and adjacent intervals (``[0, 2)`` and ``[2, 4)``) merge; empty intervals
    (``start == end``) cover nothing and vanish. ``start > end`` -> ``ValueError``.
    """
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if start > end:
            raise ValueError(f"interval [{start}, {end}) has start > end")
        if start == end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def _chunk_length(chunk_lengths: Mapping[str, int], chunk_id: str) -> int:
    if chunk_id not in chunk_lengths:
        raise ValueError(f"chunk {chunk_id!r} has no entry in chunk_lengths")
    length = chunk_lengths[chunk_id]
    if length < 0:
        raise ValueError(f"chunk {chunk_id!r} has negative length {length}")
    return length


def _span_chars(chunk_lengths: Mapping[str, int], spans: Mapping[str, Sequence[tuple[int, int]]]) -> dict[str, int]:
    """Characters covered by the union of each chunk's spans, after checking every span lies in its chunk."""
    covered: dict[str, int] = {}
    for chunk_id, chunk_spans in spans.items():
        length = _chunk_length(chunk_lengths, chunk_id)
        for start, end in chunk_spans:
            if not 0 <= start <= end <= length:
                raise ValueError(f"span [{start}, {end}) of chunk {chunk_id!r} is outside [0, {length}]")
        covered[chunk_id] = sum(end - start for start, end in merge_intervals(chunk_spans))
    return covered


def context_overlap(
    returned: Sequence[str],
    chunk_lengths: Mapping[str, int],
    spans: Mapping[str, Sequence[tuple[int, int]]],
) -> tuple[int, int, int]:
    """Character overlap between the returned context and the gold evidence spans.

    Returns ``(found, returned_chars, total)``:

    - ``found``: gold-span characters inside the returned chunks,
      ``sum_{c in dedupe(returned)} |U(spans[c])|``;
    - ``returned_chars``: ``sum_{c in dedupe(returned)} chunk_lengths[c]`` (a returned chunk without spans
      adds its full length here and nothing to ``found``);
    - ``total``: ``sum_c |U(spans[c])|`` over all chunks with spans,

    where ``U`` is the union of a chunk's half-open ``[start, end)`` spans (:func:`merge_intervals`), so
    overlapping or nested spans count once. Spans are in chunk-local character offsets; if chunks overlap in
    the source document, text shared by two chunks is counted once per chunk.

    Edge cases: returned ids are deduplicated (first occurrence kept), so a duplicate never counts twice; a
    returned or spanned chunk id missing from ``chunk_lengths`` -> ``ValueError`` naming it; a span outside
    ``[0, chunk_length]`` or with ``start > end`` -> ``ValueError`` naming the chunk id; ``total == 0`` ->
    ``ValueError`` (context metrics need gold evidence); no returned chunks -> ``(0, 0, total)``.
    """
    covered = _span_chars(chunk_lengths, spans)
    total = sum(covered.values())
    if total == 0:
        raise ValueError("gold spans cover no characters: context metrics need at least one non-empty span")
    unique = dedupe_ranking(returned)
    returned_chars = sum(_chunk_length(chunk_lengths, chunk_id) for chunk_id in unique)
    found = sum(covered.get(chunk_id, 0) for chunk_id in unique)
    return found, returned_chars, total


def context_precision(
    returned: Sequence[str],
    chunk_lengths: Mapping[str, int],
    spans: Mapping[str, Sequence[tuple[int, int]]],
) -> float:
    """Character-level context precision: ``found / returned_chars`` (see :func:`context_overlap`).

    Reference: the token-wise precision of Chroma's "Evaluating Chunking Strategies for Retrieval" (2024),
    here over characters, which suits mixed zh/en text without a tokenizer.

    Edge cases: as :func:`context_overlap`; no returned chunks, or returned chunks of zero total length ->
    ``0.0``.
    """
    found, returned_chars, _ = context_overlap(returned, chunk_lengths, spans)
    return found / returned_chars if returned_chars else 0.0


def context_recall(
    returned: Sequence[str],
    chunk_lengths: Mapping[str, int],
    spans: Mapping[str, Sequence[tuple[int, int]]],
) -> float:
    """Character-level context recall: ``found / total`` (see :func:`context_overlap`).

    Reference: the token-wise recall of Chroma's "Evaluating Chunking Strategies for Retrieval" (2024), here
    over characters.

    Edge cases: as :func:`context_overlap` (``total == 0`` -> ``ValueError``); no returned chunks -> ``0.0``.
    """
    found, _, total = context_overlap(returned, chunk_lengths, spans)
    return found / total


# ----------------------------------------------------------------------------------------------------
# No-answer queries, aggregation, latency
# ----------------------------------------------------------------------------------------------------


def returned_any(ranking: Sequence[str]) -> float:
    """Per-query term of ``no_answer_fpr``: ``1.0`` if a no-answer query returned any chunk, else ``0.0``.

    The mean of this value over the no-answer queries is the false-positive rate of the answer/abstain
    decision.
    """
    return 1.0 if len(ranking) > 0 else 0.0


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean ``sum(values) / len(values)``, summed exactly with ``math.fsum``.

    Edge case: no values -> ``ValueError("no queries")``: a mean over no query is undefined, and NaN would not
    survive a JSON report.
    """
    if len(values) == 0:
        raise ValueError("no queries")
    return math.fsum(values) / len(values)


class LatencySummary(StrictModel):
    """Summary of per-query latencies in milliseconds."""

    count: int = Field(description="Number of samples.")
    min_ms: float = Field(description="Smallest sample, ms.")
    median_ms: float = Field(description="Median (50th percentile, linear interpolation), ms.")
    p95_ms: float = Field(description="95th percentile by numpy.percentile(method='linear'), ms.")
    max_ms: float = Field(description="Largest sample, ms.")
    mean_ms: float = Field(description="Arithmetic mean (math.fsum), ms.")


def latency_summary(samples_ms: Sequence[float]) -> LatencySummary:
    """Count, min, median, p95, max and mean of latency samples in milliseconds.

    Percentiles use ``numpy.percentile(..., method="linear")`` (Hyndman & Fan type 7, numpy's default): the
    value at fractional position ``(n - 1) * q / 100`` of the sorted samples, linearly interpolated.

    Edge cases: no samples -> ``ValueError``; a negative or non-finite sample -> ``ValueError``.
    """
    if len(samples_ms) == 0:
        raise ValueError("no latency samples")
    values = np.asarray(samples_ms, dtype=np.float64)
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError("latency samples must be finite and >= 0 ms")
    median, p95 = np.percentile(values, [50.0, 95.0], method="linear")
    return LatencySummary(
        count=len(values),
        min_ms=float(values.min()),
        median_ms=float(median),
        p95_ms=float(p95),
        max_ms=float(values.max()),
        mean_ms=math.fsum(samples_ms) / len(samples_ms),
    )
