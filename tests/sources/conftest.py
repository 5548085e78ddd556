"""Fixtures of the source tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _close_pooled_kafka_consumers() -> Iterator[None]:
    """Each test's pooled Kafka consumers (``kafka_consumers.POOL``, this process's pool)
    closed when it ends: no test finds another's consumer, and none is left to reconnect
    to the session's broker after it stops."""
    yield
    from acidstream.sources.kafka_consumers import POOL

    POOL.close_all()
