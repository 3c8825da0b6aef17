"""Vector indexes: how a provider's rows are searched, chosen per provider and corpus size by a retrieval setting.

- ``exact`` (:class:`ExactIndex`): one float32 matrix read whole by every query (``row_scores`` and
  ``top_positions``). The reference: every other index is measured against it.
- ``sparse`` (:class:`SparseIndex`): the same rows kept as their nonzero entries, by column (scipy CSC) for search
  and by row (CSR) for the rows the reranker asks for. A query adds only the columns where it is nonzero, so a
  token-hash query of a dozen buckets reads a few percent of the corpus. Exact in arithmetic (the sums run in
  another order, so a score may differ from ``exact``'s in its last bit); a fraction of the dense matrix's memory.
- ``hnsw`` (:class:`HnswIndex`): usearch's approximate graphs (extra ``ann``), one per ``graph_rows`` rows, each
  searched. Their candidates are rescored with the float32 rows, so a found chunk has exactly its ``exact`` score;
  a chunk the graphs miss is the approximation, which :func:`recall_at` measures against exact search. Added by
  one thread, the graphs are the same in every process; more build threads are faster and the graphs then depend
  on their timing. A query searches the graphs on :func:`~evalkit.common.threads.scoring_threads` threads (usearch
  releases the GIL while it searches), each graph on one; its results are the same on one thread or many.

``auto`` (the default) keeps today's exact search below :data:`AUTO_EXACT_BELOW` chunks; above it, ``sparse`` for a
provider whose rows are sparse (token hashing: ``sparse_rows``), else ``hnsw`` when usearch is installed, else
``exact`` with a note (:func:`plan_index`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
from scipy import sparse

from evalkit.common.interrupts import signals_raised_from
from evalkit.common.threads import each, scoring_threads
from evalkit.data.schema import Matrix
from evalkit.data.settings import HnswSettings, RetrievalSettings
from evalkit.retrieval.embeddings import EmbeddingProvider, ProviderUnavailableError, import_backend
from evalkit.retrieval.sparse_index import top_positions

IndexKind = Literal["exact", "sparse", "hnsw"]
Reason = Literal["small-corpus", "sparse-rows", "dense-rows", "usearch-missing", "set"]

AUTO_EXACT_BELOW = 200_000
"""Below this many chunks ``auto`` is exact search: one pass over the matrix is fast enough, and it is the reference."""
ANN_EXTRA = "ann"
"""The optional extra that installs usearch."""
RECALL_K = 10
"""The cutoff of the recall an approximate index is measured at."""
MIN_RECALL = 0.99
"""The recall@10 an approximate index should reach; a run that measures less says so."""
RECALL_SAMPLE = 50
"""Queries in the seeded sample on which an approximate index's recall is measured."""
EXPANSION_MOST = 512
"""``expansion_search`` of a corpus of up to five graphs (tuned on a single graph of 50,000 rows)."""
EXPANSION_TOTAL = 2560
"""Candidates shared among a larger corpus's graphs, so a query's work stays about that of five graphs."""
EXPANSION_LEAST = 256
"""The least ``expansion_search`` by corpus size (ten graphs of 100,000 rows: recall@10 0.996 on dense rows)."""
_MIB = 1 << 20
_GRAPH_ROW_OVERHEAD = 320
"""Bytes a graph holds per row beyond the row and its level-0 edges (key, levels, upper levels, the allocator's
slack): 140 to 290 measured in the resident memory of graphs of 40,960 and 100,000 rows of 64 to 256 dimensions
(usearch 2.26.6, 2026-12-06), so that a budget the estimate passes holds the index."""
_DTYPE_BYTES = {"f32": 4, "f16": 2, "i8": 1}
_DENSE_BLOCK_ROWS = 8192


def row_scores(matrix: Matrix, query: Matrix) -> Matrix:
    """Inner product of every row with the query, each row's value independent of the other rows.

    ``einsum`` reduces each row with the same loop whatever the matrix's height, whereas BLAS ``gemv`` may take a
    different path for some rows (a tail block, say), so the same row could score differently in a matrix of
    another height. Sharded search (:mod:`~evalkit.retrieval.shards`) relies on this to match the single process.
    """
    scores: Matrix = np.einsum("ij,j->i", matrix, np.asarray(query, dtype=np.float32).reshape(-1))
    return scores


def has_sparse_rows(provider: EmbeddingProvider) -> bool:
    """Whether the provider says its rows are mostly zeros (token hashing), so ``sparse`` search fits it."""
    return bool(getattr(provider, "sparse_rows", False))


def usearch_installed() -> bool:
    """Whether the optional usearch backend can be imported (without importing it)."""
    return importlib.util.find_spec("usearch") is not None


@dataclass(frozen=True)
class IndexPlan:
    """The index one provider's rows get: the kind, why, and the graph's parameters."""

    kind: IndexKind
    reason: Reason
    hnsw: HnswSettings

    @property
    def deterministic(self) -> bool:
        """Whether the same rows and settings build the same index in every process."""
        return self.kind != "hnsw" or self.hnsw.build_threads == 1

    @property
    def note(self) -> str:
        """A sentence for the user when ``auto`` fell back to exact search on a large corpus."""
        if self.reason == "usearch-missing":
            return (
                "vector_index auto: exact search, because usearch is not installed "
                f"(pip install 'evalkit[{ANN_EXTRA}]' for the hnsw index)"
            )
        return ""


EXACT_PLAN = IndexPlan("exact", "set", HnswSettings())
"""Exact search: what a store does for a provider whose index was never planned."""


def plan_index(settings: RetrievalSettings, chunks: int, provider: EmbeddingProvider) -> IndexPlan:
    """The index ``settings.vector_index`` gives this provider at this corpus size; a choice the provider or the
    install cannot serve raises (ValueError, or ProviderUnavailableError naming the extra), before any indexing."""
    setting = settings.vector_index
    if setting == "auto":
        if chunks < AUTO_EXACT_BELOW:
            return IndexPlan("exact", "small-corpus", settings.hnsw)
        if has_sparse_rows(provider):
            return IndexPlan("sparse", "sparse-rows", settings.hnsw)
        if usearch_installed():
            return IndexPlan("hnsw", "dense-rows", settings.hnsw)
        return IndexPlan("exact", "usearch-missing", settings.hnsw)
    if setting == "sparse" and not has_sparse_rows(provider):
        raise ValueError(
            "vector_index 'sparse' needs a provider with sparse rows (token-hash, alias); this provider's rows are "
            "dense: use 'hnsw' or 'exact'"
        )
    if setting == "hnsw" and not usearch_installed():
        raise ProviderUnavailableError(
            f"vector_index 'hnsw' needs usearch; install the optional extra with: pip install 'evalkit[{ANN_EXTRA}]'"
        )
    return IndexPlan(setting, "set", settings.hnsw)


def estimated_mib(plan: IndexPlan, chunks: int, dimensions: int, nonzeros_per_row: float) -> float:
    """Memory the index of ``chunks`` rows would hold, in MiB (``nonzeros_per_row`` matters to ``sparse`` only)."""
    if plan.kind == "sparse":
        per_row = 2 * (8 * nonzeros_per_row + 4)  # CSC and CSR: a float32 value and an int32 index per entry
    elif plan.kind == "hnsw":  # the graph's row, float32 beside it (unless that is the graph's), edges, bookkeeping
        stored = _DTYPE_BYTES[plan.hnsw.dtype] * dimensions
        per_row = stored + (4 * dimensions if plan.hnsw.dtype != "f32" else 0) + 8 * plan.hnsw.connectivity
        per_row += _GRAPH_ROW_OVERHEAD
    else:
        per_row = 4 * dimensions
    return chunks * per_row / _MIB


def check_budget(settings: RetrievalSettings, plan: IndexPlan, chunks: int, dimensions: int, nonzeros: float) -> None:
    """Refuse a corpus whose index would not fit ``vector_memory_mib`` (ValueError naming the setting)."""
    budget = settings.vector_memory_mib
    needed = estimated_mib(plan, chunks, dimensions, nonzeros)
    if budget is not None and needed > budget:
        raise ValueError(
            f"vector_memory_mib {budget}: the {plan.kind} vector index of {chunks:,} chunks needs about "
            f"{needed:,.0f} MiB; raise the budget or choose a smaller index (vector_index)"
        )


SPARSITY_SAMPLE = 256
"""Chunks embedded (seeded sample) to estimate a sparse index's entries per row against a memory budget."""


def planned_index(settings: RetrievalSettings, chunks: Sequence[str], provider: EmbeddingProvider) -> IndexPlan:
    """:func:`plan_index` for this corpus, refused when its index would not fit ``vector_memory_mib``; call it before
    indexing. A sparse index's size is estimated from a seeded sample of the chunks, embedded for the purpose."""
    plan = plan_index(settings, len(chunks), provider)
    if settings.vector_memory_mib is not None:
        nonzeros = float(provider.dimensions)
        if plan.kind == "sparse" and chunks:
            sample = recall_sample(len(chunks), seed=0, size=SPARSITY_SAMPLE)
            rows = provider.embed([chunks[i] for i in sample])
            nonzeros = float(np.count_nonzero(rows)) / len(sample)
        check_budget(settings, plan, len(chunks), provider.dimensions, nonzeros)
    return plan


# --- the indexes ------------------------------------------------------------------------------------------------

Blocks = Iterable[Matrix]
"""A provider's float32 rows in chunk ID order, a block of consecutive rows at a time."""


class VectorIndex(Protocol):
    """Search over one provider's rows, by row position (chunk ID order)."""

    kind: IndexKind

    def search(self, query: Matrix, limit: int) -> tuple[npt.NDArray[np.intp], Matrix]:
        """The best ``limit`` positions and their scores, score descending then position ascending."""
        ...

    def rows(self, positions: Sequence[int]) -> Matrix:
        """The float32 rows at these positions, in the order given."""
        ...

    def blocks(self) -> Iterator[Matrix]:
        """Every row, dense float32, a block of consecutive rows at a time (for exact search as the reference)."""
        ...


def _scored(positions: npt.NDArray[np.intp], scores: Matrix, limit: int) -> tuple[npt.NDArray[np.intp], Matrix]:
    """The best ``limit`` of scored candidates: score descending, then position ascending."""
    order = np.lexsort((positions, -scores))[:limit]
    return positions[order], scores[order]


class ExactIndex:
    """Every row read by every query: the reference search."""

    kind: IndexKind = "exact"

    def __init__(self, matrix: Matrix) -> None:
        self.matrix = matrix

    def search(self, query: Matrix, limit: int) -> tuple[npt.NDArray[np.intp], Matrix]:
        """Inner product with every row, then the best ``limit``."""
        scores = row_scores(self.matrix, query)
        best = top_positions(scores, limit, floor=-np.inf)
        return best, scores[best]

    def rows(self, positions: Sequence[int]) -> Matrix:
        """Rows by position."""
        found: Matrix = self.matrix[list(positions)]
        return found

    def blocks(self) -> Iterator[Matrix]:
        """The matrix."""
        yield self.matrix


class SparseIndex:
    """The rows' nonzero entries by column (search) and by row (lookups)."""

    kind: IndexKind = "sparse"

    def __init__(self, blocks: Iterable[Matrix | sparse.csr_matrix]) -> None:
        parts = [sparse.csr_matrix(block, dtype=np.float32) for block in blocks]
        self.by_row = sparse.vstack(parts, format="csr", dtype=np.float32) if parts else sparse.csr_matrix((0, 0))
        self.by_column = self.by_row.tocsc()
        self.by_column.sort_indices()

    @property
    def nbytes(self) -> int:
        """Bytes held by both layouts."""
        return sum(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes for m in (self.by_row, self.by_column))

    def search(self, query: Matrix, limit: int) -> tuple[npt.NDArray[np.intp], Matrix]:
        """Add the query's nonzero columns into one score per row, then the best ``limit``.

        A row no column reaches scores exactly 0; when at least ``limit`` rows score above 0 those untouched rows
        cannot rank, otherwise every row competes, as in exact search.
        """
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        matrix = self.by_column
        scores = np.zeros(matrix.shape[0], dtype=np.float32)
        for column in np.flatnonzero(vector).tolist():
            start, end = matrix.indptr[column], matrix.indptr[column + 1]
            scores[matrix.indices[start:end]] += vector[column] * matrix.data[start:end]
        positive = np.flatnonzero(scores > 0)
        if len(positive) >= limit:
            best = positive[top_positions(scores[positive], limit, floor=-np.inf)]
        else:
            best = top_positions(scores, limit, floor=-np.inf)
        return best, scores[best]

    def rows(self, positions: Sequence[int]) -> Matrix:
        """Rows by position, dense."""
        found: Matrix = self.by_row[list(positions)].toarray()
        return found

    def blocks(self) -> Iterator[Matrix]:
        """Dense blocks of rows."""
        for start in range(0, self.by_row.shape[0], _DENSE_BLOCK_ROWS):
            yield self.by_row[start : start + _DENSE_BLOCK_ROWS].toarray()


def _by_part(starts: Sequence[int], positions: npt.NDArray[np.intp]) -> Iterator[tuple[int, npt.NDArray[np.bool_]]]:
    """Each part (of consecutive rows from ``starts[i]``) that holds some of ``positions``, and which of them."""
    which = np.searchsorted(np.asarray(starts), positions, side="right") - 1
    for part in np.unique(which).tolist():
        yield part, which == part


class _Float32Rows:
    """Float32 rows kept as the blocks they arrived in (no copy into one matrix), read by position."""

    def __init__(self, dimensions: int) -> None:
        self.parts: list[Matrix] = []
        self.starts: list[int] = []
        self.dimensions = dimensions
        self.size = 0

    def append(self, rows: Matrix) -> None:
        self.parts.append(rows)
        self.starts.append(self.size)
        self.size += len(rows)

    def take(self, positions: npt.NDArray[np.intp]) -> Matrix:
        found: Matrix = np.empty((len(positions), self.dimensions), dtype=np.float32)
        for part, mask in _by_part(self.starts, positions):
            found[mask] = self.parts[part][positions[mask] - self.starts[part]]
        return found


def expansion_for(graphs: int) -> int:
    """``expansion_search`` when the setting leaves it to the corpus: 512 for each of up to five graphs, then
    :data:`EXPANSION_TOTAL` candidates shared among the graphs, at least :data:`EXPANSION_LEAST` each."""
    return max(EXPANSION_LEAST, min(EXPANSION_MOST, EXPANSION_TOTAL // max(graphs, 1)))


_USEARCH_STOPPED = "Operation has been terminated"
"""What usearch raises when a signal handler raised while it worked (it drops the handler's exception)."""


class HnswIndex:
    """usearch's HNSW graphs over the rows (inner product), their candidates rescored with the float32 rows.

    The rows are cut into graphs of at most ``graph_rows`` consecutive rows; every graph is searched and hands on
    its best ``rescored`` candidates, which are ranked by their exact float32 scores. A graph stores its rows as
    ``dtype`` (i8 by default: a quarter of float32's bytes, so a search compares more candidates per millisecond);
    unless that is f32, the float32 rows are kept beside the graphs for the rescoring.
    """

    kind: IndexKind = "hnsw"

    def __init__(self, blocks: Blocks, dimensions: int, settings: HnswSettings) -> None:
        self._module: Any = import_backend("usearch.index", ANN_EXTRA)
        self._settings = settings
        self.graphs: list[Any] = []
        self._starts: list[int] = []
        self._float32 = _Float32Rows(dimensions) if settings.dtype != "f32" else None
        self.dimensions = dimensions
        self.size = 0
        for block in blocks:
            rows = np.ascontiguousarray(block, dtype=np.float32)
            if self._float32 is not None:
                self._float32.append(rows)
            taken = 0
            while taken < len(rows):
                part = rows[taken : taken + self._room()]
                keys = np.arange(self.size, self.size + len(part), dtype=np.uint64)
                with signals_raised_from(_USEARCH_STOPPED):
                    self.graphs[-1].add(keys, part, threads=settings.build_threads)
                self.size += len(part)
                taken += len(part)
        self.expansion_search = settings.expansion_search or expansion_for(len(self.graphs))
        for graph in self.graphs:
            graph.expansion_search = self.expansion_search

    def _room(self) -> int:
        """Rows the last graph can still take, after opening a new one when it is full."""
        held = self.size - self._starts[-1] if self._starts else 0
        if not self.graphs or held >= self._settings.graph_rows:
            settings = self._settings
            self.graphs.append(
                self._module.Index(
                    ndim=self.dimensions,
                    metric="ip",
                    dtype=settings.dtype,
                    connectivity=settings.connectivity,
                    expansion_add=settings.expansion_add,
                )
            )
            self._starts.append(self.size)
            held = 0
        return self._settings.graph_rows - held

    def search(self, query: Matrix, limit: int) -> tuple[npt.NDArray[np.intp], Matrix]:
        """Each graph's best candidates (``rescored``, at least ``limit``), rescored exactly, the best ``limit``."""
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        count = max(limit, RECALL_K, self._settings.rescored)

        def keys(graph: Any) -> npt.NDArray[np.intp]:
            with signals_raised_from(_USEARCH_STOPPED):
                return np.asarray(graph.search(vector, count, threads=1).keys, dtype=np.intp)

        found = each(keys, self.graphs, scoring_threads())
        positions = np.concatenate(found) if found else np.zeros(0, dtype=np.intp)
        if not len(positions):
            return positions, np.zeros(0, dtype=np.float32)
        scores = row_scores(self.rows(positions), vector)
        return _scored(positions, scores, limit)

    def rows(self, positions: Sequence[int] | npt.NDArray[np.intp]) -> Matrix:
        """The float32 rows by position."""
        wanted = np.asarray(positions, dtype=np.intp)
        if self._float32 is not None:
            return self._float32.take(wanted)
        found: Matrix = np.empty((len(wanted), self.dimensions), dtype=np.float32)
        for part, mask in _by_part(self._starts, wanted):
            found[mask] = np.asarray(self.graphs[part].get(wanted[mask].astype(np.uint64)), dtype=np.float32)
        return found

    def blocks(self) -> Iterator[Matrix]:
        """The float32 rows, a block at a time."""
        for start in range(0, self.size, _DENSE_BLOCK_ROWS):
            yield self.rows(np.arange(start, min(start + _DENSE_BLOCK_ROWS, self.size)))


def _dense(block: Matrix | sparse.csr_matrix) -> Matrix:
    rows: Matrix = block.toarray() if isinstance(block, sparse.csr_matrix) else block
    return rows


def build_index(plan: IndexPlan, blocks: Iterable[Matrix | sparse.csr_matrix], dimensions: int) -> VectorIndex:
    """The planned index over a provider's rows (dense blocks, or CSR blocks for a sparse index)."""
    if plan.kind == "sparse":
        return SparseIndex(blocks)
    dense = (_dense(block) for block in blocks)
    if plan.kind == "hnsw":
        return HnswIndex(dense, dimensions, plan.hnsw)
    parts = list(dense)
    matrix = np.concatenate(parts) if parts else np.zeros((0, dimensions), dtype=np.float32)
    return ExactIndex(np.ascontiguousarray(matrix, dtype=np.float32))


def merged_rows(stored: tuple[Sequence[str], Matrix] | None, ids: list[str], rows: Matrix) -> tuple[list[str], Matrix]:
    """A provider's stored rows with these replacing or joining them (the last row of a repeated ID wins)."""
    position = {chunk_id: index for index, chunk_id in enumerate(ids)}
    new_ids, new_rows = list(position), rows[list(position.values())]
    if stored is None:
        return new_ids, new_rows
    old_ids, old_matrix = stored
    if old_matrix.shape[1] != rows.shape[1]:
        raise ValueError(f"{rows.shape[1]} dimensions, but this provider's rows have {old_matrix.shape[1]}")
    kept = [i for i, chunk_id in enumerate(old_ids) if chunk_id not in position]
    return [*(old_ids[i] for i in kept), *new_ids], np.concatenate([old_matrix[kept], new_rows])


# --- measured, not assumed ------------------------------------------------------------------------------------------


def exact_top(blocks: Blocks, queries: Matrix, limit: int) -> list[tuple[npt.NDArray[np.intp], Matrix]]:
    """Exact float32 top ``limit`` positions and scores of each query row, reading the rows a block at a time."""
    best: list[tuple[npt.NDArray[np.intp], Matrix]] = [
        (np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.float32)) for _ in range(len(queries))
    ]
    start = 0
    for block in blocks:
        for index, query in enumerate(queries):
            scores = row_scores(block, query)
            local = top_positions(scores, limit, floor=-np.inf)
            positions, values = best[index]
            best[index] = _scored(
                np.concatenate([positions, local + start]), np.concatenate([values, scores[local]]), limit
            )
        start += len(block)
    return best


TIE_TOLERANCE = 1e-6
"""Scores this close to the exact k-th score count as tied with it (a sparse sum may differ in its last bits)."""


def recall_of(found: Sequence[Sequence[float]], exact: Sequence[Sequence[float]]) -> float:
    """Mean over the queries of the share of the exact top k that the index found, ties counted as found.

    ``found`` and ``exact`` hold each query's scores (the index's hits, exact search's top k, best first). A found
    hit belongs to the exact top k when its score reaches the exact k-th score (less :data:`TIE_TOLERANCE`): any of
    the rows tied at the cut-off is as right as another. A query without exact hits counts 1.0.
    """
    values = []
    for got, want in zip(found, exact, strict=True):
        if not len(want):
            values.append(1.0)
            continue
        cutoff = min(want) - TIE_TOLERANCE
        values.append(min(sum(score >= cutoff for score in got), len(want)) / len(want))
    return float(np.mean(values)) if values else 1.0


def recall_at(index: VectorIndex, exact: Sequence[Matrix], queries: Matrix, k: int = RECALL_K) -> float:
    """Mean recall@k of the index's answers to ``queries`` against exact search's top-k scores ``exact``."""
    found = [index.search(query, k)[1].tolist() for query in queries]
    return recall_of(found, [reference[:k].tolist() for reference in exact])


def recall_sample(count: int, seed: int = 0, size: int = RECALL_SAMPLE) -> list[int]:
    """A seeded sample of ``size`` query positions out of ``count`` (all of them when there are fewer), ascending."""
    if count <= size:
        return list(range(count))
    return sorted(np.random.default_rng(seed).choice(count, size=size, replace=False).tolist())
