"""Notebook parameters: typed, validated, and strict about names papermill injects.

A notebook's first code cell (tagged ``parameters``) assigns typed defaults; papermill injects a cell starting with
``# Parameters`` after it. The next cell calls ``<Model>.from_namespace(globals())``, which validates every value
with pydantic and refuses any injected name the notebook does not declare, so a misspelt ``-p`` option fails the
run instead of silently running with defaults. Paths are resolved from the project root, not the kernel's working
directory.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any, Self

from pydantic import Field, ValidationError, field_validator, model_validator

from evalkit.common.output import resolve_output_path
from evalkit.data.schema import ALL_ABLATION_IDS, Identifier, StrictModel, describe_validation_error
from evalkit.measures.ties import DEFAULT_TIE_POLICY, TiePolicyName
from evalkit.reporting.gate_specs import FiniteFloat, GateSpec, GateThresholds
from evalkit.reporting.gates import collect_gates
from evalkit.retrieval.embedding_cache import EmbeddingCache
from evalkit.retrieval.presets import DEFAULT_PRESET, PRESETS, load_settings_file
from evalkit.runs.ablations import Ablation, select_ablations
from evalkit.runs.pipeline import Request, evaluate_request, systems_of

if TYPE_CHECKING:
    from evalkit.data.fixture import Fixture, LoadedFixture
    from evalkit.data.settings import RetrievalSettings
    from evalkit.reporting.report import Report
    from evalkit.retrieval.retriever import Retriever
    from evalkit.runs.calibration import CalibrationOptions
    from evalkit.runs.evaluation import Evaluation
    from evalkit.runs.real_data import BenchmarkConfig

PAPERMILL_MARKER = "# Parameters"
"""The first line of the cell papermill injects."""

_SKIPPED_LINES = ("%", "!")


class UnknownParameterError(ValueError):
    """A parameter was injected that the notebook does not declare."""


def project_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) holding pyproject.toml."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file() and (folder / "evalkit").is_dir():
            return folder
    raise FileNotFoundError(f"no evalkit project (pyproject.toml beside evalkit/) at or above {here}")


def injected_names(history: Iterable[str]) -> list[str]:
    """Names assigned by papermill's injected cells, found in the kernel's input history (``In``)."""
    names: list[str] = []
    for source in history:
        if not source.lstrip().startswith(PAPERMILL_MARKER):
            continue
        code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(_SKIPPED_LINES))
        for node in ast.parse(code).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            names.extend(t.id for t in targets if isinstance(t, ast.Name))
    return list(dict.fromkeys(names))


def relative_to_root(value: str | None) -> str | None:
    """A path parameter as documented, relative to the project root (None passes): an absolute one is refused,
    since it would also show up in the executed notebook."""
    if value is not None and (PurePosixPath(value).is_absolute() or PureWindowsPath(value).anchor):
        raise ValueError("must be relative to the project root, not an absolute path")
    return value


class NotebookParameters(StrictModel):
    """Base of a notebook's parameter model: built from the kernel namespace after papermill's injection.

    Every relative path is resolved from the project root (the workspace), never the kernel's working directory.
    """

    @classmethod
    def from_namespace(cls, namespace: Mapping[str, Any]) -> Self:
        """Validate the declared parameters found in ``namespace`` and refuse undeclared injected ones."""
        declared = set(cls.model_fields)
        unknown = [n for n in injected_names(namespace.get("In", ())) if n not in declared]
        if unknown:
            raise UnknownParameterError(
                f"unknown notebook parameter(s) {', '.join(sorted(unknown))}; "
                f"this notebook declares: {', '.join(sorted(declared))}"
            )
        values = {name: namespace[name] for name in cls.model_fields if name in namespace}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise ValueError(describe_validation_error(exc, "invalid notebook parameters")) from None

    @property
    def root(self) -> Path:
        """The project root (the workspace of every relative path)."""
        return project_root()

    def relative(self, path: Path | None) -> str | None:
        """A written path as shown to people: relative to the project root (absolute paths are private)."""
        return None if path is None else path.relative_to(self.root.resolve()).as_posix()

    def output_file(self, relative: str | None) -> Path | None:
        """A workspace-relative output file, checked like the CLI's --output; None stays None."""
        return None if relative is None else resolve_output_path(relative, self.root)

    def output_folder(self, relative: str | None) -> Path | None:
        """A workspace-relative output folder (created inside the workspace); None stays None."""
        if relative is None:
            return None
        return resolve_output_path(relative.rstrip("/") + "/.folder", self.root).parent


class CalibrationParameters(NotebookParameters):
    """Parameters of notebooks that can choose fusion and floors on a calibration split (the CLI's --calibrate)."""

    calibrate: float | None = Field(
        default=None,
        description="share of the queries (in the benchmark: of each setting's) fusion and floors are chosen on "
        "(CLI --calibrate); None: none",
    )
    calibrate_seed: int = Field(default=0, ge=0, description="seed of the calibration split (CLI --calibrate-seed)")

    @field_validator("calibrate")
    @classmethod
    def _calibration_fraction(cls, value: float | None) -> float | None:
        from evalkit.runs.calibration import check_fraction

        return None if value is None else check_fraction(value, "calibrate")

    @property
    def calibration(self) -> CalibrationOptions | None:
        """The calibration options, or None when not calibrating."""
        from evalkit.runs.calibration import CalibrationOptions

        if self.calibrate is None:
            return None
        return CalibrationOptions(fraction=self.calibrate, seed=self.calibrate_seed)


class AblationParameters(NotebookParameters):
    """Parameters shared by notebooks that run ablations over a fixture."""

    fixture: str = Field(description="fixture directory, relative to the project root")
    ablations: list[str] = Field(description="ablation IDs to run: " + ", ".join(ALL_ABLATION_IDS))

    @field_validator("ablations")
    @classmethod
    def _known_ablations(cls, value: list[str]) -> list[str]:
        if value:  # none at all is refused when the ablations are selected (unless a retriever runs alone)
            select_ablations(value)
        return value

    _relative_fixture = field_validator("fixture")(relative_to_root)

    def has_ablations(self, *ablation_ids: str) -> bool:
        """True when every one of `ablation_ids` was selected (charts that compare them need them all)."""
        return set(ablation_ids) <= set(self.ablations)

    @property
    def fixture_path(self) -> Path:
        """The fixture directory, resolved from the project root."""
        return self.root / self.fixture

    @property
    def selected_ablations(self) -> tuple[Ablation, ...]:
        """The selected ablations in canonical order."""
        return select_ablations(self.ablations)

    settings: str = Field(
        default=DEFAULT_PRESET,
        description="retrieval settings: a preset name, or a settings JSON file relative to the project root",
    )
    cache_dir: str | None = Field(
        default=".cache/evalkit", description="embedding cache folder relative to the project root; None: no cache"
    )

    @model_validator(mode="after")
    def _settings_resolve(self) -> Self:
        self.retrieval_settings  # noqa: B018 (a preset or a readable settings file, checked before anything runs)
        if not self.ablations and getattr(self, "retriever", None) is None:
            select_ablations(self.ablations)  # raises "no ablation selected", listing the valid IDs
        return self

    @property
    def retrieval_settings(self) -> RetrievalSettings:
        """The settings named by ``settings``: a preset, else a JSON file under the project root."""
        if self.settings in PRESETS:
            return PRESETS[self.settings]
        relative = Path(self.settings)
        if not self.settings.endswith(".json") or relative.is_absolute() or ".." in relative.parts:
            raise ValueError(
                f"settings {self.settings!r} is neither a preset ({', '.join(PRESETS)}) "
                "nor a .json file relative to the project root"
            )
        return load_settings_file(self.root / self.settings)

    @property
    def embedding_cache(self) -> EmbeddingCache | None:
        """The on-disk embedding cache, or None."""
        return None if self.cache_dir is None else EmbeddingCache(self.root / self.cache_dir)


class EvaluationParameters(AblationParameters, CalibrationParameters):
    """Parameters of ``notebooks/retrieval_evaluation.ipynb``."""

    runs: int = Field(ge=1, le=10, description="runs compared for determinism")
    report_output: str | None = Field(description="workspace-relative JSON report path; None writes nothing")
    figures_dir: str | None = Field(description="workspace-relative folder for PNG and SVG figures; None: none")
    ties: TiePolicyName = Field(default=DEFAULT_TIE_POLICY, description="tie policy of the rankings (CLI --ties)")
    min_reranked_mrr_at_10: FiniteFloat | None = Field(description="seed gate bound; None: gates.json's")
    min_reranked_ndcg_at_10: FiniteFloat | None = Field(description="seed gate bound; None: gates.json's")
    max_no_answer_fpr: FiniteFloat | None = Field(description="seed gate bound; None: gates.json's")
    max_rerank_ndcg_drop: FiniteFloat | None = Field(description="seed gate bound; None: gates.json's")
    retriever: str | None = Field(
        default=None, description="your own retriever: 'package.module:factory', or an HTTP config file (.json)"
    )

    @property
    def systems(self) -> tuple[tuple[Ablation, ...], dict[str, Retriever]]:
        """The systems to run (the selected ablations, then the retriever's system) and the retriever by its ID."""
        if self.retriever is None:
            return self.selected_ablations, {}
        from evalkit.app.plugins import load_retrievers

        http = self.retriever.endswith(".json")
        retrievers = load_retrievers([] if http else [self.retriever], [self.root / self.retriever] if http else [])
        built_in = select_ablations(self.ablations) if self.ablations else ()  # [] runs the retriever alone
        return systems_of(built_in, retrievers), retrievers

    no_gates: bool = Field(default=False, description="print the gates but do not fail on them (CLI --no-gates)")
    ray: str | None = Field(
        default=None, description="run on Ray: 'local' or a cluster address (CLI --ray); None: in this process"
    )
    shards: int = Field(default=1, ge=1, description="with ray: shard actors the corpus is split into (CLI --shards)")

    @model_validator(mode="after")
    def _shards_need_ray(self) -> Self:
        if self.shards > 1 and self.ray is None:  # as the CLI refuses --shards without --ray: it would be ignored
            raise ValueError("shards: needs ray ('local' or a cluster address), as the CLI's --shards needs --ray")
        return self

    def request(self, loaded: LoadedFixture) -> Request:
        """What these parameters ask of the pipeline over `loaded`: the systems, settings, Ray or calibration, and the
        gates of :meth:`gates`."""
        systems, retrievers = self.systems
        return replace(self._request(loaded, systems, retrievers), gates=self.gates(loaded.fixture))

    def evaluate(
        self, loaded: LoadedFixture, systems: Sequence[Ablation], retrievers: Mapping[str, Retriever]
    ) -> Evaluation:
        """The evaluation of `systems` these parameters ask for, without the gates (see :meth:`request`)."""
        return evaluate_request(self._request(loaded, systems, retrievers))

    def _request(
        self, loaded: LoadedFixture, systems: Sequence[Ablation], retrievers: Mapping[str, Retriever]
    ) -> Request:
        from evalkit.runs.cluster import ClusterOptions

        if self.calibrate is not None and self.ray is not None:
            raise ValueError("calibrate runs in this process; it cannot be combined with ray")
        cluster = None if self.ray is None else ClusterOptions(address=self.ray, shards=self.shards)
        return Request(
            loaded,
            tuple(systems),
            retrievers,
            self.retrieval_settings,
            self.runs,
            self.ties,
            cache=self.embedding_cache,
            cluster=cluster,
            calibration=self.calibration,
        )

    @property
    def thresholds(self) -> GateThresholds:
        """The gate thresholds."""
        return GateThresholds.from_values(self)

    def gates(self, fixture: Fixture) -> tuple[GateSpec, ...]:
        """The gates of an evaluation of `fixture`: its gates.json with :attr:`thresholds`, then its baselines."""
        return collect_gates(self.fixture_path, fixture, thresholds=self.thresholds)

    def report_path(self) -> Path | None:
        """Where the report goes, or None."""
        return self.output_file(self.report_output)

    def figures_path(self) -> Path | None:
        """The folder for figures, or None."""
        return self.output_folder(self.figures_dir)


class FailureAnalysisParameters(AblationParameters):
    """Parameters of ``notebooks/failure_analysis.ipynb``."""

    query_ids: list[Identifier] = Field(description="queries to drill into; empty: every query with a failure")
    show_text: bool = Field(description="show query and span text (off: IDs only, as private as the report)")


class BenchmarkParameters(CalibrationParameters):
    """Parameters of ``notebooks/xquad_benchmark.ipynb``."""

    data_dir: str = Field(description="folder with xquad/ and cmrc2018-trial/, relative to the project root")
    settings: list[str] = Field(description="setting IDs such as en/paragraph, zh->en/sentence or cmrc/paragraph")
    ablations: list[str] = Field(description="ablation IDs to run")
    held_out_fraction: float = Field(ge=0.0, lt=1.0, description="gold paragraphs removed (no-answer queries)")
    seed: int = Field(description="seed of the held-out choice")
    max_articles: int | None = Field(ge=1, description="first N articles of each data set; None: all")
    runs: int = Field(ge=1, le=10, description="runs compared for determinism")
    rerank_min_score: float = Field(ge=0.0, le=1.0, description="reranker score floor (abstention); 0 keeps all")
    cache_dir: str = Field(description="workspace-relative folder of the embedding cache")
    summary_output: str | None = Field(description="workspace-relative path of the JSON summary; None: none")
    figures_dir: str | None = Field(description="workspace-relative folder for PNG and SVG figures; None: none")

    @field_validator("ablations")
    @classmethod
    def _known_ablations(cls, value: list[str]) -> list[str]:
        select_ablations(value)
        return value

    @field_validator("settings")
    @classmethod
    def _known_settings(cls, value: list[str]) -> list[str]:
        from evalkit.runs.real_data import parse_setting

        for setting_id in value:
            parse_setting(setting_id)
        return value

    @property
    def config(self) -> BenchmarkConfig:
        """The benchmark configuration: each of its fields is the parameter (or property) of the same name."""
        from evalkit.runs.real_data import BenchmarkConfig

        return BenchmarkConfig.model_validate({name: getattr(self, name) for name in BenchmarkConfig.model_fields})

    @property
    def retrieval(self) -> RetrievalSettings:
        """The benchmark's retrieval settings with this reranker floor."""
        from evalkit.runs.real_data import BENCHMARK_RETRIEVAL

        reranker = BENCHMARK_RETRIEVAL.reranker.model_copy(update={"min_score": self.rerank_min_score})
        return BENCHMARK_RETRIEVAL.model_copy(update={"reranker": reranker})

    def cache_path(self) -> Path:
        """The embedding cache folder (created inside the workspace)."""
        folder = self.output_folder(self.cache_dir)
        if folder is None:  # pragma: no cover - cache_dir is a required string
            raise ValueError("cache_dir is required")
        return folder

    def summary_path(self) -> Path | None:
        """Where the JSON summary goes, or None."""
        return self.output_file(self.summary_output)

    def figures_path(self) -> Path | None:
        """The folder for figures, or None."""
        return self.output_folder(self.figures_dir)


class CompareParameters(NotebookParameters):
    """Parameters of ``notebooks/compare_reports.ipynb``."""

    base: str | None = Field(description="workspace-relative base report; None: evaluate the default fixture now")
    head: str | None = Field(description="workspace-relative head report; None: evaluate the default fixture now")
    reports: list[str] | None = Field(
        default=None, description="workspace-relative reports compared pair by pair (two or more); None: base, head"
    )
    alpha: float = Field(gt=0.0, lt=1.0, description="significance level of the Holm-adjusted p-values")
    max_drop: float = Field(ge=0.0, allow_inf_nan=False, description="tolerated drop of a measure in a language")
    fail_on_regression: bool = Field(description="the last cell raises GateFailure when something regressed")
    gate_measures: str | None = Field(
        description="comma-separated measures the gate checks (as `evalkit compare --gate-measures`); None: the "
        "default gated measures"
    )
    max_unjudged_gap: float = Field(
        ge=0.0,
        le=1.0,
        description="head minus base unjudged share above which a drop is tested again on judged "
        "documents (as `evalkit compare --max-unjudged-gap`)",
    )
    require_judged: bool = Field(description="the last cell also fails rows the gate calls label holes")
    ablation: str = Field(description="ablation of the per-query difference chart")
    measure: str = Field(description="measure of the per-query difference chart, e.g. ndcg@10")
    comparison_output: str | None = Field(description="workspace-relative JSON path of the comparison; None: none")
    figures_dir: str | None = Field(description="workspace-relative folder for PNG and SVG figures; None: none")

    def report(self, side: str) -> Report:
        """The base or head report: read from its path; when None, the first (base) or second (head) of ``reports``,
        or without those a fresh evaluation of the default fixture."""
        from evalkit.data.fixture import load_fixture
        from evalkit.reporting.report import parse_report
        from evalkit.runs.ablations import ABLATION_IDS
        from evalkit.runs.pipeline import run_pipeline

        relative = self.base if side == "base" else self.head
        if relative is None and self.reports is not None and len(self.reports) >= 2:
            relative = self.reports[0 if side == "base" else 1]  # the first two of the reports compared pair by pair
        if relative is None:
            fixture = load_fixture(self.root / "fixtures" / "synthetic-bilingual-v1")
            return run_pipeline(Request(fixture, select_ablations(list(ABLATION_IDS)), runs=1)).report
        try:
            return parse_report((self.root / relative).read_bytes())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{side} report {relative}: {exc}") from None

    def gated(self) -> list[str] | None:
        """The measures the gate checks (None: the default gated measures)."""
        from evalkit.measures.registry import measure_list

        if self.gate_measures is None:
            return None
        names = measure_list(self.gate_measures)
        if not names:
            raise ValueError("gate_measures names no measure")
        return names

    def systems(self, base: Report, head: Report) -> tuple[list[Report], list[str]]:
        """The reports of the pairwise table with their labels (file name stems): ``reports``, or base and head."""
        from evalkit.reporting.report import parse_report

        if self.reports is None:
            return [base, head], ["base", "head"]
        if len(self.reports) < 2:
            raise ValueError(f"reports: give two or more, got {len(self.reports)}")
        loaded = []
        for relative in self.reports:
            try:
                loaded.append(parse_report((self.root / relative).read_bytes()))
            except (OSError, ValueError) as exc:
                raise ValueError(f"report {relative}: {exc}") from None
        stems = [Path(r).stem for r in self.reports]
        return loaded, stems if len(set(stems)) == len(stems) else list(self.reports)

    def comparison_path(self) -> Path | None:
        """Where the comparison JSON goes, or None."""
        return self.output_file(self.comparison_output)

    def figures_path(self) -> Path | None:
        """The folder for figures, or None."""
        return self.output_folder(self.figures_dir)
