"""``evalkit.score``: any run against any qrels, no corpus needed, at home in a notebook.

>>> result = evalkit.score("qrels.txt", "run.trec", measures=["ndcg@10", "ndcg_cut_10", "recip_rank"])
>>> result.aggregate            # measure -> mean over the judged queries
>>> result.per_query            # DataFrame: one row per query ID, one column per measure as named
>>> result.intervals            # run -> slice -> measure -> 95% bootstrap interval
>>> report = result.to_report() # the schema-2 report `evalkit compare` reads

Inputs: qrels as a path (TREC or BEIR, optionally ``.gz``), ``{qid: {docid: grade}}`` or a DataFrame with
columns ``query_id``, ``doc_id``, ``grade``; a run as a path (TREC or JSONL), ``{qid: {docid: score}}``, a
DataFrame with ``query_id``, ``doc_id``, ``score``, or several runs as ``{name: run}``. ``languages`` gives each
query's language (a mapping, or a topics file: :mod:`evalkit.data.topics`) for the ``en`` and ``zh`` slices;
without it there is one slice, ``all``. Which queries count, and how ties and duplicates are handled, is the
scoring core's (:mod:`evalkit.measures.core`).
"""

from __future__ import annotations

import hashlib
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from evalkit.common.memory import scoring_memory
from evalkit.common.threads import beside, scoring_threads
from evalkit.data.fixture import Fixture
from evalkit.data.inputs import clip
from evalkit.data.judgments import qrels_sha256
from evalkit.data.loading import QrelsInput, is_single_run, load_languages, load_qrels, load_run, load_runs
from evalkit.data.qrels import Qrels
from evalkit.data.run_coverage import refuse_unscorable
from evalkit.data.run_stream import run_file_name, run_sha256
from evalkit.data.runs import Run
from evalkit.data.schema import LANGUAGES, MAX_ID_LENGTH, Language, Slice, is_identifier
from evalkit.data.tables import DEFAULT_MAX_TABLE_BYTES
from evalkit.measures.core import RunScores
from evalkit.measures.registry import (
    DEFAULT_SCORE_MEASURES,
    MeasureDef,
    condensed_forms,
    display_order,
    judged_k,
    judged_share_measures,
    parse_measures,
    trec_order,
)
from evalkit.measures.results import Failure
from evalkit.measures.statistics import DEFAULT_STATISTICS, StatisticsSettings
from evalkit.measures.ties import DEFAULT_TIE_POLICY
from evalkit.reporting.build import ReportSource, SystemScores, build_report, mean_of
from evalkit.reporting.per_query import (
    Interval,
    QueryIndex,
    ValueColumns,
    aggregate_intervals,
)
from evalkit.reporting.report import Report, ReportFailure, SystemReport
from evalkit.reporting.summary import SummaryRow, format_summary
from evalkit.runs.run_sources import RunFile, Scoring, score_source, streams
from evalkit.runs.score_notes import coverage_notes, run_counts, scoring_notes

__all__ = ["ScoreResult", "load_qrels", "load_run", "score"]


PerQuery = ValueColumns
"""Query ID -> measure -> value (NaN where it is not defined), held as one array per measure."""


def _content_sha256(*parts: object) -> str:
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            digest.update(np.ascontiguousarray(part).tobytes())
        else:
            digest.update(repr(part).encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


@dataclass(frozen=True)
class ScoreResult:
    """Per-query values of one or more runs against one set of qrels; see the module docstring."""

    qrels: Qrels
    runs: tuple[RunScores, ...]
    measures: tuple[MeasureDef, ...]
    languages: Mapping[str, Language]
    ties: str
    missing: str
    notes: tuple[str, ...]
    statistics: StatisticsSettings = DEFAULT_STATISTICS
    sources: tuple[Run | RunFile, ...] = ()
    """What each run was scored from: a run in memory, or a run file read a segment at a time (read again for the
    condensed forms a report carries)."""
    floor: float | None = None
    """The abstention floor applied to every run's scores (None: none)."""
    named: bool = False
    """Whether the runs were given as ``{name: run}``: :attr:`aggregate` is then keyed by run name, even for one."""
    fixture: Fixture | None = None
    """The fixture the runs were scored against (:mod:`evalkit.runs.fixture_runs`), or None: qrels."""
    failures: Mapping[str, tuple[Failure, ...]] = field(default_factory=dict)
    """Run name -> its ID-only failures (against a fixture)."""
    systems: Mapping[str, SystemReport] = field(default_factory=dict)
    """Run name -> its provenance as the front door read it (file hash, counts); default: from the run as read."""
    judged_share: tuple[str, ...] = ()
    """The measures of :attr:`measures` added beside those asked for the unjudged share (``judged@k``, ``unj@k``):
    trec_eval's layout (:meth:`format_trec`) leaves them out."""
    hashes: Mapping[str, str] = field(default_factory=dict)
    """Run name -> SHA-256 of its content, as its source was read (a run in memory is hashed when asked)."""
    max_bytes: int = DEFAULT_MAX_TABLE_BYTES
    """The size cap its run files were read under (and are read again under)."""

    @cached_property
    def run_hashes(self) -> dict[str, str]:
        """Run name -> SHA-256 of its content as read (computed when a report needs it)."""
        return {
            _source_name(s): self.hashes.get(_source_name(s)) or run_sha256(s)  # type: ignore[arg-type]
            for s in self.sources
        }

    @cached_property
    def query_ids(self) -> list[str]:
        """The evaluated query IDs, ascending (with ``missing="skip"``, those every run names)."""
        evaluated = np.logical_and.reduce([r.evaluated for r in self.runs])
        ids = self.qrels.queries.to_pylist()
        return [q for q, keep in zip(ids, evaluated.tolist(), strict=True) if keep]

    @cached_property
    def _rows(self) -> npt.NDArray[np.int64]:
        evaluated = np.logical_and.reduce([r.evaluated for r in self.runs])
        return np.flatnonzero(evaluated)

    def __getitem__(self, name: str) -> ScoreResult:
        """The result of the run called ``name`` alone."""
        chosen = tuple(r for r in self.runs if r.name == name)
        if not chosen:
            raise KeyError(f"no run named {name!r}; runs: {', '.join(r.name for r in self.runs)}")
        others = tuple(f"{r.name}: " for r in self.runs if r.name != name)  # their notes are theirs alone
        return replace(
            self,
            runs=chosen,
            sources=tuple(s for s in self.sources if _source_name(s) == name),
            named=False,
            notes=tuple(n for n in self.notes if not n.startswith(others)),
        )

    def _frame(self, run: RunScores) -> pd.DataFrame:
        frame = pd.DataFrame(
            {m.name: run.values[m.name][self._rows] for m in self._asked}, index=pd.Index(self.query_ids)
        )
        frame.index.name = "query_id"
        return frame

    @property
    def _asked(self) -> tuple[MeasureDef, ...]:
        """The measures asked: :attr:`measures` but the unjudged share added beside them (:attr:`judged_share`),
        which the tables and reports show and :attr:`per_query` and :attr:`aggregate` leave out."""
        return tuple(m for m in self.measures if m.name not in self.judged_share)

    @cached_property
    def per_query(self) -> pd.DataFrame:
        """One row per evaluated query ID, one column per measure as named (NaN: not defined for the query).
        With several runs, or runs given as ``{name: run}``, the columns are (run, measure)."""
        if len(self.runs) == 1 and not self.named:
            return self._frame(self.runs[0])
        return pd.concat({r.name: self._frame(r) for r in self.runs}, axis=1)

    def _slice_rows(self, slice_name: str) -> list[int]:
        if slice_name == "all":
            return list(range(len(self.query_ids)))
        return [i for i, q in enumerate(self.query_ids) if self.languages.get(q) == slice_name]

    @cached_property
    def slices(self) -> tuple[Slice, ...]:
        """``all``, then each language some evaluated query has."""
        if not self.languages:
            return ("all",)
        present = {self.languages.get(q) for q in self.query_ids}
        return ("all", *(lang for lang in LANGUAGES if lang in present))

    @cached_property
    def means(self) -> dict[tuple[str, str], dict[str, float]]:
        """(run, slice) -> measure -> mean over the slice's queries the measure is defined on (NaN: none)."""
        means: dict[tuple[str, str], dict[str, float]] = {}
        for run in self.runs:
            for slice_name in self.slices:
                rows = self._rows if slice_name == "all" else self._rows[self._slice_rows(slice_name)]
                row: dict[str, float] = {}
                for m in self.measures:
                    values = run.values[m.name][rows]
                    defined = values[~np.isnan(values)]
                    row[m.name] = mean_of(defined.tolist(), self.ties) if len(defined) else math.nan
                means[(run.name, slice_name)] = row
        return means

    @property
    def table(self) -> pd.DataFrame:
        """:attr:`means` as a DataFrame: rows (run, slice), one column per measure."""
        frame = pd.DataFrame.from_dict(self.means, orient="index")
        frame.index = pd.MultiIndex.from_tuples(list(self.means), names=["run", "slice"])
        return frame

    @property
    def aggregate(self) -> dict[str, float] | dict[str, dict[str, float]]:
        """Measure -> mean over the judged queries (slice ``all``), for the measures asked; with several runs, or runs
        given as ``{name: run}``, run -> that mapping."""
        asked = {m.name for m in self._asked}
        means = {run.name: {m: v for m, v in self.means[(run.name, "all")].items() if m in asked} for run in self.runs}
        return means[self.runs[0].name] if len(self.runs) == 1 and not self.named else means

    @cached_property
    def intervals(self) -> dict[str, dict[Slice, dict[str, Interval]]]:
        """Run -> slice -> measure -> 95% percentile bootstrap interval of the mean (seeded: the same every time)."""
        index, per_query = self._index_and_values()
        return aggregate_intervals(index, per_query, self.statistics, [m.name for m in self.measures], self._every)

    @property
    def _every(self) -> frozenset[str]:
        """The measures defined on every judged query (trec_eval's names)."""
        return frozenset(m.name for m in self.measures if m.no_relevant == "zero")

    def _index_and_values(self) -> tuple[QueryIndex, dict[str, PerQuery]]:
        answerable = self.runs[0].answerable[self._rows].tolist()
        index = QueryIndex(
            query_ids=tuple(self.query_ids),
            languages=tuple(self.languages.get(q) for q in self.query_ids),
            answerable=tuple(answerable),
        )
        per_query = {run.name: self._defined(run.values, self.measures) for run in self.runs}
        return index, per_query

    def _defined(self, values: Mapping[str, npt.NDArray[np.float64]], measures: Sequence[MeasureDef]) -> PerQuery:
        """Query ID -> measure -> value over the evaluated queries (NaN where it is not defined), held as columns."""
        return ValueColumns(self.query_ids, {m.name: values[m.name][self._rows] for m in measures})

    def report_source(self) -> ReportSource:
        """What the report builder (:func:`evalkit.reporting.build.build_report`) takes of this result."""
        bad = [r.name for r in self.runs if not is_identifier(r.name)]
        if bad:
            raise ValueError(f"run name {bad[0]!r} is not a valid report ID (letters, digits and . _ : -)")
        bad_queries = [q for q in self.query_ids if not is_identifier(q)]
        if bad_queries:
            raise ValueError(
                f"query ID {clip(repr(bad_queries[0]))} ({len(bad_queries)} such ID(s)) is not a valid report ID "
                f"(letters, digits and . _ : -, starting with a letter or digit, at most {MAX_ID_LENGTH} characters): "
                "a report cannot carry it; score with --format table or trec instead"
            )
        index, per_query = self._index_and_values()
        condensed = self._condensed()
        names = [m.name for m in self.measures]
        systems = {
            run.name: SystemScores(
                mode="run",
                per_query=ValueColumns(self.query_ids, {**per_query[run.name].columns, **condensed[run.name].columns}),
                unjudged=self._unjudged(run),
                failures=tuple(
                    ReportFailure(**asdict(f), message=f.describe()) for f in self.failures.get(run.name, ())
                ),
                system=self.systems.get(run.name)
                or SystemReport(
                    kind="run-file",
                    sha256=self.run_hashes.get(run.name),
                    counts=run_counts(run),
                    abstention_floor=self.floor,
                ),
            )
            for run in self.runs
        }
        judgments = qrels_sha256(self.qrels)
        definitions = {m.name: m.definition for m in (*self.measures, *self._condensed_measures)}
        projection = _content_sha256(*(run.values[m][self._rows] for run in self.runs for m in names))
        definition = _content_sha256(
            judgments,
            sorted(self.run_hashes.items()),
            definitions,
            self.ties,
            self.missing,
            self.statistics.model_dump(mode="json"),
            *(() if self.floor is None else (("abstention_floor", self.floor),)),
        )
        fixture = self.fixture
        corpus = None
        if fixture is not None:
            from evalkit.runs.evaluation import corpus_sha256

            corpus = corpus_sha256(fixture)
            definition = _content_sha256(definition, corpus, fixture.fixture_id, fixture.fixture_version)
        return ReportSource(
            fixture_id="qrels" if fixture is None else fixture.fixture_id,
            fixture_version=f"judgments-{judgments[:12]}" if fixture is None else fixture.fixture_version,
            corpus_sha256=corpus,
            evaluation_definition_hash=definition,
            provider_definitions_hash=None,
            projection_sha256=projection,
            index=index,
            judgments_sha256=judgments,
            measures=definitions,
            systems=systems,
            ties=self.ties,
            missing=self.missing,
            statistics=self.statistics,
            notes=self.notes,
            unjudged_k=judged_k(self.measures) if any(r.unjudged is not None for r in self.runs) else None,
            pooled=frozenset(
                self.qrels.queries.take(pa.array(np.unique(self.qrels.query[self.qrels.grades == 0]))).to_pylist()
            ),
            companions=tuple(m.name for m in self._condensed_measures),
        )

    @property
    def _condensed_measures(self) -> tuple[MeasureDef, ...]:
        """The condensed-list forms of the measures asked, which a report carries for ``compare``'s check of label
        holes (none when no source runs are kept to score them from)."""
        return condensed_forms(self.measures) if self.sources else ()

    def _condensed(self) -> dict[str, PerQuery]:
        """Run name -> query ID -> the condensed forms' values, each run scored again from its source (its floor
        applied), only when a report is built."""
        measures = self._condensed_measures
        out: dict[str, PerQuery] = {run.name: ValueColumns(self.query_ids, {}) for run in self.runs}
        if not measures:
            return out
        sources = {_source_name(source): source for source in self.sources}
        scoring = Scoring(self.qrels, measures, self.ties, self.missing, None, self.floor, self.max_bytes)
        for run in self.runs:
            out[run.name] = self._defined(score_source(sources[run.name], scoring).scores.values, measures)
        return out

    def _unjudged(self, run: RunScores) -> dict[str, int] | None:
        """Query ID -> the run's unjudged results in its top k, over the evaluated queries (None: not counted)."""
        if run.unjudged is None:
            return None
        return dict(zip(self.query_ids, run.unjudged[self._rows].tolist(), strict=True))

    def to_report(self) -> Report:
        """The schema-2 report (IDs, hashes and numbers only) that ``evalkit compare`` reads."""
        return build_report(self.report_source())

    def summary_rows(self) -> list[SummaryRow]:
        """:attr:`means` as the rows of the one summary view (:mod:`evalkit.reporting.summary`)."""
        return [
            SummaryRow(run, slice_name, {m: v for m, v in row.items() if not math.isnan(v)})
            for (run, slice_name), row in self.means.items()
        ]

    def format_table(self) -> str:
        """Plain text: one row per run and slice, one column per measure, then the notes."""
        return format_summary(self.summary_rows(), display_order([m.name for m in self.measures]), self.notes)

    def format_trec(self, per_query: bool = False) -> str:
        """trec_eval's layout, ``measure<TAB>query<TAB>value`` with 4 decimals (``%-22s\\t%s\\t%6.4f``): per query
        first when asked (the queries the run names, as ``-q``; one it leaves out counts in ``all`` only, as with
        ``-c``), then ``all``, the measures in trec_eval's order (:func:`trec_order`). With several runs, each run's
        block follows the previous one and opens with trec_eval's ``runid<TAB>all<TAB>NAME`` line, so the blocks can
        be told apart."""
        lines = []
        shown = trec_order(self._asked)
        for run in self.runs:
            if len(self.runs) > 1:
                lines.append(f"{'runid':<22}\tall\t{run.name}")
            if per_query:
                columns = {m.name: run.values[m.name][self._rows].tolist() for m in shown}
                named = np.ones(len(self._rows), dtype=bool) if run.named is None else run.named[self._rows]
                for i, query_id in enumerate(self.query_ids):
                    shows = [(n, v[i]) for n, v in columns.items() if named[i] and not math.isnan(v[i])]
                    lines += [f"{n:<22}\t{query_id}\t{value:6.4f}" for n, value in shows]
            means = self.means[(run.name, "all")]
            lines += [f"{m.name:<22}\tall\t{means[m.name]:6.4f}" for m in shown if not math.isnan(means[m.name])]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        table: str = self.table.to_html(float_format=lambda v: f"{v:.4f}", na_rep="-")
        return table + (f"<ul>{notes}</ul>" if notes else "")


def score(
    qrels: QrelsInput,
    run: Any,
    measures: Sequence[str] | None = None,
    ties: str = DEFAULT_TIE_POLICY,
    languages: Mapping[str, str] | str | Path | None = None,
    missing: str = "zero",
    max_bytes: int = DEFAULT_MAX_TABLE_BYTES,
    floor: float | None = None,
) -> ScoreResult:
    """Score one run (or ``{name: run}``) against qrels; see the module docstring for the inputs.

    ``measures`` are names in evalkit's or trec_eval's vocabulary (:mod:`evalkit.measures.registry`; default:
    recall@1/5/10, mrr@10, ndcg@10, plus no_answer_fpr when some judged query has no relevant document). Context
    measures need answer spans and are left out with a note. ``ties`` is the tie policy, ``missing`` what a judged
    query the run does not name counts as (``zero`` or ``skip``). ``floor`` is an abstention floor on the run's
    scores: a query whose best score is below it returns no results (it stays named, with an empty ranking), so
    no_answer_fpr and every other measure are those of the system with the floor.
    """
    with scoring_memory():  # see evalkit.common.memory: what first touching memory costs
        return _score(qrels, run, measures, ties, languages, missing, max_bytes, floor)


def _source_name(source: Run | RunFile) -> str:
    return source.name or ""


def _sources(run: Any, max_bytes: int) -> list[Run | RunFile]:
    """What each run is scored from: a large TREC run file stays on disk, to be read a segment at a time
    (:mod:`evalkit.runs.run_sources`); anything else is loaded, as :func:`load_runs` loads it."""
    given = [(None, run)] if is_single_run(run) else [(str(key), value) for key, value in run.items()]
    sources: list[Run | RunFile] = []
    for key, value in given:
        if streams(value, max_bytes):
            sources.append(RunFile(Path(value), key or run_file_name(Path(value), max_bytes)))
        else:
            sources.append(
                load_run(value, max_bytes=max_bytes) if key is None else load_runs({key: value}, max_bytes)[0]
            )
    return sources


def _score(
    qrels: QrelsInput,
    run: Any,
    measures: Sequence[str] | None,
    ties: str,
    languages: Mapping[str, str] | str | Path | None,
    missing: str,
    max_bytes: int,
    floor: float | None,
) -> ScoreResult:
    # the judgments are read beside the run, whose parse leaves part of Arrow's threads idle
    judged, sources = beside(lambda: load_qrels(qrels, max_bytes), lambda: _sources(run, max_bytes), scoring_threads())
    names = [_source_name(s) for s in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"two runs are named alike ({', '.join(names)}): name them with a {{name: run}} mapping")
    if isinstance(measures, str):  # one name, not its characters
        measures = [measures]
    asked = parse_measures(list(measures) if measures is not None else list(DEFAULT_SCORE_MEASURES))
    if not asked:
        raise ValueError("measures names no measure")
    dropped = [m.name for m in asked if m.spec.needs_spans]
    chosen = [m for m in asked if not m.spec.needs_spans]
    share = list(judged_share_measures(chosen)) if chosen else []
    chosen += share
    depth_k = judged_k(chosen)
    relevant = np.bincount(judged.query[judged.grades >= 1], minlength=len(judged.queries))
    if measures is None and not (relevant > 0).all():  # some judged query has no relevant document
        chosen += list(parse_measures(["no_answer_fpr"]))
    if not chosen:
        raise ValueError("no measure left to compute: " + "; ".join(scoring_notes((), dropped, missing)))
    if not len(judged):
        raise ValueError(f"{judged.source}: holds no judgments")
    scoring = Scoring(judged, tuple(chosen), ties, missing, depth_k, floor, max_bytes)
    scored = [score_source(source, scoring) for source in sources]
    for one in scored:
        counts = one.scores.counts
        if counts is not None:
            source = f"the judgments ({judged.source})"
            refuse_unscorable(one.name, one.queries, one.lines, counts.unjudged_queries, source)  # lines as read
    scores = tuple(one.scores for one in scored)
    query_languages = load_languages(languages, max_bytes)
    notes = [*scoring_notes(scores, dropped, missing), *coverage_notes(judged, scores, query_languages, languages)]
    notes += [one.note for one in scored if one.note is not None]
    notes += [
        f"{one.name}: floor {floor:g}: {one.withheld} query(ies) whose best score is below it return nothing"
        for one in scored
        if floor is not None
    ]
    return ScoreResult(
        judged,
        scores,
        tuple(chosen),
        query_languages,
        ties,
        missing,
        tuple(notes),
        sources=tuple(sources),
        floor=floor,
        named=not is_single_run(run),
        judged_share=tuple(m.name for m in share),
        hashes={one.name: one.sha256 for one in scored if one.sha256 is not None},
        max_bytes=max_bytes,
    )
