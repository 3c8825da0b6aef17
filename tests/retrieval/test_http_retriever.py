"""The HTTP adapter against a local standard-library server: answers, slow, failing and malformed responses."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from evalkit.app.cli import main
from evalkit.app.plugins import load_http_retriever
from evalkit.data.fixture import LoadedFixture
from evalkit.reporting.build import build_report
from evalkit.reporting.report import report_json
from evalkit.retrieval.http import HttpRetriever
from evalkit.retrieval.http_config import HttpRetrieverConfig, load_http_config
from evalkit.retrieval.retriever import QueryError, QueryFailed, SearchRequest
from evalkit.runs.ablations import external_ablation
from evalkit.runs.evaluation import evaluate

from ..conftest import ROOT, TINY_DIR

SECRET = "Bearer s3cr3t-t0ken-value"
CHUNKS = ["en-trash-01", "en-sync-01", "zh-export-01"]


class _Handler(BaseHTTPRequestHandler):
    """Behaviour by path: /ok, /slow, /500, /404, /malformed, /flaky (500 on every first attempt), /get."""

    in_flight = 0
    max_in_flight = 0
    seen_auth: ClassVar[list[str | None]] = []
    attempts: ClassVar[dict[str, int]] = {}
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        del format, args

    def _answer(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _hits(self, k: int) -> bytes:
        return json.dumps(
            {"data": {"hits": [{"doc": {"id": c}, "score": 1.0 - i / 10} for i, c in enumerate(CHUNKS[:k])]}}
        ).encode()

    def _handle(self, body: dict[str, Any]) -> None:
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.max_in_flight = max(cls.max_in_flight, cls.in_flight)
            cls.seen_auth.append(self.headers.get("Authorization"))
        # A request is in flight until its answer is ready, not until it is written: the client may send its next
        # request as soon as it has read this answer, before this thread would get to count this one out.
        try:
            time.sleep(0.02)
            path = urlsplit(self.path).path
            key = f"{path}:{body.get('q')}"
            with cls.lock:
                cls.attempts[key] = cls.attempts.get(key, 0) + 1
                attempt = cls.attempts[key]
            if path == "/slow":
                time.sleep(1.0)
                reply = (200, self._hits(3))
            elif path == "/500" or (path == "/flaky" and attempt == 1):
                reply = (500, b"{}")
            elif path == "/404":
                reply = (404, b"{}")
            elif path == "/malformed":
                reply = (200, b'{"data": {"hits": [{"doc": {}, "score": "x"}]}}')
            else:
                reply = (200, self._hits(int(body.get("size", 10))))
        finally:
            with cls.lock:
                cls.in_flight -= 1
        self._answer(*reply)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        self._handle(json.loads(self.rfile.read(length)))

    def do_GET(self) -> None:
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        self._handle(query)


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.in_flight = _Handler.max_in_flight = 0
    _Handler.seen_auth.clear()
    _Handler.attempts.clear()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _config(url: str, **overrides: Any) -> HttpRetrieverConfig:
    values: dict[str, Any] = {
        "name": "my-search",
        "url": url,
        "headers_from_env": {"Authorization": "MY_SEARCH_AUTH"},
        "body": {"q": "{text}", "lang": "{language}", "size": "{k}", "note": "query {text} in {language}"},
        "results_path": "data.hits",
        "id_field": "doc.id",
        "score_field": "score",
        "concurrency": 3,
        "timeout_s": 0.3,
        "max_attempts": 3,
        "retry_backoff_s": 0.0,
        **overrides,
    }
    return HttpRetrieverConfig.model_validate(values)


ENV = {"MY_SEARCH_AUTH": SECRET}


def test_answers_are_parsed_and_headers_come_from_the_environment(server: str) -> None:
    retriever = HttpRetriever(_config(server + "/ok"), ENV)
    assert list(retriever.search("where is trash", "en", 2)) == [("en-trash-01", 1.0), ("en-sync-01", 0.9)]
    assert _Handler.seen_auth == [SECRET]


def test_get_sends_the_template_as_query_parameters(server: str) -> None:
    retriever = HttpRetriever(_config(server + "/get", method="GET"), ENV)
    assert [c for c, _ in retriever.search("x", "en", 1)] == ["en-trash-01"]


def _failure(retriever: HttpRetriever) -> QueryError:
    with pytest.raises(QueryFailed) as info:
        retriever.search("q", "en", 3)
    return info.value.error


def test_timeouts_are_retried_then_recorded(server: str) -> None:
    assert _failure(HttpRetriever(_config(server + "/slow", max_attempts=2), ENV)) == QueryError("timeout", None, 2)


def test_server_errors_are_retried_client_errors_are_not(server: str) -> None:
    assert _failure(HttpRetriever(_config(server + "/500"), ENV)) == QueryError("http_error", 500, 3)
    assert _failure(HttpRetriever(_config(server + "/404"), ENV)) == QueryError("http_error", 404, 1)
    assert [c for c, _ in HttpRetriever(_config(server + "/flaky"), ENV).search("q", "en", 1)] == ["en-trash-01"]


def test_malformed_responses_are_recorded(server: str) -> None:
    assert _failure(HttpRetriever(_config(server + "/malformed"), ENV)) == QueryError("malformed_response", None, 1)
    wrong_path = HttpRetriever(_config(server + "/ok", results_path="nope"), ENV)
    assert _failure(wrong_path).kind == "malformed_response"


def test_connection_refused_is_recorded(server: str) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = _failure(HttpRetriever(_config(f"http://127.0.0.1:{port}/x", max_attempts=2), ENV))
    assert error == QueryError("connection_error", None, 2)


def test_concurrency_is_bounded_and_order_is_kept(server: str) -> None:
    retriever = HttpRetriever(_config(server + "/ok", concurrency=3), ENV)
    requests = [SearchRequest(f"q{i:02d}", f"text {i}", "en", 1) for i in range(24)]
    outcomes = retriever.search_all(requests)
    assert [o.query_id for o in outcomes] == [r.query_id for r in requests]
    assert all(o.error is None and o.latency_ms > 0 for o in outcomes)
    assert 1 < _Handler.max_in_flight <= 3


def test_missing_environment_variable_is_named_not_its_value() -> None:
    with pytest.raises(ValueError, match="environment variable\\(s\\) not set: MY_SEARCH_AUTH"):
        HttpRetriever(_config("http://127.0.0.1:9/x"), {})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"url": "ftp://x"}, "url"),
        ({"concurrency": 0}, "concurrency"),
        ({"max_attempts": 11}, "max_attempts"),
        ({"surprise": 1}, "surprise"),
        ({"method": "PUT"}, "method"),
    ],
)
def test_bad_configs_name_the_field(tmp_path: Path, change: dict[str, Any], field: str) -> None:
    values = {"name": "s", "url": "http://127.0.0.1:9/x", "body": {"q": "{text}"}, **change}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(values), encoding="utf-8")
    with pytest.raises(ValueError, match=f"retriever config c.json: field '{field}'"):
        load_http_config(path)


def _private_strings(config: HttpRetrieverConfig) -> list[str]:
    values = [config.url, SECRET, "MY_SEARCH_AUTH", "Authorization", "127.0.0.1", "query {text} in {language}"]
    values += [config.results_path, config.id_field, json.dumps(config.body)]
    return values


def test_full_report_with_failures_discloses_no_url_header_or_body(tiny: LoadedFixture, server: str) -> None:
    config = _config(server + "/flaky", max_attempts=1)  # every query fails once: all http_error 500
    ok = HttpRetriever(_config(server + "/ok"), ENV)
    failing = HttpRetriever(config, ENV)
    ablations = (external_ablation("my-search", "retriever"), external_ablation("down", "retriever"))
    evaluation = evaluate(tiny, ablations, runs=1, systems={"my-search": ok, "down": failing})
    report = build_report(evaluation)
    assert report.ablations["my-search"].query_errors == ()
    assert report.ablations["my-search"].latency_ms.count == len(tiny.fixture.queries)
    errors = report.ablations["down"].query_errors
    assert [(e.kind, e.status, e.attempts) for e in errors] == [("http_error", 500, 1)] * len(tiny.fixture.queries)
    system = report.ablations["down"].system
    assert system is not None and system.kind == "http" and system.sha256 is not None
    serialized = report_json(report).decode("utf-8")
    leaked = [value for value in _private_strings(config) if value in serialized]
    assert leaked == []
    assert "127.0.0.1" in config.url, "the check above can fail: the URL holds that host"


def test_cli_http_retriever_with_failure_bound(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_SEARCH_AUTH", SECRET)
    config_path = tmp_path / "search.json"
    config_path.write_text(_config(server + "/500", max_attempts=2).model_dump_json(), encoding="utf-8")
    out = f"reports/pytest-{uuid.uuid4().hex[:8]}.json"
    argv = ["run", "--fixture", str(TINY_DIR), "--ablations", "lexical", "--retriever-config", str(config_path)]
    try:
        assert main([*argv, "--no-gates", "--output", out]) == 0, "failed queries alone do not fail the run"
        captured = capsys.readouterr().out
        assert "my-search: 8 query(ies) failed and scored as empty rankings" in captured  # tiny has 8 queries
        name, retriever = load_http_retriever(config_path)
        assert name == "my-search" and isinstance(retriever, HttpRetriever)
        assert SECRET not in (ROOT / out).read_text(encoding="utf-8")
        assert main([*argv, "--no-gates", "--max-failed-queries", "3"]) == 1
        assert "> --max-failed-queries 3" in capsys.readouterr().out
    finally:
        (ROOT / out).unlink(missing_ok=True)


def test_http_retriever_gets_tables_charts_and_gates(tiny: LoadedFixture, server: str) -> None:
    from evalkit.reporting.figures import plot_language_metrics, plot_latency
    from evalkit.reporting.frames import failures_frame, metrics_frame
    from evalkit.reporting.gate_specs import GateThresholds
    from evalkit.reporting.gates import assess

    evaluation = evaluate(
        tiny,
        (external_ablation("my-search", "retriever"),),
        runs=2,
        systems={"my-search": HttpRetriever(_config(server + "/ok"), ENV)},
    )
    report = assess(evaluation, GateThresholds(), None)
    frame = metrics_frame(report)
    assert list(frame.index.get_level_values("ablation").unique()) == ["my-search"]
    assert frame.loc[("my-search", "all"), "p50_ms"] > 0
    assert not failures_frame(report).empty
    assert plot_language_metrics(report).axes and plot_latency(evaluation).axes
    assert report.gates == (), "the gates name built-in ablations, which did not run here: skipped, not failed"


@pytest.mark.slow  # executes a notebook
def test_notebook_runs_an_http_retriever(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.app.headless import run_notebook

    monkeypatch.setenv("MY_SEARCH_AUTH", SECRET)
    run_id = f"pytest-{uuid.uuid4().hex[:8]}"
    config = ROOT / "reports" / f"{run_id}-search.json"
    config.parent.mkdir(exist_ok=True)
    config.write_text(_config(server + "/ok", timeout_s=5.0).model_dump_json(), encoding="utf-8")
    try:
        run = run_notebook(ROOT, {"retriever": f"reports/{config.name}"}, run_id=run_id)
        assert run.passed, run.error_message
        assert run.report is not None
        report = json.loads(run.report.read_text(encoding="utf-8"))
        assert report["ablations"]["my-search"]["system"]["kind"] == "http"
        assert report["ablations"]["my-search"]["query_errors"] == []
        assert all(g["passed"] for g in report["gates"])
        assert len(run.figures) == 6
        assert SECRET not in run.notebook.read_text(encoding="utf-8")
        assert server not in run.report.read_text(encoding="utf-8")
    finally:
        config.unlink(missing_ok=True)
        import shutil

        shutil.rmtree(ROOT / "reports" / run_id, ignore_errors=True)
