"""What a user's Python retriever (``--retriever module:factory``) answers is held to the rules of a run file: a
chunk ID a run file could not hold is refused at once (exit 2) naming the retriever, the query and the ID. A
``QueryFailed`` with a message (or none) records the query as failed; one whose ``QueryError`` is invalid is refused
at once, naming the retriever, the query and the field.

The factories below are the plugins the tests name, as ``tests.app.test_plugins_answers:<factory>``.
"""

from __future__ import annotations

import pytest

from evalkit.app.cli import main
from evalkit.app.plugins import load_retriever
from evalkit.data.fixture import load_fixture
from evalkit.retrieval.retriever import QueryError, QueryFailed, SearchRequest, search_all

from ..conftest import TINY_DIR

HERE = "tests.app.test_plugins_answers"


class _Answers:
    """Answers every query with the given results."""

    def __init__(self, name: str, results: list[tuple[str, float]]) -> None:
        self.name = name
        self.results = results

    def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
        return self.results


def id_with_newline() -> _Answers:
    return _Answers("id-newline", [("en-sync-01", 1.0), ("en-sync-01\n", 0.5)])


def id_with_space() -> _Answers:
    return _Answers("id-space", [("en-sync-01 x", 1.0)])


def _run(factory: str) -> list[str]:
    plugin = f"{HERE}:{factory}"
    return ["run", "--fixture", str(TINY_DIR), "--ablations", "", "--no-gates", "--runs", "1", "--retriever", plugin]


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (
            "id_with_newline",
            "evalkit: system id-newline: query q-en-001: result 1: field 'chunk_id': 'en-sync-01\\n' is empty or "
            "holds whitespace\n",
        ),
        (
            "id_with_space",
            "evalkit: system id-space: query q-en-001: result 0: field 'chunk_id': 'en-sync-01 x' is empty or holds "
            "whitespace\n",
        ),
    ],
)
def test_a_chunk_id_a_run_file_could_not_hold_is_refused_naming_retriever_query_and_id(
    factory: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(factory)) == 2
    captured = capsys.readouterr()
    assert captured.err.endswith(message), captured.err
    assert "all " not in captured.out  # refused before any summary


@pytest.mark.parametrize("bad", ["", "a\tb", "a\u3000b", "a\u202eb", "a\x00b"])
def test_search_all_refuses_the_id_at_once(bad: str) -> None:
    with pytest.raises(ValueError, match=r"^system [^:]+: query q1: result 0: field 'chunk_id': "):
        search_all(_Answers("x", [(bad, 1.0)]), [SearchRequest("q1", "text", "en", 3)])


class _Fails:
    """Raises ``QueryFailed(*args)`` for every Chinese query, or builds the QueryError ``error`` when given."""

    def __init__(self, name: str, *args: object, error: tuple[object, ...] | None = None) -> None:
        self.name = name
        self.args = args
        self.error = error

    def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
        if language == "zh":
            if self.error is not None:
                raise QueryFailed(QueryError(*self.error))  # type: ignore[arg-type]
            raise QueryFailed(*self.args)  # type: ignore[arg-type]
        return [("en-sync-01", 1.0)]


def fails_with_message() -> _Fails:
    return _Fails("fails-message", "backend down:\n  shard 3 of 8")


def fails_bare() -> _Fails:
    return _Fails("fails-bare")


def fails_unknown_kind() -> _Fails:
    return _Fails("fails-kind", error=("backend-down", None, 1))


def fails_negative_attempts() -> _Fails:
    return _Fails("fails-attempts", error=("timeout", None, -1))


def fails_bad_status() -> _Fails:
    return _Fails("fails-status", error=("http_error", -5, 1))


def fails_with_a_number() -> _Fails:
    return _Fails("fails-number", 42)


def _zh_queries() -> list[str]:
    return [q.query_id for q in load_fixture(TINY_DIR).fixture.queries if q.language == "zh"]


@pytest.mark.parametrize(
    ("factory", "detail"),
    [("fails_with_message", "backend down: shard 3 of 8"), ("fails_bare", None)],
)
def test_query_failed_with_a_message_or_nothing_records_the_query(
    factory: str, detail: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    _, retriever = load_retriever(f"{HERE}:{factory}")
    en, zh = search_all(retriever, [SearchRequest("q-en", "t", "en", 3), SearchRequest("q-zh", "t", "zh", 3)])
    assert en.error is None and en.hits == (("en-sync-01", 1.0),)
    assert zh.hits == () and zh.error == QueryError("retriever_error", None, 1)
    assert zh.error.detail == detail
    assert main(_run(factory)) == 0
    captured = capsys.readouterr()
    assert f"{retriever.name}: {len(_zh_queries())} query(ies) failed" in captured.out
    assert captured.err == ""


@pytest.mark.parametrize(
    ("factory", "name", "problem"),
    [
        (
            "fails_unknown_kind",
            "fails-kind",
            "QueryError field 'kind' is 'backend-down', not one of timeout, connection_error, http_error, "
            "malformed_response, retriever_error",
        ),
        (
            "fails_negative_attempts",
            "fails-attempts",
            "QueryError field 'attempts' is -1, not an integer of at least 1",
        ),
        (
            "fails_bad_status",
            "fails-status",
            "QueryError field 'status' is -5, not None or an HTTP status (an integer from 100 to 999)",
        ),
        ("fails_with_a_number", "fails-number", "QueryFailed takes a QueryError or a message, not int"),
    ],
)
def test_an_invalid_query_error_is_refused_at_once_naming_system_query_and_field(
    factory: str, name: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(factory)) == 2
    captured = capsys.readouterr()
    assert captured.err == f"evalkit: system {name}: query {_zh_queries()[0]}: {problem}\n"
    assert "all " not in captured.out  # refused before any summary


class _FailsByKind:
    """Fails every Chinese query with a timeout and the first English one with a message (in each run)."""

    name = "fails-mixed"

    def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
        if language == "zh":
            raise QueryFailed(QueryError("timeout", None, 2))
        if text == next(q.text for q in load_fixture(TINY_DIR).fixture.queries if q.language == "en"):
            raise QueryFailed("index offline")
        return [("en-sync-01", 1.0)]


def fails_mixed() -> _FailsByKind:
    return _FailsByKind()


def test_the_failed_queries_line_counts_them_by_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_run("fails_mixed")) == 0
    line = f"fails-mixed: {len(_zh_queries()) + 1} query(ies) failed and scored as empty rankings"
    assert f"{line} (timeout {len(_zh_queries())}, retriever_error 1)\n" in capsys.readouterr().out
