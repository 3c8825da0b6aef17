"""Shared test fixtures: the tiny unit-test fixture, the committed synthetic fixture and their evaluations."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.ablations import ABLATION_IDS, select_ablations
from evalkit.evaluation import Evaluation, evaluate
from evalkit.fixture import LoadedFixture, load_fixture

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
