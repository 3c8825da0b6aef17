"""Your own retriever over HTTP: a JSON-configured adapter with a concurrency limit, timeouts and bounded retries.

The configuration (``--retriever-config FILE``) names the endpoint, the method, headers taken from named environment
variables (so no secret sits in the file), a request template and where the results are in the response::

    {
      "name": "my-search",
      "url": "https://search.example/api/query",
      "method": "POST",
      "headers_from_env": {"Authorization": "MY_SEARCH_AUTH"},
      "body": {"q": "{text}", "lang": "{language}", "size": "{k}"},
      "results_path": "hits.items",
      "id_field": "doc.id",
      "score_field": "score",
      "concurrency": 4, "timeout_s": 10, "max_attempts": 3, "retry_backoff_s": 0.2
    }

In ``body`` a string ``"{k}"`` becomes the integer k; ``{text}``, ``{language}`` and ``{k}`` inside other strings
are replaced by their text. With ``GET`` the body's top-level entries become URL query parameters. Paths are
dot-separated keys (an integer part indexes a list); ``results_path`` ``""`` means the response is the list.

A timeout, a connection error, an HTTP error or a malformed response is a :class:`QueryFailed` of that query (kind,
status, attempts), never a crash. Timeouts, connection errors, HTTP 429 and 5xx are retried up to
``max_attempts`` in all, with a linear backoff; other HTTP errors and malformed responses are not. The URL, headers
and body never leave this module: the report gets only :class:`Provenance` (kind and a SHA-256 of the
configuration, which holds environment variable names, not their values).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from evalkit.data.schema import Identifier, Language, StrictModel
from evalkit.retrieval.embeddings import sha256_of
from evalkit.retrieval.retriever import Provenance, QueryError, QueryFailed, SearchOutcome, SearchRequest

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})


class HttpRetrieverConfig(StrictModel):
    """The HTTP adapter's configuration file."""

    name: Identifier = Field(description="ablation ID of this system in the report")
    url: str = Field(description="endpoint, http:// or https://")
    method: Literal["GET", "POST"] = Field(default="POST", description="HTTP method")
    headers_from_env: dict[str, str] = Field(default_factory=dict, description="header name -> env variable name")
    body: dict[str, Any] = Field(description="request template with {text}, {language} and {k}")
    results_path: str = Field(default="results", description="dot path to the results list ('' = the response)")
    id_field: str = Field(default="chunk_id", description="dot path of the chunk ID within a result")
    score_field: str = Field(default="score", description="dot path of the score within a result")
    concurrency: int = Field(default=4, ge=1, le=64, description="requests in flight at once")
    timeout_s: float = Field(default=10.0, gt=0.0, le=300.0, description="per-request timeout, seconds")
    max_attempts: int = Field(default=3, ge=1, le=10, description="attempts per query, retries included")
    retry_backoff_s: float = Field(default=0.2, ge=0.0, le=10.0, description="wait before retry n: n times this")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if urllib.parse.urlsplit(value).scheme not in ("http", "https"):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("id_field", "score_field")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value:
            raise ValueError("must name a field")
        return value


def load_http_config(path: Path) -> HttpRetrieverConfig:
    """Read and validate a configuration file; errors name the file and the field (never a value)."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"retriever config {path.name}: cannot read ({exc.strerror})") from None
    try:
        return HttpRetrieverConfig.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise ValueError(f"retriever config {path.name}: {problems}") from None


def _fill(template: Any, values: Mapping[str, str], k: int) -> Any:
    if isinstance(template, dict):
        return {key: _fill(value, values, k) for key, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, values, k) for value in template]
    if template == "{k}":
        return k
    if isinstance(template, str):
        for name, value in values.items():
            template = template.replace("{" + name + "}", value)
    return template


def _walk(node: Any, path: str) -> Any:
    """The value at a dot path; KeyError when it is not there."""
    for part in path.split(".") if path else ():
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(part)
    return node


class _Malformed(Exception):
    pass


class HttpRetriever:
    """A :class:`~evalkit.retrieval.retriever.Retriever` that asks an HTTP endpoint, concurrently."""

    def __init__(self, config: HttpRetrieverConfig, environ: Mapping[str, str]) -> None:
        missing = sorted(v for v in config.headers_from_env.values() if v not in environ)
        if missing:
            raise ValueError(f"retriever {config.name}: environment variable(s) not set: {', '.join(missing)}")
        self.config = config
        self._headers = {header: environ[variable] for header, variable in config.headers_from_env.items()}
        self._opener = urllib.request.build_opener()

    def provenance(self) -> Provenance:
        """Kind ``http`` and the SHA-256 of the configuration; never the URL, headers or body."""
        return Provenance(kind="http", sha256=sha256_of(self.config.model_dump(mode="json")))

    def _request(self, text: str, language: Language, k: int) -> urllib.request.Request:
        body = _fill(self.config.body, {"text": text, "language": language, "k": str(k)}, k)
        headers = dict(self._headers)
        if self.config.method == "GET":
            query = urllib.parse.urlencode({key: str(value) for key, value in body.items()})
            separator = "&" if urllib.parse.urlsplit(self.config.url).query else "?"
            return urllib.request.Request(self.config.url + separator + query, headers=headers, method="GET")
        headers["Content-Type"] = "application/json"
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        return urllib.request.Request(self.config.url, data=data, headers=headers, method="POST")

    def _parse(self, payload: bytes) -> list[tuple[str, float]]:
        try:
            results = _walk(json.loads(payload), self.config.results_path)
            if not isinstance(results, list):
                raise _Malformed
            hits = []
            for item in results:
                chunk_id, score = _walk(item, self.config.id_field), _walk(item, self.config.score_field)
                if not isinstance(chunk_id, str) or isinstance(score, bool) or not isinstance(score, (int, float)):
                    raise _Malformed
                if score != score:  # NaN
                    raise _Malformed
                hits.append((chunk_id, float(score)))
            return hits
        except (ValueError, KeyError, _Malformed):
            raise QueryFailed(QueryError("malformed_response", None, 1)) from None

    def _attempt(self, request: urllib.request.Request) -> bytes:
        """One request: the response bytes, or QueryFailed with attempts=1 (the caller counts)."""
        try:
            with self._opener.open(request, timeout=self.config.timeout_s) as response:
                payload: bytes = response.read()
                return payload
        except urllib.error.HTTPError as exc:
            raise QueryFailed(QueryError("http_error", exc.code, 1)) from None
        except TimeoutError:
            raise QueryFailed(QueryError("timeout", None, 1)) from None
        except urllib.error.URLError as exc:
            kind: Literal["timeout", "connection_error"] = (
                "timeout" if isinstance(exc.reason, TimeoutError) else "connection_error"
            )
            raise QueryFailed(QueryError(kind, None, 1)) from None
        except (ConnectionError, OSError, http.client.HTTPException):
            raise QueryFailed(QueryError("connection_error", None, 1)) from None

    def search(self, text: str, language: Language, k: int) -> Sequence[tuple[str, float]]:
        """The endpoint's results for one query, after up to ``max_attempts`` attempts."""
        request = self._request(text, language, k)
        attempt = 1
        while True:
            try:
                return self._parse(self._attempt(request))
            except QueryFailed as failed:
                error = QueryError(failed.error.kind, failed.error.status, attempt)
                retry = error.kind in ("timeout", "connection_error") or error.status in RETRIED_STATUS
                if not retry or attempt >= self.config.max_attempts:
                    raise QueryFailed(error) from None
            time.sleep(self.config.retry_backoff_s * attempt)
            attempt += 1

    def _timed(self, request: SearchRequest) -> SearchOutcome:
        started = time.perf_counter_ns()
        try:
            hits = tuple(self.search(request.text, request.language, request.k))
        except QueryFailed as failed:
            return SearchOutcome(request.query_id, (), (time.perf_counter_ns() - started) / 1e6, failed.error)
        return SearchOutcome(request.query_id, hits, (time.perf_counter_ns() - started) / 1e6)

    def search_all(self, requests: Sequence[SearchRequest]) -> list[SearchOutcome]:
        """Every request, at most ``concurrency`` in flight, each timed from its first attempt to its answer."""
        with ThreadPoolExecutor(max_workers=self.config.concurrency) as pool:
            return list(pool.map(self._timed, requests))
