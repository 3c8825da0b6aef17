"""A user's Python retriever (``--retriever module:factory``) is user code: whatever it raises, ``SystemExit``
included, is bad input (exit 2) naming the retriever, never a traceback, a silent exit or the gates' exit 1.

The factories below are the plugins the tests name, as ``tests.app.test_plugins_hardening:<factory>``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from evalkit.app.cli import Terminated, main
from evalkit.app.plugins import BatchPluginRetriever, PluginError, PluginRetriever, load_retriever
from evalkit.data.fixture import Chunk
from evalkit.retrieval.retriever import QueryError, QueryFailed, SearchOutcome, SearchRequest, search_all

from ..conftest import TINY_DIR

HERE = "tests.app.test_plugins_hardening"


class _Plugin:
    """Answers every query with one chunk unless told to misbehave in ``search`` or ``index``."""

    def __init__(self, search_raises: BaseException | None = None, index_raises: BaseException | None = None):
        self.search_raises = search_raises
        self.index_raises = index_raises

    def index(self, chunks: Sequence[Chunk]) -> None:
        if self.index_raises is not None:
            raise self.index_raises

    def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
        if self.search_raises is not None:
            raise self.search_raises
        return [("en-trash-01", 1.0)]


class _Batch(_Plugin):
    def search_all(self, requests: Sequence[SearchRequest]) -> list[SearchOutcome]:
        raise RuntimeError("batch broke")


def search_raises() -> _Plugin:
    return _Plugin(search_raises=RuntimeError("boom\nsecond line"))


def search_exits_0() -> _Plugin:
    return _Plugin(search_raises=SystemExit(0))


def search_exits_1() -> _Plugin:
    return _Plugin(search_raises=SystemExit(1))


def search_value_error() -> _Plugin:
    return _Plugin(search_raises=ValueError("x" * 5000))


def index_raises() -> _Plugin:
    return _Plugin(index_raises=KeyError("missing"))


def index_query_failed() -> _Plugin:
    return _Plugin(index_raises=QueryFailed(QueryError("timeout", None, 1)))


def factory_exits_0() -> _Plugin:
    sys.exit(0)


def factory_exits_1() -> _Plugin:
    sys.exit(1)


def factory_raises() -> _Plugin:
    raise OSError("no index on disk")


def batch_raises() -> _Batch:
    return _Batch()


def search_interrupted() -> _Plugin:
    return _Plugin(search_raises=KeyboardInterrupt())


def search_terminated() -> _Plugin:
    return _Plugin(search_raises=Terminated())


def search_query_failed() -> _Plugin:
    return _Plugin(search_raises=QueryFailed(QueryError("timeout", None, 2)))


def works() -> _Plugin:
    return _Plugin()


def _run(factory: str) -> list[str]:
    return ["run", "--fixture", str(TINY_DIR), "--ablations", "", "--retriever", f"{HERE}:{factory}", "--no-gates"]


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("search_raises", "search() failed: RuntimeError: boom second line"),
        ("search_exits_0", "search() failed: SystemExit: 0"),
        ("search_exits_1", "search() failed: SystemExit: 1"),
        ("index_raises", "index() failed: KeyError: 'missing'"),
        ("index_query_failed", "index() failed: QueryFailed outside a query"),
        ("factory_exits_0", "the factory failed: SystemExit: 0"),
        ("factory_exits_1", "the factory failed: SystemExit: 1"),
        ("factory_raises", "the factory failed: OSError: no index on disk"),
        ("batch_raises", "search_all() failed: RuntimeError: batch broke"),
    ],
)
def test_plugin_failures_are_exit_2_naming_the_plugin(
    factory: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(factory)) == 2
    err = capsys.readouterr().err
    assert err == f"evalkit: retriever '{HERE}:{factory}': {message}\n"


def test_a_long_message_is_cut(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_run("search_value_error")) == 2
    err = capsys.readouterr().err
    assert "search() failed: ValueError: " + "x" * 300 + "... (5000 characters)" in err
    assert len(err) < 500


def test_plugin_errors_are_value_errors_so_front_doors_treat_them_as_bad_input() -> None:
    _, retriever = load_retriever(f"{HERE}:search_exits_0")
    assert isinstance(retriever, PluginRetriever) and not isinstance(retriever, BatchPluginRetriever)
    with pytest.raises(PluginError) as info:
        search_all(retriever, [SearchRequest("q1", "text", "en", 3)])
    assert isinstance(info.value, ValueError)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_failed_query_keeps_its_meaning() -> None:
    _, retriever = load_retriever(f"{HERE}:search_query_failed")
    (outcome,) = search_all(retriever, [SearchRequest("q1", "text", "en", 3)])
    assert outcome.hits == () and outcome.error == QueryError("timeout", None, 2)


@pytest.mark.parametrize(
    ("factory", "kind"), [("search_interrupted", KeyboardInterrupt), ("search_terminated", Terminated)]
)
def test_interrupts_still_stop_the_run(factory: str, kind: type[BaseException]) -> None:
    _, retriever = load_retriever(f"{HERE}:{factory}")
    with pytest.raises(kind):
        retriever.search("text", "en", 3)


def test_a_working_plugin_is_unchanged_behind_the_guard(capsys: pytest.CaptureFixture[str]) -> None:
    _, retriever = load_retriever(f"{HERE}:works")
    assert list(retriever.search("text", "en", 3)) == [("en-trash-01", 1.0)]
    _, batch = load_retriever(f"{HERE}:batch_raises")
    assert isinstance(batch, BatchPluginRetriever)
    assert main(_run("works")) == 0


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("hostile_plugin")]:
        del sys.modules[name]


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("import sys\nsys.exit(0)\n", "importing 'hostile_plugin_exit' failed: SystemExit: 0"),
        ("raise RuntimeError('at import')\n", "importing 'hostile_plugin_raise' failed: RuntimeError: at import"),
    ],
)
def test_a_module_failing_at_import_is_exit_2(
    plugin_dir: Path, code: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    module = message.split("'")[1]
    (plugin_dir / f"{module}.py").write_text(code, encoding="utf-8")
    argv = ["run", "--fixture", str(TINY_DIR), "--ablations", "", "--retriever", f"{module}:make", "--no-gates"]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"evalkit: retriever '{module}:make': {message}\n"
