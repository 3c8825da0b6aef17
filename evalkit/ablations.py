"""The ablations evalkit compares, and the embedding providers they use, by stable ID.

All ablations run over the same corpus; an ablation is a retrieval mode plus (for vector modes) a provider.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import Field

from evalkit.embeddings import AliasProvider, EmbeddingProvider, TokenHashProvider
from evalkit.fixture import AliasTable
from evalkit.schema import StrictModel
from evalkit.service import Mode

AblationId = Literal["lexical", "token-hash-vector", "alias-vector", "hybrid", "hybrid-rerank"]
ProviderId = Literal["token-hash", "alias"]


class Ablation(StrictModel):
    """A retrieval mode and the provider it embeds with (None for lexical)."""

    ablation_id: AblationId = Field(description="stable ablation ID, the report key")
    mode: Mode = Field(description="knowledge-service mode")
    provider: ProviderId | None = Field(description="embedding provider ID, None for lexical")


ABLATIONS: dict[str, Ablation] = {
    a.ablation_id: a
    for a in (
        Ablation(ablation_id="lexical", mode="lexical", provider=None),
        Ablation(ablation_id="token-hash-vector", mode="vector", provider="token-hash"),
        Ablation(ablation_id="alias-vector", mode="vector", provider="alias"),
        Ablation(ablation_id="hybrid", mode="hybrid", provider="alias"),
        Ablation(ablation_id="hybrid-rerank", mode="hybrid-rerank", provider="alias"),
    )
}
ABLATION_IDS: tuple[str, ...] = tuple(ABLATIONS)

PROVIDERS: dict[str, Callable[[AliasTable], EmbeddingProvider]] = {
    "token-hash": lambda aliases: TokenHashProvider(),
    "alias": lambda aliases: AliasProvider(aliases),
}


def select_ablations(ids: Sequence[str]) -> tuple[Ablation, ...]:
    """The ablations with these IDs, in the canonical order; unknown or repeated IDs raise ValueError."""
    unknown = [i for i in ids if i not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown ablation(s) {', '.join(unknown)}; valid: {', '.join(ABLATION_IDS)}")
    if len(set(ids)) != len(ids):
        raise ValueError(f"ablations repeated in {', '.join(ids)}")
    if not ids:
        raise ValueError(f"no ablation selected; valid: {', '.join(ABLATION_IDS)}")
    return tuple(ABLATIONS[i] for i in ABLATION_IDS if i in ids)


def parse_ablations(text: str) -> tuple[Ablation, ...]:
    """Parse a comma-separated list of ablation IDs (the CLI and notebook boundary)."""
    return select_ablations([part.strip() for part in text.split(",") if part.strip()])
