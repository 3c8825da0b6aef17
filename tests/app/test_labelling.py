"""The labelling session without a browser: resume at the first undecided pair, blind to other reviewers, each
decision written at once and atomically, progress per language, skip and back, adjudication of disagreements only,
and browser selections (UTF-16 code units) turned into Python character offsets."""

from __future__ import annotations

import ast
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import evalkit.data.labels as label_files
from evalkit.app.headless import declared_parameters
from evalkit.app.labelling import (
    LabellingSession,
    LabellingWidget,
    LabelParameters,
    adjudication_tasks,
    apply_action,
    merge_span,
    python_span,
    session_view,
)
from evalkit.app.notebook import UnknownParameterError
from evalkit.data.fixture import Fixture, LoadedFixture, load_fixture
from evalkit.data.label_merge import span_overlap_f1
from evalkit.data.label_tasks import LabelTask, load_tasks
from evalkit.data.labels import LabelDecision, LabelFile, LabelFileError, read_labels, text_sha256

from ..conftest import ROOT, TINY_DIR

NOTEBOOK = ROOT / "notebooks" / "label.ipynb"


@pytest.fixture
def fixture(tiny: LoadedFixture) -> Fixture:
    return tiny.fixture


@pytest.fixture
def tasks(fixture: Fixture) -> tuple[LabelTask, ...]:
    return load_tasks(fixture, None)


def session_of(tasks: tuple[LabelTask, ...], path: Path, fixture: Fixture, reviewer: str = "ana") -> LabellingSession:
    return LabellingSession(tasks, path, reviewer, fixture)


def test_the_tiny_tasks_are_what_the_tests_assume(tasks: tuple[LabelTask, ...]) -> None:
    assert [(t.query_id, t.chunk_id, t.language) for t in tasks] == [
        ("q-en-001", "en-trash-01", "en"),
        ("q-en-001", "en-trash-02", "en"),
        ("q-en-002", "en-sync-02", "en"),
        ("q-en-003", "zh-billing-01", "en"),
        ("q-zh-001", "zh-export-02", "zh"),
        ("q-zh-002", "zh-billing-02", "zh"),
        ("q-zh-003", "en-sync-01", "zh"),
    ]


# --- browser offsets ---------------------------------------------------------------------------------------------


def test_a_utf16_selection_becomes_python_offsets_past_an_astral_character() -> None:
    text = "𠮷笔记可以导出为 PDF"  # U+20BB7 is two UTF-16 code units, one Python character
    assert len(text) == 12 and len(text.encode("utf-16-le")) // 2 == 13
    assert python_span(text, 6, 9) == (5, 8)
    assert text[5:8] == "导出为"
    assert python_span(text, 0, 2) == (0, 1)  # the astral character itself
    assert python_span(text, 1, 2) == (0, 1)  # a bound inside its surrogate pair widens to the whole character
    assert python_span(text, 0, 1) == (0, 1)
    assert python_span(text, 10, 13) == (9, 12) and text[9:12] == "PDF"
    assert python_span("plain", 1, 3) == (1, 3)  # no astral character: the offsets are the same


@pytest.mark.parametrize(("start", "end"), [(-1, 2), (3, 2), (0, 14)])
def test_a_selection_outside_the_text_is_refused(start: int, end: int) -> None:
    with pytest.raises(ValueError, match="outside the chunk's 13 UTF-16 units"):
        python_span("𠮷笔记可以导出为 PDF", start, end)


def test_marked_spans_are_sorted_and_overlaps_merged() -> None:
    assert merge_span([(5, 8)], (0, 2)) == ((0, 2), (5, 8))
    assert merge_span([(0, 2), (5, 8)], (1, 6)) == ((0, 8),)
    assert merge_span([(0, 2)], (2, 4)) == ((0, 4),)


def test_a_browser_selection_marks_the_exact_characters(tmp_path: Path, fixture: Fixture) -> None:
    chunk = next(c for c in fixture.chunks if c.chunk_id == "zh-export-01")
    query = fixture.queries[4]
    text = "𠮷" + chunk.text  # as a browser counts it, the astral character is two units
    task = LabelTask(query.query_id, chunk.chunk_id, query.language, query.text, "导出笔记", text)
    session = session_of((task,), tmp_path / "ana.jsonl", fixture)
    assert apply_action(session, {"action": "select", "start": 6, "end": 9}) == "marked [5, 8)"
    assert session.span_texts() == ("导出为",)
    view = session_view(session)
    assert view["task"]["spans"] == [{"start": 5, "end": 8, "text": "导出为"}]
    assert "".join(s["text"] for s in view["task"]["segments"]) == text
    assert [s["text"] for s in view["task"]["segments"] if s["marked"]] == ["导出为"]


# --- resume, record, progress --------------------------------------------------------------------------------------


def test_each_decision_is_written_at_once_and_a_reopened_session_resumes(
    tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]
) -> None:
    path = tmp_path / "labels" / "ana.jsonl"
    session = session_of(tasks, path, fixture)
    assert session.index == 0 and not path.exists()  # nothing written before a decision
    session.mark(14, 43)
    first = session.record(3, note="clear answer")
    assert read_labels(path, fixture) == (first,)
    assert first == LabelDecision(
        query_id="q-en-001",
        chunk_id="en-trash-01",
        grade=3,
        spans=((14, 43),),
        reviewer="ana",
        note="clear answer",
        chunk_sha256=text_sha256(tasks[0].chunk_text),  # the text the spans count into, as the reviewer saw it
    )
    session.skip()  # q-en-001/en-trash-02 stays undecided
    session.record(0)
    assert [d.chunk_id for d in read_labels(path, fixture)] == ["en-trash-01", "en-sync-02"]
    reopened = session_of(tasks, path, fixture)
    assert reopened.index == 1 and reopened.current == tasks[1]
    assert sorted(p.name for p in path.parent.iterdir()) == ["ana.jsonl"], "no temporary file is left behind"


def test_a_decision_made_again_replaces_the_earlier_one(
    tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]
) -> None:
    path = tmp_path / "ana.jsonl"
    session = session_of(tasks, path, fixture)
    session.record(0)
    session.back()
    assert session.current == tasks[0] and session_view(session)["task"]["recorded"] == {"grade": 0, "note": None}
    session.mark(14, 43)
    session.record(2)
    assert [(d.chunk_id, d.grade) for d in read_labels(path, fixture)] == [("en-trash-01", 2)]
    assert session.index == 1


def test_a_refused_write_leaves_the_session_and_the_file_as_they_were(
    tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]
) -> None:
    path = tmp_path / "ana.jsonl"
    session = session_of(tasks, path, fixture)
    session.record(0)
    before = path.read_bytes()

    def refuse(target: Path, data: bytes) -> None:
        raise OSError("disk full")

    monkeypatched = pytest.MonkeyPatch()
    monkeypatched.setattr("evalkit.data.labels.write_atomic", refuse)
    try:
        message = apply_action(session, {"action": "grade", "grade": 0})
    finally:
        monkeypatched.undo()
    assert message == "not saved: disk full"
    assert session.index == 1 and len(session.decisions) == 1
    assert path.read_bytes() == before


def test_grades_and_spans_must_fit(tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]) -> None:
    session = session_of(tasks, tmp_path / "ana.jsonl", fixture)
    message = apply_action(session, {"action": "grade", "grade": 2})
    assert message == "not saved: grade 2 needs at least one span: select the supporting text in the chunk"
    assert session.index == 0 and not session.decisions
    with pytest.raises(ValueError, match="white space only"):
        session.mark(7, 8)  # the space between "notes" and "stay"
    assert session.mark(7, 14) == (8, 13)  # " notes " trimmed to "notes"
    assert session.span_texts() == ("notes",)
    session.clear()
    assert session.spans == ()
    session.mark(0, 7)
    decision = session.record(0)  # grade 0 takes no spans: they are dropped
    assert decision.spans == ()


def test_progress_is_counted_per_language(tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]) -> None:
    session = session_of(tasks, tmp_path / "ana.jsonl", fixture)
    assert session.progress() == (("en", 0, 4), ("zh", 0, 3), ("all", 0, 7))
    for _ in range(5):
        session.record(0)
    assert session.progress() == (("en", 4, 0), ("zh", 1, 2), ("all", 5, 2))
    assert session_view(session)["progress"][1] == {"language": "zh", "done": 1, "to_do": 2}
    session.back()
    session.record(0)  # a pair decided again is counted once
    assert session.progress() == (("en", 4, 0), ("zh", 1, 2), ("all", 5, 2))
    only_zh = session_of(tuple(t for t in tasks if t.language == "zh"), tmp_path / "ana.jsonl", fixture)
    assert only_zh.progress() == (("zh", 1, 2), ("all", 1, 2))  # the file's English decisions are not these pairs


def test_a_second_session_of_the_same_reviewer_sees_the_first_ones_decisions(
    tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]
) -> None:
    path = tmp_path / "ana.jsonl"
    here, there = session_of(tasks, path, fixture), session_of(tasks, path, fixture)  # two notebooks, one file
    there.record(0)  # decides tasks[0] in the other notebook
    assert here.progress() == (("en", 1, 3), ("zh", 0, 3), ("all", 1, 6))
    assert here.decision(tasks[0]) is not None
    assert here.first_undecided() == 1, "a pair decided in the other notebook is not offered again"
    here.skip()  # from tasks[0], shown when it opened, to the next undecided pair
    assert here.current == tasks[1]
    here.record(0)  # the file now holds both notebooks' decisions
    assert [d.chunk_id for d in read_labels(path, fixture)] == ["en-trash-01", "en-trash-02"]
    assert here.progress() == (("en", 2, 2), ("zh", 0, 3), ("all", 2, 5))
    there.back()
    there.record(0)  # tasks[0] again, with the file changed since `there` wrote it: counted once
    assert there.progress() == (("en", 2, 2), ("zh", 0, 3), ("all", 2, 5))
    assert len(here.decisions) == 2


def test_another_reviewers_decisions_written_into_the_file_meanwhile_are_refused(
    tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]
) -> None:
    path = tmp_path / "ana.jsonl"
    session = session_of(tasks, path, fixture)
    session_of(tasks, tmp_path / "bo.jsonl", fixture, reviewer="bo").record(0)
    (tmp_path / "bo.jsonl").replace(path)  # bo's labels land in ana's file behind the session's back
    with pytest.raises(ValueError, match="holds decisions of bo"):
        session.progress()


def test_skip_and_back(tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]) -> None:
    session = session_of(tasks, tmp_path / "ana.jsonl", fixture)
    session.back()
    assert session.index == 0  # nothing before the first pair
    session.skip()
    session.skip()
    assert session.index == 2
    session.back()
    assert session.index == 1  # the pair shown before
    session.record(0)  # the next undecided after 1
    assert session.index == 2
    for _ in range(6):  # the undecided pairs: 0 and 2-6
        session.skip()
    assert session.index == 2, "skip wraps round the undecided pairs"
    for _ in range(5):
        session.record(0)
    assert session.index == 0  # wrapped round to the first pair, skipped earlier
    session.record(0)
    assert session.current is None and session_view(session)["task"] is None
    assert (
        apply_action(session, {"action": "grade", "grade": 0}) == "not saved: every pair is decided: nothing to record"
    )
    session.back()
    assert session.current == tasks[0], "back from the end shows the last pair decided"


# --- blind ---------------------------------------------------------------------------------------------------------


def test_a_file_of_another_reviewer_is_refused(tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]) -> None:
    path = tmp_path / "ana.jsonl"
    session_of(tasks, path, fixture, reviewer="bo").record(0)
    with pytest.raises(ValueError, match="holds decisions of bo: each reviewer labels into a file of their own"):
        session_of(tasks, path, fixture, reviewer="ana")


def test_labelling_reads_no_other_file(
    tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[Path] = []
    real = label_files.non_blank_lines  # every label file is read through it

    def spy(path: Path, max_bytes: int) -> Iterator[tuple[int, str]]:
        read.append(Path(path))
        return real(path, max_bytes)

    other = tmp_path / "bo.jsonl"
    session_of(tasks, other, fixture, reviewer="bo").record(0)
    monkeypatch.setattr(label_files, "non_blank_lines", spy)
    session = session_of(tasks, tmp_path / "ana.jsonl", fixture)
    session.record(0)
    session_of(tasks, tmp_path / "ana.jsonl", fixture)
    assert read == [tmp_path / "ana.jsonl"]
    view = json.dumps(session_view(session), ensure_ascii=False)
    assert "bo" not in json.loads(view)["reviewer"] and '"reviews"' not in view


def test_label_mode_refuses_the_other_reviewers_files() -> None:
    defaults = notebook_defaults()
    with pytest.raises(ValueError, match="labels_a: read in mode 'adjudicate' only"):
        LabelParameters.from_namespace({**defaults, "labels_a": "reports/labels/bo.jsonl"})


# --- adjudication --------------------------------------------------------------------------------------------------


def write_labels(path: Path, lines: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")


def test_adjudication_shows_only_the_disagreements(tmp_path: Path, fixture: Fixture) -> None:
    from evalkit.measures.agreement import disagreements

    common = {"query_id": "q-en-001", "chunk_id": "en-trash-01"}
    write_labels(
        tmp_path / "ana.jsonl",
        [
            {**common, "grade": 3, "spans": [[14, 43]], "reviewer": "ana"},
            {"query_id": "q-zh-001", "chunk_id": "zh-export-02", "grade": 3, "spans": [[0, 10]], "reviewer": "ana"},
        ],
    )
    write_labels(
        tmp_path / "bo.jsonl",
        [
            {**common, "grade": 3, "spans": [[14, 43]], "reviewer": "bo"},
            {"query_id": "q-zh-001", "chunk_id": "zh-export-02", "grade": 1, "spans": [[11, 14]], "reviewer": "bo"},
        ],
    )
    a, b = read_labels(tmp_path / "ana.jsonl", fixture), read_labels(tmp_path / "bo.jsonl", fixture)
    found = disagreements(a, b, fixture)
    assert [(d.query_id, d.chunk_id) for d in found] == [("q-zh-001", "zh-export-02")]
    compare = {(d.query_id, d.chunk_id): d for d in found}
    session = LabellingSession(adjudication_tasks(fixture, found), tmp_path / "cy.jsonl", "cy", fixture, compare)
    assert session.mode == "adjudicate" and len(session.tasks) == 1
    reviews = session_view(session)["task"]["reviews"]
    assert reviews == [
        {"reviewer": "ana", "grade": 3, "spans": [{"start": 0, "end": 10, "text": "批量导出一次最多包含"}]},
        {"reviewer": "bo", "grade": 1, "spans": [{"start": 11, "end": 14, "text": "500"}]},
    ]
    session.mark(0, 18)
    decision = session.record(3)
    assert decision.reviewer == "cy"
    assert read_labels(tmp_path / "cy.jsonl", fixture) == (decision,)
    assert session.current is None


def test_adjudication_shows_the_chunks_only_one_reviewer_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")  # a stand-in project root
    (tmp_path / "evalkit").mkdir()
    shutil.copytree(TINY_DIR, tmp_path / "fx")
    monkeypatch.chdir(tmp_path)
    ana = {"query_id": "q-en-001", "chunk_id": "en-trash-01", "grade": 0, "reviewer": "ana"}
    bo = {"query_id": "q-zh-001", "chunk_id": "zh-export-02", "grade": 1, "spans": [[0, 4]], "reviewer": "bo"}
    (tmp_path / "labels").mkdir()
    write_labels(tmp_path / "labels" / "ana.jsonl", [ana])
    write_labels(tmp_path / "labels" / "bo.jsonl", [bo])
    parameters = LabelParameters(
        fixture="fx", reviewer="cy", mode="adjudicate", labels_a="labels/ana.jsonl", labels_b="labels/bo.jsonl"
    )
    session = parameters.open_session()
    assert [(t.query_id, t.chunk_id) for t in session.tasks] == [
        ("q-en-001", "en-trash-01"),
        ("q-zh-001", "zh-export-02"),
    ]
    assert session_view(session)["task"]["reviews"] == [
        {"reviewer": "ana", "grade": 0, "spans": []},
        {"reviewer": "bo", "grade": None, "spans": []},
    ]
    for name in ("ana", "Ana", "\uff22\uff2f"):  # one person whatever the case or width, as labels merge reads it
        one_of_them = parameters.model_copy(update={"reviewer": name})
        with pytest.raises(ValueError, match="the adjudicator is a third person"):
            one_of_them.open_session()


def test_adjudication_reads_spans_at_the_bound_agree_and_merge_are_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Grade 3 from both with spans of token F1 0.8 > 0.5 and < 0.9: agreed at the default bound (nothing to
    adjudicate) and a pair to adjudicate at 0.9, as `labels agree` and `labels merge --overlap-bound 0.9` read it."""
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")  # a stand-in project root
    (tmp_path / "evalkit").mkdir()
    shutil.copytree(TINY_DIR, tmp_path / "fx")
    monkeypatch.chdir(tmp_path)
    fixture = load_fixture(tmp_path / "fx").fixture
    common = {"query_id": "q-en-001", "chunk_id": "en-trash-01", "grade": 3}
    (tmp_path / "labels").mkdir()
    write_labels(tmp_path / "labels" / "ana.jsonl", [{**common, "spans": [[14, 43]], "reviewer": "ana"}])
    write_labels(tmp_path / "labels" / "bo.jsonl", [{**common, "spans": [[21, 43]], "reviewer": "bo"}])
    a, b = (read_labels(tmp_path / "labels" / f"{who}.jsonl", fixture) for who in ("ana", "bo"))
    text = next(c.text for c in fixture.chunks if c.chunk_id == "en-trash-01")
    assert 0.5 < span_overlap_f1(text, a[0].spans, b[0].spans) < 0.9
    pairs = {"fixture": "fx", "reviewer": "cy", "mode": "adjudicate", "labels_a": "labels/ana.jsonl"}
    for bound, expected in ((0.5, []), (0.9, [("q-en-001", "en-trash-01")])):
        params = LabelParameters(**pairs, labels_b="labels/bo.jsonl", overlap_bound=bound)
        assert [(t.query_id, t.chunk_id) for t in params.open_session().tasks] == expected
    with pytest.raises(ValueError, match="overlap_bound"):
        LabelParameters(**pairs, labels_b="labels/bo.jsonl", overlap_bound=1.5)


def test_adjudication_parameters(tmp_path: Path) -> None:
    defaults = notebook_defaults()
    adjudicate = {**defaults, "mode": "adjudicate", "reviewer": "cy"}
    with pytest.raises(ValueError, match="needs labels_a and labels_b"):
        LabelParameters.from_namespace({**adjudicate, "labels_a": "reports/a.jsonl"})
    same = {**adjudicate, "labels_a": "reports/a.jsonl", "labels_b": "reports/b.jsonl", "labels": "reports/a.jsonl"}
    with pytest.raises(ValueError, match="a file of their own"):
        LabelParameters.from_namespace(same)
    params = LabelParameters.from_namespace({**same, "labels": None})
    assert params.labels_file == (ROOT / "reports" / "labels" / "cy.jsonl").resolve()


# --- the widget and the notebook's parameters ---------------------------------------------------------------------


def test_the_widget_carries_out_what_the_browser_sends(
    tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]
) -> None:
    widget = LabellingWidget(session_of(tasks, tmp_path / "ana.jsonl", fixture))
    assert widget.view["task"]["chunk_id"] == "en-trash-01"
    widget._on_message(widget, {"action": "select", "start": 14, "end": 43}, None)
    assert widget.view["task"]["spans"][0]["text"] == "stay in the trash for 30 days"
    widget._on_message(widget, {"action": "grade", "grade": 3, "note": None}, None)
    assert widget.view["message"] == "saved grade 3 of q-en-001 / en-trash-01"
    assert widget.view["task"]["chunk_id"] == "en-trash-02"
    assert widget.view["progress"][0] == {"language": "en", "done": 1, "to_do": 3}
    widget._on_message(widget, {"action": "nope"}, None)
    assert widget.view["message"] == "unknown action 'nope'"
    widget._on_message(widget, {"action": "select", "start": 1}, None)
    assert widget.view["message"] == "malformed action 'select': no 'end'"


def notebook_defaults() -> dict[str, object]:
    return {name: ast.literal_eval(p["default"]) for name, p in declared_parameters(NOTEBOOK).items()}


def test_the_notebook_declares_the_model_and_its_defaults_write_nothing() -> None:
    declared = declared_parameters(NOTEBOOK)
    assert set(declared) == set(LabelParameters.model_fields)
    assert declared["tasks"]["default"] == "None" and declared["mode"]["default"] == '"label"'
    params = LabelParameters.from_namespace(notebook_defaults())
    assert params.labels_file == (ROOT / "reports" / "labels" / "reviewer-a.jsonl").resolve()
    existed = params.labels_file.exists()
    session = params.open_session()
    assert len(session.tasks) == sum(len(q.judgments) for q in session.fixture.queries)
    assert params.labels_file.exists() == existed


def test_unknown_or_bad_parameters_are_refused() -> None:
    defaults = notebook_defaults()
    with pytest.raises(UnknownParameterError, match="grader"):
        LabelParameters.from_namespace({**defaults, "In": ["# Parameters\ngrader = 'x'\n"]})
    with pytest.raises(ValueError, match="mode"):
        LabelParameters.from_namespace({**defaults, "mode": "review"})
    with pytest.raises(ValueError, match="not an absolute path"):
        LabelParameters.from_namespace({**defaults, "labels": "/tmp/labels.jsonl"})
    with pytest.raises(ValueError, match="could escape the workspace"):
        LabelParameters.from_namespace({**defaults, "labels": "../labels.jsonl"})


def test_a_bad_pool_file_is_refused_by_line(tmp_path: Path) -> None:
    folder = ROOT / "reports"
    pool = folder / f"pytest-pool-{tmp_path.name}.jsonl"
    pool.write_text('{"query_id": "q-nope", "chunk_id": "x"}\n', encoding="utf-8")
    try:
        params = LabelParameters.from_namespace({**notebook_defaults(), "tasks": pool.relative_to(ROOT).as_posix()})
        with pytest.raises(LabelFileError, match="line 1: field 'query_id': unknown query"):
            params.open_session()
    finally:
        pool.unlink()


def _text_changed(fixture: Fixture, chunk_id: str) -> Fixture:
    """The fixture with one chunk's text changed (so its offsets now mark other characters)."""
    chunks = tuple(
        c.model_copy(update={"text": "Note: " + c.text}) if c.chunk_id == chunk_id else c for c in fixture.chunks
    )
    return fixture.model_copy(update={"chunks": chunks})


def test_a_session_reopens_after_a_chunk_text_changed_and_offers_that_pair_again(
    tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]
) -> None:
    path = tmp_path / "ana.jsonl"
    session = session_of(tasks, path, fixture)
    session.mark(14, 43)
    session.record(3)
    changed = _text_changed(fixture, "en-trash-01")
    with pytest.raises(LabelFileError, match="chunk_sha256"):
        read_labels(path, changed)  # agree and merge refuse the stale decision
    reopened = session_of(load_tasks(changed, None), path, changed)
    assert reopened.index == 0 and reopened.current is not None and reopened.current.chunk_id == "en-trash-01"
    reopened.mark(20, 49)
    again = reopened.record(3)
    assert read_labels(path, changed) == (again,)  # the stale line replaced, in place
    assert again.chunk_sha256 == text_sha256(reopened.tasks[0].chunk_text)


def test_a_stale_decision_still_names_the_files_reviewer_and_still_binds_its_query(
    tmp_path: Path, fixture: Fixture, tasks: tuple[LabelTask, ...]
) -> None:
    """A decision on since-changed text is offered again, but the file stays ana's, and a no-answer decision for its
    query is refused while it stands graded 3 (the file could not be read again)."""
    path = tmp_path / "ana.jsonl"
    session = session_of(tasks, path, fixture)
    session.mark(14, 43)
    session.record(3)  # q-en-001 / en-trash-01
    changed = _text_changed(fixture, "en-trash-01")
    with pytest.raises(ValueError, match="holds decisions of ana"):
        session_of(load_tasks(changed, None), path, changed, reviewer="ben")
    no_answer = LabelDecision(query_id="q-en-001", chunk_id=None, grade=0, reviewer="ana")
    with pytest.raises(LabelFileError, match="decided to have no answer, yet chunk 'en-trash-01' is graded 3"):
        LabelFile(path, changed).record(no_answer)
    assert session_of(load_tasks(changed, None), path, changed).current is not None  # the file still opens
