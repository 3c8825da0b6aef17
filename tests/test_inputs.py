"""Tests for evalkit.data.inputs and the readers that use it: hostile or huge input files are refused at once."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.data.fixture import FixtureError, load_fixture
from evalkit.data.inputs import (
    DEFAULT_MAX_INPUT_BYTES,
    MAX_PROBLEMS,
    InputError,
    cap_problems,
    loads_strict,
    read_input_bytes,
    read_json_file,
    shorten,
)
from evalkit.data.squad import SquadFormatError, read_squad
from evalkit.reporting.gates import load_baselines

from .conftest import TINY_DIR

SECOND = 1.0


def _timed(action: object) -> float:
    started = time.monotonic()
    assert callable(action)
    action()
    return time.monotonic() - started


# --- regular files only, size limit -----------------------------------------------------------------------------


def test_default_limit_is_64_mib() -> None:
    assert DEFAULT_MAX_INPUT_BYTES == 64 * 1024 * 1024


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fixture.json"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_input_bytes(fifo)
        except InputError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(SECOND)
    assert not thread.is_alive(), "reading a FIFO blocked"
    assert len(outcome) == 1
    assert "FIFO" in str(outcome[0])
    assert str(fifo) in str(outcome[0])


def test_dev_zero_is_refused_within_a_second() -> None:
    with pytest.raises(InputError, match="character device") as info:
        assert _timed(lambda: read_input_bytes(Path("/dev/zero"))) < SECOND
    assert "/dev/zero" in str(info.value)


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="a directory"):
        read_input_bytes(tmp_path)


def test_oversize_file_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as handle:  # sparse: large on paper, nothing to read
        handle.truncate(2 * DEFAULT_MAX_INPUT_BYTES)
    started = time.monotonic()
    with pytest.raises(InputError, match="larger than the input limit") as info:
        read_input_bytes(big)
    assert time.monotonic() - started < SECOND
    assert "--max-input-mb" in str(info.value)


def test_the_limit_can_be_raised(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_bytes(b"[" + b"0," * 600 + b"0]")
    with pytest.raises(InputError, match="larger"):
        read_input_bytes(data, max_bytes=1000)
    assert read_input_bytes(data, max_bytes=2000) == data.read_bytes()


def test_file_exactly_at_the_limit_is_read(tmp_path: Path) -> None:
    data = tmp_path / "d.json"
    data.write_bytes(b"x" * 100)
    assert read_input_bytes(data, max_bytes=100) == b"x" * 100


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found") as info:
        read_input_bytes(tmp_path / "absent.json")
    assert "absent.json" in str(info.value)


@pytest.mark.parametrize("name", ["fixture.json", "aliases.json"])
def test_fixture_reader_refuses_a_fifo(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "fx"
    folder.mkdir()
    (folder / "fixture.json").write_bytes((TINY_DIR / "fixture.json").read_bytes())
    (folder / name).unlink(missing_ok=True)
    os.mkfifo(folder / name)
    started = time.monotonic()
    with pytest.raises(FixtureError, match="FIFO"):
        load_fixture(folder)
    assert time.monotonic() - started < SECOND


def test_baselines_and_squad_readers_refuse_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "baselines.json")
    with pytest.raises(ValueError, match="FIFO"):
        load_baselines(tmp_path)
    os.mkfifo(tmp_path / "squad.json")
    with pytest.raises(SquadFormatError, match="FIFO"):
        read_squad(tmp_path / "squad.json")


def test_cli_validate_refuses_dev_zero_and_oversize_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    assert main(["validate", "/dev/zero"]) == 2
    assert time.monotonic() - started < SECOND
    err = capsys.readouterr().err
    assert "character device" in err and "Traceback" not in err
    big = tmp_path / "fixture.json"
    big.write_bytes(b" " * (2 * 2**20))
    assert main(["validate", str(big), "--max-input-mb", "1"]) == 2
    assert "larger than the input limit" in capsys.readouterr().err
    assert main(["validate", str(big), "--max-input-mb", "0"]) == 2
    assert "--max-input-mb must be positive" in capsys.readouterr().err


# --- strict JSON ----------------------------------------------------------------------------------------------


def test_duplicate_key_is_refused_naming_key_place_and_record() -> None:
    text = '{"queries": [{"query_id": "q-1", "judgments": [{"chunk_id": "c-1", "grade": 99, "grade": 3}]}]}'
    with pytest.raises(ValueError) as info:
        loads_strict(text)
    message = str(info.value)
    assert "duplicate key 'grade'" in message
    assert "queries[0].judgments[0]" in message
    assert "chunk_id 'c-1'" in message


def test_duplicate_top_level_key_is_refused() -> None:
    with pytest.raises(ValueError, match="duplicate key 'a' in the object at the top level"):
        loads_strict('{"a": 1, "a": 1}')


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_constants_are_refused(constant: str) -> None:
    with pytest.raises(ValueError, match=constant):
        loads_strict(f'{{"tolerance": {constant}}}')


def test_valid_json_decodes_to_plain_values() -> None:
    assert loads_strict('{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}


def test_fixture_with_duplicate_grade_is_refused(tmp_path: Path) -> None:
    raw = (TINY_DIR / "fixture.json").read_text(encoding="utf-8")
    raw = raw.replace('"grade": 3', '"grade": 99, "grade": 3', 1)
    assert raw.count('"grade": 99') == 1
    (tmp_path / "fixture.json").write_text(raw, encoding="utf-8")
    with pytest.raises(FixtureError, match="duplicate key 'grade'") as info:
        load_fixture(tmp_path)
    assert "queries[" in str(info.value)


def test_invalid_utf8_names_file_and_offset(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InputError, match=r"x\.json: cannot be read: not UTF-8 text \(invalid byte at offset 7\)"):
        read_json_file(tmp_path / "x.json")


# --- short messages -------------------------------------------------------------------------------------------


def test_problem_lists_are_capped_with_the_total() -> None:
    problems = [f"problem {i}" for i in range(1000)]
    shown = cap_problems(problems)
    assert len(shown) == MAX_PROBLEMS + 1
    assert shown[-1] == f"... and {1000 - MAX_PROBLEMS} more"
    assert cap_problems(problems[:3]) == problems[:3]


def test_shorten_cuts_long_values_and_keeps_short_ones() -> None:
    assert shorten("abc") == "'abc'"
    cut = shorten("x" * 1_000_000)
    assert len(cut) < 100
    assert "1000000 characters" in cut


def test_many_bad_records_print_a_capped_list(tmp_path: Path) -> None:
    data = json.loads((TINY_DIR / "fixture.json").read_text(encoding="utf-8"))
    data["chunks"] = [{"chunk_id": f"c{i}", "doc_id": 5, "text": 7} for i in range(5000)]
    (tmp_path / "fixture.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(FixtureError) as info:
        load_fixture(tmp_path)
    message = str(info.value)
    total = info.value.total
    assert 10_000 <= total <= 10_001  # two per record (pydantic may add one for the list as a whole)
    assert len(info.value.problems) <= 1_000  # only the first are described
    assert message.count("\n  - ") == MAX_PROBLEMS + 1
    assert f"{total} problem(s)" in message
    assert f"... and {total - MAX_PROBLEMS} more" in message
    assert "chunk 'c0': field 'doc_id'" in message  # the first problems, named by record


def test_a_huge_field_name_is_not_echoed_whole(tmp_path: Path) -> None:
    data = json.loads((TINY_DIR / "fixture.json").read_text(encoding="utf-8"))
    data["chunks"][0]["y" * 1_000_000] = 1
    (tmp_path / "fixture.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(FixtureError) as info:
        load_fixture(tmp_path)
    assert len(str(info.value)) < 2_000
    assert "1000000 characters" in str(info.value)
