"""One qrels reader and one topics reader: ``evalkit import`` and ``evalkit score`` read a file the same way.

The score path reads qrels with :func:`evalkit.data.qrels.read_qrels_file`, the import path with
:func:`evalkit.data.collection.read_qrels` (over :func:`evalkit.data.qrels.read_qrels_lines`); topics with
:func:`evalkit.data.topics.read_topics` and :func:`evalkit.data.trec.tsv_query_records` or
:func:`evalkit.data.collection.read_queries` (JSONL). The same file must give the
same judgments (the importer then leaves out grade -1, "pooled, not judged", makes grades below -1 judged not
relevant, 0, and lowers grades above 3, each counted) and the same refusals, naming the file, the line and the
field.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.data.beir import read_beir
from evalkit.data.collection import CollectionOptions, Qrel, QueryRecord, read_qrels, read_queries
from evalkit.data.qrels import QrelsError, read_qrels_file, read_qrels_lines
from evalkit.data.repairs import RepairLog, RepairPolicy, SourceFormatError
from evalkit.data.topics import TopicsError, read_topics
from evalkit.data.trec import read_trec, tsv_query_records

from ..conftest import ROOT

TREC = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d3 2\nq2 0 d1 5\nq2 0 d4 -1\nq3 0 d2 3\n"
BEIR = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq1\td3\t2\nq2\td1\t5\nq2\td4\t-1\nq3\td2\t3\n"

VARIANTS = {
    "trec": (TREC, "qrels.txt", "trec"),
    "trec-gz": (TREC, "qrels.txt.gz", "trec"),
    "trec-crlf": (TREC.replace("\n", "\r\n"), "qrels.txt", "trec"),
    "trec-tabs-blank-lines-bom": ("\ufeff\n" + TREC.replace(" ", "\t").replace("\n", "\n \n"), "qrels.txt", "trec"),
    "trec-extra-columns": (TREC.replace("\n", " extra col\n"), "qrels.txt", "trec"),
    "beir-header": (BEIR, "test.tsv", "beir"),
    "beir-header-crlf-gz": (BEIR.replace("\n", "\r\n"), "test.tsv", "beir"),
    "beir-no-header": (BEIR.split("\n", 1)[1], "test.tsv", "beir"),
    "beir-extra-columns": (BEIR.replace("\n", "\tignored\n"), "test.tsv", "beir"),
}


def _write(folder: Path, name: str, text: str, compress: bool = False) -> Path:
    path = folder / name
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def _variant(tmp_path: Path, key: str) -> tuple[Path, str]:
    text, name, layout = VARIANTS[key]
    return _write(tmp_path, name, text, compress=key.endswith("gz")), layout


def _imported(qrels: list[Qrel]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for qrel in qrels:
        table.setdefault(qrel.query_id, {})[qrel.chunk_id] = qrel.grade
    return table


def _fixture_grades(scored: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """What the importer makes of raw grades: negative grades left out (unjudged), above 3 lowered to 3; a query
    whose every grade is negative has no judgment left."""
    table = {q: {d: min(g, 3) for d, g in docs.items() if g >= 0} for q, docs in scored.items()}
    return {q: docs for q, docs in table.items() if docs}


def _counts(log: RepairLog) -> dict[str, int]:
    return {kind: item.count for kind, item in log.repairs().items()}


# --- qrels: the same judgments ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(VARIANTS))
def test_import_and_score_read_the_same_judgments(tmp_path: Path, key: str) -> None:
    path, layout = _variant(tmp_path, key)
    scored = read_qrels_file(path).as_dict()
    assert scored == {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d1": 5, "d4": -1}, "q3": {"d2": 3}}
    log = RepairLog(RepairPolicy())
    imported = _imported(read_qrels(path, log, layout))
    # the importer keeps grades 0-3: 0 judged not relevant, -1 (pooled, not judged) left out, above 3 lowered
    assert imported == _fixture_grades(scored)
    assert imported["q1"]["d2"] == 0 and "d4" not in imported["q2"]
    assert _counts(log) == {"pooled_not_judged": 1, "grade_above_3": 1}
    assert log.failures == []


@pytest.mark.parametrize("key", sorted(VARIANTS))
def test_the_importer_names_the_line_each_judgment_came_from(tmp_path: Path, key: str) -> None:
    path, layout = _variant(tmp_path, key)
    raw = gzip.decompress(path.read_bytes()) if key.endswith("gz") else path.read_bytes()
    lines = raw.decode("utf-8").removeprefix("\ufeff").split("\n")
    qrels = read_qrels(path, RepairLog(RepairPolicy()), layout)
    assert len(qrels) == 5
    for qrel in qrels:
        number = int(qrel.where.rsplit(" ", 1)[1])
        assert lines[number - 1].split()[0] == qrel.query_id
        assert qrel.chunk_id in lines[number - 1].split()


def test_the_order_of_the_file_is_kept_by_the_import(tmp_path: Path) -> None:
    path = _write(tmp_path, "qrels.txt", "q2 0 z 1\nq1 0 b 2\nq2 0 a 3\n")
    assert [(q.query_id, q.chunk_id) for q in read_qrels(path, RepairLog(RepairPolicy()), "trec")] == [
        ("q2", "z"),
        ("q1", "b"),
        ("q2", "a"),
    ]
    assert read_qrels_file(path).docs.to_pylist() == ["b", "a", "z"]  # the scoring form is sorted


def test_repeated_lines_are_one_judgment_on_both_paths(tmp_path: Path) -> None:
    path = _write(tmp_path, "qrels.txt", "q1 0 d1 1\nq1 0 d1 1\nq1 0 d2 2\n")
    scored = read_qrels_file(path)
    assert (scored.as_dict(), scored.duplicates) == ({"q1": {"d1": 1, "d2": 2}}, 1)
    rows = read_qrels_lines(path)
    assert (rows.query_ids, rows.doc_ids, rows.grades, rows.lines) == (
        ["q1", "q1", "q1"],
        ["d1", "d1", "d2"],
        [1, 1, 2],
        [1, 2, 3],
    )


def test_grade_zero_is_kept_and_negative_grades_left_unjudged_unless_repaired(tmp_path: Path) -> None:
    text = "q1 0 d1 0\nq1 0 d2 -1\nq2 0 d1 0\nq2 0 d2 1\nq2 0 d3 -2\nq2 0 d4 -1\nq3 0 d1 -1\n"
    path = _write(tmp_path, "qrels.txt", text)
    log = RepairLog(RepairPolicy())
    assert _imported(read_qrels(path, log, "trec")) == {"q1": {"d1": 0}, "q2": {"d1": 0, "d2": 1}}
    skipped, negative = log.repairs()["pooled_not_judged"], log.repairs()["negative_grade"]
    assert (skipped.action, skipped.count, skipped.examples) == ("skip", 3, ("q1/d2", "q2/d4", "q3/d1"))
    assert (negative.action, negative.count, negative.examples) == ("skip", 1, ("q2/d3",))
    # -2 made judged not relevant when asked; strict refuses both, naming the file, the line and the field
    repair = RepairLog(RepairPolicy.from_choices({"negative_grade": "repair"}))
    assert _imported(read_qrels(path, repair, "trec")) == {"q1": {"d1": 0}, "q2": {"d1": 0, "d2": 1, "d3": 0}}
    strict = RepairLog(RepairPolicy.strict())
    read_qrels(path, strict, "trec")
    assert strict.failures[:2] == [
        "qrels.txt line 2: field 'grade': grade -1 (pooled, not judged) "
        "(refused as pooled_not_judged; --on-pooled-not-judged skip accepts it)",
        "qrels.txt line 5: field 'grade': grade -2 is negative (trec_eval reads it as not judged) "
        "(refused as negative_grade; --on-negative-grade skip/repair accepts it)",
    ]
    assert len(strict.failures) == 4


# --- qrels: the same refusals ------------------------------------------------------------------------------------


def _collection(folder: Path, qrels: str) -> tuple[Path, Path, Path]:
    folder.mkdir(exist_ok=True)
    corpus = folder / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"_id": d, "text": f"text {d}"}) + "\n" for d in ("d1", "d2", "d3")), encoding="utf-8"
    )
    topics = _write(folder, "topics.tsv", "q1\tfirst query\nq2\tsecond query\n")
    return _write(folder, "qrels.txt", qrels), topics, corpus


def _options() -> CollectionOptions:
    return CollectionOptions(fixture_id="agree", license="CC0-1.0", attribution="Reader agreement test data.")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("q1 0 d1 1\nq1 0 d2 x\n", "qrels.txt line 2: field 'grade': 'x' is not an integer"),
        ("q1 0 d1 1\nq1 0 d2 2.0\n", "qrels.txt line 2: field 'grade': '2.0' is not an integer"),
        ("q1 0 d1 1\n\nq1 0 d2\n", "qrels.txt line 3: needs 4 columns (query-id iteration doc-id grade), has 3"),
        ("q1 0 d1 1 x\nq1 0 d2 z 9\n", "qrels.txt line 2: field 'grade': 'z' is not an integer"),
        ("q1 0 d1 1\nq1 0 d\u202e2 1\n", "qrels.txt line 2: field 'doc-id': 'd\\u202e2' holds a control"),
        ("q1 0 d1 1\nq1 0 d1 2\n", "query 'q1' document 'd1': judged twice with different grades (1 and 2)"),
    ],
    ids=["grade", "decimal-grade", "short", "width", "bidi", "conflict"],
)
def test_a_bad_line_is_refused_by_both_paths_naming_file_and_line(tmp_path: Path, text: str, problem: str) -> None:
    qrels, topics, corpus = _collection(tmp_path, text)
    with pytest.raises(QrelsError) as scored:
        read_qrels_file(qrels)
    assert problem in str(scored.value)
    with pytest.raises(SourceFormatError) as imported:
        read_trec(qrels, topics, corpus, _options(), RepairLog(RepairPolicy()))
    assert problem in str(imported.value)
    assert any(p.startswith("qrels.txt") and problem in p for p in imported.value.problems)


def test_a_file_that_cannot_be_read_is_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(SourceFormatError, match=r"absent.txt: file not found"):
        read_qrels(tmp_path / "absent.txt", RepairLog(RepairPolicy()), "trec")
    with pytest.raises(QrelsError, match=r"absent.txt: file not found"):
        read_qrels_file(tmp_path / "absent.txt")


def test_a_given_layout_is_kept_whatever_the_first_line_looks_like(tmp_path: Path) -> None:
    """Told from its first line, a three-column line is BEIR; an importer that knows the file is TREC refuses it."""
    path = _write(tmp_path, "qrels.txt", "q1 d1 1\n")
    assert read_qrels_file(path).as_dict() == {"q1": {"d1": 1}}
    log = RepairLog(RepairPolicy())
    assert read_qrels(path, log, "trec") == []
    assert log.failures == ["qrels.txt line 1: needs 4 columns (query-id iteration doc-id grade), has 3"]
    beir = _write(tmp_path, "test.tsv", "q1\td1\t1\tnote\n")  # BEIR with an extra column, no header
    assert _imported(read_qrels(beir, RepairLog(RepairPolicy()), "beir")) == {"q1": {"d1": 1}}


def test_a_beir_directory_imports_the_judgments_the_score_path_reads(tmp_path: Path) -> None:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": d, "title": d, "text": f"text {d}"} for d in ("d1", "d2", "d3", "d4")]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    queries = [{"_id": q, "text": f"query {q}"} for q in ("q1", "q2", "q3", "q4")]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    qrels = _write(folder / "qrels", "test.tsv", BEIR.replace("\n", "\r\n"))
    log = RepairLog(RepairPolicy())
    fixture = read_beir(folder, "test", _options(), log)
    imported = {q.query_id: {j.chunk_id: j.grade for j in q.judgments} for q in fixture.queries if q.judgments}
    scored = read_qrels_file(qrels).as_dict()
    assert imported == _fixture_grades(scored)
    assert _counts(log)["pooled_not_judged"] == 1


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["q1", "q2", "003"]), st.sampled_from(["d1", "d2", "1e5"]), st.integers(-2, 5)),
        max_size=12,
    ),
    blanks=st.lists(st.sampled_from(["", " ", "\t", " \t "]), max_size=12),
    layout=st.sampled_from(["trec", "beir", "beir-header"]),
    ending=st.sampled_from(["\n", "\r\n"]),
    compress=st.booleans(),
)
def test_both_paths_agree_on_any_written_file(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[tuple[str, str, int]],
    blanks: list[str],
    layout: str,
    ending: str,
    compress: bool,
) -> None:
    first: dict[tuple[str, str], int] = {}
    kept = [(q, d, g) for q, d, g in rows if first.setdefault((q, d), g) == g]  # no conflicting pair
    lines = ["query-id\tcorpus-id\tscore"] if layout == "beir-header" else []
    for index, (q, d, g) in enumerate(kept):
        lines += blanks[index : index + 1]
        lines.append(f"{q} 0 {d} {g}" if layout == "trec" else f"{q}\t{d}\t{g}")
    path = _write(tmp_path_factory.mktemp("qrels"), "q.gz" if compress else "q", ending.join(lines), compress)
    log = RepairLog(RepairPolicy())
    imported = read_qrels(path, log, "trec" if layout == "trec" else "beir")
    expected: dict[str, dict[str, int]] = {}
    for q, d, g in kept:
        expected.setdefault(q, {})[d] = g
    assert read_qrels_file(path).as_dict() == expected
    assert _imported(imported) == _fixture_grades(expected)
    numbered = [number for number, line in enumerate(lines, 1) if line.strip() and not line.startswith("query-id")]
    assert [int(q.where.rsplit(" ", 1)[1]) for q in imported] == [
        n for n, (_, _, g) in zip(numbered, kept, strict=True) if g >= 0
    ]


# --- topics: one reader -----------------------------------------------------------------------------------------

TOPICS = "qid\ttext\nq1\t如何重置密码\n\nq2\tOpen the 回收站 folder\r\n 003 \tHow do I reset\tmy password?\n"


def _jsonl(*records: object) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _imported_topics(path: Path) -> tuple[list[QueryRecord], RepairLog]:
    """The queries ``evalkit import`` reads from a topics file (TREC's rule: ``.tsv`` is TSV, else JSONL)."""
    log = RepairLog(RepairPolicy())
    if path.suffix == ".tsv":
        return tsv_query_records(path, _options(), log), log
    return read_queries(path, path.name, _options(), log), log


def test_import_and_score_read_the_same_topics(tmp_path: Path) -> None:
    path = _write(tmp_path, "topics.tsv", TOPICS)
    languages = read_topics(path)
    log = RepairLog(RepairPolicy())
    queries = tsv_query_records(path, _options(), log)  # language "auto": detected per query, as read_topics does
    assert {q.query_id: q.language for q in queries} == languages == {"q1": "zh", "q2": "en", "003": "en"}
    assert [q.text for q in queries] == ["如何重置密码", "Open the 回收站 folder", "How do I reset\tmy password?"]
    assert log.failures == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("q1\thello\nq2 hello\n", "topics.tsv line 2: needs 2 tab-separated fields (query-id, text), has 1"),
        ("q1\thello\n\tno id\n", "topics.tsv line 2: field 'query-id': must not be blank"),
        (
            "q1\thello\nq\x1b2\tbye\n",
            "topics.tsv line 2: field 'query-id': 'q\\x1b2' holds a control or bidirectional character",
        ),
    ],
)
def test_a_bad_topics_line_is_refused_by_both_paths_naming_file_and_line(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = _write(tmp_path, "topics.tsv", text)
    with pytest.raises(TopicsError, match=re.escape(problem)):
        read_topics(path)
    log = RepairLog(RepairPolicy())
    tsv_query_records(path, _options(), log)
    assert log.failures == [problem]


@pytest.mark.parametrize("name", ["topics.tsv", "topics.jsonl"])
def test_a_query_listed_again_the_same_is_kept_once_by_both_paths(tmp_path: Path, name: str) -> None:
    text = "q1\thello\nq2\t你好\nq1\thello\n"
    if name.endswith(".jsonl"):
        text = _jsonl({"_id": "q1", "text": "hello"}, {"_id": "q2", "text": "你好"}, {"qid": "q1", "query": "hello"})
    path = _write(tmp_path, name, text)
    queries, log = _imported_topics(path)
    assert {q.query_id: q.language for q in queries} == read_topics(path) == {"q1": "en", "q2": "zh"}
    assert [q.text for q in queries] == ["hello", "你好"]
    assert _counts(log) == {"duplicate_id": 1} and log.failures == []


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        (
            "topics.tsv",
            "q1\thello\nq1\tagain\n",
            "topics.tsv line 2: field 'query-id': query 'q1' is listed again with another text than at topics.tsv "
            "line 1",
        ),
        (
            "topics.jsonl",
            _jsonl({"_id": "q1", "text": "hello"}, {"_id": "q1", "text": "hello", "language": "zh"}),
            "topics.jsonl line 2: field '_id': query 'q1' is listed again with another language than at "
            "topics.jsonl line 1",
        ),
        (
            "topics.jsonl",
            _jsonl({"_id": "q1", "text": "hello"}, {"_id": True, "text": "x"}),
            "topics.jsonl line 2: field '_id': must be a string or an integer, not bool",
        ),
        (
            "topics.jsonl",
            _jsonl({"_id": "q1", "text": "hello"}, {"query_id": 2.0, "text": "x"}),
            "topics.jsonl line 2: field 'query_id': must be a string or an integer, not float",
        ),
        (
            "topics.jsonl",
            _jsonl({"_id": "q 1", "text": "hello"}),
            "topics.jsonl line 1: field '_id': 'q 1' holds whitespace",
        ),
        (
            "topics.jsonl",
            _jsonl({"_id": "q1", "text": "hello", "language": "fr"}),
            "topics.jsonl line 1: field 'language': must be 'en' or 'zh', not 'fr'",
        ),
        (
            "topics.jsonl",
            _jsonl({"qid": "q1", "query": "hello", "metadata": {"language": "de"}}),
            "topics.jsonl line 1: field 'metadata.language': must be 'en' or 'zh', not 'de'",
        ),
        (
            "topics.jsonl",
            _jsonl({"qid": "q1", "query": "hello", "language": "en", "metadata": {"language": "zh"}}),
            "topics.jsonl line 1: field 'metadata.language': 'zh' differs from field 'language': 'en'",
        ),
    ],
    ids=["tsv-repeat", "repeat", "bool-id", "float-id", "id-whitespace", "language", "metadata-language", "both"],
)
def test_a_bad_topic_is_refused_by_both_paths_naming_file_line_and_field(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(TopicsError) as scored:
        read_topics(path)
    assert str(scored.value) == f"{name}: 1 refused line(s)\n  - {problem}"
    _, log = _imported_topics(path)
    assert log.failures == [problem]
    qrels, _, corpus = _collection(tmp_path / "trec", "q1 0 d1 1\n")
    with pytest.raises(SourceFormatError) as imported:
        read_trec(qrels, path, corpus, _options(), RepairLog(RepairPolicy()))
    assert imported.value.problems == (problem,)


def test_an_integer_query_id_is_its_digits_on_both_paths(tmp_path: Path) -> None:
    topics = [
        {"query_id": 7, "text": "How do I reset my password?"},
        {"qid": 30, "query": "深色模式"},
        {"_id": "q3", "text": "Open the 回收站 folder"},
        {"_id": 4, "text": "回收站在哪里"},
    ]
    path = _write(tmp_path, "topics.jsonl", _jsonl(*topics))
    queries, log = _imported_topics(path)
    languages = {"7": "en", "30": "zh", "q3": "en", "4": "zh"}
    assert {q.query_id: q.language for q in queries} == read_topics(path) == languages
    assert _counts(log) == {} and log.failures == []
    qrels, _, corpus = _collection(tmp_path / "trec", "7 0 d1 1\n30 0 d2 2\n")
    fixture = read_trec(qrels, path, corpus, _options(), RepairLog(RepairPolicy()))
    assert {q.query_id: [j.chunk_id for j in q.judgments] for q in fixture.queries} == {
        "7": ["d1"],
        "30": ["d2"],
        "q3": [],
        "4": [],
    }


def test_a_given_language_is_read_from_either_field_by_both_paths(tmp_path: Path) -> None:
    topics = [
        {"_id": "q1", "text": "How do I reset my password?", "language": "zh"},
        {"_id": "q2", "text": "How do I reset my password?", "metadata": {"language": "zh"}},
        {"_id": "q3", "text": "如何重置密码", "language": "en", "metadata": {"language": "en", "tags": ["t"]}},
        {"_id": "q4", "text": "如何重置密码", "metadata": {"language": None}},
    ]
    path = _write(tmp_path, "topics.jsonl", _jsonl(*topics))
    queries, log = _imported_topics(path)
    expected = {"q1": "zh", "q2": "zh", "q3": "en", "q4": "zh"}  # a given language wins over detection
    assert {q.query_id: q.language for q in queries} == read_topics(path) == expected
    assert queries[2].tags == ("t",)
    assert _counts(log) == {} and log.failures == []  # the top-level language is read, not an unknown key


# --- the names of fields live in one place ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    ['"query-id", "corpus-id"', '"qid", "query_id"', '"query_id", "qid"', '"_id", "query_id"', '"text", "query"'],
)
def test_header_sets_and_key_tuples_are_spelled_once(spelling: str) -> None:
    holders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "evalkit").rglob("*.py"))
        if spelling in path.read_text(encoding="utf-8")
    ]
    assert holders == ["evalkit/data/field_names.py"], holders
