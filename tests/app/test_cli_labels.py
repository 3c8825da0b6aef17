"""`evalkit labels agree` and `evalkit labels merge`: exit 0 with the agreement or the new fixture folder, exit 2 with
one message naming the problem and nothing written for bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalkit.app.cli import main
from evalkit.data.fixture import load_fixture

from ..conftest import SYNTHETIC_DIR, TINY_DIR

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


def _line(query: str, chunk: str | None, grade: int, spans: list[list[int]], who: str) -> str:
    record = {"query_id": query, "chunk_id": chunk, "grade": grade, "spans": spans, "reviewer": who}
    return json.dumps(record, ensure_ascii=False) + "\n"


ANA = [
    ("q-en-001", "en-trash-01", 3, [[14, 43]]),
    ("q-en-001", "en-trash-02", 1, [[21, 36]]),
    ("q-zh-001", "zh-export-02", 3, [[0, 18]]),
    ("q-en-004", None, 0, []),
]
BEN = [
    ("q-en-001", "en-trash-01", 3, [[36, 43]]),  # spans below the bound
    ("q-en-001", "en-trash-02", 2, [[21, 36]]),  # grade differs
    ("q-zh-001", "zh-export-02", 3, [[0, 18]]),
    ("q-en-004", None, 0, []),
]
CY = [("q-en-001", "en-trash-01", 3, [[14, 43]]), ("q-en-001", "en-trash-02", 1, [[21, 36]])]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copytree(TINY_DIR, tmp_path / "fx")
    shutil.copy(SYNTHETIC_DIR / "gates.json", tmp_path / "fx" / "gates.json")
    shutil.copy(SYNTHETIC_DIR / "baselines.json", tmp_path / "fx" / "baselines.json")
    (tmp_path / "fx" / "LICENSE").write_text("CC0-1.0\n", encoding="utf-8")
    for name, rows, who in (("ana", ANA, "ana"), ("ben", BEN, "ben"), ("cy", CY, "cy")):
        (tmp_path / f"{name}.jsonl").write_text("".join(_line(*row, who) for row in rows), encoding="utf-8")
    return tmp_path


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    return {p.relative_to(folder).as_posix(): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


AGREE = ["labels", "agree", "ana.jsonl", "ben.jsonl", "--fixture", "fx"]
MERGE = ["labels", "merge", "--fixture", "fx", "ana.jsonl", "ben.jsonl", "--version", "1.1.0", "--output-dir", "new"]


def test_agree_prints_the_table_and_every_disagreement(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(AGREE) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "agreement of 'ana' (A) and 'ben' (B), span overlap bound 0.5"
    assert lines[2].split()[:3] == ["all", "4", "0.7500"]
    assert "disagreements: 2" in out
    assert "  q-en-001 en-trash-01 [en]: grade 3 / 3, spans [[14, 43]] / [[36, 43]], overlap F1 0.44" in lines
    assert "  q-en-001 en-trash-02 [en]: grade 1 / 2, spans [[21, 36]] / [[21, 36]], overlap F1 1.00" in lines
    assert "zh alpha: one grade only" in out  # the zh slice: one pair, grade 3 from both
    assert "trash for 30 days" not in out  # IDs and offsets only: no fixture text


def test_agree_lists_the_chunks_one_reviewer_decided_which_a_merge_refuses(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with (workspace / "ben.jsonl").open("a", encoding="utf-8") as more:
        more.write(_line("q-zh-002", "zh-billing-02", 2, [[0, 4]], "ben"))
    assert main(AGREE) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("decided by one reviewer only: 1 (a merge needs each adjudicated)")
    assert lines[at + 1] == "  q-zh-002 zh-billing-02 [zh]: grade - / 2, spans [] / [[0, 4]]"
    assert main([*MERGE[:-2], "--adjudicated", "cy.jsonl", "--output-dir", "new"]) == 2
    assert "  - query 'q-zh-002', chunk 'zh-billing-02': only 'ben' (grade 2) decided it" in capsys.readouterr().err


def test_agree_json_has_exactly_the_documented_keys_and_output_holds_it(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*AGREE, "--format", "json"]) == 0
    printed = capsys.readouterr().out
    data = json.loads(printed)
    assert set(data) == KEYS | {"by_language", "one_sided"}
    assert {key: set(row) for key, row in data["by_language"].items()} == {"en": KEYS, "zh": KEYS}
    assert [(d["query_id"], d["chunk_id"]) for d in data["disagreements"]] == [
        ("q-en-001", "en-trash-01"),
        ("q-en-001", "en-trash-02"),
    ]
    assert main([*AGREE, "--output", "out/agreement.json"]) == 0
    assert (workspace / "out" / "agreement.json").read_text(encoding="utf-8") == printed
    assert capsys.readouterr().out.endswith("agreement written to out/agreement.json\n")
    assert main([*AGREE, "--format", "json", "--overlap-bound", "0.4"]) == 0
    assert len(json.loads(capsys.readouterr().out)["disagreements"]) == 1
    assert main([*AGREE, "--format", "json", "--output", "out/again.json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == data  # stdout stays one JSON document
    assert captured.err == "agreement written to out/again.json\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["labels", "agree", "ana.jsonl", "ana.jsonl", "--fixture", "fx"], "both label files are by reviewer 'ana'"),
        ([*AGREE, "--output", "ana.jsonl"], "it is an input of this run"),
        ([*AGREE, "--output", "/tmp/agreement.json"], "absolute paths are not allowed"),
        ([*AGREE, "--overlap-bound", "1.5"], "the overlap bound must be a number in [0, 1]"),
        (["labels", "agree", "ana.jsonl", "missing.jsonl", "--fixture", "fx"], "missing.jsonl: file not found"),
        (["labels", "agree", "ana.jsonl", "bad.jsonl", "--fixture", "fx"], "bad.jsonl line 2: field 'grade': grade 7"),
    ],
)
def test_agree_refusals_exit_2_and_write_nothing(
    workspace: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (workspace / "bad.jsonl").write_text(_line(*BEN[0], "ben") + _line("q-en-002", "en-sync-02", 7, [], "ben"))
    before = _snapshot(workspace)
    assert main([*argv, "--output", "out/agreement.json"] if "--output" not in argv else argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("evalkit: ") and "Traceback" not in err
    assert _snapshot(workspace) == before


def test_merge_counts_a_no_answer_decision_the_adjudicator_overruled_as_dropped(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ben says no chunk answers q-zh-002; cy grades its chunk 3: ben's decision is dropped, not counted as merged."""
    with (workspace / "ben.jsonl").open("a", encoding="utf-8") as ben:
        ben.write(_line("q-zh-002", None, 0, [], "ben"))
    with (workspace / "cy.jsonl").open("a", encoding="utf-8") as cy:
        cy.write(_line("q-zh-002", "zh-billing-02", 3, [[0, 4]], "cy"))
    assert main([*MERGE, "--adjudicated", "cy.jsonl"]) == 0
    out = capsys.readouterr().out
    assert (
        "5 pair(s) merged, 3 of them adjudicated; 1 no-answer decision(s) dropped, the adjudicator having graded a "
        "chunk of the query"
    ) in out
    merged = next(q for q in load_fixture(workspace / "new").fixture.queries if q.query_id == "q-zh-002")
    assert [(j.chunk_id, j.grade) for j in merged.judgments][:1] == [("zh-billing-02", 3)]
    with (workspace / "ana.jsonl").open("a", encoding="utf-8") as ana:  # ana says so too: two decisions dropped
        ana.write(_line("q-zh-002", None, 0, [], "ana"))
    assert main([*MERGE[:-1], "new2", "--adjudicated", "cy.jsonl"]) == 0
    assert "; 2 no-answer decision(s) dropped" in capsys.readouterr().out


def test_merge_writes_the_new_fixture_folder(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*MERGE, "--adjudicated", "cy.jsonl"]) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in (workspace / "new").iterdir()) == [
        "LICENSE",
        "aliases.json",
        "fixture.json",
        "gates.json",
    ]
    assert "baselines.json not copied" in out
    assert "fixture tiny-bilingual 1.1.0 (from 1.0.0): 4 pair(s) merged, 2 of them adjudicated" in out
    for name in ("LICENSE", "aliases.json", "gates.json"):
        assert (workspace / "new" / name).read_bytes() == (workspace / "fx" / name).read_bytes()
    loaded = load_fixture(workspace / "new")
    assert loaded.fixture.fixture_version == "1.1.0"
    zh = next(q for q in loaded.fixture.queries if q.query_id == "q-zh-001")
    assert zh.judgments[0].spans[0].text == "批量导出一次最多包含 500 篇笔记"
    assert main(["validate", "new"]) == 0
    first = _snapshot(workspace / "new")
    shutil.rmtree(workspace / "new")
    assert main([*MERGE, "--adjudicated", "cy.jsonl"]) == 0
    assert _snapshot(workspace / "new") == first  # the same bytes every time


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "cannot merge the labels: 2 problem(s)"),
        (["--adjudicated", "cy.jsonl", "--version", "1.0.0"], "the new version 1.0.0 is the fixture's own"),
        (["--adjudicated", "cy.jsonl", "--version", "1.1"], "MAJOR.MINOR.PATCH"),
        (["--adjudicated", "cy.jsonl", "--output-dir", "fx"], "it is an input of this run"),
        (["--adjudicated", "cy.jsonl", "--output-dir", "taken"], "the output folder exists and is not empty"),
        (["--adjudicated", "cy.jsonl", "--output-dir", "../escape"], "'..' components are not allowed"),
        (["--adjudicated", "missing.jsonl"], "missing.jsonl: file not found"),
    ],
)
def test_merge_refusals_exit_2_and_write_nothing(
    workspace: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    (workspace / "taken").mkdir()
    (workspace / "taken" / "notes.txt").write_text("mine", encoding="utf-8")
    before = _snapshot(workspace)
    assert main([*MERGE, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err
    assert _snapshot(workspace) == before


def test_merge_lists_every_undecided_pair(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(MERGE) == 2
    err = capsys.readouterr().err
    assert "  - query 'q-en-001', chunk 'en-trash-01': grade 3 from both" in err
    assert "  - query 'q-en-001', chunk 'en-trash-02': grade 1 by 'ana', 2 by 'ben'" in err


def test_merge_into_an_existing_empty_folder(workspace: Path) -> None:
    (workspace / "new").mkdir()
    assert main([*MERGE, "--adjudicated", "cy.jsonl"]) == 0
    assert (workspace / "new" / "fixture.json").is_file()


def test_labels_needs_an_action(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["labels"])
    assert caught.value.code == 2
    with pytest.raises(SystemExit) as caught:
        main(["labels", "merge", "--fixture", "fx", "ana.jsonl", "ben.jsonl", "--output-dir", "new"])
    assert caught.value.code == 2
    assert "--version" in capsys.readouterr().err


def test_agree_notes_the_fixtures_answer_to_a_query_called_unanswered(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both say q-zh-002 has no answer; the fixture answers it with zh-billing-02, which no pool shows again: no
    disagreement of theirs, yet the merge refuses the query until the adjudicator grades that chunk."""
    for name, who in (("ana.jsonl", "ana"), ("ben.jsonl", "ben")):
        with (workspace / name).open("a", encoding="utf-8") as labels:
            labels.write(_line("q-zh-002", None, 0, [], who))
    assert main(AGREE) == 0
    out = capsys.readouterr().out
    assert "note: 1 chunk(s) the fixture answers a query with that a reviewer called unanswered" in out
    assert "first: q-zh-002/zh-billing-02" in out
