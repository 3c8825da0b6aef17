"""evalkit: offline, deterministic retrieval evaluation for bilingual (Simplified Chinese + English) knowledge bases.

The names below are the public surface; everything else may change between versions.
"""

from evalkit.ablations import ABLATION_IDS, ABLATIONS, Ablation, parse_ablations, select_ablations
from evalkit.database import Hit, KnowledgeDatabase
from evalkit.embeddings import AliasProvider, EmbeddingProvider, TokenHashProvider, fingerprint
from evalkit.evaluation import DeterminismError, Evaluation, evaluate
from evalkit.fixture import Fixture, FixtureError, LoadedFixture, load_fixture
from evalkit.gates import GateFailure, GateThresholds, check_gates, evaluate_gates, load_baselines
from evalkit.metrics import Measure
from evalkit.output import OutputPathError, resolve_output_path
from evalkit.report import Report, build_report, parse_report, report_json
from evalkit.service import KnowledgeService, RetrievalSettings

__all__ = [
    "ABLATIONS",
    "ABLATION_IDS",
    "Ablation",
    "AliasProvider",
    "DeterminismError",
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
    "OutputPathError",
    "Report",
    "RetrievalSettings",
    "TokenHashProvider",
    "build_report",
    "check_gates",
    "evaluate",
    "evaluate_gates",
    "fingerprint",
    "load_baselines",
    "load_fixture",
    "parse_ablations",
    "parse_report",
    "report_json",
    "resolve_output_path",
    "select_ablations",
]
