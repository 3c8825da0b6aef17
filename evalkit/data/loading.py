"""What a user hands to :func:`evalkit.score`, made into the scoring core's inputs: qrels and runs from paths,
``{qid: {docid: grade}}`` / ``{qid: {docid: score}}`` mappings or pandas DataFrames, several runs as
``{name: run}``, and each query's language from a mapping or a topics file."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from evalkit.data.field_names import FRAME_DOC_COLUMNS, FRAME_GRADE_COLUMNS, FRAME_QUERY_COLUMNS, FRAME_SCORE_COLUMNS
from evalkit.data.ids import given_id_problem
from evalkit.data.inputs import clip, shorten
from evalkit.data.qrels import Qrels, QrelsError, qrels_from_mapping, read_qrels_file
from evalkit.data.runs import Run, RunFileError, given_score_problem, read_run, run_from_rankings
from evalkit.data.schema import LANGUAGES, Language
from evalkit.data.tables import DEFAULT_MAX_TABLE_BYTES
from evalkit.data.topics import read_topics

__all__ = ["QrelsInput", "RunInput", "is_single_run", "load_languages", "load_qrels", "load_run", "load_runs"]


QrelsInput = str | Path | Qrels | Mapping[str, Mapping[str, int]] | pd.DataFrame
RunInput = str | Path | Run | Mapping[str, Mapping[str, float]] | pd.DataFrame


def _column(frame: pd.DataFrame, names: Sequence[str], what: str) -> pd.Series:
    for name in names:
        if name in frame.columns:
            return frame[name]
    raise ValueError(f"{what} DataFrame needs a column named one of {', '.join(names)}; it has {list(frame.columns)}")


def _ids(frame: pd.DataFrame, names: Sequence[str], what: str) -> pd.Series:
    """A DataFrame's ID column as strings (an integer ID is its digits); a missing ID (None, NaN) is refused naming
    its row and column, since as text it would be the query or document "nan"."""
    column = _column(frame, names, what)
    missing = np.flatnonzero(column.isna().to_numpy())
    if len(missing):
        row = int(missing[0])
        value = clip(repr(column.iloc[row]))
        raise ValueError(f"{what} DataFrame row {row}: column {column.name!r}: ID {value} is missing")
    return column.astype(str)


def load_qrels(qrels: QrelsInput, max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> Qrels:
    """Judgments from a path, a ``{qid: {docid: grade}}`` mapping or a DataFrame."""
    if isinstance(qrels, Qrels):
        return qrels
    if isinstance(qrels, (str, Path)):
        return read_qrels_file(Path(qrels), max_bytes)
    if isinstance(qrels, pd.DataFrame):
        table: dict[str, dict[str, int]] = {}
        queries = _ids(qrels, FRAME_QUERY_COLUMNS, "qrels")
        docs = _ids(qrels, FRAME_DOC_COLUMNS, "qrels")
        grades = _column(qrels, FRAME_GRADE_COLUMNS, "qrels")
        for row, (q, d, g) in enumerate(zip(queries, docs, grades, strict=True)):
            if isinstance(g, (float, np.floating)) and math.isfinite(g) and g == int(g):
                g = int(g)  # a column pandas made float (one missing grade turns every grade into a float)
            elif not isinstance(g, (int, np.integer)) or isinstance(g, bool):
                raise QrelsError(
                    f"qrels DataFrame row {row}: query {clip(repr(q))} document {clip(repr(d))}: "
                    f"grade {clip(repr(g))} is not an integer"
                )
            if d in table.setdefault(q, {}) and table[q][d] != g:
                raise ValueError(f"qrels: query {q!r} document {d!r}: judged twice with different grades")
            table[q][d] = g
        return qrels_from_mapping(table, "qrels DataFrame")
    return qrels_from_mapping(qrels, "qrels")


def load_run(run: RunInput, name: str = "run", max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> Run:
    """A run from a path, a ``{qid: {docid: score}}`` mapping or a DataFrame (``name`` names the last two)."""
    if isinstance(run, Run):
        return run
    if isinstance(run, (str, Path)):
        return read_run(Path(run), max_bytes)
    if isinstance(run, pd.DataFrame):
        rankings: dict[str, list[tuple[str, float]]] = {}
        queries = _ids(run, FRAME_QUERY_COLUMNS, "run")
        docs = _ids(run, FRAME_DOC_COLUMNS, "run")
        for row, (q, d, s) in enumerate(zip(queries, docs, _column(run, FRAME_SCORE_COLUMNS, "run"), strict=True)):
            problem = given_score_problem(s)
            if problem is not None:
                raise RunFileError(f"run DataFrame row {row}: score {clip(repr(s))} {problem}")
            rankings.setdefault(q, []).append((d, float(s)))
        return run_from_rankings(name, rankings)
    if not isinstance(run, Mapping):
        raise RunFileError(
            f"run {clip(repr(name))}: a {type(run).__name__} is not a run: give a path, a DataFrame, "
            "{qid: {docid: score}} or, for several runs, {name: run}"
        )
    odd = next((q for q, docs in run.items() if not isinstance(docs, Mapping)), None)
    if odd is not None:
        raise RunFileError(f"run {clip(repr(name))}: query {clip(repr(odd))}: results must be {{docid: score}}")
    return run_from_rankings(name, {q: list(docs.items()) for q, docs in run.items()})


def is_single_run(runs: Any) -> bool:
    """Whether ``runs`` is one run: not a mapping whose values are runs (a path, a Run, a DataFrame, or a mapping
    of queries to mappings of documents to scores). The first value that tells decides: an empty mapping tells
    nothing (``{"A": {}, "B": {...}}`` is two runs when B's values are rankings), and when none tells, as in
    ``{"A": {}}``, the keys are taken as run names, so that a refusal names the run."""
    if not isinstance(runs, Mapping) or not runs:
        return True
    for value in runs.values():
        if isinstance(value, (str, Path, Run, pd.DataFrame)):
            return False
        if not isinstance(value, Mapping):
            return True
        if value:
            return not isinstance(next(iter(value.values())), Mapping)
    return False


def load_runs(runs: Any, max_bytes: int = DEFAULT_MAX_TABLE_BYTES) -> list[Run]:
    """One run, or each run of a ``{name: run}`` mapping, named by its key."""
    if is_single_run(runs):
        return [load_run(runs, max_bytes=max_bytes)]
    loaded = []
    for name, run in runs.items():
        problem = given_id_problem(str(name), "run name", "runs")
        if problem is not None:
            raise RunFileError(problem)
        one = load_run(run, str(name), max_bytes)
        loaded.append(one if one.name == name else replace(one, name=str(name)))
    return loaded


def load_languages(
    languages: Mapping[str, str] | str | Path | None, max_bytes: int = DEFAULT_MAX_TABLE_BYTES
) -> dict[str, Language]:
    """Query ID -> language, from a mapping or a topics file (none: no languages)."""
    if languages is None:
        return {}
    if isinstance(languages, (str, Path)):
        return read_topics(Path(languages), max_bytes)
    keyed: dict[str, object] = {}
    for key, language in languages.items():
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise ValueError(f"languages: query key {shorten(key)} is not a string or an integer")
        keyed[str(key)] = language  # an integer ID is its digits, as in a DataFrame or a topics file
    bad = sorted(q for q, language in keyed.items() if language not in LANGUAGES)
    if bad:
        raise ValueError(f"languages: query {bad[0]!r} has language {shorten(keyed[bad[0]])}, not one of {LANGUAGES}")
    return cast(dict[str, Language], keyed)
