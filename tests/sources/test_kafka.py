"""The ``acidkafka`` streaming source against a real broker (Tansu) and local Spark.

Every test with a broker runs with both Kafka clients (``kafka.client``: confluent-kafka
and kafka-python): their semantics must be the same."""

from __future__ import annotations

import json
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from acidstream.acid.errors import ConfigError
from acidstream.sources.kafka import (
    SHORT_NAME,
    KafkaInputPartition,
    KafkaSource,
    KafkaSourceOptions,
    KafkaStreamReader,
    _rate_limit,
    _schema,
    end_offsets,
    parse_partition_offsets,
    partition_offsets_json,
    split_ranges,
)
from tests.plugins.kafka_fixture import KafkaTestBroker

Event = tuple[int, int, bytes]  # (partition, offset, value)


def _topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _fill(
    broker: KafkaTestBroker, topic: str, n: int, *, partitions: int, tag: str = "v"
) -> set[Event]:
    """Produce ``n`` records round-robin over ``partitions``; return what landed where."""
    values = [f"{tag}{i}".encode() for i in range(n)]
    out: set[Event] = set()
    for p in range(partitions):
        mine = values[p::partitions]
        keys = [f"k{p}".encode()] * len(mine)
        for (part, off), v in zip(
            broker.produce(topic, mine, keys=keys, partition=p), mine, strict=True
        ):
            out.add((part, off, v))
    return out


class StreamRun:
    """Start a ``foreachBatch`` query on ``acidkafka`` and collect each micro-batch."""

    def __init__(self, spark: Any, checkpoint: Path, options: dict[str, str]) -> None:
        spark.dataSource.register(KafkaSource)
        self.spark = spark
        self.checkpoint = checkpoint
        self.options = options
        self.batches: list[list[Any]] = []

    def _start(self, trigger: dict[str, Any]) -> Any:
        reader = self.spark.readStream.format(SHORT_NAME)
        for k, v in self.options.items():
            reader = reader.option(k, v)

        def collect(df: Any, batch_id: int) -> None:
            self.batches.append(df.collect())

        return (
            reader.load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(**trigger)
            .start()
        )

    def available_now(self) -> list[list[Any]]:
        """Run ``trigger(availableNow=True)`` to completion; return the new batches."""
        before = len(self.batches)
        q = self._start({"availableNow": True})
        q.awaitTermination()
        return self.batches[before:]

    @property
    def events(self) -> list[Event]:
        return [(r.partition, r.offset, r.value) for b in self.batches for r in b]


CLIENTS = ("confluent", "kafka-python")


@pytest.fixture(params=CLIENTS)
def client(request: pytest.FixtureRequest) -> str:
    """The ``kafka.client`` a test reads with (each test runs once per client)."""
    return str(request.param)


def _opts(broker: KafkaTestBroker, topic: str, client: str, **extra: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": broker.bootstrap,
        "subscribe": topic,
        "kafka.client": client,
        **extra,
    }


def _exactly(events: list[Event]) -> set[Event]:
    """The events as a set, asserting none was read twice."""
    assert len(events) == len(set(events)), "an event was read more than once"
    return set(events)


# --------------------------------------------------------------------------
# Options and pure helpers (no broker)


@pytest.mark.parametrize(
    ("client", "settings"),
    [
        ("kafka-python", {"max_poll_records": 42, "check_crcs": False, "client_id": "me"}),
        # librdkafka's dotted names with string values; max.poll.records is the source's own
        ("confluent", {"max.poll.records": 42, "check.crcs": "false", "client.id": "me"}),
    ],
)
def test_options_parse_spark_names_case_insensitively(
    client: str, settings: dict[str, object]
) -> None:
    opts = KafkaSourceOptions.parse(
        {
            "kafka.client": client,
            "kafka.bootstrap.servers": "h:1",
            "SUBSCRIBE": "a, b",
            "startingoffsets": '{"a":{"0":-2,"1":7}}',
            "maxOffsetsPerTrigger": "100",
            "failOnDataLoss": "false",
            "kafka.max.poll.records": "42",
            "kafka.check.crcs": "false",
            "kafka.client.id": "me",
        }
    )
    assert opts.topics == ("a", "b")
    assert opts.starting == "specific"
    assert opts.starting_specific == (("a", 0, -2), ("a", 1, 7))
    assert opts.max_offsets_per_trigger == 100
    assert opts.fail_on_data_loss is False
    assert opts.client == client
    assert dict(opts.consumer_config) == settings


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "a"}, "kafka.bootstrap.servers"),
        ({"kafka.bootstrap.servers": "h:1"}, "subscribe"),
        (
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": "soon"},
            "startingOffsets",
        ),
        (
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "maxOffsetsPerTrigger": "0"},
            "maxOffsetsPerTrigger",
        ),
        (
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "failOnDataLoss": "yes"},
            "failOnDataLoss",
        ),
        (
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "kafka.group.id": "g"},
            "kafka.group.id",
        ),
        (
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "kafka.no.such": "1"},
            "kafka.no.such",
        ),
        (
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "kafka.max.poll.records": "x"},
            "kafka.max.poll.records",
        ),
        (
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "subscribePattern": "a.*"},
            "subscribePattern",
        ),
        ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "typo": "1"}, "typo"),
        (
            {
                "kafka.bootstrap.servers": "h:1",
                "subscribe": "a",
                "startingOffsets": '{"b":{"0":1}}',
            },
            "startingOffsets",
        ),
        (
            {
                "kafka.bootstrap.servers": "h:1",
                "subscribe": "a",
                "endOffsetsFrom": "fetch",
                "kafka.isolation.level": "read_committed",
            },
            "endOffsetsFrom",
        ),
    ],
)
def test_bad_options_raise_config_error_naming_the_key(
    options: dict[str, str], named: str, client: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        KafkaSourceOptions.parse({**options, "kafka.client": client})


def test_partition_offsets_json_is_canonical_and_round_trips() -> None:
    mixed: dict[str, dict[Any, int]] = {"b": {10: 1, 2: 3}, "a": {"0": 5}}
    a = partition_offsets_json(mixed)
    b = partition_offsets_json({("a", 0): 5, ("b", 2): 3, ("b", 10): 1})
    assert a == b == '{"a":{"0":5},"b":{"2":3,"10":1}}'
    assert parse_partition_offsets(a) == {"a": {"0": 5}, "b": {"2": 3, "10": 1}}
    with pytest.raises(ConfigError):
        parse_partition_offsets('{"a":{"x":1}}')


def test_rate_limit_spreads_the_limit_by_backlog_like_spark() -> None:
    begin = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    until = {("t", 0): 300, ("t", 1): 200, ("t", 2): 6, ("t", 3): 0}
    got = _rate_limit(100, begin, until)
    # backlogs 300, 100, 1 (total 401): floor(74.8)=74, floor(24.9)=24, ceil(0.25)=1; the
    # one record rounding down left goes to the largest fraction (.94 of t/1)
    assert got == {("t", 0): 74, ("t", 1): 125, ("t", 2): 6, ("t", 3): 0}
    assert _rate_limit(1000, begin, until) == until


def test_rate_limit_fills_the_limit_with_the_largest_remainders() -> None:
    begin = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    equal = dict.fromkeys(begin, 200000)
    # Spark's floors: 33,333 each, 99,999 in all; the last record to the first in order.
    got = _rate_limit(100_000, begin, equal)
    assert got == {("t", 0): 33_334, ("t", 1): 33_333, ("t", 2): 33_333}
    assert sum(got.values()) == 100_000
    # Uneven backlogs 5, 7, 11 (total 23), limit 10: 2.17, 3.04, 4.78 -> 2, 3, 5 (.78 first).
    uneven = {("t", 0): 5, ("t", 1): 7, ("t", 2): 11}
    assert _rate_limit(10, begin, uneven) == {("t", 0): 2, ("t", 1): 3, ("t", 2): 5}
    # Shares below one still round up, and may exceed the limit (Spark's rule).
    tiny = {("t", 0): 1, ("t", 1): 1, ("t", 2): 1}
    assert _rate_limit(2, begin, tiny) == tiny
    # Limit 9 over backlogs 1, 1, 100 (0.09, 0.09, 8.8): the round-ups already took
    # the remainder (1 + 1 + 8 = 10), nothing more is handed out.
    small = {("t", 0): 1, ("t", 1): 1, ("t", 2): 100}
    assert _rate_limit(9, begin, small) == {("t", 0): 1, ("t", 1): 1, ("t", 2): 8}
    # Never past a backlog: limit 20 over backlogs 3, 19 (2.7, 17.3) -> 3, 17.
    short = {("t", 0): 3, ("t", 1): 19, ("t", 2): 0}
    assert _rate_limit(20, begin, short) == {("t", 0): 3, ("t", 1): 17, ("t", 2): 0}


def test_partitions_plan_one_range_per_partition_with_data() -> None:
    reader = KafkaStreamReader(
        KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t"}), _schema()
    )
    parts = reader.partitions({"t": {"0": 5, "1": 7}}, {"t": {"0": 9, "1": 7, "2": 3}})
    # partition 1 has nothing new; partition 2 is new and starts at 0
    assert list(parts) == [
        KafkaInputPartition(topic="t", partition=0, start=5, end=9),
        KafkaInputPartition(topic="t", partition=2, start=0, end=3),
    ]


def test_min_partitions_splits_large_ranges_like_spark() -> None:
    """``minPartitions`` (Spark's ``KafkaOffsetRangeCalculator``): a range gets
    ``round(size / total * n)`` near-equal parts, the last taking the rounding; ranges
    too small for a part of their own stay whole; the split is deterministic."""
    opts = KafkaSourceOptions.parse(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "MINPARTITIONS": "6"}
    )
    assert opts.min_partitions == 6
    reader = KafkaStreamReader(opts, _schema())
    start, end = {"t": {"0": 0, "1": 0, "2": 10}}, {"t": {"0": 100, "1": 101, "2": 110}}
    parts = list(reader.partitions(start, end))
    assert [(p.partition, p.start, p.end) for p in parts] == [
        (0, 0, 50), (0, 50, 100), (1, 0, 50), (1, 50, 101), (2, 10, 60), (2, 60, 110),
    ]  # fmt: skip
    assert parts == list(reader.partitions(start, end))
    # one big range and a small one: the small stays whole, the big takes the other parts
    ranges = [KafkaInputPartition("t", 0, 0, 1000), KafkaInputPartition("t", 1, 0, 10)]
    assert [(p.partition, p.start, p.end) for p in split_ranges(ranges, 4)] == [
        (0, 0, 333), (0, 333, 666), (0, 666, 1000), (1, 0, 10),
    ]  # fmt: skip
    # as many ranges as asked for already, or no minPartitions: one range each
    assert split_ranges(ranges, 2) == ranges
    assert split_ranges(ranges, None) == ranges
    with pytest.raises(ConfigError, match="minPartitions"):
        KafkaSourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                                  "minPartitions": "0"})  # fmt: skip


# --------------------------------------------------------------------------
# Against the broker and Spark


@pytest.mark.kafka
def test_end_offsets_helper_reports_every_partition(
    kafka_broker: KafkaTestBroker, client: str
) -> None:
    topic = _topic()
    kafka_broker.create_topic(topic, 3)
    _fill(kafka_broker, topic, 10, partitions=3)
    assert end_offsets(kafka_broker.bootstrap, [topic], kafka_options={"kafka.client": client}) == {
        topic: {"0": 4, "1": 3, "2": 3}
    }
    assert json.loads(
        partition_offsets_json(
            end_offsets(kafka_broker.bootstrap, [topic], kafka_options={"kafka.client": client})
        )
    ) == {topic: {"0": 4, "1": 3, "2": 3}}


@pytest.mark.kafka
def test_fetch_end_offsets_see_records_of_batched_produce(
    kafka_broker: KafkaTestBroker, client: str
) -> None:
    """Tansu's ListOffsets under-reports after batched produce; the fetch high watermark does not."""
    topic = _topic()
    kafka_broker.create_topic(topic, 3)
    producer = kafka_broker.broker.producer(batch_size=16384, linger_ms=50)
    try:
        for i in range(600):
            producer.send(topic, value=b"%d" % i, partition=i % 3)
        producer.flush()
    finally:
        producer.close()
    listed = end_offsets(kafka_broker.bootstrap, [topic], kafka_options={"kafka.client": client})
    fetched = end_offsets(
        kafka_broker.bootstrap, [topic], method="fetch", kafka_options={"kafka.client": client}
    )
    assert fetched == {topic: {"0": 200, "1": 200, "2": 200}}
    print(f"ListOffsets after batched produce: {listed} (fetch high watermark: {fetched})")


@pytest.mark.spark
@pytest.mark.kafka
def test_every_event_is_read_exactly_once(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path
) -> None:
    topic = _topic()
    kafka_broker.create_topic(topic, 3)
    produced = _fill(kafka_broker, topic, 3000, partitions=3)
    run = StreamRun(
        spark, tmp_path / "ck", _opts(kafka_broker, topic, client, startingOffsets="earliest")
    )
    batches = run.available_now()
    assert _exactly(run.events) == produced
    rows = [r for b in batches for r in b]
    assert {r.topic for r in rows} == {topic}
    assert all(r.key == f"k{r.partition}".encode() for r in rows)
    assert all(r.timestampType == 0 for r in rows)
    assert all(abs(r.timestamp.timestamp() - time.time()) < 600 for r in rows[:10])


@pytest.mark.spark
@pytest.mark.kafka
def test_min_partitions_reads_every_event_once_in_more_tasks(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path
) -> None:
    """Each topic-partition split in ranges read by tasks of their own: every event once,
    and the micro-batch has the Spark partitions asked for."""
    topic = _topic()
    kafka_broker.create_topic(topic, 2)
    produced = _fill(kafka_broker, topic, 1001, partitions=2)
    tasks: list[int] = []
    spark.dataSource.register(KafkaSource)
    reader = spark.readStream.format(SHORT_NAME)
    for k, v in _opts(kafka_broker, topic, client, startingOffsets="earliest",
                      minPartitions="4").items():  # fmt: skip
        reader = reader.option(k, v)
    events: list[Event] = []

    def collect(df: Any, batch_id: int) -> None:
        tasks.append(df.rdd.getNumPartitions())
        events.extend((r.partition, r.offset, r.value) for r in df.collect())

    q = (
        reader.load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    assert _exactly(events) == produced
    assert tasks == [4]  # 501 + 500 records, minPartitions 4: 2 ranges each


@pytest.mark.spark
@pytest.mark.kafka
def test_schema_matches_spark_kafka_source(
    spark: Any, kafka_broker: KafkaTestBroker, client: str
) -> None:
    spark.dataSource.register(KafkaSource)
    topic = _topic()
    kafka_broker.create_topic(topic, 1)
    df = spark.readStream.format(SHORT_NAME).options(**_opts(kafka_broker, topic, client)).load()
    assert df.isStreaming
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]


@pytest.mark.spark
@pytest.mark.kafka
def test_latest_reads_only_records_produced_after_the_start(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path
) -> None:
    topic = _topic()
    kafka_broker.create_topic(topic, 3)
    _fill(kafka_broker, topic, 30, partitions=3, tag="old")
    run = StreamRun(
        spark, tmp_path / "ck", _opts(kafka_broker, topic, client, startingOffsets="latest")
    )
    run.available_now()
    assert run.events == []
    newer = _fill(kafka_broker, topic, 12, partitions=3, tag="new")
    run.available_now()
    assert _exactly(run.events) == newer


@pytest.mark.spark
@pytest.mark.kafka
def test_json_starting_offsets_per_partition(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path
) -> None:
    topic = _topic()
    kafka_broker.create_topic(topic, 3)
    produced = _fill(kafka_broker, topic, 30, partitions=3)
    starting = json.dumps({topic: {"0": -2, "1": 4, "2": -1}})
    run = StreamRun(
        spark, tmp_path / "ck", _opts(kafka_broker, topic, client, startingOffsets=starting)
    )
    run.available_now()
    assert _exactly(run.events) == {e for e in produced if e[0] == 0 or (e[0] == 1 and e[1] >= 4)}


@pytest.mark.spark
@pytest.mark.kafka
def test_json_starting_offsets_must_name_every_partition(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    topic = _topic()
    kafka_broker.create_topic(topic, 3)
    starting = json.dumps({topic: {"0": -2}})
    run = StreamRun(
        spark, tmp_path / "ck", _opts(kafka_broker, topic, client, startingOffsets=starting)
    )
    with pytest.raises(StreamingQueryException, match=r"ConfigError.*every partition"):
        run.available_now()


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_json_starting_offset_past_the_end_is_data_loss(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path, fail_on_data_loss: str
) -> None:
    from pyspark.errors import StreamingQueryException

    topic = _topic()
    kafka_broker.create_topic(topic, 1)
    _fill(kafka_broker, topic, 5, partitions=1)
    starting = json.dumps({topic: {"0": 99}})
    run = StreamRun(
        spark,
        tmp_path / "ck",
        _opts(
            kafka_broker, topic, client, startingOffsets=starting, failOnDataLoss=fail_on_data_loss
        ),
    )
    if fail_on_data_loss == "true":
        with pytest.raises(StreamingQueryException, match=r"DataLossError.*outside the available"):
            run.available_now()
        return
    run.available_now()  # clamped to the end: nothing to read, no error
    newer = _fill(kafka_broker, topic, 3, partitions=1, tag="new")
    run.available_now()
    assert _exactly(run.events) == newer


@pytest.mark.spark
@pytest.mark.kafka
def test_max_offsets_per_trigger_splits_into_micro_batches(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path
) -> None:
    topic = _topic()
    kafka_broker.create_topic(topic, 3)
    produced = _fill(kafka_broker, topic, 300, partitions=3)
    run = StreamRun(
        spark,
        tmp_path / "ck",
        _opts(kafka_broker, topic, client, startingOffsets="earliest", maxOffsetsPerTrigger="100"),
    )
    batches = run.available_now()
    # 100 over three equal backlogs: 34, 33, 33 (Spark's floors, 33 each, left a
    # fourth batch of 3 records).
    assert [len(b) for b in batches] == [100, 100, 100]
    assert _exactly(run.events) == produced


@pytest.mark.spark
@pytest.mark.kafka
def test_restart_from_checkpoint_continues_without_loss_or_duplicates(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path
) -> None:
    topic = _topic()
    kafka_broker.create_topic(topic, 3)
    first = _fill(kafka_broker, topic, 90, partitions=3, tag="a")
    opts = _opts(kafka_broker, topic, client, startingOffsets="earliest", maxOffsetsPerTrigger="40")
    run = StreamRun(spark, tmp_path / "ck", opts)

    # A continuous query stopped after it caught up (processAllAvailable, no sleeps) ...
    q = run._start({"processingTime": "100 milliseconds"})
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert _exactly(run.events) == first
    # ... then more data, and a new query on the same checkpoint.
    second = _fill(kafka_broker, topic, 60, partitions=3, tag="b")
    run.available_now()
    assert _exactly(run.events) == first | second


@pytest.mark.spark
@pytest.mark.kafka
def test_newly_subscribed_topic_partitions_start_from_the_beginning(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path
) -> None:
    """Partitions absent from the checkpointed offsets are new: read from offset 0, as Spark."""
    a, b = _topic("a"), _topic("b")
    kafka_broker.create_topic(a, 2)
    kafka_broker.create_topic(b, 2)
    in_a = _fill(kafka_broker, a, 10, partitions=2)
    in_b = _fill(kafka_broker, b, 8, partitions=2, tag="b")
    ck = tmp_path / "ck"
    run_a = StreamRun(spark, ck, _opts(kafka_broker, a, client, startingOffsets="earliest"))
    run_a.available_now()
    assert _exactly(run_a.events) == in_a
    # Same checkpoint, now also subscribed to b: b's partitions appear mid-stream.
    run_ab = StreamRun(spark, ck, _opts(kafka_broker, f"{a},{b}", client, startingOffsets="latest"))
    batches = run_ab.available_now()
    got = {(r.topic, r.partition, r.offset, r.value) for bt in batches for r in bt}
    assert got == {(b, p, o, v) for p, o, v in in_b}


@pytest.mark.spark
@pytest.mark.kafka
def test_partition_added_to_topic_mid_stream_is_picked_up(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path
) -> None:
    from kafka.admin import NewPartitions
    from kafka.errors import IncompatibleBrokerVersion, UnsupportedVersionError

    topic = _topic()
    kafka_broker.create_topic(topic, 2)
    first = _fill(kafka_broker, topic, 10, partitions=2)
    run = StreamRun(
        spark, tmp_path / "ck", _opts(kafka_broker, topic, client, startingOffsets="earliest")
    )
    run.available_now()
    admin = kafka_broker.broker.admin()
    try:
        admin.create_partitions({topic: NewPartitions(3)})
    except (IncompatibleBrokerVersion, UnsupportedVersionError) as e:
        pytest.skip(f"broker cannot add partitions (CreatePartitions): {e}")
    finally:
        admin.close()
    added = {(p, o, v) for p, o, v in _fill(kafka_broker, topic, 6, partitions=3, tag="n")}
    run.available_now()
    assert _exactly(run.events) == first | added


@pytest.mark.spark
@pytest.mark.kafka
def test_fetch_end_offsets_read_all_of_a_batched_produce(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path
) -> None:
    topic = _topic()
    kafka_broker.create_topic(topic, 3)
    producer = kafka_broker.broker.producer(batch_size=16384, linger_ms=50)
    try:
        futures = [producer.send(topic, value=b"%d" % i, partition=i % 3) for i in range(900)]
        producer.flush()
        produced = {
            (m.partition, m.offset, b"%d" % i) for i, m in enumerate(f.get() for f in futures)
        }
    finally:
        producer.close()
    run = StreamRun(
        spark,
        tmp_path / "ck",
        _opts(kafka_broker, topic, client, startingOffsets="earliest", endOffsetsFrom="fetch"),
    )
    run.available_now()
    assert _exactly(run.events) == produced


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_recreated_topic_is_data_loss(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path, fail_on_data_loss: str
) -> None:
    from pyspark.errors import StreamingQueryException

    topic = _topic()
    kafka_broker.create_topic(topic, 1)
    _fill(kafka_broker, topic, 10, partitions=1, tag="a")
    opts = _opts(
        kafka_broker, topic, client, startingOffsets="earliest", failOnDataLoss=fail_on_data_loss
    )
    run = StreamRun(spark, tmp_path / "ck", opts)
    run.available_now()
    assert len(run.events) == 10
    kafka_broker.delete_topic(topic)
    kafka_broker.create_topic(topic, 1)
    _fill(kafka_broker, topic, 4, partitions=1, tag="b")  # offsets 0..3 < 10
    if fail_on_data_loss == "true":
        with pytest.raises(StreamingQueryException, match=r"DataLossError.*went back from 10 to 4"):
            run.available_now()
        return
    run.available_now()  # Spark's rule: carry on from the new end (4)
    later = _fill(kafka_broker, topic, 3, partitions=1, tag="c")
    before = len(run.events)
    run.available_now()
    assert _exactly(run.events[before:]) == later


@pytest.mark.spark
@pytest.mark.kafka
def test_unknown_topic_is_a_clear_source_error(
    spark: Any, kafka_broker: KafkaTestBroker, client: str, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    run = StreamRun(spark, tmp_path / "ck", _opts(kafka_broker, "no-such-topic-xyz", client))
    with pytest.raises(
        StreamingQueryException, match=r"SourceError: topic 'no-such-topic-xyz' does not exist"
    ):
        run.available_now()


@pytest.mark.spark
def test_dead_broker_is_a_clear_source_error(spark: Any, tmp_path: Path, client: str) -> None:
    from pyspark.errors import StreamingQueryException

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    opts = {
        "kafka.bootstrap.servers": f"127.0.0.1:{port}",
        "subscribe": "t",
        "kafka.bootstrap.timeout.ms": "500",
        "fetchOffset.numRetries": "2",
        "kafka.client": client,
    }
    run = StreamRun(spark, tmp_path / "ck", opts)
    started = time.monotonic()
    with pytest.raises(
        StreamingQueryException,
        match=rf"SourceError: .* failed on Kafka 127\.0\.0\.1:{port} after 2 attempt",
    ):
        run.available_now()
    assert time.monotonic() - started < 60
