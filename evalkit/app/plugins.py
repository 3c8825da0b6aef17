"""Load a user's retriever: ``package.module:factory`` (Python) or an HTTP configuration file.

A front door (the CLI, the notebook parameters) turns what the user named into a :class:`Retriever` and the ID its
ablation gets in the report. The factory is called with no arguments; the ID is the retriever's ``name`` attribute
when it is a valid ID, else the factory's name with ``_`` as ``-``. Modules in the working directory can be
imported, as with ``python -m``.

A Python retriever is user code, so everything evalkit calls in it (the import, the factory, ``index``,
``search``, ``search_all``, ``provenance``) runs behind a guard: any exception it raises, ``SystemExit`` included,
becomes a :class:`PluginError` naming the retriever and the exception's type and message (bad input: exit 2).
:class:`~evalkit.retrieval.retriever.QueryFailed` raised by ``search`` keeps its meaning (one failed query,
recorded), an :class:`~evalkit.retrieval.retriever.InvalidQueryError` raised by ``search`` is refused naming the
query, and ``KeyboardInterrupt`` and the CLI's termination still stop the run.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evalkit.data.fixture import Chunk
from evalkit.data.inputs import clip, shorten
from evalkit.data.schema import Language, is_identifier
from evalkit.retrieval.retriever import (
    InvalidQueryError,
    Provenance,
    QueryFailed,
    Retriever,
    SearchOutcome,
    SearchRequest,
    provenance_of,
)

_SPEC = re.compile(r"(?P<module>[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*):(?P<factory>[A-Za-z_]\w*)")
MAX_MESSAGE_LENGTH = 300
"""A plugin exception's message is cut to this many characters."""


class PluginError(ValueError):
    """User code behind ``--retriever module:factory`` raised: bad input (exit 2), not a failed gate."""


def _describe(exc: BaseException) -> str:
    """``Type: message`` on one line, the message cut to :data:`MAX_MESSAGE_LENGTH` characters."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {clip(message, MAX_MESSAGE_LENGTH)}" if message else type(exc).__name__


@contextmanager
def _guard(spec: str, what: str, queries: bool = False) -> Iterator[None]:
    """Run user code: any exception it raises (``SystemExit`` too) is a :class:`PluginError`, except
    :class:`QueryFailed` and :class:`InvalidQueryError` when ``queries`` (the code answers one query: the caller
    records the failure, or refuses the invalid one naming the query), which are passed on; other
    ``BaseException`` (Ctrl-C, termination) is left alone."""
    try:
        yield
    except QueryFailed:
        if queries:
            raise
        raise PluginError(f"retriever {spec!r}: {what} failed: QueryFailed outside a query") from None
    except (Exception, SystemExit) as exc:
        if queries and isinstance(exc, InvalidQueryError):
            raise
        raise PluginError(f"retriever {spec!r}: {what} failed: {_describe(exc)}") from None


class PluginRetriever:
    """A user's retriever behind the guard; evalkit calls it, never the user's object directly.

    ``inner`` is the object the factory returned; ``name`` is the ID of its system (what messages about its results
    name, see :func:`~evalkit.retrieval.retriever.system_name`), by default the spec.
    """

    def __init__(self, spec: str, inner: Retriever, name: str | None = None) -> None:
        self.spec = spec
        self.inner = inner
        self.name = spec if name is None else name

    def index(self, chunks: Sequence[Chunk]) -> None:
        """The retriever's own ``index(chunks)``, when it has one."""
        with _guard(self.spec, "index()"):
            index = getattr(self.inner, "index", None)
            if callable(index):
                index(chunks)

    def search(self, text: str, language: Language, k: int) -> Sequence[tuple[str, float]]:
        """The retriever's results, copied into a tuple under the guard when they are a sequence (anything else is
        returned as it is, for the caller to refuse)."""
        with _guard(self.spec, "search()", queries=True):
            results = self.inner.search(text, language, k)
            if isinstance(results, Sequence) and not isinstance(results, (str, bytes)):
                return tuple(results)
            return results

    def provenance(self) -> Provenance:
        """The retriever's own ``provenance()`` when it has one, else a plain Python retriever's."""
        with _guard(self.spec, "provenance()"):
            return provenance_of(self.inner)


class BatchPluginRetriever(PluginRetriever):
    """:class:`PluginRetriever` of a retriever with its own ``search_all``."""

    def search_all(self, requests: Sequence[SearchRequest]) -> list[SearchOutcome]:
        """The retriever's own answers to the batch (a failed query is an outcome with an error, not QueryFailed)."""
        with _guard(self.spec, "search_all()"):
            search_all: Callable[[Sequence[SearchRequest]], Any] = self.inner.search_all  # type: ignore[attr-defined]
            return list(search_all(requests))


def _import_from_working_directory() -> None:
    """Let modules in the working directory be imported, as ``python -m`` and uvicorn's ``module:app`` do (the
    ``evalkit`` console script alone would only see installed packages)."""
    here = str(Path.cwd())
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def load_retriever(spec: str) -> tuple[str, Retriever]:
    """Import ``package.module:factory``, call the factory, check the result; return (ablation ID, retriever).

    The retriever is a :class:`PluginRetriever` around what the factory returned. Every problem (malformed spec,
    missing module or factory, an import or factory that fails, a result without a ``search`` method) raises
    ``ValueError`` naming the spec; a failure of user code is a :class:`PluginError`.
    """
    match = _SPEC.fullmatch(spec)
    if match is None:
        raise ValueError(f"retriever {spec!r}: expected 'package.module:factory'")
    _import_from_working_directory()
    try:
        module = importlib.import_module(match["module"])
    except ImportError as exc:
        raise ValueError(f"retriever {spec!r}: cannot import module {match['module']!r} ({exc})") from None
    except (Exception, SystemExit) as exc:  # the module's own code failed while it was imported
        raise PluginError(f"retriever {spec!r}: importing {match['module']!r} failed: {_describe(exc)}") from None
    with _guard(spec, "looking up the factory"):
        factory = getattr(module, match["factory"], None)
    if not callable(factory):
        raise ValueError(f"retriever {spec!r}: module {match['module']!r} has no callable {match['factory']!r}")
    with _guard(spec, "the factory"):
        retriever = factory()
    with _guard(spec, "inspecting what the factory returned"):
        searches = isinstance(retriever, Retriever)
        name = getattr(retriever, "name", None)
        batch = callable(getattr(retriever, "search_all", None))
    if not searches:
        raise PluginError(f"retriever {spec!r}: the factory returned {type(retriever).__name__}, which has no search()")
    if name is not None and not (isinstance(name, str) and is_identifier(name)):  # absent: the factory's name
        raise PluginError(
            f"retriever {spec!r}: field 'name': {shorten(name)} is no system ID (a letter or digit, then letters, "
            "digits and . _ : -, at most 128); give another, or leave name out to use the factory's"
        )
    ablation_id = name if name is not None else match["factory"].replace("_", "-")
    return ablation_id, (BatchPluginRetriever if batch else PluginRetriever)(spec, retriever, ablation_id)


def load_http_retriever(path: Path, environ: Mapping[str, str] | None = None) -> tuple[str, Retriever]:
    """The HTTP adapter configured by ``path`` (headers from ``environ``, default the process environment)."""
    from evalkit.retrieval.http import HttpRetriever
    from evalkit.retrieval.http_config import load_http_config

    config = load_http_config(path)
    return config.name, HttpRetriever(config, os.environ if environ is None else environ)


def load_retrievers(specs: Sequence[str], configs: Sequence[Path]) -> dict[str, Retriever]:
    """The retrievers named by ``package.module:factory`` `specs`, then by HTTP `configs`, by the ID of each one's
    system; two sharing an ID are refused."""
    loaded = [load_retriever(spec) for spec in specs]
    loaded += [load_http_retriever(path) for path in configs]
    retrievers = dict(loaded)
    if len(retrievers) != len(loaded):
        raise ValueError(f"external retrievers share an ID: {', '.join(sorted(a for a, _ in loaded))}")
    return retrievers
