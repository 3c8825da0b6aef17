"""The repair accounting of the source readers, the forgiving SQuAD reader, the text policy and the CMRC import."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.app.cli import main
from evalkit.data.fixture import FixtureError, load_fixture, parse_fixture
from evalkit.data.repairs import (
    SUMMARY_FILE,
    ImportSummary,
    RepairLog,
    RepairPolicy,
    SourceFormatError,
    format_import_summary,
)
from evalkit.data.schema import privacy_problem
from evalkit.data.squad import SquadFormatError, forgive_squad, nearest_occurrence, read_squad

from ..conftest import ROOT, TINY_DIR

CMRC = ROOT.parent / "shared" / "data" / "cmrc2018-trial" / "cmrc2018_trial.json"
COMMON = ["--license", "CC-BY-SA-4.0", "--attribution", "Hand-written SQuAD-format test data for evalkit."]
Data = dict[str, Any]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- the log and the policy ---------------------------------------------------------------------------------------


def test_policy_defaults_choices_and_strict() -> None:
    policy = RepairPolicy()
    assert policy.action("answer_offset") == "repair"
    assert policy.action("unknown_key") == "skip"
    assert RepairPolicy.from_choices({"answer_offset": "skip"}).action("answer_offset") == "skip"
    assert RepairPolicy.strict().action("blank_title") == "fail"
    with pytest.raises(ValueError, match="repair policy for 'unknown_key': 'repair' is not one of skip, fail"):
        RepairPolicy.from_choices({"unknown_key": "repair"})


def test_log_counts_keeps_first_examples_and_withholds_private_ids() -> None:
    log = RepairLog(RepairPolicy())
    for index in range(7):
        assert log.note("unknown_key", f"q{index}", f"q{index}: field 'x'") == "skip"
    assert log.note("unknown_key", "/etc/passwd", "private") == "skip"
    repairs = log.repairs()
    assert list(repairs) == ["unknown_key"]
    assert repairs["unknown_key"].count == 8
    assert repairs["unknown_key"].examples == ("q0", "q1", "q2", "q3", "q4")
    withheld = RepairLog(RepairPolicy())
    withheld.note("blank_text", "see /etc/passwd", "private")
    assert withheld.repairs()["blank_text"].examples == ("(withheld ID)",)


def test_log_failures_name_the_flag_and_raise_together() -> None:
    log = RepairLog(RepairPolicy.strict())
    assert log.note("answer_offset", "q1", "question 'q1': field 'answers[0].answer_start': moved") == "fail"
    log.note("blank_title", "article 0", "article 0: field 'title': must not be blank")
    assert log.count("answer_offset") == 0 and log.repairs() == {}
    with pytest.raises(SourceFormatError) as error:
        log.raise_failures("src.json")
    assert error.value.problems == (
        "question 'q1': field 'answers[0].answer_start': moved "
        "(refused as answer_offset; --on-answer-offset repair/skip accepts it)",
        "article 0: field 'title': must not be blank (refused as blank_title; --on-blank-title repair/skip accepts it)",
    )


def test_format_summary_lists_each_kind() -> None:
    log = RepairLog(RepairPolicy())
    log.note("answer_offset", "q1", "p")
    log.note("answer_offset", "q2", "p")
    summary = ImportSummary(
        source_format="squad", documents=1, chunks=2, queries=3, answerable=2, repairs=log.repairs()
    )
    text = format_import_summary(summary)
    assert text.splitlines()[0] == "import summary (squad): 1 documents, 2 chunks, 3 queries (2 answerable)"
    assert text.splitlines()[1].split() == ["answer_offset", "2", "repair", "e.g.", "q1,", "q2"]
    empty = ImportSummary(source_format="beir", documents=1, chunks=1, queries=1, answerable=1, repairs={})
    assert format_import_summary(empty).endswith("no repairs or skips")


# --- the forgiving SQuAD reader -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("context", "text", "start", "window", "expected"),
    [
        ("abcXYZ", "XYZ", 3, 2, 3),
        ("abcXYZ", "XYZ", 4, 2, 3),  # one character after the text
        ("abcXYZ", "XYZ", 1, 2, 3),  # two characters before
        ("abcXYZ", "XYZ", 0, 2, None),  # three away: outside the window
        ("XYaXY", "XY", 1, 2, 0),  # tie at distance 1: the earlier occurrence
        ("aXYbXY", "XY", 3, 2, 4),  # the nearest of two
        ("abc", "XYZ", -1, 8, None),
        ("XYZ", "XYZ", -1, 2, 0),
    ],
)
def test_nearest_occurrence(context: str, text: str, start: int, window: int, expected: int | None) -> None:
    assert nearest_occurrence(context, text, start, window) == expected


def _squad() -> Data:
    context = "The lamp was lit in 1871. Dr. Lin restored it in 1990."
    return {
        "version": "1.1",
        "meta": {"source": "x"},
        "data": [
            {
                "id": "a-1",
                "title": "  ",
                "paragraphs": [
                    {
                        "id": "p-1",
                        "context": context,
                        "qas": [
                            {"id": "ok", "question": "When lit?", "answers": [{"text": "1871", "answer_start": 20}]},
                            {
                                "id": "shifted",
                                "question": "Who restored it?",
                                "answers": [
                                    {"text": "Dr. Lin", "answer_start": 27, "extra": True},
                                    {"text": "gone", "answer_start": -1},
                                ],
                            },
                            {"id": "lost", "question": "Why?", "answers": [{"text": "nowhere", "answer_start": -1}]},
                            {"id": "blank", "question": " ", "answers": [{"text": "1990", "answer_start": 49}]},
                        ],
                    }
                ],
            }
        ],
    }


def test_forgive_squad_repairs_and_skips_by_kind() -> None:
    log = RepairLog(RepairPolicy())
    data = forgive_squad(_squad(), log)
    counts = {kind: item.count for kind, item in log.repairs().items()}
    assert counts == {
        "unknown_key": 4,  # meta, article id, paragraph id, answer extra
        "answer_offset": 1,
        "answer_missing": 2,
        "question_without_answer": 1,
        "blank_question": 1,
        "blank_title": 1,
    }
    assert log.repairs()["answer_offset"].examples == ("shifted",)
    examples = ("top level.meta", "article 0.id", "article 0 paragraph 0.id", "shifted.answers[0].extra")
    assert log.repairs()["unknown_key"].examples == examples
    article = data["data"][0]
    assert article["title"] == "Untitled article 0" and set(article) == {"title", "paragraphs"}
    qas = article["paragraphs"][0]["qas"]
    assert [q["id"] for q in qas] == ["ok", "shifted"]
    assert qas[1]["answers"] == [{"text": "Dr. Lin", "answer_start": 26}]


def test_read_squad_with_a_log_gives_a_valid_dataset(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_squad()), encoding="utf-8")
    with pytest.raises(SquadFormatError, match="Extra inputs are not permitted"):
        read_squad(path)  # without a log the reader stays strict
    dataset = read_squad(path, RepairLog(RepairPolicy()))
    assert [q.id for q in dataset.data[0].paragraphs[0].qas] == ["ok", "shifted"]


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        (["--strict"], "field 'meta': not a SQuAD field (refused as unknown_key; --on-unknown-key skip accepts it)"),
        (
            ["--on-answer-offset", "fail"],
            "question 'shifted': field 'answers[0].answer_start': text 'Dr. Lin' is at 26",
        ),
        (["--on-blank-title", "fail"], "article 0: field 'title': must not be blank"),
        (["--on-answer-missing", "fail"], "question 'lost': field 'answers[0].answer_start': text 'nowhere' is not"),
        (["--on-blank-question", "fail"], "question 'blank': field 'question': must not be blank"),
    ],
)
def test_policy_flags_fail_naming_item_and_field(
    workspace: Path, capsys: pytest.CaptureFixture[str], flag: list[str], expected: str
) -> None:
    (workspace / "s.json").write_text(json.dumps(_squad()), encoding="utf-8")
    argv = ["import", "squad", "s.json", "--output-dir", "fx", "--fixture-id", "x", "--language", "en", *COMMON]
    assert main([*argv, *flag]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert not (workspace / "fx").exists()


def test_import_prints_and_writes_the_summary(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _squad()
    data["data"][0]["paragraphs"].append(
        {
            "context": "A second paragraph about the keeper in 1901.",
            "qas": [{"id": "k", "question": "When?", "answers": [{"text": "1901", "answer_start": 39}]}],
        }
    )
    (workspace / "s.json").write_text(json.dumps(data), encoding="utf-8")
    argv = ["import", "squad", "s.json", "--output-dir", "fx", "--fixture-id", "x", "--language", "en", *COMMON]
    assert main([*argv, "--held-out-fraction", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "import summary (squad): 1 documents, 1 chunks, 3 queries (2 answerable)" in out
    assert "answer_offset                 1 repair e.g. shifted" in out
    summary = ImportSummary.model_validate_json((workspace / "fx" / SUMMARY_FILE).read_text(encoding="utf-8"))
    assert summary.repairs["blank_title"].count == 1
    assert load_fixture(workspace / "fx").fixture.documents[0].title == "Untitled article 0"


# --- the text policy ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("编号 1-3.1.4.2 的亚种", None),  # taxonomic numbering after a hyphen
        ("section 1.2.3.4.5", None),  # inside a longer dotted token
        ("v1.2.3.4", None),
        ("地址10.0.0.1", "a host address"),
        ("server 10.0.0.1.", "a host address"),
        ("host 10.0.0.1:8080 here", "a host address"),
    ],
)
def test_ipv4_rule(text: str, expected: str | None) -> None:
    assert privacy_problem(text) == expected


@pytest.mark.parametrize(
    ("text", "strict", "allowed"),
    [
        ("见 https://example.org/page", "a URL or endpoint", None),
        ("file at /etc/hosts today", "a filesystem path", None),
        ("host 10.0.0.1 here", "a host address", None),
        ("mail alice@example.com", "an e-mail address", "an e-mail address"),
        ("token: abcdef123456", "a secret (API key, token or private key)", "a secret (API key, token or private key)"),
        (
            "-----BEGIN RSA PRIVATE KEY-----",
            "a secret (API key, token or private key)",
            "a secret (API key, token or private key)",
        ),
    ],
)
def test_links_allowed_keeps_credentials_refused(text: str, strict: str, allowed: str | None) -> None:
    assert privacy_problem(text) == strict
    assert privacy_problem(text, allow_links=True) == allowed


def _fixture_with(text: str, policy: str | None) -> str:
    data = json.loads((TINY_DIR / "fixture.json").read_text(encoding="utf-8"))
    data["chunks"][0]["text"] += f" {text}"
    data["queries"][0]["text"] += f" {text}"
    if policy is not None:
        data["text_policy"] = policy
    return json.dumps(data, ensure_ascii=False)


def test_fixture_text_policy() -> None:
    with pytest.raises(FixtureError, match="--allow-links-in-text") as error:
        parse_fixture(_fixture_with("https://example.org", None))
    assert len(error.value.problems) == 2  # the chunk and the query
    fixture = parse_fixture(_fixture_with("https://example.org", "links_allowed"))
    assert fixture.text_policy == "links_allowed"
    assert fixture.model_dump()["text_policy"] == "links_allowed"
    with pytest.raises(FixtureError) as secret:
        parse_fixture(_fixture_with("api_key=abcdef123456", "links_allowed"))
    assert "--allow-links-in-text" not in str(secret.value)
    strict = parse_fixture(_fixture_with("plain words", None))
    assert "text_policy" not in strict.model_dump()  # strict fixtures dump as before the policy existed


def test_links_policy_does_not_reach_ids_or_titles() -> None:
    data = json.loads(_fixture_with("plain", "links_allowed"))
    data["documents"][0]["title"] = "see https://example.org"
    with pytest.raises(FixtureError, match="field 'title': looks like a URL"):
        parse_fixture(json.dumps(data))


def _squad_with_link(text: str, in_question: bool = True) -> Data:
    context = f"The lamp was lit in 1871, see {text} for more."
    question = {"id": "q1", "question": "When lit?", "answers": [{"text": "1871", "answer_start": 20}]}
    asked = {
        "id": "q2",
        "question": f"When ({text})?" if in_question else "When?",
        "answers": [{"text": "1901", "answer_start": 16}],
    }
    other = {"context": "Keepers came in 1901.", "qas": [asked]}
    return {"data": [{"title": "Lamp", "paragraphs": [{"context": context, "qas": [question]}, other]}]}


def test_allow_links_in_text_flag(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workspace / "s.json").write_text(json.dumps(_squad_with_link("https://example.org/lamp")), encoding="utf-8")
    argv = ["import", "squad", "s.json", "--output-dir", "fx", "--fixture-id", "x", "--language", "en", *COMMON]
    argv += ["--held-out-fraction", "0.5", "--seed", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "looks like a URL or endpoint" in err and "--allow-links-in-text" in err
    assert not (workspace / "fx").exists()
    assert main([*argv, "--allow-links-in-text"]) == 0
    out = capsys.readouterr().out
    summary = ImportSummary.model_validate_json((workspace / "fx" / SUMMARY_FILE).read_text(encoding="utf-8"))
    fixture = load_fixture(workspace / "fx").fixture
    held_out = {int(i) for i in np.random.default_rng(1).choice(2, size=1, replace=False)}
    # The link paragraph is counted when it stays in the corpus; the question that cites the link always is.
    expected = 1 + (0 not in held_out)
    assert summary.repairs["links_in_text"].count == expected
    assert sum("https://" in c.text for c in fixture.chunks) == expected - 1
    assert sum("https://" in q.text for q in fixture.queries) == 1
    assert f"links_in_text {expected} repair" in " ".join(out.split())


def test_credentials_are_refused_even_with_links_allowed(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = "sk-live-" + "a" * 24
    (workspace / "s.json").write_text(json.dumps(_squad_with_link(secret, in_question=False)), encoding="utf-8")
    argv = ["import", "squad", "s.json", "--output-dir", "fx", "--fixture-id", "x", "--language", "en", *COMMON]
    assert main([*argv, "--held-out-fraction", "0.5", "--allow-links-in-text"]) == 2
    assert "a secret" in capsys.readouterr().err
    assert not (workspace / "fx").exists()
    assert main([*argv, "--held-out-fraction", "0", "--allow-links-in-text", "--private-paragraphs", "hold_out"]) == 0
    assert all(secret not in c.text for c in load_fixture(workspace / "fx").fixture.chunks)


# --- the CMRC 2018 trial file -------------------------------------------------------------------------------------


@pytest.mark.skipif(not CMRC.exists(), reason=f"CMRC 2018 trial file not found at {CMRC}")
@pytest.mark.parametrize(("chunking", "chunks"), [("paragraph", 230), ("sentence", 987)])
def test_cmrc_trial_imports_in_one_command(
    workspace: Path, capsys: pytest.CaptureFixture[str], chunking: str, chunks: int
) -> None:
    argv = ["import", "squad", str(CMRC), "--language", "zh", "--chunking", chunking, "--output-dir", "fx"]
    assert main([*argv, "--fixture-id", "cmrc2018-trial", *COMMON]) == 0
    out = capsys.readouterr().out
    assert "import summary (squad): 256 documents" in out
    summary = ImportSummary.model_validate_json((workspace / "fx" / SUMMARY_FILE).read_text(encoding="utf-8"))
    counts = {kind: item.count for kind, item in summary.repairs.items()}
    # Articles and paragraphs carry 'id' keys; five answers of TRIAL_210 sit one character before their offsets;
    # two questions are blank.
    assert counts == {"unknown_key": 512, "answer_offset": 5, "blank_question": 2}
    assert summary.repairs["answer_offset"].examples == tuple(f"TRIAL_210_QUERY_{i}" for i in range(5))
    fixture = load_fixture(workspace / "fx").fixture  # spans verbatim: the strict schema checked them
    assert (len(fixture.documents), len(fixture.chunks), len(fixture.queries)) == (256, chunks, 1000)
    assert (summary.documents, summary.chunks, summary.queries) == (256, chunks, 1000)
    assert summary.answerable == sum(1 for q in fixture.queries if q.answerable)


@pytest.mark.skipif(not CMRC.exists(), reason=f"CMRC 2018 trial file not found at {CMRC}")
def test_cmrc_trial_strict_import_is_refused(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["import", "squad", str(CMRC), "--language", "zh", "--output-dir", "fx", "--fixture-id", "c", *COMMON]
    assert main([*argv, "--strict"]) == 2
    err = capsys.readouterr().err
    assert "519 problem(s)" in err and "--on-unknown-key skip" in err
    assert not (workspace / "fx").exists()


_KEYS = [
    "data",
    "version",
    "title",
    "paragraphs",
    "context",
    "qas",
    "id",
    "question",
    "answers",
    "text",
    "answer_start",
    "is_impossible",
    "x",
]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 60) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4),
    max_leaves=25,
)


@given(st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=3))
@settings(max_examples=200, deadline=None)
def test_forgiving_reader_raises_only_format_errors(raw: Data) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.json"
        path.write_text(json.dumps(raw), encoding="utf-8")
        try:
            dataset = read_squad(path, RepairLog(RepairPolicy()))
        except SquadFormatError as error:
            assert error.problems
        else:
            for article in dataset.data:
                for paragraph in article.paragraphs:
                    for question in paragraph.qas:
                        for answer in question.answers:
                            found = paragraph.context[answer.answer_start : answer.answer_start + len(answer.text)]
                            assert found == answer.text
