"""The embedding cache writes its entries without fsync (an entry is checked when read): none is fsynced, and an
entry a crash of the system left empty or cut short is embedded again and written anew."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from evalkit.retrieval.embedding_cache import EmbeddingCache
from evalkit.retrieval.embeddings import TokenHashProvider

TEXTS = ["the first text", "第二段文字", "a third one"]


@pytest.mark.parametrize("cut", [0, 40, -7])
def test_an_entry_cut_short_is_embedded_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: int) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    cache, provider = EmbeddingCache(tmp_path / "cache"), TokenHashProvider()
    first = cache.embed(provider, TEXTS)
    assert not synced
    entry = cache.path_for(provider, TEXTS)
    data = entry.read_bytes()
    entry.write_bytes(data[:cut])
    again = cache.embed(provider, TEXTS)
    assert (cache.hits, cache.misses) == (0, 2)
    np.testing.assert_array_equal(again, first)
    assert entry.read_bytes() == data  # written anew, whole
    np.testing.assert_array_equal(cache.embed(provider, TEXTS), first)
    assert cache.hits == 1
