"""Chunk IDs in an HTTP response follow the rule of run files: one holding whitespace or a control character fails
the query as a malformed response (it would be scored as an unknown chunk, then refused by ``--trec-runs``)."""

from __future__ import annotations

import json

import pytest

from evalkit.retrieval.http import HttpRetriever
from evalkit.retrieval.http_config import HttpRetrieverConfig
from evalkit.retrieval.retriever import QueryError, QueryFailed


def _retriever() -> HttpRetriever:
    config = HttpRetrieverConfig.model_validate(
        {
            "name": "my-search",
            "url": "http://127.0.0.1:9/api",
            "body": {"q": "{text}"},
            "results_path": "hits",
            "id_field": "id",
            "score_field": "score",
        }
    )
    return HttpRetriever(config, {})


def _payload(*ids: str) -> bytes:
    return json.dumps({"hits": [{"id": chunk_id, "score": 1.0} for chunk_id in ids]}).encode()


@pytest.mark.parametrize(
    "bad", ["en-sync-01\n", "en-sync-01 x", "", "\ten-sync-01", "en\x00sync", "en\u202esync", "en\u3000sync"]
)
def test_a_chunk_id_a_run_file_could_not_hold_fails_the_query(bad: str) -> None:
    with pytest.raises(QueryFailed) as info:
        _retriever()._parse(_payload("en-trash-01", bad))
    assert info.value.error == QueryError("malformed_response", None, 1)
    detail = info.value.error.detail
    assert detail == "result 1: id_field is empty or holds whitespace or a control character"


def test_chunk_ids_of_any_script_are_kept() -> None:
    assert _retriever()._parse(_payload("en-sync-01", "zh-导出-01", "a.b:c/d")) == [
        ("en-sync-01", 1.0),
        ("zh-导出-01", 1.0),
        ("a.b:c/d", 1.0),
    ]
