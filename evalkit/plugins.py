"""Load a user's retriever: ``package.module:factory`` (Python) or an HTTP configuration file.

A front door (the CLI, the notebook parameters) turns what the user named into a :class:`Retriever` and the ID its
ablation gets in the report. The factory is called with no arguments; the ID is the retriever's ``name`` attribute
when it is a valid ID, else the factory's name with ``_`` as ``-``. Modules in the working directory can be
imported, as with ``python -m``.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from evalkit.data.schema import is_identifier
from evalkit.retrieval.retriever import Retriever

_SPEC = re.compile(r"(?P<module>[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*):(?P<factory>[A-Za-z_]\w*)")


def _import_from_working_directory() -> None:
    """Let modules in the working directory be imported, as ``python -m`` and uvicorn's ``module:app`` do (the
    ``evalkit`` console script alone would only see installed packages)."""
    here = str(Path.cwd())
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def load_retriever(spec: str) -> tuple[str, Retriever]:
    """Import ``package.module:factory``, call the factory, check the result; return (ablation ID, retriever).

    Every problem (malformed spec, missing module or factory, a factory that fails or returns something without
    a ``search`` method) raises ``ValueError`` naming the spec.
    """
    match = _SPEC.fullmatch(spec)
    if match is None:
        raise ValueError(f"retriever {spec!r}: expected 'package.module:factory'")
    _import_from_working_directory()
    try:
        module = importlib.import_module(match["module"])
    except ImportError as exc:
        raise ValueError(f"retriever {spec!r}: cannot import module {match['module']!r} ({exc})") from None
    factory = getattr(module, match["factory"], None)
    if not callable(factory):
        raise ValueError(f"retriever {spec!r}: module {match['module']!r} has no callable {match['factory']!r}")
    try:
        retriever = factory()
    except Exception as exc:  # any failure of user code is reported as bad input
        raise ValueError(f"retriever {spec!r}: the factory failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(retriever, Retriever):
        raise ValueError(f"retriever {spec!r}: the factory returned {type(retriever).__name__}, which has no search()")
    name = getattr(retriever, "name", None)
    ablation_id = name if isinstance(name, str) and is_identifier(name) else match["factory"].replace("_", "-")
    return ablation_id, retriever


def load_http_retriever(path: Path, environ: Mapping[str, str] | None = None) -> tuple[str, Retriever]:
    """The HTTP adapter configured by ``path`` (headers from ``environ``, default the process environment)."""
    from evalkit.retrieval.http import HttpRetriever, load_http_config

    config = load_http_config(path)
    return config.name, HttpRetriever(config, os.environ if environ is None else environ)
