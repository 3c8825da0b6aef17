"""Vector memory per Ray shard: a token-hash corpus indexed by one process and by three local shard actors.

The corpus is built as in ``benchmarks/scale.py`` (half English, half Chinese). With the default settings
(``vector_index: auto``) one process indexes the token-hash rows; then a :class:`~evalkit.retrieval.shards.ShardedStore`
over three shard actors on a local Ray instance indexes the same rows (read back through the embedding cache). Printed:
the bytes of each vector index (the single process's and each shard's), each shard actor's resident memory before
and after its rows arrived (and its peak), and whether the sharded hits equal the single process's for every
question.

    python benchmarks/ray_memory.py [--chunks N] [--queries N] [--dimensions N] [--shards N] [--seed N]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import ray
from scale import DATA, build_corpus, phase

from evalkit.data.fixture import Chunk, Document
from evalkit.data.settings import RetrievalSettings
from evalkit.retrieval.database import KnowledgeDatabase
from evalkit.retrieval.embedding_cache import CachedProvider, EmbeddingCache
from evalkit.retrieval.embeddings import TokenHashProvider, fingerprint
from evalkit.retrieval.service import KnowledgeService
from evalkit.runs.cluster import ClusterOptions, ray_store

_MIB = 1 << 20


def _status_mib(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of a process, in MiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found


def _nbytes(index: Any) -> int:
    """Bytes held by a vector index's arrays (sparse: both layouts; exact: the matrix)."""
    return int(index.nbytes if hasattr(index, "nbytes") else index.matrix.nbytes)


def _shard_state(actor: Any, provider: str) -> tuple[int, int]:
    """A shard actor's process ID and its vector index's bytes (0 before its rows arrived)."""

    def probe(shard: Any) -> tuple[int, int]:
        held = shard.index._vectors.get(provider)
        return os.getpid(), (_nbytes(held[1]) if held is not None else 0)

    state: tuple[int, int] = ray.get(actor.__ray_call__.remote(probe))
    return state


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000_000, help="chunks in the corpus")
    parser.add_argument("--queries", type=int, default=200, help="questions whose hits are compared")
    parser.add_argument("--dimensions", type=int, default=1024, help="token-hash width")
    parser.add_argument("--shards", type=int, default=3, help="shard actors")
    parser.add_argument("--seed", type=int, default=0, help="seed of the corpus sampler")
    parser.add_argument("--data", default=str(DATA), help="shared data folder (xquad/, cmrc2018-trial/)")
    args = parser.parse_args()
    corpus = build_corpus(args.chunks, args.queries, args.seed, Path(args.data))
    settings = RetrievalSettings()
    provider = CachedProvider(TokenHashProvider(args.dimensions), EmbeddingCache(Path(tempfile.mkdtemp())))
    key = fingerprint(provider)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"machine: {machine}, Ray {ray.__version__}")
    print(f"corpus: {len(corpus.chunks):,} chunks, token-hash {args.dimensions} dimensions, {args.shards} shards\n")
    with KnowledgeDatabase.temporary() as database:
        database.add_documents([Document(doc_id=f"doc-{x}", language=x, title=x) for x in ("en", "zh")])
        database.add_chunks(Chunk(chunk_id=c, doc_id=f"doc-{lang}", text=t) for c, lang, t in corpus.chunks)
        single = KnowledgeService(database, settings, provider)
        with phase() as single_phase:
            single.index_embeddings()
            reference = [single.search(q, "vector") for q in corpus.queries]
        plan = single.vector_plan()
        # The database's own index (or exact matrix): private, read here to count its bytes.
        single_bytes = _nbytes(database._indexes[key][1] if plan.kind != "exact" else database._matrix(key)[1])
        print(
            f"single process: {plan.kind} index, {single_bytes / _MIB:,.0f} MiB of arrays; "
            f"peak RSS {single_phase.peak_mib or 0:,.0f} MiB (phase began at {single_phase.start_mib or 0:,.0f})"
        )
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        try:
            with ray_store(ray, database, ClusterOptions(shards=args.shards, timeout_s=3600)) as store:
                actors = store.shards.actors  # type: ignore[attr-defined]
                before = {shard: _status_mib(_shard_state(actor, key)[0]) for shard, actor in enumerate(actors)}
                sharded = KnowledgeService(store, settings, provider)
                sharded.index_embeddings()
                found = [sharded.search(q, "vector") for q in corpus.queries]
                for shard, actor in enumerate(actors):
                    pid, size = _shard_state(actor, key)
                    after = _status_mib(pid)
                    print(
                        f"shard {shard}: index {size / _MIB:,.0f} MiB of arrays ({size / single_bytes:.2f} of the "
                        f"single process's); RSS {before[shard]['VmRSS']:,.0f} -> {after['VmRSS']:,.0f} MiB, "
                        f"peak {after['VmHWM']:,.0f} MiB"
                    )
        finally:
            ray.shutdown()
    same = sum(a == b for a, b in zip(found, reference, strict=True))
    print(f"sharded hits equal to the single process's: {same} of {len(reference)} questions")


if __name__ == "__main__":
    main()
