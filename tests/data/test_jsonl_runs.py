"""JSONL runs read into columns (evalkit.data.json_lines) give what the line-by-line reading gives, or leave the file
to it: the same run, or the same refusal, for valid files, hostile ones and IDs in any script."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import evalkit.data.runs as runs
from evalkit.data.ids import bad_ids, given_id_problem, has_refused_given_ids, id_problem
from evalkit.data.inputs import nesting_depth
from evalkit.data.json_lines import read_json_lines
from evalkit.data.runs import Run, RunFileError, read_jsonl_run

Outcome = tuple[str, Any]


def _columnar(path: Path) -> Outcome:
    try:
        return "run", _fields(read_jsonl_run(path))
    except RunFileError as exc:
        return "error", str(exc)


def _line_by_line(path: Path, monkeypatch: pytest.MonkeyPatch) -> Outcome:
    with monkeypatch.context() as patch:
        patch.setattr(runs, "read_json_lines", lambda *_: None)
        return _columnar(path)


def _fields(run: Run) -> tuple[Any, ...]:
    scores = run.scores.view(np.int64).tolist()  # bit for bit
    return run.name, run.queries.to_pylist(), run.query.tolist(), run.doc_ids.to_pylist(), scores, run.lines


def _took_columns(path: Path) -> bool:
    return read_json_lines(path, 1 << 30, runs.JSONL_SCHEMA) is not None


_IDS = st.sampled_from(["q1", "q2", "问题3", "Q-4", "d1", "文档", "c:5", "x" * 40])
_SCORES = st.one_of(
    st.integers(-(10**18), 10**18),
    st.floats(-1e299, 1e299),  # from 1e300 on the line reader decides (a case below)
    st.sampled_from([0.1, 1e-320, 2.2250738585072011e-308, 9.99e299]),
)
_EXTRA = st.fixed_dictionaries(
    {}, optional={"rank": st.integers(0, 9), "text": st.sampled_from(["说明", "a"]), "meta": st.just({"a": [1, 2]})}
)  # each unnamed field keeps one type (pyarrow infers it; one of two types is left to the line reader, below)


@st.composite
def _jsonl(draw: Callable[..., Any]) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        results = [
            {"chunk_id": draw(_IDS), "score": draw(_SCORES), **draw(_EXTRA)} for _ in range(draw(st.integers(0, 5)))
        ]
        record = {"query_id": draw(_IDS), **draw(_EXTRA), "results": results}
        lines.append(json.dumps(record, ensure_ascii=draw(st.booleans())))
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from(["", "  ", "\t"])))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_jsonl())
def test_a_valid_file_gives_the_line_readers_run_from_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(text, encoding="utf-8")
    assert _took_columns(path)  # no valid file is left to the line reader
    expected = _line_by_line(path, monkeypatch)
    assert _columnar(path) == expected


def test_a_query_on_several_lines_keeps_its_results_together_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    lines = [
        {"query_id": "b", "results": [{"chunk_id": "d1", "score": 3}]},
        {"query_id": "a", "results": []},
        {"query_id": "b", "results": [{"chunk_id": "d2", "score": 2}]},
        {"query_id": "a", "results": [{"chunk_id": "d3", "score": 1}]},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert _took_columns(path)
    run = read_jsonl_run(path)
    assert run.rankings == {"b": (("d1", 3.0), ("d2", 2.0)), "a": (("d3", 1.0),)}


_RESULT = '{"chunk_id": "d1", "score": 1}'
HOSTILE = {
    "duplicate key": '{"query_id": "q1", "query_id": "q2", "results": []}',
    "duplicate key in an unnamed field": '{"query_id": "q1", "x": {"a": 1, "a": 2}, "results": []}',
    "duplicate key in a result": '{"query_id": "q1", "results": [{"chunk_id": "d", "chunk_id": "e", "score": 1}]}',
    "NaN score": '{"query_id": "q1", "results": [{"chunk_id": "d1", "score": NaN}]}',
    "NaN elsewhere": '{"query_id": "q1", "x": NaN, "results": []}',
    "-Infinity": '{"query_id": "q1", "x": -Infinity, "results": []}',
    "overflow": '{"query_id": "q1", "results": [{"chunk_id": "d1", "score": 1e400}]}',
    "301 digits": '{"query_id": "q1", "x": ' + "9" * 301 + ', "results": []}',
    "a score of 1e300": '{"query_id": "q1", "results": [{"chunk_id": "d1", "score": 1e300}]}',
    "300 digits": '{"query_id": "q1", "results": [{"chunk_id": "d1", "score": ' + "9" * 300 + "}]}",
    "a string score": '{"query_id": "q1", "results": [{"chunk_id": "d1", "score": "2.5"}]}',
    "a bool score": '{"query_id": "q1", "results": [{"chunk_id": "d1", "score": true}]}',
    "null score": '{"query_id": "q1", "results": [{"chunk_id": "d1", "score": null}]}',
    "no score": '{"query_id": "q1", "results": [{"chunk_id": "d1"}]}',
    "null query": '{"query_id": null, "results": []}',
    "no results": '{"query_id": "q1"}',
    "a null result": '{"query_id": "q1", "results": [null]}',
    "an unnamed field of two types": (
        '{"query_id": "q1", "x": 1, "results": []}\n{"query_id": "q2", "x": "a", "results": []}'
    ),
    "-0": '{"query_id": "q1", "results": [{"chunk_id": "d1", "score": -0}]}',
    "-0.0": '{"query_id": "q1", "results": [{"chunk_id": "d1", "score": -0.0}]}',
    "a number for an ID": '{"query_id": 5, "results": []}',
    "two objects on a line": '{"query_id": "q1", "results": []}{"query_id": "q2", "results": []}',
    "an object over two lines": '{"query_id": "q1",\n"results": []}',
    "an array": "[1, 2]",
    "deep nesting": '{"query_id": "q1", "x": ' + "[" * 100_000 + "]" * 100_000 + ', "results": []}',
    "a control character escaped": '{"query_id": "q\\u0001", "results": []}',
    "a lone surrogate": '{"query_id": "q\\ud800", "results": []}',
    "ideographic space": '{"query_id": "q\u30001", "results": []}',
    "no-break space": '{"query_id": "q1", "results": [{"chunk_id": "d\u00a0", "score": 1}]}',
    "line separator": '{"query_id": "q1", "results": [{"chunk_id": "d\\u2028", "score": 1}]}',
    "bidi control": '{"query_id": "q\u202e1", "results": []}',
    "empty ID": '{"query_id": "", "results": []}',
    "an ID with a space": '{"query_id": "q 1", "results": []}',
    "a line of Unicode space": "\u3000",
    "byte-order mark inside": '{"query_id": "q1", "results": []}\n\ufeff{"query_id": "q2", "results": []}',
    "not UTF-8": None,
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_files_get_the_line_readers_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    path = tmp_path / "run.jsonl"
    body = HOSTILE[case]
    first = '{"query_id": "q0", "results": [' + _RESULT + "]}\n"
    if body is None:
        path.write_bytes(first.encode() + b'{"query_id": "caf\xe9", "results": []}\n')
    else:
        path.write_bytes((first + body + "\n").encode("utf-8", "surrogatepass"))
    assert _columnar(path) == _line_by_line(path, monkeypatch)


def test_hostile_files_are_still_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('{"query_id": "q1", "x": NaN, "results": []}\n', encoding="utf-8")
    kind, message = _columnar(path)
    assert kind == "error" and "NaN is not valid JSON" in message, message


def test_gzip_and_a_byte_order_mark_are_read_from_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = '\ufeff{"query_id": "q1", "results": [{"chunk_id": "d1", "score": 0.5}]}\r\n'
    path = tmp_path / "run.jsonl.gz"
    path.write_bytes(gzip.compress(text.encode("utf-8")))
    assert _took_columns(path)
    assert _columnar(path) == _line_by_line(path, monkeypatch)
    assert read_jsonl_run(path).rankings == {"q1": (("d1", 0.5),)}


def test_scores_are_the_doubles_python_reads(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    values = rng.standard_normal(2000) * 10.0 ** rng.integers(-300, 300, 2000)
    texts = [repr(float(v)) for v in values] + [f"{v:.25g}" for v in values[:500]]
    texts += ["0.1000000000000000055511151231257827", "4.9e-324", "1e-400", "9007199254740993", "0", "1E5"]
    texts += ["1" * 300, "123456789012345678901234567890"]
    path = tmp_path / "run.jsonl"
    with path.open("w", encoding="utf-8") as stream:
        for number, text in enumerate(texts):
            stream.write(f'{{"query_id": "q{number}", "results": [{{"chunk_id": "d", "score": {text}}}]}}\n')
    assert _took_columns(path)
    run = read_jsonl_run(path)
    got = dict(zip(run.queries.take(pa.array(run.query)).to_pylist(), run.scores.tolist(), strict=True))
    expected = {f"q{number}": float(json.loads(text)) for number, text in enumerate(texts)}
    assert {k: np.float64(v).tobytes() for k, v in got.items()} == {
        k: np.float64(v).tobytes() for k, v in expected.items()
    }


def test_the_readers_column_check_refuses_what_their_per_id_check_refuses() -> None:
    """TREC and TSV columns (:func:`has_bad_ids`) against :func:`id_problem`, code point by code point: the same
    IDs, and every character ``str.isspace`` calls white space but the ASCII space among them (a TREC line could
    not hold it, and a JSON run refuses it), so that no ID is taken in one format and refused in another."""
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    refused = np.array([id_problem("a" + chr(c), "id", "here") is not None for c in points])
    mask = np.asarray(bad_ids(pa.array(["a" + chr(c) for c in points])).to_numpy(zero_copy_only=False), dtype=bool)
    assert np.array_equal(mask, refused)
    assert all(refused[i] for i, c in enumerate(points) if chr(c).isspace() and c != 0x20)
    assert id_problem("d\u00a0x", "doc_id", "run.trec line 3") == (
        "run.trec line 3: field 'doc_id': 'd\\xa0x' holds a space beyond ASCII (no-break, ideographic)"
    )


def test_the_column_check_of_ids_refuses_what_the_per_id_check_refuses() -> None:
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    values = pa.array(["a" + chr(c) for c in points])
    refused = [given_id_problem("a" + chr(c), "id", "here") is not None for c in points]
    assert all(has_refused_given_ids(pa.array(["a" + chr(points[i])])) for i in np.flatnonzero(refused).tolist())
    clean = values.filter(pa.array([not r for r in refused]))
    assert not has_refused_given_ids(clean)  # every code point the per-ID check takes, in one column
    assert sum(refused) > 50  # controls, bidi controls and every Unicode space
    assert has_refused_given_ids(pa.array(["ok", ""]))
    assert not has_refused_given_ids(pa.array([], pa.string()))


def _depth_reference(payload: bytes) -> int:
    """Nesting depth by one Python pass over the bytes, after the same escapes are dropped."""
    cleaned = payload.replace(b"\\\\", b"").replace(b'\\"', b"")
    depth = deepest = 0
    inside = False
    for byte in cleaned:
        if byte == ord('"'):
            inside = not inside
        elif not inside and byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif not inside and byte in b"]}":
            depth -= 1
    return deepest


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | st.text(alphabet='[]{}"\\ a1', max_size=300).map(str.encode))
def test_nesting_depth_counts_as_one_pass_over_the_bytes_does(payload: bytes) -> None:
    assert nesting_depth(payload) == max(_depth_reference(payload), 0)


@pytest.mark.parametrize("body", ['{"query_id": "q\\u0001", "results": []}', '{"query_id": "q1", "results": []}'])
def test_a_file_name_that_is_no_run_id_comes_after_the_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    path = tmp_path / "no id.jsonl"  # a space: the run cannot be named after the file
    path.write_text(body + "\n", encoding="utf-8")
    outcome = _columnar(path)
    assert outcome == _line_by_line(path, monkeypatch)
    assert outcome[0] == "error" and ("line 1" in outcome[1]) == ("u0001" in body), outcome
