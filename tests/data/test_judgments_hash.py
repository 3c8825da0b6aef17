"""The judgments hash of qrels, encoded by Arrow, equals the generic hash of the same triples (a fixture's, or any
iterable's) byte for byte: unicode IDs, negative and large grades, any line order, blocks of rows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.data import judgments
from evalkit.data.judgments import judgments_sha256, qrels_judgments, qrels_sha256
from evalkit.data.qrels import qrels_from_mapping

IDS = st.text(alphabet=st.sampled_from("aZ09._:-中文é"), min_size=1, max_size=6)
TABLES = st.dictionaries(IDS, st.dictionaries(IDS, st.integers(-3, 2**40), min_size=1, max_size=6), max_size=12)


@settings(max_examples=150)
@given(TABLES)
def test_the_qrels_hash_equals_the_hash_of_its_triples(table: dict[str, dict[str, int]]) -> None:
    qrels = qrels_from_mapping(table)
    triples = [(q, d, g) for q, row in table.items() for d, g in row.items()]
    assert qrels_sha256(qrels) == judgments_sha256(triples) == judgments_sha256(qrels_judgments(qrels))


def test_blocks_of_rows_give_the_same_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    table = {f"q{q}": {f"d{d}": (q * d) % 4 for d in range(7)} for q in range(30)}
    whole = qrels_sha256(qrels_from_mapping(table))
    monkeypatch.setattr(judgments, "_ROWS", 13)
    assert qrels_sha256(qrels_from_mapping(table)) == whole
    table["q3"]["d2"] += 1
    assert qrels_sha256(qrels_from_mapping(table)) != whole
