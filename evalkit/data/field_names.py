"""The names outside formats give their fields, in one place: qrels columns and the BEIR header, the header line of
a TSV topics file, the keys of a JSONL query or topic, and the columns a DataFrame of judgments or results may use.

Every reader and writer of these formats takes its names from here, so that two readers of one format never
accept different headers or keys.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BEIR_QRELS_HEADER",
    "FRAME_DOC_COLUMNS",
    "FRAME_GRADE_COLUMNS",
    "FRAME_QUERY_COLUMNS",
    "FRAME_SCORE_COLUMNS",
    "QUERY_ID_KEYS",
    "QUERY_TEXT_KEYS",
    "TOPICS_TSV_COLUMNS",
    "TOPICS_TSV_HEADERS",
    "TREC_QRELS_COLUMNS",
]

BEIR_QRELS_HEADER: Final = ("query-id", "corpus-id", "score")
"""BEIR's qrels columns, and its header line (matched without regard to case); ``score`` is the grade."""
TREC_QRELS_COLUMNS: Final = ("query-id", "iteration", "doc-id", "grade")
"""TREC qrels columns, as trec_eval reads them (the iteration is not used; columns past these are ignored)."""

TOPICS_TSV_COLUMNS: Final = ("query-id", "text")
"""The two tab-separated fields of a TSV topics line (the text may hold further tabs)."""
TOPICS_TSV_HEADERS: Final = frozenset({"qid", "query_id", "query-id", "id"})
"""A TSV topics file whose first line's first field is one of these (any case) starts with a header line."""

QUERY_ID_KEYS: Final = ("_id", "query_id", "qid")
"""The keys of a query's ID in a JSONL queries or topics record, the first present one used (BEIR's ``_id``
first)."""
QUERY_TEXT_KEYS: Final = ("text", "query", "title")
"""The keys of a query's text in a JSONL queries or topics record, the first present one used."""

FRAME_QUERY_COLUMNS: Final = ("query_id", "qid", "query-id")
"""The column of query IDs in a DataFrame of judgments or of results (the first present one)."""
FRAME_DOC_COLUMNS: Final = ("doc_id", "docid", "corpus-id", "chunk_id")
"""The column of document IDs in a DataFrame of judgments or of results."""
FRAME_GRADE_COLUMNS: Final = ("grade", "relevance", "rel", "score")
"""The column of grades in a DataFrame of judgments."""
FRAME_SCORE_COLUMNS: Final = ("score",)
"""The column of scores in a DataFrame of results."""
