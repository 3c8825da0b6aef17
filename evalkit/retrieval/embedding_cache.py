"""Embeddings cached on disk, keyed by corpus hash and provider fingerprint, so a rerun does not embed again.

Layout: ``<directory>/<first 32 hex digits of the provider fingerprint>/<SHA-256 of the texts>.npy``, where the
texts hash is the SHA-256 of the canonical JSON of the list of texts embedded together (the "corpus hash" of that
batch). Files are plain ``.npy`` arrays written atomically: the float32 matrix itself, or, when fewer than a third
of its values have a bit set (token hashing's rows: about 50 of 1,024), its nonzero values with their row-major
positions (a 1-D array of :data:`NONZEROS`, a seventh of the bytes), from which the same matrix is made again,
bit for bit. They are read with ``allow_pickle=False`` and used only when their shape, dtype, positions and values
check out, so a truncated, corrupted or foreign file is recomputed and rewritten, never trusted. The cache writes
only inside its directory and refuses a provider subdirectory that is a symlink. Texts are hashed, not stored; the
provider's definition is hashed, not stored.
"""

from __future__ import annotations

import io
import os
import stat
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from evalkit.common.hashing import sha256_of
from evalkit.common.output import write_atomic
from evalkit.data.schema import Matrix
from evalkit.retrieval.embeddings import (
    AnalyzedTextProvider,
    ConceptProvider,
    EmbeddingProvider,
    WrappedProvider,
    fingerprint,
)

__all__ = ["CachedProvider", "EmbeddingCache"]

_SHARD_HEX = 32


def _real_directory(path: Path) -> bool:
    """Whether `path` exists as a real directory; False when missing; ValueError for a symlink or a non-directory."""
    try:
        status = path.lstat()
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(status.st_mode) or not stat.S_ISDIR(status.st_mode):
        raise ValueError(f"embedding cache entry {str(path)!r} is a symlink or not a directory; refusing to use it")
    return True


NONZEROS = np.dtype([("position", "<i8"), ("value", "<f4")])
"""An entry of a mostly-zero matrix as cached: a value with a bit set and its position in the row-major matrix."""


def _packed(matrix: Matrix) -> npt.NDArray[Any]:
    """What is cached for a matrix: its nonzero values (-0.0 among them) when fewer than a third of them have a bit
    set, in position order; else the matrix."""
    flat = np.ascontiguousarray(matrix).reshape(-1)
    positions = np.flatnonzero(flat.view(np.uint32) != 0)  # a boolean mask is scanned faster than the values
    if 3 * len(positions) >= flat.size:
        return matrix
    packed = np.empty(len(positions), dtype=NONZEROS)
    packed["position"] = positions
    packed["value"] = flat[positions]
    return packed


def _unpacked(loaded: npt.NDArray[Any], shape: tuple[int, int]) -> Matrix | None:
    """The float32 matrix of `shape` a cached array holds (itself, or made from its nonzeros), or None when it does
    not hold one: another dtype or shape, a value not finite, or positions not strictly increasing within the
    matrix."""
    if loaded.dtype == np.dtype(np.float32) and loaded.shape == shape:
        matrix = np.ascontiguousarray(loaded)
    elif loaded.dtype == NONZEROS and loaded.ndim == 1:
        positions, values = loaded["position"], loaded["value"]
        inside = not len(positions) or (positions[0] >= 0 and positions[-1] < shape[0] * shape[1])
        if not inside or (np.diff(positions) <= 0).any():
            return None
        matrix = np.zeros(shape, dtype=np.float32)
        matrix.reshape(-1)[positions] = values
    else:
        return None
    checked: Matrix = matrix
    return checked if np.isfinite(checked).all() else None


def _load_checked(path: Path, shape: tuple[int, int]) -> Matrix | None:
    """The float32 matrix of `shape` stored at `path` (:func:`_unpacked`) if it is a readable ``.npy`` that holds
    one; otherwise None."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: a FIFO planted here must not hang the open
    except OSError:
        return None  # missing, unreadable, or a symlink
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None  # a directory, FIFO or device
        try:
            loaded: Any = np.load(handle, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None  # truncated, corrupted, pickled or not an array file
    if not isinstance(loaded, np.ndarray):  # an .npz archive, say
        return None
    return _unpacked(loaded, shape)


class EmbeddingCache:
    """A directory of cached embedding matrices; ``hits`` and ``misses`` count lookups (for tests and benchmarks)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.hits = 0
        self.misses = 0

    def path_for(self, provider: EmbeddingProvider, texts: Sequence[str]) -> Path:
        """Where the matrix for these texts embedded (together, in this order) by this provider is stored."""
        return self.directory / fingerprint(provider)[:_SHARD_HEX] / f"{sha256_of(list(texts))}.npy"

    def embed(
        self, provider: EmbeddingProvider, texts: Sequence[str], compute: Callable[[], Matrix] | None = None
    ) -> Matrix:
        """``provider.embed(texts)``, read from the cache when a valid entry exists, else computed (by ``compute``
        when given: the same rows by another route) and stored.

        Raises:
            ValueError: when the provider returns something other than a ``(len(texts), dimensions)`` float32
                matrix (it is not cached), or when the provider's cache subdirectory is a symlink or a file.
        """
        path = self.path_for(provider, texts)
        shape = (len(texts), provider.dimensions)
        if _real_directory(path.parent):
            cached = _load_checked(path, shape)
            if cached is not None:
                self.hits += 1
                return cached
        self.misses += 1
        matrix = compute() if compute is not None else provider.embed(texts)
        if matrix.dtype != np.dtype(np.float32) or matrix.shape != shape:
            raise ValueError(
                f"provider returned a {matrix.dtype} matrix of shape {matrix.shape}, expected float32 {shape}"
            )
        self._store(path, matrix)
        return matrix

    def _store(self, path: Path, matrix: Matrix) -> None:
        _real_directory(path.parent)
        buffer = io.BytesIO()
        np.save(buffer, _packed(matrix), allow_pickle=False)
        # creates missing folders, never through a symlink; not fsynced: an entry is checked when read, and made
        # again when a crash of the system left it empty or cut short
        write_atomic(path, buffer.getvalue(), durable=False)


REMEMBERED_ROWS = 65_536
"""Rows a :class:`CachedProvider` keeps in memory at most: a corpus larger than this is read back from the disk cache
block by block instead (a million rows of 1,024 float32 would be 4 GB held for the process's lifetime)."""


class CachedProvider(WrappedProvider):
    """An :class:`EmbeddingProvider` that embeds through an :class:`EmbeddingCache` and remembers rows per text.

    ``definition`` and ``dimensions`` are the wrapped provider's
    (:class:`~evalkit.retrieval.embeddings.WrappedProvider`), so fingerprints (and with them the evaluation's
    definition hash and database keys) do not change. A text's row is remembered the first time it is seen and
    returned unchanged afterwards, whether it came from disk or from a fresh computation; at most
    :data:`REMEMBERED_ROWS` rows are remembered (a batch that would pass the bound is returned, not remembered).

    Concept-naming providers (:class:`~evalkit.retrieval.embeddings.ConceptProvider`) are refused: wrapping would hide
    their ``concepts`` from the reranker while keeping their fingerprint; they are in-memory and need no cache.
    """

    def __init__(self, provider: EmbeddingProvider, cache: EmbeddingCache) -> None:
        if isinstance(provider, ConceptProvider):
            raise ValueError(
                f"{type(provider).__name__} names concepts, which a CachedProvider would hide; use it uncached"
            )
        super().__init__(provider)
        self.cache = cache
        self._rows: dict[str, Matrix] = {}

    def _remember(self, texts: Sequence[str], matrix: Matrix) -> None:
        if len(self._rows) + len(texts) > REMEMBERED_ROWS:
            return
        for text, row in zip(texts, matrix, strict=True):
            self._rows.setdefault(text, row)

    def prime(self, texts: Sequence[str]) -> None:
        """Embed the whole list through the cache (one entry) and remember each text's row.

        Nothing is read or embedded when every text is already remembered, or when there are more texts than
        :data:`REMEMBERED_ROWS` (the knowledge service embeds a large corpus through the cache a block at a time).
        """
        if len(texts) > REMEMBERED_ROWS or all(t in self._rows for t in texts):
            return
        self._remember(texts, self.cache.embed(self.provider, texts))

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Remembered rows; texts not yet seen are embedded through the cache as one batch (deduplicated, in order)."""
        return self._embed(texts, None)

    def embed_analyzed(self, texts: Sequence[str], contents: Sequence[str]) -> Matrix:
        """:meth:`embed`, with the wrapped provider embedding from the analyzer's content tokens when it can
        (:class:`~evalkit.retrieval.embeddings.AnalyzedTextProvider`); the cache entries are the same."""
        if len(texts) != len(contents):
            raise ValueError(f"{len(texts)} texts but {len(contents)} analyzed texts")
        return self._embed(texts, dict(zip(texts, contents, strict=True)))

    def _embed(self, texts: Sequence[str], contents: Mapping[str, str] | None) -> Matrix:
        missing = list(dict.fromkeys(t for t in texts if t not in self._rows))
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        rows: Mapping[str, Matrix] = self._rows
        if missing:
            inner = self.provider
            compute = None
            if contents is not None and isinstance(inner, AnalyzedTextProvider):
                compute = partial(inner.embed_analyzed, missing, [contents[t] for t in missing])
            fresh = self.cache.embed(inner, missing, compute)
            self._remember(missing, fresh)
            if missing[0] not in self._rows:  # too many rows to remember: this batch's rows are used once
                if len(missing) == len(texts):  # every text new and once: the batch's rows are the answer
                    return np.ascontiguousarray(fresh)
                rows = ChainMap(dict(zip(missing, fresh, strict=True)), self._rows)
        matrix: Matrix = np.stack([rows[t] for t in texts])
        return matrix
