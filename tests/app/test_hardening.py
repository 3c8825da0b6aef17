"""Hostile and careless use of the CLI and the notebook runner: ambiguity refused, nothing written on a refusal.

Each test mirrors a finding of issue 14: control characters, secret-shaped IDs, non-ASCII digits, baselines that
would switch the gates off, output paths that are inputs, refused runs that leave folders, and messages that do not
name their file or option. A property test mutates the tiny fixture at random and checks that ``validate`` never
crashes.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import io
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalkit.app.cli import main
from evalkit.app.headless import NotebookParameterError, check_notebook_run, run_notebook
from evalkit.data.fixture import FixtureError, load_fixture
from evalkit.data.schema import text_problem
from evalkit.reporting.gate_specs import MAX_BASELINE_TOLERANCE
from evalkit.reporting.gates import load_baselines

from ..conftest import ROOT, TINY_DIR

GOOGLE_KEY = "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"
GITLAB_TOKEN = "glpat-aB3dE5fG7hJ9kL1mN3pQ"


def _tiny() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((TINY_DIR / "fixture.json").read_text(encoding="utf-8"))
    return data


def _write(folder: Path, data: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fixture.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return folder


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def _tree(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


# --- control and bidirectional characters --------------------------------------------------------------------


@pytest.mark.parametrize("char", ["\u0000", "\u202e", "\u2066", "\u001b", "\u0085"])
def test_control_and_bidi_characters_are_refused_naming_record_and_field(tmp_path: Path, char: str) -> None:
    data = _tiny()
    data["queries"][1]["text"] = f"where is{char} the trash"
    with pytest.raises(FixtureError) as info:
        load_fixture(_write(tmp_path, data))
    message = str(info.value)
    assert f"query {data['queries'][1]['query_id']!r}: field 'text'" in message
    assert f"U+{ord(char):04X}" in message


def test_ordinary_whitespace_is_allowed() -> None:
    assert text_problem("line one\nline two\tand\r\n three") is None
    assert text_problem("中文\u3000全角空格") is None


def test_control_character_in_alias_term_is_refused(tmp_path: Path) -> None:
    folder = _write(tmp_path, _tiny())
    aliases = json.loads((TINY_DIR / "aliases.json").read_text(encoding="utf-8"))
    aliases["groups"][0]["terms"].append("tr\u202eash")
    (folder / "aliases.json").write_text(json.dumps(aliases), encoding="utf-8")
    with pytest.raises(FixtureError, match="U\\+202E"):
        load_fixture(folder)


# --- secret-shaped IDs ---------------------------------------------------------------------------------------


def test_google_key_shaped_query_id_is_refused_by_position_not_echoed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _tiny()
    data["queries"][2]["query_id"] = GOOGLE_KEY
    code, out, err = _cli(capsys, "validate", str(_write(tmp_path, data)))
    assert code == 2
    assert "query at queries[2]: field 'query_id'" in err
    assert "secret" in err
    assert GOOGLE_KEY not in out + err


def test_gitlab_token_shaped_chunk_id_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _tiny()
    old = data["chunks"][0]["chunk_id"]
    data["chunks"][0]["chunk_id"] = GITLAB_TOKEN
    for query in data["queries"]:
        for judgment in query["judgments"]:
            if judgment["chunk_id"] == old:
                judgment["chunk_id"] = GITLAB_TOKEN
    code, _, err = _cli(capsys, "validate", str(_write(tmp_path, data)))
    assert code == 2
    assert "chunk at chunks[0]: field 'chunk_id'" in err
    assert GITLAB_TOKEN not in err


@pytest.mark.parametrize(
    "token",
    [
        "github_pat_11ABCDEFG0123456789_abcdefghijkl",
        "sk-proj-abcdefghijklmnop1234",
        "hf_abcdefghijklmnopqrstuvwxyz012345",
        "ya29.a0AfH6SMBabcdefghijklmnop",
        "ASIAABCDEFGHIJKLMNOP",
    ],
)
def test_more_token_shapes_are_refused_as_ids(tmp_path: Path, token: str) -> None:
    data = _tiny()
    data["fixture_id"] = token
    with pytest.raises(FixtureError, match="secret"):
        load_fixture(_write(tmp_path, data))


def test_ordinary_ids_that_resemble_prefixes_pass(tmp_path: Path) -> None:
    data = _tiny()
    data["fixture_id"] = "AIza-short"
    data["queries"][0]["query_id"] = "glpat-1"
    assert load_fixture(_write(tmp_path, data)).fixture.fixture_id == "AIza-short"


# --- versions and case -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["\u0661.\u0660.\u0660", "1.0.\u0660", "１.0.0"])
def test_fixture_version_takes_ascii_digits_only(tmp_path: Path, version: str) -> None:
    data = _tiny()
    data["fixture_version"] = version
    with pytest.raises(FixtureError, match="fixture_version"):
        load_fixture(_write(tmp_path, data))


def test_ids_that_differ_only_in_case_are_distinct_ids(tmp_path: Path) -> None:
    # Decided and documented in the README: IDs are case-sensitive, compared exactly, and never used as file names.
    data = _tiny()
    extra = copy.deepcopy(data["chunks"][0])
    extra["chunk_id"] = extra["chunk_id"].upper()
    data["chunks"].append(extra)
    loaded = load_fixture(_write(tmp_path, data))
    ids = {c.chunk_id for c in loaded.fixture.chunks}
    assert extra["chunk_id"] in ids and extra["chunk_id"].lower() in ids


# --- baselines -----------------------------------------------------------------------------------------------


def _baselines(tolerance: str) -> str:
    head = '{"fixture_id": "tiny-bilingual", "fixture_version": "1.0.0", "tolerance": '
    return head + tolerance + ', "ablations": {}}'


@pytest.mark.parametrize("tolerance", ["Infinity", "NaN", "1e308", "0.5", "-0.1"])
def test_baseline_tolerance_must_be_finite_and_small(tmp_path: Path, tolerance: str) -> None:
    (tmp_path / "baselines.json").write_text(_baselines(tolerance), encoding="utf-8")
    with pytest.raises(ValueError, match=r"baselines\.json") as info:
        load_baselines(tmp_path)
    assert "tolerance" in str(info.value) or tolerance in str(info.value)
    assert "validation error for" not in str(info.value)


def test_small_tolerance_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "baselines.json").write_text(_baselines(str(MAX_BASELINE_TOLERANCE)), encoding="utf-8")
    baselines = load_baselines(tmp_path)
    assert baselines is not None and baselines.tolerance == MAX_BASELINE_TOLERANCE


def test_validate_reads_baselines_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _write(tmp_path / "fx", _tiny())
    shutil.copy(TINY_DIR / "aliases.json", folder / "aliases.json")
    (folder / "baselines.json").write_text(_baselines("Infinity"), encoding="utf-8")
    code, _, err = _cli(capsys, "validate", str(folder))
    assert code == 2 and "baselines.json" in err and "Infinity" in err
    (folder / "baselines.json").write_text(_baselines("0.001").replace("1.0.0", "2.0.0"), encoding="utf-8")
    code, _, err = _cli(capsys, "validate", str(folder))
    assert code == 2 and "regenerate" in err
    (folder / "baselines.json").write_text(_baselines("0.001"), encoding="utf-8")
    code, out, _ = _cli(capsys, "validate", str(folder))
    assert code == 0 and "baselines.json matches" in out


def test_invalid_utf8_in_baselines_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _write(tmp_path / "fx", _tiny())
    (folder / "baselines.json").write_bytes(b'{"fixture_id": "\xff"}')
    code, _, err = _cli(capsys, "validate", str(folder))
    assert code == 2
    assert "baselines.json" in err and "UTF-8" in err


# --- options named in messages -------------------------------------------------------------------------------


def test_threshold_error_names_the_option_without_a_pydantic_dump(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "run", "--fixture", str(TINY_DIR), "--min-reranked-mrr-at-10", "nan")
    assert code == 2
    assert "--min-reranked-mrr-at-10" in err
    assert "validation error for" not in err and "type=" not in err


def test_negative_seed_names_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    squad = ROOT / "tests" / "fixtures" / "squad" / "tiny.en.json"
    argv = ["import", "squad", str(squad), "--output-dir", "fx", "--fixture-id", "t", "--language", "en"]
    code, _, err = _cli(capsys, *argv, "--license", "CC0-1.0", "--attribution", "test", "--seed", "-1")
    assert code == 2
    assert "--seed" in err
    assert "validation error for" not in err


# --- outputs -------------------------------------------------------------------------------------------------


def test_output_that_is_the_fixture_itself_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copytree(TINY_DIR, tmp_path / "ownfix")
    before = (tmp_path / "ownfix" / "fixture.json").read_bytes()
    code, _, err = _cli(capsys, "run", "--fixture", "ownfix", "--runs", "1", "--output", "ownfix/fixture.json")
    assert code == 2
    assert "input of this run" in err
    assert (tmp_path / "ownfix" / "fixture.json").read_bytes() == before


def test_output_that_is_the_squad_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "squad" / "tiny.en.json", tmp_path / "in" / "fixture.json")
    before = (tmp_path / "in" / "fixture.json").read_bytes()
    argv = ["import", "squad", "in/fixture.json", "--output-dir", "in", "--fixture-id", "t", "--language", "en"]
    code, _, err = _cli(capsys, *argv, "--license", "CC0-1.0", "--attribution", "test")
    assert code == 2 and "input of this run" in err
    assert (tmp_path / "in" / "fixture.json").read_bytes() == before


@pytest.mark.parametrize(
    "output",
    [
        "newdir/" + "/".join(["d"] * 20) + "/" + "x" * 300,  # a name too long at the end of 20 new folders
        "newdir/sub/",
        "newdir/../x.json",
    ],
)
def test_refused_run_leaves_the_workspace_as_it_found_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, _ = _cli(capsys, "run", "--fixture", str(TINY_DIR), "--runs", "1", "--output", output)
    assert code == 2
    assert _tree(tmp_path) == []


def test_refused_run_with_invalid_fixture_creates_no_output_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = _tiny()
    data["queries"][0]["judgments"][0]["grade"] = 99
    _write(tmp_path / "bad", data)
    before = _tree(tmp_path)
    code, _, err = _cli(capsys, "run", "--fixture", "bad", "--output", "out/deep/r.json")
    assert code == 2 and "grade" in err
    assert _tree(tmp_path) == before


def test_disk_full_names_the_requested_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    code, _, err = _cli(
        capsys, "run", "--fixture", str(TINY_DIR), "--runs", "1", "--no-gates", "--no-cache", "--output", "o/r.json"
    )
    assert code == 2
    assert "cannot write 'o/r.json': No space left on device" in err
    assert "[Errno" not in err
    assert _tree(tmp_path) == []


# --- notebook runs -------------------------------------------------------------------------------------------


@pytest.mark.slow  # executes a notebook
@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("runs", 0, "runs"),
        ("ablations", [], "no ablation selected"),
        ("report_output", "/tmp/escape.json", "absolute"),
        ("figures_dir", "../figures", "'..'"),
        ("fixture", str(ROOT / "fixtures" / "synthetic-bilingual-v1"), "relative to the project root"),
        ("max_no_answer_fpr", float("inf"), "max_no_answer_fpr"),
    ],
)
@pytest.mark.timeout(120)  # refused before any kernel starts: a hang fails this test, not the whole run
def test_refused_notebook_run_creates_nothing(name: str, value: object, fragment: str) -> None:
    run_id = f"pytest-refused-{uuid.uuid4().hex[:8]}"
    with pytest.raises(NotebookParameterError, match=fragment):
        run_notebook(ROOT, {name: value}, run_id=run_id)
    assert not (ROOT / "reports" / run_id).exists()


def test_run_id_reuse_is_refused_unless_asked(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / "retrieval_evaluation.ipynb", project / "notebooks")
    (project / "reports" / "earlier").mkdir(parents=True)
    (project / "fixtures" / "synthetic-bilingual-v1").mkdir(parents=True)  # the default fixture parameter's folder
    source = project / "notebooks" / "retrieval_evaluation.ipynb"
    with pytest.raises(NotebookParameterError, match="was used before"):
        check_notebook_run(project, source, {}, "earlier")
    values = check_notebook_run(project, source, {}, "earlier", replace=True)
    assert values["report_output"] == "reports/earlier/report.json"
    with pytest.raises(NotebookParameterError, match="run ID"):
        check_notebook_run(project, source, {}, "../escape")


def test_a_failed_rerun_in_place_leaves_no_output_of_the_earlier_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--replace-run into a folder holding an earlier run's report and figures: when the rerun fails before it
    writes its own, none of the earlier ones stays beside the new notebook, or is listed as the rerun's."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    (project / "evalkit").mkdir()
    (project / "pyproject.toml").write_text("", encoding="utf-8")
    shutil.copy(ROOT / "notebooks" / "retrieval_evaluation.ipynb", project / "notebooks")
    (project / "fixtures" / "synthetic-bilingual-v1").mkdir(parents=True)
    earlier = project / "reports" / "earlier"
    (earlier / "figures").mkdir(parents=True)
    (earlier / "report.json").write_text("{}", encoding="utf-8")
    (earlier / "figures" / "latency.png").write_bytes(b"old")

    def failing(source: str, output: str, **_: object) -> None:
        shutil.copy(source, output)
        raise PapermillExecutionError(0, 1, "boom()", "RuntimeError", "boom", [])

    monkeypatch.setattr(papermill, "execute_notebook", failing)
    run = run_notebook(project, {}, run_id="earlier", replace=True)
    assert run.error_name == "RuntimeError" and run.report is None and run.figures == ()
    assert not (earlier / "report.json").exists() and not (earlier / "figures").exists()
    assert run.notebook.exists()


# --- property: validate never crashes ------------------------------------------------------------------------

_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(_paths(value, (*prefix, index)))
    return found


def _mutate(data: Any, draw: st.DataObject) -> Any:
    paths = [p for p in _paths(data) if p]
    path = draw.draw(st.sampled_from(paths))
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    kind = draw.draw(st.sampled_from(["replace", "delete", "perturb"]))
    last = path[-1]
    if kind == "delete":
        del parent[last]
    elif kind == "replace":
        parent[last] = draw.draw(_VALUES)
    elif isinstance(parent[last], str):
        text = parent[last]
        at = draw.draw(st.integers(0, len(text)))
        parent[last] = text[:at] + draw.draw(st.text(min_size=1, max_size=3)) + text[at:]
    else:
        parent[last] = draw.draw(_VALUES)
    return data


@pytest.mark.timeout(300)  # 60 examples of a validate that takes milliseconds: a hang fails the test
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_validate_accepts_or_exits_2_never_a_traceback(data: st.DataObject) -> None:
    fixture = _tiny()
    for _ in range(data.draw(st.integers(1, 3))):
        fixture = _mutate(fixture, data)
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(__import__("tempfile").TemporaryDirectory()))
        (folder / "fixture.json").write_text(json.dumps(fixture, ensure_ascii=False), encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["validate", str(folder)])
    assert "Traceback" not in out.getvalue() + err.getvalue()
    if code == 0:
        assert "is valid" in out.getvalue()
    else:
        assert code == 2
        assert err.getvalue().startswith("evalkit: ")


@pytest.fixture
def notebook_run_id() -> Any:
    name = f"pytest-hardening-{uuid.uuid4().hex[:8]}"
    yield name
    shutil.rmtree(ROOT / "reports" / name, ignore_errors=True)


@pytest.mark.slow  # executes a notebook
def test_notebook_runs_an_ablation_subset_without_gates(notebook_run_id: str) -> None:
    run = run_notebook(ROOT, {"ablations": ["lexical", "alias-vector"], "no_gates": True}, run_id=notebook_run_id)
    assert run.passed, run.error_message
    figures = sorted(p.name for p in run.figures)
    assert figures == ["language_metrics.png", "language_metrics.svg", "latency.png", "latency.svg"]
    text = run.notebook.read_text(encoding="utf-8")
    assert "skipped: the rerank chart" in text
    assert "gates not enforced (no_gates)" in text


@pytest.mark.slow  # executes a notebook
def test_failing_cell_traceback_shows_no_absolute_workspace_path(notebook_run_id: str) -> None:
    run = run_notebook(ROOT, {"fixture": "docs/reference"}, run_id=notebook_run_id)  # a folder, but no fixture
    assert run.error_name == "FixtureError"
    private = str(ROOT.resolve())
    assert private not in run.notebook.read_text(encoding="utf-8")
    assert private not in run.html.read_text(encoding="utf-8")
    assert "docs/reference" in run.notebook.read_text(encoding="utf-8")
