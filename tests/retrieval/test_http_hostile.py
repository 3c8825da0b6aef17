"""The HTTP adapter against a hostile server: redirects, trickled bytes, huge or pathological bodies, bad headers,
bad config files and signals while requests hang. Every call that could hang runs under a hang guard: a generous
bound that fails a test which would otherwise hang. No test asserts how long a call took; a server that trickles
bytes does so until the test ends, so a deadline that is not kept hangs the call instead of merely slowing it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

from evalkit.app.cli import main
from evalkit.retrieval.http import HttpRetriever, loads_response
from evalkit.retrieval.http_config import MAX_CONFIG_BYTES, HttpRetrieverConfig, load_http_config
from evalkit.retrieval.retriever import QueryError, QueryFailed, SearchRequest

from ..conftest import ROOT, TINY_DIR

SECRET = "Bearer hostile-s3cr3t"
ENV = {"MY_SEARCH_AUTH": SECRET}
GUARD_S = 30.0
"""Hang guard of one call that could hang (the whole file has tests/conftest.py's longer one)."""
T = TypeVar("T")


def _within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``, which must finish within ``seconds``: a hang fails the test instead of hanging it."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(("value", call()))
        except BaseException as exc:
            box.append(("error", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"did not finish within {seconds} s")
    kind, value = box[0]
    if kind == "error":
        raise value
    return value  # type: ignore[no-any-return]


class _Hostile(BaseHTTPRequestHandler):
    """Behaviour by path; ``bodies`` maps a path to a 200 JSON body; ``requests`` records each request's path.
    Dripping goes on until ``stop`` is set (when the test ends)."""

    bodies: ClassVar[dict[str, bytes]] = {}
    requests: ClassVar[list[str]] = []
    redirect_to: ClassVar[str] = ""
    stop = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:
        del format, args

    def _drip(self, prefix: bytes, byte: bytes = b"x") -> None:
        try:
            self.wfile.write(prefix)
            self.wfile.flush()
            while not self.stop.wait(0.05):
                self.wfile.write(byte)
                self.wfile.flush()
        except OSError:
            pass

    def _stream(self, prefix: bytes, piece: bytes) -> None:
        try:
            self.wfile.write(prefix)
            until = time.monotonic() + 10
            while not self.stop.is_set() and time.monotonic() < until:
                self.wfile.write(piece)
        except OSError:
            pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        path = self.path
        self.requests.append(path)
        if path.startswith("/redirect"):
            self.send_response(int(path.rsplit("-", 1)[1]))
            self.send_header("Location", self.redirect_to if "away" in path else "/ok?token=t0ken")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/drip-headers":
            self._drip(b"HTTP/1.0 200 OK\r\nX-Drip: ")
        elif path == "/drip-body":
            self._drip(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", b" ")
        elif path == "/big-declared":
            self._drip(b"HTTP/1.0 200 OK\r\nContent-Length: 1000000000\r\n\r\n", b" ")
        elif path == "/big-streamed":
            self._stream(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n", b" " * 65536)
        elif path == "/big-chunked":
            self.protocol_version = "HTTP/1.1"
            head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            self._stream(head, b"10000\r\n" + b" " * 65536 + b"\r\n")
        else:
            payload = self.bodies.get(path, b"{}")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)


class _Witness(BaseHTTPRequestHandler):
    """Another origin: records every request it gets, with its Authorization header."""

    seen: ClassVar[list[tuple[str, str | None]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        del format, args

    def _record(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = _record


def _serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture
def server() -> Iterator[str]:
    _Hostile.stop.clear()
    _Hostile.bodies.clear()
    _Hostile.requests.clear()
    httpd, url = _serve(_Hostile)
    yield url
    _Hostile.stop.set()
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def witness() -> Iterator[int]:
    _Witness.seen.clear()
    httpd, _ = _serve(_Witness)
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def _config(url: str, **overrides: Any) -> HttpRetrieverConfig:
    values: dict[str, Any] = {
        "name": "my-search",
        "url": url,
        "headers_from_env": {"Authorization": "MY_SEARCH_AUTH"},
        "body": {"q": "{text}", "size": "{k}"},
        "results_path": "data.hits",
        "id_field": "doc.id",
        "score_field": "score",
        "timeout_s": 1.0,
        "deadline_s": 0.5,
        "max_attempts": 1,
        "retry_backoff_s": 0.0,
        **overrides,
    }
    return HttpRetrieverConfig.model_validate(values)


def _failure(retriever: HttpRetriever) -> QueryError:
    def call() -> None:
        retriever.search("q", "en", 3)

    with pytest.raises(QueryFailed) as info:
        _within(GUARD_S, call)
    return info.value.error


# 1. Redirects


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_host_is_not_followed_and_names_the_host_only(
    server: str, witness: int, status: int
) -> None:
    _Hostile.redirect_to = f"http://localhost:{witness}/steal?key=k3y"
    error = _failure(HttpRetriever(_config(f"{server}/redirect-away-{status}"), ENV))
    assert error == QueryError("http_error", status, 1)
    assert error.detail == "redirect to host localhost not followed"
    message = error.describe("q1")
    assert message.startswith(f"query q1: http_error, status {status}")
    assert all(private not in message for private in ("steal", "k3y", str(witness), SECRET))
    assert _Witness.seen == [], "the other origin got a request"


def test_a_redirect_to_the_same_host_is_not_followed_either(server: str) -> None:
    _Hostile.bodies["/ok"] = json.dumps({"data": {"hits": []}}).encode()
    error = _failure(HttpRetriever(_config(f"{server}/redirect-here-302"), ENV))
    assert error == QueryError("http_error", 302, 1)
    assert error.detail == "redirect to host 127.0.0.1 not followed"
    assert "t0ken" not in error.describe("q1")


# 2. A total deadline


@pytest.mark.parametrize("path", ["/drip-headers", "/drip-body"])
def test_a_trickling_server_cannot_stretch_a_request_past_its_deadline(server: str, path: str) -> None:
    # The server trickles until the test ends: without the deadline the call hangs and the guard fails it.
    error = _failure(HttpRetriever(_config(server + path), ENV))
    assert error == QueryError("timeout", None, 1)
    assert error.detail == "no complete response within deadline_s (0.5 s)"


def _requests_reached(count: int) -> list[str]:
    """The server's request paths once ``count`` have arrived (a request is recorded on its own thread)."""
    for _ in range(int(GUARD_S / 0.01)):
        if len(_Hostile.requests) >= count:
            break
        _Hostile.stop.wait(0.01)
    return list(_Hostile.requests)


def test_the_deadline_is_per_attempt_and_retried(server: str) -> None:
    error = _failure(HttpRetriever(_config(server + "/drip-body", deadline_s=0.3, max_attempts=2), ENV))
    assert error == QueryError("timeout", None, 2)
    assert _requests_reached(2) == ["/drip-body", "/drip-body"], "the retry never reached the server"


@pytest.fixture
def stalled_resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """``socket.getaddrinfo`` that hangs (as behind a DNS server that never answers) until the test ends."""
    release, asked = threading.Event(), []

    def stall(host: str, *args: Any, **kwargs: Any) -> Any:
        asked.append(host)
        release.wait()
        raise socket.gaierror("released")

    monkeypatch.setattr(socket, "getaddrinfo", stall)
    yield asked
    release.set()


def test_a_stalled_name_resolution_cannot_stretch_a_request_past_its_deadline(stalled_resolver: list[str]) -> None:
    # The resolver stalls until the test ends: without the deadline the call hangs and the guard fails it.
    error = _failure(HttpRetriever(_config("http://search.invalid/q", max_attempts=2), ENV))
    assert error == QueryError("timeout", None, 2)
    assert error.detail == "the host name did not resolve within deadline_s (0.5 s)"
    assert stalled_resolver == ["search.invalid", "search.invalid"]


def test_a_name_that_does_not_resolve_is_a_connection_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(host: str, *args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    error = _failure(HttpRetriever(_config("http://search.invalid/q"), ENV))
    assert error == QueryError("connection_error", None, 1)
    assert error.detail == "gaierror"


def test_every_resolved_address_is_tried_in_turn(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A name resolving first to an address that refuses, then to the server, connects to the server."""
    _Hostile.bodies["/ok"] = json.dumps({"data": {"hits": [{"doc": {"id": "c1"}, "score": 1.0}]}}).encode()
    port = int(server.rsplit(":", 1)[1])
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refusing = closed.getsockname()[1]
    tcp = (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "")
    answers = [(*tcp, ("127.0.0.1", refusing)), (*tcp, ("127.0.0.1", port))]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: answers)
    retriever = HttpRetriever(_config("http://search.example:1/ok", deadline_s=3.0), ENV)
    assert _within(GUARD_S, lambda: retriever.search("q", "en", 3)) == [("c1", 1.0)]


# 3. A streamed size cap


@pytest.mark.parametrize("path", ["/big-declared", "/big-streamed", "/big-chunked"])
def test_a_body_over_the_cap_fails_as_malformed_without_being_read_whole(server: str, path: str) -> None:
    error = _failure(HttpRetriever(_config(server + path, max_response_bytes=100_000, deadline_s=3.0), ENV))
    assert error == QueryError("malformed_response", None, 1)
    assert error.detail is not None and "larger than max_response_bytes (100000 bytes)" in error.detail
    if path == "/big-declared":  # refused at once: the body never comes
        assert error.detail.endswith("Content-Length 1000000000")


def test_a_body_exactly_at_the_cap_is_read(server: str) -> None:
    payload = json.dumps({"data": {"hits": [{"doc": {"id": "c1"}, "score": 1.5}]}}).encode()
    _Hostile.bodies["/ok"] = payload
    at_cap = HttpRetriever(_config(server + "/ok", max_response_bytes=len(payload)), ENV)
    assert list(at_cap.search("q", "en", 3)) == [("c1", 1.5)]
    below = HttpRetriever(_config(server + "/ok", max_response_bytes=len(payload) - 1), ENV)
    assert _failure(below).kind == "malformed_response"


# 4. Header values are checked when the adapter is made, and never printed


@pytest.mark.parametrize("value", ["Bearer a\r\nX-Evil: 1", "Bearer a\nb", "Bearer \x00a", "Bearer\ta", "a\x7f", "é"])
def test_a_header_value_with_a_control_character_is_refused_naming_the_header_only(value: str) -> None:
    with pytest.raises(ValueError, match="header Authorization \\(from environment variable MY_SEARCH_AUTH\\)") as info:
        HttpRetriever(_config("http://127.0.0.1:9/x"), {"MY_SEARCH_AUTH": value})
    assert value not in str(info.value) and "Bearer" not in str(info.value)


def test_the_cli_refuses_a_bad_header_value_with_exit_2_and_does_not_print_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_SEARCH_AUTH", SECRET + "\r\nX-Injected: yes")
    config = tmp_path / "search.json"
    config.write_text(_config("http://127.0.0.1:9/x").model_dump_json(), encoding="utf-8")
    argv = ["run", "--fixture", str(TINY_DIR), "--ablations", "", "--retriever-config", str(config), "--no-gates"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "header Authorization" in captured.err
    assert SECRET not in captured.err + captured.out and "Injected" not in captured.err + captured.out


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"Bad Header": "X"}, "is not an HTTP token"),
        ({"Auth\r\nX": "X"}, "is not an HTTP token"),
        ({"Host": "X"}, "header Host is set by the adapter"),
        ({"Authorization": "A", "authorization": "B"}, "named twice"),
        ({"Authorization": "A=B"}, "not an environment variable name"),
    ],
)
def test_bad_header_names_are_refused_with_the_config(headers: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _config("http://127.0.0.1:9/x", headers_from_env=headers)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:9/x\r\nX: y", "without spaces or control characters"),
        ("http://user:pw@127.0.0.1:9/x", "must not hold credentials"),
        ("http://127.0.0.1:99999/x", "invalid port"),
        ("http:///x", "with a host"),
        ("http://exämple.org/", "must be ASCII"),
    ],
)
def test_bad_urls_are_refused_without_echoing_them(tmp_path: Path, url: str, message: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "s", "url": url, "body": {}}), encoding="utf-8")
    with pytest.raises(ValueError, match=f"retriever config c.json: field 'url': .*{message}") as info:
        load_http_config(path)
    assert url not in str(info.value) and "pw@" not in str(info.value)


# 5. Strict parsing of responses


def _hits(score: str) -> bytes:
    return b'{"data": {"hits": [{"doc": {"id": "c1"}, "score": ' + score.encode() + b"}]}}"


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "not strict JSON: nested 100000 deep (more than 64)"),
        (b'{"data": ' * 65 + b"1" + b"}" * 65, "not strict JSON: nested 65 deep (more than 64)"),
        (_hits("9" * 400), "not strict JSON: an integer of 400 digits (more than 300)"),
        (_hits("-" + "9" * 5000), "not strict JSON: an integer of 5000 digits (more than 300)"),
        (_hits("1e400"), "not strict JSON: a number out of range (1e400)"),
        (_hits("-1.5e999"), "not strict JSON: a number out of range (-1.5e999)"),
        (_hits("Infinity"), "not strict JSON: Infinity is not valid JSON (only finite numbers are allowed)"),
        (_hits("-Infinity"), "not strict JSON: -Infinity is not valid JSON (only finite numbers are allowed)"),
        (_hits("NaN"), "not strict JSON: NaN is not valid JSON (only finite numbers are allowed)"),
        (_hits('1, "score": 2'), "not strict JSON: duplicate key 'score'"),
        (b'{"data": {"hits": [{"doc": {"id": 7}, "score": 1}]}}', "result 0: id_field is not a string"),
        (b'{"data": {"hits": [{"doc": {"id": "c"}, "score": 1}, {"doc": {}}]}}', "result 1: id_field is missing"),
        (b'{"data": {"hits": [{"doc": {"id": "c"}}]}}', "result 0: score_field is missing"),
        (_hits('"1.0"'), "result 0: score_field is not a finite number"),
        (_hits("true"), "result 0: score_field is not a finite number"),
        (b'{"data": {"hits": {}}}', "results_path does not lead to a list"),
        (b'{"data": {}}', "results_path is not in the response"),
        (b"\xff\xfe", "not strict JSON: 'utf-8' codec can't decode byte 0xff"),
        (b'{"data": ', "not strict JSON: Expecting value"),
    ],
    ids=lambda value: value[:40] if isinstance(value, str) else None,
)
def test_pathological_responses_fail_the_query_naming_the_field(server: str, payload: bytes, detail: str) -> None:
    _Hostile.bodies["/body"] = payload
    retriever = HttpRetriever(_config(server + "/body", deadline_s=3.0), ENV)
    outcome = _within(GUARD_S, lambda: retriever.search_all([SearchRequest("q-en-001", "text", "en", 3)]))[0]
    assert outcome.error == QueryError("malformed_response", None, 1)
    assert outcome.error.detail is not None and outcome.error.detail.startswith(detail), outcome.error.detail
    assert outcome.error.describe(outcome.query_id).startswith("query q-en-001: malformed_response after 1 attempt(s)")


def test_number_limits_do_not_depend_on_the_interpreters_digit_limit() -> None:
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # unlimited: the adapter's own limit still holds
    try:
        with pytest.raises(ValueError, match="an integer of 100000 digits"):
            loads_response(b"[" + b"7" * 100_000 + b"]")
    finally:
        sys.set_int_max_str_digits(limit)
    assert loads_response(b"[" + b"7" * 300 + b", 1.5e300]") == [int("7" * 300), 1.5e300]


# 8. The config file goes through the guarded reader


def test_a_fifo_as_config_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "search.json"
    os.mkfifo(fifo)
    try:
        with pytest.raises(ValueError, match=r"retriever config search\.json: cannot be read: it is a FIFO"):
            _within(GUARD_S, lambda: load_http_config(fifo))
    finally:  # release a reader stuck on the FIFO (a regression), so no thread is left blocked
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_an_oversized_or_non_strict_config_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "search.json"
    path.write_bytes(b" " * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(ValueError, match=r"retriever config search\.json: cannot be read: it is larger than"):
        load_http_config(path)
    path.write_text('{"name": "a", "name": "b", "url": "http://127.0.0.1:9/", "body": {}}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"retriever config search\.json: is not JSON: duplicate key 'name'"):
        load_http_config(path)
    path.write_text('{"name": "a", "url": "http://127.0.0.1:9/", "body": {}, "timeout_s": NaN}', encoding="utf-8")
    with pytest.raises(ValueError, match="NaN is not valid JSON"):
        load_http_config(path)


# 6. Signals while requests hang


class _Silent:
    """Accepts connections and never answers; ``connected`` is set by the first connection."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connected = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.held.append(connection)
            self.connected.set()

    def close(self) -> None:
        self.listener.close()
        for connection in self.held:
            connection.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_a_run_with_requests_in_flight(tmp_path: Path, signum: signal.Signals, code: int) -> None:
    silent = _Silent()
    config = tmp_path / "search.json"
    # The longest waits the config allows: a run that ignored the signal would hang far past the guard below.
    hanging = _config(f"http://127.0.0.1:{silent.port}/q", timeout_s=300.0, deadline_s=600.0, concurrency=4)
    config.write_text(hanging.model_dump_json(), encoding="utf-8")
    argv = ["run", "--fixture", str(TINY_DIR), "--ablations", "", "--retriever-config", str(config), "--no-gates"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **ENV}
    process = subprocess.Popen(
        [sys.executable, "-m", "evalkit.app.cli", *argv, "--no-cache", "--output", "out/report.json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background parent may ignore SIGINT
    )
    try:
        assert silent.connected.wait(60), "the run never sent a request"
        time.sleep(0.3)
        process.send_signal(signum)
        try:
            _, stderr = process.communicate(timeout=120)  # hang guard: the requests would wait 300 s
        except subprocess.TimeoutExpired:
            pytest.fail("the run did not stop on the signal")
    finally:
        process.kill()
        process.wait()
        silent.close()
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    assert not (tmp_path / "out").exists(), "a report (or its folder) was written"
