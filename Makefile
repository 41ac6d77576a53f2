# Two commands on a fresh machine with Python 3.11:  make train  |  make test
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
ARGS ?=
PYTEST_ARGS ?=
# pytest-xdist workers, one per core (TEST_WORKERS=0: serial). Tests on the SLURM cluster run after
# them in one process: they share the cluster and cancel the user's jobs (exit 5: none selected).
TEST_WORKERS ?= auto
PARALLEL := -n $(TEST_WORKERS)

.PHONY: install train test test-fast lint format bench

$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet -e ".[all,dev]"
	touch $(STAMP)

install: $(STAMP)

train: install  ## run the default experiment (a KAN fit, about 20 s on a CPU)
	$(BIN)/litlab-train $(ARGS)

test: install  ## the whole test suite, slow claim tests included
	$(BIN)/python -m pytest $(PARALLEL) -m "not slurm" $(PYTEST_ARGS)
	$(BIN)/python -m pytest -m slurm $(PYTEST_ARGS) || [ $$? -eq 5 ]

test-fast: install  ## everything but the slow claim tests
	$(BIN)/python -m pytest $(PARALLEL) -m "not slow and not slurm" $(PYTEST_ARGS)
	$(BIN)/python -m pytest -m "slurm and not slow" $(PYTEST_ARGS) || [ $$? -eq 5 ]

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	LINT_IMPORTS=$(BIN)/lint-imports scripts/lint_imports.sh

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install  ## speed benchmarks (JSON under benchmarks/results/)
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	for script in benchmarks/[!_]*.py; do $(BIN)/python $$script || exit 1; done
