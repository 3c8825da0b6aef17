"""Label files: decisions read through the guarded door and refused by file, line and field; saved atomically, one
decision per pair; tasks from a pool file or the fixture; Chinese offsets counted by character."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

import evalkit.data.labels as labels_module
from evalkit.common.output import write_atomic, writers_in_turn
from evalkit.data.fixture import Fixture, LoadedFixture
from evalkit.data.label_tasks import LabelTask, load_tasks, span_text
from evalkit.data.labels import (
    LabelDecision,
    LabelFile,
    LabelFileError,
    labels_jsonl,
    read_labels,
    record_label,
    same_person,
    text_sha256,
)

EN = {"query_id": "q-en-001", "chunk_id": "en-trash-01", "grade": 3, "spans": [[14, 43]], "reviewer": "ana"}
ZH = {"query_id": "q-zh-001", "chunk_id": "zh-export-02", "grade": 3, "spans": [[0, 4]], "reviewer": "ana"}


@pytest.fixture
def fixture(tiny: LoadedFixture) -> Fixture:
    return tiny.fixture


def _write(path: Path, *records: object) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _refusal(path: Path, fixture: Fixture) -> list[str]:
    with pytest.raises(LabelFileError) as caught:
        read_labels(path, fixture)
    return caught.value.problems


def test_a_valid_file_reads_in_file_order(tmp_path: Path, fixture: Fixture) -> None:
    no_answer = {"query_id": "q-en-004", "chunk_id": None, "grade": 0, "spans": [], "reviewer": "ana", "note": "x"}
    path = _write(tmp_path / "a.jsonl", ZH, "", "   ", EN, no_answer)
    decisions = read_labels(path, fixture)
    assert [d.key for d in decisions] == [("q-zh-001", "zh-export-02"), ("q-en-001", "en-trash-01"), ("q-en-004", None)]
    assert decisions[1].spans == ((14, 43),)
    assert decisions[2].note == "x"


def test_chinese_offsets_are_counted_by_character_not_byte(tmp_path: Path, fixture: Fixture) -> None:
    text = next(c.text for c in fixture.chunks if c.chunk_id == "zh-export-02")
    decision = read_labels(_write(tmp_path / "a.jsonl", ZH), fixture)[0]
    assert span_text(text, decision.spans) == ("批量导出",)
    # the whole chunk is 31 characters (far more bytes in UTF-8): an end at len(text) is inside, one past is not
    at_end = {**ZH, "spans": [[0, len(text)]]}
    assert read_labels(_write(tmp_path / "b.jsonl", at_end), fixture)[0].spans == ((0, len(text)),)
    past = {**ZH, "spans": [[0, len(text) + 1]]}
    assert len(text.encode("utf-8")) > len(text) + 1
    problems = _refusal(_write(tmp_path / "c.jsonl", past), fixture)
    assert problems == [
        f"c.jsonl line 1: field 'spans[0]': [0, {len(text) + 1}) is outside chunk 'zh-export-02' "
        f"(its text has {len(text)} characters)"
    ]


REFUSALS = [
    ("not json", "field '(the whole line)'", "not JSON"),
    ("[1, 2]", "field '(the whole line)'", "expected a JSON object"),
    ('{"query_id": "q-en-001", "query_id": "q-en-002"}', "field '(the whole line)'", "duplicate key"),
    ({**EN, "colour": "red"}, "field 'colour'", "Extra inputs"),
    ({**EN, "grade": 4}, "field 'grade'", "outside 0-3"),
    ({**EN, "grade": -1}, "field 'grade'", "outside 0-3"),
    ({**EN, "grade": True}, "field 'grade'", "integer"),
    ({**EN, "grade": 0}, "field 'spans'", "takes no spans"),
    ({**EN, "spans": []}, "field 'spans'", "needs at least 1 span"),
    ({**EN, "spans": [[5, 5]]}, "field 'spans'", "start must be < end"),
    ({**EN, "spans": [[9, 5]]}, "field 'spans'", "start must be < end"),
    ({**EN, "spans": [[1, 5], [1, 5]]}, "field 'spans'", "given twice"),
    ({**EN, "spans": [[-1, 5]]}, "field 'spans[0][0]'", "greater than or equal to 0"),
    ({**EN, "spans": [[0, 89]]}, "field 'spans[0]'", "outside chunk 'en-trash-01'"),
    ({**EN, "query_id": "q-nope"}, "field 'query_id'", "unknown query"),
    ({**EN, "chunk_id": "c-nope"}, "field 'chunk_id'", "unknown chunk"),
    ({**EN, "chunk_id": None, "spans": []}, "field 'grade'", "no-answer decision"),
    ({**EN, "reviewer": ""}, "field 'reviewer'", "blank"),
    ({**EN, "reviewer": "ana\u202e"}, "field 'reviewer'", "U+202E"),
    ({**EN, "reviewer": "a\nb"}, "field 'reviewer'", "U+000A"),
    ({k: v for k, v in EN.items() if k != "reviewer"}, "field 'reviewer'", "Field required"),
]


@pytest.mark.parametrize(("record", "field", "problem"), REFUSALS, ids=[r[2] for r in REFUSALS])
def test_each_refusal_names_file_line_and_field(
    tmp_path: Path, fixture: Fixture, record: object, field: str, problem: str
) -> None:
    path = _write(tmp_path / "labels.jsonl", ZH, record)
    problems = _refusal(path, fixture)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"labels.jsonl line 2: {field}: "), problems[0]
    assert problem in problems[0]


def test_a_second_decision_on_one_pair_is_refused_naming_both_lines(tmp_path: Path, fixture: Fixture) -> None:
    problems = _refusal(_write(tmp_path / "a.jsonl", EN, ZH, {**EN, "grade": 2}), fixture)
    assert problems == [
        "a.jsonl line 3: field 'chunk_id': query 'q-en-001', chunk 'en-trash-01' is decided again (first on line 1; "
        "one decision per pair)"
    ]


def test_mixed_reviewers_are_refused(tmp_path: Path, fixture: Fixture) -> None:
    problems = _refusal(_write(tmp_path / "a.jsonl", EN, {**ZH, "reviewer": "ben"}), fixture)
    assert problems == ["a.jsonl line 2: field 'reviewer': 'ben' is not 'ana' of line 1 (one reviewer per file)"]


def test_every_bad_line_is_listed_in_one_error(tmp_path: Path, fixture: Fixture) -> None:
    with pytest.raises(LabelFileError) as caught:
        read_labels(_write(tmp_path / "a.jsonl", "x", EN, {**ZH, "grade": 9}), fixture)
    assert [p.split(":")[0] for p in caught.value.problems] == ["a.jsonl line 1", "a.jsonl line 3"]
    assert "invalid label file a.jsonl: 2 problem(s)" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_files_that_cannot_be_read_are_refused(tmp_path: Path, fixture: Fixture) -> None:
    with pytest.raises(LabelFileError, match="file not found"):
        read_labels(tmp_path / "missing.jsonl", fixture)
    with pytest.raises(LabelFileError, match="a directory"):
        read_labels(tmp_path, fixture)
    (tmp_path / "latin.jsonl").write_bytes(b"\xff\xfe")
    with pytest.raises(LabelFileError, match="not UTF-8"):
        read_labels(tmp_path / "latin.jsonl", fixture)
    big = _write(tmp_path / "big.jsonl", EN, ZH)
    with pytest.raises(LabelFileError, match="larger than the input limit"):
        read_labels(big, fixture, max_bytes=10)


def test_a_byte_order_mark_and_crlf_line_ends_are_accepted(tmp_path: Path, fixture: Fixture) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (json.dumps(EN) + "\r\n" + json.dumps(ZH) + "\r\n").encode())
    assert len(read_labels(path, fixture)) == 2


def test_the_model_is_strict_and_keeps_spans_sorted() -> None:
    decision = LabelDecision(query_id="q", chunk_id="c", grade=2, spans=((9, 12), (0, 3)), reviewer="r")
    assert decision.spans == ((0, 3), (9, 12))
    with pytest.raises(ValidationError):
        LabelDecision(query_id="q", chunk_id="c", grade="2", spans=((0, 3),), reviewer="r")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        decision.grade = 1  # type: ignore[misc]


def test_record_label_creates_replaces_in_place_and_appends(tmp_path: Path, fixture: Fixture) -> None:
    path = tmp_path / "sub" / "ana.jsonl"
    first = LabelDecision.model_validate_json(json.dumps(EN))
    second = LabelDecision.model_validate_json(json.dumps(ZH))
    record_label(path, first, fixture)
    record_label(path, second, fixture)
    changed = first.model_copy(update={"grade": 1})
    record_label(path, changed, fixture)
    assert read_labels(path, fixture) == (changed, second)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == (
        '{"chunk_id": "en-trash-01", "grade": 1, "query_id": "q-en-001", "reviewer": "ana", "spans": [[14, 43]]}'
    )
    assert path.read_bytes() == labels_jsonl((changed, second))
    assert not [p for p in path.parent.iterdir() if p.name != "ana.jsonl"]  # no temporary file left


def test_record_label_writes_chinese_as_utf8_and_notes_only_when_set(tmp_path: Path, fixture: Fixture) -> None:
    path = tmp_path / "a.jsonl"
    decision = LabelDecision.model_validate_json(json.dumps({**ZH, "note": "只在桌面端"}, ensure_ascii=False))
    record_label(path, decision, fixture)
    assert '"note": "只在桌面端"' in path.read_text(encoding="utf-8")
    assert "note" not in labels_jsonl([decision.model_copy(update={"note": None})]).decode()


def test_record_label_refuses_without_writing(tmp_path: Path, fixture: Fixture) -> None:
    path = tmp_path / "a.jsonl"
    record_label(path, LabelDecision.model_validate_json(json.dumps(EN)), fixture)
    before = path.read_bytes()
    other_reviewer = LabelDecision.model_validate_json(json.dumps({**ZH, "reviewer": "ben"}))
    with pytest.raises(LabelFileError, match="field 'reviewer': 'ben' is not 'ana'"):
        record_label(path, other_reviewer, fixture)
    outside = LabelDecision.model_validate_json(json.dumps({**EN, "spans": [[0, 500]]}))
    with pytest.raises(LabelFileError, match=r"field 'spans\[0\]'"):
        record_label(path, outside, fixture)
    unknown = LabelDecision.model_validate_json(json.dumps({**EN, "query_id": "q-x"}))
    with pytest.raises(LabelFileError, match="field 'query_id': unknown query"):
        record_label(path, unknown, fixture)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["a.jsonl"]


def test_tasks_default_to_every_judged_pair_in_fixture_order(fixture: Fixture) -> None:
    tasks = load_tasks(fixture, None)
    expected = [(q.query_id, j.chunk_id) for q in fixture.queries for j in q.judgments]
    assert [(t.query_id, t.chunk_id) for t in tasks] == expected
    cross = next(t for t in tasks if t.query_id == "q-en-003")
    assert cross == LabelTask(
        "q-en-003",
        "zh-billing-01",
        "en",  # the query's language, as `evalkit pool` writes it
        "Can I get a refund for an annual subscription?",
        "账单与退款",
        "年度订阅在购买后 14 天内可以申请全额退款。",
    )


def test_tasks_from_a_pool_file_keep_its_order_and_ignore_unknown_keys(tmp_path: Path, fixture: Fixture) -> None:
    path = _write(
        tmp_path / "pool.jsonl",
        {"query_id": "q-zh-001", "language": "zh", "doc_id": "zh-export-01", "chunk_id": "zh-export-01", "x": 1},
        {"query_id": "q-en-001", "doc_id": "en-sync-01", "best_rank": 2, "runs": [{"run": "a", "rank": 2}]},
        {"query_id": "q-en-002", "chunk_id": "en-trash-01"},
    )
    tasks = load_tasks(fixture, path)
    assert [(t.query_id, t.chunk_id, t.language) for t in tasks] == [
        ("q-zh-001", "zh-export-01", "zh"),
        ("q-en-001", "en-sync-01", "en"),
        ("q-en-002", "en-trash-01", "en"),
    ]
    assert tasks[0].chunk_title == "导出笔记"


TASK_REFUSALS = [
    ({"query_id": "q-x", "chunk_id": "en-trash-01"}, "field 'query_id': unknown query 'q-x'"),
    ({"query_id": "q-en-001", "doc_id": "d-x"}, "field 'doc_id': unknown chunk 'd-x'"),
    ({"query_id": "q-en-001", "chunk_id": "c-x"}, "field 'chunk_id': unknown chunk 'c-x'"),
    ({"query_id": "q-en-001"}, "field 'doc_id': unknown chunk None"),
    ({"query_id": "q-en-001", "doc_id": "en-sync-01", "chunk_id": "en-sync-02"}, "field 'doc_id'"),
    ({"query_id": "q-en-001", "chunk_id": "en-sync-01", "language": "zh"}, "field 'language'"),
    ({"query_id": "q-en-002", "chunk_id": "en-sync-02"}, "field 'chunk_id': pair ('q-en-002', 'en-sync-02') is listed"),
    ("{oops", "field '(the whole line)': not JSON"),
]


@pytest.mark.parametrize(("record", "problem"), TASK_REFUSALS)
def test_task_refusals_name_file_line_and_field(tmp_path: Path, fixture: Fixture, record: object, problem: str) -> None:
    path = _write(tmp_path / "pool.jsonl", {"query_id": "q-en-002", "chunk_id": "en-sync-02"}, record)
    with pytest.raises(LabelFileError) as caught:
        load_tasks(fixture, path)
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith(f"pool.jsonl line 2: {problem}"), caught.value.problems


def test_span_text_takes_a_task_or_a_text_and_refuses_bad_spans() -> None:
    task = LabelTask("q", "c", "zh", "问", "题", "月度订阅不支持退款")
    assert span_text(task, [(0, 4), (6, 9)]) == ("月度订阅", "持退款")
    assert span_text("abc", ()) == ()
    for bad in [(2, 2), (3, 1), (0, 10), (-1, 2)]:
        with pytest.raises(ValueError, match="empty, reversed or outside"):
            span_text(task, [bad])


_DECISIONS = st.builds(
    lambda grade, start, length, note, chunk: {
        **EN,
        "chunk_id": chunk,
        "grade": grade,
        "spans": [[start, start + length]] if grade else [],
        **({"note": note} if note is not None else {}),
    },
    st.integers(0, 3),
    st.integers(0, 60),
    st.integers(1, 11),  # the shorter chunk has 71 characters
    st.none() | st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cf", "Cs"]), max_size=30),
    st.sampled_from(["en-trash-01", "en-trash-02"]),
)


@given(st.lists(_DECISIONS, max_size=4, unique_by=lambda d: d["chunk_id"]))
def test_written_decisions_read_back_unchanged(tiny: LoadedFixture, records: list[dict[str, object]]) -> None:
    decisions = tuple(LabelDecision.model_validate_json(json.dumps(r)) for r in records)

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "a.jsonl"
        path.write_bytes(labels_jsonl(decisions))
        assert read_labels(path, tiny.fixture) == decisions


@given(st.text(max_size=200))
def test_any_line_is_read_or_refused_with_its_line_number(tiny: LoadedFixture, line: str) -> None:

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "a.jsonl"
        path.write_text(json.dumps(EN) + "\n" + line.replace("\n", " ") + "\n", encoding="utf-8", errors="replace")
        try:
            read_labels(path, tiny.fixture)
        except LabelFileError as exc:
            assert all(p.startswith(("a.jsonl line ", "a.jsonl: ")) for p in exc.problems), exc.problems


def test_a_label_file_saves_decision_after_decision_without_reading_itself_again(
    tmp_path: Path, fixture: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ana.jsonl"
    _write(path, EN)
    reads: list[Path] = []
    real = labels_module.non_blank_lines  # every label file is read through it
    monkeypatch.setattr(labels_module, "non_blank_lines", lambda *args: (reads.append(args[0]), real(*args))[1])
    labels = LabelFile(path, fixture)
    second = LabelDecision.model_validate_json(json.dumps(ZH))
    changed = LabelDecision.model_validate_json(json.dumps({**EN, "grade": 1}))
    labels.record(second)
    labels.record(changed)
    assert reads == [path]  # read when opened only
    assert path.read_bytes() == labels_jsonl((changed, second))  # a pair decided again keeps its place
    assert list(labels.decisions.values()) == [changed, second]


def test_a_file_deciding_a_query_has_no_answer_and_grading_its_chunk_is_refused(
    tmp_path: Path, fixture: Fixture
) -> None:
    path = _write(tmp_path / "ana.jsonl", EN, {"query_id": "q-en-001", "chunk_id": None, "grade": 0, "reviewer": "ana"})
    with pytest.raises(LabelFileError) as caught:
        read_labels(path, fixture)
    assert caught.value.problems == [
        "ana.jsonl line 2: field 'chunk_id': query 'q-en-001' is decided to have no answer, yet chunk 'en-trash-01' "
        "is graded 3 (line 1): one reviewer's file holds one of the two, never both"
    ]


def test_a_decision_contradicting_the_file_on_a_no_answer_query_is_refused(tmp_path: Path, fixture: Fixture) -> None:
    labels = LabelFile(tmp_path / "ana.jsonl", fixture)
    labels.record(LabelDecision.model_validate_json(json.dumps(EN)))
    no_answer = LabelDecision(query_id="q-en-001", chunk_id=None, grade=0, reviewer="ana")
    with pytest.raises(LabelFileError, match="query 'q-en-001' is decided to have no answer, yet chunk 'en-trash-01'"):
        labels.record(no_answer)
    labels.record(LabelDecision.model_validate_json(json.dumps({**EN, "grade": 0, "spans": []})))  # changed its mind
    labels.record(no_answer)  # now consistent
    with pytest.raises(LabelFileError, match="is graded 2"):
        labels.record(LabelDecision.model_validate_json(json.dumps({**EN, "grade": 2})))
    assert [d.key for d in read_labels(tmp_path / "ana.jsonl", fixture)] == [("q-en-001", "en-trash-01"), no_answer.key]


def test_a_decision_waits_for_another_writer_of_the_folder_and_keeps_its_decision(
    tmp_path: Path, fixture: Fixture
) -> None:
    path = tmp_path / "ana.jsonl"
    mine = LabelFile(path, fixture)
    saved = threading.Event()
    en, zh = (LabelDecision.model_validate_json(json.dumps(r)) for r in (EN, ZH))
    writer = threading.Thread(target=lambda: (mine.record(en), saved.set()))
    with writers_in_turn(tmp_path):  # another process, between its read of the file and its write
        writer.start()
        assert not saved.wait(0.3), "the decision was written while another writer held the folder"
        write_atomic(path, labels_jsonl([zh]))
    writer.join(timeout=30)
    assert saved.is_set()
    assert read_labels(path, fixture) == (zh, en), "the other writer's decision was lost"


def test_a_label_file_written_by_another_process_is_read_again_before_the_next_decision(
    tmp_path: Path, fixture: Fixture
) -> None:
    path = tmp_path / "ana.jsonl"
    mine, theirs = LabelFile(path, fixture), LabelFile(path, fixture)
    mine.record(LabelDecision.model_validate_json(json.dumps(EN)))
    theirs.record(LabelDecision.model_validate_json(json.dumps(ZH)))  # theirs read the file again: EN is kept
    no_answer = LabelDecision(query_id="q-en-004", chunk_id=None, grade=0, reviewer="ana")
    mine.record(no_answer)  # mine reads again: ZH is kept
    assert [d.key for d in read_labels(path, fixture)] == [
        ("q-en-001", "en-trash-01"),
        ("q-zh-001", "zh-export-02"),
        ("q-en-004", None),
    ]
    path.write_text("not json\n", encoding="utf-8")  # changed by hand into something invalid: refused, not overwritten
    with pytest.raises(LabelFileError, match="line 1"):
        mine.record(LabelDecision.model_validate_json(json.dumps({**EN, "grade": 2})))
    assert path.read_text(encoding="utf-8") == "not json\n"


def _chunk_text(fixture: Fixture, chunk_id: str) -> str:
    return next(c.text for c in fixture.chunks if c.chunk_id == chunk_id)


def test_a_decision_on_a_chunk_whose_text_changed_is_refused(fixture: Fixture, tmp_path: Path) -> None:
    made_on = _chunk_text(fixture, "en-trash-01")
    path = tmp_path / "ana.jsonl"
    path.write_bytes(
        labels_jsonl([LabelDecision.model_validate_json(json.dumps({**EN, "chunk_sha256": text_sha256(made_on)}))])
    )
    assert read_labels(path, fixture)[0].chunk_sha256 == text_sha256(made_on)
    changed = fixture.model_copy(
        update={
            "chunks": tuple(
                c.model_copy(update={"text": "Note: " + c.text}) if c.chunk_id == "en-trash-01" else c
                for c in fixture.chunks
            )
        }
    )
    with pytest.raises(
        LabelFileError, match=r"ana\.jsonl line 1: field 'chunk_sha256': the text of chunk 'en-trash-01'"
    ):
        read_labels(path, changed)
    unhashed = tmp_path / "bo.jsonl"
    unhashed.write_bytes(labels_jsonl([LabelDecision.model_validate_json(json.dumps({**EN, "reviewer": "bo"}))]))
    assert read_labels(unhashed, changed)[0].chunk_sha256 is None  # hand-written: checked by length only
    assert b"chunk_sha256" not in unhashed.read_bytes()


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({**EN, "chunk_sha256": "ABC"}, "chunk_sha256"),
        (
            {"query_id": "q-en-004", "chunk_id": None, "grade": 0, "reviewer": "ana", "chunk_sha256": "0" * 64},
            "no-answer",
        ),
        ({**EN, "reviewer": " ana"}, "white space"),
        ({**EN, "reviewer": "ana\u3000"}, "white space"),
    ],
)
def test_a_bad_hash_or_a_padded_reviewer_name_is_refused(record: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        LabelDecision.model_validate_json(json.dumps(record))


def test_reviewer_names_that_differ_only_in_case_or_width_are_one_person() -> None:
    assert same_person("ana", "Ana") and same_person("ana", "\uff41\uff4e\uff41") and same_person("ANA", "ana")
    assert not same_person("ana", "anna")
