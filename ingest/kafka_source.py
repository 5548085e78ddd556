"""A Kafka streaming source for Spark as a PySpark Python data source.

No JVM Kafka connector can be put on the classpath here, so this module reads
Kafka with kafka-python from Python workers and gives Spark the same schema
and main options as Spark's built-in ``kafka`` source::

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

import json
import logging
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

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
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from acid.errors import AcidStreamError, ConfigError

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

SHORT_NAME = "acidkafka"
#: Same columns and types as Spark's built-in Kafka source (without headers).
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


# Option keys (as Spark spells them) and their defaults. Matching is
# case-insensitive, as Spark's is for source options.
OPT_BOOTSTRAP = "kafka.bootstrap.servers"
OPT_SUBSCRIBE = "subscribe"
OPT_STARTING = "startingOffsets"
DEFAULT_STARTING = "latest"
OPT_MAX_OFFSETS = "maxOffsetsPerTrigger"
OPT_FAIL_ON_DATA_LOSS = "failOnDataLoss"
DEFAULT_FAIL_ON_DATA_LOSS = True
OPT_POLL_TIMEOUT_MS = "kafkaConsumer.pollTimeoutMs"
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark: spark.network.timeout
OPT_NUM_RETRIES = "fetchOffset.numRetries"
DEFAULT_NUM_RETRIES = 3
OPT_RETRY_INTERVAL_MS = "fetchOffset.retryIntervalMs"
DEFAULT_RETRY_INTERVAL_MS = 10
OPT_END_OFFSETS_FROM = "endOffsetsFrom"
DEFAULT_END_OFFSETS_FROM = "listOffsets"
OPT_ARROW_BATCH_ROWS = "arrowBatchRows"
DEFAULT_ARROW_BATCH_ROWS = 20_000
KAFKA_PREFIX = "kafka."

_KNOWN = {
    k.lower(): k
    for k in (
        OPT_BOOTSTRAP,
        OPT_SUBSCRIBE,
        OPT_STARTING,
        OPT_MAX_OFFSETS,
        OPT_FAIL_ON_DATA_LOSS,
        OPT_POLL_TIMEOUT_MS,
        OPT_NUM_RETRIES,
        OPT_RETRY_INTERVAL_MS,
        OPT_END_OFFSETS_FROM,
        OPT_ARROW_BATCH_ROWS,
    )
}
# Spark options this source does not implement: named, so the error says so
# instead of calling them unknown.
_UNSUPPORTED = {
    k.lower(): k
    for k in (
        "subscribePattern",
        "assign",
        "endingOffsets",
        "includeHeaders",
        "startingOffsetsByTimestamp",
        "startingTimestamp",
        "startingOffsetsByTimestampStrategy",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "minPartitions",
        "maxRecordsPerPartition",
        "groupIdPrefix",
    )
}
# Consumer settings the source owns: offsets are managed by Spark's
# checkpoint, never by Kafka groups, and records stay raw bytes.
_FORBIDDEN_KAFKA = {
    "group.id",
    "enable.auto.commit",
    "auto.offset.reset",
    "key.deserializer",
    "value.deserializer",
    "allow.auto.create.topics",
}
# kafka-python settings whose values are Python objects, not strings.
_OBJECT_KAFKA = {
    "kafka_client",
    "selector",
    "partition_assignment_strategy",
    "default_offset_commit_callback",
    "metric_reporters",
    "socket_options",
    "ssl_context",
    "sasl_oauth_token_provider",
    "consumer_timeout_ms",
}
# Driver-side clients fail fast on a dead broker (kafka-python waits 30 s).
_DEFAULT_BOOTSTRAP_TIMEOUT_MS = 10_000

EARLIEST = -2
LATEST = -1

#: ``{topic: {partition-as-string: offset}}``, Spark's JSON offset shape.
Offsets = dict[str, dict[str, int]]
_TP = tuple[str, int]


class SourceError(AcidStreamError):
    """Kafka could not be read: broker unreachable, topic unknown, lookups failed."""


class DataLossError(SourceError):
    """Offsets the query still needs are gone (``failOnDataLoss=true``).

    Raised when records were deleted before being read (retention, deleted
    records), a partition or topic disappeared, or a partition's offsets went
    backwards (topic re-created). Set ``failOnDataLoss=false`` to continue
    from what is still there.
    """


# --------------------------------------------------------------------------
# Offsets in Spark's JSON shape


def partition_offsets_json(offsets: Mapping[str, Mapping[Any, int]] | Mapping[_TP, int]) -> str:
    """Spark's canonical JSON for per-partition offsets.

    Args:
        offsets: Either ``{topic: {partition: offset}}`` (partition as int or
            str) or ``{(topic, partition): offset}``.

    Returns:
        Compact JSON with topics sorted and partitions in numeric order, e.g.
        ``{"t":{"0":5,"1":7}}``; equal offsets give equal strings.
    """
    return json.dumps(_to_json_offsets(_to_tp_map(offsets)), separators=(",", ":"))


def parse_partition_offsets(text: str, *, key: str = "offsets") -> Offsets:
    """Parse and validate ``{"topic": {"0": 23}}`` JSON.

    Args:
        text: The JSON text.
        key: Option name for the error message.

    Raises:
        ConfigError: Not a JSON object of objects of integer offsets.
    """
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{key}: not valid JSON ({e}): {text!r}") from e
    if not isinstance(raw, dict):
        raise ConfigError(f"{key}: expected a JSON object {{topic: {{partition: offset}}}}")
    out: Offsets = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise ConfigError(f"{key}: topic {topic!r} must map to {{partition: offset}}")
        out[topic] = {}
        for p, off in parts.items():
            if not str(p).isdigit() or isinstance(off, bool) or not isinstance(off, int):
                raise ConfigError(f"{key}: bad entry {topic}/{p}={off!r}")
            if off < EARLIEST:
                raise ConfigError(
                    f"{key}: offset {off} for {topic}/{p} (use -2 earliest, -1 latest)"
                )
            out[topic][str(int(p))] = off
    return out


def _to_tp_map(offsets: Mapping[Any, Any]) -> dict[_TP, int]:
    out: dict[_TP, int] = {}
    for k, v in offsets.items():
        if isinstance(k, tuple):
            out[(str(k[0]), int(k[1]))] = int(v)
        else:
            for p, off in v.items():
                out[(str(k), int(p))] = int(off)
    return out


def _to_json_offsets(tps: Mapping[_TP, int]) -> Offsets:
    out: Offsets = {}
    for topic, p in sorted(tps):
        out.setdefault(topic, {})[str(p)] = int(tps[(topic, p)])
    return out


# --------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class KafkaSourceOptions:
    """The source's options, parsed once from Spark's string map.

    Attributes:
        bootstrap: ``kafka.bootstrap.servers``.
        topics: Topics from ``subscribe``.
        starting: ``"earliest"``, ``"latest"`` or ``"specific"``.
        starting_specific: For ``"specific"``: ``((topic, partition, offset), ...)``
            with -2 earliest and -1 latest.
        max_offsets_per_trigger: Rate limit per micro-batch, or ``None``.
        fail_on_data_loss: Raise :class:`DataLossError` (True) or skip ahead.
        poll_timeout_ms: How long an executor waits for records it expects.
        num_retries: Attempts for idempotent metadata/offset lookups.
        retry_interval_ms: First back-off between those attempts.
        end_offsets_from: ``"listOffsets"`` (Spark's way) or ``"fetch"``
            (also ask a Fetch response's high watermark; for brokers whose
            ListOffsets is wrong, such as Tansu 0.6 in memory).
        arrow_batch_rows: Rows per Arrow batch handed to Spark.
        consumer_config: ``kafka.*`` pass-through, as kafka-python keyword
            arguments (sorted ``(name, value)`` pairs).
    """

    bootstrap: str
    topics: tuple[str, ...]
    starting: Literal["earliest", "latest", "specific"] = "latest"
    starting_specific: tuple[tuple[str, int, int], ...] = ()
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = DEFAULT_FAIL_ON_DATA_LOSS
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    num_retries: int = DEFAULT_NUM_RETRIES
    retry_interval_ms: int = DEFAULT_RETRY_INTERVAL_MS
    end_offsets_from: Literal["listOffsets", "fetch"] = "listOffsets"
    arrow_batch_rows: int = DEFAULT_ARROW_BATCH_ROWS
    consumer_config: tuple[tuple[str, Any], ...] = field(default=())

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> KafkaSourceOptions:
        """Parse Spark's option map.

        Raises:
            ConfigError: A key is unknown or unsupported, a required key is
                missing, or a value is invalid; the message names the key.
        """
        known: dict[str, str] = {}
        kafka: dict[str, Any] = {}
        for raw_key, value in options.items():
            low = raw_key.lower()
            if low in _KNOWN:
                known[_KNOWN[low]] = str(value)
            elif low in _UNSUPPORTED:
                raise ConfigError(f"option {_UNSUPPORTED[low]!r} is not supported by {SHORT_NAME}")
            elif low.startswith(KAFKA_PREFIX) and low != OPT_BOOTSTRAP:
                name, converted = _kafka_setting(raw_key[len(KAFKA_PREFIX) :], str(value))
                kafka[name] = converted
            elif low == "path":
                # DataStreamReader.load(path) puts it here; a Kafka source has none.
                raise ConfigError(f"option 'path' makes no sense for {SHORT_NAME}")
            else:
                raise ConfigError(f"unknown option {raw_key!r} for {SHORT_NAME}")

        bootstrap = known.get(OPT_BOOTSTRAP, "").strip()
        if not bootstrap:
            raise ConfigError(f"option {OPT_BOOTSTRAP!r} is required")
        topics = tuple(t.strip() for t in known.get(OPT_SUBSCRIBE, "").split(",") if t.strip())
        if not topics:
            raise ConfigError(f"option {OPT_SUBSCRIBE!r} is required (comma-separated topics)")
        if len(set(topics)) != len(topics):
            raise ConfigError(f"option {OPT_SUBSCRIBE!r} names a topic twice: {topics}")

        starting_raw = known.get(OPT_STARTING, DEFAULT_STARTING).strip()
        specific: tuple[tuple[str, int, int], ...] = ()
        starting: Literal["earliest", "latest", "specific"]
        if starting_raw.lower() == "earliest":
            starting = "earliest"
        elif starting_raw.lower() == "latest":
            starting = "latest"
        elif starting_raw.startswith("{"):
            starting = "specific"
            parsed = parse_partition_offsets(starting_raw, key=OPT_STARTING)
            extra = set(parsed) - set(topics)
            if extra:
                raise ConfigError(
                    f"option {OPT_STARTING!r} names topics not in {OPT_SUBSCRIBE!r}: {sorted(extra)}"
                )
            specific = tuple(
                (t, int(p), off) for t, parts in sorted(parsed.items()) for p, off in parts.items()
            )
        else:
            raise ConfigError(
                f"option {OPT_STARTING!r}: expected 'earliest', 'latest' or JSON, got {starting_raw!r}"
            )

        max_offsets = None
        if OPT_MAX_OFFSETS in known:
            max_offsets = _positive_int(OPT_MAX_OFFSETS, known[OPT_MAX_OFFSETS])
        end_from = known.get(OPT_END_OFFSETS_FROM, DEFAULT_END_OFFSETS_FROM)
        if end_from not in ("listOffsets", "fetch"):
            raise ConfigError(
                f"option {OPT_END_OFFSETS_FROM!r}: expected 'listOffsets' or 'fetch', got {end_from!r}"
            )
        if end_from == "fetch" and kafka.get("isolation_level") == "read_committed":
            # The fetch high watermark is past the last stable offset: reads
            # up to it would wait for records read_committed never returns.
            raise ConfigError(
                f"option {OPT_END_OFFSETS_FROM!r}=fetch cannot be combined with "
                "kafka.isolation.level=read_committed"
            )
        return cls(
            bootstrap=bootstrap,
            topics=topics,
            starting=starting,
            starting_specific=specific,
            max_offsets_per_trigger=max_offsets,
            fail_on_data_loss=_bool(
                OPT_FAIL_ON_DATA_LOSS, known.get(OPT_FAIL_ON_DATA_LOSS, "true")
            ),
            poll_timeout_ms=_positive_int(
                OPT_POLL_TIMEOUT_MS, known.get(OPT_POLL_TIMEOUT_MS, str(DEFAULT_POLL_TIMEOUT_MS))
            ),
            num_retries=_positive_int(
                OPT_NUM_RETRIES, known.get(OPT_NUM_RETRIES, str(DEFAULT_NUM_RETRIES))
            ),
            retry_interval_ms=_non_negative_int(
                OPT_RETRY_INTERVAL_MS,
                known.get(OPT_RETRY_INTERVAL_MS, str(DEFAULT_RETRY_INTERVAL_MS)),
            ),
            end_offsets_from=end_from,  # type: ignore[arg-type]
            arrow_batch_rows=_positive_int(
                OPT_ARROW_BATCH_ROWS,
                known.get(OPT_ARROW_BATCH_ROWS, str(DEFAULT_ARROW_BATCH_ROWS)),
            ),
            consumer_config=tuple(sorted(kafka.items())),
        )

    def client_config(self) -> dict[str, Any]:
        """kafka-python keyword arguments shared by every client we create."""
        cfg: dict[str, Any] = {"bootstrap_timeout_ms": _DEFAULT_BOOTSTRAP_TIMEOUT_MS}
        cfg.update(self.consumer_config)
        cfg["bootstrap_servers"] = self.bootstrap
        return cfg


def _kafka_setting(suffix: str, value: str) -> tuple[str, Any]:
    from kafka import KafkaConsumer

    key = f"{KAFKA_PREFIX}{suffix}"
    if suffix.lower() in _FORBIDDEN_KAFKA:
        raise ConfigError(
            f"option {key!r} is not allowed: the source manages offsets itself "
            "(no consumer groups, no commits, raw bytes)"
        )
    name = suffix.lower().replace(".", "_")
    defaults = KafkaConsumer.DEFAULT_CONFIG
    if name not in defaults:
        raise ConfigError(f"option {key!r}: kafka-python has no consumer setting {name!r}")
    if name in _OBJECT_KAFKA:
        raise ConfigError(f"option {key!r}: {name!r} cannot be set from a string option")
    default = defaults[name]
    if isinstance(default, bool):
        return name, _bool(key, value)
    if isinstance(default, int):
        try:
            return name, int(value)
        except ValueError as e:
            raise ConfigError(f"option {key!r}: expected an integer, got {value!r}") from e
    return name, value


def _bool(key: str, value: str) -> bool:
    low = value.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise ConfigError(f"option {key!r}: expected 'true' or 'false', got {value!r}")


def _non_negative_int(key: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError as e:
        raise ConfigError(f"option {key!r}: expected an integer, got {value!r}") from e
    if n < 0:
        raise ConfigError(f"option {key!r}: must be >= 0, got {n}")
    return n


def _positive_int(key: str, value: str) -> int:
    n = _non_negative_int(key, value)
    if n == 0:
        raise ConfigError(f"option {key!r}: must be > 0")
    return n


# --------------------------------------------------------------------------
# Kafka clients with retries (driver side, and the executor's offset lookup)


def _is_retriable(e: BaseException) -> bool:
    from kafka import errors

    if isinstance(e, ConnectionError | TimeoutError):
        return True
    # kafka-python 2 has NoBrokersAvailable; 3 raises KafkaTimeoutError instead.
    no_brokers = getattr(errors, "NoBrokersAvailable", None)
    if no_brokers is not None and isinstance(e, no_brokers):
        return True
    return isinstance(e, errors.KafkaError) and bool(getattr(e, "retriable", False))


def _retrying(opts: KafkaSourceOptions, what: str, fn: Any) -> Any:
    """Run an idempotent lookup ``fn()`` with capped exponential back-off + jitter.

    Only metadata and offset lookups go through here: repeating them has no
    effect on the broker. Errors become :class:`SourceError`.
    """
    retrying = Retrying(
        stop=stop_after_attempt(opts.num_retries),
        # Jitter proportional to the interval (tenacity's default is a flat 1 s).
        wait=wait_exponential_jitter(
            multiplier=opts.retry_interval_ms / 1000, jitter=opts.retry_interval_ms / 1000, max=2.0
        ),
        retry=retry_if_exception(_is_retriable),
        reraise=True,
    )
    try:
        return retrying(fn)
    except (SourceError, ConfigError):
        raise
    except RetryError as e:  # pragma: no cover - reraise=True makes this rare
        raise SourceError(f"{what} failed on {opts.bootstrap}: {e}") from e
    except Exception as e:
        attempts = f" after {opts.num_retries} attempt(s)" if _is_retriable(e) else ""
        raise SourceError(
            f"{what} failed on Kafka {opts.bootstrap}{attempts}: {type(e).__name__}: {e}"
        ) from e


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


class _DriverClients:
    """The driver's Kafka clients, kept between triggers and rebuilt after errors."""

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

        return _retrying(self.opts, what, attempt)

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
    clients = _DriverClients(KafkaSourceOptions.parse(opts_map))
    try:
        return _to_json_offsets(clients.latest(clients.partitions()))
    finally:
        clients.close()


# --------------------------------------------------------------------------
# The data source


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """One topic-partition's offset range ``[start, end)`` (driver -> executor, picklable)."""

    topic: str
    partition: int
    start: int
    end: int


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
        self._clients: _DriverClients | None = None
        self._target: dict[_TP, int] | None = None  # Trigger.AvailableNow bound
        self._latest_seen: dict[_TP, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_clients"] = None
        return state

    @property
    def _driver(self) -> _DriverClients:
        if self._clients is None:
            self._clients = _DriverClients(self.opts)
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
        """Driver: one :class:`KafkaInputPartition` per topic-partition with data.

        Deterministic from ``(start, end)`` alone, so a batch replayed after a
        restart reads the same ranges. A partition missing from ``start`` is
        new and starts at 0.
        """
        begin = _to_tp_map(start)
        out = []
        for (topic, p), stop in sorted(_to_tp_map(end).items()):
            first = begin.get((topic, p), 0)
            if stop > first:
                out.append(KafkaInputPartition(topic=topic, partition=p, start=first, end=stop))
        return out

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

        Opens its own consumer (``assign`` + ``seek``; no group, no commits)
        and closes it when done. Records below the partition's log start are
        data loss: an error, or skipped with ``failOnDataLoss=false``.

        Raises:
            DataLossError: Records in the range are gone (``failOnDataLoss``).
            SourceError: The broker stopped answering for ``pollTimeoutMs``.
        """
        assert isinstance(partition, KafkaInputPartition)
        return _read_range(self.opts, self.schema, partition)


def _read_range(
    opts: KafkaSourceOptions, schema: StructType, part: KafkaInputPartition
) -> Iterator[Any]:
    import pyarrow as pa
    from kafka import TopicPartition
    from kafka.errors import OffsetOutOfRangeError
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    tp = TopicPartition(part.topic, part.partition)
    where = f"{part.topic}/{part.partition} [{part.start}, {part.end})"
    consumer = _retrying(
        opts,
        "consumer bootstrap",
        lambda: _new_consumer(opts, max_poll_records=min(opts.arrow_batch_rows, 10_000)),
    )
    try:
        consumer.assign([tp])

        def skip_to_log_start(position: int) -> int:
            log_start = _retrying(
                opts, "earliest offset lookup", lambda: consumer.beginning_offsets([tp])[tp]
            )
            if log_start <= position:
                return position
            msg = f"offsets [{position}, {min(log_start, part.end)}) of {where} are gone"
            if opts.fail_on_data_loss:
                raise DataLossError(
                    f"{msg} (log now starts at {log_start}). "
                    f"Set {OPT_FAIL_ON_DATA_LOSS}=false to continue without them."
                )
            log.warning("%s; skipping to %d (%s=false)", msg, log_start, OPT_FAIL_ON_DATA_LOSS)
            return log_start

        position = skip_to_log_start(part.start)
        cols: tuple[list[Any], ...] = ([], [], [], [])  # key, value, offset, timestamp(us)
        ttypes: list[int] = []
        last_progress = time.monotonic()
        if position < part.end:
            consumer.seek(tp, position)
        while position < part.end:
            try:
                batch = consumer.poll(timeout_ms=500)
            except OffsetOutOfRangeError:
                position = skip_to_log_start(position)
                if position < part.end:
                    consumer.seek(tp, position)
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
                yield _arrow_batch(pa, arrow_schema, part, cols, ttypes)
                cols = ([], [], [], [])
                ttypes = []
        if ttypes:
            yield _arrow_batch(pa, arrow_schema, part, cols, ttypes)
    finally:
        consumer.close(autocommit=False)


def _arrow_batch(
    pa: Any,
    schema: Any,
    part: KafkaInputPartition,
    cols: tuple[list[Any], ...],
    ttypes: list[int],
) -> Any:
    n = len(ttypes)
    arrays = [
        pa.array(cols[0], pa.binary()),
        pa.array(cols[1], pa.binary()),
        pa.array([part.topic] * n, pa.string()),
        pa.array([part.partition] * n, pa.int32()),
        pa.array(cols[2], pa.int64()),
        pa.array(cols[3], pa.timestamp("us", tz="UTC")),
        pa.array(ttypes, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _rate_limit(limit: int, begin: Mapping[_TP, int], until: Mapping[_TP, int]) -> dict[_TP, int]:
    """Cap ``until`` at ``limit`` records in total, split by backlog (Spark's ``rateLimit``).

    Each partition gets ``limit * backlog / total`` records, rounded down,
    except that a share below one is rounded up so small partitions are not
    starved (so the total may exceed ``limit`` by a few, as in Spark).
    """
    sizes = {tp: end - begin.get(tp, 0) for tp, end in until.items()}
    sizes = {tp: s for tp, s in sizes.items() if s > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(until)
    out = {}
    for tp, end in until.items():
        if tp not in sizes:
            out[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begin.get(tp, 0) + share)
    return out
