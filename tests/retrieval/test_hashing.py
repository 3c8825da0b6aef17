"""The token-hashing kernel against the per-text loop it replaces, on texts where the order of a bucket's sum shows."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np
import pytest

from evalkit.data.schema import Matrix
from evalkit.retrieval import hashing
from evalkit.retrieval.embeddings import l2_normalize
from evalkit.retrieval.hashing import first_seen_codes, hashed_rows


def _loop(texts: Sequence[Sequence[str]], dimensions: int) -> Matrix:
    """Per text, each distinct token in sorted order adds sign * (1 + ln count) into its bucket."""
    rows = np.zeros((len(texts), dimensions), dtype=np.float64)
    for index, tokens in enumerate(texts):
        for token in sorted(set(tokens)):
            value = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "big")
            sign = 1.0 if (value >> 63) & 1 else -1.0
            rows[index, value % dimensions] += sign * (1.0 + math.log(tokens.count(token)))
    return l2_normalize(rows)


def _texts(seed: int, count: int) -> list[list[str]]:
    """Texts of 0 to 40 tokens from a vocabulary of 60, repeated 1 to 9 times: many buckets of 8 get three or more
    terms whose sum depends on its order (1 + ln count is irrational past a count of 1)."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"t{i}" for i in range(50)] + ["召回", "检索", "回收站", "é", "ß", "x" * 30, "0", "9a", "zz", "aa"]
    texts = []
    for _ in range(count):
        tokens = [vocabulary[i] for i in rng.integers(0, len(vocabulary), size=int(rng.integers(0, 15)))]
        texts.append([token for token in tokens for _ in range(int(rng.integers(1, 10)))])
    return texts


@pytest.mark.parametrize("dimensions", [8, 13, 1024])
def test_rows_equal_the_sorted_loop_bit_for_bit(dimensions: int) -> None:
    texts = _texts(dimensions, 400)
    assert hashed_rows(texts, dimensions).tobytes() == _loop(texts, dimensions).tobytes()


def _bucket_sums(tokens: Sequence[str], dimensions: int, order: int) -> list[float]:
    """Each bucket's sum of a text's terms, its distinct tokens taken in sorted (1) or reversed (-1) order."""
    sums = [0.0] * dimensions
    for token in sorted(set(tokens))[::order]:
        value = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "big")
        sign = 1.0 if (value >> 63) & 1 else -1.0
        sums[value % dimensions] += sign * (1.0 + math.log(tokens.count(token)))
    return sums


def test_the_texts_hold_buckets_whose_sum_depends_on_its_order() -> None:
    """So the comparison above fails if a crowded bucket is summed in another order than sorted tokens."""
    texts = _texts(8, 400)
    assert any(_bucket_sums(tokens, 8, 1) != _bucket_sums(tokens, 8, -1) for tokens in texts)


def test_rows_do_not_depend_on_remembered_digests(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = _texts(1, 50)
    first = hashed_rows(texts, 64)
    monkeypatch.setattr(hashing, "_REMEMBERED_DIGESTS", 0)
    hashing._DIGESTS.clear()
    assert hashed_rows(texts, 64).tobytes() == first.tobytes()
    assert not hashing._DIGESTS


@pytest.mark.parametrize(("block", "dense"), [(4096, 1), (7, 3), (5, 5), (64, 256)])
def test_rows_do_not_depend_on_how_the_texts_are_cut(block: int, dense: int, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [*_texts(2, 60), [], ["t1"], []]
    whole = _loop(texts, 13)
    monkeypatch.setattr(hashing, "_EMBED_BLOCK_ROWS", block)
    monkeypatch.setattr(hashing, "_DENSE_ROWS", dense)
    assert hashed_rows(texts, 13).tobytes() == whole.tobytes()
    assert hashed_rows([[], []], 13).tobytes() == bytes(2 * 13 * 4)
    assert hashed_rows([], 13).shape == (0, 13)


def test_first_seen_codes_by_hand() -> None:
    codes, distinct = first_seen_codes([["b", "nan", "b"], [], ["None", "a", "nan"]], 6)
    assert distinct == ["b", "nan", "None", "a"]  # first seen first; words pandas would read as missing are tokens
    assert codes.dtype == np.int64 and codes.tolist() == [0, 1, 0, 2, 3, 1]
    empty_codes, nothing = first_seen_codes([[], []], 0)
    assert empty_codes.tolist() == [] and nothing == []
