"""Read and write TREC-style collections: a qrels file, a topics file (TSV or JSONL) and a JSONL corpus.

- **qrels**: whitespace-separated ``query-id iteration doc-id relevance`` lines, as trec_eval reads them; extra
  columns are ignored and the iteration column is not used. They are read by the one qrels reader,
  :func:`evalkit.data.collection.read_qrels` over :func:`evalkit.data.qrels.read_qrels_lines`, so ``evalkit import
  trec`` and ``evalkit score --qrels`` read a qrels file the same way.
- **topics**: TSV ``query-id<TAB>text`` (a first line ``qid``/``query_id``/``query-id``/``id`` is a header) or JSONL
  (``_id``/``query_id``/``qid``, ``text``/``query``/``title``, ``language`` or ``metadata.language``), read by the one
  topics reader, :mod:`evalkit.data.topics`, as ``evalkit score --topics`` reads them: the same ID checks, languages
  and policy on a query listed twice.
- **corpus**: the JSONL corpus of :mod:`evalkit.data.collection` (TREC has no single corpus format).

:func:`read_trec` forgives and records like every source reader; :func:`write_trec` writes ``corpus.jsonl``,
``topics.jsonl`` (or ``topics.tsv``) and ``qrels.txt``. TSV topics carry no language, tags or spans: read back, their
languages come from the ``language`` option (``auto`` detects per query) and judgments get whole-chunk spans.

The relevance column of the written qrels is chosen by name from :data:`QRELS_GAINS`:

- ``raw`` (the default): each grade as it is, so ``evalkit import trec`` reads the file back into the same
  judgments. trec_eval's ``ndcg_cut_10`` on these qrels uses the grade itself as gain (linear gain), which is
  evalkit's ``ndcg@10`` with ``gain="linear"``, not its default.
- ``exponential``: each grade ``g >= 1`` written as ``2**g - 1`` (1, 3, 7 for grades 1, 2, 3; a grade ``<= 0`` as
  0), so that trec_eval's ``ndcg_cut_10`` on the exported qrels reproduces evalkit's ``ndcg@10`` (exponential gain).
  The file then no longer holds the grades: read back, grade 2 (written 3) becomes grade 3 and grade 3 (written
  7) is lowered to 3 as ``grade_above_3``, so use ``raw`` for a round trip.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, Literal

from evalkit.data import collection, collection_files
from evalkit.data.collection import CollectionOptions, QueryRecord
from evalkit.data.fixture import Fixture
from evalkit.data.ids import check_trec_field
from evalkit.data.inputs import DEFAULT_MAX_INPUT_BYTES, clip
from evalkit.data.repairs import RepairLog, SourceFormatError
from evalkit.data.topics import TopicsError, read_tsv_topics

__all__ = [
    "DEFAULT_QRELS_GAINS",
    "QRELS_FILE",
    "QRELS_GAINS",
    "qrels_text",
    "read_trec",
    "trec_files",
    "tsv_query_records",
    "write_trec",
]

QRELS_FILE = "qrels.txt"
TopicsFormat = Literal["jsonl", "tsv"]


def tsv_query_records(
    path: Path, options: CollectionOptions, log: RepairLog, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> list[QueryRecord]:
    """The queries of a TSV topics file of at most `max_bytes`, in file order, read by the one topics reader
    (:func:`evalkit.data.topics.read_tsv_topics`) and made into queries as JSONL topics are
    (:func:`evalkit.data.collection.query_records`); each query's language is the ``language`` option's.

    Raises:
        SourceFormatError: a file that cannot be read (missing, not a regular file, too large, not UTF-8).
    """
    try:
        lines = read_tsv_topics(path, max_bytes)
    except TopicsError as exc:
        raise SourceFormatError(str(path), [str(exc)]) from None
    return collection.query_records(lines, options, log)


def read_trec(
    qrels: Path,
    topics: Path,
    corpus: Path,
    options: CollectionOptions,
    log: RepairLog,
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> Fixture:
    """The fixture of a TREC-style collection; topics ending in ``.tsv`` are TSV, any other name JSONL.

    Each file must be a regular file of at most `max_bytes` (read through :mod:`evalkit.data.tables`' guarded door).

    Raises:
        SourceFormatError: a missing or malformed file, or a problem the log's policy refuses, naming file, line
            and field.
        FixtureError: any other schema refusal, naming the record.
    """
    records = collection.read_corpus(corpus, Path(corpus).name, options, log, max_bytes)
    if Path(topics).suffix.lower() == ".tsv":
        queries = tsv_query_records(topics, options, log, max_bytes)
    else:
        queries = collection.read_queries(topics, Path(topics).name, options, log, max_bytes)
    judged = collection.read_qrels(qrels, log, "trec", max_bytes)
    return collection.build_fixture(records, queries, judged, options, log, f"TREC {qrels}")


def _raw_grade(grade: int) -> int:
    return grade


def _exponential_grade(grade: int) -> int:
    return 2**grade - 1 if grade >= 1 else 0


QRELS_GAINS: Final[dict[str, Callable[[int], int]]] = {"exponential": _exponential_grade, "raw": _raw_grade}
"""The relevance written for a grade, by name: ``raw`` is the grade, ``exponential`` ``2**grade - 1`` (0 for a grade
``<= 0``), which makes trec_eval's linear-gain ``ndcg_cut`` equal evalkit's exponential-gain nDCG."""

DEFAULT_QRELS_GAINS = "raw"


def qrels_text(fixture: Fixture, gains: str = DEFAULT_QRELS_GAINS) -> bytes:
    """The fixture's judgments as TREC qrels (``query-id 0 doc-id relevance``), in fixture order.

    The relevance is each grade mapped by ``QRELS_GAINS[gains]`` (see the module docstring); an unknown `gains`
    raises ``ValueError`` listing the valid names, and so does an ID that would break or forge a line (empty, or
    with whitespace or a control character; see :func:`evalkit.data.ids.check_trec_field`).
    """
    gain_fn = QRELS_GAINS.get(gains)
    if gain_fn is None:
        raise ValueError(f"unknown qrels gains {gains!r}; valid gains: {', '.join(sorted(QRELS_GAINS))}")
    rows = [
        f"{check_trec_field(q.query_id, 'query ID')} 0 {check_trec_field(j.chunk_id, 'chunk ID')} {gain_fn(j.grade)}\n"
        for q in fixture.queries
        for j in q.judgments
    ]
    return "".join(rows).encode("utf-8")


def _topics_tsv(fixture: Fixture) -> bytes:
    rows = []
    for query in fixture.queries:
        text = " ".join(query.text.split())  # a tab or newline in the text would break the TSV row
        rows.append(f"{query.query_id}\t{text}\n")
    return "".join(rows).encode("utf-8")


def trec_files(
    fixture: Fixture, topics_format: TopicsFormat = "jsonl", gains: str = DEFAULT_QRELS_GAINS
) -> dict[str, bytes]:
    """Relative path -> content of the TREC files of `fixture`; `gains` names the qrels relevance (QRELS_GAINS)."""
    qrels = qrels_text(fixture, gains)
    topics = collection_files.queries_jsonl(fixture) if topics_format == "jsonl" else _topics_tsv(fixture)
    corpus = collection_files.corpus_jsonl(fixture)
    return {"corpus.jsonl": corpus, f"topics.{topics_format}": topics, QRELS_FILE: qrels}


def write_trec(
    fixture: Fixture, directory: Path, topics_format: TopicsFormat = "jsonl", gains: str = DEFAULT_QRELS_GAINS
) -> list[Path]:
    """Write the fixture's corpus, topics and qrels into `directory` (atomically, all built before any is written)."""
    return collection_files.write_files(trec_files(fixture, topics_format, gains), directory)


def trec_run_bytes(rankings: Mapping[str, Sequence[tuple[str, float]]], tag: str) -> bytes:
    """A TREC run: per query (sorted by ID) one line per result in the given order, rank from 1, scores in their
    shortest exact form (``repr``), so reading the file back gives the same floats.

    Raises:
        ValueError: a query ID, chunk ID or the tag that :func:`check_trec_field` refuses, or a score that is not
            finite (the reader would refuse it), before any line is built.
    """
    check_trec_field(tag, "run tag")
    checked: set[str] = set()
    for query_id in rankings:
        check_trec_field(query_id, "query ID")
        for chunk_id, score in rankings[query_id]:
            if not math.isfinite(float(score)):
                raise ValueError(
                    f"query {clip(repr(query_id))} chunk {clip(repr(chunk_id))}: score {score!r} is not finite"
                )
            if chunk_id not in checked:
                checked.add(check_trec_field(chunk_id, f"chunk ID (query {query_id})"))
    lines = [
        f"{query_id} Q0 {chunk_id} {rank} {float(score)!r} {tag}\n"
        for query_id in sorted(rankings)
        for rank, (chunk_id, score) in enumerate(rankings[query_id], 1)
    ]
    return "".join(lines).encode("utf-8")
