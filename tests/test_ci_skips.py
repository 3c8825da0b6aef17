"""Under CI a required check cannot go green by being skipped: the docs check without PyYAML, the BLAS pinning
without a BLAS, and the real-data benchmark notebook without one of its data sets fail the run instead.

Each requirement is taken away by a plugin in a child pytest (so this run's imports stay untouched), once with CI
set and once without.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, SHARED_DIR

TAKE_AWAY = """
import sys

import threadpoolctl

from evalkit.runs import real_data

sys.modules["yaml"] = None  # pytest.importorskip("yaml") skips
threadpoolctl.threadpool_info = lambda: []  # numpy reports no BLAS
real_data.DATASET_FILES = {**real_data.DATASET_FILES, "cmrc2018-trial": ("cmrc2018-trial/absent.json",)}
"""
CHECKS = [
    "tests/test_docs.py::test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists",
    "tests/retrieval/test_latency.py::test_blas_is_pinned_while_timing_and_released_after",
    "notebooks/xquad_benchmark.ipynb",
]


def _pytest_without_requirements(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "take_away.py").write_text(TAKE_AWAY, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    if ci:
        env["CI"] = "true"
    argv = [sys.executable, "-m", "pytest", "-p", "take_away", "-p", "no:cacheprovider", "-q", "-rfs", *CHECKS]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)


@pytest.mark.timeout(600)  # a regression runs the benchmark notebook instead of skipping it
def test_required_skips_fail_under_ci(tmp_path: Path) -> None:
    result = _pytest_without_requirements(tmp_path, ci=True)
    out = result.stdout
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, out + result.stderr
    assert "CI is set and PyYAML required, but the test was skipped: PyYAML comes with the docs extra" in out
    assert "CI is set and a BLAS library required, but the test was skipped: numpy reports no BLAS" in out
    assert "required checks skipped under CI (the run fails)" in out
    absent = SHARED_DIR / "data" / "cmrc2018-trial" / "absent.json"
    assert f"xquad_benchmark.ipynb::Cell 0: ../shared data required: benchmark data not found at {absent}" in out


@pytest.mark.timeout(600)
def test_the_same_checks_are_skipped_with_the_reason_elsewhere(tmp_path: Path) -> None:
    result = _pytest_without_requirements(tmp_path, ci=False)
    out = result.stdout
    assert result.returncode == pytest.ExitCode.OK, out + result.stderr
    assert "failed" not in out and "required checks skipped" not in out
    assert "SKIPPED [1] tests/test_docs.py:" in out and "PyYAML comes with the docs extra" in out
    assert "numpy reports no BLAS library to pin" in out
    assert "benchmark data not found at" in out
