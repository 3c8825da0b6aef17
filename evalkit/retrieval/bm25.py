"""A BM25 comparison baseline with bm25s: a reference row for benchmarks, not a production retrieval path.

It indexes the same analyzed tokens as the knowledge database (Chinese cut by rjieba, English case-folded and
Snowball-stemmed), with stopwords removed on both sides, and scores with bm25s's Lucene variant
(Robertson-style BM25 with Lucene's IDF, ln(1 + (N - df + 0.5) / (df + 0.5)); k1 = 1.5, b = 0.75, bm25s's
defaults). bm25s is an optional dependency (``pip install 'evalkit[bm25]'``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalkit.retrieval.database import Hit, order_hits
from evalkit.retrieval.embeddings import import_backend
from evalkit.retrieval.text import query_terms, tokenize


class Bm25sBaseline:
    """Lucene BM25 over the fixture's chunks, via bm25s."""

    def __init__(self, chunks: Sequence[tuple[str, str]], top_k: int = 10, k1: float = 1.5, b: float = 0.75) -> None:
        bm25s = import_backend("bm25s", "bm25")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        ordered = sorted(chunks)
        self._ids = [chunk_id for chunk_id, _ in ordered]
        self._top_k = top_k
        self._retriever: Any = bm25s.BM25(method="lucene", k1=k1, b=b)
        self._retriever.index([list(tokenize(text, drop_stopwords=True)) for _, text in ordered], show_progress=False)

    def search(self, text: str) -> list[Hit]:
        """The ``top_k`` chunks with a positive BM25 score, score descending then chunk ID."""
        known = [t for t in query_terms(text) if t in self._retriever.vocab_dict]
        if not known:
            return []
        scores = self._retriever.get_scores(known)
        hits = [Hit(chunk_id, float(score)) for chunk_id, score in zip(self._ids, scores, strict=True) if score > 0]
        return order_hits(hits)[: self._top_k]
