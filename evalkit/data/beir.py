"""Read and write the BEIR format: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` (graded qrels).

:func:`read_beir` turns a BEIR directory into a strict fixture, forgiving what real files contain and recording every
repair and skip in a :class:`~evalkit.data.repairs.RepairLog`; :func:`write_beir` writes a fixture as a BEIR
directory that BEIR's ``GenericDataLoader``, ranx, ir_measures and pyserini read. Records map as described in
:mod:`evalkit.data.collection`; the writer puts languages, document IDs, tags and answer spans into the records'
``metadata``, so that a fixture written and read back has the same corpus hash, queries and judgments.

The qrels file is tab-separated ``query-id  corpus-id  score`` with an optional header line (BEIR writes one);
extra columns are ignored, as trec_eval ignores them.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.data import collection
from evalkit.data.collection import CollectionOptions, Qrel
from evalkit.data.fixture import Fixture
from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES
from evalkit.data.repairs import RepairLog
from evalkit.data.sources import source_lines

__all__ = ["CORPUS_FILE", "QUERIES_FILE", "beir_files", "qrels_tsv", "read_beir", "read_qrels_tsv", "write_beir"]

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
_HEADER = ("query-id", "corpus-id", "score")


def read_qrels_tsv(path: Path, label: str, log: RepairLog, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> list[Qrel]:
    """The graded qrels of a BEIR qrels TSV file of at most `max_bytes`, in file order (see the module docstring).

    The file is read like every source file (:func:`evalkit.data.sources.source_lines`).
    """
    qrels: list[Qrel] = []
    for number, (where, line) in enumerate(source_lines(path, label, max_bytes), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if number == 1 and tuple(f.strip().lower() for f in fields[:3]) == _HEADER:
            continue
        if len(fields) < 3:
            log.failures.append(
                f"{where}: needs 3 tab-separated fields (query-id, corpus-id, score), has {len(fields)}"
            )
            continue
        query, chunk, score = (f.strip() for f in fields[:3])
        if not query or not chunk:
            log.failures.append(f"{where}: field {'query-id' if not query else 'corpus-id'!r}: must not be blank")
            continue
        qrel = collection.parse_qrel(query, chunk, score, where, log)
        if qrel is not None:
            qrels.append(qrel)
    return qrels


def read_beir(
    directory: Path,
    split: str,
    options: CollectionOptions,
    log: RepairLog,
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> Fixture:
    """The fixture of the BEIR directory `directory` with the qrels of `split` (``qrels/<split>.tsv``); each file
    must be a regular file of at most `max_bytes` (see :func:`evalkit.data.sources.source_lines`).

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
    qrels = read_qrels_tsv(root / "qrels" / f"{split}.tsv", f"qrels/{split}.tsv", log, max_bytes)
    return collection.build_fixture(corpus, queries, qrels, options, log, f"BEIR {directory}")


def qrels_tsv(fixture: Fixture) -> bytes:
    """The fixture's judgments as BEIR qrels TSV with a header line, in fixture order."""
    rows = ["\t".join(_HEADER)]
    rows += [f"{q.query_id}\t{j.chunk_id}\t{j.grade}" for q in fixture.queries for j in q.judgments]
    return ("\n".join(rows) + "\n").encode("utf-8")


def beir_files(fixture: Fixture, split: str = "test") -> dict[str, bytes]:
    """Relative path -> content of the BEIR files of `fixture`."""
    return {
        CORPUS_FILE: collection.corpus_jsonl(fixture),
        QUERIES_FILE: collection.queries_jsonl(fixture),
        f"qrels/{split}.tsv": qrels_tsv(fixture),
    }


def write_beir(fixture: Fixture, directory: Path, split: str = "test") -> list[Path]:
    """Write the fixture as a BEIR directory (every file atomically, all built before any is written)."""
    return collection.write_files(beir_files(fixture, split), directory)
