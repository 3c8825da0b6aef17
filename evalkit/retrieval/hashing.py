"""Signed feature hashing of analyzed tokens: the kernel of the token-hash provider.

A token goes to bucket ``h mod d`` with sign ``+1`` when the top bit of ``h`` is set, else ``-1``, where ``h`` is the
64-bit big-endian BLAKE2b digest of its UTF-8 bytes; each distinct token of a text adds ``sign * (1 + ln count)``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain

import numpy as np
import numpy.typing as npt

from evalkit.data.schema import Matrix

__all__ = ["hashed_rows"]


@lru_cache(maxsize=1 << 18)
def _bucket(token: str, dimensions: int) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "big")
    return value % dimensions, (1.0 if (value >> 63) & 1 else -1.0)


_EMBED_BLOCK_ROWS = 4096
"""Texts hashed and normalized together by :class:`TokenHashProvider` (a memory bound, not a result knob)."""


def _hashed_counts(texts: Sequence[Sequence[str]], dimensions: int) -> npt.NDArray[np.float64]:
    """Each text's distinct tokens, in sorted order, add ``sign * (1 + ln count)`` into their buckets (float64).

    The (text, token) pairs are counted with ``np.unique`` over keys ordered by text, then token, and summed by
    ``np.bincount``, which adds in input order: each bucket receives its tokens' terms in sorted token order, as a
    loop over ``sorted(Counter(tokens))`` would. ``1 + ln count`` comes from :func:`math.log`.
    """
    terms = sorted({token for tokens in texts for token in tokens})
    if not terms:
        return np.zeros((len(texts), dimensions), dtype=np.float64)
    rank = {term: position for position, term in enumerate(terms)}
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    ranks = np.fromiter(map(rank.__getitem__, chain.from_iterable(texts)), dtype=np.int64, count=int(lengths.sum()))
    keys, counts = np.unique(np.repeat(np.arange(len(texts)) * len(terms), lengths) + ranks, return_counts=True)
    rows, columns = np.divmod(keys, len(terms))
    placed = np.array([_bucket(term, dimensions) for term in terms], dtype=np.float64)
    sublinear = np.array([0.0, *(1.0 + math.log(count) for count in range(1, int(counts.max()) + 1))])
    cells = rows * dimensions + placed[columns, 0].astype(np.int64)
    summed = np.bincount(cells, weights=placed[columns, 1] * sublinear[counts], minlength=len(texts) * dimensions)
    return np.asarray(summed, dtype=np.float64).reshape(len(texts), dimensions)


def hashed_rows(texts: Sequence[Sequence[str]], dimensions: int) -> Matrix:
    """Each token list's hashed row, L2-normalized to float32 (an all-zero row stays zero).

    Block by block, so a large corpus never holds a float64 copy of every row (rows are independent).
    """
    out = np.empty((len(texts), dimensions), dtype=np.float32)
    for start in range(0, len(texts), _EMBED_BLOCK_ROWS):
        counts = _hashed_counts(texts[start : start + _EMBED_BLOCK_ROWS], dimensions)
        norms = np.linalg.norm(counts, axis=1, keepdims=True)
        out[start : start + len(counts)] = np.divide(counts, norms, out=np.zeros_like(counts), where=norms > 0)
    return out
