"""value_runs: each item's value found from runs of equal values, as a dictionary would give it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given
from hypothesis import strategies as st

from evalkit.data.columns import RUNS_SHARE, value_runs


def _decoded(column: pa.Array) -> list[str]:
    values, positions = value_runs(column)
    assert positions.dtype == np.int32
    return values.take(pa.array(positions)).to_pylist()


@given(st.lists(st.tuples(st.sampled_from(["q1", "q2", "q10", "é", "q1 "]), st.integers(1, 9)), max_size=12))
def test_every_item_gets_its_own_value_back_grouped_or_not(groups: list[tuple[str, int]]) -> None:
    items = [value for value, size in groups for _ in range(size)]
    assert _decoded(pa.array(items, type=pa.string())) == items


def test_grouped_values_are_kept_once_per_run_not_hashed() -> None:
    items = ["b"] * 5 + ["a"] * 7 + ["b"] * 4  # "b" in two runs: kept twice, each run's lines pointing at its own
    values, positions = value_runs(pa.array(items))
    assert values.to_pylist() == ["b", "a", "b"]
    assert positions.tolist() == [0] * 5 + [1] * 7 + [2] * 4


def test_a_column_of_many_short_runs_is_dictionary_encoded() -> None:
    items = [f"q{i % 7}" for i in range(70)]  # 70 runs of one item: more than 1/RUNS_SHARE of the items
    values, positions = value_runs(pa.array(items))
    assert len(values) == len(pc.unique(pa.array(items))) == 7
    assert values.take(pa.array(positions)).to_pylist() == items
    grouped = sorted(items)
    runs_values, _ = value_runs(pa.array(grouped))
    assert len(runs_values) == 7 and len(grouped) > 7 * RUNS_SHARE


def test_an_empty_column_and_a_sliced_one() -> None:
    values, positions = value_runs(pa.array([], type=pa.string()))
    assert len(values) == 0 and len(positions) == 0
    column = pa.array(["x"] * 3 + ["y"] * 8 + ["z"] * 8)
    sliced = column.slice(2, 14)  # an offset into the buffers, as a block cut in two has; three runs: not hashed
    values, _ = value_runs(sliced)
    assert values.to_pylist() == ["x", "y", "z"]
    assert _decoded(sliced) == ["x"] + ["y"] * 8 + ["z"] * 5
