"""Every reader of a user's file goes through one guarded door.

For each reader: a FIFO or ``/dev/zero`` is refused at once (never blocking), a file over the size cap is refused,
a byte-order mark changes nothing, JSON too deep, with a 400-digit integer, ``1e400``, ``NaN`` or a duplicate key is
refused naming the file, and fuzzed bytes give a result or a ``ValueError``, never another exception or a hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalkit.data.beir import beir_files, read_beir
from evalkit.data.collection import CollectionOptions, read_qrels
from evalkit.data.fixture import load_fixture
from evalkit.data.inputs import MAX_JSON_DEPTH, nesting_depth
from evalkit.data.qrels import Qrels, read_qrels_file
from evalkit.data.repairs import RepairLog, RepairPolicy
from evalkit.data.runs import Run, read_run
from evalkit.data.squad import read_squad
from evalkit.data.topics import read_topics
from evalkit.data.trec import read_trec, trec_files
from evalkit.reporting.gate_specs import load_gate_file
from evalkit.reporting.gates import load_baselines
from evalkit.retrieval import http, http_config
from evalkit.retrieval.presets import load_settings_file

from ..conftest import ROOT, SYNTHETIC_DIR, TINY_DIR

GUARD_S = 5.0
BOM = b"\xef\xbb\xbf"


# --- the readers ------------------------------------------------------------------------------------------------


def _view(value: Any) -> Any:
    """A comparable form of what a reader returned (runs and qrels are columnar, without ``==``)."""
    if isinstance(value, Run):
        return value.name, dict(value.rankings)
    if isinstance(value, Qrels):
        return value.as_dict()
    return value


@dataclass(frozen=True)
class Reader:
    """One reader: the valid files it reads (one of them the target under test) and how to call it."""

    name: str
    target: str
    files: Mapping[str, bytes]
    read: Callable[[Path, int | None], Any] = field(repr=False)
    json: bool = False

    def write(self, directory: Path, target: bytes | None = None) -> Path:
        """Write every file into `directory` (the target with `target` when given); return the target's path."""
        for name, data in self.files.items():
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(target if target is not None and name == self.target else data)
        return directory / self.target


def _options() -> CollectionOptions:
    return CollectionOptions(fixture_id="guarded", license="CC0-1.0", attribution="Guarded-reader test data.")


def _log() -> RepairLog:
    return RepairLog(RepairPolicy())


def _cap(value: int | None) -> dict[str, int]:
    return {} if value is None else {"max_bytes": value}


def _http_config(directory: Path, cap: int | None) -> Any:
    """The retriever configuration ``search.json``; its fixed cap (``MAX_CONFIG_BYTES``) patched when given."""
    patch = mock.patch.object(http_config, "MAX_CONFIG_BYTES", cap) if cap is not None else contextlib.nullcontext()
    with patch:
        return http_config.load_http_config(directory / "search.json")


def _readers() -> list[Reader]:
    tiny = load_fixture(TINY_DIR).fixture
    beir = beir_files(tiny)
    trec = trec_files(tiny, "jsonl")
    trec_tsv = trec_files(tiny, "tsv")
    fixture_files = {name: (TINY_DIR / name).read_bytes() for name in ("fixture.json", "aliases.json")}
    topics_jsonl = '{"query_id": "q1", "text": "How do I reset my password?"}\n{"_id": "q2", "text": "如何"}\n'.encode()
    run_jsonl = (
        b'{"query_id": "q1", "results": [{"chunk_id": "c1", "score": 0.5}, {"chunk_id": "c2", "score": 0.25}]}\n'
    )
    http_config = {"name": "search", "url": "http://127.0.0.1:9/", "body": {"q": "{text}"}}

    def beir_reader(target: str) -> Reader:
        return Reader(
            f"read_beir {target}",
            target,
            beir,
            lambda d, cap: read_beir(d, "test", _options(), _log(), **_cap(cap)),
            json=target.endswith(".jsonl"),
        )

    def trec_reader(target: str, files: Mapping[str, bytes]) -> Reader:
        topics = next(name for name in files if name.startswith("topics."))
        return Reader(
            f"read_trec {target}",
            target,
            files,
            lambda d, cap: read_trec(d / "qrels.txt", d / topics, d / "corpus.jsonl", _options(), _log(), **_cap(cap)),
            json=target.endswith(".jsonl"),
        )

    return [
        Reader("load_fixture", "fixture.json", fixture_files, lambda d, cap: load_fixture(d, **_cap(cap)), True),
        Reader("aliases", "aliases.json", fixture_files, lambda d, cap: load_fixture(d, **_cap(cap)), True),
        Reader(
            "load_baselines",
            "baselines.json",
            {"baselines.json": (SYNTHETIC_DIR / "baselines.json").read_bytes()},
            lambda d, cap: load_baselines(d, **_cap(cap)),
            True,
        ),
        Reader(
            "load_gate_file",
            "gates.json",
            {"gates.json": (SYNTHETIC_DIR / "gates.json").read_bytes()},
            lambda d, cap: load_gate_file(d, **_cap(cap)),
            True,
        ),
        Reader(
            "load_settings_file",
            "settings.json",
            {"settings.json": b'{"lexical_weight": 0.6, "reranker": {"min_score": 0.1}}'},
            lambda d, cap: load_settings_file(d / "settings.json", **_cap(cap)),
            True,
        ),
        Reader(
            "read_squad",
            "squad.json",
            {"squad.json": (ROOT / "tests" / "fixtures" / "squad" / "tiny.en.json").read_bytes()},
            lambda d, cap: read_squad(d / "squad.json", None, **_cap(cap)),
            True,
        ),
        beir_reader("corpus.jsonl"),
        beir_reader("queries.jsonl"),
        beir_reader("qrels/test.tsv"),
        Reader(
            "collection.read_qrels",
            "test.tsv",
            {"test.tsv": beir["qrels/test.tsv"]},
            lambda d, cap: read_qrels(d / "test.tsv", _log(), "beir", **_cap(cap)),
        ),
        trec_reader("corpus.jsonl", trec),
        trec_reader("topics.jsonl", trec),
        trec_reader("qrels.txt", trec),
        trec_reader("topics.tsv", trec_tsv),
        Reader(
            "read_topics tsv",
            "topics.tsv",
            {"topics.tsv": "qid\ttext\nq1\t如何重置密码\nq2\tOpen the trash folder\n".encode()},
            lambda d, cap: read_topics(d / "topics.tsv", **_cap(cap)),
        ),
        Reader(
            "read_topics jsonl",
            "topics.jsonl",
            {"topics.jsonl": topics_jsonl},
            lambda d, cap: read_topics(d / "topics.jsonl", **_cap(cap)),
            True,
        ),
        Reader(
            "read_run trec",
            "run.txt",
            {"run.txt": b"q1 Q0 c1 1 0.5 sys\nq1 Q0 c2 2 0.25 sys\nq2 Q0 c1 1 1.0 sys\n"},
            lambda d, cap: read_run(d / "run.txt", **_cap(cap)),
        ),
        Reader(
            "read_run jsonl",
            "run.jsonl",
            {"run.jsonl": run_jsonl},
            lambda d, cap: read_run(d / "run.jsonl", **_cap(cap)),
            True,
        ),
        Reader(
            "read_qrels_file trec",
            "qrels.txt",
            {"qrels.txt": b"q1 0 c1 2\nq1 0 c2 1\nq2 0 c1 3\n"},
            lambda d, cap: read_qrels_file(d / "qrels.txt", **_cap(cap)),
        ),
        Reader(
            "read_qrels_file beir",
            "qrels.tsv",
            {"qrels.tsv": b"query-id\tcorpus-id\tscore\nq1\tc1\t2\nq2\tc1\t1\n"},
            lambda d, cap: read_qrels_file(d / "qrels.tsv", **_cap(cap)),
        ),
        Reader(
            "load_http_config",
            "search.json",
            {"search.json": json.dumps(http_config).encode()},
            _http_config,
            True,
        ),
    ]


READERS = _readers()
JSON_READERS = [reader for reader in READERS if reader.json]


def _ids(reader: Reader) -> str:
    return reader.name


def _within(seconds: float, call: Callable[[], Any]) -> tuple[str, Any]:
    """``("value", result)`` or ``("error", exception)`` of ``call()``, which must finish within `seconds`."""
    box: list[tuple[str, Any]] = []

    def run() -> None:
        try:
            box.append(("value", call()))
        except BaseException as exc:  # handed to the test, which checks its type
            box.append(("error", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"did not finish within {seconds} s (blocked on the input?)")
    return box[0]


def _refusal(reader: Reader, directory: Path, cap: int | None = None) -> ValueError:
    """The ValueError the reader raises, which must come within the guard time and name the target file."""
    kind, outcome = _within(GUARD_S, lambda: reader.read(directory, cap))
    assert kind == "error", f"{reader.name} accepted the file: {outcome!r}"
    assert isinstance(outcome, ValueError), f"{reader.name} raised {type(outcome).__name__}: {outcome}"
    assert Path(reader.target).name in str(outcome), str(outcome)
    return outcome


@contextlib.contextmanager
def _released(fifo: Path) -> Iterator[None]:
    """Open the FIFO's writing end afterwards, so that a reader stuck on it (a regression) is let go."""
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


# --- every reader: valid files, FIFOs, devices, the size cap, a byte-order mark --------------------------------


@pytest.mark.parametrize("reader", READERS, ids=_ids)
def test_the_valid_files_are_read(tmp_path: Path, reader: Reader) -> None:
    reader.write(tmp_path)
    assert reader.read(tmp_path, None) is not None


@pytest.mark.parametrize("reader", READERS, ids=_ids)
def test_a_fifo_is_refused_at_once(tmp_path: Path, reader: Reader) -> None:
    target = reader.write(tmp_path)
    target.unlink()
    os.mkfifo(target)
    with _released(target):
        error = _refusal(reader, tmp_path)
    assert "FIFO" in str(error) or "not a regular file" in str(error)


@pytest.mark.parametrize("reader", READERS, ids=_ids)
def test_dev_zero_is_refused_at_once(tmp_path: Path, reader: Reader) -> None:
    target = reader.write(tmp_path)
    target.unlink()
    target.symlink_to("/dev/zero")
    error = _refusal(reader, tmp_path)
    assert "device" in str(error) or "not a regular file" in str(error)


@pytest.mark.parametrize("reader", READERS, ids=_ids)
def test_a_file_over_the_cap_is_refused_and_one_at_the_cap_read(tmp_path: Path, reader: Reader) -> None:
    """The target is padded with blank lines (whitespace every format skips) past every other file's size."""
    reader.write(tmp_path)
    valid = reader.read(tmp_path, None)
    padded = reader.files[reader.target] + b"\n" * (max(map(len, reader.files.values())) + 16)
    reader.write(tmp_path, padded)
    error = _refusal(reader, tmp_path, len(padded) - 1)
    assert "larger than the input limit" in str(error)
    assert _view(reader.read(tmp_path, len(padded))) == _view(valid)


@pytest.mark.parametrize("reader", READERS, ids=_ids)
def test_a_byte_order_mark_changes_nothing(tmp_path: Path, reader: Reader) -> None:
    reader.write(tmp_path)
    plain = reader.read(tmp_path, None)
    reader.write(tmp_path, BOM + reader.files[reader.target])
    assert _view(reader.read(tmp_path, None)) == _view(plain)


# --- JSON readers: limits on depth and numbers, no NaN, no duplicate keys -----------------------------------------

DEEP = "[" * 10_000 + "]" * 10_000
HOSTILE_JSON = [
    pytest.param(DEEP, r"nested 10001 deep \(more than 64\)", id="depth-10000"),
    pytest.param("9" * 400, "an integer of 400 digits (more than 300)", id="400-digits"),
    pytest.param("-1e400", "a number out of range (-1e400)", id="1e400"),
    pytest.param("NaN", "NaN is not valid JSON", id="NaN"),
    pytest.param('1, "x": 2', "duplicate key 'x'", id="duplicate-key"),
]


def _with_value(valid: bytes, value: str) -> bytes:
    """`valid` with ``"x": value`` as the first key of its first object (the first record of a JSONL file)."""
    head, brace, rest = valid.partition(b"{")
    assert brace, "a JSON reader's valid file starts with an object"
    return head + b'{"x": ' + value.encode() + b", " + rest


def _json_cases() -> Iterator[Any]:
    for reader in JSON_READERS:
        marks: list[Any] = []
        for case in HOSTILE_JSON:
            value, message = case.values
            yield pytest.param(reader, value, message, id=f"{reader.name}-{case.id}", marks=marks)


@pytest.mark.parametrize(("reader", "value", "message"), list(_json_cases()))
def test_hostile_json_is_refused_with_a_clear_message(tmp_path: Path, reader: Reader, value: str, message: str) -> None:
    reader.write(tmp_path, _with_value(reader.files[reader.target], value))
    error = _refusal(reader, tmp_path)
    text = str(error)
    assert re.search(message, text) if message.startswith("nested") else message in text, text
    assert len(text) < 1_000  # nothing of the hostile value is echoed whole


# --- the shared limits ----------------------------------------------------------------------------------------


def test_real_files_nest_well_within_the_limit() -> None:
    fixtures = ROOT / "tests" / "fixtures"
    for path in [*SYNTHETIC_DIR.glob("*.json"), *TINY_DIR.glob("*.json"), *fixtures.rglob("*.json")]:
        assert nesting_depth(path.read_bytes()) <= 9 < MAX_JSON_DEPTH, path


def test_the_http_adapter_uses_the_shared_limits() -> None:
    assert http.nesting_depth is nesting_depth
    with pytest.raises(ValueError, match="an integer of 301 digits"):
        http.loads_response(b"[" + b"1" * 301 + b"]")
    assert http.loads_response(BOM + b'{"a": [1]}') == {"a": [1]}


# --- fuzz: any bytes give a result or a ValueError, at once ---------------------------------------------------

_TOKENS = [
    b"NaN",
    b"-Infinity",
    b"1e400",
    b"9" * 400,
    b"[" * 200,
    b"{" * 80,
    b"]}",
    BOM,
    b'"',
    b"\\",
    b"\\ud800",
    b"\x00",
    b"\xff",
    b"\xc3",
    b"\t",
    b"\r",
    b"\n",
    b"\n\n",
    b"\x1f\x8b",
    b"\xe2\x80\xa8",
    b'"x": 1, "x": 2, ',
    b"-",
    b"0.0",
    b"99999999999999999999",
    b" Q0 ",
]


@st.composite
def _near_valid(draw: st.DrawFn, valid: bytes) -> bytes:
    """`valid` with a few edits: tokens or random bytes inserted, slices deleted or repeated, a BOM in front."""
    data = valid
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        edit = draw(st.sampled_from(["token", "bytes", "delete", "repeat", "bom"]))
        if edit == "token":
            data = data[:at] + draw(st.sampled_from(_TOKENS)) + data[at:]
        elif edit == "bytes":
            data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
        elif edit == "delete":
            data = data[:at] + data[at + draw(st.integers(1, 64)) :]
        elif edit == "repeat":
            data = data[:at] + data[at : at + 200] * 2 + data[at + 200 :]
        else:
            data = BOM + data
    return data


@pytest.mark.parametrize("reader", READERS, ids=_ids)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_bytes_give_a_result_or_a_value_error(reader: Reader, data: st.DataObject) -> None:
    content = data.draw(st.binary(max_size=4096) | _near_valid(reader.files[reader.target]), label="content")
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        reader.write(directory, content)
        kind, outcome = _within(GUARD_S, lambda: reader.read(directory, None))
    if kind == "error":
        assert isinstance(outcome, ValueError), f"{reader.name} raised {type(outcome).__name__}: {outcome}"
        # the file is named, or the collection it belongs to (a whole-fixture problem of an import)
        assert Path(reader.target).name in str(outcome) or folder in str(outcome), str(outcome)
