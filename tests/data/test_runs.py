"""Run files: TREC and JSONL readers, the fixture policies and the TREC writer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.data.ids import bad_ids, check_trec_field
from evalkit.data.run_coverage import check_run
from evalkit.data.runs import (
    RunFileError,
    read_jsonl_run,
    read_run,
    read_trec_run,
)
from evalkit.data.trec import trec_run_bytes


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_trec_run_is_read_into_tuples_in_file_order(tmp_path: Path) -> None:
    path = _write(tmp_path, "x.trec", "q1 Q0 c2 1 2.5 sys\nq1 Q0 c1 2 2.5 sys\n\nq2 Q0 c3 1 -1 sys extra columns\n")
    run = read_trec_run(path)
    assert run.name == "sys"
    assert run.rankings == {"q1": (("c2", 2.5), ("c1", 2.5)), "q2": (("c3", -1.0),)}
    assert (run.lines, run.duplicates) == (3, 0)


def test_run_id_is_the_first_lines_tag_or_the_file_name(tmp_path: Path) -> None:
    mixed = _write(tmp_path, "my-run.trec", "q1 Q0 c1 1 1 a\nq1 Q0 c2 2 0 b\n")
    assert read_trec_run(mixed).name == "a"  # trec_eval's runid: the first line's tag
    bad_tag = _write(tmp_path, "other.txt", "q1 Q0 c1 1 1 a/b\n")
    assert read_trec_run(bad_tag).name == "other"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("q1 Q0 c1 1 2.0", "line 2: expected 6 columns"),
        ("q1 Q0 c1 1 high t", "line 2: score 'high' is not a number"),
        ("q1 Q0 c1 1 nan t", "line 2: score 'nan' is not finite"),
    ],
)
def test_malformed_trec_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path, "bad.trec", f"q1 Q0 c0 1 3 t\n{line}\n")
    with pytest.raises(RunFileError, match=f"bad.trec {message}"):
        read_trec_run(path)


def test_columns_trec_eval_does_not_read_are_not_checked(tmp_path: Path) -> None:
    # trec_eval reads neither the rank nor the tag of a line: a run that writes ranks as words still scores.
    path = _write(tmp_path, "loose.trec", "q1 Q0 c1 one 2.0 t\nq1 Q0 c2 - 1.0 other\n")
    run = read_trec_run(path)
    assert (run.name, run.rankings) == ("t", {"q1": (("c1", 2.0), ("c2", 1.0))})


def test_jsonl_run_is_read(tmp_path: Path) -> None:
    lines = [
        {"query_id": "q1", "results": [{"chunk_id": "c1", "score": 1}, {"chunk_id": "c2", "score": 0.5, "x": 1}]},
        {"query_id": "q2", "results": []},
    ]
    path = _write(tmp_path, "sys-a.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n")
    run = read_run(path)
    assert run.name == "sys-a"
    assert run.rankings == {"q1": (("c1", 1.0), ("c2", 0.5)), "q2": ()}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: not JSON"),
        ('{"results": []}', "line 2: expected an object with a string query_id"),
        ('{"query_id": "q", "results": {}}', "line 2: results must be a list"),
        ('{"query_id": "q", "results": [{"score": 1}]}', r"line 2 results\[0\]: expected an object"),
        ('{"query_id": "q", "results": [{"chunk_id": "c", "score": true}]}', r"line 2 results\[0\]: score True"),
    ],
)
def test_malformed_jsonl_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path, "bad.jsonl", '{"query_id": "q0", "results": []}\n' + line + "\n")
    with pytest.raises(RunFileError, match=f"bad.jsonl {message}"):
        read_jsonl_run(path)


def test_missing_file_and_non_utf8_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(RunFileError, match=r"run file nope\.trec not found"):
        read_run(tmp_path / "nope.trec")
    path = tmp_path / "latin.trec"
    path.write_bytes(b"q1 Q0 caf\xe9 1 1 t\n")
    with pytest.raises(RunFileError, match=r"latin\.trec line 1: not UTF-8"):
        read_run(path)


def test_duplicates_are_kept_and_counted(tmp_path: Path) -> None:
    path = _write(tmp_path, "d.trec", "q1 Q0 c1 1 2 t\nq1 Q0 c1 2 1 t\nq1 Q0 c2 3 1 t\n")
    run = read_trec_run(path)
    assert run.duplicates == 1
    assert run.rankings["q1"] == (("c1", 2.0), ("c1", 1.0), ("c2", 1.0))
    assert check_run(run, ["q1"], ["c1", "c2"]).unknown_chunks == ()


def test_fixture_policies(tmp_path: Path) -> None:
    run = read_trec_run(_write(tmp_path, "p.trec", "q1 Q0 c1 1 2 t\nq1 Q0 ghost 2 1 t\n"))
    coverage = check_run(run, ["q1", "q2", "q3"], ["c1"])
    assert coverage.missing_queries == ("q2", "q3")
    assert coverage.unknown_chunks == ("ghost",)
    assert "2 fixture query(ies) missing" in coverage.describe()
    assert "1 unknown chunk ID(s)" in coverage.describe()


def test_unknown_queries_are_counted_and_a_run_of_no_known_query_is_refused(tmp_path: Path) -> None:
    run = read_trec_run(_write(tmp_path, "u.trec", "q1 Q0 c1 1 2 t\nq9 Q0 c1 1 2 t\nq8 Q0 c1 1 2 t\n"))
    coverage = check_run(run, ["q1", "q2"], ["c1"])
    assert coverage.unjudged_queries == 2 and coverage.missing_queries == ("q2",)
    assert "2 run query(ies) not in the fixture (left out)" in coverage.describe()
    with pytest.raises(RunFileError, match=r"run t: none of its 3 query\(ies\) is in the fixture \(the first: 'q1'\)"):
        check_run(run, ["q7"], ["c1"])


def test_writer_output_is_exact_trec() -> None:
    data = trec_run_bytes({"q2": [("c1", 0.5)], "q1": [("b", 1.0), ("a", 1.0)]}, "sys")
    assert data == b"q1 Q0 b 1 1.0 sys\nq1 Q0 a 2 1.0 sys\nq2 Q0 c1 1 0.5 sys\n"


_ids = st.text(alphabet="abcxyz019-_.", min_size=1, max_size=8).filter(lambda s: s[0].isalnum())
_scores = st.floats(allow_nan=False, allow_infinity=False, width=64)


@given(st.dictionaries(_ids, st.lists(st.tuples(_ids, _scores), min_size=1, max_size=6), min_size=1, max_size=5))
def test_written_runs_read_back_to_the_same_floats(rankings: dict[str, list[tuple[str, float]]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.trec"
        path.write_bytes(trec_run_bytes(rankings, "sys"))
        run = read_trec_run(path)
    assert run.name == "sys"
    assert {q: list(r) for q, r in run.rankings.items()} == rankings


@pytest.mark.parametrize("score", [float("nan"), float("inf"), -float("inf")])
def test_writer_refuses_a_score_its_reader_would_refuse(score: float) -> None:
    with pytest.raises(ValueError, match="is not finite"):
        trec_run_bytes({"q1": [("c1", 1.0), ("c2", score)]}, "sys")


def test_a_lone_surrogate_in_a_jsonl_id_is_refused_naming_the_line(tmp_path: Path) -> None:
    """JSON's "\\ud800" escape gives a string with no UTF-8 form: it ended in a UnicodeEncodeError naming no file."""
    path = tmp_path / "run.jsonl"
    path.write_text('{"query_id": "q1", "results": [{"chunk_id": "\\ud800", "score": 0.5}]}\n', encoding="utf-8")
    with pytest.raises(RunFileError, match=r"run.jsonl line 1 results\[0\]: field 'chunk_id': .* lone surrogate"):
        read_run(path)


def test_query_lines_grouped_in_some_blocks_and_scattered_in_others_read_the_same(tmp_path: Path) -> None:
    """The reader finds a query's lines by their runs where they stand together and hashes a block where they do
    not (value_runs); a file several parse blocks long, half of each, reads as a plain split of its lines."""
    lines = [f"g{i // 50:05d} Q0 d{i:07d} {i % 50 + 1} {-(i % 50)} sys" for i in range(80_000)]  # grouped
    lines += [f"s{i % 7} Q0 e{i:07d} {i // 7 + 1} {-(i // 7)} sys" for i in range(80_000)]  # seven queries, interleaved
    path = _write(tmp_path, "mixed.trec", "\n".join(lines) + "\n")
    assert path.stat().st_size > 2 * (1 << 21)  # more than two of the reader's parse blocks
    expected: dict[str, list[tuple[str, float]]] = {}
    for line in lines:
        query, _, doc, _, score, _ = line.split()
        expected.setdefault(query, []).append((doc, float(score)))
    run = read_trec_run(path)
    assert {query: list(ranking) for query, ranking in run.rankings.items()} == expected
    assert run.lines == len(lines) and len(run.queries) == 1600 + 7


def _every_code_point() -> list[str]:
    """Every code point a UTF-8 file can hold: the BMP whole, and every 17th code point above it (the planes of
    emoji, rare scripts, tags and private use), surrogates left out (they have no UTF-8 form)."""
    return [chr(c) for c in (*range(0x10000), *range(0x10000, 0x110000, 17)) if not 0xD800 <= c <= 0xDFFF]


def test_the_trec_writer_writes_every_id_the_readers_take() -> None:
    """One rule for IDs: a character the column check lets into a run (unassigned, private use, Arabic number
    signs) can be written back to a TREC file, and one the writer refuses is refused by the readers too."""
    characters = [c for c in _every_code_point() if c != " "]  # an ASCII space separates columns: never read in
    ids = [f"a{c}b" for c in characters]
    taken = ~np.asarray(bad_ids(pa.array(ids, type=pa.string())).to_numpy(zero_copy_only=False), dtype=bool)
    written = np.zeros(len(ids), dtype=bool)
    for i, value in enumerate(ids):
        try:
            written[i] = check_trec_field(value, "chunk ID") == value
        except ValueError:
            written[i] = False
    differ = [f"U+{ord(characters[i]):04X}" for i in np.flatnonzero(taken != written)]
    assert differ == [], f"readers and the TREC writer disagree on {len(differ)} characters: {differ[:20]}"
    assert taken.sum() > 100_000  # the comparison saw the characters taken, not only the refused ones


@pytest.mark.parametrize("character", ["\ue000", "\U000f0000", "\u0378", "\u0600", "\U0001d173", "\u06dd"])
def test_a_run_with_rare_id_characters_is_written_back_as_read(tmp_path: Path, character: str) -> None:
    path = _write(tmp_path, "rare.trec", f"q{character}1 Q0 c{character}1 1 2.5 sys\nq{character}1 Q0 c2 2 1 sys\n")
    run = read_trec_run(path)
    again = _write(tmp_path, "again.trec", trec_run_bytes(dict(run.rankings), run.name).decode("utf-8"))
    assert read_trec_run(again).rankings == run.rankings == {f"q{character}1": ((f"c{character}1", 2.5), ("c2", 1.0))}
