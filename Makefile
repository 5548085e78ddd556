# One-command entry points (see README.md). Each target sets up what it needs.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup services demo test lint bench chaos chaos-replay clean

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
	for b in acid_io txn_commit streaming record_writers kafka_to_table compaction_speed http_ingest spark_read list_bucketing connection_open mutations cdc object_store; do \
	  echo "== benchmarks/$$b.py"; $(PY) benchmarks/$$b.py || exit 1; done

chaos: setup services
	$(PY) -m tests.chaos.run --iterations 250 --kafka-iterations 4 --jobs 2 --report docs/chaos.md
	# durability flush (docs/durability.md): the connection writer's process kills again
	$(PY) -m tests.chaos.run --durability flush --iterations 70 --jobs 2 --report docs/chaos-flush.md

chaos-replay: setup services  # make chaos-replay CASE=connection-batchN-kill:20001:sqlite
	$(PY) -m tests.chaos.run --replay $(CASE)

clean:
	rm -rf $(VENV) warehouse .pytest_cache .mypy_cache .ruff_cache
