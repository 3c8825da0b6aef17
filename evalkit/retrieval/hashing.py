"""Signed feature hashing of analyzed tokens: the kernel of the token-hash provider.

A token goes to bucket ``h mod d`` with sign ``+1`` when the top bit of ``h`` is set, else ``-1``, where ``h`` is the
64-bit big-endian BLAKE2b digest of its UTF-8 bytes; each distinct token of a text adds ``sign * (1 + ln count)``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
import numpy.typing as npt

from evalkit.data.schema import Matrix

__all__ = ["first_seen_codes", "hashed_rows"]


_REMEMBERED_DIGESTS = 1 << 18
"""Distinct tokens whose digests :func:`_digests` keeps (a memory bound: past it, new tokens are hashed each time)."""
_DIGESTS: dict[str, int] = {}
"""The digests remembered in this process, by token."""


def _digests(terms: Sequence[str]) -> npt.NDArray[np.uint64]:
    """Each term's 64-bit big-endian BLAKE2b digest (of its UTF-8 bytes), remembered per process."""
    memory = _DIGESTS
    found: list[int | None] = list(map(memory.get, terms))
    for position in [i for i, value in enumerate(found) if value is None]:
        term = terms[position]
        value = int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "big")
        found[position] = value
        if len(memory) < _REMEMBERED_DIGESTS:
            memory[term] = value
    return np.array(found, dtype=np.uint64)


def first_seen_codes(texts: Sequence[Sequence[str]], total: int) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Each token of the texts (``total`` in all) as the position of its first occurrence among the distinct tokens,
    and the distinct tokens in first-seen order (pandas hashes them in C, not a dictionary call per token)."""
    import pandas as pd  # here, not at import: only hashing and indexing need it

    codes, distinct = pd.factorize(np.fromiter(chain.from_iterable(texts), dtype=object, count=total))
    return codes.astype(np.int64, copy=False), distinct.tolist()


_EMBED_BLOCK_ROWS = 4096
"""Texts hashed and normalized together by :class:`TokenHashProvider` (a memory bound, not a result knob)."""


_DENSE_ROWS = 256
"""Rows summed and normalized together as dense float64 (2 MiB at 1,024 dimensions: the passes stay in cache)."""


@dataclass(frozen=True)
class _Terms:
    """A block's (text, bucket) terms ``sign * (1 + ln count)``, one per distinct token of a text, texts ascending;
    ``columns`` name each term's token in ``terms``."""

    rows: npt.NDArray[np.int64]
    buckets: npt.NDArray[np.int64]
    weights: npt.NDArray[np.float64]
    columns: npt.NDArray[np.int64]
    terms: list[str]


def _hashed_terms(texts: Sequence[Sequence[str]], dimensions: int) -> _Terms:
    """Each text's distinct tokens with their buckets and terms: each token gets a column in first-seen order
    (:func:`first_seen_codes`) and the (text, column) pairs are counted with ``np.unique``. ``1 + ln count`` comes
    from :func:`math.log`."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    columns, terms = first_seen_codes(texts, int(lengths.sum()))
    width = max(len(terms), 1)
    pairs = np.repeat(np.arange(len(texts), dtype=np.int64) * width, lengths) + columns
    keys, counts = np.unique(pairs, return_counts=True)
    rows, columns = np.divmod(keys, width)
    digests = _digests(terms)
    buckets = (digests % np.uint64(dimensions)).astype(np.int64)
    signs = np.where(digests >> np.uint64(63), 1.0, -1.0)
    top = int(counts.max()) if len(counts) else 0
    sublinear = np.array([0.0, *(1.0 + math.log(count) for count in range(1, top + 1))])
    return _Terms(rows, buckets[columns], signs[columns] * sublinear[counts], columns, terms)


def _summed(found: _Terms, first: int, last: int, dimensions: int) -> npt.NDArray[np.float64]:
    """Rows ``first`` to ``last`` of the block as float64: each bucket the sum of its terms in sorted token order.

    ``np.bincount`` adds in input order starting from 0.0. Two terms sum the same in either order, so only a cell
    that receives three or more terms of one text depends on the order: those cells are summed again here in sorted
    token order, as a loop over ``sorted(Counter(tokens))`` would.
    """
    low, high = np.searchsorted(found.rows, [first, last])
    cells = (found.rows[low:high] - first) * dimensions + found.buckets[low:high]
    weights = found.weights[low:high]
    size = (last - first) * dimensions
    summed = np.bincount(cells, weights=weights, minlength=size)
    crowded = np.flatnonzero(np.bincount(cells, minlength=size)[cells] > 2).tolist()
    if crowded:
        columns, terms = found.columns[low:high], found.terms
        totals: dict[int, float] = {}
        for pair in sorted(crowded, key=lambda i: (int(cells[i]), terms[columns[i]])):
            cell = int(cells[pair])
            totals[cell] = totals.get(cell, 0.0) + float(weights[pair])
        summed[list(totals)] = list(totals.values())
    return np.asarray(summed, dtype=np.float64).reshape(last - first, dimensions)


def hashed_rows(texts: Sequence[Sequence[str]], dimensions: int) -> Matrix:
    """Each token list's hashed row, L2-normalized to float32 (an all-zero row stays zero).

    Texts are counted a block at a time and their rows made :data:`_DENSE_ROWS` at a time, so a large corpus never
    holds a float64 copy of every row (rows are independent).
    """
    out = np.empty((len(texts), dimensions), dtype=np.float32)
    for start in range(0, len(texts), _EMBED_BLOCK_ROWS):
        block = texts[start : start + _EMBED_BLOCK_ROWS]
        found = _hashed_terms(block, dimensions)
        for first in range(0, len(block), _DENSE_ROWS):
            last = min(first + _DENSE_ROWS, len(block))
            counts = _summed(found, first, last, dimensions)
            # np.linalg.norm's sum (add.reduce over each row's squares) without its copy; a zero row divides by 1.
            norms = np.sqrt(np.add.reduce(counts * counts, axis=1, keepdims=True))
            norms[norms == 0.0] = 1.0
            out[start + first : start + last] = np.divide(counts, norms, out=counts)
    return out
