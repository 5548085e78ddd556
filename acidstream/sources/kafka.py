"""A Kafka streaming source for Spark as a PySpark Python data source.

No JVM Kafka connector can be put on the classpath here, so this module reads
Kafka from Python workers and gives Spark the same schema and main options as
Spark's built-in ``kafka`` source. The client is ``kafka.client``: ``auto`` (the
default) reads with confluent-kafka (librdkafka, ``kafka_confluent.py``) when it
is importable, else with kafka-python (this module); both have the same
semantics (offsets per partition, start and end offsets, ``failOnDataLoss``,
the same errors)::

    spark.dataSource.register(KafkaSource)
    df = (
        spark.readStream.format("acidkafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
        .load()
    )

Where the code runs:

* :class:`KafkaSource` is pickled by the driver and unpickled in Python
  workers; it holds only the option strings.
* :class:`KafkaStreamReader` is created in two places. The driver's streaming
  runner worker calls ``initialOffset``, ``latestOffset``, ``partitions``,
  ``commit`` and ``stop`` on one instance, which keeps Kafka clients open
  between triggers. A second instance is pickled (before any client exists) to
  the executors, which call only :meth:`KafkaStreamReader.read`.
* :class:`KafkaInputPartition` travels driver -> executor (picklable).

Offsets, in the checkpoint and everywhere in this module's public surface,
are Spark's JSON shape: ``{"topic": {"0": 23, "1": 45}}`` (partition numbers
are strings because JSON keys are).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from acidstream.acid.errors import ConfigError
from acidstream.sources.errors import DataLossError, SourceError
from acidstream.sources.kafka_common import (
    KafkaInputPartition,
    arrow_batch,
    gc_paused,
    retrying,
    skip_to_log_start,
)
from acidstream.sources.kafka_consumers import POOL, consumer_key
from acidstream.sources.kafka_options import (
    _TP,
    CLIENT_CONFLUENT,
    EARLIEST,
    LATEST,
    OPT_BOOTSTRAP,
    OPT_END_OFFSETS_FROM,
    OPT_FAIL_ON_DATA_LOSS,
    OPT_POLL_TIMEOUT_MS,
    OPT_STARTING,
    OPT_SUBSCRIBE,
    SHORT_NAME,
    KafkaSourceOptions,
    Offsets,
    _to_json_offsets,
    _to_tp_map,
    parse_partition_offsets,
    partition_offsets_json,
)

__all__ = [
    "SCHEMA_DDL",
    "SHORT_NAME",
    "DataLossError",
    "KafkaInputPartition",
    "KafkaSource",
    "KafkaSourceOptions",
    "KafkaStreamReader",
    "SourceError",
    "end_offsets",
    "parse_partition_offsets",
    "partition_offsets_json",
]

log = logging.getLogger(__name__)

SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)


def _schema() -> StructType:
    # Built by hand: StructType.fromDDL needs a live SparkContext, which the
    # Python workers running this code do not have.
    return StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType()),
        ]
    )


def _new_consumer(opts: KafkaSourceOptions, **overrides: Any) -> Any:
    from kafka import KafkaConsumer

    cfg = opts.client_config()
    cfg.update(
        group_id=None,
        enable_auto_commit=False,
        # 'none': an out-of-range position raises instead of silently jumping,
        # so data loss is seen and failOnDataLoss decides.
        auto_offset_reset="none",
        allow_auto_create_topics=False,
    )
    cfg.update(overrides)
    return KafkaConsumer(**cfg)


def _new_admin(opts: KafkaSourceOptions) -> Any:
    from kafka import KafkaAdminClient

    allowed = KafkaAdminClient.DEFAULT_CONFIG
    cfg = {k: v for k, v in opts.client_config().items() if k in allowed}
    return KafkaAdminClient(**cfg)


class _Clients(Protocol):
    """The driver's lookups, as each client implements them."""

    def partitions(self) -> list[_TP]: ...
    def earliest(self, tps: Sequence[_TP]) -> dict[_TP, int]: ...
    def latest(self, tps: Sequence[_TP]) -> dict[_TP, int]: ...
    def close(self) -> None: ...


def driver_clients(opts: KafkaSourceOptions) -> _Clients:
    """Driver side: the lookups of the client ``opts.client`` names (``kafka.client``)."""
    if opts.client == CLIENT_CONFLUENT:
        from acidstream.sources.kafka_confluent import ConfluentDriverClients

        return ConfluentDriverClients(opts)
    return _DriverClients(opts)


class _DriverClients:
    """The driver's kafka-python clients, kept between triggers and rebuilt after errors."""

    def __init__(self, opts: KafkaSourceOptions) -> None:
        self.opts = opts
        self._consumer: Any = None
        self._admin: Any = None

    def _call(self, what: str, fn: Any) -> Any:
        def attempt() -> Any:
            try:
                if self._consumer is None:
                    # Short fetch wait: the "fetch" end-offset probe must not
                    # sit in the broker's long poll when nothing is new.
                    self._consumer = _new_consumer(self.opts, fetch_max_wait_ms=10)
                if self._admin is None:
                    self._admin = _new_admin(self.opts)
                return fn(self._consumer, self._admin)
            except Exception:
                self.close()  # a failed client may hold broken state
                raise

        return retrying(self.opts, what, attempt)

    def partitions(self) -> list[_TP]:
        """Current partitions of the subscribed topics (fresh metadata).

        Raises:
            SourceError: A subscribed topic does not exist.
        """

        def lookup(_consumer: Any, admin: Any) -> list[_TP]:
            from kafka.errors import UnknownTopicOrPartitionError, for_code

            out: list[_TP] = []
            for t in admin.describe_topics(list(self.opts.topics)):
                err = for_code(t["error_code"])
                if err is UnknownTopicOrPartitionError:
                    raise SourceError(
                        f"topic {t['name']!r} does not exist on Kafka {self.opts.bootstrap}"
                    )
                if t["error_code"] != 0:
                    raise err(f"metadata for topic {t['name']!r}")
                out.extend((t["name"], p["partition_index"]) for p in t["partitions"])
            missing = set(self.opts.topics) - {t for t, _ in out}
            if missing:
                raise SourceError(f"topics {sorted(missing)} not found on {self.opts.bootstrap}")
            return sorted(out)

        return list(self._call("topic metadata lookup", lookup))

    def earliest(self, tps: Sequence[_TP]) -> dict[_TP, int]:
        """Log-start offset of each partition."""
        return self._offsets("earliest", tps)

    def latest(self, tps: Sequence[_TP]) -> dict[_TP, int]:
        """End offset of each partition (per ``endOffsetsFrom``)."""
        listed = self._offsets("latest", tps)
        if self.opts.end_offsets_from == "fetch" and tps:
            return self._call("high-watermark fetch", lambda c, _a: _high_watermarks(c, listed))
        return listed

    def _offsets(self, which: str, tps: Sequence[_TP]) -> dict[_TP, int]:
        from kafka import TopicPartition

        if not tps:
            return {}

        def lookup(consumer: Any, _admin: Any) -> dict[_TP, int]:
            parts = [TopicPartition(t, p) for t, p in tps]
            if which == "earliest":
                got = consumer.beginning_offsets(parts)
            else:
                got = consumer.end_offsets(parts)
            return {(tp.topic, tp.partition): int(off) for tp, off in got.items()}

        return dict(self._call(f"{which} offset lookup", lookup))

    def close(self) -> None:
        """Close both clients (idempotent)."""
        for client in (self._consumer, self._admin):
            if client is not None:
                try:
                    client.close()
                except Exception as e:  # closing is best effort
                    log.debug("closing Kafka client failed: %s", e)
        self._consumer = None
        self._admin = None


def _high_watermarks(consumer: Any, listed: Mapping[_TP, int]) -> dict[_TP, int]:
    """End offsets from a Fetch response's high watermark.

    Seeks to the listed end (a valid position even when the broker under-
    reports it), fetches once per partition and takes the high watermark the
    broker returns with the records. ``max(listed, high watermark)``.
    """
    from kafka import TopicPartition

    parts = {TopicPartition(t, p): off for (t, p), off in listed.items()}
    # A fresh assignment forgets high watermarks seen by an earlier call.
    consumer.assign([])
    consumer.assign(list(parts))
    for tp, off in parts.items():
        consumer.seek(tp, off)
    deadline = time.monotonic() + consumer.config["request_timeout_ms"] / 1000
    while any(consumer.highwater(tp) is None for tp in parts):
        if time.monotonic() > deadline:
            from kafka.errors import KafkaTimeoutError

            raise KafkaTimeoutError("no fetch response carried a high watermark")
        consumer.poll(timeout_ms=50, max_records=1)
    out = {
        (tp.topic, tp.partition): max(off, int(consumer.highwater(tp))) for tp, off in parts.items()
    }
    consumer.assign([])
    return out


def end_offsets(
    bootstrap: str,
    topics: Iterable[str],
    *,
    method: Literal["listOffsets", "fetch"] = "listOffsets",
    kafka_options: Mapping[str, str] | None = None,
) -> Offsets:
    """Current end offset of every partition of ``topics`` (plain Python).

    Args:
        bootstrap: ``host:port[,host:port]``.
        topics: Topic names.
        method: ``"listOffsets"`` or ``"fetch"`` (see ``endOffsetsFrom``).
        kafka_options: Extra ``kafka.*`` options, as for the source.

    Returns:
        ``{topic: {"0": end, ...}}``; feed it to :func:`partition_offsets_json`.

    Raises:
        SourceError: Broker unreachable or a topic unknown.
        ConfigError: A bad ``kafka_options`` key or value.
    """
    opts_map = {
        OPT_BOOTSTRAP: bootstrap,
        OPT_SUBSCRIBE: ",".join(topics),
        OPT_END_OFFSETS_FROM: method,
        **(kafka_options or {}),
    }
    clients = driver_clients(KafkaSourceOptions.parse(opts_map))
    try:
        return _to_json_offsets(clients.latest(clients.partitions()))
    finally:
        clients.close()


# --------------------------------------------------------------------------
# The data source


class KafkaSource(DataSource):
    """``spark.readStream.format("acidkafka")``: Kafka as a streaming source.

    Created by Spark from the user's options on the driver and pickled to
    Python workers; it holds only those strings.
    """

    @classmethod
    def name(cls) -> str:
        """Short name for ``format()``: ``"acidkafka"``."""
        return SHORT_NAME

    def schema(self) -> StructType:
        """Spark's Kafka schema; parsing here makes bad options fail at ``load()``."""
        KafkaSourceOptions.parse(self.options)
        return _schema()

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        """Build the stream reader (in a Python worker for the driver or the planner)."""
        expected = _schema()
        if [(f.name, f.dataType) for f in schema.fields] != [
            (f.name, f.dataType) for f in expected.fields
        ]:
            raise ConfigError(f"{SHORT_NAME} has a fixed schema ({SCHEMA_DDL}); got {schema}")
        return KafkaStreamReader(KafkaSourceOptions.parse(self.options), schema)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans offset ranges on the driver and reads them on executors.

    Picklable as created: Kafka clients are opened lazily by driver-side
    methods and dropped by ``__getstate__``.

    Args:
        options: Parsed options.
        schema: The output schema (always :data:`SCHEMA_DDL`).
    """

    def __init__(self, options: KafkaSourceOptions, schema: StructType) -> None:
        self.opts = options
        self.schema = schema
        self._clients: _Clients | None = None
        self._target: dict[_TP, int] | None = None  # Trigger.AvailableNow bound
        self._latest_seen: dict[_TP, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_clients"] = None
        return state

    @property
    def _driver(self) -> _Clients:
        if self._clients is None:
            self._clients = driver_clients(self.opts)
        return self._clients

    # -- driver ------------------------------------------------------------

    def initialOffset(self) -> Offsets:
        """Driver: resolve ``startingOffsets`` to a number per partition.

        Called only for a query without a checkpoint. JSON offsets must name
        every partition of the subscribed topics (as Spark requires); -2/-1
        resolve to earliest/latest, other values are checked against the
        partition's range (outside it is data loss).

        Raises:
            ConfigError: JSON offsets do not match the topics' partitions.
            DataLossError: A JSON offset is outside the available range and
                ``failOnDataLoss`` is true.
        """
        d = self._driver
        tps = d.partitions()
        if self.opts.starting == "earliest":
            return _to_json_offsets(d.earliest(tps))
        if self.opts.starting == "latest":
            return _to_json_offsets(d.latest(tps))
        wanted = {(t, p): off for t, p, off in self.opts.starting_specific}
        if set(wanted) != set(tps):
            raise ConfigError(
                f"option {OPT_STARTING!r} must give an offset for every partition of "
                f"{list(self.opts.topics)} (-2 earliest, -1 latest): specified "
                f"{sorted(wanted)}, current {tps}"
            )
        earliest, latest = d.earliest(tps), d.latest(tps)
        out: dict[_TP, int] = {}
        for tp, off in wanted.items():
            if off == EARLIEST:
                out[tp] = earliest[tp]
            elif off == LATEST:
                out[tp] = latest[tp]
            elif off < earliest[tp] or off > latest[tp]:
                self._data_loss(
                    f"{OPT_STARTING} {tp[0]}/{tp[1]}={off} is outside the available "
                    f"range [{earliest[tp]}, {latest[tp]}]"
                )
                out[tp] = earliest[tp] if off < earliest[tp] else latest[tp]
            else:
                out[tp] = off
        return _to_json_offsets(out)

    def getDefaultReadLimit(self) -> ReadLimit:
        """Driver: ``maxOffsetsPerTrigger`` as a row limit, else everything."""
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Driver: fix the end of an ``availableNow`` run at today's end offsets.

        Partitions created after this call are not read by this run.
        """
        d = self._driver
        self._target = d.latest(d.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> Offsets:
        """Driver: end offsets for the next micro-batch.

        Picks up new partitions (they start at offset 0, as in Spark; if their
        log starts later the executor treats it as data loss), reports
        partitions that vanished or went backwards, and applies the read limit
        spread over partitions in proportion to their backlog (Spark's rule).

        Raises:
            DataLossError: A partition vanished or its end went below the
                start, and ``failOnDataLoss`` is true.
        """
        begin = _to_tp_map(start)
        d = self._driver
        if self._target is not None:
            current = dict(self._target)
        else:
            current = d.latest(d.partitions())
            self._latest_seen = dict(current)
        subscribed = set(self.opts.topics)
        for tp in sorted(begin):
            if tp[0] in subscribed and tp not in current:
                self._data_loss(f"partition {tp[0]}/{tp[1]} is gone (topic deleted?)")
        end: dict[_TP, int] = {}
        for tp, off in current.items():
            was = begin.get(tp, 0)
            if off < was:
                # Spark's choice: drop the range and carry on from the new end.
                self._data_loss(
                    f"partition {tp[0]}/{tp[1]} offset went back from {was} to {off} "
                    "(topic re-created or log truncated); records may have been missed"
                )
            end[tp] = off
        if isinstance(limit, ReadMaxRows):
            end = _rate_limit(limit.max_rows, begin, end)
        return _to_json_offsets(end)

    def reportLatestOffset(self) -> Offsets | None:
        """Driver: the newest end offsets seen, for the query progress."""
        return None if self._latest_seen is None else _to_json_offsets(self._latest_seen)

    def partitions(self, start: dict, end: dict) -> Sequence[KafkaInputPartition]:
        """Driver: one :class:`KafkaInputPartition` per topic-partition with data, or
        more with ``minPartitions`` (large ranges split, :func:`split_ranges`).

        Deterministic from ``(start, end)`` and the options alone, so a batch
        replayed after a restart reads the same ranges. A partition missing from
        ``start`` is new and starts at 0.
        """
        begin = _to_tp_map(start)
        out = []
        for (topic, p), stop in sorted(_to_tp_map(end).items()):
            first = begin.get((topic, p), 0)
            if stop > first:
                out.append(KafkaInputPartition(topic=topic, partition=p, start=first, end=stop))
        return split_ranges(out, self.opts.min_partitions)

    def commit(self, end: dict) -> None:
        """Driver: nothing to do; offsets live in Spark's checkpoint, not in Kafka."""

    def stop(self) -> None:
        """Driver: close the Kafka clients."""
        if self._clients is not None:
            self._clients.close()
            self._clients = None

    def _data_loss(self, message: str) -> None:
        if self.opts.fail_on_data_loss:
            raise DataLossError(
                f"{message}. Set {OPT_FAIL_ON_DATA_LOSS}=false to continue without them."
            )
        log.warning("%s; continuing because %s=false", message, OPT_FAIL_ON_DATA_LOSS)

    # -- executor ----------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Executor: yield Arrow batches of exactly ``[start, end)`` of one partition.

        Takes a consumer from the Python worker's pool (``kafka_consumers``) or
        opens one (``assign`` + ``seek``; no group, no commits), and gives it
        back when done (closes it after an error). Records below the
        partition's log start are data loss: an error, or skipped with
        ``failOnDataLoss=false``.

        Raises:
            DataLossError: Records in the range are gone (``failOnDataLoss``).
            SourceError: The broker stopped answering for ``pollTimeoutMs``.
        """
        assert isinstance(partition, KafkaInputPartition)
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        if self.opts.client == CLIENT_CONFLUENT:
            from acidstream.sources import kafka_confluent

            return gc_paused(kafka_confluent.read_range(self.opts, arrow_schema, partition))
        return gc_paused(_read_range(self.opts, arrow_schema, partition))


def _read_range(
    opts: KafkaSourceOptions, arrow_schema: Any, part: KafkaInputPartition
) -> Iterator[Any]:
    """Executor side, kafka-python: :meth:`KafkaStreamReader.read`'s batches.

    The consumer comes from the worker's pool and goes back to it after a read that
    ended well, with its position: the next micro-batch's range of the partition starts
    there, and the records the consumer fetched ahead serve it without a seek.
    """
    from kafka import TopicPartition
    from kafka.errors import OffsetOutOfRangeError

    tp = TopicPartition(part.topic, part.partition)
    where = f"{part.topic}/{part.partition} [{part.start}, {part.end})"
    per_poll = min(opts.arrow_batch_rows, 10_000)
    lease = POOL.lease(
        consumer_key(opts, part, max_poll_records=per_poll),
        part.start,
        lambda: retrying(
            opts, "consumer bootstrap", lambda: _new_consumer(opts, max_poll_records=per_poll)
        ),
        lambda c: c.close(autocommit=False),
    )
    consumer = lease.consumer
    done = False
    try:
        if lease.position is None:
            consumer.assign([tp])

        def to_log_start(position: int) -> int:
            log_start = retrying(
                opts, "earliest offset lookup", lambda: int(consumer.beginning_offsets([tp])[tp])
            )
            return skip_to_log_start(opts, part, position, log_start)

        # No log-start lookup up front: a fetch below the log start fails with
        # OffsetOutOfRange (auto_offset_reset="none"), and only then is it looked up.
        position = part.start
        unsettled = False
        cols: tuple[list[Any], ...] = ([], [], [], [])  # key, value, offset, timestamp(us)
        ttypes: list[int | None] = []
        last_progress = time.monotonic()
        if position < part.end and lease.position != position:
            consumer.seek(tp, position)
        while position < part.end:
            try:
                # No more than the range holds: records past its end, once returned,
                # would be lost to the next micro-batch (it would have to seek back).
                batch = consumer.poll(
                    timeout_ms=500, max_records=min(per_poll, part.end - position)
                )
            except OffsetOutOfRangeError:
                position = to_log_start(position)
                if position < part.end:
                    consumer.seek(tp, position)
                else:
                    unsettled = True  # its position is the out-of-range one
                continue
            recs = batch.get(tp)
            if recs and (recs[0].offset < position or recs[-1].offset >= part.end):
                # Outside [position, end): the head of a batch fetched from its
                # base offset, or records past the range's end.
                recs = [r for r in recs if position <= r.offset < part.end]
            if recs:
                # Column-wise comprehensions: this loop is the source's hot path.
                cols[0].extend([r.key for r in recs])
                cols[1].extend([r.value for r in recs])
                cols[2].extend([r.offset for r in recs])
                cols[3].extend([r.timestamp * 1000 for r in recs])
                ttypes.extend([r.timestamp_type for r in recs])
                position = recs[-1].offset + 1
            # The consumer's position also moves over control records and
            # compacted gaps, which never show up as records.
            position = max(position, int(consumer.position(tp)))
            if batch:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > opts.poll_timeout_ms / 1000:
                raise SourceError(
                    f"no records from {where} at offset {position} for "
                    f"{opts.poll_timeout_ms} ms ({OPT_POLL_TIMEOUT_MS}); broker {opts.bootstrap}"
                )
            if len(ttypes) >= opts.arrow_batch_rows:
                yield arrow_batch(arrow_schema, part, cols, ttypes)
                cols = ([], [], [], [])
                ttypes = []
        if ttypes:
            yield arrow_batch(arrow_schema, part, cols, ttypes)
        # The offset the consumer returns next: past the end only if it moved over
        # offsets without records, or returned records past the end (then the next
        # range, starting at this one's end, seeks).
        settled = not unsettled and (lease.position is not None or part.end > part.start)
        next_offset = int(consumer.position(tp)) if settled else -1
        done = settled
    finally:
        if done:
            POOL.give_back(lease, next_offset)
        else:
            POOL.discard(lease)


def split_ranges(
    ranges: Sequence[KafkaInputPartition], min_partitions: int | None
) -> list[KafkaInputPartition]:
    """Driver: ``ranges`` split into at least about ``min_partitions`` (Spark's
    ``KafkaOffsetRangeCalculator``): a range gets ``round(size / total * n)`` parts of
    near-equal size, where ranges too small to split are left whole and taken out of
    the share. ``None``, or already as many ranges: ``ranges`` unchanged.

    Why: a micro-batch of 3 topic-partitions on 2 cores runs its third task alone, one
    core idle for a third of the batch; 6 ranges keep both busy to the end."""
    ranges = [r for r in ranges if r.end > r.start]
    if min_partitions is None or len(ranges) >= min_partitions:
        return list(ranges)

    def parts(size: int, total: int, n: int) -> int:
        # Scala's math.round: half up.
        return max(math.floor(size / total * n + 0.5), 1) if total > 0 else 1

    total = sum(r.end - r.start for r in ranges)
    whole = [r for r in ranges if parts(r.end - r.start, total, min_partitions) == 1]
    split_total = total - sum(r.end - r.start for r in whole)
    split_n = max(min_partitions - len(whole), 1)
    out: list[KafkaInputPartition] = []
    for r in ranges:
        k = 1 if r in whole else parts(r.end - r.start, split_total, split_n)
        remaining, first = r.end - r.start, r.start
        for i in range(k):
            this = remaining // (k - i)  # the last part takes the rounding
            remaining -= this
            stop = min(first + this, r.end)
            if stop > first:
                out.append(KafkaInputPartition(topic=r.topic, partition=r.partition,
                                               start=first, end=stop))  # fmt: skip
            first = stop
    return out


def _rate_limit(limit: int, begin: Mapping[_TP, int], until: Mapping[_TP, int]) -> dict[_TP, int]:
    """Cap ``until`` at ``limit`` records in total, split by backlog (Spark's ``rateLimit``,
    with the rounding remainder handed out).

    Each partition gets ``limit * backlog / total`` records rounded down, except that a
    share below one is rounded up so small partitions are not starved (then the total
    may exceed ``limit`` by a few, as in Spark). What rounding down left of ``limit`` goes
    one record each to the partitions with the largest fractional shares (ties: in
    topic-partition order), so the total is ``limit`` exactly when the backlog allows.
    Why: Spark's floors leave a tail (``100000`` over 3 equal backlogs read 99,999 a
    batch), a last micro-batch of a few records that costs a whole trigger.
    """
    sizes = {tp: end - begin.get(tp, 0) for tp, end in until.items()}
    sizes = {tp: s for tp, s in sizes.items() if s > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(until)
    if limit >= total:
        return dict(until)
    shares: dict[_TP, int] = {}
    fractions: list[tuple[int, _TP]] = []  # numerators over ``total``, rounded down
    for tp, size in sizes.items():
        # Integer arithmetic: limit * size / total exactly.
        whole, frac = divmod(limit * size, total)
        if whole < 1:
            shares[tp] = 1  # a share below one rounds up
        else:
            shares[tp] = whole
            if frac:
                fractions.append((frac, tp))
    left = limit - sum(shares.values())
    # With limit < total, whole + 1 <= size wherever frac > 0: the backlog allows it.
    for _, tp in sorted(fractions, key=lambda f: (-f[0], f[1]))[: max(left, 0)]:
        shares[tp] += 1
    return {tp: begin.get(tp, 0) + shares[tp] if tp in shares else end for tp, end in until.items()}
