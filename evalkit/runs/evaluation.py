"""Run the systems over a fixture, score every query, and check that repeated runs agree.

Each run seeds a fresh temporary :class:`KnowledgeDatabase` with the fixture's stable IDs, embeds the corpus with
each provider the built-in ablations need, and asks every system (the :class:`KnowledgeService` in each ablation's
mode, the bm25s baseline, a user's retriever, a run file) every query. Each system's results are scored by the
scoring core (:mod:`evalkit.measures.core`) into the types of :mod:`evalkit.measures.results`. The runs'
deterministic projections (rankings with scores, per-query metrics, failures; not latency) must be identical, or
:class:`DeterminismError` is raised.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field, replace
from typing import Any, cast

from evalkit.common.hashing import sha256_of
from evalkit.data.fixture import Fixture, LoadedFixture
from evalkit.data.settings import RetrievalSettings, VectorIndexRecord
from evalkit.measures.core import score_queries
from evalkit.measures.metrics import METRICS_VERSION, LatencySummary, aggregate, latency_summary
from evalkit.measures.results import CONTEXT_K, FAILURE_CUTOFF, Failure, QueryResult, query_failures
from evalkit.measures.statistics import DEFAULT_STATISTICS
from evalkit.measures.ties import DEFAULT_TIE_POLICY, SUMMATION_OF, order_ranking, tie_policy
from evalkit.reporting.calibration_record import CalibrationRecord
from evalkit.retrieval.adapters import HitsRetriever, KnowledgeServiceRetriever
from evalkit.retrieval.bm25 import Bm25sBaseline
from evalkit.retrieval.database import KnowledgeDatabase, KnowledgeStore
from evalkit.retrieval.embedding_cache import CachedProvider, EmbeddingCache
from evalkit.retrieval.embeddings import ConceptProvider, EmbeddingProvider
from evalkit.retrieval.latency import pinned_blas
from evalkit.retrieval.retriever import Provenance, Retriever, SearchRequest, index_chunks, provenance_of, search_all
from evalkit.retrieval.service import KnowledgeService, Mode
from evalkit.retrieval.text import ANALYZER_VERSION
from evalkit.retrieval.vector_index import MIN_RECALL, IndexPlan, planned_index
from evalkit.runs.ablations import BASELINE_MODE, PROVIDERS, Ablation

StoreFactory = Callable[[KnowledgeDatabase], AbstractContextManager[KnowledgeStore]]
"""Makes the store a run searches from its seeded database, and releases it after the run."""


class DeterminismError(RuntimeError):
    """Two runs of the same evaluation disagreed on rankings, metrics or failures."""


@dataclass(frozen=True)
class AblationResult:
    """Per-query results, per-query metric values and aggregates of one system (a built-in ablation or an external
    system; :class:`~evalkit.measures.results.ScoredSystem` is what the report reads of it)."""

    ablation: Ablation
    results: tuple[QueryResult, ...]
    per_query: Mapping[str, Mapping[str, float]]
    aggregates: Mapping[str, Mapping[str, float]]
    latency: LatencySummary
    latency_samples_ms: tuple[float, ...]
    failures: tuple[Failure, ...]


@dataclass(frozen=True)
class Evaluation:
    """The outcome of a suite: every system's results plus the hashes that identify what was evaluated
    (:class:`~evalkit.measures.results.ScoredEvaluation` is what the report reads of it)."""

    fixture: Fixture
    settings: RetrievalSettings
    ablations: Mapping[str, AblationResult]
    runs: int
    corpus_sha256: str
    evaluation_definition_hash: str
    provider_definitions_hash: str
    projection_sha256: str
    tie_policy: str = DEFAULT_TIE_POLICY
    systems: Mapping[str, Provenance] = field(default_factory=dict)
    calibration: CalibrationRecord | None = None
    """What was chosen on the calibration part (None: not calibrated; every query is then evaluated)."""
    vector_indexes: Mapping[str, VectorIndexRecord] = field(default_factory=dict)
    """Provider ID -> the vector index its searches used and its measured recall@10 (empty: no provider ran)."""


def corpus_sha256(fixture: Fixture) -> str:
    """Hash of the documents and chunks (IDs, languages, titles, text), independent of record order."""
    documents = sorted((d.doc_id, d.language, d.title) for d in fixture.documents)
    chunks = sorted((c.chunk_id, c.doc_id, c.text) for c in fixture.chunks)
    return sha256_of({"documents": documents, "chunks": chunks})


def provider_definitions(providers: Mapping[str, EmbeddingProvider]) -> dict[str, Any]:
    """Definitions of the providers in use, keyed by provider ID."""
    return {pid: dict(provider.definition) for pid, provider in sorted(providers.items())}


def evaluation_definition_hash(
    fixture: Fixture,
    settings: RetrievalSettings,
    ablations: Sequence[Ablation],
    providers: Mapping[str, EmbeddingProvider],
    ties: str = DEFAULT_TIE_POLICY,
    systems: Mapping[str, Provenance] | None = None,
    vector_indexes: Mapping[str, str] | None = None,
) -> str:
    """Hash of everything that defines the evaluated contract (disclosing none of it).

    ``vector_indexes`` (provider ID -> the index ``auto`` or the setting chose) is hashed when any is not exact
    search, so an evaluation of exact search keeps the hash it had before vector indexes existed.
    """
    indexes = dict(sorted((vector_indexes or {}).items()))
    return sha256_of(
        {
            **({"vector_indexes": indexes} if set(indexes.values()) - {"exact"} else {}),
            "ties": ties,
            "systems": {a: p.definition() for a, p in sorted((systems or {}).items())},
            "fixture_id": fixture.fixture_id,
            "fixture_version": fixture.fixture_version,
            "corpus_sha256": corpus_sha256(fixture),
            "queries": sorted((q.model_dump(mode="json") for q in fixture.queries), key=lambda q: q["query_id"]),
            "settings": settings.model_dump(mode="json"),
            "ablations": [a.model_dump(mode="json") for a in ablations],
            "providers": provider_definitions(providers),
            "metrics_version": METRICS_VERSION,
            "analyzer_version": ANALYZER_VERSION,
            "context_k": CONTEXT_K,
            "failure_cutoff": FAILURE_CUTOFF,
            "statistics": DEFAULT_STATISTICS.model_dump(mode="json"),
        }
    )


def make_providers(
    ablations: Sequence[Ablation], loaded: LoadedFixture, cache: EmbeddingCache | None = None
) -> dict[str, EmbeddingProvider]:
    """One provider instance per provider ID the ablations use, embedding through ``cache`` when one is given."""
    needed = sorted({a.provider for a in ablations if a.provider is not None})
    return {pid: with_cache(PROVIDERS[pid](loaded.aliases), cache) for pid in needed}


def with_cache(provider: EmbeddingProvider, cache: EmbeddingCache | None) -> EmbeddingProvider:
    """The provider wrapped in the on-disk cache; concept-naming providers (in-memory, cheap) stay as they are."""
    if cache is None or isinstance(provider, (CachedProvider, ConceptProvider)):
        return provider
    return CachedProvider(provider, cache)


def prime_providers(providers: Mapping[str, EmbeddingProvider], fixture: Fixture) -> None:
    """Embed the corpus and the queries in one batch each through every cached provider.

    Each text is then embedded once per run however many ablations use the provider, and the cache holds two
    entries per fixture and provider instead of one per query.
    """
    for provider in providers.values():
        if isinstance(provider, CachedProvider):
            provider.prime(sorted(c.text for c in fixture.chunks))
            provider.prime(sorted(q.text for q in fixture.queries))


def run_once(
    fixture: Fixture,
    ablations: Sequence[Ablation],
    providers: Mapping[str, EmbeddingProvider],
    settings: RetrievalSettings,
    systems: Mapping[str, Retriever] | None = None,
    stores: StoreFactory | None = None,
    indexes: dict[str, VectorIndexRecord] | None = None,
) -> dict[str, tuple[QueryResult, ...]]:
    """Seed a fresh database and run every query through every system once (external ones through ``systems``).

    ``stores`` turns the seeded database into the store the services search (shards, say; see ``evalkit.runs.cluster``).
    When ``indexes`` is given, it receives each provider's vector index record, with the recall@10 of an
    approximate index measured against exact search on a seeded sample of the queries.
    """
    requests = [
        SearchRequest(q.query_id, q.text, q.language, settings.top_k)
        for q in sorted(fixture.queries, key=lambda q: q.query_id)
    ]
    with KnowledgeDatabase.temporary() as database, ExitStack() as stack:
        database.add_documents(fixture.documents)
        database.add_chunks(fixture.chunks)
        store: KnowledgeStore = database if stores is None else stack.enter_context(stores(database))
        services: dict[str | None, KnowledgeService] = {None: KnowledgeService(store, settings)}
        for pid, provider in providers.items():
            services[pid] = KnowledgeService(store, settings, provider)
            services[pid].index_embeddings()
        outcome: dict[str, tuple[QueryResult, ...]] = {}
        for ablation in ablations:
            if ablation.external:
                retriever = (systems or {})[ablation.ablation_id]
            else:
                retriever = _retriever(ablation, services[ablation.provider], fixture, settings)
                _warm_up(retriever, requests)
            with pinned_blas():
                outcomes = search_all(retriever, requests, f"queries ({ablation.ablation_id})")
            outcome[ablation.ablation_id] = tuple(
                QueryResult(o.query_id, tuple(c for c, _ in o.hits), tuple(s for _, s in o.hits), o.latency_ms, o.error)
                for o in outcomes
            )
        if indexes is not None:
            texts = [r.text for r in requests]
            indexes.update({pid: services[pid].vector_index_record(texts) for pid in providers})
    return outcome


def plan_vector_indexes(
    fixture: Fixture, settings: RetrievalSettings, providers: Mapping[str, EmbeddingProvider]
) -> dict[str, IndexPlan]:
    """Each provider's vector index, checked before anything is indexed: a setting the provider cannot serve or a
    corpus over ``vector_memory_mib`` is refused here (ValueError naming the setting)."""
    texts = [c.text for c in sorted(fixture.chunks, key=lambda c: c.chunk_id)]
    return {pid: planned_index(settings, texts, provider) for pid, provider in sorted(providers.items())}


def index_notes(plans: Mapping[str, IndexPlan], records: Mapping[str, VectorIndexRecord]) -> tuple[str, ...]:
    """Lines to print about the vector indexes: an approximate index's recall, and why ``auto`` fell back."""
    notes = [plan.note for plan in plans.values() if plan.note]
    for pid, record in sorted(records.items()):
        if record.recall_at_10 is not None:
            built = "deterministic" if record.deterministic else "not deterministic (build_threads > 1)"
            low = (
                "; below 0.99: raise hnsw.expansion_search or choose vector_index exact"
                if record.recall_at_10 < MIN_RECALL
                else ""
            )
            notes.append(
                f"vector index of {pid}: {record.index} over {record.chunks:,} chunks, recall@10 "
                f"{record.recall_at_10:.4f} against exact search on {record.sample_queries} sampled queries; "
                f"{built}{low}"
            )
    return tuple(notes)


def _warm_up(retriever: Retriever, requests: Sequence[SearchRequest]) -> None:
    """One untimed query, so that one-off costs (lazily built indexes, dictionaries) are not the first latency.

    Only built-in ablations warm up: an external system's extra request could have effects evalkit cannot see.
    """
    if requests:
        first = requests[0]
        with pinned_blas():
            retriever.search(first.text, first.language, first.k)


def _retriever(
    ablation: Ablation, service: KnowledgeService, fixture: Fixture, settings: RetrievalSettings
) -> Retriever:
    """A built-in ablation as a :class:`Retriever`: the knowledge service in its mode, or the bm25s baseline."""
    if ablation.mode == BASELINE_MODE:
        baseline = Bm25sBaseline([(c.chunk_id, c.text) for c in fixture.chunks], top_k=settings.top_k)
        return HitsRetriever(lambda text, language: baseline.search(text))
    return KnowledgeServiceRetriever(service, cast(Mode, ablation.mode))


def _score_system(
    fixture: Fixture, system: Ablation, run: tuple[QueryResult, ...], ties: str = DEFAULT_TIE_POLICY
) -> AblationResult:
    """One system's results scored: per-query values, aggregates, failures and the latency measured."""
    queries = {q.query_id: q for q in fixture.queries}
    chunk_lengths = {c.chunk_id: len(c.text) for c in fixture.chunks}
    # Chunks the fixture does not know (from an external system) are kept: they have no length and no span.
    for result in run:
        chunk_lengths.update({c: 0 for c in result.chunk_ids if c not in chunk_lengths})
    ranked = {r.query_id: order_ranking(tuple(zip(r.chunk_ids, r.scores, strict=True)), ties) for r in run}
    per_query = score_queries([queries[q] for q in ranked], list(ranked.values()), chunk_lengths, SUMMATION_OF[ties])
    failures = [f for q, ranking in ranked.items() for f in query_failures(queries[q], ranking)]
    samples = _latency_samples(system, run)
    return AblationResult(
        ablation=system,
        results=run,
        per_query=per_query,
        aggregates=aggregate(sorted(queries.values(), key=lambda q: q.query_id), per_query),
        latency=_latency(samples),
        latency_samples_ms=samples,
        failures=tuple(failures),
    )


def with_results(evaluation: Evaluation, replaced: Mapping[str, tuple[QueryResult, ...]]) -> Evaluation:
    """The evaluation with some systems' results replaced (an abstention floor applied, say), those systems
    scored again and the projection hashed again; latency stays as measured."""
    ablations = dict(evaluation.ablations)
    for ablation_id, run in replaced.items():
        before = ablations[ablation_id]
        scored = _score_system(evaluation.fixture, before.ablation, run, evaluation.tie_policy)
        ablations[ablation_id] = replace(scored, latency=before.latency, latency_samples_ms=before.latency_samples_ms)
    return replace(evaluation, ablations=ablations, projection_sha256=sha256_of(projection(ablations)))


def projection(results: Mapping[str, AblationResult]) -> dict[str, Any]:
    """The deterministic part of an evaluation: rankings with scores, per-query metrics and failures."""
    return {
        ablation_id: {
            "rankings": [[r.query_id, list(r.chunk_ids), list(r.scores)] for r in result.results],
            "per_query": {q: dict(sorted(v.items())) for q, v in sorted(result.per_query.items())},
            "failures": [f.describe() for f in result.failures],
        }
        for ablation_id, result in sorted(results.items())
    }


def _latency_samples(system: Ablation, run: Sequence[QueryResult]) -> tuple[float, ...]:
    """Measured latencies; a precomputed run measured none."""
    return () if system.mode == "run" else tuple(r.latency_ms for r in run)


def _latency(samples: Sequence[float]) -> LatencySummary:
    """The latency summary; count 0 (all zeros) when nothing was measured (a precomputed run)."""
    if not samples:
        return LatencySummary(count=0, min_ms=0.0, median_ms=0.0, p95_ms=0.0, max_ms=0.0, mean_ms=0.0)
    return latency_summary(samples)


def _check_systems(ablations: Sequence[Ablation], systems: Mapping[str, Retriever]) -> None:
    ids = [a.ablation_id for a in ablations]
    if len(set(ids)) != len(ids):
        raise ValueError(f"ablation IDs repeated in {', '.join(ids)}")
    external = {a.ablation_id for a in ablations if a.external}
    if external != set(systems):
        missing, unused = sorted(external - set(systems)), sorted(set(systems) - external)
        raise ValueError(f"external ablations without a system: {missing}; systems without an ablation: {unused}")


def evaluate(
    loaded: LoadedFixture,
    ablations: Sequence[Ablation],
    settings: RetrievalSettings | None = None,
    runs: int = 2,
    providers: Mapping[str, EmbeddingProvider] | None = None,
    cache: EmbeddingCache | None = None,
    systems: Mapping[str, Retriever] | None = None,
    ties: str = DEFAULT_TIE_POLICY,
    stores: StoreFactory | None = None,
) -> Evaluation:
    """Run the suite ``runs`` times, require identical projections, and score the first run.

    ``providers`` overrides the default provider instances by provider ID (a cached real model, say); the
    ablations' other providers are made as usual, embedding through ``cache`` when one is given (concept-naming
    providers excepted). Cached providers embed the corpus and the queries once, before the first run. ``systems``
    maps the ID of each external ablation (mode ``retriever`` or ``run``) to its :class:`Retriever`, indexed once
    with the fixture's chunks. ``ties`` names the tie policy (``evalkit.measures.ties``) that orders every ranking
    before it is scored. ``stores`` makes each run's store from its seeded database (:func:`run_once`); the
    report does not depend on it.
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    tie_policy(ties)
    systems = dict(systems or {})
    _check_systems(ablations, systems)
    settings = settings or RetrievalSettings()
    fixture = loaded.fixture
    made = make_providers([a for a in ablations if a.provider not in (providers or {})], loaded, cache)
    needed = {a.provider for a in ablations if a.provider is not None}
    providers = {**made, **{pid: p for pid, p in (providers or {}).items() if pid in needed}}
    plans = plan_vector_indexes(fixture, settings, providers)
    prime_providers(providers, fixture)
    for retriever in systems.values():
        index_chunks(retriever, sorted(fixture.chunks, key=lambda c: c.chunk_id))
    indexes: dict[str, VectorIndexRecord] = {}
    outcomes = [
        run_once(fixture, ablations, providers, settings, systems, stores, indexes if n == 0 else None)
        for n in range(runs)
    ]
    for note in index_notes(plans, indexes):
        print(note, file=sys.stderr)
    scored_runs: list[dict[str, AblationResult]] = [
        {a.ablation_id: _score_system(fixture, a, outcome[a.ablation_id], ties) for a in ablations}
        for outcome in outcomes
    ]
    hashes = [sha256_of(projection(scored)) for scored in scored_runs]
    if len(set(hashes)) > 1:
        raise DeterminismError(_describe_mismatch(scored_runs))
    results: dict[str, AblationResult] = {}
    for ablation in ablations:
        samples = tuple(s for outcome in outcomes for s in _latency_samples(ablation, outcome[ablation.ablation_id]))
        results[ablation.ablation_id] = replace(
            scored_runs[0][ablation.ablation_id], latency=_latency(samples), latency_samples_ms=samples
        )
    provenance = {a: provenance_of(r) for a, r in sorted(systems.items())}
    return Evaluation(
        fixture=fixture,
        settings=settings,
        ablations=results,
        runs=runs,
        corpus_sha256=corpus_sha256(fixture),
        evaluation_definition_hash=evaluation_definition_hash(
            fixture, settings, ablations, providers, ties, provenance, {p: plan.kind for p, plan in plans.items()}
        ),
        provider_definitions_hash=sha256_of(provider_definitions(providers)),
        projection_sha256=hashes[0],
        tie_policy=ties,
        systems=provenance,
        vector_indexes=indexes,
    )


def _describe_mismatch(scored_runs: Sequence[Mapping[str, AblationResult]]) -> str:
    reference = projection(scored_runs[0])
    for run_index, scored in enumerate(scored_runs[1:], 2):
        other = projection(scored)
        for ablation_id in sorted(reference):
            for part in ("rankings", "per_query", "failures"):
                if reference[ablation_id][part] != other[ablation_id][part]:
                    queries = _differing_queries(scored_runs[0][ablation_id], scored[ablation_id])
                    named = f"; queries that differed: {', '.join(queries)}" if queries else ""
                    return f"run {run_index} differs from run 1 in ablation {ablation_id!r} ({part}){named}"
    return "runs differ"


def _differing_queries(first: AblationResult, other: AblationResult, limit: int = 20) -> list[str]:
    """IDs of the queries whose ranking (IDs or scores) differed between two runs, the first ``limit`` of them."""
    before = {r.query_id: (r.chunk_ids, r.scores) for r in first.results}
    after = {r.query_id: (r.chunk_ids, r.scores) for r in other.results}
    differing = sorted(q for q in before.keys() | after.keys() if before.get(q) != after.get(q))
    return differing[:limit] + ([f"... {len(differing) - limit} more"] if len(differing) > limit else [])
