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
