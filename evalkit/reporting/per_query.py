"""Per-query values and aggregate intervals for the report (schema version 2): numbers and IDs only.

The report lists the evaluated queries once (:class:`QueryIndex`: IDs, languages, answerability, in query-ID
order); each ablation then holds one column per measure, aligned with that index, with ``None`` where a measure
is not defined (the ranking and context measures on a no-answer query, unless defined on every query as
trec_eval's names are, ``no_answer_fpr`` on an answerable one).
Values are rounded to :data:`PER_QUERY_DECIMALS` places, which keeps a 20,000-query report a few megabytes.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from evalkit.common.progress import progress
from evalkit.data.fixture import Query
from evalkit.data.schema import (
    PRIVATE_VALUE,
    SLICES,
    IdentifierText,
    Language,
    Slice,
    StrictModel,
    first_private_value,
)
from evalkit.measures.registry import EVERY_JUDGED_QUERY, NO_ANSWER_FPR, STANDARD_MEASURES
from evalkit.measures.statistics import FloatArray, StatisticsSettings, bootstrap_mean_intervals

PER_QUERY_DECIMALS: Final = 6
"""Per-query values are rounded to this many decimal places in the report."""
ANSWERABLE_MEASURES: Final = tuple(str(m) for m in STANDARD_MEASURES)
NO_ANSWER_MEASURES: Final = (str(NO_ANSWER_FPR),)

PerQueryColumns = dict[str, tuple[float | None, ...]]
"""Measure text -> one value per query of the report's :class:`QueryIndex` (None: not defined for that query)."""
Interval = tuple[float, float]


class QueryIndex(StrictModel):
    """The evaluated queries in query-ID order: the row index of every per-query column."""

    query_ids: tuple[IdentifierText, ...] = Field(default=(), description="query IDs, ascending")
    languages: tuple[Language | None, ...] = Field(
        default=(), description="language of each query (None: not known, the query is in the 'all' slice only)"
    )
    answerable: tuple[bool, ...] = Field(default=(), description="whether each query has relevant chunks")

    @model_validator(mode="after")
    def _aligned(self) -> QueryIndex:
        if not len(self.query_ids) == len(self.languages) == len(self.answerable):
            raise ValueError(
                f"queries: query_ids ({len(self.query_ids)}), languages ({len(self.languages)}) and answerable "
                f"({len(self.answerable)}) must have the same length"
            )
        if list(self.query_ids) != sorted(set(self.query_ids)):
            raise ValueError("queries: query_ids must be unique and ascending")
        private = first_private_value(self.query_ids)  # one scan for every ID, not one call per ID
        if private is not None:
            raise ValueError(f"queries: query_ids[{private[0]}] looks like {private[1]}; {PRIVATE_VALUE}")
        return self

    def members(self, slice_name: Slice, answerable: bool | None) -> list[int]:
        """Row positions of the slice's answerable (or no-answer; None: all) queries."""
        keep = np.ones(len(self.query_ids), dtype=bool)
        if answerable is not None:
            keep &= _array(self.answerable) == answerable
        if slice_name != "all":
            keep &= _array(self.languages) == slice_name
        return np.flatnonzero(keep).tolist()


@lru_cache(maxsize=8)
def _array(values: tuple[bool, ...] | tuple[Language | None, ...]) -> npt.NDArray[Any]:
    """An index's column as an array, made once per index for the many :meth:`QueryIndex.members` calls of a report
    (a model's own cache would take part in its equality)."""
    return np.array(values, dtype=object if values and not isinstance(values[0], bool) else bool)


def query_index(queries: Sequence[Query]) -> QueryIndex:
    """The index of a fixture's queries."""
    ordered = sorted(queries, key=lambda q: q.query_id)
    return QueryIndex(
        query_ids=tuple(q.query_id for q in ordered),
        languages=tuple(q.language for q in ordered),
        answerable=tuple(q.answerable for q in ordered),
    )


class ValueColumns(Mapping[str, Mapping[str, float]]):
    """Per-query values held as one array per measure, aligned with ``query_ids`` (NaN: not defined there), read as
    query ID -> measure -> value like any per-query mapping; :func:`value_columns` takes the arrays as they are (a
    million queries are never turned into a million dictionaries)."""

    def __init__(self, query_ids: Sequence[str], columns: Mapping[str, FloatArray]) -> None:
        self.query_ids = tuple(query_ids)
        self.columns = dict(columns)
        self._rows = {query_id: row for row, query_id in enumerate(self.query_ids)}

    def __getitem__(self, query_id: str) -> Mapping[str, float]:
        row = self._rows[query_id]
        values = {name: float(column[row]) for name, column in self.columns.items()}
        return {name: value for name, value in values.items() if not np.isnan(value)}

    def __iter__(self) -> Iterator[str]:
        return iter(self.query_ids)

    def __len__(self) -> int:
        return len(self.query_ids)


def value_columns(
    index: QueryIndex, per_query: Mapping[str, Mapping[str, float]], measures: Sequence[str]
) -> dict[str, FloatArray]:
    """Query ID -> measure -> value as one float array per measure, aligned with ``index`` (NaN: not defined)."""
    if isinstance(per_query, ValueColumns) and per_query.query_ids == tuple(index.query_ids):
        missing = np.full(len(index.query_ids), np.nan)
        return {m: np.asarray(per_query.columns.get(m, missing), dtype=np.float64) for m in measures}
    rows = [per_query[query_id] for query_id in index.query_ids]
    nan = float("nan")
    return {m: np.fromiter((row.get(m, nan) for row in rows), dtype=np.float64, count=len(rows)) for m in measures}


def rounded_column(values: FloatArray) -> tuple[float | None, ...]:
    """``round(v, PER_QUERY_DECIMALS)`` of each value (Python's, correctly rounded), NaN as None, vectorised.

    ``rint(v * 10**6) / 10**6`` is Python's result whenever ``v * 10**6`` rounds to the same integer; the product's
    own rounding can move it across a half only when it lies within a hair of one, and those values are rounded by
    Python itself.
    """
    scale = 10.0**PER_QUERY_DECIMALS
    scaled = values * scale
    out = np.rint(scaled) / scale
    near_half = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    for row in np.flatnonzero(near_half).tolist():
        out[row] = round(float(values[row]), PER_QUERY_DECIMALS)
    column = out.astype(object)
    column[np.isnan(out)] = None
    return tuple(column.tolist())


def _none_as_nan(column: Sequence[float | None]) -> FloatArray | None:
    """The column as a float array with NaN for None, converted in C; None when the column also holds a NaN value,
    which the array could not tell from a None."""
    values: FloatArray = np.array(column, dtype=np.float64)
    return values if int(np.isnan(values).sum()) == column.count(None) else None


SHARED_MIN: Final = 4096
"""Columns shorter than this are kept as read (sharing their values saves nothing worth the pass)."""


def shared_values(column: tuple[float | None, ...]) -> tuple[float | None, ...]:
    """The column with each distinct value one object, as read from a report: a million queries' values are mostly
    a few numbers (0, 1, 1/2...), and a float object per value would hold a parsed report at four times its size.
    Equal as a tuple and written to the same bytes; a column holding ``-0.0`` or a NaN value is kept as it is."""
    if len(column) < SHARED_MIN:
        return column
    values = _none_as_nan(column)
    if values is None or np.any(np.signbit(values) & (values == 0)):
        return column  # NaN values or -0.0: left for the checks to name, and -0.0 kept apart from 0.0
    distinct, inverse = np.unique(values, return_inverse=True)
    if 2 * len(distinct) > len(column):
        return column
    objects = [None if math.isnan(value) else value for value in distinct.tolist()]
    return tuple(map(objects.__getitem__, inverse.tolist()))


def every_query_measures(definitions: Mapping[str, str]) -> frozenset[str]:
    """The measures defined on every judged query (trec_eval's names), by their recorded definitions."""
    return frozenset(name for name, definition in definitions.items() if EVERY_JUDGED_QUERY in definition)


def check_columns(index: QueryIndex, name: str, columns: PerQueryColumns, every: Collection[str] = ()) -> None:
    """Raise ``ValueError`` naming the ablation and measure when a column does not match the query index (``every``:
    the measures defined on every query, see :func:`every_query_measures`)."""
    answerable = np.array(index.answerable, dtype=bool)
    for measure, column in columns.items():
        if len(column) != len(index.query_ids):
            raise ValueError(
                f"ablation {name}: per_query[{measure!r}] has {len(column)} values for {len(index.query_ids)} queries"
            )
        expected = measure in NO_ANSWER_MEASURES
        everywhere = measure in every and not expected
        values = _none_as_nan(column)
        if values is not None:
            present = ~np.isnan(values)
        else:  # a NaN value too: told apart from None one by one
            present = np.fromiter((value is not None for value in column), dtype=bool, count=len(column))
        wrong = np.flatnonzero(present != (everywhere | (answerable != expected)))
        if wrong.size:
            state = "missing" if column[wrong[0]] is None else "present"
            raise ValueError(
                f"ablation {name}: per_query[{measure!r}] value {state} for query {index.query_ids[wrong[0]]}"
            )


def split_measures(
    measures: Sequence[str], every: Collection[str] = ()
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The measures defined on answerable queries, on no-answer queries and (``every``) on every query, order
    kept."""
    return (
        tuple(m for m in measures if m not in NO_ANSWER_MEASURES and m not in every),
        tuple(m for m in measures if m in NO_ANSWER_MEASURES),
        tuple(m for m in measures if m in every and m not in NO_ANSWER_MEASURES),
    )


QUERY_KINDS: Final[tuple[bool | None, ...]] = (True, False, None)
"""The kinds of queries a measure is defined on, in :func:`split_measures`' order: answerable, no-answer, all."""


def aggregate_intervals(
    index: QueryIndex,
    per_query: Mapping[str, Mapping[str, Mapping[str, float]]],
    settings: StatisticsSettings,
    measures: Sequence[str] = (*ANSWERABLE_MEASURES, *NO_ANSWER_MEASURES),
    every: Collection[str] = (),
) -> dict[str, dict[Slice, dict[str, Interval]]]:
    """Bootstrap interval of every aggregate: ablation -> slice -> measure -> (low, high).

    ``per_query`` maps ablation -> query ID -> measure -> value (unrounded, as the aggregates are computed). One
    call per slice and query kind covers every ablation and measure, so all aggregates of a slice share the same
    resamples; a slice without queries of a kind has no aggregate of that kind and no interval.
    """
    columns = {name: value_columns(index, values, measures) for name, values in per_query.items()}
    return column_intervals(index, columns, settings, measures, every)


def column_intervals(
    index: QueryIndex,
    columns: Mapping[str, Mapping[str, FloatArray]],
    settings: StatisticsSettings,
    measures: Sequence[str],
    every: Collection[str] = (),
) -> dict[str, dict[Slice, dict[str, Interval]]]:
    """:func:`aggregate_intervals` of ablation -> measure -> values aligned with ``index`` (:func:`value_columns`)."""
    intervals: dict[str, dict[Slice, dict[str, Interval]]] = {name: {} for name in columns}
    kinds = list(zip(QUERY_KINDS, split_measures(measures, every), strict=True))
    steps = [(slice_name, answerable, kind) for slice_name in SLICES for answerable, kind in kinds]
    for slice_name, answerable, kind in progress(steps, "bootstrap intervals", len(steps)):
        rows = np.array(index.members(slice_name, answerable), dtype=np.int64)
        if not rows.size or not kind:
            continue
        keys = [(name, measure) for name in sorted(columns) for measure in kind]
        matrix = np.column_stack([columns[name][measure][rows] for name, measure in keys])
        bounds = bootstrap_mean_intervals(matrix, settings)
        for (name, measure), (low, high) in zip(keys, bounds.tolist(), strict=True):
            intervals[name].setdefault(slice_name, {})[measure] = (low, high)
    return intervals


def shared_queries(indexes: Sequence[QueryIndex], labels: Sequence[str]) -> tuple[QueryIndex, list[list[int]]]:
    """The queries every report's index holds (reports over the same judgments may still differ by queries: those
    without any judgment, such as the no-answer queries a fixture has and its TREC qrels cannot hold, or those a
    run scored with ``--missing skip`` does not name): their index and each report's row of each. Raises
    ``ValueError`` when a shared query has another language or answerability in one report, or when no query is
    shared."""
    first = indexes[0]
    ids = sorted(set(first.query_ids).intersection(*(i.query_ids for i in indexes[1:])))
    if not ids:
        raise ValueError("the reports share no query")
    positions = [{q: i for i, q in enumerate(index.query_ids)} for index in indexes]
    rows = [[where[q] for q in ids] for where in positions]
    for label, other, other_rows in zip(labels[1:], indexes[1:], rows[1:], strict=True):
        for query_id, row0, row in zip(ids, rows[0], other_rows, strict=True):
            before = (first.languages[row0], first.answerable[row0])
            after = (other.languages[row], other.answerable[row])
            if before != after:
                raise ValueError(
                    f"query {query_id} has language {before[0]} and answerable {before[1]} in {labels[0]} but "
                    f"language {after[0]} and answerable {after[1]} in {label}: score both with the same topics"
                )
    index = QueryIndex(
        query_ids=tuple(ids),
        languages=tuple(first.languages[r] for r in rows[0]),
        answerable=tuple(first.answerable[r] for r in rows[0]),
    )
    return index, rows


def restricted(columns: PerQueryColumns, rows: Sequence[int]) -> PerQueryColumns:
    """The per-query columns at `rows` (all of them when `rows` are every row in order)."""
    return {m: tuple(column[r] for r in rows) for m, column in columns.items()}
