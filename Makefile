# evalkit: `make eval` runs the evaluation, `make test` runs every check. Both set up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup eval test lint benchmark suite-benchmark baseline clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

eval: setup
	$(BIN)/evalkit notebook

lint: setup
	$(BIN)/ruff check evalkit tests benchmarks
	$(BIN)/ruff format --check evalkit tests benchmarks
	$(BIN)/mypy evalkit

test: lint
	$(BIN)/python -m pytest

# The real-data benchmark (XQuAD and the CMRC 2018 trial set, ../shared/data; a missing data set is skipped with
# the reason): every setting and ablation, all articles, into reports/<run-id>/ with summary.json.
benchmark: setup
	$(BIN)/evalkit notebook --notebook notebooks/xquad_benchmark.ipynb -p max_articles null

# Wall time of the standard suite (five ablations, determinism double run) on the synthetic fixture.
suite-benchmark: setup
	$(BIN)/python benchmarks/suite_wall_time.py

# At scale: retrieval at 100,000 chunks against bm25s and numpy brute force, batch metrics against pytrec_eval,
# bootstrap and sign-flip statistics at 20,000 queries (README: "Retrieval at scale", "Comparing two reports").
.PHONY: benchmark-scale
benchmark-scale: setup
	$(BIN)/python benchmarks/scale.py
	$(BIN)/python benchmarks/metrics_speed.py
	$(BIN)/python benchmarks/statistics_speed.py
	$(BIN)/python benchmarks/score_speed.py

# Regenerate the committed context baselines for review (see README: only after a reviewed change).
baseline: setup
	$(BIN)/evalkit baseline --write

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
