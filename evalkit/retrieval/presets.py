"""Named retrieval settings, and settings read from a JSON file: the retrieval path's knobs as an input.

A preset is a :class:`~evalkit.retrieval.service.RetrievalSettings` under a stable name. Both presets were tuned on
one data set each and say so:

- ``synthetic-v1`` (the default): the calibration of the synthetic fixture (alias-vector provider, reranker
  floors, 0.3/0.7 fusion). It fits ``fixtures/synthetic-bilingual-v1`` and fixtures built like it.
- ``benchmark``: the settings of the real-data benchmark (no score floors, 0.5/0.5 prior weights adapted per query
  by ``margin-weighted`` fusion, which has no tuned parameter), checked on XQuAD and the CMRC 2018 trial set. Use it
  for imported real corpora (SQuAD, CMRC, BEIR, TREC) with a real embedding model; the synthetic floors assume the
  alias provider's cosines and drop most candidates of a real model.

Neither fits every corpus. ``evalkit run --calibrate FRACTION`` starts from a preset and chooses the fusion and an
abstention floor on a calibration part of the fixture's own queries, reporting on the rest
(:mod:`evalkit.runs.calibration`).

A settings file is the JSON of a ``RetrievalSettings`` (unknown keys are refused, omitted keys take the defaults of
``synthetic-v1``), read like every input file (:func:`evalkit.data.inputs.read_json_file`: a regular file within the
size limit, UTF-8 with a byte-order mark dropped, strict JSON).
"""

from __future__ import annotations

from pathlib import Path

from evalkit.data.schema import load_model_file
from evalkit.data.settings import RerankerSettings, RetrievalSettings

DEFAULT_PRESET = "synthetic-v1"
DEFAULT_PRESET_FIXTURE = "synthetic-bilingual-v1"
"""The fixture the default preset was tuned on."""
PRESETS: dict[str, RetrievalSettings] = {
    "synthetic-v1": RetrievalSettings(),
    "benchmark": RetrievalSettings(
        vector_min_similarity=0.0,
        fusion="margin-weighted",
        lexical_weight=0.5,
        vector_weight=0.5,
        reranker=RerankerSettings(min_similarity=0.0, min_score=0.0),
    ),
}
MAX_SETTINGS_BYTES = 1_000_000
"""A settings file larger than this is refused before it is parsed."""


def preset_settings(name: str) -> RetrievalSettings:
    """The settings of a named preset; an unknown name raises ValueError listing the valid ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown settings preset {name!r}; valid: {', '.join(PRESETS)}") from None


def load_settings_file(path: Path, max_bytes: int = MAX_SETTINGS_BYTES) -> RetrievalSettings:
    """Settings from a JSON file of at most `max_bytes`, read like every input and validated strictly; problems
    (a FIFO, a device, a directory, an oversized file, JSON that is not strict) name the file and the field."""
    where = f"settings file {path.name!r}"
    if not path.is_file():  # a stat, which never blocks (the guarded read refuses anything else again, race-free)
        raise ValueError(f"{where}: not found or not a regular file")
    return load_model_file(path, RetrievalSettings, where, max_bytes)


def default_settings_note(fixture_id: str) -> str | None:
    """What to say when the default preset, not chosen, runs on another fixture than the one it was tuned on
    (its reranker floors drop most candidates of a real model: on the CMRC 2018 trial set the reranked system's
    recall@10 was 0.18 with it and 0.998 with ``benchmark``); None on that fixture."""
    if fixture_id == DEFAULT_PRESET_FIXTURE:
        return None
    return (
        f"note: the default retrieval settings ({DEFAULT_PRESET}) were tuned on {DEFAULT_PRESET_FIXTURE}; for "
        f"{fixture_id}, --preset benchmark (imported real corpora) or --calibrate FRACTION (tuned on part of its own "
        "queries) may fit better"
    )


def resolve_settings(preset: str | None, settings_file: Path | None) -> tuple[str, RetrievalSettings]:
    """The settings to run and a label for them (the preset's name, or ``file``); at most one source may be given."""
    if preset is not None and settings_file is not None:
        raise ValueError("give either a settings preset or a settings file, not both")
    if settings_file is not None:
        return "file", load_settings_file(settings_file)
    name = preset or DEFAULT_PRESET
    return name, preset_settings(name)
