"""An executor's Kafka read runs without Python's cyclic garbage collector (issue 33 item 3).

A read allocates a few tracked objects per record; with the collector on, every 700 of
them started a collection, and the older generations' passes walk every object of the
worker: about half of a confluent-kafka read's CPU. ``gc_paused`` pauses the collector
while each Arrow batch is produced and leaves it as the caller had it between batches.
The reads here are the executor's ``read`` against the real broker, with both clients.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from acidstream.sources.kafka import (
    KafkaInputPartition,
    KafkaSourceOptions,
    KafkaStreamReader,
    _schema,
)
from acidstream.sources.kafka_common import gc_paused
from tests.plugins.kafka_fixture import KafkaTestBroker

CLIENTS = ("confluent", "kafka-python")
RECORDS = 3_000


class _Collections:
    """Counts the collector's passes (``gc.callbacks``) that start while ``inside``."""

    def __init__(self) -> None:
        self.count = 0
        self.inside = False

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and self.inside:
            self.count += 1

    def __enter__(self) -> _Collections:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


@pytest.mark.kafka
@pytest.mark.parametrize("client", CLIENTS)
def test_a_read_runs_no_collection_while_it_builds_its_batches(
    kafka_broker: KafkaTestBroker, client: str
) -> None:
    topic = f"gc-{uuid.uuid4().hex[:10]}"
    kafka_broker.create_topic(topic, 1)
    values = [b'{"id": %d, "name": "n%d"}' % (i, i) for i in range(RECORDS)]
    kafka_broker.produce(topic, values, partition=0)
    opts = KafkaSourceOptions.parse(
        {
            "kafka.bootstrap.servers": kafka_broker.bootstrap,
            "subscribe": topic,
            "kafka.client": client,
            "arrowBatchRows": "1000",
        }
    )
    reader = KafkaStreamReader(opts, _schema())
    part = KafkaInputPartition(topic=topic, partition=0, start=0, end=RECORDS)
    batches: list[pa.RecordBatch] = []
    it = reader.read(part)
    gc.collect()
    with _Collections() as passes:
        while True:
            before = passes.count
            passes.inside = True
            batch = next(it, None)
            passes.inside = False
            if batch is None:
                break
            batches.append(batch)
    rows = pa.Table.from_batches(batches).to_pylist()
    assert [r["offset"] for r in rows] == list(range(RECORDS))
    assert [r["value"] for r in rows] == values
    assert {(r["key"], r["topic"], r["partition"]) for r in rows} == {(None, topic, 0)}
    # No pass while a batch was built (a record's messages, tuples and lists started
    # one about every 30-300 records before); the last call, which only ends the read,
    # may start one as it returns (its StopIteration is the first allocation after it).
    assert before == 0 and passes.count <= 1
    assert gc.isenabled()


def _numbers(n: int, closed: list[bool]) -> Iterator[int]:
    try:
        for i in range(n):
            assert not gc.isenabled(), "an item is produced with the collector paused"
            yield i
    finally:
        closed.append(True)


def test_gc_paused_restores_the_callers_collector_between_items() -> None:
    closed: list[bool] = []
    seen = []
    for i in gc_paused(_numbers(3, closed)):
        seen.append((i, gc.isenabled()))
    assert seen == [(0, True), (1, True), (2, True)] and closed == [True]
    gc.disable()
    try:
        assert list(gc_paused(_numbers(2, []))) == [0, 1]
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def test_an_abandoned_read_closes_the_client_read_at_once() -> None:
    closed: list[bool] = []
    it = gc_paused(_numbers(10, closed))
    assert next(it) == 0
    it.close()  # what Spark's worker does with a task's read it stops early
    assert closed == [True] and gc.isenabled()
