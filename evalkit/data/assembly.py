"""What every import shares: the options that name the fixture it produces, and the assembly of that fixture.

The SQuAD importer (:mod:`evalkit.data.squad`) and the BEIR and TREC importers (:mod:`evalkit.data.collection`)
turn their source into documents, chunks and queries as plain data; :func:`assemble_fixture` adds what the
:class:`ImportOptions` say (ID, version, licence, attribution, text policy) and hands the whole to the strict schema.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import Field

from evalkit.data.fixture import Fixture, parse_fixture
from evalkit.data.schema import AttributionText, Identifier, SemanticVersion, SpdxLicense, StrictModel

__all__ = ["ID_HASH_DIGITS", "ImportOptions", "assemble_fixture", "replace_id_characters"]

_NOT_IN_ID = re.compile(r"[^A-Za-z0-9._:-]")
ID_HASH_DIGITS = 8
"""Hex digits of the SHA-256 that :func:`replace_id_characters` appends when an ID loses letters or digits."""


class ImportOptions(StrictModel):
    """How an import names and licenses the fixture it produces; each format's options add their own fields."""

    fixture_id: Identifier = Field(description="ID of the produced fixture")
    fixture_version: SemanticVersion = Field(default="1.0.0", description="semantic version of the produced fixture")
    license: SpdxLicense = Field(description="SPDX licence identifier carried into the fixture")
    attribution: AttributionText = Field(description="source and attribution carried into the fixture")
    allow_links_in_text: bool = Field(
        default=False,
        description="keep links, host names and paths in chunk and query text (credential-like values never)",
    )


def replace_id_characters(source: str) -> str:
    """`source` with every character outside ``A-Z a-z 0-9 . _ : -`` (the characters of an ID) replaced by ``_``.

    When a replaced character is a letter or digit (Chinese, full-width or accented: ``str.isalnum``), the ID would
    lose what told it apart (``问题`` and ``ａｂ`` would both be ``__``), so ``-`` and the first
    :data:`ID_HASH_DIGITS` hex digits of the SHA-256 of the replaced characters (in order, UTF-8) are appended:
    ``问题`` becomes ``__-`` and 8 hex digits. Two sources that give the same ID before the suffix differ only in their
    replaced characters, so the suffix keeps them apart; it depends on nothing else, so a prefix of kept characters
    (``zh-``, ``en-``) leaves it alone. An ID without such characters is returned as it is.
    """
    replaced = _NOT_IN_ID.findall(source)
    if not replaced:
        return source
    ident = _NOT_IN_ID.sub("_", source)
    if not any(c.isalnum() for c in replaced):
        return ident
    digest = hashlib.sha256("".join(replaced).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{ident}-{digest[:ID_HASH_DIGITS]}"


def assemble_fixture(
    options: ImportOptions,
    documents: Iterable[dict[str, Any]],
    chunks: Iterable[dict[str, Any]],
    queries: Iterable[dict[str, Any]],
    source: str,
) -> Fixture:
    """The strict fixture of an import's documents, chunks and queries (as the fixture schema's JSON objects).

    Raises:
        FixtureError: any schema refusal, naming the record; the source is named as ``imported from <source>``.
    """
    data = {
        "fixture_id": options.fixture_id,
        "fixture_version": options.fixture_version,
        "license": options.license,
        "attribution": options.attribution,
        "text_policy": "links_allowed" if options.allow_links_in_text else "strict",
        "documents": list(documents),
        "chunks": list(chunks),
        "queries": list(queries),
    }
    return parse_fixture(json.dumps(data, ensure_ascii=False), f"imported from {source} as {options.fixture_id!r}")
