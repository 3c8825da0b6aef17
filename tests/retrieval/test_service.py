"""Tests for evalkit.retrieval.service: every mode on the tiny fixture, what the service hands the reranker, thresholds,
cross-language weighting, fusion and settings."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from evalkit.data.fixture import LoadedFixture
from evalkit.data.language import detect_language
from evalkit.data.schema import Matrix
from evalkit.data.settings import RerankerSettings, RetrievalSettings
from evalkit.retrieval import service as service_module
from evalkit.retrieval.database import Hit, KnowledgeDatabase, order_hits
from evalkit.retrieval.embeddings import AliasProvider, TokenHashProvider, fingerprint
from evalkit.retrieval.reranker import idf
from evalkit.retrieval.service import MODES, KnowledgeService, Mode
from evalkit.retrieval.text import query_terms

VECTOR_MODES: tuple[Mode, ...] = ("vector", "hybrid", "hybrid-rerank")
ALL_MODES: tuple[Mode, ...] = ("lexical", *VECTOR_MODES)
# Fusion pinned explicitly where a test computes fused scores, so the arithmetic does not hang on the defaults
# (which test_default_settings pins on its own).
RRF: dict[str, Any] = {"fusion": "rrf", "lexical_weight": 1.0, "vector_weight": 1.0}
MAX_NORMALIZED: dict[str, Any] = {"fusion": "max-normalized", "lexical_weight": 0.3, "vector_weight": 0.7}


def _load(tiny: LoadedFixture) -> KnowledgeDatabase:
    database = KnowledgeDatabase(":memory:")
    database.add_documents(tiny.fixture.documents)
    database.add_chunks(tiny.fixture.chunks)
    return database


@pytest.fixture(scope="module")
def tiny_db(tiny: LoadedFixture) -> Iterator[KnowledgeDatabase]:
    database = _load(tiny)
    yield database
    database.close()


@pytest.fixture
def fresh_db(tiny: LoadedFixture) -> Iterator[KnowledgeDatabase]:
    database = _load(tiny)
    yield database
    database.close()


def _service(database: KnowledgeDatabase, tiny: LoadedFixture, **settings: Any) -> KnowledgeService:
    service = KnowledgeService(database, RetrievalSettings(**settings), AliasProvider(tiny.aliases))
    service.index_embeddings()
    return service


def _ids(hits: Sequence[Hit]) -> list[str]:
    return [hit.chunk_id for hit in hits]


class CountingProvider:
    """A token-hash provider that counts how many texts it embedded."""

    def __init__(self) -> None:
        self._inner = TokenHashProvider(64)
        self.embedded = 0

    @property
    def definition(self) -> dict[str, Any]:
        return dict(self._inner.definition)

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.embedded += len(texts)
        return self._inner.embed(texts)


# ---------------------------------------------------------------------------------------------------------
# Every mode on the tiny fixture
# ---------------------------------------------------------------------------------------------------------


def test_modes_match_the_mode_literal() -> None:
    assert sorted(MODES) == sorted(get_args(Mode)) == sorted(ALL_MODES)


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("top_k", [1, 2, 10])
def test_every_mode_returns_at_most_top_k_ordered_hits(
    tiny_db: KnowledgeDatabase, tiny: LoadedFixture, mode: Mode, top_k: int
) -> None:
    service = _service(tiny_db, tiny, top_k=top_k)
    chunk_ids = {c.chunk_id for c in tiny.fixture.chunks}
    returned = 0
    for query in tiny.fixture.queries:
        hits = service.search(query.text, mode)
        assert len(hits) <= top_k
        assert hits == order_hits(hits)
        assert len(set(_ids(hits))) == len(hits)
        assert set(_ids(hits)) <= chunk_ids
        returned += len(hits)
    assert returned > 0


@pytest.mark.parametrize("mode", ALL_MODES)
def test_top_k_truncates_the_full_ranking(tiny_db: KnowledgeDatabase, tiny: LoadedFixture, mode: Mode) -> None:
    text = "How long do deleted notes stay in the trash?"
    full = _service(tiny_db, tiny).search(text, mode)
    assert len(full) >= 2
    assert _service(tiny_db, tiny, top_k=1).search(text, mode) == full[:1]


def test_lexical_mode_is_bm25_over_query_terms(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    service = _service(tiny_db, tiny)
    for query in tiny.fixture.queries:
        assert service.search(query.text, "lexical") == tiny_db.lexical_search(query_terms(query.text), 30)
    assert _ids(service.search("How long do deleted notes stay in the trash?", "lexical")) == [
        "en-trash-01",
        "en-trash-02",
        "en-sync-02",
    ]


def test_vector_mode_finds_the_other_language(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    service = _service(tiny_db, tiny)
    assert service.search("Can I get a refund for an annual subscription?", "lexical") == []
    assert _ids(service.search("Can I get a refund for an annual subscription?", "vector"))[0] == "zh-billing-01"
    assert _ids(service.search("同步多久运行一次？", "vector")) == ["en-sync-01"]


def test_hybrid_is_rrf_of_both_lists(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    service = _service(tiny_db, tiny, **RRF)
    # No lexical hit: the vector ranks alone decide, 1/(60+1) and 1/(60+2).
    assert service.search("Can I get a refund for an annual subscription?", "hybrid") == [
        Hit("zh-billing-01", 1 / 61),
        Hit("zh-billing-02", 1 / 62),
    ]
    # 同步多久运行一次: the lexical top (zh, '一次') and the vector top (en) tie at 1/61; the ID breaks the tie.
    assert service.search("同步多久运行一次？", "hybrid") == [Hit("en-sync-01", 1 / 61), Hit("zh-export-02", 1 / 61)]


def test_hybrid_rerank_keeps_good_matches_and_answers_no_answer_queries_with_nothing(
    tiny_db: KnowledgeDatabase, tiny: LoadedFixture
) -> None:
    service = _service(tiny_db, tiny)
    for query in tiny.fixture.queries:
        reranked = service.search(query.text, "hybrid-rerank")
        assert set(_ids(reranked)) <= set(_ids(service.search(query.text, "hybrid")))
        if query.answerable:
            best = max(query.judgments, key=lambda j: j.grade).chunk_id
            assert _ids(reranked)[:1] == [best], query.query_id
        else:
            assert reranked == [], query.query_id


def test_hybrid_rerank_without_a_concept_provider(tiny_db: KnowledgeDatabase) -> None:
    service = KnowledgeService(tiny_db, RetrievalSettings(), TokenHashProvider())
    service.index_embeddings()
    hits = service.search("批量导出最多可以包含多少篇笔记？", "hybrid-rerank")
    assert _ids(hits)[:1] == ["zh-export-02"]
    assert hits == order_hits(hits)


def test_search_is_deterministic(tiny: LoadedFixture) -> None:
    runs = []
    for _ in range(2):
        database = _load(tiny)
        service = _service(database, tiny)
        runs.append([service.search(q.text, mode) for q in tiny.fixture.queries for mode in ALL_MODES])
        database.close()
    assert runs[0] == runs[1]


# ---------------------------------------------------------------------------------------------------------
# What the service hands the reranker
# ---------------------------------------------------------------------------------------------------------

TRASH_QUERY = "How long do deleted notes stay in the trash?"  # terms long, delet, note, stay, trash; concept trash


def _rerank_only(tiny_db: KnowledgeDatabase, tiny: LoadedFixture, **weights: float) -> list[Hit]:
    """hybrid-rerank of TRASH_QUERY with both reranker floors open (every hybrid candidate is scored)."""
    reranker = RerankerSettings(**weights, min_similarity=-1.0, min_score=0.0)
    return _service(tiny_db, tiny, reranker=reranker).search(TRASH_QUERY, "hybrid-rerank")


def test_rerank_proximity_ignores_stopwords_in_the_chunk(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    # Proximity only. Query pairs (long, delet), (delet, note), (note, stay), (stay, trash). en-trash-01 reads
    # "deleted notes stay in the trash": without 'in', 'the' three pairs are adjacent, 3/4 (with them, 2/4).
    # The other candidates (en-trash-02, en-sync-02; all English) have no adjacent pair: 0, ordered by ID.
    hits = _rerank_only(tiny_db, tiny, coverage_weight=0.0, semantic_weight=0.0, proximity_weight=1.0)
    assert hits == [Hit("en-trash-01", 0.75), Hit("en-sync-02", 0.0), Hit("en-trash-02", 0.0)]


def test_rerank_coverage_leaves_out_query_terms_the_corpus_lacks(
    tiny_db: KnowledgeDatabase, tiny: LoadedFixture
) -> None:
    # Coverage only; N = 8 chunks. 'long' occurs in no chunk (df 0) and is left out of the ratio, so en-trash-01,
    # which holds every other unit (delet, note, stay, trash, §trash), covers exactly 1 (with 'long' it would be
    # less). The key unit is the rarest seen, 'delet' (df 1); the others lack it and are scaled by 0.8.
    # Denominator: idf(1) for delet and stay, idf(2) for note, trash and §trash.
    assert tiny_db.document_frequencies(query_terms(TRASH_QUERY)) == {
        "long": 0,
        "delet": 1,
        "note": 2,
        "stay": 1,
        "trash": 2,
    }
    hits = _rerank_only(
        tiny_db, tiny, coverage_weight=1.0, semantic_weight=0.0, proximity_weight=0.0, missing_key_factor=0.8
    )
    total = 2 * idf(1, 8) + 3 * idf(2, 8)
    assert _ids(hits) == ["en-trash-01", "en-trash-02", "en-sync-02"]
    assert hits[0].score == 1.0
    # en-trash-02 holds trash and §trash; en-sync-02 holds note.
    assert [h.score for h in hits[1:]] == pytest.approx(
        [0.8 * 2 * idf(2, 8) / total, 0.8 * idf(2, 8) / total], rel=1e-12
    )


# ---------------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------------


def test_unknown_mode_lists_modes(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    with pytest.raises(ValueError, match=r"unknown mode 'dense'; valid: hybrid, hybrid-rerank, lexical, vector"):
        _service(tiny_db, tiny).search("trash", "dense")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", VECTOR_MODES)
def test_vector_modes_need_a_provider(tiny_db: KnowledgeDatabase, mode: Mode) -> None:
    service = KnowledgeService(tiny_db, RetrievalSettings())
    with pytest.raises(ValueError, match="needs an embedding provider"):
        service.search("trash", mode)
    assert _ids(service.search("trash", "lexical")) == ["en-trash-02", "en-trash-01"]  # shorter chunk first


def test_index_embeddings_needs_a_provider(tiny_db: KnowledgeDatabase) -> None:
    with pytest.raises(ValueError, match="needs an embedding provider"):
        KnowledgeService(tiny_db, RetrievalSettings()).index_embeddings()


# ---------------------------------------------------------------------------------------------------------
# Indexing
# ---------------------------------------------------------------------------------------------------------


def test_index_embeddings_is_idempotent(fresh_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    provider = CountingProvider()
    key = fingerprint(provider)
    service = KnowledgeService(fresh_db, RetrievalSettings(), provider)
    assert not fresh_db.has_embeddings(key)
    service.index_embeddings()
    chunk_ids = [c.chunk_id for c in fresh_db.chunks()]
    stored = fresh_db.vectors(key, chunk_ids).tobytes()
    assert provider.embedded == len(chunk_ids) == 8
    service.index_embeddings()
    KnowledgeService(fresh_db, RetrievalSettings(), provider).index_embeddings()  # same fingerprint, same database
    assert provider.embedded == 8
    assert fresh_db.vectors(key, chunk_ids).tobytes() == stored
    assert stored == TokenHashProvider(64).embed([c.text for c in fresh_db.chunks()]).tobytes()


@pytest.mark.parametrize("mode", VECTOR_MODES)
def test_vector_modes_index_on_first_use(fresh_db: KnowledgeDatabase, tiny: LoadedFixture, mode: Mode) -> None:
    # Forgetting index_embeddings must not silently return nothing (or fail in the reranker).
    text = "How long do deleted notes stay in the trash?"
    lazy = KnowledgeService(fresh_db, RetrievalSettings(), AliasProvider(tiny.aliases))
    hits = lazy.search(text, mode)
    assert hits
    assert hits == _service(fresh_db, tiny).search(text, mode)


# ---------------------------------------------------------------------------------------------------------
# Thresholds
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "settings"),
    [
        ("lexical", {"lexical_min_score": 1e6}),
        ("vector", {"vector_min_similarity": 1.0}),
        ("hybrid", {"lexical_min_score": 1e6, "vector_min_similarity": 1.0}),
        ("hybrid-rerank", {"reranker": RerankerSettings(min_score=1.0)}),
        ("hybrid-rerank", {"reranker": RerankerSettings(min_score=0.0, min_similarity=1.0)}),
    ],
)
def test_high_thresholds_return_nothing(
    tiny_db: KnowledgeDatabase, tiny: LoadedFixture, mode: Mode, settings: dict[str, Any]
) -> None:
    strict = _service(tiny_db, tiny, **settings)
    default = _service(tiny_db, tiny)
    for query in tiny.fixture.queries:
        assert strict.search(query.text, mode) == [], query.query_id
    assert any(default.search(q.text, mode) for q in tiny.fixture.queries)


def test_lexical_threshold_is_inclusive(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    text = "How long do deleted notes stay in the trash?"
    hits = _service(tiny_db, tiny).search(text, "lexical")
    assert _service(tiny_db, tiny, lexical_min_score=hits[1].score).search(text, "lexical") == hits[:2]


def test_vector_threshold_is_inclusive(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    text = "How long do deleted notes stay in the trash?"
    hits = _service(tiny_db, tiny, vector_min_similarity=-1.0).search(text, "vector")
    assert len(hits) == 8  # every chunk, down to cosine 0
    assert _service(tiny_db, tiny, vector_min_similarity=hits[0].score).search(text, "vector") == hits[:1]


# ---------------------------------------------------------------------------------------------------------
# Cross-language lexical weight
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("weight", "expected"),
    [
        # '500' matches only the Chinese export chunk; 'notes' two English chunks. Vector hits are switched off.
        (0.0, [Hit("en-trash-01", 1 / 62), Hit("en-sync-02", 1 / 63)]),
        (0.5, [Hit("en-trash-01", 1 / 62), Hit("en-sync-02", 1 / 63), Hit("zh-export-02", 0.5 / 61)]),
        (1.0, [Hit("zh-export-02", 1 / 61), Hit("en-trash-01", 1 / 62), Hit("en-sync-02", 1 / 63)]),
    ],
)
def test_cross_language_lexical_weight(
    tiny_db: KnowledgeDatabase, tiny: LoadedFixture, weight: float, expected: list[Hit]
) -> None:
    # RRF with unit weights, so a hit's fused score is its (multiplied) weight over 60 + rank.
    service = _service(tiny_db, tiny, **RRF, cross_language_lexical_weight=weight, vector_min_similarity=1.0)
    assert _ids(service.search("500 notes", "lexical")) == ["zh-export-02", "en-trash-01", "en-sync-02"]
    assert service.search("500 notes", "vector") == []
    assert service.search("500 notes", "hybrid") == expected


def test_explicit_language_overrides_detection(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    service = _service(tiny_db, tiny, **RRF, vector_min_similarity=1.0)
    # Read as Chinese, the English 'notes' hits are the cross-language ones (weight 1 * 0) and drop out;
    # zh-export-02 keeps weight 1 at lexical rank 1: 1/(60+1). Detected as English, it is the one dropped.
    assert service.search("500 notes", "hybrid", language="zh") == [Hit("zh-export-02", 1 / 61)]
    assert _ids(service.search("500 notes", "hybrid")) == ["en-trash-01", "en-sync-02"]


def test_detect_language() -> None:
    assert detect_language("导出笔记") == "zh"
    assert detect_language("PDF 导出") == "zh"
    assert detect_language("Export notes") == "en"
    assert detect_language("１２３！") == "en"
    assert detect_language("") == "en"


def test_a_query_without_a_language_is_detected_as_an_import_detects_it() -> None:
    """One rule on import and at query time: an English sentence citing a Chinese term is English in both."""
    assert service_module.detect_language is detect_language
    assert detect_language("Open the 回收站 folder") == "en"
    assert detect_language("在 Settings 中打开两步验证") == "zh"


# ---------------------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------------------


def test_settings_reject_unknown_fusion() -> None:
    with pytest.raises(ValidationError, match=r"Input should be 'rrf', 'max-normalized' or 'margin-weighted'"):
        RetrievalSettings(fusion="combsum")
    assert RetrievalSettings(fusion="max-normalized").fusion == "max-normalized"


def test_settings_reject_unknown_fields_and_bad_values() -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        RetrievalSettings(topk=5)  # type: ignore[call-arg]
    for bad in ({"top_k": 0}, {"vector_min_similarity": 1.5}, {"cross_language_lexical_weight": -1.0}):
        with pytest.raises(ValidationError):
            RetrievalSettings(**bad)


def test_settings_are_frozen() -> None:
    settings = RetrievalSettings()
    with pytest.raises(ValidationError):
        settings.top_k = 3  # type: ignore[misc]


def test_max_normalized_fusion_in_the_service(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    service = _service(tiny_db, tiny, **MAX_NORMALIZED)
    text = "Can I get a refund for an annual subscription?"
    assert service.search(text, "lexical") == []
    vector = service.search(text, "vector")
    assert _ids(vector) == ["zh-billing-01", "zh-billing-02"]
    # No lexical hit: the vector list alone, scaled by its best score and weighted 0.7: 0.7 * s / s_best.
    best = vector[0].score
    hits = service.search(text, "hybrid")
    assert hits == [Hit(h.chunk_id, 0.7 * (h.score / best)) for h in vector]
    assert hits[0].score == pytest.approx(0.7, rel=1e-15)


def test_max_normalized_fusion_scales_by_the_best_weighted_hit(tiny_db: KnowledgeDatabase, tiny: LoadedFixture) -> None:
    # '500 notes' is English: zh-export-02 is a cross-language lexical hit with weight 0.3 * 0 = 0, and it has the
    # best BM25 score of the list. It neither counts nor sets the scale: the English hits are divided by
    # en-trash-01's score, not by zh-export-02's (which would shrink them to 0.3 * s / s_zh, about 0.18).
    service = _service(tiny_db, tiny, **MAX_NORMALIZED, vector_min_similarity=1.0)
    lexical = service.search("500 notes", "lexical")
    assert _ids(lexical) == ["zh-export-02", "en-trash-01", "en-sync-02"]
    gated, trash, sync = (h.score for h in lexical)
    assert gated > trash * 1.5
    assert service.search("500 notes", "hybrid") == [
        Hit("en-trash-01", 0.3 * (trash / trash)),
        Hit("en-sync-02", 0.3 * (sync / trash)),
    ]
    # With the cross-language hit weighted (1.0), it is the best weighted hit and sets the scale for all three.
    weighted = _service(tiny_db, tiny, **MAX_NORMALIZED, cross_language_lexical_weight=1.0, vector_min_similarity=1.0)
    assert weighted.search("500 notes", "hybrid") == [
        Hit("zh-export-02", 0.3 * (gated / gated)),
        Hit("en-trash-01", 0.3 * (trash / gated)),
        Hit("en-sync-02", 0.3 * (sync / gated)),
    ]


def test_default_settings() -> None:
    # The calibrated defaults (RetrievalSettings, RerankerSettings and commit 11e9b50); every field is pinned, so a
    # silent change fails.
    assert RetrievalSettings().model_dump() == {
        "top_k": 10,
        "candidate_k": 30,
        "lexical_min_score": 0.0,
        "vector_min_similarity": 0.2,
        "fusion": "max-normalized",
        "rrf_k": 60,
        "lexical_weight": 0.3,
        "vector_weight": 0.7,
        "cross_language_lexical_weight": 0.0,
        "reranker": {
            "coverage_weight": 0.4,
            "semantic_weight": 0.4,
            "proximity_weight": 0.2,
            "missing_key_factor": 0.8,
            "min_similarity": 0.35,
            "min_score": 0.3,
        },
    }


def test_hybrid_rerank_embeds_the_query_once(fresh_db: KnowledgeDatabase) -> None:
    calls: list[list[str]] = []

    class Counting(TokenHashProvider):
        def embed(self, texts: Sequence[str]) -> Matrix:
            calls.append(list(texts))
            return super().embed(texts)

    service = KnowledgeService(fresh_db, RetrievalSettings(), Counting())
    service.index_embeddings()
    calls.clear()
    first = service.search("How long do deleted notes stay in the trash?", "hybrid-rerank", "en")
    assert calls == [["How long do deleted notes stay in the trash?"]]
    again = service.search("How long do deleted notes stay in the trash?", "hybrid-rerank", "en")
    assert again == first
    service.search("同步多久运行一次？", "vector", "zh")
    assert calls[-1] == ["同步多久运行一次？"] and len(calls) == 2


class _AnalyzedOnly(TokenHashProvider):
    """Token hashing that refuses to analyze chunk text itself (queries are one text)."""

    def embed(self, texts: Sequence[str]) -> Matrix:
        if len(texts) > 1:
            raise AssertionError("the corpus was analyzed again")
        return super().embed(texts)


def test_indexing_embeds_the_stored_content_tokens(tiny: LoadedFixture) -> None:
    database = _load(tiny)
    provider = _AnalyzedOnly(64)
    KnowledgeService(database, RetrievalSettings(), provider).index_embeddings()
    ids = sorted(c.chunk_id for c in tiny.fixture.chunks)
    texts = {c.chunk_id: c.text for c in tiny.fixture.chunks}
    expected = TokenHashProvider(64).embed([texts[i] for i in ids])
    assert database.vectors(fingerprint(provider), ids).tobytes() == expected.tobytes()


def test_concurrent_first_searches_embed_the_corpus_once(
    fresh_db: KnowledgeDatabase, tiny: LoadedFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service whose corpus is not embedded yet embeds it on the first vector search; four threads making that
    first search at once must embed it once (two stores of one block were refused by SQLite's UNIQUE constraint)."""
    service = KnowledgeService(fresh_db, RetrievalSettings(), AliasProvider(tiny.aliases))
    stores: list[int] = []
    real = fresh_db.store_embedding_blocks

    def slow_store(*args: Any) -> None:
        stores.append(1)
        time.sleep(0.05)  # the other threads arrive while the first one stores
        real(*args)

    monkeypatch.setattr(fresh_db, "store_embedding_blocks", slow_store)
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda _: _ids(service.search("how long are deleted notes kept", "vector")), range(4)))
    assert stores == [1]
    assert found == [found[0]] * 4 and found[0]
