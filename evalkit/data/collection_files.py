"""A fixture's corpus and queries written as JSONL, as the BEIR (:mod:`evalkit.data.beir`) and TREC
(:mod:`evalkit.data.trec`) exports write them and :mod:`evalkit.data.collection` reads them back (the mapping is
that module's docstring)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evalkit.common.output import write_atomic
from evalkit.data.fixture import Fixture

__all__ = ["corpus_jsonl", "queries_jsonl", "write_files"]


def write_files(files: Mapping[str, bytes], directory: Path) -> list[Path]:
    """Write each of `files` (path relative to `directory` -> content) atomically, creating folders; the paths
    written, in order. The caller builds every file before any is written, so a refused fixture writes nothing."""
    written: list[Path] = []
    for name, data in files.items():
        path = Path(directory) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
        written.append(path)
    return written


def _lines(records: Iterable[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def corpus_jsonl(fixture: Fixture) -> bytes:
    """The fixture's chunks as JSONL corpus records, in fixture order (see the module docstring)."""
    documents = {d.doc_id: d for d in fixture.documents}
    return _lines(
        {
            "_id": chunk.chunk_id,
            "title": documents[chunk.doc_id].title,
            "text": chunk.text,
            "metadata": {"doc_id": chunk.doc_id, "language": documents[chunk.doc_id].language},
        }
        for chunk in fixture.chunks
    )


def queries_jsonl(fixture: Fixture) -> bytes:
    """The fixture's queries as JSONL (``_id``, ``text``, metadata with language, tags and spans), in order."""
    return _lines(
        {
            "_id": query.query_id,
            "text": query.text,
            "metadata": {
                "language": query.language,
                "tags": list(query.tags),
                "spans": [
                    {"chunk_id": judgment.chunk_id, "start": span.start, "text": span.text}
                    for judgment in query.judgments
                    for span in judgment.spans
                ],
            },
        }
        for query in fixture.queries
    )
