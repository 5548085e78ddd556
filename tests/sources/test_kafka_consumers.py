"""Executor reads keep their Kafka consumers across micro-batches (``kafka_consumers``).

The reads are the executor's ``read`` against the real broker (Tansu), with both clients,
in this process (a Spark Python worker's pool is this module's ``POOL``); the counts are
the pool's own. A consumer serves the partition's next range without a new consumer, one
that is elsewhere seeks, concurrent reads of one partition get their own consumers, and
a failed or abandoned read never returns its consumer.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest

from acidstream.sources.errors import SourceError
from acidstream.sources.kafka import (
    KafkaInputPartition,
    KafkaSourceOptions,
    KafkaStreamReader,
    _schema,
)
from acidstream.sources.kafka_consumers import POOL, ConsumerPool, PoolStats, consumer_key
from tests.plugins.kafka_fixture import KafkaTestBroker

CLIENTS = ("confluent", "kafka-python")
N = 60


@pytest.fixture(params=CLIENTS)
def client(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def topic(kafka_broker: KafkaTestBroker) -> str:
    """A one-partition topic holding ``N`` records ``v0``..``v59``."""
    name = f"pool-{uuid.uuid4().hex[:10]}"
    kafka_broker.create_topic(name, 1)
    kafka_broker.produce(name, [b"v%d" % i for i in range(N)], partition=0)
    return name


def _opts(broker: KafkaTestBroker, topic: str, client: str, **extra: str) -> KafkaSourceOptions:
    return KafkaSourceOptions.parse(
        {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, "kafka.client": client}
        | extra
    )


def _part(topic: str, start: int, end: int) -> KafkaInputPartition:
    return KafkaInputPartition(topic=topic, partition=0, start=start, end=end)


def _batches(
    opts: KafkaSourceOptions, topic: str, start: int, end: int
) -> Iterator[pa.RecordBatch]:
    return iter(KafkaStreamReader(opts, _schema()).read(_part(topic, start, end)))


def _read(opts: KafkaSourceOptions, topic: str, start: int, end: int) -> list[tuple[int, bytes]]:
    rows = pa.Table.from_batches(list(_batches(opts, topic, start, end))).to_pylist()
    return [(r["offset"], r["value"]) for r in rows]


def _expected(start: int, end: int) -> list[tuple[int, bytes]]:
    return [(i, b"v%d" % i) for i in range(start, end)]


def _key(opts: KafkaSourceOptions, topic: str) -> str:
    own = {"max_poll_records": min(opts.arrow_batch_rows, 10_000)}
    return consumer_key(opts, _part(topic, 0, 0), **(own if opts.client != "confluent" else {}))


def _since(before: PoolStats) -> PoolStats:
    now = POOL.stats
    return PoolStats(**{k: getattr(now, k) - v for k, v in vars(before).items()})


@pytest.mark.kafka
def test_the_next_micro_batch_reuses_the_consumer_at_its_position(
    kafka_broker: KafkaTestBroker, topic: str, client: str
) -> None:
    opts = _opts(kafka_broker, topic, client)
    before = PoolStats(**vars(POOL.stats))
    assert _read(opts, topic, 0, 20) == _expected(0, 20)
    assert _read(opts, topic, 20, 45) == _expected(20, 45)
    assert _read(opts, topic, 45, N) == _expected(45, N)
    got = _since(before)
    assert (got.created, got.reused, got.at_position, got.discarded) == (1, 2, 2, 0)
    assert POOL.idle(_key(opts, topic)) == 1


@pytest.mark.kafka
def test_a_range_elsewhere_seeks_the_pooled_consumer(
    kafka_broker: KafkaTestBroker, topic: str, client: str
) -> None:
    """A replayed batch (behind the consumer) and a jump ahead both read exactly their range."""
    opts = _opts(kafka_broker, topic, client)
    before = PoolStats(**vars(POOL.stats))
    assert _read(opts, topic, 0, 30) == _expected(0, 30)
    assert _read(opts, topic, 10, 20) == _expected(10, 20)  # behind its position (30)
    assert _read(opts, topic, 40, 50) == _expected(40, 50)  # ahead of it (20)
    assert _read(opts, topic, 50, N) == _expected(50, N)
    got = _since(before)
    assert (got.created, got.reused, got.at_position, got.discarded) == (1, 3, 1, 0)


@pytest.mark.kafka
def test_concurrent_reads_of_one_partition_get_their_own_consumers(
    kafka_broker: KafkaTestBroker, topic: str, client: str
) -> None:
    opts = _opts(kafka_broker, topic, client, arrowBatchRows="10")
    before = PoolStats(**vars(POOL.stats))
    first, second = _batches(opts, topic, 0, 30), _batches(opts, topic, 30, N)
    rows = [next(first), next(second)]  # both reads hold a consumer now
    assert _since(before).created == 2
    rows += [*first, *second]
    pairs = [
        pair
        for b in rows
        for pair in zip(b["offset"].to_pylist(), b["value"].to_pylist(), strict=True)
    ]
    assert sorted(pairs) == _expected(0, N)
    assert POOL.idle(_key(opts, topic)) == 2
    assert _read(opts, topic, 0, 5) == _expected(0, 5)
    got = _since(before)
    assert (got.created, got.reused, got.discarded) == (2, 1, 0)


@pytest.mark.kafka
def test_a_failed_read_closes_its_consumer(
    kafka_broker: KafkaTestBroker, topic: str, client: str
) -> None:
    opts = _opts(kafka_broker, topic, client, **{"kafkaConsumer.pollTimeoutMs": "1000"})
    key = _key(opts, topic)
    before = PoolStats(**vars(POOL.stats))
    assert _read(opts, topic, 0, 10) == _expected(0, 10)
    assert POOL.idle(key) == 1
    with pytest.raises(SourceError, match=r"no records from .* at offset 60"):
        _read(opts, topic, 10, N + 5)  # the pooled consumer reads, then waits in vain
    assert POOL.idle(key) == 0
    assert _read(opts, topic, 0, 10) == _expected(0, 10)
    got = _since(before)
    assert (got.created, got.reused, got.discarded) == (2, 1, 1)


@pytest.mark.kafka
def test_an_abandoned_read_closes_its_consumer(
    kafka_broker: KafkaTestBroker, topic: str, client: str
) -> None:
    """Spark closes a task's read it stops early: records polled but not handed on
    would be skipped by the next read at the consumer's position."""
    opts = _opts(kafka_broker, topic, client, arrowBatchRows="10")
    before = PoolStats(**vars(POOL.stats))
    it = KafkaStreamReader(opts, _schema()).read(_part(topic, 0, N))
    next(it)
    it.close()  # type: ignore[attr-defined]
    assert POOL.idle(_key(opts, topic)) == 0
    assert _read(opts, topic, 10, 20) == _expected(10, 20)
    got = _since(before)
    assert (got.created, got.discarded) == (2, 1)


class _Closing:
    """A stand-in consumer for the pool's own rules (no client involved)."""

    def __init__(self) -> None:
        self.closed = threading.Event()


def test_the_pool_closes_idle_consumers_after_the_timeout_and_past_capacity() -> None:
    pool = ConsumerPool(capacity=2, idle_timeout_s=0.2)
    try:
        made = [_Closing() for _ in range(3)]
        leases = [
            pool.lease(f"k{i}", 0, lambda c=c: c, lambda c: c.closed.set())  # type: ignore[misc]
            for i, c in enumerate(made)
        ]
        for lease in leases:
            pool.give_back(lease, 5)
        assert made[0].closed.is_set()  # the least recently returned, past capacity 2
        assert pool.idle() == 2
        # The reaper closes the others once they have been idle for 0.2 s.
        assert made[1].closed.wait(10) and made[2].closed.wait(10)
        assert pool.idle() == 0
        assert (pool.stats.created, pool.stats.expired) == (3, 3)
    finally:
        pool.shutdown()


def test_a_shut_down_pool_closes_what_is_given_back() -> None:
    pool = ConsumerPool()
    c = _Closing()
    lease = pool.lease("k", 0, lambda: c, lambda x: x.closed.set())
    pool.shutdown()  # interpreter exit
    pool.give_back(lease, 1)
    assert c.closed.is_set() and pool.idle() == 0


def test_an_idle_confluent_consumer_is_paused_and_resumes_at_its_position(
    kafka_broker: KafkaTestBroker, topic: str
) -> None:
    """librdkafka fetches in the background for an assigned, unpaused partition: a pooled
    consumer would keep fetching while idle (up to ``queued.min.messages``). Paused when
    given back, it delivers nothing while it waits, and its next lease reads on."""
    opts = _opts(kafka_broker, topic, "confluent")
    assert _read(opts, topic, 0, 20) == _expected(0, 20)
    key = _key(opts, topic)
    lease = POOL.lease(key, 20, lambda: pytest.fail("the pooled consumer was not idle"), print)
    try:
        # Records 20..59 are on the broker; a paused partition yields none of them.
        polled = lease.consumer.consume(num_messages=10, timeout=1.0)
        assert [m.offset() for m in polled if m.error() is None] == []
    finally:
        POOL.give_back(lease, 20)  # (its position unchanged: nothing was delivered)
    assert _read(opts, topic, 20, 40) == _expected(20, 40)
