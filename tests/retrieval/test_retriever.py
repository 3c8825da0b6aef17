"""The Retriever protocol: the built-in service is one implementation, and a user's retriever is one more ablation.

This module also holds the toy retriever that the CLI and notebook tests plug in with
``--retriever tests.retrieval.test_retriever:make_toy``.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from evalkit.app.cli import main
from evalkit.app.plugins import PluginRetriever, load_retriever
from evalkit.data.fixture import Chunk, LoadedFixture
from evalkit.data.settings import RetrievalSettings
from evalkit.reporting.build import build_report
from evalkit.reporting.report import parse_report, report_json
from evalkit.reporting.run_files import ranked_results
from evalkit.retrieval.adapters import KnowledgeServiceRetriever
from evalkit.retrieval.database import KnowledgeDatabase
from evalkit.retrieval.retriever import (
    InvalidQueryError,
    QueryError,
    QueryFailed,
    Retriever,
    SearchOutcome,
    SearchRequest,
    search_all,
)
from evalkit.retrieval.service import KnowledgeService
from evalkit.runs.ablations import ABLATION_IDS, Ablation, external_ablation, select_ablations
from evalkit.runs.evaluation import DeterminismError, Evaluation, evaluate

from ..conftest import ROOT, TINY_DIR

_WORD = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")


def _units(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class ToyRetriever:
    """Counts words (English) and characters (Chinese) shared with each chunk: crude, deterministic, tie-heavy."""

    name = "toy"

    def __init__(self) -> None:
        self.index_calls = 0
        self.searches = 0
        self._chunks: dict[str, set[str]] = {}

    def index(self, chunks: Sequence[Chunk]) -> None:
        self.index_calls += 1
        self._chunks = {c.chunk_id: _units(c.text) for c in chunks}

    def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
        self.searches += 1
        query = _units(text)
        scored = [(chunk_id, float(len(query & units))) for chunk_id, units in self._chunks.items()]
        return [pair for pair in scored if pair[1] > 0][:k]


def make_toy() -> ToyRetriever:
    """The factory named on the command line."""
    return ToyRetriever()


class _Flaky(ToyRetriever):
    """Returns a different ranking for one query on every call: not deterministic."""

    name = "flaky"

    def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
        hits = super().search(text, language, k)
        return [(c, s + self.searches * 1e-3) if i == 0 else (c, s) for i, (c, s) in enumerate(hits)]


class _Failing:
    def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
        raise QueryFailed(QueryError("timeout", None, 3))


def not_a_retriever() -> object:
    return object()


def broken_factory() -> ToyRetriever:
    raise RuntimeError("no index")


def spaced_name() -> ToyRetriever:
    toy = ToyRetriever()
    toy.name = "my search"  # a name the report cannot hold as a system ID
    return toy


class _DocumentIds:
    """Answers with document IDs, not chunk IDs: every result is unknown to the fixture."""

    name = "documents"

    def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
        return [("doc-a", 1.0), ("doc-b", 0.5)]


def document_ids() -> _DocumentIds:
    return _DocumentIds()


def nameless() -> ToyRetriever:
    toy = ToyRetriever()
    toy.name = None  # type: ignore[assignment]
    return toy


TOY = external_ablation("toy", "retriever")


def test_the_protocol_module_imports_nothing_of_the_built_in_service() -> None:
    """A user's retriever imports the protocol without the knowledge service and its SQLite database."""
    source = (ROOT / "evalkit" / "retrieval" / "retriever.py").read_text(encoding="utf-8")
    imported = [
        node.module or ""
        for node in ast.parse(source).body  # module level: what `import evalkit.retrieval.retriever` runs
        if isinstance(node, ast.ImportFrom)
    ] + [alias.name for node in ast.parse(source).body if isinstance(node, ast.Import) for alias in node.names]
    from_evalkit = [name for name in imported if name.startswith("evalkit.")]
    assert from_evalkit and all(name.startswith(("evalkit.common.", "evalkit.data.")) for name in from_evalkit)
    assert "sqlite3" not in imported


def test_the_built_in_service_is_a_retriever(tiny: LoadedFixture) -> None:
    settings = RetrievalSettings()
    with KnowledgeDatabase.temporary() as database:
        database.add_documents(tiny.fixture.documents)
        database.add_chunks(tiny.fixture.chunks)
        service = KnowledgeService(database, settings)
        retriever = KnowledgeServiceRetriever(service, "lexical")
        assert isinstance(retriever, Retriever)
        query = tiny.fixture.queries[0]
        expected = [(h.chunk_id, h.score) for h in service.search(query.text, "lexical", query.language)]
        assert list(retriever.search(query.text, query.language, 10)) == expected
        assert len(retriever.search(query.text, query.language, 1)) == min(1, len(expected))


def test_toy_retriever_runs_beside_the_built_in_ablations(tiny: LoadedFixture, tiny_evaluation: Evaluation) -> None:
    toy = ToyRetriever()
    ablations = (*select_ablations(list(ABLATION_IDS)), TOY)
    evaluation = evaluate(tiny, ablations, runs=2, systems={"toy": toy})
    assert toy.index_calls == 1, "index() is called once, before both runs"
    assert toy.searches == 2 * len(tiny.fixture.queries)
    assert list(evaluation.ablations) == [*ABLATION_IDS, "toy"]
    for ablation_id in ABLATION_IDS:
        assert evaluation.ablations[ablation_id].per_query == tiny_evaluation.ablations[ablation_id].per_query
    result = evaluation.ablations["toy"]
    assert result.latency.count == 2 * len(tiny.fixture.queries)
    assert set(result.aggregates) == {"all", "en", "zh"}
    report = build_report(evaluation)
    assert report.ablations["toy"].mode == "retriever"
    assert report.ablations["toy"].system is not None and report.ablations["toy"].system.kind == "python"
    assert parse_report(report_json(report)) == report
    assert evaluation.evaluation_definition_hash != tiny_evaluation.evaluation_definition_hash


class _AllTied(ToyRetriever):
    """Every chunk, all with the same score: the order is the tie policy's alone."""

    def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
        return [(chunk_id, 1.0) for chunk_id in self._chunks]


def test_rankings_are_ordered_by_the_tie_policy(tiny: LoadedFixture) -> None:
    evaluation = evaluate(tiny, (TOY,), runs=1, systems={"toy": _AllTied()})
    trec = evaluate(tiny, (TOY,), runs=1, systems={"toy": _AllTied()}, ties="trec_eval")
    assert evaluation.tie_policy == "evalkit" and trec.tie_policy == "trec_eval"
    assert build_report(trec).tie_policy == "trec_eval"
    assert evaluation.evaluation_definition_hash != trec.evaluation_definition_hash
    chunk_ids = sorted(c.chunk_id for c in tiny.fixture.chunks)
    first = tiny.fixture.queries[0].query_id
    assert [c for c, _ in ranked_results(evaluation.ablations["toy"], "evalkit")[first]] == chunk_ids
    assert [c for c, _ in ranked_results(trec.ablations["toy"], "trec_eval")[first]] == chunk_ids[::-1]
    assert evaluation.ablations["toy"].per_query != trec.ablations["toy"].per_query


def test_a_non_deterministic_retriever_fails_naming_the_queries(tiny: LoadedFixture) -> None:
    flaky = external_ablation("flaky", "retriever")
    with pytest.raises(DeterminismError, match=r"ablation 'flaky' \(rankings\); queries that differed: q-"):
        evaluate(tiny, (flaky,), runs=2, systems={"flaky": _Flaky()})


def test_a_failed_query_scores_empty_and_is_recorded(tiny: LoadedFixture) -> None:
    ablation = external_ablation("down", "retriever")
    evaluation = evaluate(tiny, (ablation,), runs=1, systems={"down": _Failing()})
    result = evaluation.ablations["down"]
    assert all(r.chunk_ids == () and r.error == QueryError("timeout", None, 3) for r in result.results)
    assert result.aggregates["all"]["recall@10"] == 0.0
    errors = build_report(evaluation).ablations["down"].query_errors
    assert len(errors) == len(tiny.fixture.queries)
    assert (errors[0].kind, errors[0].status, errors[0].attempts) == ("timeout", None, 3)


def test_a_query_failed_with_a_message_is_recorded_and_reported(tiny: LoadedFixture) -> None:
    class Down:
        def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
            raise QueryFailed("index offline")

    evaluation = evaluate(tiny, (external_ablation("down", "retriever"),), runs=1, systems={"down": Down()})
    errors = build_report(evaluation).ablations["down"].query_errors
    assert len(errors) == len(tiny.fixture.queries)
    assert {(e.kind, e.status, e.attempts) for e in errors} == {("retriever_error", None, 1)}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        (("backend-down", None, 1), "kind"),
        (("http_error", 99, 1), "status"),
        (("http_error", 1000, 1), "status"),
        (("http_error", True, 1), "status"),
        (("http_error", "500", 1), "status"),
        (("timeout", None, 0), "attempts"),
        (("timeout", None, True), "attempts"),
        (("timeout", None, 1.0), "attempts"),
        (("timeout", None, 1, b"bytes"), "detail"),
    ],
)
def test_an_invalid_query_error_is_refused_when_made(fields: tuple[object, ...], field: str) -> None:
    with pytest.raises(InvalidQueryError, match=f"^QueryError field '{field}' is "):
        QueryError(*fields)  # type: ignore[arg-type]
    assert issubclass(InvalidQueryError, ValueError)


def test_valid_query_errors_are_kept() -> None:
    assert QueryError("http_error", 999, 2, "HTTP status 999").status == 999
    assert QueryFailed().error == QueryError("retriever_error", None, 1)
    assert QueryFailed("  two\n lines ").error.detail == "two lines"
    assert QueryFailed("x" * 400).error.detail == "x" * 300 + "... (400 characters)"


def test_a_retriever_raising_an_invalid_failure_is_refused_naming_system_and_query() -> None:
    class Invalid:
        name = "invalid"

        def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
            raise QueryFailed(QueryError("oops", None, 1))  # type: ignore[arg-type]

    class Hollow(QueryFailed):
        def __init__(self) -> None:
            Exception.__init__(self, "no error set")

    class RaisesHollow:
        name = "hollow"

        def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
            raise Hollow

    with pytest.raises(ValueError, match=r"^system invalid: query q1: QueryError field 'kind' is 'oops', not one"):
        search_all(Invalid(), [SearchRequest("q1", "text", "en", 10)])
    with pytest.raises(ValueError, match=r"^system hollow: query q1: Hollow carries no QueryError$"):
        search_all(RaisesHollow(), [SearchRequest("q1", "text", "en", 10)])

    class StringError:
        name = "string-error"

        def search_all(self, requests: Sequence[SearchRequest]) -> list[SearchOutcome]:
            return [SearchOutcome(r.query_id, (), 0.0, "timeout") for r in requests]  # type: ignore[arg-type]

        def search(self, text: str, language: str, k: int) -> list[tuple[str, float]]:
            return []

    with pytest.raises(ValueError, match=r"^system string-error: query q1: the error is str$"):
        search_all(StringError(), [SearchRequest("q1", "text", "en", 10)])


@pytest.mark.parametrize("bad", [None, [("c", "high")], [("c",)], "abc", [(1, 2.0)]])
def test_malformed_results_name_the_query(bad: object) -> None:
    class Bad:
        def search(self, text: str, language: str, k: int) -> object:
            return bad

    with pytest.raises(ValueError, match="query q1"):
        search_all(Bad(), [SearchRequest("q1", "text", "en", 10)])  # type: ignore[arg-type]


def test_numpy_scores_are_numbers_and_their_problems_are_named() -> None:
    import numpy as np

    class Numpy:
        def __init__(self, score: object) -> None:
            self.score = score

        def search(self, text: str, language: str, k: int) -> object:
            return [("c1", np.float32(2.5)), ("c2", np.int64(2)), ("c3", self.score)]

    outcome = search_all(Numpy(1.0), [SearchRequest("q1", "text", "en", 10)])  # type: ignore[arg-type]
    assert outcome[0].hits == (("c1", 2.5), ("c2", 2.0), ("c3", 1.0))
    refused = ((np.float32("inf"), "field score is np.float32(inf), not a finite number"), ("1", "not a number"))
    for score, says in refused:
        with pytest.raises(ValueError, match=re.escape("query q1: result 2 (chunk 'c3'): ")) as error:
            search_all(Numpy(score), [SearchRequest("q1", "text", "en", 10)])  # type: ignore[arg-type]
        assert says in str(error.value)


def test_external_ids_are_only_for_external_systems() -> None:
    assert TOY.external and TOY.ablation_id == "toy"
    with pytest.raises(ValueError, match="built in and takes a built-in ablation ID"):
        Ablation.model_validate({"ablation_id": "toy", "mode": "lexical", "provider": None})
    with pytest.raises(ValueError, match="takes no provider"):
        Ablation.model_validate({"ablation_id": "toy", "mode": "retriever", "provider": "alias"})
    with pytest.raises(ValueError, match="invalid ablation ID"):
        external_ablation("no spaces", "run")


def test_systems_must_match_the_external_ablations(tiny: LoadedFixture) -> None:
    with pytest.raises(ValueError, match="external ablations without a system: \\['toy'\\]"):
        evaluate(tiny, (TOY,), runs=1)
    with pytest.raises(ValueError, match="unknown tie policy"):
        evaluate(tiny, (TOY,), runs=1, systems={"toy": ToyRetriever()}, ties="ranx")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no-colon", "expected 'package.module:factory'"),
        ("tests.nope_module:make", "cannot import module"),
        ("tests.retrieval.test_retriever:missing", "has no callable 'missing'"),
        ("tests.retrieval.test_retriever:not_a_retriever", "returned object, which has no search"),
        ("tests.retrieval.test_retriever:broken_factory", "the factory failed: RuntimeError: no index"),
        ("tests.retrieval.test_retriever:spaced_name", "field 'name': 'my search' is no system ID"),
    ],
)
def test_load_retriever_errors_name_the_spec(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_retriever(spec)


def test_load_retriever_takes_the_name_attribute() -> None:
    ablation_id, retriever = load_retriever("tests.retrieval.test_retriever:make_toy")
    assert ablation_id == "toy" and isinstance(retriever, PluginRetriever) and isinstance(retriever.inner, ToyRetriever)
    assert load_retriever("tests.retrieval.test_retriever:nameless")[0] == "nameless"  # absent: the factory's


def test_cli_runs_the_toy_beside_lexical(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = f"reports/pytest-{uuid.uuid4().hex[:8]}"
    try:
        argv = ["run", "--fixture", str(TINY_DIR), "--ablations", "lexical", "--no-gates", "--output", f"{out}/r.json"]
        code = main([*argv, "--retriever", "tests.retrieval.test_retriever:make_toy", "--trec-runs", f"{out}/runs"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        report = parse_report((ROOT / out / "r.json").read_bytes())
        assert list(report.ablations) == ["lexical", "toy"]
        assert "toy " in captured.out and "FAIL" not in captured.out  # no gate names lexical or toy
        assert sorted(p.name for p in (ROOT / out / "runs").iterdir()) == ["lexical.trec", "toy.trec"]
        alone = [
            "run",
            "--fixture",
            str(TINY_DIR),
            "--ablations",
            "",
            "--retriever",
            "tests.retrieval.test_retriever:make_toy",
        ]
        assert main(alone) == 0, "alone, gates on the built-in ablations are skipped, not failed"
        assert "not evaluated" not in capsys.readouterr().out
        assert main([*alone, "--gate", "toy recall@10 >= 1.01"]) == 1, "a gate on the toy applies"
        assert "toy recall@10" in capsys.readouterr().err
    finally:
        shutil.rmtree(ROOT / out, ignore_errors=True)


def test_cli_bad_retriever_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--fixture", str(TINY_DIR), "--retriever", "tests.retrieval.test_retriever:missing"])
    assert code == 2
    assert "has no callable 'missing'" in capsys.readouterr().err


@pytest.mark.slow  # executes a notebook
def test_notebook_runs_with_a_retriever_parameter() -> None:
    from evalkit.app.headless import run_notebook

    run_id = f"pytest-{uuid.uuid4().hex[:8]}"
    try:
        run = run_notebook(ROOT, {"retriever": "tests.retrieval.test_retriever:make_toy"}, run_id=run_id)
        assert run.passed, run.error_message
        assert run.report is not None
        report = json.loads(run.report.read_text(encoding="utf-8"))
        assert "toy" in report["ablations"] and all(g["passed"] for g in report["gates"])
        figures = {p.name for p in (run.run_dir / "figures").iterdir()}
        assert {"language_metrics.png", "latency.png", "rerank_delta.png"} <= figures
        executed = run.notebook.read_text(encoding="utf-8")
        assert "toy" in executed
    finally:
        shutil.rmtree(ROOT / "reports" / run_id, ignore_errors=True)


def test_a_retriever_returning_unknown_chunk_ids_is_told_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It scored 0 everywhere, exit 0, without a word (a run file of the same IDs is counted): a note counts them."""
    argv = ["run", "--fixture", str(TINY_DIR), "--ablations", "lexical", "--no-gates", "--runs", "1"]
    assert main([*argv, "--retriever", "tests.retrieval.test_retriever:document_ids"]) == 0
    out = capsys.readouterr().out
    assert "note: documents returned 2 chunk ID(s) the fixture does not hold, scored as not relevant" in out
    assert main([*argv, "--retriever", "tests.retrieval.test_retriever:make_toy"]) == 0
    assert "the fixture does not hold" not in capsys.readouterr().out


def test_trec_runs_name_what_the_folder_holds_besides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An earlier run's file left beside this run's would be scored as one of its systems; a calibrated run's files
    hold the evaluation queries only: both are said."""
    from evalkit.app.cli.run import _note_trec_folder

    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "old.trec").write_text("q1 Q0 c1 1 1 old\n", encoding="utf-8")
    (folder / "lexical.trec").write_text("q1 Q0 c1 1 1 lexical\n", encoding="utf-8")
    _note_trec_folder(folder, [folder / "lexical.trec"], calibrated=True)
    out = capsys.readouterr().out
    assert "note: 1 other TREC run file(s) in that folder were not written by this run" in out
    assert "the evaluation split's queries only" in out
    _note_trec_folder(folder, [folder / "lexical.trec", folder / "old.trec"], calibrated=False)
    assert capsys.readouterr().out == ""
