"""Tests for evalkit.data.fixture: loading, strict schema, cross-record checks, privacy and error reporting."""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from evalkit.data.fixture import (
    ALIASES_FILE,
    FIXTURE_FILE,
    AliasTable,
    Fixture,
    FixtureError,
    Span,
    load_fixture,
    parse_fixture,
)
from evalkit.data.schema import (
    MAX_ATTRIBUTION_LENGTH,
    MAX_CHUNK_LENGTH,
    MAX_ID_LENGTH,
    MAX_JUDGMENTS_PER_QUERY,
    MAX_QUERY_LENGTH,
    MAX_SPANS_PER_JUDGMENT,
    MAX_TITLE_LENGTH,
    privacy_problem,
)

from ..conftest import TINY_DIR

Data = dict[str, Any]

_TINY_TEXT = (TINY_DIR / FIXTURE_FILE).read_text(encoding="utf-8")
_ALIASES_TEXT = (TINY_DIR / ALIASES_FILE).read_text(encoding="utf-8")
TINY = "fixture 'tiny-bilingual'"


def tiny() -> Data:
    """A fresh, mutable copy of the tiny fixture's JSON."""
    data: Data = json.loads(_TINY_TEXT)
    return data


def aliases() -> Data:
    data: Data = json.loads(_ALIASES_TEXT)
    return data


def dumps(data: object) -> str:
    return json.dumps(data, ensure_ascii=False)


def problems_of(data: object) -> list[str]:
    """The problems parse_fixture lists for `data` (which must be invalid)."""
    with pytest.raises(FixtureError) as info:
        parse_fixture(dumps(data))
    return info.value.problems


def only_problem(data: object) -> str:
    problems = problems_of(data)
    assert len(problems) == 1, problems
    return problems[0]


def write_fixture(directory: Path, data: object, alias_data: object | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / FIXTURE_FILE).write_text(dumps(data), encoding="utf-8")
    if alias_data is not None:
        (directory / ALIASES_FILE).write_text(dumps(alias_data), encoding="utf-8")
    return directory


def load_problems(path: Path) -> FixtureError:
    with pytest.raises(FixtureError) as info:
        load_fixture(path)
    return info.value


# --- the valid tiny fixture ------------------------------------------------------------------------------------


def test_tiny_fixture_loads_with_exact_counts() -> None:
    loaded = load_fixture(TINY_DIR)
    fixture = loaded.fixture
    assert (fixture.fixture_id, fixture.fixture_version, fixture.license) == ("tiny-bilingual", "1.0.0", "CC0-1.0")
    assert len(fixture.documents) == 4
    assert len(fixture.chunks) == 8
    assert len(fixture.queries) == 8
    assert [q.query_id for q in fixture.queries if not q.answerable] == ["q-en-004", "q-zh-004"]
    assert sum(len(q.judgments) for q in fixture.queries) == 7
    assert [g.group_id for g in loaded.aliases.groups] == [
        "trash",
        "sync",
        "refund",
        "annual",
        "export",
        "subscription",
    ]
    assert loaded.aliases.groups[0].terms == ("trash", "deleted notes", "回收站")


def test_load_fixture_accepts_a_directory_or_its_fixture_json(tmp_path: Path) -> None:
    by_dir = load_fixture(TINY_DIR)
    by_file = load_fixture(TINY_DIR / FIXTURE_FILE)
    by_text = load_fixture(str(TINY_DIR))
    assert by_dir == by_file == by_text
    assert len(by_file.aliases.groups) == 6


def test_missing_aliases_file_gives_an_empty_table(tmp_path: Path) -> None:
    loaded = load_fixture(write_fixture(tmp_path, tiny()))
    assert loaded.aliases == AliasTable()
    assert loaded.aliases.groups == ()


def test_chunk_language_is_its_documents_language() -> None:
    fixture = load_fixture(TINY_DIR).fixture
    assert fixture.chunk_language("en-sync-01") == "en"
    assert fixture.chunk_language("zh-billing-02") == "zh"


def test_span_end_is_exclusive() -> None:
    span = Span(start=14, text="stay in the trash for 30 days")
    assert span.end == 43
    chunk = load_fixture(TINY_DIR).fixture.chunks[0]
    assert chunk.text[span.start : span.end] == span.text


def test_query_without_judgments_is_a_no_answer_query() -> None:
    queries = {q.query_id: q for q in load_fixture(TINY_DIR).fixture.queries}
    assert queries["q-en-001"].answerable
    assert not queries["q-en-004"].answerable


# --- unknown fields, at every level ----------------------------------------------------------------------------


def _at(data: Data, path: tuple[str | int, ...]) -> Any:
    node: Any = data
    for part in path:
        node = node[part]
    return node


@pytest.mark.parametrize(
    ("path", "where"),
    [
        ((), f"{TINY}: field 'surprise'"),
        (("documents", 0), "document 'en-trash': field 'surprise'"),
        (("chunks", 1), "chunk 'en-trash-02': field 'surprise'"),
        (("queries", 4), "query 'q-zh-001': field 'surprise'"),
        (("queries", 0, "judgments", 1), "query 'q-en-001': field 'judgments[1].surprise'"),
        (("queries", 0, "judgments", 1, "spans", 0), "query 'q-en-001': field 'judgments[1].spans[0].surprise'"),
    ],
)
def test_unknown_field_is_refused_naming_record_and_field(path: tuple[str | int, ...], where: str) -> None:
    data = tiny()
    _at(data, path)["surprise"] = 1
    assert problems_of(data) == [f"{where}: Extra inputs are not permitted"]


def test_every_field_problem_is_listed() -> None:
    data = tiny()
    data["documents"][1]["extra"] = True
    data["chunks"][2]["text"] = "   "
    data["queries"][3]["language"] = "fr"
    assert problems_of(data) == [
        "document 'en-sync': field 'extra': Extra inputs are not permitted",
        "chunk 'en-sync-01': field 'text': must not be blank",
        "query 'q-en-004': field 'language': Input should be 'en' or 'zh'",
    ]


# --- strict types ------------------------------------------------------------------------------------------------

_JUDGMENT = ("queries", 0, "judgments", 0)
_SPAN = (*_JUDGMENT, "spans", 0)


@pytest.mark.parametrize(
    ("path", "key", "value", "where", "message"),
    [
        (_JUDGMENT, "grade", "3", "query 'q-en-001': field 'judgments[0].grade'", "valid integer"),
        (_JUDGMENT, "grade", 3.0, "query 'q-en-001': field 'judgments[0].grade'", "valid integer"),
        (_JUDGMENT, "grade", True, "query 'q-en-001': field 'judgments[0].grade'", "valid integer"),
        (_SPAN, "start", 14.0, "query 'q-en-001': field 'judgments[0].spans[0].start'", "valid integer"),
        (_SPAN, "start", "14", "query 'q-en-001': field 'judgments[0].spans[0].start'", "valid integer"),
        (_SPAN, "text", 5, "query 'q-en-001': field 'judgments[0].spans[0].text'", "valid string"),
        (("queries", 0), "tags", "near_miss", "query 'q-en-001': field 'tags'", "valid array"),
        (("queries", 0), "tags", ["typo"], "query 'q-en-001': field 'tags[0]'", "'cross_language'"),
        (("queries", 0), "judgments", {}, "query 'q-en-001': field 'judgments'", "valid array"),
        (("queries", 0), "text", None, "query 'q-en-001': field 'text'", "valid string"),
        (("documents", 0), "language", "EN", "document 'en-trash': field 'language'", "'en' or 'zh'"),
        (("chunks", 0), "doc_id", ["en-trash"], "chunk 'en-trash-01': field 'doc_id'", "valid string"),
        ((), "fixture_version", "1.0", f"{TINY}: field 'fixture_version'", "should match pattern"),
        ((), "documents", {}, f"{TINY}: field 'documents'", "valid array"),
    ],
)
def test_strict_types(path: tuple[str | int, ...], key: str, value: object, where: str, message: str) -> None:
    data = tiny()
    _at(data, path)[key] = value
    problem = only_problem(data)
    assert problem.startswith(where + ": "), problem
    assert message in problem


def test_record_with_unusable_id_is_named_by_position() -> None:
    data = tiny()
    data["chunks"][3]["chunk_id"] = 7
    # The chunk also carries a valid doc_id: it must not be mistaken for a document.
    assert only_problem(data) == "chunk at chunks[3]: field 'chunk_id': Input should be a valid string"


def test_top_level_problem_without_fixture_id() -> None:
    data = tiny()
    del data["fixture_id"]
    assert only_problem(data) == "field 'fixture_id': Field required"


def test_invalid_item_is_not_also_reported_as_a_short_list() -> None:
    # pydantic counts only valid items; "at least 1 item" would be noise next to the item's own error.
    data = tiny()
    data["queries"][1]["judgments"][0]["spans"][0]["start"] = -1
    assert problems_of(data) == [
        "query 'q-en-002': field 'judgments[0].spans[0].start': Input should be greater than or equal to 0"
    ]


# --- bounds -------------------------------------------------------------------------------------------------------


def _pad(text: str, length: int) -> str:
    return text + "x" * (length - len(text))


@pytest.mark.parametrize(
    ("mutate", "where", "message"),
    [
        (lambda d: d["documents"][0].update(doc_id=""), "document at documents[0]: field 'doc_id'", "at least 1"),
        (
            lambda d: d["documents"][0].update(doc_id="d" * (MAX_ID_LENGTH + 1)),
            "document at documents[0]: field 'doc_id'",
            f"at most {MAX_ID_LENGTH} characters",
        ),
        (lambda d: d["documents"][0].update(title=""), "document 'en-trash': field 'title'", "must not be blank"),
        (
            lambda d: d["documents"][0].update(title=" \n\u3000"),
            "document 'en-trash': field 'title'",
            "must not be blank",
        ),
        (
            lambda d: d["documents"][0].update(title="t" * (MAX_TITLE_LENGTH + 1)),
            "document 'en-trash': field 'title'",
            f"at most {MAX_TITLE_LENGTH} characters",
        ),
        (
            lambda d: d["chunks"][0].update(text=_pad(d["chunks"][0]["text"], MAX_CHUNK_LENGTH + 1)),
            "chunk 'en-trash-01': field 'text'",
            f"at most {MAX_CHUNK_LENGTH} characters",
        ),
        (
            lambda d: d["queries"][0].update(text="q" * (MAX_QUERY_LENGTH + 1)),
            "query 'q-en-001': field 'text'",
            f"at most {MAX_QUERY_LENGTH} characters",
        ),
        (
            lambda d: d.update(attribution="a" * (MAX_ATTRIBUTION_LENGTH + 1)),
            f"{TINY}: field 'attribution'",
            f"at most {MAX_ATTRIBUTION_LENGTH} characters",
        ),
        (
            lambda d: d["queries"][0]["judgments"][0].update(grade=-1),
            "query 'q-en-001': field 'judgments[0].grade'",
            "grade -1 of chunk 'en-trash-01' is outside 0-3",
        ),
        (
            lambda d: d["queries"][0]["judgments"][0].update(grade=4),
            "query 'q-en-001': field 'judgments[0].grade'",
            "grade 4 of chunk 'en-trash-01' is outside 0-3",
        ),
        (
            lambda d: d["queries"][0]["judgments"][0].update(spans=[]),
            "query 'q-en-001': field 'judgments[0].spans'",
            "chunk 'en-trash-01' is judged relevant (grade 3): it needs at least 1 exact answer span",
        ),
        (
            lambda d: d["queries"][0]["judgments"][0].update(grade=0),
            "query 'q-en-001': field 'judgments[0].spans'",
            "chunk 'en-trash-01' is judged not relevant (grade 0): it takes no spans, not 1",
        ),
        (
            lambda d: d["queries"][0]["judgments"][0].update(
                spans=d["queries"][0]["judgments"][0]["spans"] * (MAX_SPANS_PER_JUDGMENT + 1)
            ),
            "query 'q-en-001': field 'judgments[0].spans'",
            f"at most {MAX_SPANS_PER_JUDGMENT} items",
        ),
        (
            lambda d: d["queries"][0]["judgments"][0]["spans"][0].update(text=""),
            "query 'q-en-001': field 'judgments[0].spans[0].text'",
            "at least 1 character",
        ),
        (
            lambda d: d["queries"][0].update(tags=["paraphrase"] * 9),
            "query 'q-en-001': field 'tags'",
            "at most 8 items",
        ),
        (lambda d: d.update(documents=[]), f"{TINY}: field 'documents'", "at least 1 item"),
        (lambda d: d.update(license=""), f"{TINY}: field 'license'", "at least 1 character"),
    ],
)
def test_bounds_are_enforced(mutate: Callable[[Data], None], where: str, message: str) -> None:
    data = tiny()
    mutate(data)
    problem = only_problem(data)
    assert problem.startswith(where + ": "), problem
    assert message in problem


def test_values_at_their_limits_are_accepted() -> None:
    data = tiny()
    data["documents"][0]["title"] = "t" * MAX_TITLE_LENGTH
    data["chunks"][0]["text"] = _pad(data["chunks"][0]["text"], MAX_CHUNK_LENGTH)
    data["queries"][3]["text"] = "q" * MAX_QUERY_LENGTH
    data["queries"][0]["judgments"][0]["spans"] *= MAX_SPANS_PER_JUDGMENT
    data["queries"][0]["tags"] = ["paraphrase"] * 8
    fixture = parse_fixture(dumps(data))
    assert len(fixture.chunks[0].text) == MAX_CHUNK_LENGTH
    assert len(fixture.queries[0].judgments[0].spans) == MAX_SPANS_PER_JUDGMENT


def _judged_everywhere(count: int) -> Data:
    """The tiny fixture with `count` more chunks, every one judged by query q-en-001 (a TREC-sized topic)."""
    data = tiny()
    data["chunks"] += [
        {"chunk_id": f"bulk-{i}", "doc_id": "en-trash", "text": f"Bulk passage {i}."} for i in range(count)
    ]
    data["queries"][0]["judgments"] = [
        {"chunk_id": f"bulk-{i}", "grade": 1 + i % 3, "spans": [{"start": 0, "text": "Bulk passage"}]}
        for i in range(count)
    ]
    return data


def test_query_with_the_most_judgments_is_accepted() -> None:
    fixture = parse_fixture(dumps(_judged_everywhere(MAX_JUDGMENTS_PER_QUERY)))
    assert MAX_JUDGMENTS_PER_QUERY == 5_000
    assert len(fixture.queries[0].judgments) == MAX_JUDGMENTS_PER_QUERY
    assert [j.grade for j in fixture.queries[0].judgments[:4]] == [1, 2, 3, 1]


def test_query_with_too_many_judgments_is_refused_naming_query_and_field() -> None:
    problem = only_problem(_judged_everywhere(MAX_JUDGMENTS_PER_QUERY + 1))
    assert problem.startswith("query 'q-en-001': field 'judgments': "), problem
    assert f"at most {MAX_JUDGMENTS_PER_QUERY} items" in problem


# --- cross-record checks ---------------------------------------------------------------------------------------


def test_duplicate_ids_are_refused() -> None:
    data = tiny()
    data["documents"].append(copy.deepcopy(data["documents"][1]))
    data["chunks"].append(copy.deepcopy(data["chunks"][2]))
    data["queries"].append(copy.deepcopy(data["queries"][3]))
    assert problems_of(data) == [
        "document 'en-sync': field 'doc_id' is used by 2 records (IDs must be unique)",
        "chunk 'en-sync-01': field 'chunk_id' is used by 2 records (IDs must be unique)",
        "query 'q-en-004': field 'query_id' is used by 2 records (IDs must be unique)",
    ]


def test_chunk_with_dangling_doc_id() -> None:
    data = tiny()
    data["chunks"][5]["doc_id"] = "zh-missing"
    assert problems_of(data) == ["chunk 'zh-export-02': field 'doc_id' refers to unknown document 'zh-missing'"]


def test_judgment_with_dangling_chunk_id() -> None:
    data = tiny()
    data["queries"][1]["judgments"][0]["chunk_id"] = "en-sync-99"
    assert problems_of(data) == ["query 'q-en-002': field 'judgments[0].chunk_id' refers to unknown chunk 'en-sync-99'"]


def test_same_chunk_judged_twice_in_one_query() -> None:
    data = tiny()
    data["queries"][0]["judgments"][1] = copy.deepcopy(data["queries"][0]["judgments"][0])
    assert problems_of(data) == ["query 'q-en-001': field 'judgments[1].chunk_id' judges chunk 'en-trash-01' twice"]


def test_same_chunk_in_two_queries_is_fine() -> None:
    data = tiny()
    data["queries"][1]["judgments"].append(copy.deepcopy(data["queries"][0]["judgments"][0]))
    assert len(parse_fixture(dumps(data)).queries[1].judgments) == 2


@pytest.mark.parametrize("start", [13, 15, 0, 89])
def test_span_off_its_offset_is_refused(start: int) -> None:
    data = tiny()
    data["queries"][0]["judgments"][0]["spans"][0]["start"] = start
    assert problems_of(data) == [
        f"query 'q-en-001': field 'judgments[0].spans[0]' is not verbatim in chunk 'en-trash-01' at offset {start}"
    ]


@pytest.mark.parametrize("text", ["stay in the trash for 31 days", "Stay in the trash for 30 days", "stay  in"])
def test_span_with_wrong_text_is_refused(text: str) -> None:
    data = tiny()
    data["queries"][0]["judgments"][0]["spans"][0]["text"] = text
    assert problems_of(data) == [
        "query 'q-en-001': field 'judgments[0].spans[0]' is not verbatim in chunk 'en-trash-01' at offset 14"
    ]


def test_chinese_span_offsets_count_characters() -> None:
    data = tiny()
    spans = data["queries"][4]["judgments"][0]["spans"]
    spans.append({"start": 11, "text": "500 篇笔记"})
    assert parse_fixture(dumps(data)).queries[4].judgments[0].spans[1].end == 18
    spans[1]["start"] = 12
    assert problems_of(data) == [
        "query 'q-zh-001': field 'judgments[0].spans[1]' is not verbatim in chunk 'zh-export-02' at offset 12"
    ]


def test_language_without_answerable_query_is_degenerate() -> None:
    data = tiny()
    for query in data["queries"]:
        if query["language"] == "en":
            query["judgments"] = []
    assert problems_of(data) == [
        f"{TINY}: field 'queries': language 'en' has no answerable query (degenerate label set)"
    ]


def test_language_without_no_answer_query_is_degenerate() -> None:
    data = tiny()
    data["queries"] = [q for q in data["queries"] if q["query_id"] != "q-zh-004"]
    assert problems_of(data) == [
        f"{TINY}: field 'queries': language 'zh' has no no-answer query (degenerate label set)"
    ]


def test_language_without_any_query_is_allowed() -> None:
    # A monolingual (or cross-lingual) fixture asks in one language only; the label-set rule applies to the
    # languages that have queries.
    data = tiny()
    data["queries"] = [q for q in data["queries"] if q["language"] == "en"]
    fixture = parse_fixture(json.dumps(data))
    assert {q.language for q in fixture.queries} == {"en"}


def test_language_with_queries_of_one_kind_only_is_degenerate() -> None:
    data = tiny()
    data["queries"] = [q for q in data["queries"] if q["language"] == "en" or q["judgments"]]
    assert problems_of(data) == [
        f"{TINY}: field 'queries': language 'zh' has no no-answer query (degenerate label set)",
    ]


def test_every_cross_record_problem_is_listed() -> None:
    data = tiny()
    data["chunks"][7]["doc_id"] = "nowhere"
    data["queries"][5]["judgments"][0]["chunk_id"] = "zh-billing-09"
    data["queries"][6]["judgments"][0]["spans"][0]["start"] = 1
    error = problems_of(data)
    assert error == [
        "chunk 'zh-billing-02': field 'doc_id' refers to unknown document 'nowhere'",
        "query 'q-zh-002': field 'judgments[0].chunk_id' refers to unknown chunk 'zh-billing-09'",
        "query 'q-zh-003': field 'judgments[0].spans[0]' is not verbatim in chunk 'en-sync-01' at offset 1",
    ]


def test_fixture_error_message_lists_every_problem() -> None:
    data = tiny()
    data["queries"][0]["judgments"][0]["spans"][0]["start"] = 0
    data["queries"][1]["judgments"][0]["spans"][0]["start"] = 0
    with pytest.raises(FixtureError) as info:
        parse_fixture(dumps(data), source="tiny.json")
    message = str(info.value)
    assert message.startswith("invalid fixture tiny.json: 2 problem(s)\n")
    assert message.count("\n  - query '") == 2
    assert info.value.source == "tiny.json"
    assert isinstance(info.value, ValueError)


# --- privacy ------------------------------------------------------------------------------------------------------

_PRIVATE = [
    ("/etc/passwd", "a filesystem path"),
    ("~/x", "a filesystem path"),
    ("./a/b", "a filesystem path"),
    ("C:\\x", "a filesystem path"),
    ("http://example.org", "a URL or endpoint"),
    ("https://kb.example/x", "a URL or endpoint"),
    ("www.x.com", "a URL or endpoint"),
    ("host.com:8080", "a URL or endpoint"),
    ("alice@example.com", "an e-mail address"),
    ("localhost:3000", "a host address"),
    ("10.1.2.3", "a host address"),
    ("sk-live-" + "a" * 24, "a secret (API key, token or private key)"),
    ("Bearer abc123def456ghi", "a secret (API key, token or private key)"),
    ("AKIA" + "Q" * 16, "a secret (API key, token or private key)"),
    ("-----BEGIN RSA PRIVATE KEY-----", "a secret (API key, token or private key)"),
    ("ghp_" + "b" * 36, "a secret (API key, token or private key)"),
    ("api_key=abcdef123456", "a secret (API key, token or private key)"),
    ("文件在/etc/passwd", "a filesystem path"),
]

_TEXT_FIELDS: list[tuple[str, Callable[[Data, str], None], str]] = [
    ("title", lambda d, v: d["documents"][2].update(title=f"导出 {v}"), "document 'zh-export': field 'title'"),
    (
        "chunk",
        lambda d, v: d["chunks"][1].update(text=d["chunks"][1]["text"] + f" See {v} first."),
        "chunk 'en-trash-02': field 'text'",
    ),
    ("query", lambda d, v: d["queries"][7].update(text=f"{v} 是什么？"), "query 'q-zh-004': field 'text'"),
    ("attribution", lambda d, v: d.update(attribution=f"Written by {v}"), f"{TINY}: field 'attribution'"),
]


@pytest.mark.parametrize(("value", "label"), _PRIVATE)
@pytest.mark.parametrize(("_name", "put", "where"), _TEXT_FIELDS, ids=[f[0] for f in _TEXT_FIELDS])
def test_private_value_in_text_field_is_refused(
    _name: str, put: Callable[[Data, str], None], where: str, value: str, label: str
) -> None:
    data = tiny()
    put(data, value)
    # Chunk and query text name the flag that allows links, host names and paths (never e-mails or credentials).
    allowed = where.endswith("'text'") and label not in {
        "an e-mail address",
        "a secret (API key, token or private key)",
    }
    hint = " (an imported corpus may allow them in text: evalkit import ... --allow-links-in-text)" if allowed else ""
    assert problems_of(data) == [
        f"{where}: looks like {label}; fixtures must not carry paths, endpoints or credentials{hint}"
    ]


@pytest.mark.parametrize(("value", "label"), _PRIVATE)
def test_private_alias_term_is_refused(tmp_path: Path, value: str, label: str) -> None:
    alias_data = aliases()
    alias_data["groups"][1]["terms"].append(value)
    error = load_problems(write_fixture(tmp_path, tiny(), alias_data))
    assert error.source == str(tmp_path / ALIASES_FILE)
    assert error.problems == [
        f"alias group 'sync': field 'terms[2]': looks like {label}; "
        "fixtures must not carry paths, endpoints or credentials"
    ]


@pytest.mark.parametrize(
    "value",
    [
        "Settings › Export",
        "version 2.3",
        "3/4 of users",
        "API keys are rotated every 90 days",
        "设置 › 导出：选择「全部笔记」，然后点击“确定”！",
        "每 3/4 小时（约 45 分钟）同步一次；和/或手动同步。",
    ],
)
def test_innocent_text_is_accepted_everywhere(tmp_path: Path, value: str) -> None:
    data = tiny()
    for _name, put, _where in _TEXT_FIELDS:
        put(data, value)
    alias_data = aliases()
    alias_data["groups"][0]["terms"].append(value)
    loaded = load_fixture(write_fixture(tmp_path, data, alias_data))
    assert value in loaded.fixture.documents[2].title
    assert loaded.aliases.groups[0].terms[-1] == value


def test_span_text_itself_is_not_privacy_checked_but_must_be_verbatim() -> None:
    # A span is a substring of an already-checked chunk text, so it cannot add a private value.
    data = tiny()
    data["queries"][0]["judgments"][0]["spans"][0]["text"] = "/etc/passwd"
    assert problems_of(data) == [
        "query 'q-en-001': field 'judgments[0].spans[0]' is not verbatim in chunk 'en-trash-01' at offset 14"
    ]


# --- malformed files -----------------------------------------------------------------------------------------


def test_missing_fixture_json(tmp_path: Path) -> None:
    error = load_problems(tmp_path)
    assert error.problems == [f"no fixture.json at {tmp_path}"]


def test_nonexistent_path(tmp_path: Path) -> None:
    error = load_problems(tmp_path / "nope")
    assert error.problems == [f"no fixture.json at {tmp_path / 'nope'}"]


def test_fixture_json_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / FIXTURE_FILE).mkdir()
    error = load_problems(tmp_path)
    assert len(error.problems) == 1
    assert error.problems[0].startswith("file 'fixture.json' cannot be read: ")


@pytest.mark.parametrize(
    ("content", "start"),
    [
        (b"", "file 'fixture.json' is not JSON: "),
        (b"{", "file 'fixture.json' is not JSON: "),
        (b"{'fixture_id': 1}", "file 'fixture.json' is not JSON: "),
        (b"\xef\xbb\xbf{", "file 'fixture.json' is not JSON: "),
        (b"[" * 100_000, "file 'fixture.json' is not JSON: "),
        (b"\xff\xfe{\x00}\x00", "file 'fixture.json' cannot be read: "),
        ('{"title": "\u5bfc\u51fa"}'.encode("gb18030"), "file 'fixture.json' cannot be read: "),
    ],
    ids=["empty", "truncated", "single-quotes", "bom", "deeply-nested", "utf16", "gb18030"],
)
def test_unreadable_fixture_json(tmp_path: Path, content: bytes, start: str) -> None:
    (tmp_path / FIXTURE_FILE).write_bytes(content)
    error = load_problems(tmp_path)
    assert len(error.problems) == 1
    assert error.problems[0].startswith(start), error.problems
    assert error.source == str(tmp_path / FIXTURE_FILE)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[]", "field '(record)': Input should be an object"),
        ("null", "field '(record)': Input should be an object"),
        ("{}", "field 'fixture_id': Field required"),
    ],
)
def test_json_that_is_not_a_fixture(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / FIXTURE_FILE).write_text(text, encoding="utf-8")
    assert load_problems(tmp_path).problems[0] == problem


def test_huge_integer_is_a_fixture_error(tmp_path: Path) -> None:
    # json.loads refuses integers over 4,300 digits with a plain ValueError; it must not escape.
    text = _TINY_TEXT.replace('"start": 14', '"start": ' + "1" * 5_000)
    with pytest.raises(FixtureError):
        parse_fixture(text)
    (tmp_path / FIXTURE_FILE).write_text(text, encoding="utf-8")
    load_problems(tmp_path)


def test_deeply_nested_json_is_a_fixture_error() -> None:
    # Regression: json.loads raised RecursionError while naming the problem.
    with pytest.raises(FixtureError):
        parse_fixture("[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize(
    ("content", "start"),
    [
        (b"{", "file 'aliases.json' is not JSON: "),
        (b"\xff\xff", "file 'aliases.json' cannot be read: "),
        (b"[" * 100_000, "file 'aliases.json' is not JSON: "),
        (b'{"groups": [], "extra": 1}', "field 'extra': Extra inputs are not permitted"),
        (b'{"groups": {}}', "field 'groups': Input should be a valid array"),
        (b'{"groups": [{"group_id": "g", "terms": []}]}', "alias group 'g': field 'terms': "),
    ],
)
def test_invalid_aliases_json(tmp_path: Path, content: bytes, start: str) -> None:
    write_fixture(tmp_path, tiny())
    (tmp_path / ALIASES_FILE).write_bytes(content)
    error = load_problems(tmp_path)
    assert error.source == str(tmp_path / ALIASES_FILE)
    assert len(error.problems) == 1
    assert error.problems[0].startswith(start), error.problems


def test_aliases_with_a_term_in_two_groups_fail_loading(tmp_path: Path) -> None:
    alias_data = aliases()
    alias_data["groups"][2]["terms"].append("SYNC")
    error = load_problems(write_fixture(tmp_path, tiny(), alias_data))
    assert error.problems == ["alias group 'refund': field 'terms' repeats 'SYNC' from group 'sync'"]
    assert "aliases.json: 1 problem(s)" in str(error)


def test_fixture_problems_are_reported_before_aliases_are_read(tmp_path: Path) -> None:
    data = tiny()
    data["chunks"][0]["extra"] = 1
    write_fixture(tmp_path, data)
    (tmp_path / ALIASES_FILE).write_text("{", encoding="utf-8")
    error = load_problems(tmp_path)
    assert error.source == str(tmp_path / FIXTURE_FILE)
    assert error.problems == ["chunk 'en-trash-01': field 'extra': Extra inputs are not permitted"]


@given(st.binary(max_size=300))
@settings(max_examples=60, deadline=None)
def test_any_bytes_load_or_fail_with_fixture_error(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory)
        (path / FIXTURE_FILE).write_bytes(content)
        try:
            load_fixture(path)
        except FixtureError as error:
            assert error.problems
            assert all(isinstance(p, str) and p for p in error.problems)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(_JSON)
@settings(max_examples=100, deadline=None)
def test_any_json_value_is_refused_with_fixture_error(value: object) -> None:
    with pytest.raises(FixtureError) as info:
        parse_fixture(json.dumps(value))
    assert info.value.problems


def _leaf_paths(node: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    if isinstance(node, dict):
        return [p for key, value in node.items() for p in _leaf_paths(value, (*path, key))]
    if isinstance(node, list):
        return [p for index, value in enumerate(node) for p in _leaf_paths(value, (*path, index))]
    return [path]


_TINY_LEAVES = _leaf_paths(json.loads(_TINY_TEXT))


@given(st.lists(st.tuples(st.sampled_from(_TINY_LEAVES), _JSON), min_size=1, max_size=3))
@settings(max_examples=150, deadline=None)
def test_corrupted_leaves_give_problems_that_name_a_field(corruptions: list[tuple[tuple[str | int, ...], Any]]) -> None:
    data = tiny()
    for path, value in corruptions:
        _at(data, path[:-1])[path[-1]] = value
    try:
        parse_fixture(dumps(data))
    except FixtureError as error:
        assert error.problems
        for problem in error.problems:
            assert "field '" in problem, problem


@given(st.text(max_size=200))
@settings(max_examples=100, deadline=None)
def test_any_text_is_refused_with_fixture_error(text: str) -> None:
    with pytest.raises(FixtureError):
        parse_fixture(text)


# --- AliasTable ------------------------------------------------------------------------------------------------


def _alias_problems(groups: list[Data]) -> list[str]:
    """The problems load_fixture lists for the tiny fixture with these alias groups."""
    with tempfile.TemporaryDirectory() as directory:
        error = load_problems(write_fixture(Path(directory), tiny(), {"groups": groups}))
    assert error.source.endswith(ALIASES_FILE)
    return error.problems


def test_alias_table_refuses_duplicate_group_ids() -> None:
    groups = [{"group_id": "g", "terms": ["a"]}, {"group_id": "g", "terms": ["b"]}]
    assert _alias_problems(groups) == ["alias group 'g': field 'group_id' is used by 2 records (IDs must be unique)"]


@pytest.mark.parametrize(
    ("first", "second"), [("sync", "sync"), ("sync", "SYNC"), ("Straße", "STRASSE"), ("同步", "同步")]
)
def test_alias_table_refuses_a_term_in_two_groups_case_insensitively(first: str, second: str) -> None:
    groups = [{"group_id": "g1", "terms": ["x", first]}, {"group_id": "g2", "terms": [second]}]
    assert _alias_problems(groups) == [f"alias group 'g2': field 'terms' repeats {second!r} from group 'g1'"]


def test_alias_table_lists_every_repeated_term() -> None:
    groups = [
        {"group_id": "g1", "terms": ["a", "b"]},
        {"group_id": "g2", "terms": ["A"]},
        {"group_id": "g3", "terms": ["B", "a"]},
    ]
    assert _alias_problems(groups) == [
        "alias group 'g2': field 'terms' repeats 'A' from group 'g1'",
        "alias group 'g3': field 'terms' repeats 'B' from group 'g1'",
        "alias group 'g3': field 'terms' repeats 'a' from group 'g1'",
    ]


def test_alias_problem_containing_a_semicolon_stays_one_problem(tmp_path: Path) -> None:
    # Regression: problems were joined with "; " and split again, cutting this one in two.
    alias_data = {
        "groups": [{"group_id": "g1", "terms": ["sync; merge"]}, {"group_id": "g2", "terms": ["Sync; Merge"]}]
    }
    error = load_problems(write_fixture(tmp_path, tiny(), alias_data))
    assert error.problems == ["alias group 'g2': field 'terms' repeats 'Sync; Merge' from group 'g1'"]


def test_alias_table_alone_raises_a_validation_error() -> None:
    groups = [{"group_id": "g1", "terms": ["sync"]}, {"group_id": "g2", "terms": ["SYNC"]}]
    with pytest.raises(ValidationError, match="alias group 'g2': field 'terms' repeats 'SYNC' from group 'g1'"):
        AliasTable.model_validate_json(json.dumps({"groups": groups}))


def test_alias_term_repeated_within_one_group_is_allowed() -> None:
    table = AliasTable.model_validate_json(json.dumps({"groups": [{"group_id": "g", "terms": ["sync", "Sync"]}]}))
    assert table.groups[0].terms == ("sync", "Sync")


@pytest.mark.parametrize(
    ("terms", "message"),
    [([], "at least 1 item"), (["x" * 101], "at most 100 characters"), ([" "], "must not be blank")],
)
def test_alias_term_bounds(terms: list[str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        AliasTable.model_validate_json(json.dumps({"groups": [{"group_id": "g", "terms": terms}]}))


# --- generated fixtures (hypothesis) ----------------------------------------------------------------------------

# IDs of the ID alphabet that the privacy rules accept (`x.AA:00` reads as a host and port, and is refused).
_IDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,11}", fullmatch=True).filter(lambda i: privacy_problem(i) is None)
# Letters, digits, spaces, CJK and punctuation that cannot form a path, URL, address or secret.
_SAFE_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789     ,?!导出笔记同步订阅退款，。？！、：（）"
)
_TEXTS = st.text(alphabet=_SAFE_ALPHABET, min_size=1, max_size=60).filter(
    lambda t: t.strip() != "" and privacy_problem(t) is None  # the alphabet can still spell "localhost"
)


@st.composite
def _fixture_data(draw: st.DrawFn) -> Data:
    doc_ids = draw(st.lists(_IDS, min_size=2, max_size=4, unique=True))
    extra = len(doc_ids) - 2
    languages = ["en", "zh", *draw(st.lists(st.sampled_from(["en", "zh"]), min_size=extra, max_size=extra))]
    documents = [
        {"doc_id": d, "language": lang, "title": draw(_TEXTS)} for d, lang in zip(doc_ids, languages, strict=True)
    ]
    chunk_ids = draw(st.lists(_IDS, min_size=1, max_size=6, unique=True))
    chunks = [{"chunk_id": c, "doc_id": draw(st.sampled_from(doc_ids)), "text": draw(_TEXTS)} for c in chunk_ids]
    query_ids = draw(st.lists(_IDS, min_size=4, max_size=8, unique=True))
    # The first four queries guarantee an answerable and a no-answer query in each language.
    kinds = [("en", True), ("en", False), ("zh", True), ("zh", False)]
    kinds += [(draw(st.sampled_from(["en", "zh"])), draw(st.booleans())) for _ in query_ids[4:]]
    queries = []
    for query_id, (language, answerable) in zip(query_ids, kinds, strict=True):
        judgments = []
        if answerable:
            judged = draw(st.lists(st.sampled_from(chunks), min_size=1, max_size=3, unique_by=lambda c: c["chunk_id"]))
            for chunk in judged:
                text = chunk["text"]
                spans = []
                for _ in range(draw(st.integers(1, 3))):
                    start = draw(st.integers(0, len(text) - 1))
                    end = draw(st.integers(start + 1, len(text)))
                    spans.append({"start": start, "text": text[start:end]})
                judgments.append({"chunk_id": chunk["chunk_id"], "grade": draw(st.integers(1, 3)), "spans": spans})
        tags = draw(st.lists(st.sampled_from(["cross_language", "multi_chunk", "near_miss", "paraphrase"]), max_size=3))
        queries.append(
            {"query_id": query_id, "language": language, "text": draw(_TEXTS), "tags": tags, "judgments": judgments}
        )
    return {
        "fixture_id": draw(_IDS),
        "fixture_version": "1.0.0",
        "license": "CC0-1.0",
        "attribution": draw(_TEXTS),
        "documents": documents,
        "chunks": chunks,
        "queries": queries,
    }


@given(_fixture_data())
@settings(max_examples=40, deadline=None)
def test_generated_valid_fixture_is_accepted_and_round_trips(data: Data) -> None:
    fixture = parse_fixture(dumps(data))
    assert isinstance(fixture, Fixture)
    assert [q.query_id for q in fixture.queries] == [q["query_id"] for q in data["queries"]]
    again = parse_fixture(fixture.model_dump_json())
    assert again == fixture
    assert json.loads(fixture.model_dump_json()) == data


@given(_fixture_data(), st.data())
@settings(max_examples=40, deadline=None)
def test_generated_fixture_with_a_moved_span_is_refused_naming_the_query(data: Data, choice: st.DataObject) -> None:
    answerable = [q for q in data["queries"] if q["judgments"]]
    query = choice.draw(st.sampled_from(answerable))
    j = choice.draw(st.integers(0, len(query["judgments"]) - 1))
    judgment = query["judgments"][j]
    s = choice.draw(st.integers(0, len(judgment["spans"]) - 1))
    span = judgment["spans"][s]
    text = next(c["text"] for c in data["chunks"] if c["chunk_id"] == judgment["chunk_id"])
    start = choice.draw(st.integers(0, len(text)))
    assume(text[start : start + len(span["text"])] != span["text"])
    span["start"] = start
    assert problems_of(data) == [
        f"query {query['query_id']!r}: field 'judgments[{j}].spans[{s}]' is not verbatim in chunk "
        f"{judgment['chunk_id']!r} at offset {start}"
    ]
