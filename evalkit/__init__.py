"""evalkit: offline, deterministic retrieval evaluation for bilingual (Simplified Chinese + English) knowledge bases.

The names below are the public surface; everything else may change between versions. Start with :func:`score`:
any run against any qrels, no corpus needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.common.output import OutputPathError, resolve_output_path
    from evalkit.data.fixture import Fixture, FixtureError, LoadedFixture, load_fixture
    from evalkit.data.runs import read_run
    from evalkit.data.settings import RetrievalSettings
    from evalkit.data.squad import SquadImportOptions, import_cross_lingual, import_squad, read_squad
    from evalkit.measures.registry import MeasureDef, parse_measure, register_measure, unregister_measure
    from evalkit.reporting.build import build_report
    from evalkit.reporting.comparison import compare_reports
    from evalkit.reporting.gate_specs import GateThresholds
    from evalkit.reporting.gates import GateFailure, check_gates, evaluate_gates, load_baselines
    from evalkit.reporting.regression import find_regressions
    from evalkit.reporting.report import Report, parse_report, report_json
    from evalkit.retrieval.database import Hit, KnowledgeDatabase
    from evalkit.retrieval.embedding_cache import CachedProvider, EmbeddingCache
    from evalkit.retrieval.embeddings import (
        AliasProvider,
        EmbeddingProvider,
        SentenceTransformerProvider,
        TokenHashProvider,
        Usem3Provider,
        fingerprint,
    )
    from evalkit.retrieval.retriever import QueryError, QueryFailed, Retriever
    from evalkit.retrieval.service import KnowledgeService
    from evalkit.runs.ablations import (
        ABLATION_IDS,
        ABLATIONS,
        Ablation,
        external_ablation,
        parse_ablations,
        select_ablations,
    )
    from evalkit.runs.evaluation import DeterminismError, Evaluation, evaluate
    from evalkit.runs.precomputed import ScoreResult, load_qrels, load_run, score
    from evalkit.runs.real_data import BenchmarkConfig, run_benchmark

__all__ = [
    "ABLATIONS",
    "ABLATION_IDS",
    "Ablation",
    "AliasProvider",
    "BenchmarkConfig",
    "CachedProvider",
    "DeterminismError",
    "EmbeddingCache",
    "EmbeddingProvider",
    "Evaluation",
    "Fixture",
    "FixtureError",
    "GateFailure",
    "GateThresholds",
    "Hit",
    "KnowledgeDatabase",
    "KnowledgeService",
    "LoadedFixture",
    "MeasureDef",
    "OutputPathError",
    "QueryError",
    "QueryFailed",
    "Report",
    "RetrievalSettings",
    "Retriever",
    "ScoreResult",
    "SentenceTransformerProvider",
    "SquadImportOptions",
    "TokenHashProvider",
    "Usem3Provider",
    "build_report",
    "check_gates",
    "compare_reports",
    "evaluate",
    "evaluate_gates",
    "external_ablation",
    "find_regressions",
    "fingerprint",
    "import_cross_lingual",
    "import_squad",
    "load_baselines",
    "load_fixture",
    "load_qrels",
    "load_run",
    "parse_ablations",
    "parse_measure",
    "parse_report",
    "read_run",
    "read_squad",
    "register_measure",
    "report_json",
    "resolve_output_path",
    "run_benchmark",
    "score",
    "select_ablations",
    "unregister_measure",
]

_HOMES = {
    "ABLATIONS": "evalkit.runs.ablations",
    "ABLATION_IDS": "evalkit.runs.ablations",
    "Ablation": "evalkit.runs.ablations",
    "AliasProvider": "evalkit.retrieval.embeddings",
    "BenchmarkConfig": "evalkit.runs.real_data",
    "CachedProvider": "evalkit.retrieval.embedding_cache",
    "DeterminismError": "evalkit.runs.evaluation",
    "EmbeddingCache": "evalkit.retrieval.embedding_cache",
    "EmbeddingProvider": "evalkit.retrieval.embeddings",
    "Evaluation": "evalkit.runs.evaluation",
    "Fixture": "evalkit.data.fixture",
    "FixtureError": "evalkit.data.fixture",
    "GateFailure": "evalkit.reporting.gates",
    "GateThresholds": "evalkit.reporting.gate_specs",
    "Hit": "evalkit.retrieval.database",
    "KnowledgeDatabase": "evalkit.retrieval.database",
    "KnowledgeService": "evalkit.retrieval.service",
    "LoadedFixture": "evalkit.data.fixture",
    "MeasureDef": "evalkit.measures.registry",
    "OutputPathError": "evalkit.common.output",
    "QueryError": "evalkit.retrieval.retriever",
    "QueryFailed": "evalkit.retrieval.retriever",
    "Report": "evalkit.reporting.report",
    "RetrievalSettings": "evalkit.data.settings",
    "Retriever": "evalkit.retrieval.retriever",
    "ScoreResult": "evalkit.runs.precomputed",
    "SentenceTransformerProvider": "evalkit.retrieval.embeddings",
    "SquadImportOptions": "evalkit.data.squad",
    "TokenHashProvider": "evalkit.retrieval.embeddings",
    "Usem3Provider": "evalkit.retrieval.embeddings",
    "build_report": "evalkit.reporting.build",
    "check_gates": "evalkit.reporting.gates",
    "compare_reports": "evalkit.reporting.comparison",
    "evaluate": "evalkit.runs.evaluation",
    "evaluate_gates": "evalkit.reporting.gates",
    "external_ablation": "evalkit.runs.ablations",
    "find_regressions": "evalkit.reporting.regression",
    "fingerprint": "evalkit.retrieval.embeddings",
    "import_cross_lingual": "evalkit.data.squad",
    "import_squad": "evalkit.data.squad",
    "load_baselines": "evalkit.reporting.gates",
    "load_fixture": "evalkit.data.fixture",
    "load_qrels": "evalkit.runs.precomputed",
    "load_run": "evalkit.runs.precomputed",
    "parse_ablations": "evalkit.runs.ablations",
    "parse_measure": "evalkit.measures.registry",
    "parse_report": "evalkit.reporting.report",
    "read_run": "evalkit.data.runs",
    "read_squad": "evalkit.data.squad",
    "register_measure": "evalkit.measures.registry",
    "report_json": "evalkit.reporting.report",
    "resolve_output_path": "evalkit.common.output",
    "run_benchmark": "evalkit.runs.real_data",
    "score": "evalkit.runs.precomputed",
    "select_ablations": "evalkit.runs.ablations",
    "unregister_measure": "evalkit.measures.registry",
}
"""Where each public name lives. ``import evalkit`` imports none of them: a name is imported when it is first used
(PEP 562), so that ``import evalkit`` and the ``evalkit`` command start in milliseconds, and the command can handle
Ctrl-C from its very start (see :mod:`evalkit.app.launch`)."""
_PACKAGES = frozenset({"app", "common", "data", "measures", "reporting", "retrieval", "runs"})


if not TYPE_CHECKING:  # type checkers see the imports above; at run time a name is imported when used

    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is not None:
            value = getattr(importlib.import_module(home), name)
            globals()[name] = value  # once imported, a plain attribute
            return value
        if name in _PACKAGES:  # evalkit.data.runs and the like: every module the public names need, as before
            for module in sorted(set(_HOMES.values())):
                importlib.import_module(module)
            return importlib.import_module(f"evalkit.{name}")
        raise AttributeError(f"module 'evalkit' has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*(name for name in globals() if name.startswith("__")), *__all__, *_PACKAGES})
