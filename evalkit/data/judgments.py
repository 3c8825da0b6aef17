"""The judgments alone, hashed one way whichever door brought them.

A fixture's queries and a qrels file both come down to (query ID, document ID, grade) triples. Reports carry
:func:`judgments_sha256` of those triples, so a report of ``evalkit run`` on a fixture and a report of ``evalkit
score --qrels`` on the same fixture exported as TREC qrels carry the same hash and compare query by query. Query
text, spans and languages are not part of it: the corpus and fixture hashes of a report say when those changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalkit.data.fixture import Fixture
from evalkit.data.qrels import Qrels

__all__ = ["fixture_judgments", "judgments_sha256", "qrels_judgments", "qrels_sha256"]

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


_ROWS = 1 << 20
"""Judgments encoded at a time by :func:`qrels_sha256`."""


def qrels_sha256(qrels: Qrels) -> str:
    """:func:`judgments_sha256` of every row of `qrels`, the same digest, encoded by Arrow a block of rows at a time
    instead of a Python loop over triples (2.2 s to about 0.1 s for a million judgments). The rows are in the order
    the triples sort in already: queries by code, which follow their IDs' code points, and within a query the
    documents in code-point order, each (query, document) once (:class:`~evalkit.data.qrels.Qrels`)."""
    digest = hashlib.sha256(b"evalkit-judgments-1")
    field, record = _FIELD.decode("ascii"), _RECORD.decode("ascii")
    for start in range(0, len(qrels), _ROWS):
        end = min(start + _ROWS, len(qrels))
        queries = qrels.queries.take(pa.array(qrels.query[start:end]))
        docs = qrels.docs.slice(start, end - start).combine_chunks().cast(pa.string())
        grades = pc.cast(pa.array(qrels.grades[start:end]), pa.string())
        lines = pc.binary_join_element_wise(queries, docs, grades, field)
        lines = pc.binary_join_element_wise(lines, pa.scalar(""), record)  # each line ends with the record mark
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32, count=len(lines) + 1, offset=lines.offset * 4)
        data = lines.buffers()[2]
        if data is not None:
            digest.update(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
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
