"""Shared test fixtures: the Hive-written corpus and pytest plugins of each area."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from tests.long_cases import LONG_CASES, PG_TWINS, is_pg_twin

# Property tests check outcomes, not speed: no per-example deadline (hypothesis's 200 ms
# default fails a loaded machine's first example, e.g. the suite on two busy cores).
settings.register_profile("acidstream", deadline=None)
settings.load_profile("acidstream")

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


# Cases `make test` leaves out and `make test-slow` runs (marker `long`): which, and why,
# is in tests/long_cases.py.


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the cases of :mod:`tests.long_cases` ``long``. A listed name that a file
    collected whole does not have is an error, so that a renamed case cannot silently come
    back into `make test`."""
    seen: set[str] = set()
    for item in items:
        func = item.nodeid.partition("[")[0]
        if item.nodeid in LONG_CASES:
            seen.add(item.nodeid)
        elif is_pg_twin(item.nodeid):
            seen.add(func)
        else:
            continue
        item.add_marker(pytest.mark.long)
    files = {item.nodeid.split("::", 1)[0] for item in items}
    named = [*LONG_CASES, *PG_TWINS]
    stale = [n for n in named if n not in seen and n.split("::", 1)[0] in files]
    if stale and not any("::" in str(arg) for arg in config.args):
        raise pytest.UsageError(f"tests/long_cases.py names uncollected tests: {stale}")
