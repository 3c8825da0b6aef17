# evalkit: `make eval` runs the evaluation, `make test` runs every check. Both set up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# One stamp per install, so that `make eval` then `make test` adds the dev extras (and a changed pyproject.toml
# reinstalls either): `make eval` installs the package and what the evaluation notebook imports, nothing more.
VENV_STAMP := $(VENV)/.created
EVAL_STAMP := $(VENV)/.installed-eval
DEV_STAMP := $(VENV)/.installed-dev
# The docs build into a git-ignored folder; NO_MKDOCS_2_WARNING silences mkdocs-material's notice about MkDocs 2.
SITE := site
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs

.PHONY: setup setup-eval eval test test-fast lint docs benchmark suite-benchmark baseline clean

$(VENV_STAMP):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	touch $(VENV_STAMP)

$(EVAL_STAMP): pyproject.toml $(VENV_STAMP)
	$(BIN)/python -m pip install --quiet -e .
	touch $(EVAL_STAMP)

$(DEV_STAMP): pyproject.toml $(VENV_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(DEV_STAMP)

setup-eval: $(EVAL_STAMP)

setup: $(DEV_STAMP)

eval: setup-eval
	$(BIN)/evalkit notebook

lint: setup
	$(BIN)/ruff check evalkit tests benchmarks
	$(BIN)/ruff format --check evalkit tests benchmarks
	$(BIN)/mypy evalkit

# The documentation site (mkdocs-material, API reference by mkdocstrings), built offline; --strict fails the build
# on a broken link, a page missing from the nav or an API reference that does not resolve.
docs: setup
	$(MKDOCS) build --strict --site-dir $(SITE)

test: lint docs
	$(BIN)/python -m pytest

# Every check but the slow tests (Ray, executed notebooks, nbval): the unit tests in tests/ not marked `slow`.
test-fast: lint docs
	$(BIN)/python -m pytest -m "not slow" tests

# The real-data benchmark (XQuAD and the CMRC 2018 trial set, ../shared/data; a missing data set is skipped with
# the reason): every setting and ablation, all articles, into reports/<run-id>/ with summary.json.
benchmark: setup
	$(BIN)/evalkit notebook --notebook notebooks/xquad_benchmark.ipynb -p max_articles null

# Wall time of the standard suite (five ablations, determinism double run) on the synthetic fixture.
suite-benchmark: setup-eval
	$(BIN)/python benchmarks/suite_wall_time.py

# At scale: retrieval at 100,000 chunks against bm25s and numpy brute force, batch metrics against pytrec_eval,
# bootstrap and sign-flip statistics at 20,000 queries, scoring run files against qrels (benchmarks/RESULTS.md).
.PHONY: benchmark-scale
benchmark-scale: setup
	$(BIN)/python benchmarks/scale.py
	$(BIN)/python benchmarks/metrics_speed.py
	$(BIN)/python benchmarks/statistics_speed.py
	$(BIN)/python benchmarks/score_speed.py

# Regenerate the committed context baselines for review (docs/design.md: only after a reviewed change).
baseline: setup-eval
	$(BIN)/evalkit baseline --write

clean:
	rm -rf $(VENV) $(SITE) .mypy_cache .ruff_cache .pytest_cache
