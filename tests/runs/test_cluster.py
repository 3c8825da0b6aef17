"""Tests for evalkit.runs.cluster on a local Ray instance (``ray.init(num_cpus=2)``, started once for the module): the
sharded report equals the single-process one for 1, 2 and 3 shards, embedding runs as Ray tasks through the cache,
a killed actor is restarted and its queries retried, and past the retry bound the run fails naming the shard."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from evalkit.app.cli import main
from evalkit.common.output import ENV_VAR
from evalkit.data.fixture import LoadedFixture
from evalkit.data.settings import RetrievalSettings
from evalkit.retrieval.database import KnowledgeDatabase, KnowledgeStore
from evalkit.retrieval.embedding_cache import CachedProvider, EmbeddingCache
from evalkit.runs.ablations import ABLATION_IDS, select_ablations
from evalkit.runs.evaluation import Evaluation, evaluate

from ..conftest import SYNTHETIC_DIR, TINY_DIR

pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'evalkit[ray]')")

from evalkit.runs.cluster import (  # noqa: E402 (only once ray is known to import)
    ClusterOptions,
    RayEmbedder,
    RayShards,
    ShardFailedError,
    evaluate_on_ray,
    ray_store,
)

SMALL = ("token-hash-vector", "hybrid-rerank")
"""Covers every search path (lexical, vector, fusion, rerank) and both provider kinds (cached, concept-naming)."""


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.mark.parametrize("shards", [1, 2, 3])
def test_sharded_run_has_the_single_process_projection(
    tiny: LoadedFixture, tiny_evaluation: Evaluation, shards: int
) -> None:
    """Every built-in ablation of the standard five (the synthetic suite on 3 shards: the CLI test below)."""
    sharded = evaluate_on_ray(tiny, select_ablations(list(ABLATION_IDS)), ClusterOptions(shards=shards), runs=1)
    assert sharded.projection_sha256 == tiny_evaluation.projection_sha256
    assert sharded.evaluation_definition_hash == tiny_evaluation.evaluation_definition_hash


def test_shards_build_the_planned_index_and_measure_its_recall(tiny: LoadedFixture) -> None:
    """A sparse index on each shard answers as the single process's, restarted shards included, with recall 1.0."""
    settings = RetrievalSettings(vector_index="sparse")
    ablations = select_ablations(["token-hash-vector", "hybrid"])
    single = evaluate(tiny, ablations, settings, runs=1)
    options = ClusterOptions(shards=3, max_retries=2)
    killing = _killing(1, no_restart=False, seen=[])
    sharded = evaluate_on_ray(
        tiny, ablations, options, settings, runs=1, stores=lambda r, database: killing(r, database, options)
    )
    assert sharded.projection_sha256 == single.projection_sha256
    assert sharded.evaluation_definition_hash == single.evaluation_definition_hash
    assert {pid: (r.index, r.recall_at_10) for pid, r in sharded.vector_indexes.items()} == {
        pid: ("sparse", 1.0) for pid in single.vector_indexes
    }


def test_corpus_embedding_runs_as_ray_tasks_and_a_rerun_embeds_nothing(tiny: LoadedFixture, tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    made: list[RayEmbedder] = []
    from evalkit.runs import cluster

    original = cluster.ray_providers

    def recording(*args: Any) -> Any:
        providers = original(*args)
        made.extend(p.provider for p in providers.values() if isinstance(p, CachedProvider))  # type: ignore[misc]
        return providers

    options = ClusterOptions(shards=2, embed_batch=3)
    ablations = select_ablations(list(SMALL))
    cluster.ray_providers = recording  # type: ignore[assignment]
    try:
        first = evaluate_on_ray(tiny, ablations, options, runs=1, cache=cache)
        misses = cache.misses
        second = evaluate_on_ray(tiny, ablations, options, runs=1, cache=cache)
    finally:
        cluster.ray_providers = original  # type: ignore[assignment]
    assert [type(p) for p in made] == [RayEmbedder, RayEmbedder]
    assert made[0].tasks == 3 + 3  # 8 chunks and 8 queries in batches of 3
    assert made[1].tasks == 0 and cache.misses == misses == 2
    assert first.projection_sha256 == second.projection_sha256
    assert first.projection_sha256 == evaluate(tiny, ablations, runs=1).projection_sha256


def _killing(kill_at: int, no_restart: bool, seen: list[RayShards]):  # type: ignore[no-untyped-def]
    """A store factory whose shard 1 actor is killed at the kill_at-th lexical query of the run."""

    @contextmanager
    def stores(ray_module: Any, database: KnowledgeDatabase, options: ClusterOptions) -> Iterator[KnowledgeStore]:
        with ray_store(ray_module, database, options) as store:
            shards = store.shards  # type: ignore[attr-defined]
            seen.append(shards)
            lexical, calls = shards.lexical, [0]

            def killing_lexical(terms: Any, limit: int) -> Any:
                calls[0] += 1
                if calls[0] == kill_at:
                    ray_module.kill(shards.actors[1], no_restart=no_restart)
                return lexical(terms, limit)

            shards.lexical = killing_lexical
            yield store

    return stores


def test_a_killed_actor_is_restarted_and_its_queries_retried(tiny: LoadedFixture) -> None:
    seen: list[RayShards] = []
    options = ClusterOptions(shards=2, max_retries=2)
    killing = _killing(3, no_restart=False, seen=seen)
    ablations = select_ablations(["lexical", "hybrid"])  # hybrid after the kill: the restarted shard needs its rows
    sharded = evaluate_on_ray(
        tiny, ablations, options, runs=1, stores=lambda r, database: killing(r, database, options)
    )
    assert seen[0].retries >= 1
    assert sharded.projection_sha256 == evaluate(tiny, ablations, runs=1).projection_sha256


def test_past_the_retry_bound_the_run_fails_naming_the_shard(tiny: LoadedFixture) -> None:
    options = ClusterOptions(shards=2, max_retries=1)
    killing = _killing(2, no_restart=True, seen=[])
    with pytest.raises(ShardFailedError, match=r"shard 1 of 2 failed in lexical .*gave up after 1 retry"):
        evaluate_on_ray(
            tiny,
            select_ablations(["lexical"]),
            options,
            runs=1,
            stores=lambda r, database: killing(r, database, options),
        )


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    return tmp_path


def test_cli_sharded_run_prints_the_same_summary_and_report(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["run", "--fixture", str(SYNTHETIC_DIR), "--runs", "1", "--no-cache"]
    assert main([*common, "--output", "single.json"]) == 0
    single_out = capsys.readouterr().out
    assert main([*common, "--ray", "local", "--shards", "3", "--output", "sharded.json"]) == 0
    captured = capsys.readouterr()
    assert _without_latency_cells(captured.out.replace("sharded.json", "single.json")) == _without_latency_cells(
        single_out
    )
    assert "3 shard(s) on Ray (local)" in captured.err
    single = (workspace / "single.json").read_text(encoding="utf-8")
    sharded = (workspace / "sharded.json").read_text(encoding="utf-8")
    assert _without_latency(sharded) == _without_latency(single)


def _without_latency_cells(summary: str) -> list[str]:
    """The printed summary and gates without the p50/p95 cells (the last two of each ``all`` row)."""
    lines = []
    for line in summary.splitlines():
        fields = line.split()
        lines.append(" ".join(fields[:-2]) if len(fields) > 2 and fields[1] == "all" else line)
    return lines


def _without_latency(report: str) -> Any:
    import json

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if "latency" not in k}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads(report))


def test_cli_shard_failure_exits_2_naming_the_shard_and_writes_no_report(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.runs import cluster

    monkeypatch.setattr(cluster, "ray_store", _killing(2, no_restart=True, seen=[]))
    flags = ["--ray", "local", "--shards", "2", "--output", "report.json", "--ablations", "lexical"]
    code = main(["run", "--fixture", str(TINY_DIR), "--runs", "1", "--no-cache", *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert "shard 1 of 2 failed" in err and "Traceback" not in err
    assert not (workspace / "report.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shards", "2"], "--shards needs --ray"),
        (["--ray", "local", "--shards", "0"], "cluster option shards out of range: 0"),
    ],
)
def test_cli_bad_cluster_flags_exit_2(
    workspace: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code = main(["run", "--fixture", str(TINY_DIR), "--runs", "1", "--output", "r.json", *argv])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (workspace / "r.json").exists()


def _notebook_parameters(**extra: Any) -> Any:
    from evalkit.app.notebook import EvaluationParameters

    values: dict[str, Any] = {
        "fixture": "tests/fixtures/tiny",
        "ablations": list(SMALL),
        "runs": 1,
        "report_output": None,
        "figures_dir": None,
        "min_reranked_mrr_at_10": 0.0,
        "min_reranked_ndcg_at_10": 0.0,
        "max_no_answer_fpr": 1.0,
        "max_rerank_ndcg_drop": 1.0,
        "cache_dir": None,
    }
    return EvaluationParameters.model_validate({**values, **extra})


def test_notebook_parameters_run_on_ray_with_the_same_projection(tiny: LoadedFixture) -> None:
    single = _notebook_parameters()
    sharded = _notebook_parameters(ray="local", shards=3)
    ablations, systems = single.systems
    assert single.ray is None and single.shards == 1
    assert (
        sharded.evaluate(tiny, ablations, systems).projection_sha256
        == single.evaluate(tiny, ablations, systems).projection_sha256
    )
    with pytest.raises(ValueError, match="shards"):
        _notebook_parameters(ray="local", shards=0)
