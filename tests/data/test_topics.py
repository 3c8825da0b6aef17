"""Topics files: query ID -> language, from TSV or JSONL, given or detected."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from evalkit.data.topics import TopicsError, read_topics


def _write(folder: Path, name: str, data: bytes | str) -> Path:
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _jsonl(*records: object) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


@pytest.mark.parametrize("header", ["", "qid\ttext\n", "query_id\tquery\n", "Query-ID\ttext\n", "id\ttitle\n"])
def test_tsv_topics_with_or_without_header(tmp_path: Path, header: str) -> None:
    text = f"{header}q1\t如何重置密码\n\nq2\tOpen the 回收站 folder\r\n 003 \tHow do I reset my password?\n"
    assert read_topics(_write(tmp_path, "topics.tsv", text)) == {"q1": "zh", "q2": "en", "003": "en"}


def test_tsv_topics_with_a_bom_and_gzip(tmp_path: Path) -> None:
    data = gzip.compress("\ufeffqid\ttext\nq1\t在 Settings 中打开两步验证\n".encode())
    assert read_topics(_write(tmp_path, "topics.tsv.gz", data)) == {"q1": "zh"}


def test_tsv_line_without_a_tab_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(TopicsError, match=r"t.tsv line 2: needs 2 tab-separated fields"):
        read_topics(_write(tmp_path, "t.tsv", "q1\thello\nq2 hello\n"))


def test_jsonl_topics_with_and_without_language(tmp_path: Path) -> None:
    text = _jsonl(
        {"query_id": "q1", "text": "How do I reset my password?", "language": "zh"},
        {"_id": "q2", "text": "如何重置密码"},
        {"qid": "q3", "query": "Open the 回收站 folder", "extra": 1},
        {"query_id": "q4", "title": "回收站在哪里"},
        {"query_id": "q5", "language": "en"},
    )
    assert read_topics(_write(tmp_path, "topics.jsonl", text)) == {
        "q1": "zh",  # a given language wins over detection
        "q2": "zh",
        "q3": "en",
        "q4": "zh",
        "q5": "en",
    }
    gz = _write(tmp_path, "topics.jsonl.gz", gzip.compress(text.encode()))
    assert read_topics(gz)["q2"] == "zh"


def test_jsonl_topics_take_integer_ids_and_either_language_field(tmp_path: Path) -> None:
    text = _jsonl(
        {"query_id": 7, "text": "How do I reset my password?"},
        {"_id": "q2", "text": "How do I reset my password?", "metadata": {"language": "zh", "tags": ["x"]}},
        {"qid": "q3", "text": "如何重置密码", "language": "en", "metadata": {"language": "en"}},
        {"_id": -3, "text": "如何重置密码", "metadata": None},
    )
    assert read_topics(_write(tmp_path, "topics.jsonl", text)) == {"7": "en", "q2": "zh", "q3": "en", "-3": "zh"}


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"query_id": "q2", "text": "x", "language": "fr"}, r"field 'language': must be 'en' or 'zh', not 'fr'"),
        ({"_id": "q2", "text": "x", "metadata": {"language": "EN"}}, r"field 'metadata.language': must be 'en' or"),
        ({"_id": "q2", "language": "en", "metadata": {"language": "zh"}}, r"field 'metadata.language': 'zh' differs"),
        ({"query_id": "q2", "language": None}, r"field 'text': needed to detect the language"),
        ({"query_id": "q2", "text": "  "}, r"field 'text': needed to detect the language"),  # blank: no language
        ({"query_id": "q2", "query": 3}, r"field 'query': must be a string, not int"),
        ({"query_id": "q2", "text": "x", "metadata": ["zh"]}, r"field 'metadata': must be an object, not list"),
        ({"text": "no id"}, r"field '_id': required \(or query_id or qid\)"),
        ({"query_id": True, "text": "x"}, r"field 'query_id': must be a string or an integer, not bool"),
        ({"qid": 7.0, "text": "x"}, r"field 'qid': must be a string or an integer, not float"),
        ({"qid": "", "text": "x"}, r"field 'qid': must not be blank"),
        (["q2", "x"], r"must be a JSON object, not list"),
    ],
)
def test_a_bad_jsonl_topic_names_the_line_and_field(tmp_path: Path, record: object, problem: str) -> None:
    path = _write(tmp_path, "t.jsonl", _jsonl({"query_id": "q1", "text": "hello"}) + "\n" + _jsonl(record))
    with pytest.raises(TopicsError, match=rf"^t.jsonl: 1 refused line\(s\)\n  - t.jsonl line 3: {problem}"):
        read_topics(path)


@pytest.mark.parametrize("line", ['{"query_id": "q2", "text": NaN}', '{"query_id": "q2", "query_id": "q3"}', "{"])
def test_jsonl_is_parsed_strictly(tmp_path: Path, line: str) -> None:
    with pytest.raises(TopicsError, match=r"t.jsonl line 1: not JSON"):
        read_topics(_write(tmp_path, "t.jsonl", line + "\n"))


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        (
            "t.tsv",
            "q1\thello\nq2\tworld\nq1\t你好世界\n",
            "field 'query-id': query 'q1' is listed again with another text",
        ),
        (
            "t.jsonl",
            _jsonl({"query_id": "q1", "language": "en"}, {"query_id": "q2", "language": "en"})
            + _jsonl({"query_id": "q1", "language": "zh"}),
            "field 'query_id': query 'q1' is listed again with another language",
        ),
        (
            "t.jsonl",
            _jsonl(
                {"_id": "q1", "text": "a"}, {"_id": "q2", "text": "b"}, {"qid": "q1", "text": "c", "language": "en"}
            ),
            "field 'qid': query 'q1' is listed again with another text and language",
        ),
    ],
)
def test_a_query_listed_again_differently_is_refused_naming_both_lines(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    with pytest.raises(TopicsError) as refused:
        read_topics(_write(tmp_path, name, text))
    assert str(refused.value) == f"{name}: 1 refused line(s)\n  - {name} line 3: {problem} than at {name} line 1"


@pytest.mark.parametrize(
    ("name", "text", "languages"),
    [
        ("t.tsv", "q1\thello\nq2\t你好\nq1\thello\n", {"q1": "en", "q2": "zh"}),
        (
            "t.jsonl",
            _jsonl({"_id": "q1", "text": "hello"}, {"_id": "q2", "text": "你好"}, {"qid": "q1", "query": "hello"}),
            {"q1": "en", "q2": "zh"},
        ),
        ("t.jsonl", _jsonl({"_id": 1, "language": "zh"}, {"_id": "1", "metadata": {"language": "zh"}}), {"1": "zh"}),
    ],
)
def test_a_query_listed_again_the_same_is_kept_once(
    tmp_path: Path, name: str, text: str, languages: dict[str, str]
) -> None:
    assert read_topics(_write(tmp_path, name, text)) == languages


def test_a_missing_topics_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(TopicsError, match=r"absent.tsv: file not found"):
        read_topics(tmp_path / "absent.tsv")


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(TopicsError, match=r"t.tsv line 2: not UTF-8 text"):
        read_topics(_write(tmp_path, "t.tsv", b"q1\thello\nq2\tcaf\xe9\n"))


@pytest.mark.parametrize(
    ("text", "name", "field"),
    [
        ("q\x1b[31m1\tHow do I reset it\n", "t.tsv", "query-id"),
        ("q 1\tHow do I reset it\n", "t.tsv", "query-id"),
        ('{"query_id": "q 1", "text": "x"}\n', "t.jsonl", "query_id"),
    ],
)
def test_a_query_id_with_control_characters_or_whitespace_is_refused(
    tmp_path: Path, text: str, name: str, field: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TopicsError, match=rf"{name} line 1: field '{field}'"):
        read_topics(path)


def test_a_blank_tsv_topic_text_is_refused_not_counted_english(tmp_path: Path) -> None:
    """A blank text gives no language to detect (detection would answer en): refused naming the line, as a missing
    text is, instead of moving the en slice's means."""
    path = _write(tmp_path, "t.tsv", "q1\thello\nq3\t   \n")
    with pytest.raises(TopicsError, match=r"t.tsv line 2: field 'text': needed to detect the language"):
        read_topics(path)
