"""Tests for retrieval.embeddings: token-hash and alias providers, normalization, fingerprints and determinism."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.common.hashing import canonical_json, sha256_of
from evalkit.data.fixture import AliasGroup, AliasTable, LoadedFixture
from evalkit.retrieval.embeddings import (
    AliasProvider,
    ConceptProvider,
    EmbeddingProvider,
    Matrix,
    TokenHashProvider,
    fingerprint,
    l2_normalize,
)
from evalkit.retrieval.text import tokenize

from ..conftest import TINY_DIR

RECALL = AliasTable(
    groups=(
        AliasGroup(group_id="recall", terms=("召回率", "recall")),
        AliasGroup(group_id="precision", terms=("精确率", "precision")),
        AliasGroup(group_id="trash", terms=("回收站", "deleted notes")),
    )
)
# Groups are laid out by group ID: precision = 0, recall = 1, trash = 2; residual buckets follow.
PRECISION_DIM, RECALL_DIM, TRASH_DIM = 0, 1, 2
ZH_RECALL = "召回率是检索评估的重要指标"
EN_RECALL = "Recall is an important retrieval metric"


def _cosine(matrix: Matrix, i: int, j: int) -> float:
    return float(matrix[i] @ matrix[j])


def _support(row: np.ndarray[Any, Any]) -> set[int]:
    return set(np.flatnonzero(row).tolist())


# ---------------------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------------------


def test_canonical_json_is_sorted_compact_utf8() -> None:
    assert canonical_json({"b": 1, "a": ["导", 0.5]}) == '{"a":["导",0.5],"b":1}'.encode()
    assert sha256_of({"b": 1, "a": 2}) == hashlib.sha256(b'{"a":2,"b":1}').hexdigest()


def test_l2_normalize_keeps_zero_rows() -> None:
    out = l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert out.dtype == np.float32
    assert out.tobytes() == np.array([[0.6, 0.8], [0.0, 0.0]], dtype=np.float32).tobytes()


# ---------------------------------------------------------------------------------------------------------
# Token-hash provider
# ---------------------------------------------------------------------------------------------------------


def test_token_hash_single_token_lands_in_its_blake2b_bucket() -> None:
    # definition says blake2b-64: index = value mod dimensions, sign = top bit (1 -> +1, 0 -> -1).
    value = int.from_bytes(hashlib.blake2b(b"trash", digest_size=8).digest(), "big")
    expected = np.zeros(64, dtype=np.float32)
    expected[value % 64] = 1.0 if value >> 63 else -1.0
    rows = TokenHashProvider(64).embed(["Trash", "trash trash!"])
    assert rows[0].tobytes() == expected.tobytes()
    assert rows[1].tobytes() == expected.tobytes()  # one token, whatever its count, normalizes to the same row


def test_token_hash_sublinear_term_frequency() -> None:
    provider = TokenHashProvider(1024)
    row = provider.embed(["alpha beta beta"])[0]
    alpha, beta = provider.embed(["alpha", "beta"])
    assert _support(alpha) != _support(beta)  # no collision for this pair at 1024 buckets
    weights = np.array([1.0, 1.0 + math.log(2)])
    weights /= np.linalg.norm(weights)
    expected = alpha * np.float32(weights[0]) + beta * np.float32(weights[1])
    np.testing.assert_allclose(row, expected, rtol=0, atol=1e-7)


def test_token_hash_rows_are_unit_float32() -> None:
    rows = TokenHashProvider().embed(["Deleted notes stay in the trash", "批量导出最多包含 500 篇笔记"])
    assert rows.dtype == np.float32
    assert rows.shape == (2, 1024)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), [1.0, 1.0], rtol=0, atol=1e-6)


@pytest.mark.parametrize("text", ["", "!!! ？。", "the and of", "是的吗"])
def test_token_hash_text_without_content_tokens_is_a_zero_row(text: str) -> None:
    row = TokenHashProvider().embed([text])[0]
    assert not row.any()


def test_token_hash_empty_batch() -> None:
    assert TokenHashProvider(16).embed([]).shape == (0, 16)


def test_token_hash_identical_texts_have_cosine_one() -> None:
    rows = TokenHashProvider().embed(["Deleted notes stay in the trash", "deleted NOTES stay in the trash!"])
    assert _cosine(rows, 0, 1) == pytest.approx(1.0, abs=1e-6)


def test_token_hash_disjoint_vocabulary_is_orthogonal() -> None:
    rows = TokenHashProvider().embed(["workspace sidebar menu", "导出 压缩包"])
    # No shared token and, for these texts, no shared bucket: the cosine is exactly zero.
    assert _support(rows[0]).isdisjoint(_support(rows[1]))
    assert _cosine(rows, 0, 1) == 0.0


def test_token_hash_is_deterministic_and_batch_independent() -> None:
    texts = ["Sync runs every five minutes", "同步多久运行一次", ""]
    provider = TokenHashProvider()
    batch = provider.embed(texts)
    assert batch.tobytes() == TokenHashProvider().embed(texts).tobytes()
    singles = np.vstack([provider.embed([t]) for t in texts])
    assert batch.tobytes() == singles.tobytes()


@given(st.permutations(["deleted", "notes", "stay", "trash", "trash", "thirty", "days"]))
def test_token_hash_is_a_bag_of_words(words: list[str]) -> None:
    provider = TokenHashProvider(64)
    assert (
        provider.embed([" ".join(words)]).tobytes()
        == provider.embed(["deleted notes stay trash trash thirty days"]).tobytes()
    )


@pytest.mark.parametrize("dimensions", [0, 7, -1])
def test_token_hash_dimension_validation(dimensions: int) -> None:
    with pytest.raises(ValueError, match=f"dimensions must be at least 8, got {dimensions}"):
        TokenHashProvider(dimensions)
    assert TokenHashProvider(8).dimensions == 8


# ---------------------------------------------------------------------------------------------------------
# Alias provider
# ---------------------------------------------------------------------------------------------------------


def test_alias_dimensions_are_groups_plus_residual() -> None:
    assert AliasProvider(RECALL, hash_dimensions=64).dimensions == 3 + 64


def test_alias_chinese_and_english_share_the_concept_dimension() -> None:
    rows = AliasProvider(RECALL).embed([ZH_RECALL, EN_RECALL, "今天天气很好", "The weather is nice"])
    assert rows[0, RECALL_DIM] > 0
    assert rows[1, RECALL_DIM] > 0
    assert not rows[2:, :3].any()  # unrelated texts: nothing on the alias dimensions
    assert _cosine(rows, 0, 1) > 0
    assert _cosine(rows, 0, 2) == 0.0  # different residual buckets and no concept in common


def test_alias_hand_computed_weights() -> None:
    # One mention, a non-empty residual of unit norm scaled by 0.35: the concept entry is 1 / sqrt(1 + 0.35^2).
    # The two residual parts share no bucket, so the cosine is the product of the concept entries.
    rows = AliasProvider(RECALL).embed([ZH_RECALL, EN_RECALL])
    concept = 1 / math.sqrt(1 + 0.35**2)
    assert rows[0, RECALL_DIM] == pytest.approx(concept, abs=1e-7)
    assert rows[1, RECALL_DIM] == pytest.approx(concept, abs=1e-7)
    assert _support(rows[0, 3:]).isdisjoint(_support(rows[1, 3:]))
    assert _cosine(rows, 0, 1) == pytest.approx(concept**2, abs=1e-6)


def test_alias_counts_are_sublinear() -> None:
    # Without residual: recall mentioned twice (召回率 once, 'recalls' once via its stem), precision once.
    provider = AliasProvider(RECALL, residual_weight=0.0)
    row = provider.embed(["召回率 and recalls versus precision"])[0]
    expected = np.array([1.0, 1.0 + math.log(2)]) / math.hypot(1.0, 1.0 + math.log(2))
    np.testing.assert_allclose(row[[PRECISION_DIM, RECALL_DIM]], expected, rtol=0, atol=1e-7)
    assert not row[TRASH_DIM:].any()


def test_alias_multi_word_term_must_be_a_contiguous_run() -> None:
    provider = AliasProvider(RECALL)
    assert provider.concepts("Deleted notes go to the trash") == frozenset({"trash"})
    assert provider.concepts("the notes were deleted") == frozenset()
    assert provider.concepts("回收站里的笔记") == frozenset({"trash"})
    assert provider.concepts(f"{ZH_RECALL}; precision") == frozenset({"recall", "precision"})


def test_alias_zero_residual_weight_gives_zero_rows_without_concepts() -> None:
    rows = AliasProvider(RECALL, residual_weight=0.0).embed(["The weather is nice", "recall"])
    assert not rows[0].any()
    np.testing.assert_array_equal(rows[1], np.eye(1, 3 + 512, RECALL_DIM, dtype=np.float32)[0])


def test_alias_empty_batch_and_empty_text() -> None:
    provider = AliasProvider(RECALL, hash_dimensions=16)
    assert provider.embed([]).shape == (0, 19)
    assert not provider.embed([""]).any()


def test_alias_rows_deterministic_unit_float32(tiny: LoadedFixture) -> None:
    provider = AliasProvider(tiny.aliases)
    texts = [c.text for c in tiny.fixture.chunks]
    rows = provider.embed(texts)
    assert rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=0, atol=1e-6)
    assert rows.tobytes() == AliasProvider(tiny.aliases).embed(texts).tobytes()


def test_alias_residual_weight_validation() -> None:
    with pytest.raises(ValueError, match="residual_weight must be >= 0"):
        AliasProvider(RECALL, residual_weight=-0.1)
    with pytest.raises(ValueError, match="dimensions must be at least 8"):
        AliasProvider(RECALL, hash_dimensions=4)


@pytest.mark.parametrize("weight", [math.nan, math.inf])
def test_alias_residual_weight_must_be_finite(weight: float) -> None:
    with pytest.raises(ValueError, match="residual_weight"):
        AliasProvider(RECALL, residual_weight=weight)


# ---------------------------------------------------------------------------------------------------------
# Definitions, fingerprints and the protocols
# ---------------------------------------------------------------------------------------------------------


def _providers(tiny_aliases: AliasTable) -> list[EmbeddingProvider]:
    return [TokenHashProvider(), TokenHashProvider(64), AliasProvider(tiny_aliases), AliasProvider(RECALL)]


def test_definitions_are_json_serializable(tiny: LoadedFixture) -> None:
    for provider in _providers(tiny.aliases):
        definition = dict(provider.definition)
        assert json.loads(json.dumps(definition, allow_nan=False)) == definition


def test_fingerprint_is_sha256_of_canonical_definition() -> None:
    provider = TokenHashProvider(32)
    assert fingerprint(provider) == hashlib.sha256(canonical_json(dict(provider.definition))).hexdigest()
    assert len(fingerprint(provider)) == 64


def test_fingerprint_stable_and_sensitive() -> None:
    base = fingerprint(AliasProvider(RECALL))
    assert fingerprint(AliasProvider(RECALL)) == base
    reordered = AliasTable(
        groups=tuple(reversed([g.model_copy(update={"terms": g.terms[::-1]}) for g in RECALL.groups]))
    )
    assert fingerprint(AliasProvider(reordered)) == base  # group and term order do not matter
    extra_term = AliasTable(groups=(*RECALL.groups[:2], AliasGroup(group_id="trash", terms=("回收站", "bin"))))
    changed = {
        fingerprint(AliasProvider(RECALL, hash_dimensions=256)),
        fingerprint(AliasProvider(RECALL, residual_weight=0.5)),
        fingerprint(AliasProvider(RECALL.model_copy(update={"groups": RECALL.groups[:2]}))),
        fingerprint(AliasProvider(extra_term)),
    }
    assert base not in changed
    assert len(changed) == 4
    assert fingerprint(TokenHashProvider(1024)) == fingerprint(TokenHashProvider())
    assert fingerprint(TokenHashProvider(1024)) != fingerprint(TokenHashProvider(512))


class _NoEmbed:
    @property
    def definition(self) -> Mapping[str, Any]:
        return {}

    @property
    def dimensions(self) -> int:
        return 1


class _Constant:
    definition: Mapping[str, Any] = {"kind": "constant"}
    dimensions = 2

    def embed(self, texts: Sequence[str]) -> Matrix:
        return np.tile(np.array([1.0, 0.0], dtype=np.float32), (len(texts), 1))


def test_embedding_provider_protocol(tiny: LoadedFixture) -> None:
    for provider in _providers(tiny.aliases):
        assert isinstance(provider, EmbeddingProvider)
    assert isinstance(_Constant(), EmbeddingProvider)
    assert not isinstance(_NoEmbed(), EmbeddingProvider)
    assert isinstance(AliasProvider(RECALL), ConceptProvider)
    assert not isinstance(TokenHashProvider(), ConceptProvider)


_SUBPROCESS = f"""
import hashlib
from evalkit.retrieval.embeddings import AliasProvider, TokenHashProvider, fingerprint
from evalkit.data.fixture import load_fixture
aliases = load_fixture({str(TINY_DIR)!r}).aliases
texts = ["Deleted notes stay in the trash", "年度订阅可以退款吗", "Sync 同步"]
for provider in (TokenHashProvider(), AliasProvider(aliases)):
    print(fingerprint(provider), hashlib.sha256(provider.embed(texts).tobytes()).hexdigest())
"""


def test_fingerprints_and_rows_identical_across_hash_seeds() -> None:
    outputs = []
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", _SUBPROCESS], env=env, capture_output=True, text=True, check=True, timeout=60
        )
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    assert len(outputs[0].splitlines()) == 2


@settings(max_examples=300)
@given(
    st.lists(st.sampled_from(["a", "b", "c", "同步"]), max_size=30),
    st.lists(st.lists(st.sampled_from(["a", "b", "c", "同步"]), max_size=4), max_size=6),
)
def test_token_runs_count_every_term_as_count_runs_does(tokens: list[str], terms: list[list[str]]) -> None:
    from evalkit.retrieval.embeddings import _count_runs, _token_runs

    runs = _token_runs(tokens, frozenset(len(t) for t in terms if t))
    assert [runs.get(tuple(t), 0) for t in terms] == [_count_runs(tokens, t) for t in terms]


def _reference_token_hash(texts: Sequence[str], dimensions: int) -> Matrix:
    """Token hashing as first defined: per text, each distinct token in sorted order adds sign * (1 + ln count)."""
    rows = np.zeros((len(texts), dimensions), dtype=np.float64)
    for index, text in enumerate(texts):
        tokens = tokenize(text, drop_stopwords=True)
        for token in sorted(set(tokens)):
            value = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "big")
            sign = 1.0 if (value >> 63) & 1 else -1.0
            rows[index, value % dimensions] += sign * (1.0 + math.log(tokens.count(token)))
    return l2_normalize(rows)


@pytest.mark.parametrize("dimensions", [8, 64, 1024])
def test_token_hash_rows_equal_the_per_text_loop_bit_for_bit(tiny: LoadedFixture, dimensions: int) -> None:
    texts = [c.text for c in tiny.fixture.chunks] + ["", "the the the", "trash trash trash 回收站 回收站", "x" * 9]
    assert TokenHashProvider(dimensions).embed(texts).tobytes() == _reference_token_hash(texts, dimensions).tobytes()
