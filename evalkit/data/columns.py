"""Columnar building blocks shared by runs and qrels: IDs encoded once, as sorted dictionaries and integer codes.

A run of ten million lines holds its query and document IDs as two pyarrow string arrays of unique values
(sorted, so that a code's order is the ID's code-point order, where that order is used) and one int32 code per line
for each; everything after reading is numpy arithmetic over those codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "BoolArray",
    "CodeArray",
    "Codes",
    "IntArray",
    "encode",
    "lookup",
    "position_ranges",
    "sort_pairs",
    "string_hashes",
    "take_positions",
    "value_runs",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
CodeArray = npt.NDArray[np.int32]
"""Codes into a dictionary of IDs, one per line: 32 bits, since a run of 100 million lines keeps one per line."""


@dataclass(frozen=True)
class Codes:
    """IDs as sorted unique ``values`` and one code per item (``values[codes[i]]`` is item i's ID)."""

    values: pa.StringArray
    codes: CodeArray


_COMBINE_BYTES = 1 << 28
"""Chunked ID columns smaller than this are joined before encoding (one hash pass, no unifying of dictionaries)."""


def encode(ids: pa.Array | pa.ChunkedArray, sort: bool = True) -> Codes:
    """Unique IDs and each item's code; nulls are not allowed (readers never make them).

    With ``sort`` the unique IDs are sorted, so that a code's order is the ID's code-point order; without, they are
    in order of first appearance (cheaper: no string sort)."""
    if isinstance(ids, pa.ChunkedArray):
        if not pa.types.is_dictionary(ids.type) and ids.nbytes < _COMBINE_BYTES:
            ids = ids.combine_chunks()
        else:
            if not pa.types.is_dictionary(ids.type):
                ids = pc.dictionary_encode(ids)  # block by block: no copy of the whole column of IDs first
            ids = ids.unify_dictionaries()
            ids = ids.combine_chunks() if ids.num_chunks != 1 else ids.chunk(0)
    if not pa.types.is_dictionary(ids.type):
        ids = pc.dictionary_encode(ids)
    dictionary = ids.dictionary.cast(pa.string())
    raw = ids.indices.to_numpy(zero_copy_only=False)
    used = np.zeros(len(dictionary), dtype=bool)
    used[raw] = True
    if not sort and used.all():
        return Codes(dictionary, raw.astype(np.int32, copy=False))
    order = pc.sort_indices(dictionary).to_numpy() if sort else np.arange(len(dictionary))
    if used.all():
        rank = np.empty(len(order), dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        return Codes(dictionary.take(pa.array(order)), rank[raw])
    # Dictionaries unified across blocks may hold values no item uses: keep only the used ones.
    kept = order[used[order]]
    renumber = np.full(len(order), -1, dtype=np.int32)
    renumber[kept] = np.arange(len(kept), dtype=np.int32)
    return Codes(dictionary.take(pa.array(kept)), renumber[raw])


RUNS_SHARE: Final = 4
""":func:`value_runs` hashes a column whose runs of equal values number more than 1/RUNS_SHARE of its items."""


def value_runs(column: pa.StringArray) -> tuple[pa.Array, CodeArray]:
    """Values and one position per item (``values[positions[i]]`` is item i's value), as a dictionary would give
    them, but found without hashing when equal values stand together (a run's query IDs, each query's lines in one
    group): one comparison of each item with the one before it cuts the column into runs, and each run's first
    value is kept. The values may repeat (a value in two runs); a column of more runs than 1/:data:`RUNS_SHARE` of
    its items is dictionary-encoded instead. On the 10-million-line benchmark run this took 0.03 s, where the
    parser's dictionary conversion of the query column cost 0.1-0.2 s (2026-12-05, one thread)."""
    count = len(column)
    if count == 0:
        return column, np.zeros(0, dtype=np.int32)
    changes = pc.indices_nonzero(pc.not_equal(column.slice(1), column.slice(0, count - 1))).to_numpy()
    if (len(changes) + 1) * RUNS_SHARE > count:
        encoded = pc.dictionary_encode(column)
        return encoded.dictionary, encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    starts = np.concatenate(([0], changes.astype(np.int64) + 1))
    lengths = np.diff(starts, append=count)
    positions: CodeArray = np.repeat(np.arange(len(starts), dtype=np.int32), lengths)  # ten times a cumsum's speed
    return column.take(pa.array(starts)), positions


def lookup(values: pa.Array, among: pa.Array) -> IntArray:
    """The position of each of ``values`` in ``among`` (unique), -1 where it is absent."""
    found = pc.index_in(values, value_set=among)
    positions: IntArray = np.asarray(found.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return positions


def sort_pairs(
    codes: IntArray | CodeArray, ids: pa.Array | pa.ChunkedArray
) -> tuple[IntArray, pa.Array | pa.ChunkedArray, BoolArray]:
    """The (code, ID) pairs in one stable sort, codes ascending, then IDs in code-point order: the order (positions
    into the pairs), the IDs in that order, and for each sorted pair after the first whether it equals the one
    before it. Equal pairs end up side by side without a hash table of IDs (cheaper than hashing short IDs)."""
    order = pc.sort_indices(
        pa.table({"code": codes, "id": ids}), sort_keys=[("code", "ascending"), ("id", "ascending")]
    )
    positions: IntArray = order.to_numpy().view(np.int64)  # positions fit in 63 bits: no copy
    ordered_codes, ordered_ids = codes[positions], ids.take(order)
    same: BoolArray = np.zeros(max(len(positions) - 1, 0), dtype=bool)
    if len(positions) > 1:
        same = (ordered_codes[1:] == ordered_codes[:-1]) & pc.equal(
            ordered_ids.slice(1), ordered_ids.slice(0, len(positions) - 1)
        ).to_numpy(zero_copy_only=False)
    return positions, ordered_ids, same


_MIX: Final = np.uint64(0x9E3779B97F4A7C15)
_TAIL: Final = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
"""The low ``n`` bytes of a word, for n = 0..8."""


def string_hashes(values: pa.Array) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each string, computed with numpy eight bytes at a time (equal strings hash equal, in any
    array and any call; unequal ones almost never do, so a caller that must be exact checks the strings of equal
    hashes). About half the time of a dictionary encoding of short IDs, which builds a table of every distinct one.

    A string's hash is mixed once per eight of its own bytes, never more: mixed once per eight bytes of the longest
    string in the array, ``"d"`` hashed apart from ``"dxxxxxxxx"`` differed from ``"d"`` hashed beside it, so a
    judged ID and the same ID in a run block holding a longer one did not meet (the position was taken unjudged)."""
    count = len(values)
    hashes = np.zeros(count, dtype=np.uint64)
    if count == 0:
        return hashes
    values = values.cast(pa.string())
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=count + 1, offset=values.offset * 4)
    low, high = int(offsets[0]), int(offsets[-1])
    padded = np.zeros(high - low + 8, dtype=np.uint8)  # eight bytes can be read from any start
    data = values.buffers()[2]
    if data is not None and high > low:
        padded[: high - low] = np.frombuffer(data, dtype=np.uint8, count=high - low, offset=low)
    words = np.ndarray((high - low + 1,), dtype=np.uint64, buffer=padded, strides=(1,))  # a word at every byte
    starts = (offsets[:-1] - low).astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    hashes += lengths.astype(np.uint64) * _MIX
    shortest, longest = int(lengths.min()), int(lengths.max())
    for at in range(0, longest, 8):
        word = words[np.minimum(starts + at, high - low)] & _TAIL[np.clip(lengths - at, 0, 8)]  # shorter: 0
        mixed = hashes ^ word
        mixed *= _MIX
        mixed ^= mixed >> np.uint64(29)
        hashes = mixed if at < shortest else np.where(lengths > at, mixed, hashes)  # only strings this long
    return hashes


def position_ranges(begin: IntArray, length: IntArray) -> IntArray:
    """The positions of the ranges ``[begin, begin + length)``, one after the other."""
    offsets = np.repeat(begin - np.concatenate(([0], np.cumsum(length)[:-1])), length)
    positions: IntArray = offsets + np.arange(int(length.sum()), dtype=np.int64)
    return positions


def take_positions(column: pa.ChunkedArray, positions: IntArray) -> pa.Array:
    """``column[positions]`` as one array. Every position in order (whole rankings read every line) is one copy of
    the chunks; other ascending positions (how a run written the usual way is read) are taken chunk by chunk, since
    a take across chunks may first join every chunk it takes from."""
    if len(positions) == len(column) and len(positions) and positions[0] == 0 and np.all(np.diff(positions) == 1):
        return column.combine_chunks()
    if len(positions) and np.all(positions[1:] >= positions[:-1]):
        bounds = np.cumsum([0, *(len(c) for c in column.chunks)])
        cuts = np.searchsorted(positions, bounds)
        parts = [
            chunk.take(pa.array(positions[a:b] - bounds[i]))
            for i, (chunk, a, b) in enumerate(zip(column.chunks, cuts[:-1], cuts[1:], strict=True))
            if b > a
        ]
        return pa.concat_arrays(parts) if parts else pa.array([], type=column.type)
    return column.take(pa.array(positions)).combine_chunks()
