"""Your own retriever over HTTP: a JSON-configured adapter with a concurrency limit, timeouts and bounded retries.

The configuration (``--retriever-config FILE``, :mod:`evalkit.retrieval.http_config`) names the endpoint, the
method, headers taken from named environment variables (so no secret sits in the file), a request template and where
the results are in the response.

The endpoint is treated as hostile, as well-kept HTTP clients treat it:

- redirects are never followed (a 3xx fails the query, naming the status and the target's host only), so the
  configured headers reach the configured origin and no other; proxies from the environment are not used;
- each request has a total deadline (``deadline_s``) over name resolution, connect, headers and body: every step
  waits at most the time left, so neither a stalled DNS server nor a server trickling bytes can stretch it;
  ``timeout_s`` bounds one wait;
- the body is read in chunks up to ``max_response_bytes`` (a larger ``Content-Length`` is refused before reading);
- header values holding control characters are refused when the adapter is made, naming the header, never the
  value; no message ever holds a header value;
- responses are parsed as strictly as input files (duplicate keys, ``NaN``/``Infinity`` refused), with a nesting
  limit and a size limit on numbers; chunk IDs must be ones a run file could hold (not empty, no whitespace or
  control character) and scores finite.

A timeout, a connection error, an HTTP error or a malformed response is a :class:`QueryFailed` of that query (kind,
status, attempts and a detail naming the config field at fault), never a crash. Timeouts, connection errors, HTTP
429 and 5xx are retried up to ``max_attempts`` in all, with a linear backoff; other HTTP errors and malformed
responses are not. Requests run on daemon threads, so SIGINT or SIGTERM ends a run without waiting for them. The
URL, headers and body never leave this module: the report gets only :class:`Provenance` (kind and a SHA-256 of the
configuration, which holds environment variable names, not their values).
"""

from __future__ import annotations

import functools
import http.client
import io
import json
import math
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from evalkit.common.hashing import sha256_of
from evalkit.data.ids import given_id_problem
from evalkit.data.inputs import clip, loads_strict
from evalkit.data.inputs import nesting_depth as nesting_depth  # the limits are shared with every input file
from evalkit.data.schema import Language
from evalkit.retrieval.http_config import HttpRetrieverConfig, header_values
from evalkit.retrieval.retriever import Provenance, QueryError, QueryFailed, SearchOutcome, SearchRequest

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})
_HOST = re.compile(r"[a-z0-9._:\-]{1,253}")
_READ_CHUNK = 1 << 16


_PLACEHOLDER = re.compile(r"\{(text|language|k)\}")


def _fill(template: Any, values: Mapping[str, str], k: int) -> Any:
    """The template with its placeholders filled: a string ``"{k}"`` becomes the integer k; in other strings every
    ``{text}``, ``{language}`` and ``{k}`` is replaced in one pass, so an inserted value (a query's text holding
    ``{k}``, say) is never scanned again."""
    if isinstance(template, dict):
        return {key: _fill(value, values, k) for key, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, values, k) for value in template]
    if template == "{k}":
        return k
    if isinstance(template, str):
        return _PLACEHOLDER.sub(lambda match: values[match[1]], template)
    return template


def _walk(node: Any, path: str) -> Any:
    """The value at a dot path; KeyError when it is not there."""
    for part in path.split(".") if path else ():
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdecimal() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(part)
    return node


def loads_response(payload: bytes) -> Any:
    """A response body decoded as UTF-8 (a byte-order mark dropped) and parsed by
    :func:`evalkit.data.inputs.loads_strict`: standard JSON, no duplicate keys, no ``NaN``/``Infinity``, nested at
    most :data:`~evalkit.data.inputs.MAX_JSON_DEPTH` deep, integers of at most
    :data:`~evalkit.data.inputs.MAX_NUMBER_DIGITS` digits and finite floats (independent of
    ``sys.set_int_max_str_digits``).

    Every problem is a ``ValueError`` with a short message.
    """
    return loads_strict(payload.decode("utf-8"))


class _DeadlinePassed(TimeoutError):
    pass


class _ResolveTimeout(TimeoutError):
    """The host name did not resolve before the request's deadline."""


def _resolve(host: str, port: int, deadline: float) -> list[tuple[Any, ...]]:
    """``socket.getaddrinfo`` for a TCP connection, waited for at most until ``deadline``.

    The resolver has no timeout of its own (a stalled DNS server holds it for as long as the system's resolver
    retries), so it runs on a daemon thread that a request past its deadline stops waiting for."""
    outcome: list[Any] = []
    done = threading.Event()

    def work() -> None:
        try:
            outcome.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=work, name="evalkit-http-resolve", daemon=True).start()
    if not done.wait(max(0.0, deadline - time.monotonic())):
        raise _ResolveTimeout
    if isinstance(outcome[0], OSError):
        raise outcome[0]
    addresses: list[tuple[Any, ...]] = outcome[0]
    return addresses


def _connect_within(
    deadline: float, address: tuple[str, int], timeout: float, source_address: Any = None
) -> socket.socket:
    """``socket.create_connection`` with the name resolved within ``deadline`` and each connect attempt waiting at
    most ``timeout`` and the time left (it replaces ``http.client``'s connect step, so TLS still names the host)."""
    del source_address  # never set by this module
    last: OSError | None = None
    for family, kind, proto, _, sockaddr in _resolve(address[0], address[1], deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _DeadlinePassed
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(min(timeout, remaining))
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    raise last if last is not None else OSError("the host name resolved to no address")


class _DeadlineReader(io.RawIOBase):
    """The receiving side of a :class:`_DeadlineSocket`, for ``http.client``'s buffered reads.

    It reads through the socket's own unbuffered file, which keeps the socket open until the response is closed
    (``http.client`` closes the connection as soon as the response owns it).
    """

    def __init__(self, sock: _DeadlineSocket, raw: io.RawIOBase) -> None:
        super().__init__()
        self._sock = sock
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        self._sock.arm()
        return self._raw.readinto(buffer)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _DeadlineSocket:
    """A connected socket whose every send and receive waits at most until the request's deadline (and at most
    ``idle_s`` at once): a server sending one byte at a time cannot stretch a request past its deadline."""

    def __init__(self, sock: socket.socket, deadline: float, idle_s: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self._idle_s = idle_s

    def arm(self) -> None:
        """Let the next socket operation wait for the time left at most; past the deadline, time out now."""
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise _DeadlinePassed
        self._sock.settimeout(min(remaining, self._idle_s))

    def sendall(self, data: bytes) -> None:
        self.arm()
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        del mode, args, kwargs  # http.client reads responses only through this file
        return io.BufferedReader(_DeadlineReader(self, self._sock.makefile("rb", buffering=0)))

    def close(self) -> None:
        self._sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _failure(kind: Literal["timeout", "connection_error", "malformed_response"], detail: str) -> QueryFailed:
    return QueryFailed(QueryError(kind, None, 1, detail))


def _read_capped(response: http.client.HTTPResponse, limit: int) -> bytes:
    """The body, read in chunks; more than ``limit`` bytes (announced or sent) fails as a malformed response."""
    too_large = f"the response is larger than max_response_bytes ({limit} bytes)"
    if response.length is not None and response.length > limit:
        raise _failure("malformed_response", f"{too_large}: Content-Length {response.length}")
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = response.read(min(_READ_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise _failure("malformed_response", too_large)
    return b"".join(chunks)


@dataclass(frozen=True)
class _Prepared:
    """One query's request: the method, the request target (path and query), the body and the headers."""

    method: str
    target: str
    body: bytes | None
    headers: dict[str, str]


class HttpRetriever:
    """A :class:`~evalkit.retrieval.retriever.Retriever` that asks an HTTP endpoint, concurrently."""

    def __init__(self, config: HttpRetrieverConfig, environ: Mapping[str, str]) -> None:
        self.config = config
        self._headers = header_values(config, environ)
        parts = urllib.parse.urlsplit(config.url)
        self._host = parts.hostname or ""
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None

    def provenance(self) -> Provenance:
        """Kind ``http`` and the SHA-256 of the configuration; never the URL, headers or body."""
        return Provenance(kind="http", sha256=sha256_of(self.config.model_dump(mode="json")))

    def _request(self, text: str, language: Language, k: int) -> _Prepared:
        body = _fill(self.config.body, {"text": text, "language": language, "k": str(k)}, k)
        headers = dict(self._headers)
        if self.config.method == "GET":
            query = urllib.parse.urlencode({key: str(value) for key, value in body.items()})
            separator = "&" if "?" in self._path else "?"
            return _Prepared("GET", self._path + separator + query, None, headers)
        headers["Content-Type"] = "application/json"
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        return _Prepared("POST", self._path, data, headers)

    def _parse(self, payload: bytes) -> list[tuple[str, float]]:
        try:
            document = loads_response(payload)
        except ValueError as exc:
            raise _failure("malformed_response", f"not strict JSON: {clip(str(exc), 200)}") from None
        try:
            results = _walk(document, self.config.results_path)
        except KeyError:
            raise _failure("malformed_response", "results_path is not in the response") from None
        if not isinstance(results, list):
            raise _failure("malformed_response", "results_path does not lead to a list")
        return [self._hit(index, item) for index, item in enumerate(results)]

    def _hit(self, index: int, item: Any) -> tuple[str, float]:
        """One result as (chunk ID, finite score); a problem names the result and the config field, not a value."""
        chunk_id = _field(item, self.config.id_field, "id_field", index)
        if not isinstance(chunk_id, str):
            raise _failure("malformed_response", f"result {index}: id_field is not a string")
        if given_id_problem(chunk_id, "id_field", "response") is not None:  # the rule of run files
            problem = "is empty or holds whitespace or a control character"
            raise _failure("malformed_response", f"result {index}: id_field {problem}")
        score = _field(item, self.config.score_field, "score_field", index)
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise _failure("malformed_response", f"result {index}: score_field is not a finite number")
        return chunk_id, float(score)

    def _connection(self, deadline: float) -> http.client.HTTPConnection:
        """A connection to the configured origin, name resolution included, made within the deadline."""
        timeout = min(self.config.timeout_s, deadline - time.monotonic())
        if timeout <= 0:
            raise _DeadlinePassed
        if self._tls is None:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        else:
            connection = http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._tls)
        connection._create_connection = functools.partial(_connect_within, deadline)  # type: ignore[attr-defined]
        connection.connect()
        connection.sock = _DeadlineSocket(connection.sock, deadline, self.config.timeout_s)
        return connection

    def _refused_status(self, response: http.client.HTTPResponse) -> QueryFailed | None:
        """An HTTP error for a status other than 2xx; a redirect is never followed and names its host only."""
        status = response.status
        if 200 <= status < 300:
            return None
        detail = f"HTTP status {status}"
        if 300 <= status < 400:
            detail = f"redirect to {_location_host(self.config.url, response.getheader('Location'))} not followed"
        return QueryFailed(QueryError("http_error", status, 1, detail))

    def _attempt(self, prepared: _Prepared) -> bytes:
        """One request: the response bytes, or QueryFailed with attempts=1 (the caller counts)."""
        deadline = time.monotonic() + self.config.deadline_s
        connection: http.client.HTTPConnection | None = None
        try:
            connection = self._connection(deadline)
            connection.request(prepared.method, prepared.target, body=prepared.body, headers=prepared.headers)
            response = connection.getresponse()
            refused = self._refused_status(response)
            if refused is not None:
                raise refused
            return _read_capped(response, self.config.max_response_bytes)
        except _ResolveTimeout:
            detail = f"the host name did not resolve within deadline_s ({self.config.deadline_s:g} s)"
            raise _failure("timeout", detail) from None
        except TimeoutError:
            if time.monotonic() >= deadline:
                detail = f"no complete response within deadline_s ({self.config.deadline_s:g} s)"
            else:
                detail = f"no data for timeout_s ({self.config.timeout_s:g} s)"
            raise _failure("timeout", detail) from None
        except (OSError, http.client.HTTPException) as exc:
            raise _failure("connection_error", type(exc).__name__) from None
        except ValueError:  # never echoed: http.client's messages may quote what was sent
            raise _failure("connection_error", "invalid HTTP exchange") from None
        finally:
            if connection is not None:
                connection.close()

    def search(self, text: str, language: Language, k: int) -> Sequence[tuple[str, float]]:
        """The endpoint's results for one query, after up to ``max_attempts`` attempts."""
        return self._search(text, language, k, threading.Event())

    def _search(self, text: str, language: Language, k: int, stop: threading.Event) -> list[tuple[str, float]]:
        """:meth:`search`, giving up before a retry once ``stop`` is set."""
        request = self._request(text, language, k)
        attempt = 1
        while True:
            try:
                return self._parse(self._attempt(request))
            except QueryFailed as failed:
                error = replace(failed.error, attempts=attempt)
                retry = error.kind in ("timeout", "connection_error") or error.status in RETRIED_STATUS
                if not retry or attempt >= self.config.max_attempts:
                    raise QueryFailed(error) from None
            if stop.wait(self.config.retry_backoff_s * attempt):
                raise QueryFailed(error)
            attempt += 1

    def _timed(self, request: SearchRequest, stop: threading.Event) -> SearchOutcome:
        started = time.perf_counter_ns()
        try:
            hits = tuple(self._search(request.text, request.language, request.k, stop))
        except QueryFailed as failed:
            return SearchOutcome(request.query_id, (), (time.perf_counter_ns() - started) / 1e6, failed.error)
        return SearchOutcome(request.query_id, hits, (time.perf_counter_ns() - started) / 1e6)

    def search_all(self, requests: Sequence[SearchRequest]) -> list[SearchOutcome]:
        """Every request, at most ``concurrency`` in flight, each timed from its first attempt to its answer."""
        return _Batch(requests, self._timed).run(self.config.concurrency)


def _field(item: Any, path: str, name: str, index: int) -> Any:
    """The value at ``path`` in result ``index``; a missing one names the config field (``name``), not the path."""
    try:
        return _walk(item, path)
    except KeyError:
        raise _failure("malformed_response", f"result {index}: {name} is missing") from None


def _location_host(base: str, location: str | None) -> str:
    """``host NAME`` of a redirect's target, or a fixed phrase: never the URL, its path or anything unprintable."""
    if location is None:
        return "no location"
    try:
        host = urllib.parse.urlsplit(urllib.parse.urljoin(base, location)).hostname
    except ValueError:
        host = None
    return f"host {host}" if host is not None and _HOST.fullmatch(host) else "an unreadable location"


class _Batch:
    """Requests answered by daemon threads, in order.

    The caller waits in short steps, so SIGINT and SIGTERM reach it at once; when it is interrupted no further
    request starts, and the requests in flight are abandoned (daemon threads do not hold up the interpreter's exit).
    """

    def __init__(
        self, requests: Sequence[SearchRequest], answer: Callable[[SearchRequest, threading.Event], SearchOutcome]
    ) -> None:
        self._requests = requests
        self._answer = answer
        self._outcomes: list[SearchOutcome | None] = [None] * len(requests)
        self._next = 0
        self._done = 0
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._changed = threading.Condition()

    def _work(self) -> None:
        while not self._stop.is_set():
            with self._changed:
                index = self._next
                if index >= len(self._requests) or self._error is not None:
                    return
                self._next += 1
            try:
                outcome = self._answer(self._requests[index], self._stop)
            except BaseException as exc:  # a bug: handed to the caller, who raises it
                with self._changed:
                    self._error = self._error or exc
                    self._changed.notify_all()
                return
            with self._changed:
                self._outcomes[index] = outcome
                self._done += 1
                self._changed.notify_all()

    def run(self, concurrency: int) -> list[SearchOutcome]:
        workers = min(concurrency, len(self._requests))
        for number in range(workers):
            threading.Thread(target=self._work, name=f"evalkit-http-{number}", daemon=True).start()
        try:
            with self._changed:
                while self._done < len(self._requests) and self._error is None:
                    self._changed.wait(0.1)
        finally:
            self._stop.set()
        if self._error is not None:
            raise self._error
        return [outcome for outcome in self._outcomes if outcome is not None]
