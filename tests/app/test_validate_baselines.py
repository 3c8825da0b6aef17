"""`evalkit validate` compares each floor of baselines.json with the floor `evalkit baseline` regenerates."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evalkit.app.cli import main
from evalkit.data.fixture import FIXTURE_FILE
from evalkit.reporting.gate_specs import BASELINES_FILE
from evalkit.reporting.gates import BASELINE_SLACK, Baselines, check_baselines_regenerated

from ..conftest import SYNTHETIC_DIR

REWRITE = "rewrite the file with `evalkit baseline --write`"


@pytest.fixture
def synthetic_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "fx"
    shutil.copytree(SYNTHETIC_DIR, folder)
    return folder


def _validate(capsys: pytest.CaptureFixture[str], folder: Path) -> tuple[int, str, str]:
    code = main(["validate", str(folder)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_the_committed_baselines_match(capsys: pytest.CaptureFixture[str], synthetic_copy: Path) -> None:
    code, out, err = _validate(capsys, synthetic_copy)
    assert (code, err) == (0, "")
    assert "baselines.json matches (24 floor(s))" in out


def test_a_judgment_edited_without_new_baselines_is_refused_naming_each_floor(
    capsys: pytest.CaptureFixture[str], synthetic_copy: Path
) -> None:
    # The check compared only the fixture's ID and version, so this fixture "matched" floors it no longer gives;
    # each moved by less than the tolerance (0.001), so the baseline gates passed it too.
    data: dict[str, Any] = json.loads((synthetic_copy / FIXTURE_FILE).read_text(encoding="utf-8"))
    (query,) = [q for q in data["queries"] if q["query_id"] == "q-en-001"]
    query["judgments"] = [j for j in query["judgments"] if j["chunk_id"] != "zh-trash-02"]
    (synthetic_copy / FIXTURE_FILE).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    code, out, err = _validate(capsys, synthetic_copy)
    assert (code, out) == (2, "")
    assert "4 floor(s) differ from what `evalkit baseline` regenerates" in err and REWRITE in err
    named = [line.strip() for line in err.splitlines() if line.startswith("  - ")]
    assert named == [
        "- alias-vector [all] context_precision: 0.062049 in the file, 0.061722 regenerated",
        "- alias-vector [en] context_precision: 0.067987 in the file, 0.067324 regenerated",
        "- hybrid [all] context_precision: 0.047672 in the file, 0.047345 regenerated",
        "- hybrid [en] context_precision: 0.043225 in the file, 0.042562 regenerated",
    ]


def test_a_floor_edited_by_hand_is_refused(capsys: pytest.CaptureFixture[str], synthetic_copy: Path) -> None:
    path = synthetic_copy / BASELINES_FILE
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    regenerated = data["ablations"]["lexical"]["zh"]["context_recall"]
    data["ablations"]["lexical"]["zh"]["context_recall"] = regenerated - 0.0005
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = _validate(capsys, synthetic_copy)
    assert code == 2 and REWRITE in err
    expected = f"lexical [zh] context_recall: {regenerated - 0.0005:.6f} in the file, {regenerated:.6f} regenerated"
    assert expected in err


def _baselines(floors: dict[str, dict[str, dict[str, float]]]) -> Baselines:
    return Baselines(fixture_id="fx", fixture_version="1.0.0", ablations=floors)


def test_only_the_floors_the_file_holds_are_compared_each_within_the_rounding_slack() -> None:
    regenerated = _baselines({"lexical": {"all": {"context_precision": 0.5, "context_recall": 0.25}}})
    check_baselines_regenerated(_baselines({}), regenerated)  # a floor left out gates nothing
    held = {"lexical": {"all": {"context_recall": 0.25 + BASELINE_SLACK * 0.9}}}
    check_baselines_regenerated(_baselines(held), regenerated)  # one unit of the sixth place: a rounding boundary
    off = {"lexical": {"all": {"context_recall": 0.250002}}, "mine": {"zh": {"context_recall": 0.5}}}
    with pytest.raises(ValueError, match="2 floor\\(s\\) differ") as info:
        check_baselines_regenerated(_baselines(off), regenerated)
    assert "lexical [all] context_recall: 0.250002 in the file, 0.250000 regenerated" in str(info.value)
    assert "mine [zh] context_recall: 0.500000 in the file, not regenerated" in str(info.value)


def test_baseline_prints_the_committed_floors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baseline", "--fixture", str(SYNTHETIC_DIR)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((SYNTHETIC_DIR / BASELINES_FILE).read_text(encoding="utf-8"))
