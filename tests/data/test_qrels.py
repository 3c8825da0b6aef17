"""Qrels files: TREC and BEIR layouts, whitespace, duplicates, malformed lines, and a write-read property."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.data.qrels import QrelsError, qrels_from_mapping, read_qrels_file

EXPECTED = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}


def _read(folder: Path, data: bytes | str, name: str = "judgments.qrels") -> dict[str, dict[str, int]]:
    return read_qrels_file(_write(folder, name, data)).as_dict()


def _write(folder: Path, name: str, data: bytes | str) -> Path:
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.mark.parametrize(
    "text",
    [
        "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n",
        "q1\t0\td1\t1\nq1\t0\td2\t0\nq2\t0\td3\t2\n",
        "q1 \t 0\t\td1   1\nq1\t 0 d2\t0\nq2   0  d3 \t2\n",
        "  q1 0 d1 1  \n\tq1 0 d2 0\t\n q2 0 d3 2 ",
        "q1 0 d1 1\r\nq1 0 d2 0\r\nq2 0 d3 2\r\n",
        "\n\nq1 0 d1 1\n\n  \n\t\nq1 0 d2 0\r\n\r\nq2 0 d3 2\n\n",
        "\ufeffq1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2",
        "q1 0 d1 1 extra columns\nq1 0 d2 0 are ignored\nq2 0 d3 2 here too\n",
        "q1 Q0 d1 1\nq1 7 d2 0\nq2 iteration d3 2\n",
    ],
    ids=["spaces", "tabs", "mixed", "leading-trailing", "crlf", "blank-lines", "bom", "extra-columns", "iteration"],
)
def test_trec_qrels_whitespace_variants_read_the_same(tmp_path: Path, text: str) -> None:
    assert _read(tmp_path, text) == EXPECTED
    assert _read(tmp_path, gzip.compress(text.encode()), "judgments.qrels.gz") == EXPECTED
    assert _read(tmp_path, gzip.compress(text.encode()), "no-suffix") == EXPECTED
    half = len(text.encode()) // 2
    members = gzip.compress(text.encode()[:half]) + gzip.compress(text.encode()[half:])
    assert _read(tmp_path, members, "members.gz") == EXPECTED


def test_ids_that_look_like_numbers_stay_strings(tmp_path: Path) -> None:
    text = "001 0 0123 1\n001 0 1e5 2\n1 0 1 3\n2 0 NaN 0\n2 0 NULL 1\n2 0 NA 1\n2 0 true 1\n2 0 -7 1\n"
    assert _read(tmp_path, text) == {
        "001": {"0123": 1, "1e5": 2},
        "1": {"1": 3},
        "2": {"NaN": 0, "NULL": 1, "NA": 1, "true": 1, "-7": 1},
    }


def test_a_run_file_given_as_qrels_is_refused(tmp_path: Path) -> None:
    """A run's rank would be read as a grade and every run line taken as a judgment: the first line tells."""
    path = tmp_path / "bm25.trec"
    path.write_text("q1 Q0 d1 1 12.5 bm25\nq1 Q0 d2 2 11.0 bm25\n", encoding="utf-8")
    with pytest.raises(QrelsError, match=r"bm25.trec line 1: has 6 columns with Q0 in the second.*a run file given"):
        read_qrels_file(path)
    assert _read(tmp_path, "q1 Q0 d1 1\nq1 Q0 d2 0\n") == {"q1": {"d1": 1, "d2": 0}}  # four columns: qrels


def test_the_qrels_object_is_sorted_and_columnar(tmp_path: Path) -> None:
    qrels = read_qrels_file(_write(tmp_path, "j.qrels", "q2 0 b 1\nq1 0 z 2\nq1 0 a 0\n"))
    assert qrels.queries.to_pylist() == ["q1", "q2"]
    assert qrels.query.tolist() == [0, 0, 1]
    assert qrels.docs.to_pylist() == ["a", "z", "b"]  # within a query: documents in ID order
    assert qrels.grades.tolist() == [0, 2, 1]
    assert (len(qrels), qrels.duplicates, qrels.source) == (3, 0, "j.qrels")
    shuffled = read_qrels_file(_write(tmp_path, "k.qrels", "q1 0 a 0\nq2 0 b 1\nq1 0 z 2\n"))
    assert shuffled.docs.to_pylist() == qrels.docs.to_pylist()  # the order of the lines read does not matter
    assert shuffled.grades.tolist() == qrels.grades.tolist()


def test_documents_sort_by_code_point_within_each_query(tmp_path: Path) -> None:
    text = "q 0 é 1\nq 0 b 1\nq 0 文 1\nq 0 B 1\nq 0 ab 1\nq 0 a 1\n"
    qrels = read_qrels_file(_write(tmp_path, "j.qrels", text))
    assert qrels.docs.to_pylist() == ["B", "a", "ab", "b", "é", "文"]


# --- BEIR --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\n",
        "q1\td1\t1\nq1\td2\t0\nq2\td3\t2\n",
        "Query-ID\tCorpus-Id\tSCORE\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\n",
        "\ufeffquery-id\tcorpus-id\tscore\r\nq1\td1\t1\r\nq1\td2\t0\r\nq2\td3\t2\r\n",
        "\n\nquery-id\tcorpus-id\tscore\n\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\n",
        "query-id corpus-id score\nq1 d1 1\nq1  d2  0\nq2\td3 2",
    ],
    ids=["header", "no-header", "header-case", "bom-crlf", "blank-lines-around-header", "spaces"],
)
def test_beir_qrels_with_or_without_header(tmp_path: Path, text: str) -> None:
    assert _read(tmp_path, text, "test.tsv") == EXPECTED


def test_a_beir_header_alone_is_empty(tmp_path: Path) -> None:
    assert _read(tmp_path, "query-id\tcorpus-id\tscore\n", "test.tsv") == {}


# --- duplicates and grades ---------------------------------------------------------------------------------------


def test_identical_duplicates_are_collapsed_and_counted(tmp_path: Path) -> None:
    qrels = read_qrels_file(_write(tmp_path, "dup.qrels", "q1 0 d1 1\nq1 0 d1 1\nq1 9 d1 1\nq2 0 d1 0\nq2 0 d1 0\n"))
    assert qrels.as_dict() == {"q1": {"d1": 1}, "q2": {"d1": 0}}
    assert (len(qrels), qrels.duplicates) == (2, 3)


def test_conflicting_duplicates_are_refused_naming_query_document_and_grades(tmp_path: Path) -> None:
    path = _write(tmp_path, "conflict.qrels", "q1 0 d0 1\nq1 0 d1 1\nq1 0 d1 2\n")
    with pytest.raises(QrelsError) as caught:
        read_qrels_file(path)
    assert str(caught.value) == (
        "conflict.qrels: 1 conflicting judgment(s)\n"
        "  - query 'q1' document 'd1': judged twice with different grades (1 and 2)"
    )


def test_many_conflicts_list_twenty_and_count_the_rest(tmp_path: Path) -> None:
    # Regression: only 21 conflicts were kept before listing, so 30 ended "... and 1 more".
    text = "".join(f"q1 0 d{i:02} 1\nq1 0 d{i:02} 0\n" for i in range(30))
    with pytest.raises(QrelsError) as caught:
        read_qrels_file(_write(tmp_path, "c.qrels", text))
    message = str(caught.value)
    assert message.startswith("c.qrels: 30 conflicting judgment(s)")
    assert message.count("judged twice") == 20
    assert "document 'd19'" in message and "document 'd20'" not in message
    assert message.endswith("  - ... and 10 more")


def test_negative_and_zero_grades_are_kept_as_read(tmp_path: Path) -> None:
    qrels = read_qrels_file(_write(tmp_path, "neg.qrels", "q1 0 d1 -1\nq1 0 d2 -2\nq1 0 d3 0\nq2 0 d4 3\n"))
    assert qrels.as_dict() == {"q1": {"d1": -1, "d2": -2, "d3": 0}, "q2": {"d4": 3}}
    assert qrels.grades.tolist() == [-1, -2, 0, 3]


@pytest.mark.parametrize("layout", ["trec", "beir"])
def test_judged_not_relevant_and_pooled_not_judged_stay_apart_from_absent(tmp_path: Path, layout: str) -> None:
    """Grade 0 (judged, not relevant), -1 (trec_eval's pooled, not judged) and a document absent from the file
    (unjudged) are three states: the scoring reader keeps 0 and -1 as rows with their own grade, never drops them."""
    rows = [("q1", "rel", 2), ("q1", "zero", 0), ("q1", "pooled", -1), ("q2", "pooled", -1), ("q3", "zero", 0)]
    text = "".join(f"{q} 0 {d} {g}\n" if layout == "trec" else f"{q}\t{d}\t{g}\n" for q, d, g in rows)
    qrels = read_qrels_file(_write(tmp_path, "states.qrels", text))
    table = qrels.as_dict()
    assert table == {"q1": {"pooled": -1, "rel": 2, "zero": 0}, "q2": {"pooled": -1}, "q3": {"zero": 0}}
    assert table["q1"]["zero"] == 0 and table["q1"]["pooled"] == -1 and "absent" not in table["q1"]
    # a query judged only 0 or -1 is a judged query (no relevant document), not a missing one
    assert qrels.queries.to_pylist() == ["q1", "q2", "q3"]
    assert (len(qrels), qrels.grades.tolist()) == (5, [-1, 2, 0, -1, 0])


def test_grades_span_the_64_bit_range(tmp_path: Path) -> None:
    text = f"q1 0 d1 {2**63 - 1}\nq1 0 d2 {-(2**63)}\nq1 0 d3 007\n"
    assert _read(tmp_path, text) == {"q1": {"d1": 2**63 - 1, "d2": -(2**63), "d3": 7}}


# --- malformed lines ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("q1 0 d1 x", r"field 'grade': 'x' is not an integer"),
        ("q1 0 d1 1.5", r"field 'grade': '1.5' is not an integer"),
        # Regression (these three): Python's int() took them where the parser did not, so no line was named.
        ("q1 0 d1 +1", r"field 'grade': '\+1' is not an integer"),
        ("q1 0 d1 1_0", r"field 'grade': '1_0' is not an integer"),
        ("q1 0 d1 99999999999999999999", r"field 'grade': '99999999999999999999' is out of the 64-bit integer range"),
        ("q1 0 d1", r"needs 4 columns \(query-id iteration doc-id grade\), has 3"),
        ("q\x01 0 d1 1", r"field 'query-id': 'q\\x01' holds a control or bidirectional character"),
        ("q1 0 d\u202e1 1", r"field 'doc-id': 'd\\u202e1' holds a control or bidirectional character"),
        ("q1 0 d\x1f1 1", r"field 'doc-id': 'd\\x1f1' holds a control or bidirectional character"),
    ],
)
def test_a_malformed_line_names_the_file_the_line_and_the_field(tmp_path: Path, line: str, problem: str) -> None:
    path = _write(tmp_path, "bad.qrels", f"q0 0 d0 1\n\n{line}\nq2 0 d2 0\n")
    with pytest.raises(QrelsError, match=rf"^bad.qrels: 1 malformed line\(s\)\n  - bad.qrels line 3: {problem}$"):
        read_qrels_file(path)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("q1\td1\tx", r"field 'score': 'x' is not an integer"),
        ("q1\td1", r"needs 3 columns \(query-id corpus-id score\), has 2"),
        ("q1\t0\td1\t1", r"field 'score': 'd1' is not an integer"),  # a 4th column is ignored: corpus-id 0
        ("q1\td\u202e1\t1", r"field 'corpus-id': 'd\\u202e1' holds a control"),
    ],
)
def test_a_malformed_beir_line_names_the_line_and_the_field(tmp_path: Path, line: str, problem: str) -> None:
    path = _write(tmp_path, "test.tsv", f"query-id\tcorpus-id\tscore\nq0\td0\t1\n{line}\n")
    with pytest.raises(QrelsError, match=rf"test.tsv line 3: {problem}"):
        read_qrels_file(path)


def test_extra_columns_are_ignored_on_any_line(tmp_path: Path) -> None:
    """As trec_eval ignores them: one annotated line among plain ones, or fewer extras than the first line has, is
    read as the plain file is (it was refused as a line of another width)."""
    plain = read_qrels_file(_write(tmp_path, "plain.qrels", "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n"))
    for name, text in (
        ("one.qrels", "q1 0 d1 1\nq1 0 d2 0 checked twice\nq2 0 d3 2\n"),
        ("first.qrels", "q1 0 d1 1 x y\nq1 0 d2 0\nq2 0 d3 2 z\n"),
    ):
        irregular = read_qrels_file(_write(tmp_path, name, text))
        assert irregular.as_dict() == plain.as_dict() == {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
    with pytest.raises(QrelsError, match=r"bad.qrels line 2: field 'grade': 'x' is not an integer"):
        read_qrels_file(_write(tmp_path, "bad.qrels", "q1 0 d1 1\nq1 0 d2 x extra\n"))


def test_twenty_five_bad_lines_list_twenty_and_count_five_more(tmp_path: Path) -> None:
    text = "q0 0 d0 1\n" + "".join(f"q1 0 d{i} grade{i}\n" for i in range(25))
    with pytest.raises(QrelsError) as caught:
        read_qrels_file(_write(tmp_path, "many.qrels", text))
    message = str(caught.value)
    assert message.startswith("many.qrels: 25 malformed line(s)\n  - many.qrels line 2: field 'grade': 'grade0'")
    assert "many.qrels line 21: field 'grade': 'grade19'" in message
    assert "line 22:" not in message
    assert message.endswith("\n  - ... and 5 more")


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(QrelsError, match=r"latin.qrels line 2: not UTF-8 text"):
        read_qrels_file(_write(tmp_path, "latin.qrels", b"q1 0 d1 1\nq1 0 caf\xe9 1\n"))


def test_a_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(QrelsError, match=r"absent.qrels: file not found"):
        read_qrels_file(tmp_path / "absent.qrels")


def test_judgments_from_a_mapping_follow_the_same_policies() -> None:
    qrels = qrels_from_mapping({"q2": {"b": 1}, "q1": {"z": 2, "a": -1}})
    assert qrels.as_dict() == {"q1": {"a": -1, "z": 2}, "q2": {"b": 1}}
    with pytest.raises(QrelsError, match=r"query 'q1' document 'a': grade 1.0 is not an integer"):
        qrels_from_mapping({"q1": {"a": 1.0}})  # type: ignore[dict-item]
    with pytest.raises(QrelsError, match=r"field 'doc_id': 'a b' is empty or holds whitespace"):
        qrels_from_mapping({"q1": {"a b": 1}})
    with pytest.raises(QrelsError, match=r"field 'query_id': 'q\\u202e' holds a control"):
        qrels_from_mapping({"q\u202e": {"a": 1}})


# --- property: what is written is what is read -------------------------------------------------------------------

_SPECIAL_IDS = ["001", "0123", "1e5", "-1", "nan", "NULL", "NA", "true", "inf", "#1", '"q"', "query-id", "中文"]
ids = st.one_of(st.sampled_from(_SPECIAL_IDS), st.text("abcxyzQ0189-_.:/+é中", min_size=1, max_size=8))
grades = st.one_of(st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1))
judgments = st.dictionaries(ids, st.dictionaries(ids, grades, min_size=1, max_size=4), max_size=5)
blanks = st.sampled_from([" ", "\t", "  ", " \t", "\t\t "])


@settings(max_examples=60)
@given(judged=judgments, data=st.data())
def test_written_qrels_read_back_exactly(tmp_path_factory: pytest.TempPathFactory, judged, data) -> None:  # type: ignore[no-untyped-def]
    layout = data.draw(st.sampled_from(["trec", "beir", "beir-header"]))
    rows = [(q, d, g) for q, docs in judged.items() for d, g in docs.items()]
    repeats = data.draw(st.lists(st.sampled_from(rows), max_size=3)) if rows else []
    rows = data.draw(st.permutations(rows + repeats))
    lines = ["query-id\tcorpus-id\tscore"] if layout == "beir-header" else []
    for q, d, g in rows:
        fields = [q, "0", d, str(g)] if layout == "trec" else [q, d, str(g)]
        sep = "\t" if layout != "trec" and data.draw(st.booleans()) else data.draw(blanks)
        lines.append(sep.join(fields))
    ending = data.draw(st.sampled_from(["\n", "\r\n"]))
    raw = ending.join(lines).encode() + data.draw(st.sampled_from([b"", ending.encode()]))
    if data.draw(st.booleans()):
        raw = gzip.compress(raw)
    path = tmp_path_factory.mktemp("qrels") / "written"
    path.write_bytes(raw)
    if layout == "beir" and rows and len(rows[0]) == 3 and (rows[0][0], rows[0][1]) == ("query-id", "corpus-id"):
        return  # cannot be told from a header
    qrels = read_qrels_file(path)
    assert qrels.as_dict() == judged
    assert qrels.duplicates == len(repeats)


@pytest.mark.parametrize("grade", ["0x10", "0X1F", "0b1", "+2", "1e3", "1.5", "\u0663"])
def test_grades_are_decimal_integers_as_trec_eval_reads_them(tmp_path: Path, grade: str) -> None:
    """pyarrow's integer parser reads "0x10" as 16 (trec_eval's atol() as 0): such a grade is refused, naming it."""
    path = _write(tmp_path, "g.qrels", f"q1 0 d1 1\nq1 0 d2 {grade}\n")
    with pytest.raises(QrelsError, match=rf"g.qrels line 2: field 'grade': '{re.escape(grade)}' is not an integer"):
        read_qrels_file(path)


@pytest.mark.parametrize(
    ("grades", "expected"),
    [(["12", "007", "3"], [12, 7, 3]), (["-1", "2", "-20"], [-1, 2, -20]), (["0", "-0"], [0, 0])],
)
def test_integer_grades_are_read_whichever_check_confirms_them(
    tmp_path: Path, grades: list[str], expected: list[int]
) -> None:
    """Digits-only grades are confirmed from their bytes' range, others (a minus sign) by the full pattern: both
    read the same values."""
    lines = "".join(f"q1 0 d{i} {g}\n" for i, g in enumerate(grades))
    qrels = read_qrels_file(_write(tmp_path, "g.qrels", lines))
    assert qrels.as_dict() == {"q1": {f"d{i}": e for i, e in enumerate(expected)}}


@pytest.mark.parametrize("grade", ["1-2", "-", "--1", "1/2", "1.0"])
def test_grades_of_digits_and_signs_in_the_wrong_places_are_refused(tmp_path: Path, grade: str) -> None:
    """A grade whose bytes all lie between '-' and '9' is not thereby an integer: it is matched in full."""
    path = _write(tmp_path, "g.qrels", f"q1 0 d1 1\nq1 0 d2 {grade}\n")
    with pytest.raises(QrelsError, match=r"g.qrels line 2: field 'grade'"):
        read_qrels_file(path)
