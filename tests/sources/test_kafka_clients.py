"""The ``acidkafka`` source's two Kafka clients give the same answers (issue 33 item 3).

``kafka.client``: confluent-kafka (librdkafka) and kafka-python read the same ranges into
the same Arrow rows, stop at the same ends and fail with the same errors, against the real
broker (Tansu), without Spark: the executor's ``read`` and the driver's lookups are called
as Spark calls them (``tests/sources/test_kafka.py`` runs the streaming queries with both).
"""

from __future__ import annotations

import socket
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest

from acidstream.sources.errors import SourceError
from acidstream.sources.kafka import (
    KafkaInputPartition,
    KafkaSourceOptions,
    KafkaStreamReader,
    _schema,
    driver_clients,
)
from tests.plugins.kafka_fixture import KafkaTestBroker

CLIENTS = ("confluent", "kafka-python")


def _topic() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


def _options(bootstrap: str, topic: str, client: str, **extra: str) -> KafkaSourceOptions:
    return KafkaSourceOptions.parse(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "kafka.client": client, **extra}
    )


def _read(opts: KafkaSourceOptions, topic: str, start: int, end: int) -> pa.Table:
    """What an executor's ``read`` yields for ``[start, end)`` of partition 0, as one table."""
    reader = KafkaStreamReader(opts, _schema())
    part = KafkaInputPartition(topic=topic, partition=0, start=start, end=end)
    return pa.Table.from_batches(list(reader.read(part)))


def test_auto_reads_with_confluent_kafka_when_it_is_installed() -> None:
    pytest.importorskip("confluent_kafka")
    opts = KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t"})
    assert opts.client == "confluent"
    legacy = KafkaSourceOptions.parse(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "kafka.client": "kafka-python"}
    )
    assert legacy.client == "kafka-python"


@pytest.mark.kafka
def test_both_clients_read_the_same_rows(kafka_broker: KafkaTestBroker) -> None:
    topic = _topic()
    kafka_broker.create_topic(topic, 1)
    values = [b"v%d" % i for i in range(50)]
    keys: list[bytes | None] = [None if i % 7 == 0 else b"k%d" % i for i in range(50)]
    kafka_broker.produce(topic, values, keys=keys, partition=0)
    got = {c: _read(_options(kafka_broker.bootstrap, topic, c), topic, 5, 45) for c in CLIENTS}
    assert got["confluent"].schema == got["kafka-python"].schema
    assert got["confluent"].to_pylist() == got["kafka-python"].to_pylist()
    rows = got["confluent"].to_pylist()
    assert [r["offset"] for r in rows] == list(range(5, 45))
    assert [r["value"] for r in rows] == values[5:45]
    assert [r["key"] for r in rows] == keys[5:45]
    assert {(r["topic"], r["partition"], r["timestampType"]) for r in rows} == {(topic, 0, 0)}
    assert all(abs(r["timestamp"].timestamp() - time.time()) < 600 for r in rows)


@pytest.mark.kafka
@pytest.mark.parametrize("client", CLIENTS)
def test_a_range_past_the_records_times_out_as_a_source_error(
    kafka_broker: KafkaTestBroker, client: str
) -> None:
    """The end of a range is a promise of the driver: an executor that cannot reach it
    within ``kafkaConsumer.pollTimeoutMs`` fails, with either client, naming where."""
    topic = _topic()
    kafka_broker.create_topic(topic, 1)
    kafka_broker.produce(topic, [b"a", b"b", b"c"], partition=0)
    opts = _options(
        kafka_broker.bootstrap, topic, client, **{"kafkaConsumer.pollTimeoutMs": "1500"}
    )
    started = time.monotonic()
    with pytest.raises(SourceError, match=rf"no records from {topic}/0 \[0, 10\) at offset 3"):
        _read(opts, topic, 0, 10)
    assert time.monotonic() - started < 30


@pytest.mark.kafka
def test_both_clients_list_the_same_partitions_and_offsets(kafka_broker: KafkaTestBroker) -> None:
    topic = _topic()
    kafka_broker.create_topic(topic, 3)
    for p, n in ((0, 4), (1, 0), (2, 2)):
        kafka_broker.produce(topic, [b"x"] * n, partition=p)

    def lookups(client: str) -> tuple[Any, ...]:
        clients = driver_clients(_options(kafka_broker.bootstrap, topic, client))
        try:
            tps = clients.partitions()
            return tps, clients.earliest(tps), clients.latest(tps)
        finally:
            clients.close()

    tps = [(topic, 0), (topic, 1), (topic, 2)]
    expected = (tps, dict.fromkeys(tps, 0), {tps[0]: 4, tps[1]: 0, tps[2]: 2})
    assert lookups("confluent") == lookups("kafka-python") == expected


@pytest.mark.kafka
@pytest.mark.parametrize("client", CLIENTS)
def test_unknown_topic_is_the_same_source_error(kafka_broker: KafkaTestBroker, client: str) -> None:
    clients = driver_clients(_options(kafka_broker.bootstrap, "no-such-topic-abc", client))
    try:
        with pytest.raises(SourceError, match=r"topic 'no-such-topic-abc' does not exist on Kafka"):
            clients.partitions()
    finally:
        clients.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_dead_broker_is_retried_then_a_source_error(client: str) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    opts = KafkaSourceOptions.parse(
        {
            "kafka.bootstrap.servers": f"127.0.0.1:{port}",
            "subscribe": "t",
            "kafka.client": client,
            "kafka.bootstrap.timeout.ms": "500",
            "fetchOffset.numRetries": "2",
        }
    )
    clients = driver_clients(opts)
    started = time.monotonic()
    try:
        with pytest.raises(SourceError, match=rf"127\.0\.0\.1:{port} after 2 attempt\(s\)"):
            clients.partitions()
    finally:
        clients.close()
    assert time.monotonic() - started < 20
