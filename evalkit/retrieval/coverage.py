"""Query-term coverage: how much of a question's rare vocabulary the returned chunks contain.

An answerability signal for abstention. A question whose paragraph is missing from the corpus usually still finds
its article's other paragraphs (same topic, high BM25 and cosine), but not the rare words that point at the missing
fact. Coverage is the IDF-weighted fraction of the query's terms that occur in a chunk, taken as the best over the
first few returned chunks:

    coverage(q, R) = max_{c in R[:n]} sum_{t in T(q) & T(c)} idf(t) / sum_{t in T(q)} idf(t)

with ``T`` the analyzer's terms (:func:`~evalkit.retrieval.text.query_terms` for the query,
:func:`~evalkit.retrieval.text.tokenize` for chunks) and ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``, the BM25
IDF over the N chunks. A query without terms, or an empty ranking, has coverage NaN (no evidence either way). It
has no tuned parameter besides ``n``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from evalkit.retrieval.text import query_terms, tokenize

COVERAGE_DEPTH = 3
"""How many of the first returned chunks are looked at."""


class TermCoverage:
    """Chunk vocabularies and IDF of one corpus, for :meth:`coverage`."""

    def __init__(self, chunks: Iterable[tuple[str, str]]) -> None:
        self._terms = {chunk_id: frozenset(tokenize(text)) for chunk_id, text in chunks}
        self._frequencies: Counter[str] = Counter(t for terms in self._terms.values() for t in terms)

    def idf(self, term: str) -> float:
        """BM25 IDF of a term over the corpus's chunks (positive for every term, seen or not)."""
        n, df = len(self._terms), self._frequencies[term]
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def coverage(self, query: str, ranking: Sequence[str], depth: int = COVERAGE_DEPTH) -> float:
        """The best IDF-weighted share of the query's terms found in one of the first ``depth`` chunks; NaN when
        the query has no terms or the ranking is empty. Unknown chunk IDs raise ValueError naming them."""
        if depth < 1:
            raise ValueError(f"coverage depth must be at least 1, got {depth}")
        terms = query_terms(query)  # distinct, in the query's order: a set's order moves with the hash seed
        top = list(ranking[:depth])
        if not terms or not top:
            return math.nan
        unknown = [c for c in top if c not in self._terms]
        if unknown:
            raise ValueError(f"ranking names chunk(s) not in the corpus: {', '.join(unknown)}")
        weights = {t: self.idf(t) for t in terms}  # summed in the query's order, the same in every process
        total = sum(weights.values())
        return max(sum(w for t, w in weights.items() if t in self._terms[c]) for c in top) / total
