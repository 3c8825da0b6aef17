"""Joining a block of run lines to the judgments of its queries, and ordering the block's ties, for
:mod:`evalkit.measures.run_order`.

Two joins (:data:`SORTED_SHARE` chooses): one sort of lines and judgments together by (query, document ID), or
64-bit hashes of the IDs (:func:`~evalkit.data.columns.string_hashes`). Either gives each line an identity (equal
for a repeated (query, document) pair), its grade and its qrels row; :func:`tie_order` then orders ties by document
ID, and :func:`repeats` marks repeats. Hashes of unequal IDs almost never clash, and every clash that could change
a result is caught: a judgment is found only when its ID and query equal the line's, and the caller checks the
IDs and queries of the lines it finds repeated (:func:`same_documents`); a block with a clash is joined again by
dictionary codes of the IDs, exactly. On the 10-million-line benchmark run, scoring map, recip_rank, ndcg, Rprec,
bpref and infAP (one thread, 2026-12-05) took 0.95-1.0 s with hashes against 1.16-1.41 s with codes, which build a
table of every distinct ID; the values and counts are the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.data.columns import BoolArray, IntArray, sort_pairs, string_hashes

__all__ = [
    "SORTED_SHARE",
    "Judged",
    "JudgedProbe",
    "Matched",
    "join_block",
    "judged_lines",
    "repeats",
    "same_documents",
    "tie_order",
]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Judged:
    """The judgments of a block's queries: each one's query row, document ID, grade and qrels row."""

    row: IntArray
    docs: pa.ChunkedArray
    grades: IntArray
    at: IntArray


@dataclass(frozen=True)
class Matched:
    """Per returned line: its identity (equal for two lines with the same query and document), its grade (0 when
    not judged) and its qrels row (-1: not judged); whether identities ascend in document-ID order within a query;
    and which lines a tie must be ordered for (None: every tie)."""

    identity: IntArray
    grade: IntArray
    qrels_row: IntArray
    ordered: bool
    needed: BoolArray | None = None
    hashed: bool = False
    """Identities made from hashes of the IDs: two lines of one identity may still name two documents, so the
    caller checks the IDs of the lines it finds repeated (:func:`same_documents`)."""


SORTED_SHARE: Final = 4
"""A block is joined by one sort of its lines and judgments by (query, document ID) when it has at least
1/SORTED_SHARE as many judgments as lines (the cutoff measures' few lines per query: the sort also gives the order of
ties), and by hashes otherwise (whole rankings: many more lines than judgments, and hashing an ID costs less than
comparing it in a sort). Chosen when the second join was by dictionary codes, which the hashes replaced: on the
10-million-line benchmark run (one thread, 2026-12-06) the sort took 0.77-0.84 s for nDCG@10, recall@10 and P@10
against 0.90-0.96 s by codes, and by codes recip_rank's whole rankings took 2.4-2.7 s against 3.2-3.6 s by the
sort."""


def join_block(row: IntArray, returned: pa.Array, judged: Judged, exact: bool = False) -> Matched:
    """Each returned line's identity, grade and qrels row (see :class:`Matched`), by one of two joins
    (:data:`SORTED_SHARE`); the second by hashes of the IDs, unless ``exact`` or they clash, then by codes."""
    count = len(row)
    if count == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Matched(empty, empty, empty, True)
    if len(judged.row) * SORTED_SHARE >= count:
        return _match_sorted(row, returned, judged)
    return (None if exact else _match_hashed(row, returned, judged)) or _match_codes(row, returned, judged)


def _match_sorted(row: IntArray, returned: pa.Array, judged: Judged) -> Matched:
    """One stable sort of the lines and the judgments together by (query row, document ID) puts a line next to the
    judgment of its document, if any, and next to its repeats: identities ascend in document-ID order."""
    count = len(row)
    rows = np.concatenate((row, judged.row))
    docs = pa.concat_arrays([returned.cast(judged.docs.type), *judged.docs.chunks])  # one array: takes are faster
    order, _, same = sort_pairs(rows, docs)
    new = np.ones(len(order), dtype=bool)
    new[1:] = ~same
    identity = np.empty(len(order), dtype=np.int64)
    identity[order] = np.cumsum(new) - 1
    width = int(identity.max()) + 1
    grade = np.zeros(width, dtype=np.int64)
    qrels_row = np.full(width, -1, dtype=np.int64)
    grade[identity[count:]] = judged.grades
    qrels_row[identity[count:]] = judged.at
    lines = identity[:count]
    return Matched(lines, grade[lines], qrels_row[lines], True)


def _match_codes(row: IntArray, returned: pa.Array, judged: Judged) -> Matched:
    """The block's document IDs and its queries' judged ones dictionary-encoded together, once (a hash table built
    in C); a judgment is found by its (query row, code) key among the lines', so no ID is compared as a string."""
    count = len(row)
    grade = np.zeros(count, dtype=np.int64)
    qrels_row = np.full(count, -1, dtype=np.int64)
    docs = pa.concat_arrays([returned.cast(judged.docs.type), *judged.docs.chunks])
    encoded = pc.dictionary_encode(docs)
    code = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    width = len(encoded.dictionary)
    identity: IntArray = row * width + code[:count]
    keys = judged.row * width + code[count:]  # unique: the qrels hold one judgment per (query, document)
    if len(keys):
        order = np.argsort(keys)
        keys = keys[order]
        named = np.zeros(width, dtype=bool)
        named[code[count:]] = True
        lines = np.flatnonzero(named[code[:count]])  # lines whose ID some query of the block judged: few
        at = np.minimum(np.searchsorted(keys, identity[lines]), len(keys) - 1)
        hit = keys[at] == identity[lines]
        source = order[at[hit]]
        grade[lines[hit]] = judged.grades[source]
        qrels_row[lines[hit]] = judged.at[source]
    return Matched(identity, grade, qrels_row, False)


_FILTER_BITS: Final = 1 << 20
"""Bits of the table that tells, by one look-up, the lines whose identity is surely no judgment's (128 KiB)."""


def _match_hashed(row: IntArray, returned: pa.Array, judged: Judged) -> Matched | None:
    """The join by 64-bit hashes of the IDs (:class:`JudgedProbe`): a line's identity mixes its query row into its
    ID's hash, and a judgment is found by its identity, its ID then compared as a string. None when two judgments
    of a query share an identity, or a line shares one with a judgment of another ID (the caller then joins by
    codes, exactly); repeats are checked by the caller (:attr:`Matched.hashed`)."""
    probe = JudgedProbe(judged, returned.type)
    if probe.clash:
        return None
    identity, lines, source, exact = probe.find(row, returned)
    if not exact.all():
        return None
    grade = np.zeros(len(row), dtype=np.int64)
    qrels_row = np.full(len(row), -1, dtype=np.int64)
    grade[lines] = judged.grades[source]
    qrels_row[lines] = judged.at[source]
    return Matched(identity, grade, qrels_row, False, hashed=True)


def _mixed(hashes: npt.NDArray[np.uint64], row: IntArray) -> IntArray:
    """One int64 identity of a (query row, ID hash) pair."""
    mixed = hashes ^ (row.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F))
    mixed *= np.uint64(0x165667B19E3779F9)
    mixed ^= mixed >> np.uint64(32)
    identity: IntArray = mixed.view(np.int64)
    return identity


def same_documents(
    row: IntArray, docs: pa.Array, permutation: IntArray, identity: IntArray, repeated: BoolArray
) -> bool:
    """Whether every position marked ``repeated`` names the same query row and document as the first position of
    its identity (positions are lines in the order ``permutation``, ``identity`` in that order too): what makes the
    repeats of a hashed identity exact."""
    keys = identity[repeated]
    first = np.flatnonzero(~repeated)
    firsts = first[np.argsort(identity[first], kind="stable")]
    at = np.minimum(np.searchsorted(identity[firsts], keys), len(firsts) - 1)
    if len(firsts) == 0 or (identity[firsts[at]] != keys).any():
        return False
    again, before = permutation[np.flatnonzero(repeated)], permutation[firsts[at]]
    if (row[again] != row[before]).any():
        return False
    return bool(pc.all(pc.equal(docs.take(pa.array(again)), docs.take(pa.array(before)))).as_py())


class JudgedProbe:
    """The judgments of a block made ready to tell, pass after pass, which lines they name: the 64-bit identities
    of their (query row, ID) pairs (:func:`_mixed`), sorted, and a bit table of them. A line is probed by its own
    identity (hashing an ID costs less than looking it up in a hash table of strings), and every identity found is
    checked against the judgment's ID and query, so a clash of hashes never makes a line judged; equal IDs hash
    equal, so no judged line is missed. When two judgments share an identity the probe looks IDs up in a hash
    table of the judged IDs instead (:func:`_judged_by_codes`), exactly."""

    def __init__(self, judged: Judged, id_type: pa.DataType) -> None:
        self.judged = judged
        self.docs = judged.docs.combine_chunks().cast(id_type)
        keys = _mixed(string_hashes(self.docs), judged.row)
        self.order = np.argsort(keys)  # equal keys are a clash: their order never matters
        self.keys = keys[self.order]
        self.clash = bool(len(self.keys) > 1 and (self.keys[1:] == self.keys[:-1]).any())
        self.seen = np.zeros(_FILTER_BITS, dtype=bool)
        self.seen[self.keys & (_FILTER_BITS - 1)] = True

    def find(self, row: IntArray, returned: pa.Array) -> tuple[IntArray, IntArray, IntArray, BoolArray]:
        """Each line's identity; the lines whose identity is a judgment's, that judgment's position, and whether
        its ID and query are the line's (False only where hashes clash)."""
        identity = _mixed(string_hashes(returned), row)
        lines = np.flatnonzero(self.seen[identity & (_FILTER_BITS - 1)])  # every judged line, and a few others
        at = np.minimum(np.searchsorted(self.keys, identity[lines]), max(len(self.keys) - 1, 0))
        hit = self.keys[at] == identity[lines] if len(self.keys) else np.zeros(len(lines), dtype=bool)
        lines, source = lines[hit], self.order[at[hit]]
        same = pc.equal(returned.take(pa.array(lines)), self.docs.take(pa.array(source)))
        exact = np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool) & (row[lines] == self.judged.row[source])
        return identity, lines, source, exact

    def lines(self, row: IntArray, returned: pa.Array | pa.ChunkedArray) -> BoolArray:
        """Per returned line (``row``: its query row), whether its query's judgments name its document."""
        if self.clash:
            return _judged_by_codes(row, returned, self.judged)
        keep = np.zeros(len(row), dtype=bool)
        if len(row) and len(self.keys):
            returned = returned.combine_chunks() if isinstance(returned, pa.ChunkedArray) else returned
            _, lines, _, exact = self.find(row, returned)
            keep[lines[exact]] = True
        return keep


def judged_lines(row: IntArray, returned: pa.Array | pa.ChunkedArray, judged: Judged) -> BoolArray:
    """Per returned line, whether its query's judgments name its document (one probe: :class:`JudgedProbe`)."""
    return JudgedProbe(judged, returned.type).lines(row, returned)


def _judged_by_codes(row: IntArray, returned: pa.Array | pa.ChunkedArray, judged: Judged) -> BoolArray:
    """:func:`judged_lines` by codes: each line's ID is looked up in a hash table of the block's judged IDs, then
    matched by (query row, code)."""
    keep = np.zeros(len(row), dtype=bool)
    if len(row) == 0 or len(judged.row) == 0:
        return keep
    encoded = pc.dictionary_encode(judged.docs.combine_chunks().cast(returned.type))
    width = len(encoded.dictionary)
    judged_keys = np.sort(judged.row * width + np.asarray(encoded.indices.to_numpy(zero_copy_only=False), np.int64))
    found = pc.index_in(returned, value_set=encoded.dictionary).fill_null(-1)
    code = np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.int64)
    named = np.flatnonzero(code >= 0)  # lines whose ID some query of the block has judged
    keys = row[named] * width + code[named]
    at = np.minimum(np.searchsorted(judged_keys, keys), len(judged_keys) - 1)
    keep[named[judged_keys[at] == keys]] = True
    return keep


def tie_order(row: IntArray, scores: FloatArray, docs: pa.Array, match: Matched, descending: bool) -> IntArray:
    """The permutation of lines (grouped by query, scores descending) that puts each run of equal scores in
    document-ID order (code-point order; descending for the trec_eval policy).

    When the match's identities are in document-ID order they are the sort key; otherwise, with ``needed`` (per
    line), only the ties holding a needed line are ordered by their IDs: a tie of unjudged lines gives the same
    ranks and grades in any order, so only ties that hold a judged line need their document IDs compared."""
    same = (row[1:] == row[:-1]) & (scores[1:] == scores[:-1])  # a line tied with the one before it
    permutation: IntArray = np.arange(len(row), dtype=np.int64)
    if not same.any():
        return permutation
    tied = np.zeros(len(row), dtype=bool)
    tied[1:] = same
    tied[:-1] |= same
    start = np.ones(len(row), dtype=bool)
    np.logical_not(same, out=start[1:])
    tie = np.cumsum(start) - 1  # the tie (or single line) each line belongs to
    if match.needed is not None:
        holds = np.zeros(int(tie[-1]) + 1, dtype=bool)
        holds[tie[match.needed]] = True  # the ties that hold a needed line
        tied &= holds[tie]
    inside = np.flatnonzero(tied)
    if len(inside) == 0:
        return permutation
    if match.ordered:  # one int64 key: tie, then document order within it
        width = int(match.identity.max()) + 1
        order = np.argsort(tie[inside] * width + match.identity[inside], kind="stable")
    else:
        order, _, _ = sort_pairs(tie[inside], docs.take(pa.array(inside)))  # by tie, then document ID ascending
    if descending:  # reverse each tie's lines
        ties = tie[inside][order]
        first = np.flatnonzero(np.concatenate(([True], ties[1:] != ties[:-1])))
        size = np.diff(np.append(first, len(order)))
        low = np.repeat(first, size)
        order = order[2 * low + np.repeat(size, size) - 1 - np.arange(len(order))]
    permutation[inside] = inside[order]
    return permutation


def repeats(keys: IntArray) -> BoolArray:
    """Positions whose key an earlier position already has: one sort says whether there are any, and only the
    positions of repeated keys go through a hash table."""
    repeated = np.zeros(len(keys), dtype=bool)
    ordered = np.sort(keys)
    twice = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(twice) == 0:
        return repeated
    values = np.unique(twice)
    at = np.minimum(np.searchsorted(values, keys), len(values) - 1)
    candidates = np.flatnonzero(values[at] == keys)
    repeated[candidates[pd.Series(keys[candidates]).duplicated(keep="first").to_numpy()]] = True
    return repeated
