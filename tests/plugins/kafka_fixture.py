"""A session-scoped Tansu broker (``kafka_broker``) for tests marked ``kafka``."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from acidstream.jobs.broker import BrokerError, EmbeddedBroker


class KafkaTestBroker:
    """The running broker plus small helpers for tests.

    Attributes:
        broker: The :class:`EmbeddedBroker` (one implementation for tests,
            examples and benchmarks).
    """

    def __init__(self, broker: EmbeddedBroker) -> None:
        self.broker = broker
        self._producer: Any = None

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``."""
        return self.broker.bootstrap

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic with ``partitions`` partitions."""
        self.broker.create_topic(name, partitions)

    def delete_topic(self, name: str) -> None:
        """Delete a topic.

        The shared producer is closed first: its metadata refreshes would
        otherwise auto-create the topic again before the test re-creates it.
        """
        self.close()
        self.broker.delete_topic(name)

    def produce(
        self,
        topic: str,
        values: Sequence[bytes],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
    ) -> list[tuple[int, int]]:
        """Send ``values`` (and ``keys``) and flush; returns ``(partition, offset)`` per record.

        One record per batch (the broker's ``producer()`` default) because
        Tansu's ListOffsets is only right then; see ``acidstream/jobs/broker.py``.
        """
        if keys is not None and len(keys) != len(values):
            raise ValueError("keys and values differ in length")
        if self._producer is None:
            self._producer = self.broker.producer()
        futures = [
            self._producer.send(
                topic,
                value=v,
                key=None if keys is None else keys[i],
                partition=partition,
            )
            for i, v in enumerate(values)
        ]
        self._producer.flush()
        return [(m.partition, m.offset) for m in (f.get(timeout=30) for f in futures)]

    def close(self) -> None:
        """Close the shared producer."""
        if self._producer is not None:
            self._producer.close()
            self._producer = None


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaTestBroker]:
    """Tansu on a free 127.0.0.1 port for the whole session; skips if it cannot start."""
    log = Path(tempfile.mkdtemp(prefix="acidstream-kafka-")) / "tansu.log"
    broker = EmbeddedBroker(log_path=log)
    try:
        broker.start()
    except BrokerError as e:
        pytest.skip(f"Kafka broker unavailable: {e}")
    helper = KafkaTestBroker(broker)
    try:
        yield helper
    finally:
        helper.close()
        broker.stop()
