"""The judgments alone, hashed one way whichever door brought them.

A fixture's queries and a qrels file both come down to (query ID, document ID, grade) triples. Reports carry
:func:`judgments_sha256` of those triples, so a report of ``evalkit run`` on a fixture and a report of ``evalkit
score --qrels`` on the same fixture exported as TREC qrels carry the same hash and compare query by query. Query
text, spans and languages are not part of it: the corpus and fixture hashes of a report say when those changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from evalkit.data.fixture import Fixture
from evalkit.data.qrels import Qrels

__all__ = ["fixture_judgments", "judgments_sha256", "qrels_judgments"]

Judgment = tuple[str, str, int]

_FIELD, _RECORD = b"\x1f", b"\x1e"
"""Separators no ID may hold (IDs refuse control characters), so two different sets never encode alike."""


def judgments_sha256(judgments: Iterable[Judgment]) -> str:
    """SHA-256 of the ``(query ID, document ID, grade)`` triples, independent of their order (sorted first)."""
    digest = hashlib.sha256(b"evalkit-judgments-1")
    for query_id, doc_id, grade in sorted(judgments):
        digest.update(query_id.encode("utf-8") + _FIELD + doc_id.encode("utf-8") + _FIELD + str(grade).encode())
        digest.update(_RECORD)
    return digest.hexdigest()


def fixture_judgments(fixture: Fixture) -> list[Judgment]:
    """Every judgment of a fixture's queries as a triple (a no-answer query has none)."""
    return [(q.query_id, j.chunk_id, j.grade) for q in fixture.queries for j in q.judgments]


def qrels_judgments(qrels: Qrels) -> list[Judgment]:
    """Every row of `qrels` as a triple."""
    queries = qrels.queries.to_pylist()
    return [
        (queries[q], d, g)
        for q, d, g in zip(qrels.query.tolist(), qrels.docs.to_pylist(), qrels.grades.tolist(), strict=True)
    ]
