"""What a user's Python retriever (``--retriever module:factory``) answers is held to the rules of a run file: a
chunk ID a run file could not hold is refused at once (exit 2) naming the retriever, the query and the ID.

The factories below are the plugins the tests name, as ``tests.app.test_plugins_answers:<factory>``.
"""

from __future__ import annotations

import pytest

from evalkit.app.cli import main
from evalkit.retrieval.retriever import SearchRequest, search_all

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
