# One-command entry points (see README.md). Each target sets up what it needs.
VENV ?= .venv
PY := $(VENV)/bin/python
# `make test` runs the suite on four pytest-xdist workers, a whole test file per worker
# (--dist loadfile: one Spark session, Kafka broker and moto server per worker serve many
# tests, and a module's tests that share state stay together). Four on two cores: most
# tests spend their time waiting (child processes, the JVM, fsync, timeouts); two workers
# beside other work at load ~10 took 66 min, against 48 min at a low load: they left CPU idle.
# `pytest tests/x.py` alone runs in one process, without xdist; `make test PYTEST_ARGS=`
# runs the suite that way.
PYTEST_ARGS ?= -n 4 --dist loadfile

.PHONY: setup services demo test test-slow lint bench chaos chaos-replay clean

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
	$(PY) -m pytest -m "not long" $(PYTEST_ARGS)

test-slow: setup services  # the `long` cases `make test` leaves out (README: Tests)
	$(PY) -m pytest -m long $(PYTEST_ARGS)

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
