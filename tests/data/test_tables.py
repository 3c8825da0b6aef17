"""The guarded door for tabular files (evalkit.data.tables), and TREC/JSONL run files read through it.

Qrels get their own file (test_qrels.py), topics too (test_topics.py); the refusals every reader shares are here.
"""

from __future__ import annotations

import gzip
import itertools
import math
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.data import bad_lines, tables
from evalkit.data.inputs import InputError
from evalkit.data.qrels import QrelsError, read_qrels_file
from evalkit.data.runs import RunFileError, read_run, read_trec_run
from evalkit.data.tables import open_guarded, split_fields, text_lines
from evalkit.data.topics import TopicsError, read_topics
from evalkit.data.trec import trec_run_bytes

T = TypeVar("T")

QRELS = b"q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n"
QRELS_DICT = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def _promptly(call: Callable[[], T], seconds: float = 20.0) -> T:
    """``call()`` run in a daemon thread; the test fails (instead of hanging) when it has not returned in time.

    A hang guard, not a speed check: ``seconds`` is far beyond what the call takes, and how long it took is never
    asserted (speed is measured by the scripts in benchmarks/)."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still running after {seconds} s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def _members(data: bytes, *cuts: int) -> bytes:
    """``data`` as concatenated gzip members, cut at ``cuts``."""
    bounds = [0, *cuts, len(data)]
    return b"".join(gzip.compress(data[a:b]) for a, b in itertools.pairwise(bounds))


# --- refusals shared by every reader -----------------------------------------------------------------------------

READERS: dict[str, Callable[[Path], object]] = {
    "qrels": read_qrels_file,
    "trec run": read_run,
    "jsonl run": read_run,  # the paths below end in .jsonl
    "topics": read_topics,
}
_ERRORS = {"qrels": QrelsError, "trec run": RunFileError, "jsonl run": RunFileError, "topics": TopicsError}


def _special(tmp_path: Path, kind: str, reader: str) -> Path:
    suffix = ".jsonl" if reader == "jsonl run" else ""
    if kind == "fifo":
        path = tmp_path / f"pipe{suffix}"
        os.mkfifo(path)
        return path
    if kind == "directory":
        path = tmp_path / f"folder{suffix}"
        path.mkdir()
        return path
    return Path("/dev/zero")


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize(
    ("kind", "reason"),
    [("fifo", "it is a FIFO"), ("directory", "it is a directory"), ("device", "it is a character device")],
)
def test_non_regular_files_are_refused_at_once(tmp_path: Path, reader: str, kind: str, reason: str) -> None:
    if kind == "device" and not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    path = _special(tmp_path, kind, reader)
    with pytest.raises(_ERRORS[reader], match=f"{path.name}: cannot be read: {reason}"):
        _promptly(lambda: READERS[reader](path))


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_missing_file_is_not_found(tmp_path: Path, reader: str) -> None:
    path = tmp_path / ("absent.jsonl" if reader == "jsonl run" else "absent")
    with pytest.raises(_ERRORS[reader], match=r"run file absent.* not found|absent.*: file not found"):
        READERS[reader](path)


def test_a_file_over_the_limit_is_refused_naming_the_limit(tmp_path: Path) -> None:
    path = _write(tmp_path, "big.qrels", QRELS * (2**20 // len(QRELS) + 1))
    with pytest.raises(QrelsError, match=r"big.qrels: cannot be read: it is larger than the input limit \(1 MiB\)"):
        read_qrels_file(path, max_bytes=2**20)
    assert len(read_qrels_file(path, max_bytes=2**21).as_dict()) == 2


@pytest.fixture(scope="module")
def gzip_bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """50 MB of newlines in about 50 KB."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.txt"
    path.write_bytes(gzip.compress(b"\n" * 50_000_000, compresslevel=9))
    assert path.stat().st_size < 200_000
    return path


@pytest.mark.parametrize(
    ("reader", "error"), [(read_qrels_file, QrelsError), (read_run, RunFileError), (read_topics, TopicsError)]
)
def test_a_gzip_bomb_stops_at_the_limit(gzip_bomb: Path, reader: Callable[..., object], error: type) -> None:
    with pytest.raises(error, match=r"larger than the input limit \(1 MiB decompressed\)"):
        _promptly(lambda: reader(gzip_bomb, max_bytes=2**20))


# --- gzip, BOM, whitespace ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["judgments.qrels.gz", "judgments.txt"])
def test_gzip_is_recognised_by_its_bytes(tmp_path: Path, name: str) -> None:
    assert read_qrels_file(_write(tmp_path, name, gzip.compress(QRELS))).as_dict() == QRELS_DICT


@pytest.mark.parametrize("cuts", [(4,), (10, 20), (1, 2, 3, 28)])
def test_concatenated_gzip_members_are_all_read(tmp_path: Path, cuts: tuple[int, ...]) -> None:
    assert read_qrels_file(_write(tmp_path, "multi.gz", _members(QRELS, *cuts))).as_dict() == QRELS_DICT


def test_a_member_larger_than_a_block_followed_by_another_is_read_without_hanging(tmp_path: Path) -> None:
    # Regression: a member that ended while its unconsumed input was being inflated (more than one 4 MiB block
    # out of one read) left a stale unconsumed_tail behind, and the reader looped for ever.
    first = b"q1 0 d1 1\n" * 500_000
    path = _write(tmp_path, "big-first.gz", gzip.compress(first, compresslevel=1) + gzip.compress(b"zz 0 last 2\n"))
    qrels = _promptly(lambda: read_qrels_file(path))
    assert qrels.as_dict() == {"q1": {"d1": 1}, "zz": {"last": 2}}
    assert qrels.duplicates == 499_999


@pytest.mark.parametrize("block", [1, 2, 3, 5, 64, 1 << 22])
def test_block_boundaries_do_not_change_what_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    monkeypatch.setattr(tables, "_BLOCK", block)
    text = b"\xef\xbb\xbf q1\t0  d1 1 x\r\n\n q1 0 d2\t\t0 y\r\nq2 0 d3 2 z"
    expected = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
    for index, data in enumerate([text, gzip.compress(text), _members(text, 1, 2, 3), _members(text, 3, 9)]):
        assert read_qrels_file(_write(tmp_path, f"q{index}", data)).as_dict() == expected


def test_a_bom_split_across_gzip_members_is_stripped(tmp_path: Path) -> None:
    data = _members(b"\xef\xbb\xbf" + QRELS, 1, 2)
    assert read_qrels_file(_write(tmp_path, "bom.gz", data)).as_dict() == QRELS_DICT


def test_a_first_member_holding_only_the_bom_does_not_end_the_file(tmp_path: Path) -> None:
    # Regression: the first block emptied by the BOM strip was taken for the end of the file.
    data = _members(b"\xef\xbb\xbf" + QRELS, 3)
    assert read_qrels_file(_write(tmp_path, "bom.gz", data)).as_dict() == QRELS_DICT


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (gzip.compress(QRELS)[:-9], "truncated"),
        (gzip.compress(QRELS)[:12], "truncated"),
        (b"\x1f\x8b", "truncated"),
        (b"\x1f\x8b" + b"not gzip at all\n", "corrupt gzip data"),
        (gzip.compress(QRELS) + b"trailing junk", "corrupt gzip data"),
    ],
)
def test_truncated_or_corrupt_gzip_is_refused(tmp_path: Path, data: bytes, reason: str) -> None:
    # Regression: a truncated member used to be read as far as it went, silently.
    with pytest.raises(QrelsError, match=f"cut.gz: cannot be read: .*{reason}"):
        read_qrels_file(_write(tmp_path, "cut.gz", data))


@pytest.mark.parametrize("data", [b"", b"\xef\xbb\xbf", b"\n\n  \r\n\t\n", gzip.compress(b""), gzip.compress(b"\n")])
def test_a_file_without_data_lines_is_empty(tmp_path: Path, data: bytes) -> None:
    # Regression: an empty (or BOM-only) file was refused as "could not be parsed".
    qrels = read_qrels_file(_write(tmp_path, "empty.qrels", data))
    assert (qrels.as_dict(), len(qrels), qrels.duplicates) == ({}, 0, 0)
    run = read_trec_run(_write(tmp_path, "empty.trec", data))
    assert (dict(run.rankings), run.lines) == ({}, 0)
    assert read_topics(_write(tmp_path, "empty.tsv", data)) == {}


@pytest.mark.parametrize("end", [b"", b"  ", b"\t", b"\r", b" \r", b"\r\n"])
def test_the_last_line_may_lack_its_newline_and_end_in_blanks(tmp_path: Path, end: bytes) -> None:
    # Regression: blanks ending a last line without a newline made an empty extra column.
    path = _write(tmp_path, "last.qrels", b"q1 0 d1 1\nq2 0 d2 2" + end)
    assert read_qrels_file(path).as_dict() == {"q1": {"d1": 1}, "q2": {"d2": 2}}
    run = read_trec_run(_write(tmp_path, "last.trec", b"q1 Q0 d1 1 0.5 sys" + end))
    assert run.rankings == {"q1": (("d1", 0.5),)}


def test_open_guarded_normalises_blanks_and_text_lines_numbers_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "t.txt", gzip.compress(b"\xef\xbb\xbf  a\t\tb  c \r\n\n\x0bd\x0ce\r\nlast"))
    with open_guarded(path, normalise=True) as stream:
        assert stream.read() == b"a b c\n\nd e\nlast"
    assert list(text_lines(path)) == [(1, "  a\t\tb  c "), (3, "\x0bd\x0ce"), (4, "last")]  # line 2 is blank


def test_stretches_of_blank_lines_are_numbered_and_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blank lines (ASCII whitespace only) are skipped, whole blocks of them at once, and still numbered; so a file
    of millions of them is no Python loop, and a line after them is named by its true number."""
    monkeypatch.setattr(tables, "_BLOCK", 64)
    data = b"\n" * 500 + b" \t\r\n" * 300 + b"q1 Q0 d1 1 1 sys\n" + b"\n" * 400 + b"q1 Q0 d2 2 x sys\n"
    path = _write(tmp_path, "blank.trec", data)
    assert list(text_lines(path)) == [(801, "q1 Q0 d1 1 1 sys"), (1202, "q1 Q0 d2 2 x sys")]
    with pytest.raises(RunFileError, match=r"blank.trec line 1202: score 'x' is not a number"):
        read_run(path)


def test_fields_split_only_where_the_columnar_parser_splits() -> None:
    assert split_fields(" a\tb \x0bc\x0cd\re ") == ["a", "b", "c", "d", "e"]
    # Other Unicode whitespace is part of a field (str.split() would split there).
    assert split_fields("a\x1fb c\xa0d e\u2028f \x85") == ["a\x1fb", "c\xa0d", "e\u2028f", "\x85"]


@pytest.mark.parametrize(
    ("char", "why"),
    [
        ("\x1f", "control"),
        ("\x1c", "control"),
        ("\x85", "control"),
        ("\xa0", "beyond ASCII"),
        ("\u3000", "space"),
        ("\u200b", "invisible"),
        ("\xad", "invisible"),
    ],
)
def test_unicode_whitespace_inside_an_id_is_one_field_wherever_the_line_is(tmp_path: Path, char: str, why: str) -> None:
    # Regression: the line-by-line paths split at these characters where the columnar one does not, so
    # "d\x1f1" was read as document "d" with the next column taken for the score. Each is refused as part of the
    # ID (a JSON run refuses the same IDs, and a TREC file could not be written with them), whichever line it is on.
    bad_id = f"d{char}1"
    for lines in ([f"q1 Q0 {bad_id} 1 0.5 sys"], ["q1 Q0 d0 1 0.9 sys", f"q1 Q0 {bad_id} 2 0.5 sys"]):
        path = _write(tmp_path, "u.trec", ("\n".join(lines) + "\n").encode())
        with pytest.raises(RunFileError, match=rf"u.trec line {len(lines)}: field 'docid': .* {why}"):
            read_trec_run(path)


# --- TREC and JSONL runs through the door -------------------------------------------------------------------------


def test_ids_that_look_like_numbers_or_nulls_stay_strings(tmp_path: Path) -> None:
    ids = ["001", "0123", "1e5", "-1", "0x10", "nan", "NaN", "NULL", "null", "NA", "N/A", "true", "False", "inf", "#1"]
    text = "".join(f"{qid} Q0 {doc} 1 1.0 sys\n" for qid, doc in zip(["001", *ids], [*ids, "007"], strict=True))
    run = read_trec_run(_write(tmp_path, "numbers.trec", text.encode()))
    docs = [doc for pairs in run.rankings.values() for doc, _ in pairs]
    assert sorted(run.rankings) == sorted({"001", *ids})
    assert sorted(docs) == sorted([*ids, "007"])
    assert all(isinstance(doc, str) for doc in docs)


@pytest.mark.parametrize(
    "text",
    [
        b"q1 Q0 d1 1 1.5 sys x\n",
        b"q1 Q0 d1 1 1.5 sys",
        b"q1 Q0 d1 1 1.5 sys a b c\nq1 Q0 d2 2 1 sys a b c\n",
        b"q1 Q0 d1 1 1.5 sys\nq1 Q0 d2 2 1 sys extra\n",
        b"q1 Q0 d1 1 1.5 sys extra\nq1 Q0 d2 2 1 sys\n",
    ],
)
def test_one_line_runs_and_extra_columns(tmp_path: Path, text: bytes) -> None:
    run = read_trec_run(_write(tmp_path, "r.trec", text))
    assert run.name == "sys"
    assert run.rankings["q1"][0] == ("d1", 1.5)
    assert run.lines == text.count(b"Q0")


@pytest.mark.parametrize("score", ["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "+inf", "1e400", "-1e400"])
def test_non_finite_trec_scores_are_refused(tmp_path: Path, score: str) -> None:
    path = _write(tmp_path, "nf.trec", f"q1 Q0 d1 1 1 sys\nq1 Q0 d2 2 {score} sys\n".encode())
    with pytest.raises(RunFileError, match=rf"nf.trec line 2: score '{re.escape(score)}' is not finite"):
        read_run(path)


@pytest.mark.parametrize("score", ["1_0", "\uff15", "\u0661", "0x10", "1.5f", "1e", "."])
def test_scores_python_would_read_but_the_parser_does_not_are_refused(tmp_path: Path, score: str) -> None:
    """float() takes "1_0" (10) and non-ASCII digits; the columnar parser refuses them, and trec_eval's atof() reads
    "1_0" as 1: such a line is refused, naming it, rather than read line by line as Python reads it."""
    path = _write(tmp_path, "ns.trec", f"q1 Q0 d1 1 1 sys\nq1 Q0 d2 2 {score} sys\n".encode())
    with pytest.raises(RunFileError, match=rf"ns.trec line 2: score '{re.escape(score)}' is not a number"):
        read_run(path)


@pytest.mark.parametrize("score", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_non_finite_jsonl_scores_are_refused(tmp_path: Path, score: str) -> None:
    line = f'{{"query_id": "q1", "results": [{{"chunk_id": "d1", "score": {score}}}]}}\n'
    path = _write(tmp_path, "nf.jsonl", f'{{"query_id": "q0", "results": []}}\n{line}'.encode())
    with pytest.raises(RunFileError, match=r"nf.jsonl line 2(: not JSON|.*is not finite)"):
        read_run(path)


@pytest.mark.parametrize("score", ["1e308", "-1.7976931348623157e308", "5e-324", "-0.0", "1e-400", "123456789e-3"])
def test_large_and_tiny_finite_scores_are_read_exactly(tmp_path: Path, score: str) -> None:
    run = read_run(_write(tmp_path, "f.trec", f"q1 Q0 d1 1 {score} sys\n".encode()))
    (value,) = run.scores.tolist()
    assert value.hex() == float(score).hex()


@pytest.mark.parametrize(
    ("line", "field", "shown"),
    [
        ("q\x01 Q0 d1 1 1 sys", "qid", r"'q\\x01'"),
        ("q1 Q0 d\u202e1 1 1 sys", "docid", r"'d\\u202e1'"),
        ("q1 Q0 d\x7f 1 1 sys", "docid", r"'d\\x7f'"),
    ],
)
def test_control_characters_in_run_ids_name_the_line_and_field(
    tmp_path: Path, line: str, field: str, shown: str
) -> None:
    path = _write(tmp_path, "ctl.trec", f"q1 Q0 d0 1 2 sys\n\n{line}\n".encode())
    with pytest.raises(RunFileError, match=rf"ctl.trec line 3: field '{field}': {shown} holds a control"):
        read_run(path)


@pytest.mark.parametrize(
    ("tag", "shown"),
    [
        ("\x1b[31msys", r"'\\x1b\[31msys'"),  # ANSI escape
        ("sys\x07", r"'sys\\x07'"),  # BEL
        ("s\x00ys", r"'s\\x00ys'"),  # NUL
        ("s\u202eys", r"'s\\u202eys'"),  # right-to-left override
        ("s\u2066ys", r"'s\\u2066ys'"),  # left-to-right isolate
    ],
)
@pytest.mark.parametrize("line", [1, 3])
def test_a_tag_with_a_control_or_bidi_character_is_refused_on_any_line(
    tmp_path: Path, tag: str, shown: str, line: int
) -> None:
    lines = ["q1 Q0 d0 1 2 sys", "q1 Q0 d1 2 1 sys", "q2 Q0 d1 1 1 sys"]
    lines[line - 1] = lines[line - 1].replace("sys", tag)
    path = _write(tmp_path, "tags.trec", ("\n".join(lines) + "\n").encode())
    with pytest.raises(RunFileError, match=rf"tags.trec line {line}: field 'tag': {shown} holds a control"):
        read_run(path)


def test_a_tag_that_is_no_id_names_the_run_by_its_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "named-by-file.trec", b"q1 Q0 d0 1 2 a/b\nq1 Q0 d1 1 1 sys\n")
    assert read_run(path).name == "named-by-file"


def test_many_bad_run_lines_list_twenty_and_count_the_rest(tmp_path: Path) -> None:
    lines = ["q1 Q0 d0 1 1 sys", *(f"q1 Q0 d{i} {i} x{i} sys" for i in range(1, 26))]
    path = _write(tmp_path, "many.trec", ("\n".join(lines) + "\n").encode())
    with pytest.raises(RunFileError) as caught:
        read_run(path)
    message = str(caught.value)
    assert message.startswith("many.trec: 25 malformed line(s)")
    assert "many.trec line 21: score 'x20'" in message
    assert "line 22:" not in message
    assert message.endswith("... and 5 more")


def test_invalid_utf8_in_a_run_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "latin.trec", b"q1 Q0 d1 1 1 sys\nq1 Q0 caf\xe9 2 0.5 sys\n")
    with pytest.raises(RunFileError, match=r"latin.trec line 2: not UTF-8"):
        read_run(path)


# --- property tests: what is written is what is read -------------------------------------------------------------

_SPECIAL_IDS = ["001", "0123", "1e5", "-1", "nan", "NULL", "NA", "true", "inf", "#1", '"q"', "query-id", "中文"]
ids = st.one_of(st.sampled_from(_SPECIAL_IDS), st.text("abcxyzQ0189-_.:/+é中", min_size=1, max_size=8))
scores = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 5e-324, -2.2250738585072014e-308, 1.7976931348623157e308, 1e308, 0.1, 1 / 3]),
)
separators = st.sampled_from([" ", "\t", "  ", " \t ", "\t\t", "\x0b", "\x0c"])
line_ends = st.sampled_from(["\n", "\r\n", " \n", "\t\r\n"])


def _respace(text: str, data: st.DataObject) -> bytes:
    """Each line's single spaces replaced by drawn runs of blanks, with drawn line ends and blank lines."""
    out = []
    for line in text.splitlines():
        fields = line.split(" ")
        lead = data.draw(st.sampled_from(["", " ", "\t"]))
        body = fields[0] + "".join(data.draw(separators) + f for f in fields[1:])
        out.append(lead + body + data.draw(line_ends) + data.draw(st.sampled_from(["", "", "\n", " \r\n"])))
    return "".join(out).encode()


def _package(raw: bytes, data: st.DataObject) -> bytes:
    """``raw``, perhaps with a BOM, perhaps gzip-compressed in one or several members."""
    if data.draw(st.booleans()):
        raw = b"\xef\xbb\xbf" + raw
    members = data.draw(st.integers(0, 3))
    if members == 0:
        return raw
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), min_size=members - 1, max_size=members - 1)))
    return _members(raw, *cuts)


@settings(max_examples=60)
@given(
    rankings=st.dictionaries(ids, st.lists(st.tuples(ids, scores), min_size=1, max_size=5), max_size=5),
    data=st.data(),
)
def test_written_runs_read_back_exactly(tmp_path_factory: pytest.TempPathFactory, rankings, data) -> None:  # type: ignore[no-untyped-def]
    raw = trec_run_bytes(rankings, tag="sys")
    if data.draw(st.booleans()):
        raw = _respace(raw.decode(), data)
    path = tmp_path_factory.mktemp("run") / "written.trec"
    path.write_bytes(_package(raw, data))
    block = data.draw(st.sampled_from([1 << 22, 1 << 22, 7, 64]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tables, "_BLOCK", block)
        run = read_trec_run(path)
    expected = {q: tuple((d, float(s)) for d, s in pairs) for q, pairs in rankings.items()}
    assert run.rankings == expected
    exact = {q: [(d, s.hex()) for d, s in pairs] for q, pairs in run.rankings.items()}
    assert exact == {q: [(d, s.hex()) for d, s in pairs] for q, pairs in expected.items()}
    assert run.lines == sum(len(pairs) for pairs in rankings.values())
    assert all(math.isfinite(s) for s in run.scores.tolist())


def test_a_large_file_is_read_block_by_block_to_the_same_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import evalkit.data.tables as tables

    lines = "".join(f"q{q} Q0 d{(q * 7 + r) % 50} {r} {1.0 / (r + 1)!r} sys\n" for q in range(40) for r in range(30))
    path = tmp_path / "big.trec"
    path.write_text(lines, encoding="utf-8")
    whole = read_run(path)
    monkeypatch.setattr(tables, "STREAM_BYTES", 0)
    streamed = read_run(path)
    assert streamed.rankings == whole.rankings and streamed.name == whole.name == "sys"
    import evalkit.data.runs as runs

    monkeypatch.setattr(runs, "STREAM_BYTES", 0)  # arrays sized by a count of the lines, filled block by block
    counted = read_run(path)
    assert counted.rankings == whole.rankings and len(counted.scores) == 40 * 30
    assert tables.count_lines(path) == 40 * 30


@pytest.mark.parametrize("counted", [False, True], ids=["blocks-joined", "arrays-sized-by-count"])
def test_a_large_file_whose_separators_change_late_is_read_again_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: bool
) -> None:
    import evalkit.data.runs as runs
    import evalkit.data.tables as tables

    lines = [f"q{q} Q0 d{(q * 7 + r) % 50} {r} {1.0 / (r + 1)!r} sys\n" for q in range(300) for r in range(30)]
    lines[-1] = lines[-1].replace(" ", "\t")  # past the head that is looked at first, and past many blocks
    path = tmp_path / "late.trec"
    path.write_text("".join(lines), encoding="utf-8")
    whole = read_run(path)
    monkeypatch.setattr(tables, "STREAM_BYTES", 0)
    monkeypatch.setattr(tables, "_STREAM_BLOCK", 1 << 12)  # many blocks kept before the tab is met
    if counted:
        monkeypatch.setattr(runs, "STREAM_BYTES", 0)
    streamed = read_run(path)
    assert streamed.lines == whole.lines == 300 * 30
    assert streamed.rankings == whole.rankings


def _plain_run(folder: Path) -> tuple[Path, bytes]:
    lines = "".join(f"q{q} Q0 d{(q * 7 + r) % 50} {r} {1.0 / (r + 1)!r} sys\n" for q in range(40) for r in range(30))
    return _write(folder, "plain.trec", lines.encode()), lines.encode()


@pytest.mark.parametrize("kind", ["plain", "streamed", "gzip", "bom", "tabs", "tab-late"])
def test_pyarrow_is_only_ever_handed_native_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """A Python file object in pyarrow's threaded CSV reader is released on one of pyarrow's threads, which then
    takes the GIL; when that happens while the interpreter exits, the process aborts (SIGABRT, exit 134) instead of
    exiting 0 or 2. So every parse gets a native file or a native in-memory buffer, whatever the file is."""
    import pyarrow as pa

    plain, data = _plain_run(tmp_path)
    expected = read_run(plain).rankings
    sources: list[object] = []
    for name in ("read_csv", "open_csv"):
        original = getattr(tables.csv, name)

        def recording(source: object, *args: object, _original: Callable[..., object] = original) -> object:
            sources.append(source)
            return _original(source, *args)

        monkeypatch.setattr(tables.csv, name, recording)
    if kind == "streamed":
        monkeypatch.setattr(tables, "STREAM_BYTES", 0)
    variants = {
        "plain": data,
        "streamed": data,
        "gzip": gzip.compress(data),
        "bom": b"\xef\xbb\xbf" + data,
        "tabs": data.replace(b" ", b"\t"),
        "tab-late": data[:-30] + data[-30:].replace(b" ", b"\t"),
    }
    path = _write(tmp_path, f"{kind}.trec", variants[kind])
    assert read_run(path).rankings == expected
    assert sources, "nothing was parsed by pyarrow"
    assert all(isinstance(s, pa.NativeFile) and not isinstance(s, pa.PythonFile) for s in sources), sources


def test_bytes_passed_through_python_parse_alike_in_blocks_of_any_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gzip, tabs, stretches of blank lines and a header after blank lines: blocks of 64 bytes (many blocks of
    blank lines only) read the same rows as one block."""
    _, data = _plain_run(tmp_path)
    lines = data.replace(b" ", b"\t").split(b"\n")
    run = _write(tmp_path, "run.trec.gz", gzip.compress(b"\n".join(lines[:300] + [b""] * 200 + lines[300:])))
    qrels = _write(tmp_path, "qrels.tsv", b"\n" * 150 + b"query-id\tcorpus-id\tscore\n\n" + QRELS.replace(b" 0 ", b" "))
    whole_run, whole_qrels = read_run(run).rankings, read_qrels_file(qrels)
    assert len(whole_run) == 40 and whole_qrels.as_dict() == QRELS_DICT
    monkeypatch.setattr(tables, "_BLOCK", 64)
    assert read_run(run).rankings == whole_run
    assert read_qrels_file(qrels).as_dict() == QRELS_DICT


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_line_longer_than_the_limit_is_refused_while_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compress: bool
) -> None:
    """A file without line ends was joined block after block (quadratic: 131 s for 100 MB gzip); now any line over
    MAX_LINE_BYTES is refused as soon as it is, and a long line under it reads whole."""
    monkeypatch.setattr(tables, "_BLOCK", 64)
    monkeypatch.setattr(tables, "MAX_LINE_BYTES", 5_000)
    long_id = "d" + "x" * 3_000
    data = f"q1 Q0 {long_id} 1 2.5 sys\nq1 Q0 d2 2 1.5 sys\n".encode()
    fine = _write(tmp_path, "long.trec" + (".gz" if compress else ""), gzip.compress(data) if compress else data)
    assert read_run(fine).rankings == {"q1": ((long_id, 2.5), ("d2", 1.5))}
    assert next(line for _, line in text_lines(fine)).split()[2] == long_id
    endless = b"q1 Q0 " + b"y" * 6_000
    path = _write(
        tmp_path, "endless.trec" + (".gz" if compress else ""), gzip.compress(endless) if compress else endless
    )
    with pytest.raises((RunFileError, InputError), match=r"a line is longer than [0-9.e-]+ MiB \(no line end\)"):
        read_run(path)


# --- naming bad lines fast: blocks that parse are passed over ------------------------------------------------------

_BAD_RUN_LINES = (
    "q{q} Q0 d{i} 1 x{i} sys",  # a score that is not a number
    "q{q} Q0 d{i} 1 sys",  # five columns
    "q{q} Q0 d\x01{i} 1 0.5 sys",  # a control character in a document ID
    "q\u202e{q} Q0 d{i} 1 0.5 sys",  # a bidirectional control in a query ID
    "q{q} Q0 d{i} 1 1_0 sys",  # a score Python reads but the parser does not
    "q{q} Q0 d{i} 1 inf sys",  # not finite
    "q{q} Q0 d{i}" + "x" * 300 + " 1 x sys",  # long and bad
)
_GOOD_RUN_LINES = (
    "q{q} Q0 d{i} {i} {s} sys",
    "q{q}\tQ0  d{i} {i}\t{s} sys",
    "",
    "q{q} Q0 d{i} {i} {s} sys\r",
    "q{q} Q0 d{i}" + "x" * 300 + " {i} {s} sys",  # longer than a part: a block that is one line
)


@pytest.mark.parametrize("seed", range(12))
def test_bad_lines_found_block_by_block_are_those_found_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """diagnose() with a block check passes over the blocks that parse and checks the lines of the others: it must
    name exactly the lines, in order and by number, that checking every line names (tiny blocks, so that blocks
    are cut again and again, and bad lines fall at every kind of boundary)."""
    import numpy as np

    from evalkit.data import runs

    rng = np.random.default_rng(seed)
    monkeypatch.setattr(tables, "_BLOCK", int(rng.integers(200, 2000)))
    monkeypatch.setattr(bad_lines, "_SUSPECT_BYTES", int(rng.integers(20, 200)))
    lines = []
    for i in range(int(rng.integers(50, 400))):
        bad = rng.random() < rng.choice([0.002, 0.02, 0.2])
        kinds = _BAD_RUN_LINES if bad else _GOOD_RUN_LINES
        lines.append(kinds[int(rng.integers(len(kinds)))].format(q=i // 10, i=i, s=round(1 - i / 1000, 3)))
    path = _write(tmp_path, "mixed.trec", ("\n".join(lines) + "\n").encode())
    check = runs._trec_line_problem
    clean = bad_lines.block_check(path, runs._TREC_COLUMNS, runs._TREC_TYPES, runs._refuses)
    by_blocks = bad_lines.diagnose(path, check, clean=clean)
    by_lines = bad_lines.diagnose(path, check)
    assert by_blocks.problems == by_lines.problems
    assert str(by_blocks) == str(by_lines)


def test_bad_lines_are_named_among_lines_longer_than_a_block_part(tmp_path: Path) -> None:
    """A bad line of 70 KB (longer than the parts blocks are cut into) and a valid line of 3 MB (longer than
    pyarrow's default parse block) beside a bad one: named by line, never a RecursionError or a refused good line."""
    long_bad = f"q1 Q0 d1 1 1.5 t\nq1 Q0 {'d' * 70_000} 2 abc t\n"
    with pytest.raises(RunFileError, match=r"^long.trec: 1 malformed line\(s\)\n  - long.trec line 2: score 'abc'"):
        read_run(_write(tmp_path, "long.trec", long_bad.encode()))
    valid_and_bad = f"q1 Q0 {'d' * 3_000_000} 1 2.0 t\nq1 Q0 d2 2 1.0 t\nq1 Q0 d3 3 x t\n"
    with pytest.raises(RunFileError, match=r"^both.trec: 1 malformed line\(s\)\n  - both.trec line 3: score 'x'"):
        read_run(_write(tmp_path, "both.trec", valid_and_bad.encode()))
    extra_first = f"q1 Q0 d1 1 2.0 t x\nq1 Q0 {'d' * 70_000} 2 1.0 t\n"  # valid: read line by line
    assert read_run(_write(tmp_path, "irregular.trec", extra_first.encode())).lines == 2


def test_exactly_a_thousand_bad_lines_are_counted_exactly(tmp_path: Path) -> None:
    text = "q0 Q0 d0 1 1 t\n" + "".join(f"q{i} Q0 d{i} 1 x t\n" for i in range(1, 1001))
    with pytest.raises(RunFileError, match=r"^thousand.trec: 1000 malformed line\(s\)\n"):
        read_run(_write(tmp_path, "thousand.trec", text.encode()))


def test_a_file_of_the_wrong_kind_is_refused_after_a_thousand_bad_lines(tmp_path: Path) -> None:
    """A five-column file is refused without a Python check of every line: the first 1,000 bad lines are counted,
    20 listed, and the message says where the check stopped."""
    text = "".join(f"q{i} Q0 d{i} 1 0.5\n" for i in range(5000))
    with pytest.raises(RunFileError) as caught:
        read_run(_write(tmp_path, "five.trec", text.encode()))
    message = str(caught.value)
    assert message.startswith("five.trec: more than 1,000 malformed lines (not checked past line 1,001)\n")
    assert "five.trec line 20: expected 6 columns" in message and "line 21:" not in message
    assert message.endswith("\n  - ... and more")


def test_qrels_bad_lines_are_found_past_a_header_and_across_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The BEIR header is skipped in whichever block holds it; bad grades further on are named by line."""
    monkeypatch.setattr(tables, "_BLOCK", 300)
    monkeypatch.setattr(bad_lines, "_SUSPECT_BYTES", 40)
    rows = [f"q{i}\td{i}\t{'0x1' if i in (3, 40, 41, 99) else i % 3}" for i in range(100)]
    path = _write(tmp_path, "qrels.tsv", ("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n").encode())
    with pytest.raises(QrelsError) as caught:
        read_qrels_file(path)
    message = str(caught.value)
    assert message.startswith("qrels.tsv: 4 malformed line(s)\n")
    assert [int(n) for n in re.findall(r"qrels.tsv line (\d+):", message)] == [5, 42, 43, 101]


@pytest.mark.parametrize(
    ("name", "data", "line"),
    [
        ("cr-only.trec", b"q1 Q0 d1 1 2.0 sys\rq1 Q0 d2 2 1.0 sys\rq2 Q0 d3 1 1.0 sys\r", 1),
        ("cr-late.trec", b"q1\tQ0 d1 1 2.0 sys\nq1 Q0 d2 2 1.0 sys\nq1 Q0 d3 3 0.5 sys\rq2 Q0 d4 1 1.0 sys\n", 3),
        ("cr.qrels", b"q1 0 d1 1\r\nq1 0 d2 0\r\nq2 0 d3 1\rq2 0 d4 0\r\n", 3),
        ("cr.gz", gzip.compress(b"q1 Q0 d1 1 2.0 sys\nq1 Q0 d2 2 1.0 sys\rq1 Q0 d3 3 0.5 sys\n", mtime=0), 2),
    ],
    ids=["cr-only", "cr-late", "qrels", "gzip"],
)
def test_a_carriage_return_that_ends_no_line_is_refused_naming_its_line(
    tmp_path: Path, name: str, data: bytes, line: int
) -> None:
    """Read as a blank, a lone \\r would join two lines: a file whose lines end with \\r alone was read as a run of
    one line, without a word. It is refused, naming the line and what to do."""
    path = _write(tmp_path, name, data)
    reader = read_qrels_file if name.endswith(".qrels") else read_run
    with pytest.raises(ValueError, match=rf"line {line}: a carriage return \(\\r\) that does not end a line"):
        reader(path)


def test_carriage_returns_that_end_lines_are_blanks(tmp_path: Path) -> None:
    """\\r\\n line ends, and a \\r ending the file, are read as before."""
    run = read_run(_write(tmp_path, "crlf.trec", b"q1 Q0 d1 1 2.0 sys\r\nq1 Q0 d2 2 1.0 sys\r\nq2 Q0 d3 1 1.0 sys\r"))
    assert run.lines == 3 and run.name == "sys"
    qrels = read_qrels_file(_write(tmp_path, "crlf.qrels", b"q1 0 d1 1\r\nq1 0 d2 0\r"))
    assert qrels.as_dict() == {"q1": {"d1": 1, "d2": 0}}


@pytest.mark.parametrize("blank", ["\t", " ", "\t \t"])
def test_blanks_at_a_line_end_or_start_past_the_first_block_are_separators(tmp_path: Path, blank: str) -> None:
    """Only the first 64 KiB decide whether separators need normalising; a tab starting or ending a later line was
    joined to the grade or the ID, and valid qrels were refused ("could not be parsed"). Both readers now read such
    a file again, normalising."""
    head = "".join(f"q{i} 0 d{i} 1\n" for i in range(8000))  # about 100 KB of single spaces
    qrels = read_qrels_file(_write(tmp_path, "late.qrels", (head + f"qx 0 dx 2{blank}\n{blank}qy 0 dy 3\n").encode()))
    assert qrels.as_dict()["qx"] == {"dx": 2} and qrels.as_dict()["qy"] == {"dy": 3}
    lines = "".join(f"q{i} Q0 d{i} 1 1.5 sys\n" for i in range(5000))
    run = read_run(_write(tmp_path, "late.trec", (lines + f"{blank}qx Q0 dx 1 2.0 sys{blank}\n").encode()))
    assert run.lines == 5001 and "qx" in run.queries.to_pylist()
