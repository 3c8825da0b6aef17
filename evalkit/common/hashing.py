"""Content hashes: canonical JSON and SHA-256 digests, the identities every definition and cache key is built from.

Every hash in evalkit is the SHA-256 of :func:`canonical_json` (sorted keys, no spaces, UTF-8), so the same value
hashes the same in every process and on every machine.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["canonical_json", "file_sha256", "sha256_of"]


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, no spaces, UTF-8) used for every hash in evalkit."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_of(value: Any) -> str:
    """SHA-256 hex digest of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 hex digest of a file's bytes, read in blocks."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
