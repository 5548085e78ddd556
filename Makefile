# One-command entry points (see README.md). Each target sets up what it needs.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup services demo test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,bench,broker]"
	touch $@

services:
	bash .ci/services.sh

demo: setup
	$(PY) examples/kafka_to_table.py

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

test: setup services lint
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup services
	$(PY) benchmarks/acid_io.py

clean:
	rm -rf $(VENV) warehouse .pytest_cache .mypy_cache .ruff_cache
