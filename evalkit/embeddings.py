"""Deterministic in-memory embedding providers and the interface real models implement.

A provider turns texts into L2-normalized float32 rows. Its ``definition`` is a JSON-able description of everything
that determines its output; ``fingerprint`` is the SHA-256 of that definition in canonical JSON. Definitions and
fingerprints identify private configuration: they are hashed into the report, never written into it.

- :class:`TokenHashProvider` hashes analyzed tokens (English stems, Chinese words) into a fixed number of signed
  buckets. It knows nothing about topics: a transparent lexical-overlap vector ablation.
- :class:`AliasProvider` maps handcrafted bilingual alias groups (for example 召回率 / recall) to shared dimensions
  and appends a down-weighted token-hash part. It is fixture-aware regression plumbing that exercises the
  cross-language vector, hybrid and rerank paths; it is not a model of embedding quality.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from evalkit.fixture import AliasTable
from evalkit.text import ANALYZER_VERSION, is_han, normalize, tokenize

Matrix = npt.NDArray[np.float32]


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, no spaces, UTF-8) used for every hash in evalkit."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_of(value: Any) -> str:
    """SHA-256 hex digest of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


@runtime_checkable
class EmbeddingProvider(Protocol):
    """What the knowledge service needs from an embedding model; real models implement this too."""

    @property
    def definition(self) -> Mapping[str, Any]:
        """Everything that determines the output, as JSON-able data (private: hashed, never reported)."""
        ...

    @property
    def dimensions(self) -> int:
        """Length of each embedding row."""
        ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed texts as an ``(len(texts), dimensions)`` float32 matrix of L2-normalized rows."""
        ...


@runtime_checkable
class ConceptProvider(Protocol):
    """A provider that can also name the language-independent concepts a text mentions (used by the reranker)."""

    def concepts(self, text: str) -> frozenset[str]:
        """IDs of the concepts the text mentions."""
        ...


def fingerprint(provider: EmbeddingProvider) -> str:
    """Stable identity of a provider: SHA-256 of its canonical definition."""
    return sha256_of(dict(provider.definition))


def l2_normalize(matrix: npt.NDArray[np.floating[Any]]) -> Matrix:
    """Scale rows to unit length; all-zero rows stay zero (a text with no known token matches nothing)."""
    values = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(values, axis=1, keepdims=True)
    scaled: Matrix = np.divide(values, norms, out=np.zeros_like(values), where=norms > 0).astype(np.float32)
    return scaled


def _bucket(token: str, dimensions: int) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "big")
    return value % dimensions, (1.0 if (value >> 63) & 1 else -1.0)


def _hashed_counts(counts: Counter[str], dimensions: int) -> npt.NDArray[np.float64]:
    row = np.zeros(dimensions, dtype=np.float64)
    for token in sorted(counts):
        index, sign = _bucket(token, dimensions)
        row[index] += sign * (1.0 + math.log(counts[token]))
    return row


class TokenHashProvider:
    """Signed feature hashing of analyzed tokens with sublinear term frequency (1 + ln tf)."""

    VERSION = "1"

    def __init__(self, dimensions: int = 1024) -> None:
        if dimensions < 8:
            raise ValueError(f"dimensions must be at least 8, got {dimensions}")
        self._dimensions = dimensions

    @property
    def definition(self) -> Mapping[str, Any]:
        """Kind, version, analyzer version and dimensions."""
        return {
            "kind": "token-hash",
            "version": self.VERSION,
            "analyzer": ANALYZER_VERSION,
            "dimensions": self._dimensions,
            "hash": "blake2b-64",
        }

    @property
    def dimensions(self) -> int:
        """Number of hash buckets."""
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Hash each text's content tokens into signed buckets and L2-normalize."""
        rows = [_hashed_counts(Counter(tokenize(t, drop_stopwords=True)), self._dimensions) for t in texts]
        return l2_normalize(np.array(rows).reshape(len(texts), self._dimensions))


class AliasProvider:
    """Alias-group dimensions shared across languages, plus a down-weighted token-hash residual.

    A Han term matches as a substring of the normalized text; any other term matches as a contiguous run of
    analyzed tokens. Each group's count enters with sublinear weight (1 + ln count); the residual is scaled by
    ``residual_weight`` before the whole row is L2-normalized.
    """

    VERSION = "1"

    def __init__(self, aliases: AliasTable, hash_dimensions: int = 512, residual_weight: float = 0.35) -> None:
        if not (math.isfinite(residual_weight) and residual_weight >= 0):
            raise ValueError(f"residual_weight must be >= 0 and finite, got {residual_weight}")
        self._groups = tuple(sorted(aliases.groups, key=lambda g: g.group_id))
        self._residual = TokenHashProvider(hash_dimensions)
        self._residual_weight = residual_weight
        self._han_terms = [tuple(normalize(t) for t in g.terms if is_han(t)) for g in self._groups]
        self._token_terms = [tuple(tokenize(t) for t in g.terms if not is_han(t)) for g in self._groups]

    @property
    def definition(self) -> Mapping[str, Any]:
        """Kind, version, alias groups, residual definition and weight."""
        return {
            "kind": "alias",
            "version": self.VERSION,
            "analyzer": ANALYZER_VERSION,
            "groups": [[g.group_id, sorted(g.terms)] for g in self._groups],
            "residual": dict(self._residual.definition),
            "residual_weight": self._residual_weight,
        }

    @property
    def dimensions(self) -> int:
        """One dimension per alias group plus the residual buckets."""
        return len(self._groups) + self._residual.dimensions

    def _group_counts(self, text: str) -> npt.NDArray[np.float64]:
        folded = normalize(text)
        tokens = tokenize(text)
        counts = np.zeros(len(self._groups), dtype=np.float64)
        for index, (han_terms, token_terms) in enumerate(zip(self._han_terms, self._token_terms, strict=True)):
            count = sum(folded.count(term) for term in han_terms)
            count += sum(_count_runs(tokens, term) for term in token_terms)
            counts[index] = 1.0 + math.log(count) if count else 0.0
        return counts

    def concepts(self, text: str) -> frozenset[str]:
        """IDs of the alias groups the text mentions."""
        counts = self._group_counts(text)
        return frozenset(g.group_id for g, count in zip(self._groups, counts, strict=True) if count > 0)

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Concatenate alias-group weights and the weighted token-hash residual, then L2-normalize."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        concepts = np.array([self._group_counts(t) for t in texts]).reshape(len(texts), len(self._groups))
        residual = self._residual.embed(texts).astype(np.float64) * self._residual_weight
        return l2_normalize(np.hstack([concepts, residual]))


def _count_runs(tokens: Sequence[str], term: Sequence[str]) -> int:
    width = len(term)
    if width == 0:
        return 0
    return sum(1 for i in range(len(tokens) - width + 1) if tuple(tokens[i : i + width]) == tuple(term))
