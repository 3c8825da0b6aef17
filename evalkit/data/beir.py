"""Read and write the BEIR format: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` (graded qrels).

:func:`read_beir` turns a BEIR directory into a strict fixture, forgiving what real files contain and recording every
repair and skip in a :class:`~evalkit.data.repairs.RepairLog`; :func:`write_beir` writes a fixture as a BEIR
directory that BEIR's ``GenericDataLoader``, ranx, ir_measures and pyserini read. Records map as described in
:mod:`evalkit.data.collection`; the writer puts languages, document IDs, tags and answer spans into the records'
``metadata``, so that a fixture written and read back has the same corpus hash, queries and judgments.

The qrels file is ``query-id  corpus-id  score`` (tab-separated as BEIR writes it; any run of spaces or tabs
separates columns) with an optional header line (BEIR writes one); extra columns are ignored, as trec_eval ignores
them. It is read by the one qrels reader (:func:`evalkit.data.collection.read_qrels` over
:func:`evalkit.data.qrels.read_qrels_lines`), so ``evalkit import beir`` and ``evalkit score --qrels`` read it the
same way.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.data import collection, collection_files
from evalkit.data.collection import CollectionOptions
from evalkit.data.field_names import BEIR_QRELS_HEADER
from evalkit.data.fixture import Fixture
from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES
from evalkit.data.repairs import RepairLog

__all__ = ["CORPUS_FILE", "QUERIES_FILE", "beir_files", "qrels_tsv", "read_beir", "write_beir"]

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"


def read_beir(
    directory: Path,
    split: str,
    options: CollectionOptions,
    log: RepairLog,
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> Fixture:
    """The fixture of the BEIR directory `directory` with the qrels of `split` (``qrels/<split>.tsv``); each file
    must be a regular file of at most `max_bytes` (read through :mod:`evalkit.data.tables`' guarded door).

    Raises:
        SourceFormatError: a missing or malformed file, or a problem the log's policy refuses, naming file, line
            and field.
        FixtureError: any other schema refusal, naming the record.
    """
    if not split or "/" in split or "\\" in split or split.startswith("."):
        raise ValueError(f"split must be a plain file name such as 'test', not {split!r}")
    root = Path(directory)
    corpus = collection.read_corpus(root / CORPUS_FILE, CORPUS_FILE, options, log, max_bytes)
    queries = collection.read_queries(root / QUERIES_FILE, QUERIES_FILE, options, log, max_bytes)
    qrels = collection.read_qrels(root / "qrels" / f"{split}.tsv", log, "beir", max_bytes)
    return collection.build_fixture(corpus, queries, qrels, options, log, f"BEIR {directory}")


def qrels_tsv(fixture: Fixture) -> bytes:
    """The fixture's judgments as BEIR qrels TSV with a header line, in fixture order."""
    rows = ["\t".join(BEIR_QRELS_HEADER)]
    rows += [f"{q.query_id}\t{j.chunk_id}\t{j.grade}" for q in fixture.queries for j in q.judgments]
    return ("\n".join(rows) + "\n").encode("utf-8")


def beir_files(fixture: Fixture, split: str = "test") -> dict[str, bytes]:
    """Relative path -> content of the BEIR files of `fixture`."""
    return {
        CORPUS_FILE: collection_files.corpus_jsonl(fixture),
        QUERIES_FILE: collection_files.queries_jsonl(fixture),
        f"qrels/{split}.tsv": qrels_tsv(fixture),
    }


def write_beir(fixture: Fixture, directory: Path, split: str = "test") -> list[Path]:
    """Write the fixture as a BEIR directory (every file atomically, all built before any is written)."""
    return collection_files.write_files(beir_files(fixture, split), directory)
