"""Retrieval settings as an input (presets, settings files), the embedding cache in every run, and the run
command's tidy edges (R@1, empty languages, documented defaults, bounded --runs)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from evalkit.app.cli import build_parser
from evalkit.app.notebook import EvaluationParameters
from evalkit.data.fixture import FIXTURE_FILE, LoadedFixture, load_fixture
from evalkit.data.schema import Matrix
from evalkit.data.settings import RetrievalSettings
from evalkit.reporting.build import build_report
from evalkit.reporting.report import parse_report, report_json
from evalkit.reporting.summary import format_summary, report_rows
from evalkit.retrieval.embedding_cache import EmbeddingCache
from evalkit.retrieval.embeddings import TokenHashProvider
from evalkit.retrieval.presets import (
    DEFAULT_PRESET,
    PRESETS,
    default_settings_note,
    load_settings_file,
    preset_settings,
    resolve_settings,
)
from evalkit.runs.ablations import PROVIDERS, select_ablations
from evalkit.runs.evaluation import evaluate

from ..conftest import TINY_DIR
from .test_cli import run_cli, workspace  # noqa: F401 (the workspace fixture)

TINY = str(TINY_DIR)


def test_presets_are_the_synthetic_defaults_and_the_benchmark_settings() -> None:
    assert preset_settings("synthetic-v1") == RetrievalSettings()
    benchmark = preset_settings("benchmark")
    assert (benchmark.lexical_weight, benchmark.vector_weight) == (0.5, 0.5)
    assert benchmark.reranker.min_score == 0.0
    assert benchmark.vector_min_similarity == 0.0
    assert DEFAULT_PRESET == "synthetic-v1"


def test_unknown_preset_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown settings preset 'nope'; valid: synthetic-v1, benchmark"):
        preset_settings("nope")


def test_settings_file_round_trips_and_fills_defaults(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"lexical_weight": 0.6, "reranker": {"min_score": 0.1}}), encoding="utf-8")
    settings = load_settings_file(path)
    assert settings.lexical_weight == 0.6
    assert settings.reranker.min_score == 0.1
    assert settings.vector_weight == RetrievalSettings().vector_weight


def test_settings_file_problems_name_the_file_and_each_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"top_k": 0, "colour": "blue", "reranker": {"min_score": 2}}), encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_settings_file(path)
    message = str(caught.value)
    assert message.startswith("settings file 'bad.json': ")
    assert "field 'top_k': Input should be greater than or equal to 1" in message
    assert "field 'colour': Extra inputs are not permitted" in message
    assert "field 'reranker.min_score'" in message
    assert "validation error" not in message  # no raw pydantic dump


def test_settings_file_must_be_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not found or not a regular file"):
        load_settings_file(tmp_path)


def test_preset_and_file_are_exclusive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        resolve_settings("benchmark", tmp_path / "s.json")
    assert resolve_settings(None, None) == ("synthetic-v1", PRESETS["synthetic-v1"])


def test_run_with_a_preset_prints_and_stores_the_settings(
    capsys: pytest.CaptureFixture[str],
    workspace: Path,  # noqa: F811
) -> None:
    code, out, _ = run_cli(
        capsys, "run", "--fixture", TINY, "--runs", "1", "--preset", "benchmark", "--no-gates", "--output", "r.json"
    )
    assert code == 0
    assert "retrieval settings: benchmark (top_k=10" in out
    assert "lexical_weight=0.5, vector_weight=0.5" in out
    report = parse_report((workspace / "r.json").read_bytes())
    assert report.retrieval_settings == PRESETS["benchmark"]


def test_the_default_settings_on_another_fixture_say_what_else_fits(
    capsys: pytest.CaptureFixture[str],
    workspace: Path,  # noqa: F811
) -> None:
    base = ("run", "--fixture", TINY, "--runs", "1", "--no-gates", "--ablations", "lexical", "--output", "r.json")
    code, out, _ = run_cli(capsys, *base)
    assert code == 0
    assert "default retrieval settings (synthetic-v1) were tuned on synthetic-bilingual-v1; for tiny-bilingual" in out
    assert "--preset benchmark" in out and "--calibrate" in out
    code, out, _ = run_cli(capsys, *base, "--preset", "synthetic-v1")  # chosen: no note
    assert code == 0 and "tuned on" not in out
    assert default_settings_note("synthetic-bilingual-v1") is None


def test_run_with_a_settings_file_changes_the_definition_hash(
    capsys: pytest.CaptureFixture[str],
    workspace: Path,  # noqa: F811
) -> None:
    (workspace / "s.json").write_text(json.dumps({"top_k": 5}), encoding="utf-8")
    base = ("run", "--fixture", TINY, "--runs", "1", "--no-gates", "--ablations", "lexical")
    assert run_cli(capsys, *base, "--output", "a.json")[0] == 0
    code, out, _ = run_cli(capsys, *base, "--settings", "s.json", "--output", "b.json")
    assert code == 0
    assert "retrieval settings: file (top_k=5" in out
    a = parse_report((workspace / "a.json").read_bytes())
    b = parse_report((workspace / "b.json").read_bytes())
    assert b.retrieval_settings.top_k == 5
    assert a.evaluation_definition_hash != b.evaluation_definition_hash


def test_bad_settings_file_exits_2_naming_the_field(
    capsys: pytest.CaptureFixture[str],
    workspace: Path,  # noqa: F811
) -> None:
    (workspace / "s.json").write_text(json.dumps({"fusion": "magic"}), encoding="utf-8")
    code, _, err = run_cli(capsys, "run", "--fixture", TINY, "--settings", "s.json", "--output", "r.json")
    assert code == 2
    assert "settings file 's.json': field 'fusion'" in err
    assert not (workspace / "r.json").exists()


@pytest.mark.parametrize("runs", ["0", "11", "1000000000"])
def test_runs_is_bounded(capsys: pytest.CaptureFixture[str], workspace: Path, runs: str) -> None:  # noqa: F811
    code, _, err = run_cli(capsys, "run", "--fixture", TINY, "--runs", runs)
    assert code == 2
    assert f"--runs must be between 1 and 10, got {runs}" in err


def test_summary_has_recall_at_1_and_leaves_out_a_language_without_queries(tiny: LoadedFixture, tmp_path: Path) -> None:
    data = json.loads((TINY_DIR / FIXTURE_FILE).read_text(encoding="utf-8"))
    data["queries"] = [q for q in data["queries"] if q["language"] == "en"]
    (tmp_path / FIXTURE_FILE).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    english_only = load_fixture(tmp_path)
    report = build_report(evaluate(english_only, select_ablations(["lexical"]), runs=1))
    summary = format_summary(report_rows(report), list(report.measure_definitions()))
    assert summary.splitlines()[0].split()[:3] == ["system", "slice", "recall@1"]
    slices = [line.split()[1] for line in summary.splitlines()[2:]]
    assert slices == ["all", "en"]
    report = build_report(evaluate(tiny, select_ablations(["lexical"]), runs=1))
    both = format_summary(report_rows(report), list(report.measure_definitions()))
    assert [line.split()[1] for line in both.splitlines()[2:]] == ["all", "en", "zh"]


def _options(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, argparse.Action]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _options(sub, (*path, name))
        elif action.option_strings and action.default is not argparse.SUPPRESS:
            found.append((" ".join(path), action))
    return found


def test_every_option_documents_its_default() -> None:
    options = _options(build_parser())
    assert len(options) > 20
    undocumented = [
        f"{where} {action.option_strings[0]}"
        for where, action in options
        if "default" not in (action.help or "") and "(required)" not in (action.help or "")
    ]
    assert undocumented == []


def test_run_help_shows_the_cache_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: .cache/evalkit)" in out
    assert "--no-cache embed without the on-disk cache (default: off)" in out


class CountingProvider(TokenHashProvider):
    """Token hashing that counts calls and texts embedded (stands in for an expensive real model)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.calls.append(len(texts))
        return super().embed(texts)


REAL_MODEL_ABLATIONS = ["usem3-vector", "usem3-hybrid", "usem3-hybrid-rerank"]


def test_a_query_is_embedded_once_per_run_and_a_rerun_embeds_nothing(
    tiny: LoadedFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[CountingProvider] = []

    def factory(_aliases: object) -> CountingProvider:
        made.append(CountingProvider())
        return made[-1]

    monkeypatch.setitem(PROVIDERS, "usem3", factory)
    ablations = select_ablations(REAL_MODEL_ABLATIONS)
    first = evaluate(tiny, ablations, runs=2, cache=EmbeddingCache(tmp_path / "cache"))
    fixture = tiny.fixture
    # Two batches (corpus, queries) for three ablations and two runs: every text embedded exactly once.
    assert made[0].calls == [len(fixture.chunks), len(fixture.queries)]
    second = evaluate(tiny, ablations, runs=2, cache=EmbeddingCache(tmp_path / "cache"))
    assert made[1].calls == []
    assert second.projection_sha256 == first.projection_sha256
    uncached = evaluate(tiny, ablations, runs=1)
    assert sum(made[2].calls) > len(fixture.chunks) + len(fixture.queries)  # per-query embedding without a cache
    assert uncached.projection_sha256 == first.projection_sha256


def test_cache_leaves_results_unchanged(tiny: LoadedFixture, tmp_path: Path) -> None:
    ablations = select_ablations(["token-hash-vector", "hybrid-rerank"])
    cached = evaluate(tiny, ablations, runs=1, cache=EmbeddingCache(tmp_path / "c"))
    plain = evaluate(tiny, ablations, runs=1)
    assert cached.projection_sha256 == plain.projection_sha256
    assert cached.evaluation_definition_hash == plain.evaluation_definition_hash
    assert any((tmp_path / "c").rglob("*.npy"))


def test_run_uses_the_cache_dir_and_no_cache_writes_none(
    capsys: pytest.CaptureFixture[str],
    workspace: Path,  # noqa: F811
) -> None:
    base = ("run", "--fixture", TINY, "--runs", "1", "--no-gates", "--ablations", "token-hash-vector")
    assert run_cli(capsys, *base, "--no-cache")[0] == 0
    assert not (workspace / ".cache").exists()
    assert run_cli(capsys, *base, "--cache-dir", "emb")[0] == 0
    assert len(list((workspace / "emb").rglob("*.npy"))) == 2  # corpus and queries


def test_report_settings_hold_numbers_and_names_only(tiny: LoadedFixture) -> None:
    report = build_report(evaluate(tiny, select_ablations(["lexical"]), runs=1))
    stored = json.loads(report_json(report))["retrieval_settings"]

    def leaves(node: object) -> list[object]:
        return [v for x in node.values() for v in leaves(x)] if isinstance(node, dict) else [node]

    assert all(isinstance(v, int | float) or v in ("rrf", "max-normalized") for v in leaves(stored))


def test_notebook_settings_parameter(tmp_path: Path) -> None:
    values = {
        "fixture": "fixtures/synthetic-bilingual-v1",
        "ablations": ["lexical"],
        "runs": 1,
        "report_output": None,
        "figures_dir": None,
        "min_reranked_mrr_at_10": 0.78,
        "min_reranked_ndcg_at_10": 0.75,
        "max_no_answer_fpr": 0.34,
        "max_rerank_ndcg_drop": 0.05,
    }
    assert EvaluationParameters.model_validate(values).retrieval_settings == PRESETS["synthetic-v1"]
    chosen = EvaluationParameters.model_validate({**values, "settings": "benchmark", "cache_dir": None})
    assert chosen.retrieval_settings == PRESETS["benchmark"]
    assert chosen.embedding_cache is None
    for bad in ("nope", "/etc/settings.json", "../s.json"):
        with pytest.raises(ValueError, match="neither a preset"):
            EvaluationParameters.model_validate({**values, "settings": bad})


def test_cached_rows_equal_fresh_rows(tmp_path: Path) -> None:
    provider = TokenHashProvider()
    texts = ["refund policy", "退款政策"]
    assert np.array_equal(EmbeddingCache(tmp_path).embed(provider, texts), provider.embed(texts))
