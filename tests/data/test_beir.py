"""evalkit.data.beir: reading BEIR directories forgivingly, writing fixtures as BEIR, and the round trip."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.app.cli import main
from evalkit.data.beir import read_beir, write_beir
from evalkit.data.collection import CollectionOptions, read_qrels
from evalkit.data.fixture import Fixture, load_fixture
from evalkit.data.language import detect_language
from evalkit.data.repairs import SUMMARY_FILE, ImportSummary, RepairLog, RepairPolicy, SourceFormatError
from evalkit.runs.evaluation import corpus_sha256

from ..conftest import ROOT, SYNTHETIC_DIR

GRADE_ZERO_DIR = ROOT / "tests" / "fixtures" / "judged-not-relevant"

COMMON = ["--fixture-id", "imported", "--license", "CC0-1.0", "--attribution", "Hand-written BEIR test data."]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def options(**changes: Any) -> CollectionOptions:
    values: dict[str, Any] = {"fixture_id": "imported", "license": "CC0-1.0", "attribution": "BEIR test data."}
    values.update(changes)
    return CollectionOptions(**values)


def write_beir_dir(directory: Path, corpus: list[Any], queries: list[Any], qrels: str, split: str = "test") -> Path:
    (directory / "qrels").mkdir(parents=True)
    lines = (json.dumps(r, ensure_ascii=False) if not isinstance(r, str) else r for r in corpus)
    (directory / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = (json.dumps(r, ensure_ascii=False) if not isinstance(r, str) else r for r in queries)
    (directory / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8")
    return directory


CORPUS = [
    {"_id": "d1", "title": "Trash", "text": "Deleted notes stay in the trash for 30 days.", "url": "ignored"},
    {"_id": "d2", "title": "", "text": "删除的笔记在回收站中保留 30 天。"},
    {"_id": 3, "title": "Sync", "text": "Sync runs every five minutes."},
    {"_id": "d/4", "title": "Export", "text": "Export notes as Markdown."},
    {"_id": "d5", "title": "Blank", "text": "   "},
    {"_id": "d1", "title": "Again", "text": "A second record with the same ID."},
]
QUERIES = [
    {"_id": "q1", "text": "How long are deleted notes kept?"},
    {"_id": "q2", "text": "删除的笔记保留多久？"},
    {"_id": "q3", "text": "How do I export notes?"},
    {"_id": "q4", "text": "Where is the dark mode switch?"},
    {"_id": "q5", "text": "深色模式在哪里？", "metadata": {"source": "any key is fine in metadata"}},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\td2\t5\nq3\td/4\t1\nq3\tmissing\t1\nq9\td1\t1\n"


def test_hand_made_directory_is_read_with_every_repair_counted(tmp_path: Path) -> None:
    log = RepairLog(RepairPolicy())
    fixture = read_beir(write_beir_dir(tmp_path / "b", CORPUS, QUERIES, QRELS), "test", options(), log)
    counts = {kind: item.count for kind, item in log.repairs().items()}
    assert counts == {
        "unknown_key": 1,
        "blank_text": 1,
        "blank_title": 1,
        "duplicate_id": 1,
        "id_rewritten": 1,
        "unknown_reference": 2,
        "grade_above_3": 1,
        "missing_spans": 3,
    }
    assert [c.chunk_id for c in fixture.chunks] == ["d1", "d2", "3", "d_4"]
    assert {d.doc_id: (d.language, d.title) for d in fixture.documents} == {
        "d1": ("en", "Trash"),
        "d2": ("zh", "d2"),  # blank title: the document ID
        "3": ("en", "Sync"),
        "d_4": ("en", "Export"),
    }
    judged = {q.query_id: [(j.chunk_id, j.grade) for j in q.judgments] for q in fixture.queries}
    # q1 judges d2 not relevant (score 0): kept as grade 0, with no span and no missing_spans repair
    assert judged == {"q1": [("d1", 2), ("d2", 0)], "q2": [("d2", 3)], "q3": [("d_4", 1)], "q4": [], "q5": []}
    assert fixture.queries[0].judgments[1].spans == ()
    assert [q.language for q in fixture.queries] == ["en", "zh", "en", "en", "zh"]
    span = fixture.queries[0].judgments[0].spans[0]
    assert (span.start, span.text) == (0, "Deleted notes stay in the trash for 30 days.")  # the whole chunk


def test_language_flag_and_metadata(tmp_path: Path) -> None:
    corpus = [{"_id": "d1", "title": "T", "text": "English words", "metadata": {"language": "zh"}}]
    queries = [{"_id": "q1", "text": "which words"}, {"_id": "q2", "text": "no answer here"}]
    fixture = read_beir(
        write_beir_dir(tmp_path, corpus, queries, "q1\td1\t1\n"),
        "test",
        options(language="zh"),
        RepairLog(RepairPolicy()),
    )
    assert fixture.documents[0].language == "zh"  # metadata wins
    assert [q.language for q in fixture.queries] == ["zh", "zh"]  # the flag, as no metadata says otherwise


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("删除的笔记保留多久？", "zh"),
        ("在 Settings 中打开两步验证", "zh"),
        ("Open the 回收站 folder", "en"),
        ("How long are notes kept?", "en"),
        ("12345", "en"),
    ],
)
def test_detect_language(text: str, expected: str) -> None:
    assert detect_language(text) == expected


def _round_trip_same(original: Fixture, again: Fixture) -> None:
    assert corpus_sha256(again) == corpus_sha256(original)
    assert [(q.query_id, q.text, q.language) for q in again.queries] == [
        (q.query_id, q.text, q.language) for q in original.queries
    ]
    assert [[(j.chunk_id, j.grade) for j in q.judgments] for q in again.queries] == [
        [(j.chunk_id, j.grade) for j in q.judgments] for q in original.queries
    ]


def test_round_trip_of_the_synthetic_fixture(tmp_path: Path) -> None:
    original = load_fixture(SYNTHETIC_DIR).fixture
    write_beir(original, tmp_path / "beir")
    log = RepairLog(RepairPolicy.strict())  # an evalkit export needs no repair at all
    again = read_beir(tmp_path / "beir", "test", options(language="en"), log)
    _round_trip_same(original, again)
    assert again.queries == original.queries  # tags and spans come back too, from the metadata
    assert log.repairs() == {}


def test_round_trip_keeps_judged_not_relevant_chunks(tmp_path: Path) -> None:
    original = load_fixture(GRADE_ZERO_DIR).fixture
    write_beir(original, tmp_path / "beir")
    rows = (tmp_path / "beir" / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    assert "q-zh-002\tzh-billing-02\t0" in rows and len(rows) == 1 + 8  # the header, then every judgment
    log = RepairLog(RepairPolicy.strict())  # grade 0 and its empty spans need no repair
    again = read_beir(tmp_path / "beir", "test", options(), log)
    _round_trip_same(original, again)
    assert again.queries == original.queries and again.documents == original.documents
    assert log.repairs() == {}


def test_cli_export_and_import_round_trip(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "beir", str(SYNTHETIC_DIR), "--output-dir", "out"]) == 0
    assert sorted(str(p.relative_to(workspace)) for p in (workspace / "out").rglob("*.*")) == [
        "out/corpus.jsonl",
        "out/qrels/test.tsv",
        "out/queries.jsonl",
    ]
    assert (
        (workspace / "out" / "qrels" / "test.tsv")
        .read_text(encoding="utf-8")
        .startswith("query-id\tcorpus-id\tscore\nq-en-001\tzh-trash-01\t3\n")
    )
    assert main(["import", "beir", "out", "--output-dir", "fx", *COMMON]) == 0
    assert "no repairs or skips" in capsys.readouterr().out
    _round_trip_same(load_fixture(SYNTHETIC_DIR).fixture, load_fixture(workspace / "fx").fixture)
    assert ImportSummary.model_validate_json((workspace / "fx" / SUMMARY_FILE).read_bytes()).repairs == {}


def test_export_is_deterministic(tmp_path: Path) -> None:
    fixture = load_fixture(SYNTHETIC_DIR).fixture
    first = [p.read_bytes() for p in write_beir(fixture, tmp_path / "a")]
    assert first == [p.read_bytes() for p in write_beir(fixture, tmp_path / "b")]


GOOD_QUERIES = [{"_id": "q1", "text": "trash"}, {"_id": "q2", "text": "nothing"}]
GOOD_CORPUS = [{"_id": "d1", "title": "T", "text": "trash"}]


@pytest.mark.parametrize(
    ("corpus", "queries", "qrels", "extra", "expected"),
    [
        (['{"_id": "d1", "text": '], GOOD_QUERIES, "q1\td1\t1\n", [], "corpus.jsonl line 1: not JSON"),
        (["[1, 2]"], GOOD_QUERIES, "q1\td1\t1\n", [], "corpus.jsonl line 1: must be a JSON object, not list"),
        (
            [{"_id": "d1", "text": 7}],
            GOOD_QUERIES,
            "q1\td1\t1\n",
            [],
            "corpus.jsonl line 1: field 'text': must be a string",
        ),
        (
            [{"title": "T", "text": "x"}],
            GOOD_QUERIES,
            "q1\td1\t1\n",
            [],
            "corpus.jsonl line 1: field '_id': must be a non-blank",
        ),
        (GOOD_CORPUS, [{"_id": "q1"}], "q1\td1\t1\n", [], "queries.jsonl line 1: field 'text': required"),
        (
            GOOD_CORPUS,
            GOOD_QUERIES,
            "q1\td1\thigh\n",
            [],
            "test.tsv line 1: field 'score': 'high' is not an integer",
        ),
        (
            GOOD_CORPUS,
            GOOD_QUERIES,
            "q1\td1\n",
            [],
            "test.tsv line 1: needs 3 columns (query-id corpus-id score), has 2",
        ),
        (GOOD_CORPUS, GOOD_QUERIES, "q1\td1\t7\n", ["--on-grade-above-3", "fail"], "field 'score': grade 7 is above 3"),
        (
            [{"_id": "d1", "text": "x", "metadata": {"language": "fr"}}],
            GOOD_QUERIES,
            "q1\td1\t1\n",
            [],
            "corpus.jsonl line 1: field 'metadata.language': must be 'en' or 'zh', not 'fr'",
        ),
        (
            [{"_id": "d1", "text": "x", "extra": 1}],
            GOOD_QUERIES,
            "q1\td1\t1\n",
            ["--strict"],
            "corpus.jsonl line 1: field 'extra': not a field of the format (refused as unknown_key",
        ),
        (
            [{"_id": "a/b", "text": "x"}, {"_id": "a_b", "text": "y"}],
            GOOD_QUERIES,
            "q1\ta_b\t1\n",
            [],
            "corpus.jsonl line 2: field '_id': becomes 'a_b' like 'a/b'",
        ),
    ],
)
def test_malformed_files_exit_2_naming_record_and_field(
    workspace: Path,
    capsys: pytest.CaptureFixture[str],
    corpus: list[Any],
    queries: list[Any],
    qrels: str,
    extra: list[str],
    expected: str,
) -> None:
    write_beir_dir(workspace / "b", corpus, queries, qrels)
    assert main(["import", "beir", "b", "--output-dir", "fx", *COMMON, *extra]) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert "Traceback" not in err
    assert not (workspace / "fx").exists()


def test_missing_files_and_bad_split(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_beir_dir(workspace / "b", GOOD_CORPUS, GOOD_QUERIES, "q1\td1\t1\n")
    assert main(["import", "beir", "b", "--split", "dev", "--output-dir", "fx", *COMMON]) == 2
    assert "qrels/dev.tsv: file not found" in capsys.readouterr().err
    assert main(["import", "beir", "b", "--split", "../x", "--output-dir", "fx", *COMMON]) == 2
    assert "split must be a plain file name" in capsys.readouterr().err
    assert not (workspace / "fx").exists()
    with pytest.raises(SourceFormatError, match=r"corpus\.jsonl: file not found"):
        read_beir(workspace / "nowhere", "test", options(), RepairLog(RepairPolicy()))


def test_unjudged_queries_can_be_left_out(tmp_path: Path) -> None:
    corpus = [{"_id": "d1", "text": "trash"}, {"_id": "d2", "text": "sync"}]
    queries = [*GOOD_QUERIES, {"_id": "q3", "text": "nothing either"}]
    directory = write_beir_dir(tmp_path, corpus, queries, "q1\td1\t1\nq2\td2\t0\n")
    kept = read_beir(directory, "test", options(), RepairLog(RepairPolicy()))
    assert [q.query_id for q in kept.queries] == ["q1", "q2", "q3"]
    # With "skip" q3 (no qrel) is left out; q2 is judged (its one chunk not relevant): a no-answer query that stays.
    judged = read_beir(directory, "test", options(unjudged_queries="skip"), RepairLog(RepairPolicy()))
    assert [(q.query_id, q.answerable) for q in judged.queries] == [("q1", True), ("q2", False)]
    # Without q2's judgment only q1 is left: every English query answerable, a degenerate label set.
    (directory / "qrels" / "test.tsv").write_text("q1\td1\t1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="has no no-answer query"):
        read_beir(directory, "test", options(unjudged_queries="skip"), RepairLog(RepairPolicy()))


@given(
    st.text(alphabet=st.sampled_from(["q", "d", "1", "0", "-", "3", "9", ".", "\t", "\n", " ", "x", "é"]), max_size=80)
)
@settings(max_examples=150, deadline=None)
def test_qrels_reader_never_raises_and_keeps_grades_in_range(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "test.tsv"
        path.write_text(text, encoding="utf-8")
        log = RepairLog(RepairPolicy())
        qrels = read_qrels(path, log, "beir")
    assert all(0 <= q.grade <= 3 for q in qrels)
    # each refused line is named by number; a pair judged with two grades by query and document
    assert all(problem.startswith(("test.tsv line ", "test.tsv: query ")) for problem in log.failures)
    assert all(q.where.startswith("test.tsv line ") for q in qrels)


def test_blank_title_skip_drops_the_document_and_its_qrels(tmp_path: Path) -> None:
    corpus = [{"_id": "d1", "title": "T", "text": "trash"}, {"_id": "d2", "title": " ", "text": "sync"}]
    queries = [*GOOD_QUERIES, {"_id": "q3", "text": "sync"}]
    directory = write_beir_dir(tmp_path, corpus, queries, "q1\td1\t1\nq3\td2\t1\n")
    log = RepairLog(RepairPolicy.from_choices({"blank_title": "skip"}))
    fixture = read_beir(directory, "test", options(language="en"), log)
    assert [c.chunk_id for c in fixture.chunks] == ["d1"] and [d.doc_id for d in fixture.documents] == ["d1"]
    assert {kind: item.count for kind, item in log.repairs().items()} == {
        "blank_title": 1,
        "unknown_reference": 1,
        "missing_spans": 1,
    }
    assert [q.answerable for q in fixture.queries] == [True, False, False]


def test_source_files_are_read_as_every_input_is(tmp_path: Path) -> None:
    """A FIFO is refused at once (no hang), and a JSONL line with a duplicate key is refused naming the key."""
    import os

    from evalkit.data.repairs import SourceFormatError
    from evalkit.data.sources import read_jsonl, read_source_text

    fifo = tmp_path / "corpus.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(SourceFormatError, match="only regular files are read"):
        read_source_text(fifo, "corpus")
    doubled = tmp_path / "queries.jsonl"
    doubled.write_text('{"_id": "q1", "text": "a", "text": "b"}\n', encoding="utf-8")
    with pytest.raises(SourceFormatError, match=r"queries line 1: not JSON.*'text'"):
        list(read_jsonl(doubled, "queries"))


def test_a_chunk_that_gives_its_document_another_title_is_recorded(tmp_path: Path) -> None:
    """Two records of one document (metadata.doc_id) with different titles: the first is kept and the second
    recorded as conflicting_document (it was dropped without a word); strict refuses it, naming the record."""
    corpus = [
        {"_id": "c1", "title": "Trash", "text": "Deleted notes stay in the trash.", "metadata": {"doc_id": "doc"}},
        {"_id": "c2", "title": "Another title", "text": "They are kept 30 days.", "metadata": {"doc_id": "doc"}},
        {"_id": "c3", "title": "Trash", "text": "Restore them from there.", "metadata": {"doc_id": "doc"}},
    ]
    directory = write_beir_dir(tmp_path, corpus, GOOD_QUERIES, "q1\tc1\t1\n")
    log = RepairLog(RepairPolicy())
    fixture = read_beir(directory, "test", options(language="en"), log)
    assert [(d.doc_id, d.title) for d in fixture.documents] == [("doc", "Trash")]
    repaired = log.repairs()["conflicting_document"]
    assert repaired.count == 1 and repaired.examples == ("doc",)
    with pytest.raises(SourceFormatError, match="corpus record 'c2': title or language differs"):
        read_beir(directory, "test", options(language="en"), RepairLog(RepairPolicy.strict()))
