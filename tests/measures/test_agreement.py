"""Agreement of two reviewers: alpha (ordinal, domain 0-3) and quadratic kappa equal their peer libraries, tiny cases
are exact, degenerate cases give finite values with reasons, spans are compared by character in Chinese and by word in
English, and the disagreements are exactly the pairs a merge needs adjudicated."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from evalkit.data.fixture import Fixture, LoadedFixture
from evalkit.data.label_merge import span_exact_f1, span_overlap_f1, span_tokens
from evalkit.data.labels import LabelDecision
from evalkit.data.schema import model_json
from evalkit.measures.agreement import (
    Agreement,
    Disagreement,
    Statistic,
    agreement,
    cohen_kappa_quadratic,
    disagreements,
    krippendorff_alpha_ordinal,
    reading,
)

KEYS = {
    "pairs",
    "raw_agreement",
    "krippendorff_alpha_ordinal",
    "cohen_kappa_quadratic",
    "span_f1_exact",
    "span_f1_overlap",
    "confusion",
    "disagreements",
}


@pytest.fixture
def fixture(tiny: LoadedFixture) -> Fixture:
    return tiny.fixture


def _d(
    query: str, chunk: str | None, grade: int, spans: tuple[tuple[int, int], ...] = (), who: str = "ana"
) -> LabelDecision:
    return LabelDecision(query_id=query, chunk_id=chunk, grade=grade, spans=spans, reviewer=who)


def _whole(fixture: Fixture, chunk_id: str) -> tuple[tuple[int, int], ...]:
    return ((0, len(next(c.text for c in fixture.chunks if c.chunk_id == chunk_id))),)


def _random_labels(fixture: Fixture, seed: int, agree: float) -> tuple[list[LabelDecision], list[LabelDecision]]:
    """Both reviewers grade every (query, chunk) pair of the fixture; B copies A's grade with probability `agree`."""
    rng = np.random.default_rng(seed)
    pairs = [(q.query_id, c.chunk_id) for q in fixture.queries for c in fixture.chunks]
    a = rng.integers(0, 4, len(pairs))
    b = np.where(rng.random(len(pairs)) < agree, a, rng.integers(0, 4, len(pairs)))

    def side(grades: np.ndarray, who: str) -> list[LabelDecision]:
        return [_d(q, c, int(g), _whole(fixture, c) if g else (), who) for (q, c), g in zip(pairs, grades, strict=True)]

    return side(a, "ana"), side(b, "ben")


# --- the coefficients against their peers ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("n", [2, 3, 10, 200])
def test_alpha_and_kappa_equal_the_peer_libraries(seed: int, n: int) -> None:
    krippendorff = pytest.importorskip("krippendorff")
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < 0.6, a, rng.integers(0, 4, n))
    if np.all(a == b) and np.all(a == a[0]):
        b[0] = (a[0] + 1) % 4  # the peers give NaN for one grade only (tested below)
    alpha = krippendorff.alpha(
        reliability_data=np.vstack([a, b]), level_of_measurement="ordinal", value_domain=[0, 1, 2, 3]
    )
    kappa = metrics.cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2, 3])
    ours_alpha, ours_kappa = krippendorff_alpha_ordinal(a, b).value, cohen_kappa_quadratic(a, b).value
    assert ours_alpha is not None and ours_kappa is not None
    assert abs(ours_alpha - alpha) <= 1e-12
    assert abs(ours_kappa - kappa) <= 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_agreement_of_label_files_equals_the_peers(fixture: Fixture, seed: int) -> None:
    krippendorff = pytest.importorskip("krippendorff")
    metrics = pytest.importorskip("sklearn.metrics")
    a, b = _random_labels(fixture, seed, 0.7)
    result = agreement(a, b, fixture)
    x, y = [d.grade for d in a], [d.grade for d in b]
    alpha = krippendorff.alpha(reliability_data=[x, y], level_of_measurement="ordinal", value_domain=[0, 1, 2, 3])
    assert result.pairs == 64
    assert abs((result.krippendorff_alpha_ordinal.value or 0.0) - alpha) <= 1e-12
    kappa = metrics.cohen_kappa_score(x, y, weights="quadratic", labels=[0, 1, 2, 3])
    assert abs((result.cohen_kappa_quadratic.value or 0.0) - kappa) <= 1e-12
    assert result.confusion == tuple(
        tuple(int(v) for v in row) for row in metrics.confusion_matrix(x, y, labels=[0, 1, 2, 3])
    )
    assert result.raw_agreement.value == pytest.approx(np.mean(np.array(x) == np.array(y)), abs=1e-15)
    # per language: the queries' languages split the pairs
    assert result.by_language["en"].pairs + result.by_language["zh"].pairs == 64
    en = [i for i, d in enumerate(a) if d.query_id.startswith("q-en")]
    alpha_en = krippendorff.alpha(
        reliability_data=[[x[i] for i in en], [y[i] for i in en]],
        level_of_measurement="ordinal",
        value_domain=[0, 1, 2, 3],
    )
    assert abs((result.by_language["en"].krippendorff_alpha_ordinal.value or 0.0) - alpha_en) <= 1e-12


def test_alpha_differs_from_the_interval_default() -> None:
    """The value domain and level are stated: the krippendorff package's interval default would give another value."""
    krippendorff = pytest.importorskip("krippendorff")
    a, b = [0, 1, 2, 3, 3, 0], [0, 2, 2, 3, 1, 0]
    interval = krippendorff.alpha(reliability_data=[a, b])
    assert abs((krippendorff_alpha_ordinal(a, b).value or 0.0) - interval) > 1e-3


# --- tiny cases by hand --------------------------------------------------------------------------------------------


def test_tiny_case_by_hand() -> None:
    # coincidences o00=2, o12=o21=1, o22=2; n = (2, 1, 3, 0); ordinal d12 = (1 + 3 - 2)^2 = 4, d01 = 1.5^2, d02 = 3.5^2
    # alpha = 1 - (6 - 1) * 8 / (2 * (2*1*2.25 + 1*3*4 + 2*3*12.25)) = 1 - 40/180 = 7/9
    alpha = krippendorff_alpha_ordinal([0, 1, 2], [0, 2, 2])
    assert alpha.value == pytest.approx(7 / 9, abs=1e-15) and alpha.reason is None
    # kappa: sum w O = 1, sum w E = (8 + 3 + 4) / 3 = 5, so 1 - 1/5
    assert cohen_kappa_quadratic([0, 1, 2], [0, 2, 2]).value == pytest.approx(0.8, abs=1e-15)


def test_kappa_weighs_far_disagreements_more() -> None:
    near = cohen_kappa_quadratic([0, 1, 2, 3], [0, 1, 3, 3]).value
    far = cohen_kappa_quadratic([0, 1, 2, 3], [0, 1, 0, 3]).value
    assert near is not None and far is not None and near > far


# --- degenerate cases ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("measure", [krippendorff_alpha_ordinal, cohen_kappa_quadratic])
def test_degenerate_cases_give_finite_values_with_reasons(measure: object) -> None:
    assert callable(measure)
    none = measure([], [])
    assert none.value is None and none.reason is not None and "no pairs" in none.reason
    one_grade = measure([2, 2, 2], [2, 2, 2])
    assert one_grade.value == 1.0 and "one grade only" in one_grade.reason
    full = measure([0, 1, 3], [0, 1, 3])
    assert full.value == 1.0 and "full agreement" in full.reason
    single = measure([1], [3])
    assert single.value == 0.0 and "a single pair" in single.reason
    single_same = measure([1], [1])
    assert single_same.value == 1.0 and "one grade only" in single_same.reason and "a single pair" in single_same.reason
    ordinary = measure([0, 1, 2, 3], [0, 1, 3, 3])
    assert ordinary.reason is None
    for statistic in (one_grade, full, single, single_same, ordinary):
        assert statistic.value is not None and math.isfinite(statistic.value)


def test_one_grade_each_but_different_is_an_ordinary_value() -> None:
    krippendorff = pytest.importorskip("krippendorff")
    assert cohen_kappa_quadratic([0, 0], [1, 1]) == Statistic(value=0.0)
    peer = krippendorff.alpha(
        reliability_data=[[0, 0], [1, 1]], level_of_measurement="ordinal", value_domain=[0, 1, 2, 3]
    )
    assert krippendorff_alpha_ordinal([0, 0], [1, 1]).value == pytest.approx(peer, abs=1e-12)
    assert peer == pytest.approx(-0.5)


def test_grades_outside_the_domain_or_not_integers_are_refused() -> None:
    with pytest.raises(ValueError, match="0-3"):
        krippendorff_alpha_ordinal([0, 4], [0, 1])
    with pytest.raises(ValueError, match="integers"):
        cohen_kappa_quadratic([0.5, 1.0], [0, 1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="differ in number"):
        cohen_kappa_quadratic([0, 1], [0])


def test_no_common_pairs_gives_nulls_with_reasons_everywhere(fixture: Fixture) -> None:
    result = agreement([_d("q-en-001", "en-trash-01", 0)], [_d("q-en-002", "en-sync-02", 0, who="ben")], fixture)
    assert result.pairs == 0
    for row in (result, result.by_language["en"], result.by_language["zh"]):
        for statistic in (row.raw_agreement, row.krippendorff_alpha_ordinal, row.cohen_kappa_quadratic):
            assert statistic.value is None and statistic.reason
        assert row.span_f1_exact.value is None and "no pair both reviewers judged relevant" in (
            row.span_f1_exact.reason or ""
        )
    assert "NaN" not in model_json(result).decode()


def test_reading_of_alpha() -> None:
    assert reading(0.8) == "good (>= 0.8)"
    assert reading(0.79) == "fair, tentative (0.667-0.8)"
    assert reading(0.667) == "fair, tentative (0.667-0.8)"
    assert reading(0.66) == "not reliable (< 0.667)"
    assert reading(None) == "nothing to read"


def test_a_degenerate_one_reads_as_what_it_is(fixture: Fixture) -> None:
    """Every pair graded 0 by both: alpha 1.0 records agreement, not reliability, and is not read as good; one pair
    alone says nothing; full agreement over varied grades is a real 1.0."""
    zeros = [("q-en-001", "en-trash-01"), ("q-en-001", "en-trash-02"), ("q-zh-001", "zh-export-02")]
    same = agreement([_d(q, c, 0) for q, c in zeros], [_d(q, c, 0, who="ben") for q, c in zeros], fixture)
    alpha = same.krippendorff_alpha_ordinal
    assert alpha.value == 1.0 and reading(alpha.value, alpha.reason) == "no variation: agreement, not reliability"
    one = agreement(
        [_d("q-en-001", "en-trash-01", 2, ((14, 43),))], [_d("q-en-001", "en-trash-01", 3, ((14, 43),), "ben")], fixture
    )
    alpha = one.krippendorff_alpha_ordinal
    assert reading(alpha.value, alpha.reason) == "nothing to read"
    varied = [_d(q, c, g, ((0, 4),) if g else ()) for (q, c), g in zip(zeros, (0, 2, 3), strict=True)]
    full = agreement(varied, [d.model_copy(update={"reviewer": "ben"}) for d in varied], fixture)
    alpha = full.krippendorff_alpha_ordinal
    assert alpha.value == 1.0 and reading(alpha.value, alpha.reason) == "good (>= 0.8)"


def test_a_one_language_fixture_has_one_language_slice(fixture: Fixture) -> None:
    """Slices are the languages of the fixture's queries: a Chinese-only fixture has no en slice to report empty."""
    chinese = fixture.model_copy(update={"queries": tuple(q for q in fixture.queries if q.language == "zh")})
    decided = [_d("q-zh-001", "zh-export-02", 3, ((0, 18),))]
    result = agreement(decided, [d.model_copy(update={"reviewer": "ben"}) for d in decided], chinese)
    assert list(result.by_language) == ["zh"] and result.by_language["zh"].pairs == 1
    assert list(agreement(decided, [decided[0].model_copy(update={"reviewer": "ben"})], fixture).by_language) == [
        "en",
        "zh",
    ]


# --- spans -------------------------------------------------------------------------------------------------------


def test_tokens_are_chinese_characters_and_english_words() -> None:
    assert span_tokens("导出 PDF 文件。") == ((0, 1), (1, 2), (3, 6), (7, 8), (8, 9))
    assert span_tokens("30 days, it's") == ((0, 2), (3, 7), (9, 11), (12, 13))
    assert span_tokens("。，!") == ()


def test_chinese_overlap_is_counted_by_character(fixture: Fixture) -> None:
    text = next(c.text for c in fixture.chunks if c.chunk_id == "zh-export-02")  # 批量导出一次最多包含 500 篇笔记，...
    assert text[0:4] == "批量导出" and text[2:6] == "导出一次"
    assert span_overlap_f1(text, [(0, 4)], [(2, 6)]) == 0.5  # 2 shared characters of 4 and 4
    assert span_overlap_f1(text, [(0, 4)], [(0, 4)]) == 1.0
    assert span_overlap_f1(text, [(0, 4)], [(4, 8)]) == 0.0


def test_english_overlap_is_counted_by_word(fixture: Fixture) -> None:
    text = next(c.text for c in fixture.chunks if c.chunk_id == "en-trash-01")
    assert text[14:43] == "stay in the trash for 30 days" and text[36:43] == "30 days"
    assert span_overlap_f1(text, [(14, 43)], [(36, 43)]) == pytest.approx(2 * 2 / (7 + 2), abs=1e-15)
    assert span_overlap_f1(text, [(14, 43)], [(15, 43)]) == 1.0  # a cut word still counts as the word
    assert span_exact_f1([(14, 43)], [(15, 43)]) == 0.0
    assert span_overlap_f1(text, [(14, 18), (36, 43)], [(36, 43)]) == pytest.approx(2 * 2 / (3 + 2), abs=1e-15)


def test_spans_without_tokens_agree_only_when_equal() -> None:
    text = "答案。！"
    assert span_overlap_f1(text, [(2, 3)], [(2, 3)]) == 1.0
    assert span_overlap_f1(text, [(2, 3)], [(3, 4)]) == 0.0
    assert span_overlap_f1(text, [(0, 1)], [(3, 4)]) == 0.0


def test_exact_span_f1_is_set_f1() -> None:
    assert span_exact_f1([(0, 3), (5, 9)], [(5, 9), (0, 3)]) == 1.0
    assert span_exact_f1([(0, 3), (5, 9)], [(5, 9)]) == pytest.approx(2 / 3)
    assert span_exact_f1([], []) == 1.0


def test_span_agreement_is_over_pairs_both_judged_relevant(fixture: Fixture) -> None:
    a = [
        _d("q-en-001", "en-trash-01", 3, ((14, 43),)),
        _d("q-zh-001", "zh-export-02", 2, ((0, 4),)),
        _d("q-en-002", "en-sync-02", 2, ((45, 87),)),
    ]
    b = [
        _d("q-en-001", "en-trash-01", 3, ((36, 43),), "ben"),
        _d("q-zh-001", "zh-export-02", 2, ((0, 4),), "ben"),
        _d("q-en-002", "en-sync-02", 0, (), "ben"),
    ]
    result = agreement(a, b, fixture)
    assert result.span_f1_exact.value == pytest.approx(0.5, abs=1e-15)  # (0 + 1) / 2
    assert result.span_f1_overlap.value == pytest.approx((4 / 9 + 1) / 2, abs=1e-15)
    assert result.by_language["zh"].span_f1_overlap.value == 1.0
    assert result.by_language["en"].span_f1_exact.value == 0.0


# --- disagreements and the JSON -----------------------------------------------------------------------------------


def test_disagreements_are_grade_differences_and_spans_below_the_bound(fixture: Fixture) -> None:
    a = [
        _d("q-zh-001", "zh-export-02", 3, ((0, 4),)),
        _d("q-en-001", "en-trash-02", 1, ((21, 36),)),
        _d("q-en-001", "en-trash-01", 3, ((14, 43),)),
        _d("q-en-004", None, 0),
        _d("q-en-002", "en-sync-02", 3, ((45, 87),)),
    ]
    b = [
        _d("q-zh-001", "zh-export-02", 3, ((2, 6),), "ben"),  # overlap 0.5: at the default bound, agreed
        _d("q-en-001", "en-trash-02", 2, ((21, 36),), "ben"),  # grade differs
        _d("q-en-001", "en-trash-01", 3, ((36, 43),), "ben"),  # overlap 4/9 < 0.5
        _d("q-en-004", None, 0, who="ben"),
        _d("q-en-003", "zh-billing-01", 3, ((0, 4),), "ben"),  # only B decided it: not a pair
    ]
    found = disagreements(a, b, fixture)
    assert found == (
        Disagreement(
            query_id="q-en-001",
            chunk_id="en-trash-01",
            language="en",
            grade_a=3,
            grade_b=3,
            spans_a=((14, 43),),
            spans_b=((36, 43),),
            reviewer_a="ana",
            reviewer_b="ben",
            span_f1_overlap=2 * 2 / (7 + 2),
        ),
        Disagreement(
            query_id="q-en-001",
            chunk_id="en-trash-02",
            language="en",
            grade_a=1,
            grade_b=2,
            spans_a=((21, 36),),
            spans_b=((21, 36),),
            reviewer_a="ana",
            reviewer_b="ben",
            span_f1_overlap=1.0,
        ),
    )
    assert [d.chunk_id for d in disagreements(a, b, fixture, overlap_bound=0.4)] == ["en-trash-02"]
    strict = disagreements(a, b, fixture, overlap_bound=1.0)
    assert [(d.query_id, d.chunk_id) for d in strict] == [
        ("q-en-001", "en-trash-01"),
        ("q-en-001", "en-trash-02"),
        ("q-zh-001", "zh-export-02"),
    ]
    result = agreement(a, b, fixture)
    assert result.pairs == 4 and result.disagreements == found
    assert result.by_language["zh"].disagreements == () and result.by_language["en"].disagreements == found


def test_json_keys_are_exactly_the_documented_ones(fixture: Fixture) -> None:
    a, b = _random_labels(fixture, 1, 0.5)
    data = json.loads(model_json(agreement(a, b, fixture)))
    assert set(data) == KEYS | {"by_language", "one_sided"}
    assert set(data["by_language"]) == {"en", "zh"}
    for row in data["by_language"].values():
        assert set(row) == KEYS
    assert len(data["confusion"]) == 4 and all(len(r) == 4 for r in data["confusion"])
    assert sum(map(sum, data["confusion"])) == data["pairs"] == 64
    assert set(data["krippendorff_alpha_ordinal"]) == {"value", "reason"}
    keys = [(d["query_id"], d["chunk_id"]) for d in data["disagreements"]]
    assert keys == sorted(keys) and len(keys) > 0
    assert set(data["disagreements"][0]) == {
        "query_id",
        "chunk_id",
        "language",
        "grade_a",
        "grade_b",
        "spans_a",
        "spans_b",
        "reviewer_a",
        "reviewer_b",
        "span_f1_overlap",
    }


def test_the_output_does_not_depend_on_the_order_of_the_files(fixture: Fixture) -> None:
    a, b = _random_labels(fixture, 2, 0.5)
    assert model_json(agreement(a, b, fixture)) == model_json(agreement(a[::-1], b[::-1], fixture))
    assert isinstance(agreement(a, b, fixture), Agreement)


def test_one_reviewer_on_both_sides_or_a_bad_bound_is_refused(fixture: Fixture) -> None:
    a = [_d("q-en-001", "en-trash-01", 0)]
    with pytest.raises(ValueError, match="both label files are by reviewer 'ana'"):
        agreement(a, a, fixture)
    with pytest.raises(ValueError, match="one only"):
        agreement(
            [*a, _d("q-en-002", "en-sync-02", 0, who="cy")], [_d("q-en-001", "en-trash-01", 0, who="ben")], fixture
        )
    with pytest.raises(ValueError, match="twice"):
        agreement([*a, *a], [_d("q-en-001", "en-trash-01", 0, who="ben")], fixture)
    for bound in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"in \[0, 1\]"):
            disagreements(a, [_d("q-en-001", "en-trash-01", 0, who="ben")], fixture, overlap_bound=bound)


def test_a_query_the_fixture_does_not_hold_is_refused_even_when_one_reviewer_alone_decided_it(fixture: Fixture) -> None:
    """Decisions given in Python skip the label file's checks: a one-sided pair of an unknown query was a KeyError."""
    a = [_d("q-en-001", "en-trash-01", 0, who="ana")]
    b = [_d("q-en-001", "en-trash-01", 0, who="bo"), _d("q-nowhere", "en-trash-01", 0, who="bo")]
    with pytest.raises(ValueError, match="the labels name queries the fixture does not hold: q-nowhere"):
        agreement(a, b, fixture)
