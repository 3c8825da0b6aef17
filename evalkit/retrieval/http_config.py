"""The HTTP adapter's configuration file, and the request headers it takes from the environment.

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
      "concurrency": 4, "timeout_s": 10, "deadline_s": 30, "max_attempts": 3, "retry_backoff_s": 0.2,
      "max_response_bytes": 16777216
    }

In ``body`` a string ``"{k}"`` becomes the integer k; ``{text}``, ``{language}`` and ``{k}`` inside other strings
are replaced by their text. With ``GET`` the body's top-level entries become URL query parameters. Paths are
dot-separated keys (an integer part indexes a list); ``results_path`` ``""`` means the response is the list.

A configuration file is read like every input (a regular file of at most :data:`MAX_CONFIG_BYTES`, strict JSON);
problems name the file and the field, never a value. Header values come from the named environment variables when
the adapter is made; a missing one is named, and one holding a control or non-ASCII character is refused unshown.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from evalkit.data.inputs import shorten
from evalkit.data.schema import Identifier, StrictModel, load_model_file

__all__ = ["MAX_CONFIG_BYTES", "HttpRetrieverConfig", "header_values", "load_http_config"]

MAX_CONFIG_BYTES = 1 << 20
"""A retriever configuration file larger than this (1 MiB) is refused before it is read."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FRAMING_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


class HttpRetrieverConfig(StrictModel):
    """The HTTP adapter's configuration file."""

    name: Identifier = Field(description="ablation ID of this system in the report")
    url: str = Field(description="endpoint, http:// or https:// (ASCII, no credentials)")
    method: Literal["GET", "POST"] = Field(default="POST", description="HTTP method")
    headers_from_env: dict[str, str] = Field(default_factory=dict, description="header name -> env variable name")
    body: dict[str, Any] = Field(description="request template with {text}, {language} and {k}")
    results_path: str = Field(default="results", description="dot path to the results list ('' = the response)")
    id_field: str = Field(default="chunk_id", description="dot path of the chunk ID within a result")
    score_field: str = Field(default="score", description="dot path of the score within a result")
    concurrency: int = Field(default=4, ge=1, le=64, description="requests in flight at once")
    timeout_s: float = Field(default=10.0, gt=0.0, le=300.0, description="longest wait for one socket operation")
    deadline_s: float = Field(
        default=30.0, gt=0.0, le=600.0, description="total time for one request: connect, headers and body, seconds"
    )
    max_response_bytes: int = Field(
        default=16 * 2**20, ge=1, le=2**30, description="largest response body read; larger fails the query"
    )
    max_attempts: int = Field(default=3, ge=1, le=10, description="attempts per query, retries included")
    retry_backoff_s: float = Field(default=0.2, ge=0.0, le=10.0, description="wait before retry n: n times this")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.isascii() or any(c <= " " or c == "\x7f" for c in value):
            raise ValueError("must be ASCII without spaces or control characters (percent-encode the rest)")
        parts = urllib.parse.urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        if "@" in parts.netloc:
            raise ValueError("must not hold credentials (user:password@): send them with headers_from_env")
        try:
            parts.port  # noqa: B018 (a malformed port raises here)
        except ValueError:
            raise ValueError("has an invalid port") from None
        return value

    @field_validator("headers_from_env")
    @classmethod
    def _header_names(cls, value: dict[str, str]) -> dict[str, str]:
        for header, variable in value.items():
            if not _TOKEN.fullmatch(header):
                raise ValueError(f"header name {shorten(header)} is not an HTTP token")
            if header.lower() in _FRAMING_HEADERS:
                raise ValueError(f"header {header} is set by the adapter and cannot be configured")
            if not variable or "=" in variable or CONTROL_CHARACTERS.search(variable):
                raise ValueError(f"header {header}: {shorten(variable)} is not an environment variable name")
        lowered = [header.lower() for header in value]
        if len(set(lowered)) != len(lowered):
            raise ValueError("a header is named twice (header names ignore case)")
        return value

    @field_validator("id_field", "score_field")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value:
            raise ValueError("must name a field")
        return value


def load_http_config(path: Path) -> HttpRetrieverConfig:
    """Read (regular files of at most 1 MiB, strict JSON) and validate a configuration file.

    Errors name the file and the field, never a value.
    """
    return load_model_file(path, HttpRetrieverConfig, f"retriever config {path.name}", MAX_CONFIG_BYTES)


def header_values(config: HttpRetrieverConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The configured headers' values from the environment; a missing or unsendable value is named, never shown."""
    missing = sorted(v for v in config.headers_from_env.values() if v not in environ)
    if missing:
        raise ValueError(f"retriever {config.name}: environment variable(s) not set: {', '.join(missing)}")
    headers = {header: environ[variable] for header, variable in config.headers_from_env.items()}
    for header, value in headers.items():
        variable = config.headers_from_env[header]
        if CONTROL_CHARACTERS.search(value):
            reason = "holds a control character (CR, LF or another)"
        elif not value.isascii():
            reason = "holds a non-ASCII character"
        else:
            continue
        raise ValueError(
            f"retriever {config.name}: header {header} (from environment variable {variable}) {reason}; "
            "the value is refused and not shown"
        )
    return headers
