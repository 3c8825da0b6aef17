"""Tests for evalkit.data.inputs and the readers that use it: hostile or huge input files are refused at once."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.app.cli import main
from evalkit.data import inputs
from evalkit.data.fixture import FixtureError, load_fixture
from evalkit.data.inputs import (
    DEFAULT_MAX_INPUT_BYTES,
    MAX_JSON_DEPTH,
    MAX_NUMBER_DIGITS,
    MAX_PROBLEMS,
    InputError,
    cap_problems,
    clip,
    loads_strict,
    nesting_depth,
    read_input_bytes,
    read_json_file,
    shorten,
)
from evalkit.data.squad import SquadFormatError, read_squad
from evalkit.reporting.gates import load_baselines

from ..conftest import TINY_DIR

HANG_S = 30
"""Timeout of the tests that read FIFOs and devices: a reader that blocks fails the test instead of hanging it.
Refusals take milliseconds; how fast is measured in benchmarks/, not here."""


# --- regular files only, size limit -----------------------------------------------------------------------------


def test_default_limit_is_64_mib() -> None:
    assert DEFAULT_MAX_INPUT_BYTES == 64 * 1024 * 1024


@pytest.mark.timeout(HANG_S)
def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fixture.json"
    os.mkfifo(fifo)  # no writer: opening it for reading would block
    with pytest.raises(InputError, match="FIFO") as info:
        read_input_bytes(fifo)
    assert str(fifo) in str(info.value)


@pytest.mark.timeout(HANG_S)
def test_dev_zero_is_refused() -> None:
    with pytest.raises(InputError, match="character device") as info:
        read_input_bytes(Path("/dev/zero"))  # endless: reading it would never finish
    assert "/dev/zero" in str(info.value)


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="a directory"):
        read_input_bytes(tmp_path)


@pytest.mark.timeout(HANG_S)
def test_oversize_file_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as handle:  # sparse: large on paper, nothing to read
        handle.truncate(2 * DEFAULT_MAX_INPUT_BYTES)
    with pytest.raises(InputError, match="larger than the input limit") as info:
        read_input_bytes(big)
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


@pytest.mark.timeout(HANG_S)
@pytest.mark.parametrize("name", ["fixture.json", "aliases.json"])
def test_fixture_reader_refuses_a_fifo(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "fx"
    folder.mkdir()
    (folder / "fixture.json").write_bytes((TINY_DIR / "fixture.json").read_bytes())
    (folder / name).unlink(missing_ok=True)
    os.mkfifo(folder / name)
    with pytest.raises(FixtureError, match="FIFO"):
        load_fixture(folder)


@pytest.mark.timeout(HANG_S)
def test_baselines_and_squad_readers_refuse_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "baselines.json")
    with pytest.raises(ValueError, match="FIFO"):
        load_baselines(tmp_path)
    os.mkfifo(tmp_path / "squad.json")
    with pytest.raises(SquadFormatError, match="FIFO"):
        read_squad(tmp_path / "squad.json")


@pytest.mark.timeout(HANG_S)
def test_cli_validate_refuses_dev_zero_and_oversize_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "/dev/zero"]) == 2
    err = capsys.readouterr().err
    assert "character device" in err and "Traceback" not in err
    big = tmp_path / "fixture.json"
    big.write_bytes(b" " * (2 * 2**20))
    assert main(["validate", str(big), "--max-input-mb", "1"]) == 2
    assert "larger than the input limit" in capsys.readouterr().err
    for bad in ("0", "-1", "inf", "nan", "1e400"):  # inf and 1e400 overflowed into a traceback with exit 1
        for command in (["validate", str(big)], ["score", "--qrels", str(big), "--run", str(big)]):
            with pytest.raises(SystemExit) as stop:
                main([*command, "--max-input-mb", bad])
            assert stop.value.code == 2, (command, bad)
            err = capsys.readouterr().err
            assert f"--max-input-mb: must be a finite number of MiB above 0, got '{bad}'" in err
            assert "Traceback" not in err


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


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NaN", "NaN is not valid JSON (only finite numbers are allowed) at the top level"),
        (
            '{"runs": [{"query_id": "q1", "score": 1}, {"query_id": "q2", "score": Infinity}], "x": NaN}',
            "Infinity is not valid JSON (only finite numbers are allowed) at runs[1].score (record with query_id 'q2')",
        ),
        (
            '{"a": {"per_query": {"ndcg@10": [1, 0.5, 1e400]}}}',
            "a number out of range (1e400) at a.per_query.ndcg@10[2]",
        ),
        (
            r'{"\u001b[2J": {"\u202e": [-Infinity]}}',
            r"-Infinity is not valid JSON (only finite numbers are allowed) at '\x1b[2J'.'\u202e'[0]",
        ),
    ],
)
def test_the_first_non_finite_number_is_named_with_where_it_is(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        loads_strict(text)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("text", "checked"),
    [
        ('{"sha256": "7d3e85900f4a114a128eb8e466acca32", "values": [0.5, 1, 1.5e-07]}', False),
        ('{"id": "12345678901234567890", "x": 0.25}', True),  # 20 digits in a string: checked, only slower
        ('{"x": 0.00012992208680459862, "y": 1.5e99}', False),  # a float's 20 fraction digits, a 2-digit exponent
        ('{"x": [1e400]}', True),
        ('{"x": [-2.5E+308]}', True),
        ('{"x": 123456789012345678901234}', True),
    ],
)
def test_numbers_are_checked_one_by_one_only_where_one_may_be_out_of_range(text: str, checked: bool) -> None:
    hooks: list[bool] = []
    decode = json.loads

    def recorded(document: str, **options: object) -> object:
        hooks.append("parse_float" in options and "parse_int" in options)
        return decode(document, **options)  # type: ignore[arg-type]

    with mock.patch.object(inputs.json, "loads", recorded):
        try:
            value = loads_strict(text)
        except ValueError:
            value = None
    assert hooks == [checked]
    if not checked:
        assert value == json.loads(text)  # the C decoder's numbers are the hooks' numbers


def test_a_large_text_read_without_floats_keeps_one_shared_float(monkeypatch: pytest.MonkeyPatch) -> None:
    text = '{"values": [0.5, 0.25, 1.5, 2], "name": "a"}'
    monkeypatch.setattr(inputs, "LEAN_CHARACTERS", len(text) - 1)
    lean = loads_strict(text, floats=False)
    assert lean["values"][:3] == [0.0, 0.0, 0.0] and lean["values"][3] == 2 and lean["name"] == "a"
    assert len({id(v) for v in lean["values"][:3]}) == 1
    assert loads_strict(text) == json.loads(text)  # floats kept unless asked
    monkeypatch.setattr(inputs, "LEAN_CHARACTERS", len(text))
    assert loads_strict(text, floats=False) == json.loads(text)  # short text: speed first, floats kept
    with pytest.raises(ValueError, match="out of range"):
        monkeypatch.setattr(inputs, "LEAN_CHARACTERS", 0)
        loads_strict('{"values": [1e400]}', floats=False)


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


def test_a_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_bytes(b'\xef\xbb\xbf{"a": [1, 2]}')
    assert read_json_file(tmp_path / "b.json") == ('{"a": [1, 2]}', {"a": [1, 2]})
    assert loads_strict('\ufeff{"a": 1}') == {"a": 1}
    (tmp_path / "c.json").write_bytes(b'\xef\xbb\xbf{"a": "\xff"}')
    with pytest.raises(InputError, match=r"invalid byte at offset 10\)"):  # offsets count the file's bytes
        read_json_file(tmp_path / "c.json")


# --- limits on nesting and numbers ------------------------------------------------------------------------------


def test_the_limits() -> None:
    assert (MAX_JSON_DEPTH, MAX_NUMBER_DIGITS) == (64, 300)


@pytest.mark.timeout(HANG_S)
def test_nesting_up_to_the_limit_is_read_and_deeper_refused_before_parsing() -> None:
    assert nesting_depth("[" * 64 + "]" * 64) == 64
    loads_strict("[" * 64 + "]" * 64)
    with pytest.raises(ValueError, match=r"^nested 65 deep \(more than 64\)$"):
        loads_strict('{"a": ' * 65 + "1" + "}" * 65)
    with pytest.raises(ValueError, match=r"^nested 1000000 deep \(more than 64\)$"):
        loads_strict("[" * 1_000_000 + "]" * 1_000_000)


def test_brackets_inside_strings_do_not_nest() -> None:
    text = json.dumps({"a": "[" * 500 + '\\"{' * 100, "b": ["]" * 10]})
    assert nesting_depth(text) == 2
    assert loads_strict(text)["b"] == ["]" * 10]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" + "9" * 301 + "]", "an integer of 301 digits (more than 300)"),
        ('{"n": -' + "1" * 5000 + "}", "an integer of 5000 digits (more than 300)"),
        ("[1e309]", "a number out of range (1e309) at [0]"),
        ('{"a": [0.5, -1.5e999]}', "a number out of range (-1.5e999) at a[1]"),
        ("[0." + "0" * 30 + "1e99999]", "a number out of range (0.000000000000000000... (39 characters)) at [0]"),
    ],
)
def test_numbers_past_the_limits_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        loads_strict(text)
    assert str(info.value) == message


def test_number_limits_hold_whatever_the_interpreters_digit_limit() -> None:
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(ValueError, match="an integer of 100000 digits"):
            loads_strict("[" + "7" * 100_000 + "]")
    finally:
        sys.set_int_max_str_digits(limit)
    assert loads_strict("[" + "7" * 300 + ", -1.5e308, 1e-400]") == [int("7" * 300), -1.5e308, 0.0]


def test_a_json_file_past_the_limits_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text("[" * 100 + "]" * 100, encoding="utf-8")
    with pytest.raises(InputError, match=r"deep\.json: is not JSON: nested 100 deep \(more than 64\)"):
        read_json_file(tmp_path / "deep.json")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\a'), inner, max_size=3),
    max_leaves=30,
)


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


@given(_JSON, st.integers(1, 16))
def test_nesting_depth_is_the_same_whatever_the_block_size(value: object, block: int) -> None:
    """The scan runs in blocks; a string or an escape cut by a block's end must not change the count."""
    text = json.dumps(value, ensure_ascii=False)
    with mock.patch.object(inputs, "_DEPTH_BLOCK", block):
        assert nesting_depth(text) == _depth(value)
        assert nesting_depth(text.encode()) == _depth(value)
        assert nesting_depth(json.dumps(value).encode()) == _depth(value)  # escaped non-ASCII too


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


NUMBER_TEXT = st.text(alphabet='0123456789eE+-.a_x "[]{},:文', max_size=80)


@given(st.lists(NUMBER_TEXT, max_size=4), st.integers(0, 25), st.sampled_from(["", ".", "e", "1e", "1E-", "x"]))
def test_the_pattern_and_the_byte_scan_find_the_same_long_numbers(parts: list[str], digits: int, before: str) -> None:
    text = before + "7" * digits + "".join(parts)  # runs of up to 25 digits after a point, an exponent or a letter
    expected = inputs._scanned_bytes_may_hold_long_number(text)
    assert (inputs._LONG_NUMBER.search(text) is not None) == expected
    padded = text + " " * inputs.SCAN_CHARACTERS  # long enough for the byte scan, found the same
    assert inputs.may_hold_long_number(padded) == expected == inputs.may_hold_long_number(text)


def test_a_file_name_that_does_not_print_is_echoed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newline in a run file's name kept a one-line message to one line only as long as the name had none; an
    escape sequence in a qrels file's name reached the terminal. Both are written as their escapes."""
    assert clip("bad\nrun.trec") == "bad\\nrun.trec" and clip("中文-1.trec") == "中文-1.trec"
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n", encoding="utf-8")
    (tmp_path / "bad\nrun.trec").write_text("q1 Q0 d1 1 nan t\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["score", "--qrels", "qrels.txt", "--run", "bad\nrun.trec"]) == 2
    err = capsys.readouterr().err
    assert "bad\\nrun.trec line 1: score 'nan' is not finite" in err and "bad\nrun" not in err
    assert main(["score", "--qrels", "missing\x1b[2Jx.txt", "--run", "x.trec"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "missing\\x1b[2Jx.txt" in err
