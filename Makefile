# One entry point per job. Every target sets up what it needs first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint typecheck unit clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

## The main job on the embedded defaults.
demo: setup
	$(BIN)/compaction-sidecar demo

## Every check: lint, types, tests.
test: lint typecheck unit

lint: setup
	$(BIN)/ruff check sidecar tests scripts
	$(BIN)/ruff format --check sidecar tests scripts

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
