"""The request template is filled in one pass: a placeholder written inside a query's own text is sent as written."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from evalkit.retrieval.http import HttpRetriever
from evalkit.retrieval.http_config import HttpRetrieverConfig

TEXT = 'Sync {language} conflict {k} offline {text} {} "quoted" 同步'
BODY = {"q": "{text}", "lang": "{language}", "size": "{k}", "note": "{text} in {language}, top {k}", "n": ["{k}"]}


def _retriever(method: str) -> HttpRetriever:
    config = HttpRetrieverConfig.model_validate(
        {
            "name": "my-search",
            "url": "http://127.0.0.1:9/api/query?v=1",
            "method": method,
            "body": BODY,
            "results_path": "hits",
            "id_field": "id",
            "score_field": "score",
        }
    )
    return HttpRetriever(config, {})


def test_post_sends_the_query_text_as_written() -> None:
    prepared = _retriever("POST")._request(TEXT, "en", 7)
    assert prepared.body is not None
    assert json.loads(prepared.body) == {
        "q": TEXT,
        "lang": "en",
        "size": 7,
        "note": f"{TEXT} in en, top 7",
        "n": [7],
    }
    assert prepared.body.count(b'\\"quoted\\"') == 2  # inserted text is JSON-escaped, as before
    assert "同步".encode() in prepared.body


def test_get_sends_the_query_text_as_written() -> None:
    prepared = _retriever("GET")._request(TEXT, "zh", 3)
    target = urlsplit(prepared.target)
    assert target.path == "/api/query"
    assert {key: values[0] for key, values in parse_qs(target.query).items()} == {
        "v": "1",
        "q": TEXT,
        "lang": "zh",
        "size": "3",
        "note": f"{TEXT} in zh, top 3",
        "n": "[3]",
    }


@pytest.mark.parametrize("text", ["{text}", "{language}", "{k}", "{{text}}", "{text", "}{"])
def test_a_query_made_of_a_placeholder_is_not_filled(text: str) -> None:
    prepared = _retriever("POST")._request(text, "en", 5)
    assert prepared.body is not None
    assert json.loads(prepared.body)["q"] == text
