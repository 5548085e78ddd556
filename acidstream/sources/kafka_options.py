"""Options, offsets and their JSON shape for the Kafka source (``acidstream.sources.kafka``).

Parsed once on the driver into the frozen :class:`KafkaSourceOptions`, which is pickled to
the executors with the reader. Option names and defaults are Spark's Kafka source's.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from acidstream.acid.errors import ConfigError

__all__ = [
    "SHORT_NAME",
    "KafkaSourceOptions",
    "Offsets",
    "parse_partition_offsets",
    "partition_offsets_json",
]

SHORT_NAME = "acidkafka"

OPT_BOOTSTRAP = "kafka.bootstrap.servers"
OPT_SUBSCRIBE = "subscribe"
OPT_STARTING = "startingOffsets"
DEFAULT_STARTING = "latest"
OPT_MAX_OFFSETS = "maxOffsetsPerTrigger"
OPT_MIN_PARTITIONS = "minPartitions"
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
# Which Python Kafka client reads: "auto" takes confluent-kafka (librdkafka, about 2.4x
# kafka-python's consume rate here) when it is importable, else kafka-python. Not a Kafka
# consumer setting despite the prefix (Kafka has no "client" setting; "client.id" is one).
OPT_CLIENT = "kafka.client"
DEFAULT_CLIENT = "auto"
CLIENT_CONFLUENT: Final = "confluent"
CLIENT_KAFKA_PYTHON: Final = "kafka-python"
CLIENTS = ("auto", CLIENT_CONFLUENT, CLIENT_KAFKA_PYTHON)
KAFKA_PREFIX = "kafka."

_KNOWN = {
    k.lower(): k
    for k in (
        OPT_BOOTSTRAP,
        OPT_SUBSCRIBE,
        OPT_STARTING,
        OPT_MAX_OFFSETS,
        OPT_MIN_PARTITIONS,
        OPT_FAIL_ON_DATA_LOSS,
        OPT_POLL_TIMEOUT_MS,
        OPT_NUM_RETRIES,
        OPT_RETRY_INTERVAL_MS,
        OPT_END_OFFSETS_FROM,
        OPT_ARROW_BATCH_ROWS,
        OPT_CLIENT,
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
    # librdkafka's own names for the same things
    "enable.auto.offset.store",
    "enable.partition.eof",
}
# kafka-python settings the confluent client honours in its own way (librdkafka has no
# such setting): how long a metadata or offset lookup may take, records per poll, and the
# request timeout (librdkafka's consumer calls it socket.timeout.ms).
RDKAFKA_OWN = {"bootstrap.timeout.ms", "max.poll.records"}
RDKAFKA_RENAMED = {"request.timeout.ms": "socket.timeout.ms"}
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

ClientName = Literal["confluent", "kafka-python"]

#: ``{topic: {partition-as-string: offset}}``, Spark's JSON offset shape.
Offsets = dict[str, dict[str, int]]
_TP = tuple[str, int]


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


@dataclass(frozen=True, kw_only=True)
class KafkaSourceOptions:
    """The source's options, parsed once from Spark's string map.

    Attributes:
        bootstrap: ``kafka.bootstrap.servers``.
        topics: Topics from ``subscribe``.
        starting: ``"earliest"``, ``"latest"`` or ``"specific"``.
        starting_specific: For ``"specific"``: ``((topic, partition, offset), ...)``
            with -2 earliest and -1 latest.
        max_offsets_per_trigger: Rate limit per micro-batch, or ``None``.
        min_partitions: ``minPartitions``: the least number of Spark partitions (tasks)
            a micro-batch is read in; large offset ranges are split (Spark's rule), or
            ``None``: one task per topic-partition.
        fail_on_data_loss: Raise :class:`DataLossError` (True) or skip ahead.
        poll_timeout_ms: How long an executor waits for records it expects.
        num_retries: Attempts for idempotent metadata/offset lookups.
        retry_interval_ms: First back-off between those attempts.
        end_offsets_from: ``"listOffsets"`` (Spark's way) or ``"fetch"``
            (also ask a Fetch response's high watermark; for brokers whose
            ListOffsets is wrong, such as Tansu 0.6 in memory).
        arrow_batch_rows: Rows per Arrow batch handed to Spark.
        client: The Kafka client that reads, ``kafka.client`` resolved once on the
            driver (``auto``: ``confluent`` when confluent-kafka is importable), so the
            executors use the client the driver planned with.
        consumer_config: ``kafka.*`` pass-through in the client's own form (sorted
            ``(name, value)`` pairs): kafka-python keyword arguments, or librdkafka's
            dotted names with string values (checked by librdkafka at parse time).
    """

    bootstrap: str
    topics: tuple[str, ...]
    starting: Literal["earliest", "latest", "specific"] = "latest"
    starting_specific: tuple[tuple[str, int, int], ...] = ()
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = DEFAULT_FAIL_ON_DATA_LOSS
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    num_retries: int = DEFAULT_NUM_RETRIES
    retry_interval_ms: int = DEFAULT_RETRY_INTERVAL_MS
    end_offsets_from: Literal["listOffsets", "fetch"] = "listOffsets"
    arrow_batch_rows: int = DEFAULT_ARROW_BATCH_ROWS
    client: ClientName = CLIENT_KAFKA_PYTHON
    consumer_config: tuple[tuple[str, Any], ...] = field(default=())

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> KafkaSourceOptions:
        """Parse Spark's option map.

        Raises:
            ConfigError: A key is unknown or unsupported, a required key is
                missing, or a value is invalid; the message names the key.
        """
        known: dict[str, str] = {}
        raw_kafka: list[tuple[str, str]] = []
        for raw_key, value in options.items():
            low = raw_key.lower()
            if low in _KNOWN:
                known[_KNOWN[low]] = str(value)
            elif low in _UNSUPPORTED:
                raise ConfigError(f"option {_UNSUPPORTED[low]!r} is not supported by {SHORT_NAME}")
            elif low.startswith(KAFKA_PREFIX) and low != OPT_BOOTSTRAP:
                raw_kafka.append((raw_key[len(KAFKA_PREFIX) :], str(value)))
            elif low == "path":
                # DataStreamReader.load(path) puts it here; a Kafka source has none.
                raise ConfigError(f"option 'path' makes no sense for {SHORT_NAME}")
            else:
                raise ConfigError(f"unknown option {raw_key!r} for {SHORT_NAME}")

        client = resolve_client(known.get(OPT_CLIENT, DEFAULT_CLIENT))
        kafka: dict[str, Any] = {}
        for suffix, value in raw_kafka:
            if client == CLIENT_CONFLUENT:
                name, converted = _rdkafka_setting(suffix, value)
            else:
                name, converted = _kafka_setting(suffix, value)
            kafka[name] = converted
        if client == CLIENT_CONFLUENT:
            check_rdkafka_settings(tuple(sorted(kafka.items())))

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
        min_partitions = None
        if OPT_MIN_PARTITIONS in known:
            min_partitions = _positive_int(OPT_MIN_PARTITIONS, known[OPT_MIN_PARTITIONS])
        end_from = known.get(OPT_END_OFFSETS_FROM, DEFAULT_END_OFFSETS_FROM)
        if end_from not in ("listOffsets", "fetch"):
            raise ConfigError(
                f"option {OPT_END_OFFSETS_FROM!r}: expected 'listOffsets' or 'fetch', got {end_from!r}"
            )
        isolation = kafka.get("isolation_level", kafka.get("isolation.level", "read_uncommitted"))
        if end_from == "fetch" and str(isolation).lower() == "read_committed":
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
            min_partitions=min_partitions,
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
            client=client,
            consumer_config=tuple(sorted(kafka.items())),
        )

    def client_config(self) -> dict[str, Any]:
        """kafka-python keyword arguments shared by every client we create
        (``client == "kafka-python"``; the confluent client reads ``consumer_config``)."""
        cfg: dict[str, Any] = {"bootstrap_timeout_ms": _DEFAULT_BOOTSTRAP_TIMEOUT_MS}
        cfg.update(self.consumer_config)
        cfg["bootstrap_servers"] = self.bootstrap
        return cfg


def resolve_client(value: str) -> ClientName:
    """``kafka.client`` as the client that will read (driver side, at parse time).

    Raises:
        ConfigError: Not one of :data:`CLIENTS`, or ``confluent`` asked for and
            confluent-kafka is not importable.
    """
    import importlib.util

    low = value.strip().lower()
    if low not in CLIENTS:
        raise ConfigError(f"option {OPT_CLIENT!r}: expected one of {list(CLIENTS)}, got {value!r}")
    has_confluent = importlib.util.find_spec("confluent_kafka") is not None
    if low == CLIENT_CONFLUENT and not has_confluent:
        raise ConfigError(
            f"option {OPT_CLIENT!r}={CLIENT_CONFLUENT}: confluent-kafka is not installed "
            f"(pip install confluent-kafka, or {OPT_CLIENT}={CLIENT_KAFKA_PYTHON})"
        )
    if low == "auto":
        return CLIENT_CONFLUENT if has_confluent else CLIENT_KAFKA_PYTHON
    return CLIENT_CONFLUENT if low == CLIENT_CONFLUENT else CLIENT_KAFKA_PYTHON


def _refuse_forbidden(key: str, suffix: str) -> None:
    if suffix.lower() in _FORBIDDEN_KAFKA:
        raise ConfigError(
            f"option {key!r} is not allowed: the source manages offsets itself "
            "(no consumer groups, no commits, raw bytes)"
        )


def _rdkafka_setting(suffix: str, value: str) -> tuple[str, Any]:
    """One ``kafka.*`` option for the confluent client: librdkafka's dotted name and the
    string value (librdkafka parses values itself), or one of :data:`RDKAFKA_OWN` (an
    integer the source uses itself)."""
    key = f"{KAFKA_PREFIX}{suffix}"
    _refuse_forbidden(key, suffix)
    name = suffix.lower()
    if name in RDKAFKA_OWN:
        return name, _positive_int(key, value)
    return RDKAFKA_RENAMED.get(name, name), value


@functools.lru_cache(maxsize=64)
def check_rdkafka_settings(settings: tuple[tuple[str, Any], ...]) -> None:
    """Let librdkafka refuse an unknown ``kafka.*`` name or a bad value at parse time
    (as kafka-python's settings are checked), instead of in every executor task.

    Builds a consumer without brokers (it connects nowhere) and closes it; cached, as
    the driver parses the same options for ``schema()`` and ``streamReader()``.

    Raises:
        ConfigError: librdkafka refused a setting; the message names it.
    """
    from confluent_kafka import Consumer, KafkaException

    cfg = {k: v for k, v in settings if k not in RDKAFKA_OWN}
    if not cfg:
        return
    try:
        consumer = Consumer({"group.id": "acidstream-config-check", "log_level": 0, **cfg})
    except KafkaException as e:
        text = e.args[0].str() if e.args else str(e)
        named = re.search(r'"([^"]+)"', text)
        key = f"{KAFKA_PREFIX}{named[1]}" if named else "kafka.*"
        raise ConfigError(f"option {key!r}: {text} (librdkafka, {OPT_CLIENT}=confluent)") from e
    consumer.close()


def _kafka_setting(suffix: str, value: str) -> tuple[str, Any]:
    from kafka import KafkaConsumer

    key = f"{KAFKA_PREFIX}{suffix}"
    _refuse_forbidden(key, suffix)
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
