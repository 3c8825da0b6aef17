"""Character overlap between a returned context and gold answer spans, which the context measures read.

Spans are half-open ``[start, end)`` character offsets within their chunk. A chunk's spans are unioned
(:func:`merge_intervals`), so overlapping or nested spans count once; if chunks overlap in the source document, text
shared by two chunks is counted once per chunk. :func:`context_overlap` works on one query's plain data (the reference
functions); :func:`span_columns` on the columns of a :class:`~evalkit.measures.ranked.Ranked` (the kernels).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from evalkit.measures.ranked import Ranked, dedupe_ranking

__all__ = ["context_overlap", "merge_intervals", "span_columns"]

FloatArray = npt.NDArray[np.float64]


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

    - ``found``: gold-span characters inside the returned chunks, ``sum_{c in dedupe(returned)} |U(spans[c])|``;
    - ``returned_chars``: ``sum_{c in dedupe(returned)} chunk_lengths[c]`` (a returned chunk without spans adds its
      full length here and nothing to ``found``);
    - ``total``: ``sum_c |U(spans[c])|`` over all chunks with spans,

    where ``U`` is the union of a chunk's spans (:func:`merge_intervals`).

    Edge cases: returned IDs are deduplicated (first occurrence kept), so a duplicate never counts twice; a returned
    or spanned chunk ID missing from ``chunk_lengths`` -> ``ValueError`` naming it; a span outside
    ``[0, chunk_length]`` or with ``start > end`` -> ``ValueError`` naming the chunk ID; ``total == 0`` ->
    ``ValueError`` (context measures need gold evidence); no returned chunks -> ``(0, 0, total)``.
    """
    covered = _span_chars(chunk_lengths, spans)
    total = sum(covered.values())
    if total == 0:
        raise ValueError("gold spans cover no characters: context metrics need at least one non-empty span")
    unique = dedupe_ranking(returned)
    returned_chars = sum(_chunk_length(chunk_lengths, chunk_id) for chunk_id in unique)
    found = sum(covered.get(chunk_id, 0) for chunk_id in unique)
    return found, returned_chars, total


def span_columns(ranked: Ranked) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int64]]:
    """Per query of ``ranked``: gold-span characters in its context, characters of its context, and all its gold-span
    characters (:func:`context_overlap`'s three numbers). ``ValueError`` when the rankings carry no spans, or an
    answerable query's spans cover no character."""
    if ranked.span_chars is None or ranked.lengths is None or ranked.total_span_chars is None:
        raise ValueError("context measures need gold spans: score against a fixture with answer spans")
    if np.any(ranked.total_span_chars[ranked.relevant() > 0] == 0):
        raise ValueError("gold spans cover no characters: context metrics need at least one non-empty span")
    found = np.asarray(np.bincount(ranked.row, weights=ranked.span_chars, minlength=ranked.n), dtype=np.float64)
    returned = np.asarray(np.bincount(ranked.row, weights=ranked.lengths, minlength=ranked.n), dtype=np.float64)
    return found, returned, ranked.total_span_chars
