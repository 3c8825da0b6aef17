"""Tests for evalkit.retrieval.coverage: IDF by hand, the best of the first chunks, edge cases."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from evalkit.retrieval.coverage import TermCoverage

CHUNKS = [
    ("c1", "The Normans conquered England."),
    ("c2", "The Normans came from Normandy."),
    ("c3", "England is an island country."),
]


def idf(df: int, n: int = 3) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def test_idf_by_hand() -> None:
    coverage = TermCoverage(CHUNKS)
    assert coverage.idf("norman") == pytest.approx(idf(2))  # terms are stemmed: Normans -> norman
    assert coverage.idf("island") == pytest.approx(idf(1))
    assert coverage.idf("unseen") == pytest.approx(idf(0))


def test_coverage_is_the_best_of_the_first_chunks() -> None:
    coverage = TermCoverage(CHUNKS)
    # query terms (stopwords dropped, stemmed): norman, conquer, island
    total = idf(2) + idf(1) + idf(1)
    query = "Which Normans conquered the island?"
    assert coverage.coverage(query, ["c1"]) == pytest.approx((idf(2) + idf(1)) / total)
    assert coverage.coverage(query, ["c3", "c1"]) == pytest.approx((idf(2) + idf(1)) / total)
    assert coverage.coverage(query, ["c3", "c2", "c1"], depth=2) == pytest.approx(max(idf(1), idf(2)) / total)
    assert coverage.coverage("conquered England", ["c1"]) == pytest.approx(1.0)


def test_edge_cases() -> None:
    coverage = TermCoverage(CHUNKS)
    assert math.isnan(coverage.coverage("Normans", []))
    assert math.isnan(coverage.coverage("the of", ["c1"]))
    with pytest.raises(ValueError, match="not in the corpus: c9"):
        coverage.coverage("Normans", ["c9"])
    with pytest.raises(ValueError, match="depth must be at least 1"):
        coverage.coverage("Normans", ["c1"], depth=0)


def test_chinese_terms() -> None:
    # z1's terms: 诺曼 诺曼人 征服 了 英格兰; the query's: 诺曼 诺曼人 征服 哪里 (哪里 is in neither chunk)
    coverage = TermCoverage([("z1", "诺曼人征服了英格兰。"), ("z2", "英格兰位于欧洲。")])
    in_one, in_none = idf(1, 2), idf(0, 2)
    expected = 3 * in_one / (3 * in_one + in_none)
    assert coverage.coverage("诺曼人征服了哪里？", ["z1"]) == pytest.approx(expected)
    assert coverage.coverage("诺曼人征服了哪里？", ["z2"]) == 0.0


_PROBE = """
from evalkit.retrieval.coverage import TermCoverage
chunks = [(f"c{i}", " ".join(f"w{j}" for j in range(i % 7, 40, (i % 5) + 1))) for i in range(60)]
print(repr(TermCoverage(chunks).coverage(" ".join(f"w{j}" for j in range(0, 40, 3)), ["c1", "c2", "c3"])))
"""


def test_coverage_is_the_same_float_in_every_process() -> None:
    """The IDF weights are summed in the query's order: summed over a set, the last bit moved with PYTHONHASHSEED
    (0.5155117494023154 to ...56 on this case), and with it a calibrated floor and the report's definition hash."""
    values = {
        subprocess.run(
            [sys.executable, "-c", _PROBE],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in (1, 2, 3, 4, 5)
    }
    assert len(values) == 1, values
