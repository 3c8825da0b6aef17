"""Merging two reviewers' labels into a new fixture version: agreed pairs taken, adjudicated ones win, every pair left
undecided refused and listed, judgments replaced pair by pair, the result a valid fixture with the new version."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.data.fixture import Fixture, FixtureError, Judgment, LoadedFixture, Span, load_fixture, write_fixture
from evalkit.data.label_merge import (
    LabelMergeError,
    decisions_agree,
    merge_labels,
    overruled_no_answers,
    reviewer_pair,
)
from evalkit.data.labels import LabelDecision
from evalkit.measures.agreement import disagreements, to_adjudicate


@pytest.fixture
def fixture(tiny: LoadedFixture) -> Fixture:
    return tiny.fixture


def _d(
    query: str, chunk: str | None, grade: int, spans: tuple[tuple[int, int], ...] = (), who: str = "ana"
) -> LabelDecision:
    return LabelDecision(query_id=query, chunk_id=chunk, grade=grade, spans=spans, reviewer=who)


def _judgments(fixture: Fixture, query_id: str) -> tuple[Judgment, ...]:
    return next(q.judgments for q in fixture.queries if q.query_id == query_id)


A = [
    _d("q-en-001", "en-trash-01", 3, ((14, 43),)),
    _d("q-en-001", "en-sync-01", 0),
    _d("q-zh-001", "zh-export-02", 2, ((0, 4),)),
    _d("q-zh-001", "zh-export-01", 1, ((7, 10),)),
]
B = [
    _d("q-en-001", "en-trash-01", 3, ((14, 43),), "ben"),  # equal: taken
    _d("q-en-001", "en-sync-01", 0, who="ben"),  # grade 0 from both: taken
    _d("q-zh-001", "zh-export-02", 2, ((2, 6),), "ben"),  # overlap F1 0.5, at the bound: the union is taken
    _d("q-zh-001", "zh-export-01", 1, ((8, 11),), "ben"),
]


def test_agreed_pairs_are_taken_and_the_version_is_new(fixture: Fixture) -> None:
    merged = merge_labels(fixture, A, B, None, "1.1.0")
    assert merged.fixture_version == "1.1.0"
    assert fixture.fixture_version == "1.0.0"
    assert _judgments(merged, "q-en-001") == (
        Judgment(chunk_id="en-trash-01", grade=3, spans=(Span(start=14, text="stay in the trash for 30 days"),)),
        _judgments(fixture, "q-en-001")[1],  # en-trash-02: no decision names it, kept
        Judgment(chunk_id="en-sync-01", grade=0),  # newly judged: appended
    )


def test_spans_within_the_bound_are_united_verbatim_by_character(fixture: Fixture) -> None:
    merged = merge_labels(fixture, A, B, None, "1.1.0")
    zh = {j.chunk_id: j for j in _judgments(merged, "q-zh-001")}
    assert zh["zh-export-02"] == Judgment(chunk_id="zh-export-02", grade=2, spans=(Span(start=0, text="批量导出一次"),))
    assert zh["zh-export-01"].spans == (Span(start=7, text=" PDF"),)  # [7, 10) U [8, 11) = [7, 11)
    # appended in the fixture's chunk order (zh-export-01 before zh-export-02 is replaced in place)
    assert [j.chunk_id for j in _judgments(merged, "q-zh-001")] == ["zh-export-02", "zh-export-01"]


def test_the_merge_does_not_depend_on_which_reviewer_is_a(fixture: Fixture) -> None:
    assert merge_labels(fixture, A, B, None, "1.1.0") == merge_labels(fixture, B, A, None, "1.1.0")


def test_undecided_pairs_are_refused_each_listed(fixture: Fixture) -> None:
    a = [*A, _d("q-en-002", "en-sync-02", 3, ((45, 87),)), _d("q-en-003", "zh-billing-01", 3, ((0, 4),))]
    b = [
        *B[:3],
        _d("q-zh-001", "zh-export-01", 2, ((8, 11),), "ben"),
        _d("q-en-002", "en-sync-02", 3, ((45, 50),), "ben"),
        _d("q-zh-002", None, 0, who="ben"),
    ]
    with pytest.raises(LabelMergeError) as caught:
        merge_labels(fixture, a, b, None, "1.1.0")
    assert caught.value.problems == [
        "query 'q-en-002', chunk 'en-sync-02': grade 3 from both, spans [[45, 87]] by 'ana', [[45, 50]] by 'ben' "
        "(span overlap F1 0.36, below the bound 0.5)",
        "query 'q-en-003', chunk 'zh-billing-01': only 'ana' (grade 3) decided it",
        "query 'q-zh-001', chunk 'zh-export-01': grade 1 by 'ana', 2 by 'ben'",
        "query 'q-zh-002': merged as no answer (chunk_id null), yet chunk 'zh-billing-02' has grade 3: the adjudicator "
        "grades that chunk 1-3 (which overrules the no-answer decisions) or 0",
    ]
    assert isinstance(caught.value, ValueError)
    assert "4 problem(s)" in str(caught.value)
    for problem in caught.value.problems:
        assert problem in str(caught.value)


def test_the_disagreements_of_agreement_are_what_the_merge_refuses(fixture: Fixture) -> None:
    b = [*B[:3], _d("q-zh-001", "zh-export-01", 3, ((8, 11),), "ben")]
    found = disagreements(A, b, fixture)
    assert [(d.query_id, d.chunk_id) for d in found] == [("q-zh-001", "zh-export-01")]
    with pytest.raises(LabelMergeError) as caught:
        merge_labels(fixture, A, b, None, "1.1.0")
    assert len(caught.value.problems) == len(found)
    texts = {c.chunk_id: c.text for c in fixture.chunks}
    agreed = [x for x, y in zip(A, b, strict=True) if decisions_agree(x, y, texts[x.chunk_id or ""])]
    assert len(agreed) == 3


def test_the_pairs_to_adjudicate_are_exactly_what_the_merge_refuses(fixture: Fixture) -> None:
    a = [*A, _d("q-en-003", "zh-billing-01", 3, ((0, 4),))]  # only ana
    b = [*B[:3], _d("q-zh-001", "zh-export-01", 3, ((8, 11),), "ben"), _d("q-en-002", "en-sync-02", 0, who="ben")]
    found = to_adjudicate(a, b, fixture)
    assert [(d.query_id, d.chunk_id, d.grade_a, d.grade_b) for d in found] == [
        ("q-en-002", "en-sync-02", None, 0),
        ("q-en-003", "zh-billing-01", 3, None),
        ("q-zh-001", "zh-export-01", 1, 3),
    ]
    with pytest.raises(LabelMergeError) as caught:
        merge_labels(fixture, a, b, None, "1.1.0")
    assert [p.split(":")[0] for p in caught.value.problems] == [
        f"query {d.query_id!r}, chunk {d.chunk_id!r}" for d in found
    ]
    settled = [_d(d.query_id, d.chunk_id, 0, who="cy") for d in found]
    assert merge_labels(fixture, a, b, settled, "1.1.0").fixture_version == "1.1.0"


def test_one_reviewers_no_answer_decision_stands_unless_the_adjudicator_answers_the_query(fixture: Fixture) -> None:
    no_answer = _d("q-en-004", None, 0)  # ana: no chunk answers q-en-004 (a no-answer query of the fixture)
    graded = _d("q-en-004", "en-sync-02", 1, ((45, 50),), "ben")  # ben: this chunk does
    assert [(d.chunk_id, d.grade_a, d.grade_b) for d in to_adjudicate([*A, no_answer], [*B, graded], fixture)] == [
        ("en-sync-02", None, 1)
    ]  # the no-answer decision is no pair to adjudicate: the chunk is
    sided_with_ana = merge_labels(
        fixture, [*A, no_answer], [*B, graded], [_d("q-en-004", "en-sync-02", 0, who="cy")], "1.1.0"
    )
    assert [j.grade for j in _judgments(sided_with_ana, "q-en-004")] == [0]
    adjudicated = [_d("q-en-004", "en-sync-02", 1, ((45, 50),), "cy")]
    with pytest.raises(LabelMergeError, match="every no-answer query in en would be answered"):
        merge_labels(fixture, [*A, no_answer], [*B, graded], adjudicated, "1.1.0")  # the overruling is what remains


def test_the_adjudicator_overrules_a_no_answer_decision_by_answering_the_query(fixture: Fixture) -> None:
    no_answer = _d("q-zh-002", None, 0, who="ben")  # q-zh-002 is answered in the fixture: zh-billing-02, grade 3
    with pytest.raises(LabelMergeError, match="merged as no answer"):
        merge_labels(fixture, A, [*B, no_answer], None, "1.1.0")
    adjudicated = [_d("q-zh-002", "zh-billing-02", 3, ((0, 4),), "cy")]
    merged = merge_labels(fixture, A, [*B, no_answer], adjudicated, "1.1.0")
    first = _judgments(merged, "q-zh-002")[0]
    assert (first.chunk_id, first.grade) == ("zh-billing-02", 3)
    both = [*adjudicated, _d("q-zh-002", None, 0, who="cy")]  # the adjudicator's own no-answer decision beside it
    with pytest.raises(LabelMergeError, match="merged as no answer"):
        merge_labels(fixture, A, [*B, no_answer], both, "1.1.0")


def test_the_adjudicator_overrules_a_no_answer_decision_both_reviewers_made(fixture: Fixture) -> None:
    """q-zh-002's answer, zh-billing-02 (grade 3), is already judged, so a pool does not show it: both reviewers may
    call the query unanswered. Answering it is how the adjudicator overrules them."""
    ana, ben = _d("q-zh-002", None, 0), _d("q-zh-002", None, 0, who="ben")
    with pytest.raises(LabelMergeError, match="the adjudicator grades that chunk 1-3"):
        merge_labels(fixture, [*A, ana], [*B, ben], None, "1.1.0")
    adjudicated = [_d("q-zh-002", "zh-billing-02", 3, ((0, 4),), "cy")]
    merged = merge_labels(fixture, [*A, ana], [*B, ben], adjudicated, "1.1.0")
    assert [(j.chunk_id, j.grade) for j in _judgments(merged, "q-zh-002")][:1] == [("zh-billing-02", 3)]
    overruled = overruled_no_answers(*reviewer_pair([*A, ana], [*B, ben]), {a.key: a for a in adjudicated})
    assert overruled == {("q-zh-002", None)}
    listed = to_adjudicate([*A, ana], [*B, ben], fixture)  # what the adjudication notebook offers: the chunk too
    assert [(d.chunk_id, d.grade_a, d.grade_b) for d in listed if d.query_id == "q-zh-002"] == [
        ("zh-billing-02", None, None)
    ]
    kept = [_d("q-zh-002", "zh-billing-02", 0, who="cy")]  # or the adjudicator sides with both: no answer after all
    no_answer = merge_labels(
        fixture,
        [*A, ana],
        [*B, ben],
        [*kept, *(_d(d.query_id, d.chunk_id, 0, who="cy") for d in listed if d.query_id != "q-zh-002")],
        "1.1.0",
    )
    assert [(j.chunk_id, j.grade) for j in _judgments(no_answer, "q-zh-002")][:1] == [("zh-billing-02", 0)]


@pytest.mark.parametrize("who", ["ana", "ben"])
def test_the_adjudicator_is_a_third_person(fixture: Fixture, who: str) -> None:
    with pytest.raises(ValueError, match=f"the adjudicated labels are by '{who}'.*a third person"):
        merge_labels(fixture, A, B, [_d("q-en-001", "en-trash-01", 3, ((14, 43),), who)], "1.1.0")


def test_adjudicated_decisions_win(fixture: Fixture) -> None:
    b = [*B[:3], _d("q-zh-001", "zh-export-01", 3, ((8, 11),), "ben")]
    adjudicated = [
        _d("q-zh-001", "zh-export-01", 2, ((8, 11),), "cy"),  # settles a disagreement
        _d("q-en-001", "en-trash-01", 2, ((36, 43),), "cy"),  # overrides an agreed pair
        _d("q-en-002", "en-sync-01", 0, who="cy"),  # a pair neither reviewer decided
    ]
    merged = merge_labels(fixture, A, b, adjudicated, "2.0.0")
    zh = {j.chunk_id: j for j in _judgments(merged, "q-zh-001")}
    assert zh["zh-export-01"] == Judgment(chunk_id="zh-export-01", grade=2, spans=(Span(start=8, text="PDF"),))
    assert _judgments(merged, "q-en-001")[0] == Judgment(
        chunk_id="en-trash-01", grade=2, spans=(Span(start=36, text="30 days"),)
    )
    assert [j.chunk_id for j in _judgments(merged, "q-en-002")] == ["en-sync-02", "en-sync-01"]


def test_a_no_answer_decision_contradicted_by_a_relevant_chunk_is_refused(fixture: Fixture) -> None:
    a = [_d("q-en-002", None, 0)]
    b = [_d("q-en-002", None, 0, who="ben")]
    with pytest.raises(LabelMergeError, match="query 'q-en-002': merged as no answer"):
        merge_labels(fixture, a, b, None, "1.1.0")
    a.append(_d("q-en-002", "en-sync-02", 0))
    b.append(_d("q-en-002", "en-sync-02", 0, who="ben"))
    merged = merge_labels(fixture, a, b, None, "1.1.0")
    assert not next(q for q in merged.queries if q.query_id == "q-en-002").answerable


def test_a_merge_that_breaks_the_schema_is_refused_by_it(fixture: Fixture) -> None:
    # every answerable zh query judged not relevant: the zh slice would hold no answerable query
    zh = [(q.query_id, j.chunk_id) for q in fixture.queries if q.language == "zh" for j in q.judgments]
    a = [_d(q, c, 0) for q, c in zh]
    b = [_d(q, c, 0, who="ben") for q, c in zh]
    with pytest.raises(FixtureError, match="language 'zh' has no answerable query"):
        merge_labels(fixture, a, b, None, "1.1.0")


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        ("1.0.0", "the fixture's own"),
        ("1.1", "MAJOR.MINOR.PATCH"),
        ("v1.1.0", "MAJOR.MINOR.PATCH"),
        ("１.1.0", "ASCII"),
    ],
)
def test_the_version_must_be_new_and_semantic(fixture: Fixture, version: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        merge_labels(fixture, A, B, None, version)


def test_one_reviewer_on_both_sides_is_refused(fixture: Fixture) -> None:
    with pytest.raises(ValueError, match="both label files are by reviewer 'ana'"):
        merge_labels(fixture, A, A, None, "1.1.0")


def test_the_merged_fixture_loads_with_load_fixture(fixture: Fixture, tmp_path: Path) -> None:
    merged = merge_labels(fixture, A, B, None, "1.1.0")
    loaded = load_fixture(write_fixture(merged, tmp_path / "new")).fixture
    assert loaded == merged
    assert loaded.fixture_version == "1.1.0"


def test_labels_that_answer_every_no_answer_query_of_a_language_are_named(fixture: Fixture) -> None:
    a = [_d("q-zh-004", "zh-export-02", 2, ((0, 4),))]
    b = [_d("q-zh-004", "zh-export-02", 2, ((0, 4),), "ben")]
    with pytest.raises(LabelMergeError, match="1 problem") as info:
        merge_labels(fixture, a, b, None, "1.1.0")
    assert info.value.problems == [
        "query 'q-zh-004' (zh): a no-answer query, now answered by chunk 'zh-export-02' grade 2; every no-answer "
        "query in zh would be answered, and a fixture needs one per language"
    ]
    a[0] = _d("q-zh-004", "zh-export-02", 0)  # judged not relevant: still a no-answer query
    b[0] = _d("q-zh-004", "zh-export-02", 0, who="ben")
    assert not next(
        q for q in merge_labels(fixture, a, b, None, "1.1.0").queries if q.query_id == "q-zh-004"
    ).answerable
