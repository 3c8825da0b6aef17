"""Calibration on the data's own calibration split: fusion and abstention chosen on one part, reported on the other.

:func:`split_queries` divides a fixture's queries into a *calibration* part and an *evaluation* part, stratified by
language and by answerable versus no-answer, with a seeded ``numpy.random.Generator``; the split is recorded by the
SHA-256 of the two sorted ID lists. On the calibration part alone :func:`calibrated_evaluation` chooses

- the fusion of the systems that fuse (modes ``hybrid`` and ``hybrid-rerank``): the method and weights from the
  declared set :data:`FUSION_CHOICES` (the preset's own fusion, each single part, three convex weightings,
  margin-weighted and RRF) with the highest mean nDCG@10 over the answerable calibration queries, the first
  declared on a tie. The set holds the single parts, so on the calibration queries the chosen hybrid is never
  below either part;
- the abstention floor of the systems that abstain (:data:`ABSTAINING_MODES`): over the declared signals
  :data:`SIGNALS`, the floor with the lowest no-answer FPR whose recall@10 loss against no floor is at most
  ``max_recall_loss`` (:func:`evalkit.measures.abstention.choose_floor`), the first declared signal on a tie.

Then only the evaluation part is run with what was chosen, the floors applied (a query whose confidence is below
its system's floor returns no chunks), so every metric, interval, gate and failure comes from queries that took no
part in the choice. The chosen settings are the :class:`CalibrationRecord` of the evaluation and the report.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import cast

import numpy as np
from pydantic import Field

from evalkit.common.hashing import sha256_of
from evalkit.data.fixture import LoadedFixture, Query
from evalkit.data.schema import Identifier, Language, StrictModel, UnitFloat
from evalkit.data.settings import RetrievalSettings
from evalkit.measures.abstention import (
    DEFAULT_MAX_RECALL_LOSS,
    AbstentionPoint,
    abstention_curve,
    choose_floor,
    outcome_at,
)
from evalkit.measures.core import score_queries
from evalkit.measures.results import QueryResult
from evalkit.measures.ties import DEFAULT_TIE_POLICY, SUMMATION_OF, order_ranking
from evalkit.reporting.calibration_record import CalibrationRecord, FloorRecord, FusionChoice, FusionRecord, SignalName
from evalkit.retrieval.coverage import TermCoverage
from evalkit.retrieval.database import KnowledgeDatabase
from evalkit.retrieval.embedding_cache import EmbeddingCache
from evalkit.retrieval.embeddings import EmbeddingProvider
from evalkit.retrieval.fusion import Contribution, fusion_method
from evalkit.retrieval.retriever import Retriever
from evalkit.retrieval.service import KnowledgeService
from evalkit.runs.ablations import Ablation
from evalkit.runs.evaluation import Evaluation, evaluate, make_providers, prime_providers, with_results

FUSING_MODES = ("hybrid", "hybrid-rerank")
"""Modes whose ranking depends on the fusion (hybrid-rerank reranks the fused candidates)."""
ABSTAINING_MODES = ("hybrid-rerank",)
"""Modes that get an abstention floor: the full pipeline. Its parts are reported as they rank, without one."""
FUSION_MEASURE = "ndcg@10"
"""What the fusion choice maximizes, averaged over the answerable calibration queries."""
CALIBRATE_OPTION = "--calibrate"


def _convex(lexical: float) -> FusionChoice:
    return FusionChoice(fusion="max-normalized", lexical_weight=lexical, vector_weight=1.0 - lexical)


FUSION_CHOICES: dict[str, FusionChoice | None] = {
    "preset": None,  # the settings' own fusion and weights, first so that a tie keeps them
    "lexical-only": _convex(1.0),
    "vector-only": _convex(0.0),
    "convex-0.75": _convex(0.75),
    "convex-0.5": _convex(0.5),
    "convex-0.25": _convex(0.25),
    "margin-weighted": FusionChoice(fusion="margin-weighted", lexical_weight=0.5, vector_weight=0.5),
    "rrf": FusionChoice(fusion="rrf", lexical_weight=0.5, vector_weight=0.5),
}
"""The declared fusion set, in tie-breaking order (``convex-w``: max-normalized, lexical weight w, vector 1 - w)."""


def apply_fusion(choice: FusionChoice, settings: RetrievalSettings) -> RetrievalSettings:
    """The settings with the chosen fusion method and weights."""
    return settings.model_copy(update=choice.model_dump())


def fusion_choice(name: str, settings: RetrievalSettings) -> FusionChoice:
    """The declared fusion of this name (``preset``: the settings' own); unknown names raise ValueError."""
    if name not in FUSION_CHOICES:
        raise ValueError(f"unknown fusion choice {name!r}; valid: {', '.join(FUSION_CHOICES)}")
    declared = FUSION_CHOICES[name]
    if declared is not None:
        return declared
    own = settings.model_dump(include={"fusion", "lexical_weight", "vector_weight"})
    return FusionChoice.model_validate(own)


def _term_coverage(coverage: TermCoverage, query: Query, result: QueryResult) -> float:
    return coverage.coverage(query.text, result.chunk_ids)


def _top_score(coverage: TermCoverage, query: Query, result: QueryResult) -> float:
    del coverage, query
    return float(result.scores[0]) if result.scores else math.nan


SIGNALS: dict[str, Callable[[TermCoverage, Query, QueryResult], float]] = {
    "term-coverage": _term_coverage,
    "top-score": _top_score,
}
"""The declared confidence signals, in tie-breaking order: the IDF-weighted share of the query's terms found in
one of the system's first three results (:mod:`evalkit.retrieval.coverage`), and the system's top score. NaN (an
empty ranking, a query without terms) abstains at every floor."""


def signal(name: str) -> Callable[[TermCoverage, Query, QueryResult], float]:
    """The confidence signal of this name; unknown names raise ValueError listing the valid ones."""
    try:
        return SIGNALS[name]
    except KeyError:
        raise ValueError(f"unknown confidence signal {name!r}; valid: {', '.join(SIGNALS)}") from None


class CalibrationOptions(StrictModel):
    """How to calibrate: the share of queries chosen on, the split's seed, and the abstention floor's recall budget."""

    fraction: float = Field(gt=0.0, lt=1.0, description="share of each stratum's queries in the calibration part")
    seed: int = Field(default=0, ge=0, description="seed of the split (numpy.random.default_rng: 0 or more)")
    max_recall_loss: UnitFloat = Field(
        default=DEFAULT_MAX_RECALL_LOSS, description="recall@10 a floor may cost on the calibration part"
    )


class QuerySplit(StrictModel):
    """The calibration part and the evaluation part of a fixture's queries, each sorted by ID."""

    calibration: tuple[Identifier, ...]
    evaluation: tuple[Identifier, ...]

    @property
    def sha256(self) -> str:
        """SHA-256 of the two ID lists: two runs with this hash chose on, and reported on, the same queries."""
        return sha256_of({"calibration": list(self.calibration), "evaluation": list(self.evaluation)})


def check_fraction(fraction: float, option: str = CALIBRATE_OPTION) -> float:
    """The fraction when it is a number strictly between 0 and 1; else ValueError naming ``option``."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 < fraction < 1.0:
        raise ValueError(f"{option} must be a fraction strictly between 0 and 1, got {fraction!r}")
    return float(fraction)


def calibration_options(fraction: float | None, seed: int | None) -> CalibrationOptions | None:
    """The options of ``--calibrate FRACTION [--calibrate-seed N]``; None when not calibrating. Bad values raise
    ValueError naming the option."""
    if fraction is None:
        if seed is not None:
            raise ValueError("--calibrate-seed needs --calibrate FRACTION")
        return None
    if seed is not None and seed < 0:
        raise ValueError(f"--calibrate-seed must be a whole number of at least 0, got {seed}")
    return CalibrationOptions(fraction=check_fraction(fraction), seed=0 if seed is None else seed)


def _strata(queries: Sequence[Query]) -> dict[tuple[Language, bool], list[str]]:
    strata: dict[tuple[Language, bool], list[str]] = {}
    for query in queries:
        strata.setdefault((query.language, query.answerable), []).append(query.query_id)
    return {key: sorted(strata[key]) for key in sorted(strata)}


def split_queries(
    queries: Sequence[Query], fraction: float, seed: int = 0, option: str = CALIBRATE_OPTION
) -> QuerySplit:
    """Split the queries: in each stratum (language, answerable or not), taken in sorted order, a seeded
    permutation's first ``round(fraction * n)`` go to calibration, the rest to evaluation.

    A stratum that would leave either part without a query raises ValueError naming ``option`` and the stratum.
    """
    check_fraction(fraction, option)
    rng = np.random.default_rng(seed)
    calibration: list[str] = []
    for (language, answerable), ids in _strata(queries).items():
        take = math.floor(fraction * len(ids) + 0.5)
        if not 0 < take < len(ids):
            kind = "answerable" if answerable else "no-answer"
            raise ValueError(
                f"{option} {fraction}: the {language} {kind} queries ({len(ids)}) would leave the "
                f"{'calibration' if take == 0 else 'evaluation'} part without one of them; each stratum needs "
                "a query on both sides (choose a fraction nearer 0.5, or label more queries)"
            )
        calibration.extend(ids[i] for i in rng.permutation(len(ids))[:take])
    chosen = set(calibration)
    rest = sorted(q.query_id for q in queries if q.query_id not in chosen)
    return QuerySplit(calibration=tuple(sorted(chosen)), evaluation=tuple(rest))


def part(loaded: LoadedFixture, ids: Sequence[str]) -> LoadedFixture:
    """The fixture with only the queries of ``ids`` (the corpus whole)."""
    keep = set(ids)
    queries = tuple(q for q in loaded.fixture.queries if q.query_id in keep)
    return LoadedFixture(fixture=loaded.fixture.model_copy(update={"queries": queries}), aliases=loaded.aliases)


def _seeded(
    database: KnowledgeDatabase, loaded: LoadedFixture, settings: RetrievalSettings, provider: EmbeddingProvider
) -> KnowledgeService:
    database.add_documents(loaded.fixture.documents)
    database.add_chunks(loaded.fixture.chunks)
    service = KnowledgeService(database, settings, provider)
    service.index_embeddings()
    return service


def _reweighted(contributions: Sequence[Contribution], choice: FusionChoice) -> list[Contribution]:
    lexical, vector = contributions
    return [
        Contribution(lexical.hits, [w * choice.lexical_weight for w in lexical.weights]),
        Contribution(vector.hits, [w * choice.vector_weight for w in vector.weights]),
    ]


def fusion_scores(
    loaded: LoadedFixture,
    provider: EmbeddingProvider,
    settings: RetrievalSettings,
    ties: str = DEFAULT_TIE_POLICY,
) -> dict[str, float]:
    """Mean nDCG@10 of every declared fusion over the fixture's answerable queries (the calibration part)."""
    queries = sorted((q for q in loaded.fixture.queries if q.answerable), key=lambda q: q.query_id)
    choices = {name: fusion_choice(name, settings) for name in FUSION_CHOICES}
    rankings: dict[str, list[tuple[str, ...]]] = {name: [] for name in choices}
    with KnowledgeDatabase.temporary() as database:
        unit = settings.model_copy(update={"lexical_weight": 1.0, "vector_weight": 1.0})
        service = _seeded(database, loaded, unit, provider)
        for query in queries:
            contributions = service.contributions(query.text, query.language)
            for name, choice in choices.items():
                hits = fusion_method(choice.fusion)(_reweighted(contributions, choice), settings.rrf_k)
                pairs = tuple((h.chunk_id, h.score) for h in hits[: settings.top_k])
                rankings[name].append(order_ranking(pairs, ties))
    lengths = {c.chunk_id: len(c.text) for c in loaded.fixture.chunks}
    means = {}
    for name, ranked in rankings.items():
        values = score_queries(queries, ranked, lengths, SUMMATION_OF[ties])
        means[name] = round(math.fsum(v[FUSION_MEASURE] for v in values.values()) / max(len(queries), 1), 6)
    return means


def choose_fusion(
    loaded: LoadedFixture,
    ablations: Sequence[Ablation],
    providers: Mapping[str, EmbeddingProvider],
    settings: RetrievalSettings,
    ties: str = DEFAULT_TIE_POLICY,
) -> FusionRecord | None:
    """The declared fusion with the highest calibration nDCG@10 (the first declared on a tie), chosen on the first
    fusing ablation's candidates; None when no ablation fuses."""
    fusing = [a for a in ablations if a.mode in FUSING_MODES and a.provider is not None]
    if not fusing:
        return None
    system = next((a for a in fusing if a.mode == "hybrid"), fusing[0])
    scores = fusion_scores(loaded, providers[str(system.provider)], settings, ties)
    best = max(scores.values())
    chosen = next(name for name, value in scores.items() if value == best)
    return FusionRecord(
        system=system.ablation_id,
        chosen=chosen,
        settings=fusion_choice(chosen, settings),
        measure=FUSION_MEASURE,
        candidates=scores,
    )


def floor_inputs(
    evaluation: Evaluation, ablation_id: str, signal_name: str, coverage: TermCoverage
) -> tuple[list[float], list[bool], list[float]]:
    """Per query of the evaluation, sorted by ID: the system's confidence, answerability and recall@10 (0 for
    no-answer queries)."""
    measure = signal(signal_name)
    result = evaluation.ablations[ablation_id]
    by_id = {r.query_id: r for r in result.results}
    queries = sorted(evaluation.fixture.queries, key=lambda q: q.query_id)
    confidence = [measure(coverage, q, by_id[q.query_id]) for q in queries]
    recall = [result.per_query[q.query_id]["recall@10"] if q.answerable else 0.0 for q in queries]
    return confidence, [q.answerable for q in queries], recall


def choose_floor_for(
    evaluation: Evaluation, ablation_id: str, max_recall_loss: float, coverage: TermCoverage
) -> tuple[SignalName, AbstentionPoint]:
    """Over every declared signal, the floor of lowest no-answer FPR within the recall budget; on a tie the first
    declared signal (within one signal :func:`~evalkit.measures.abstention.choose_floor` takes the lowest floor)."""
    best: tuple[tuple[float, int], str, AbstentionPoint] | None = None
    for position, name in enumerate(SIGNALS):
        point = choose_floor(abstention_curve(*floor_inputs(evaluation, ablation_id, name, coverage)), max_recall_loss)
        key = (point.no_answer_fpr, position)
        if best is None or key < best[0]:
            best = (key, name, point)
    if best is None:  # pragma: no cover - SIGNALS is not empty
        raise ValueError("no confidence signal declared")
    return cast(SignalName, best[1]), best[2]


def abstains(confidence: float, floor: float | None) -> bool:
    """True when a query with this confidence returns nothing: below the floor, or NaN; never without a floor."""
    return floor is not None and not confidence >= floor


def apply_floors(
    evaluation: Evaluation, floors: Mapping[str, tuple[str, float | None]]
) -> tuple[Evaluation, dict[str, AbstentionPoint]]:
    """The evaluation with each system's floor applied (a query below it returns no chunks, scored again), and
    each floor's outcome on these queries measured against the same system without it."""
    coverage = TermCoverage((c.chunk_id, c.text) for c in evaluation.fixture.chunks)
    replaced: dict[str, tuple[QueryResult, ...]] = {}
    outcomes: dict[str, AbstentionPoint] = {}
    for ablation_id, (signal_name, floor) in sorted(floors.items()):
        confidence, answerable, recall = floor_inputs(evaluation, ablation_id, signal_name, coverage)
        outcomes[ablation_id] = outcome_at(floor, confidence, answerable, recall)
        queries = sorted(q.query_id for q in evaluation.fixture.queries)
        withheld = {q for q, c in zip(queries, confidence, strict=True) if abstains(c, floor)}
        replaced[ablation_id] = tuple(
            replace(r, chunk_ids=(), scores=()) if r.query_id in withheld else r
            for r in evaluation.ablations[ablation_id].results
        )
    return with_results(evaluation, replaced), outcomes


def calibrated_evaluation(
    loaded: LoadedFixture,
    ablations: Sequence[Ablation],
    settings: RetrievalSettings,
    options: CalibrationOptions | None,
    runs: int = 2,
    cache: EmbeddingCache | None = None,
    systems: Mapping[str, Retriever] | None = None,
    ties: str = DEFAULT_TIE_POLICY,
    providers: Mapping[str, EmbeddingProvider] | None = None,
) -> Evaluation:
    """Split, choose the fusion and the floors on the calibration part, and evaluate the evaluation part only with
    them (``runs`` times, the determinism check included); the returned evaluation carries the record.

    Without ``options`` (None), :func:`~evalkit.runs.evaluation.evaluate` over every query with the settings as
    given."""
    if options is None:
        return evaluate(loaded, ablations, settings, runs, providers, cache, systems, ties)
    split = split_queries(loaded.fixture.queries, options.fraction, options.seed)
    calibration, held = part(loaded, split.calibration), part(loaded, split.evaluation)
    made = make_providers([a for a in ablations if a.provider not in (providers or {})], loaded, cache)
    providers = {**made, **(providers or {})}
    prime_providers(providers, calibration.fixture)
    fusion = choose_fusion(calibration, ablations, providers, settings, ties)
    chosen = settings if fusion is None else apply_fusion(fusion.settings, settings)
    floors = _calibration_floors(calibration, ablations, chosen, options, providers, cache, ties)
    evaluated = evaluate(held, ablations, chosen, runs, providers, cache, systems, ties)
    evaluated, outcomes = apply_floors(evaluated, {a: (s, p.floor) for a, (s, p) in floors.items()})
    record = CalibrationRecord(
        fraction=options.fraction,
        seed=options.seed,
        split_sha256=split.sha256,
        calibration_queries=len(split.calibration),
        evaluation_queries=len(split.evaluation),
        max_recall_loss=options.max_recall_loss,
        fusion=fusion,
        floors={
            a: FloorRecord(signal=s, floor=p.floor, calibration=p, evaluation=outcomes[a])
            for a, (s, p) in floors.items()
        },
    )
    definition = sha256_of(
        {"evaluation": evaluated.evaluation_definition_hash, "calibration": record.model_dump(mode="json")}
    )
    return replace(evaluated, calibration=record, evaluation_definition_hash=definition)


def _calibration_floors(
    calibration: LoadedFixture,
    ablations: Sequence[Ablation],
    settings: RetrievalSettings,
    options: CalibrationOptions,
    providers: Mapping[str, EmbeddingProvider],
    cache: EmbeddingCache | None,
    ties: str,
) -> dict[str, tuple[SignalName, AbstentionPoint]]:
    """Each abstaining ablation's signal and floor, chosen on a run of the calibration part."""
    abstaining = [a for a in ablations if a.mode in ABSTAINING_MODES]
    if not abstaining:
        return {}
    evaluated = evaluate(calibration, abstaining, settings, 1, providers, cache, ties=ties)
    coverage = TermCoverage((c.chunk_id, c.text) for c in calibration.fixture.chunks)
    return {
        a.ablation_id: choose_floor_for(evaluated, a.ablation_id, options.max_recall_loss, coverage) for a in abstaining
    }


def _point(point: AbstentionPoint) -> str:
    return f"FPR {point.no_answer_fpr:.3f}, recall@10 {point.recall_at_10:.3f} (loss {point.recall_loss:.3f})"


def format_calibration(record: CalibrationRecord) -> str:
    """The split and every choice, in a few lines (the run prints it beneath the settings)."""
    lines = [
        f"calibration: {record.fraction:g} of each language and answerability stratum chosen on (seed {record.seed}, "
        f"split sha256 {record.split_sha256[:16]}): {record.calibration_queries} calibration, "
        f"{record.evaluation_queries} evaluation queries; every number below is from the evaluation queries"
    ]
    if record.fusion is not None:
        chosen = record.fusion.settings
        scores = ", ".join(f"{name} {value:.4f}" for name, value in record.fusion.candidates.items())
        lines.append(
            f"fusion chosen on {record.fusion.system}: {record.fusion.chosen} ({chosen.fusion}, lexical "
            f"{chosen.lexical_weight:g}, vector {chosen.vector_weight:g}); "
            f"calibration {record.fusion.measure}: {scores}"
        )
    for ablation_id, floor in record.floors.items():
        where = "no floor" if floor.floor is None else f"{floor.signal} >= {floor.floor:.4f}"
        lines.append(
            f"floor of {ablation_id}: {where}; calibration {_point(floor.calibration)}; "
            f"evaluation {_point(floor.evaluation)}"
        )
    return "\n".join(lines)
