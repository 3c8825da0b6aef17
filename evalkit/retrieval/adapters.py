"""The built-in knowledge service, and any function returning :class:`~evalkit.retrieval.database.Hit` lists, as
:class:`~evalkit.retrieval.retriever.Retriever` implementations.

They live apart from the protocol so that a user's retriever, which imports :mod:`evalkit.retrieval.retriever`, does
not import the knowledge service and its SQLite database.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from evalkit.data.schema import Language
from evalkit.retrieval.database import Hit
from evalkit.retrieval.service import KnowledgeService, Mode

__all__ = ["HitsRetriever", "KnowledgeServiceRetriever"]


class HitsRetriever:
    """A function returning :class:`~evalkit.retrieval.database.Hit` lists (the bm25s baseline, say), as a
    :class:`~evalkit.retrieval.retriever.Retriever`."""

    def __init__(self, search_fn: Callable[[str, Language], list[Hit]]) -> None:
        self._search = search_fn

    def search(self, text: str, language: Language, k: int) -> Sequence[tuple[str, float]]:
        """The function's hits, cut at k."""
        return [(h.chunk_id, h.score) for h in self._search(text, language)[:k]]


class KnowledgeServiceRetriever(HitsRetriever):
    """The built-in knowledge service in one mode, as a :class:`~evalkit.retrieval.retriever.Retriever`."""

    def __init__(self, service: KnowledgeService, mode: Mode) -> None:
        super().__init__(lambda text, language: service.search(text, mode, language))
        self.service = service
        self.mode = mode
