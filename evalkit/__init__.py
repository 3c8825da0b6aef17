"""evalkit: offline, deterministic retrieval evaluation for bilingual (Simplified Chinese + English) knowledge bases.

The names below are the public surface; everything else may change between versions. Start with :func:`score`:
any run against any qrels, no corpus needed.
"""

from evalkit.common.output import OutputPathError, resolve_output_path
from evalkit.data.fixture import Fixture, FixtureError, LoadedFixture, load_fixture
from evalkit.data.runs import read_run
from evalkit.data.settings import RetrievalSettings
from evalkit.data.squad import SquadImportOptions, import_cross_lingual, import_squad, read_squad
from evalkit.measures.metrics import Measure
from evalkit.measures.registry import MeasureDef, parse_measure, register_measure, unregister_measure
from evalkit.reporting.comparison import compare_reports
from evalkit.reporting.gate_specs import GateThresholds
from evalkit.reporting.gates import GateFailure, check_gates, evaluate_gates, load_baselines
from evalkit.reporting.regression import find_regressions
from evalkit.reporting.report import Report, build_report, parse_report, report_json
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
from evalkit.runs.real_data import BenchmarkConfig, run_benchmark
from evalkit.runs.scoring import ScoreResult, load_qrels, load_run, score

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
    "Measure",
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
