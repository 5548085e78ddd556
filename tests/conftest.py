"""Shared test fixtures: the Hive-written corpus and pytest plugins of each area."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = [
    "tests.plugins.spark_fixture",
    "tests.plugins.store_fixture",
    "tests.plugins.kafka_fixture",
    "tests.plugins.tmpfs_fixture",
    "tests.plugins.s3_fixture",
]

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """``../shared/corpus``; tests that need it skip with a printed reason when absent."""
    if not (CORPUS / "INDEX.md").is_file():
        pytest.skip(f"Hive-written corpus not found at {CORPUS} (expected ../shared/corpus)")
    return CORPUS


# Cases `make test` leaves out and `make test-slow` runs (marker `long`): each repeats, on
# the other store backend or with another seed of the same scenario, what a case that stays
# in `make test` proves, and costs tens of seconds of SIGKILLed children (measured under
# `-n 2`; README, Tests). The full chaos tier (`make chaos`) runs every scenario on both
# backends many times over. Node ids, so that the test files keep their plain case lists.
LONG_CASES: dict[str, str] = {
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[mutation-kill-60009-postgres]":
        "mutation-kill-60008-sqlite stays (the slowest fast-tier case: ~1.7x the sqlite one)",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[http-server-kill-801-sqlite]":
        "http-server-kill-802-postgres stays",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[connection-batchN-kill-202-sqlite]":
        "connection-batchN-kill-201-sqlite stays",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[connection-batchN-kill-205-postgres]":
        "connection-batchN-kill-204-postgres stays",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[connection-storage-fault-602-sqlite]":
        "connection-storage-fault-601-sqlite stays",
    "tests/chaos/test_chaos.py::test_iteration_keeps_every_invariant[compactor-kill-702-sqlite]":
        "compactor-kill-701-sqlite stays",
}  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark :data:`LONG_CASES` ``long``. A listed id missing from a file collected whole is
    an error, so that a renamed case cannot silently come back into `make test`."""
    seen: set[str] = set()
    files = {item.nodeid.split("::", 1)[0] for item in items}
    for item in items:
        if item.nodeid in LONG_CASES:
            item.add_marker(pytest.mark.long)
            seen.add(item.nodeid)
    stale = [n for n in LONG_CASES if n not in seen and n.split("::", 1)[0] in files]
    if stale and not any("::" in str(arg) for arg in config.args):
        raise pytest.UsageError(f"tests/conftest.py LONG_CASES names uncollected tests: {stale}")
