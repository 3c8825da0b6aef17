"""Shared test fixtures: the tiny unit-test fixture, the committed synthetic fixture and their evaluations."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from evalkit.ablations import ABLATION_IDS, select_ablations
from evalkit.data.fixture import LoadedFixture, load_fixture
from evalkit.evaluation import Evaluation, evaluate

# No per-example deadline anywhere (a loaded 2-core CI machine must not turn slowness into failures); on CI the
# examples are derandomized, so a run is reproducible and a failure can be replayed from the same commit.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

ROOT = Path(__file__).resolve().parent.parent
TINY_DIR = ROOT / "tests" / "data" / "tiny"
SYNTHETIC_DIR = ROOT / "fixtures" / "synthetic-bilingual-v1"


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
