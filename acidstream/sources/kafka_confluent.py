"""The ``acidkafka`` source's confluent-kafka (librdkafka) client: driver lookups and
executor reads with the same semantics as the kafka-python ones in ``kafka.py``.

Chosen by ``kafka.client`` (``auto``: this one when confluent-kafka is importable).
librdkafka consumes here about 2.4x faster than kafka-python (records are decoded in C,
fetched ahead by its own threads), which is what the Kafka job's throughput is bound by.

Where the code runs: :class:`ConfluentDriverClients` in the driver's streaming runner
worker (its consumer is kept between triggers, never pickled); :func:`read_range` in an
executor task. Offsets are never committed to Kafka: a consumer here has a group id only
because librdkafka requires one, and ``assign()``s partitions itself.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from acidstream.sources.errors import SourceError
from acidstream.sources.kafka_common import (
    KafkaInputPartition,
    arrow_batch,
    retrying,
    skip_to_log_start,
)
from acidstream.sources.kafka_consumers import POOL, consumer_key
from acidstream.sources.kafka_options import (
    _TP,
    OPT_POLL_TIMEOUT_MS,
    RDKAFKA_OWN,
    KafkaSourceOptions,
)

__all__ = ["ConfluentDriverClients", "read_range"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# kafka-python's defaults, so that both clients wait alike when the options say nothing.
_DEFAULT_LOOKUP_TIMEOUT_MS = 10_000  # kafka-python's bootstrap_timeout_ms, as the source sets it
_DEFAULT_MAX_POLL_RECORDS = 10_000


def _own(opts: KafkaSourceOptions, name: str, default: int) -> int:
    return int(dict(opts.consumer_config).get(name, default))


def lookup_timeout_s(opts: KafkaSourceOptions) -> float:
    """How long one metadata or offset lookup may take (``kafka.bootstrap.timeout.ms``)."""
    return _own(opts, "bootstrap.timeout.ms", _DEFAULT_LOOKUP_TIMEOUT_MS) / 1000


def new_consumer(opts: KafkaSourceOptions, **overrides: str) -> Any:
    """A librdkafka consumer with the source's fixed settings and the user's ``kafka.*``.

    Offsets stay with Spark: no auto commit, no offset store; ``auto.offset.reset=error``
    makes an out-of-range position an error event instead of a silent jump, so data
    loss is seen and ``failOnDataLoss`` decides; the end of a partition is an event
    (``_PARTITION_EOF``), which moves the read position over offsets that never show
    up as records (transaction markers, compacted gaps), as kafka-python's position does.
    """
    from confluent_kafka import Consumer

    cfg: dict[str, str] = {
        "bootstrap.servers": opts.bootstrap,
        # kafka-python reads uncommitted records by default; librdkafka reads committed.
        "isolation.level": "read_uncommitted",
        "log_level": "3",
    }
    cfg.update({k: str(v) for k, v in opts.consumer_config if k not in RDKAFKA_OWN})
    cfg.update(
        {
            "group.id": f"acidstream-source-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "auto.offset.reset": "error",
            "enable.partition.eof": "true",
            "allow.auto.create.topics": "false",
        }
    )
    cfg.update(overrides)
    return Consumer(cfg)


class ConfluentDriverClients:
    """The driver's librdkafka consumer for metadata and offsets, kept between triggers
    and rebuilt after an error (the same surface as ``kafka.py``'s kafka-python one)."""

    def __init__(self, opts: KafkaSourceOptions) -> None:
        self.opts = opts
        self._consumer: Any = None

    def _call(self, what: str, fn: Callable[[Any], T]) -> T:
        def attempt() -> T:
            try:
                if self._consumer is None:
                    self._consumer = new_consumer(self.opts)
                return fn(self._consumer)
            except Exception:
                self.close()  # a failed client may hold broken state
                raise

        return retrying(self.opts, what, attempt)

    def partitions(self) -> list[_TP]:
        """Current partitions of the subscribed topics (fresh metadata).

        Raises:
            SourceError: A subscribed topic does not exist.
        """
        from confluent_kafka import KafkaError, KafkaException

        timeout = lookup_timeout_s(self.opts)

        def lookup(consumer: Any) -> list[_TP]:
            # All topics, not one by name: a request naming a topic may create it on a
            # broker that auto-creates topics.
            topics = consumer.list_topics(timeout=timeout).topics
            out: list[_TP] = []
            for name in self.opts.topics:
                meta = topics.get(name)
                err = None if meta is None else meta.error
                if meta is None or (
                    err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
                ):
                    raise SourceError(
                        f"topic {name!r} does not exist on Kafka {self.opts.bootstrap}"
                    )
                if err is not None:
                    raise KafkaException(err)
                out.extend((name, p) for p in meta.partitions)
            return sorted(out)

        return list(self._call("topic metadata lookup", lookup))

    def earliest(self, tps: Sequence[_TP]) -> dict[_TP, int]:
        """Log-start offset of each partition."""
        return self._watermarks("earliest", tps, 0)

    def latest(self, tps: Sequence[_TP]) -> dict[_TP, int]:
        """End offset of each partition (per ``endOffsetsFrom``)."""
        listed = self._watermarks("latest", tps, 1)
        if self.opts.end_offsets_from == "fetch" and tps:
            return retrying(
                self.opts, "high-watermark fetch", lambda: self._high_watermarks(listed)
            )
        return listed

    def _watermarks(self, which: str, tps: Sequence[_TP], side: int) -> dict[_TP, int]:
        from confluent_kafka import TopicPartition

        timeout = lookup_timeout_s(self.opts)

        def lookup(consumer: Any) -> dict[_TP, int]:
            # A ListOffsets request per partition (cached=False), as kafka-python's
            # beginning_offsets / end_offsets ask the broker.
            return {
                (t, p): int(
                    consumer.get_watermark_offsets(
                        TopicPartition(t, p), timeout=timeout, cached=False
                    )[side]
                )
                for t, p in tps
            }

        return dict(self._call(f"{which} offset lookup", lookup)) if tps else {}

    def _high_watermarks(self, listed: Mapping[_TP, int]) -> dict[_TP, int]:
        """End offsets from a Fetch response's high watermark, ``max(listed, hw)``.

        A consumer of its own, assigned at the listed ends (valid positions even when
        the broker under-reports them): librdkafka caches the high watermark of every
        fetch response, and a fresh consumer's cache holds only this probe's.
        """
        from confluent_kafka import OFFSET_INVALID, TopicPartition

        probe = new_consumer(self.opts, **{"fetch.wait.max.ms": "10"})
        try:
            parts = [TopicPartition(t, p, off) for (t, p), off in listed.items()]
            probe.assign(parts)
            deadline = time.monotonic() + lookup_timeout_s(self.opts)
            seen: dict[_TP, int] = {}
            while len(seen) < len(parts):
                if time.monotonic() > deadline:
                    raise TimeoutError("no fetch response carried a high watermark")
                probe.consume(num_messages=len(parts), timeout=0.05)
                for tp in parts:
                    hw = probe.get_watermark_offsets(tp, cached=True)[1]
                    if hw != OFFSET_INVALID and hw >= 0:
                        seen[(tp.topic, tp.partition)] = int(hw)
            return {tp: max(off, seen[tp]) for tp, off in listed.items()}
        finally:
            probe.close()

    def close(self) -> None:
        """Close the consumer (idempotent)."""
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception as e:  # closing is best effort
                log.debug("closing Kafka client failed: %s", e)
        self._consumer = None


def read_range(
    opts: KafkaSourceOptions, arrow_schema: Any, part: KafkaInputPartition
) -> Iterator[Any]:
    """Executor side: Arrow batches of exactly ``[start, end)`` of one partition.

    The consumer comes from the worker's pool (:mod:`kafka_consumers`) and goes back to
    it after a read that ended well, with the offset it delivers next: the partition's
    next range normally starts there, and what librdkafka fetched ahead serves it.

    Raises:
        DataLossError: Records in the range are gone (``failOnDataLoss``).
        SourceError: The broker stopped answering for ``pollTimeoutMs``, or librdkafka
            reported a fatal error.
    """
    from confluent_kafka import KafkaError, TopicPartition

    where = f"{part.topic}/{part.partition} [{part.start}, {part.end})"
    lease = POOL.lease(
        consumer_key(opts, part),
        part.start,
        lambda: retrying(opts, "consumer bootstrap", lambda: new_consumer(opts)),
        lambda c: c.close(),
    )
    consumer = lease.consumer
    this = TopicPartition(part.topic, part.partition)
    if lease.position is not None:
        # A pooled consumer was paused when given back (librdkafka would otherwise fetch
        # ahead in the background for as long as it sits idle, up to
        # queued.min.messages, at an offset the next task may not want); it resumes at
        # the offset it delivers next.
        consumer.resume([this])
    timeout = lookup_timeout_s(opts)
    per_poll = _own(opts, "max.poll.records", min(opts.arrow_batch_rows, _DEFAULT_MAX_POLL_RECORDS))
    out_of_range = (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET)
    done = False
    try:

        def log_start() -> int:
            tp = TopicPartition(part.topic, part.partition)
            return retrying(
                opts,
                "earliest offset lookup",
                lambda: int(consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)[0]),
            )

        # No log-start lookup up front: a fetch below the log start is an
        # out-of-range error event (auto.offset.reset=error), and only then is it looked up.
        position = part.start
        # The offset the consumer delivers next (what goes back to the pool with it):
        # past the last message or end-of-partition event it delivered.
        delivered = lease.position
        unsettled = False
        if position < part.end and delivered != position:
            consumer.assign([TopicPartition(part.topic, part.partition, position)])
            delivered = position
        cols: tuple[list[Any], ...] = ([], [], [], [])  # key, value, offset, timestamp(us)
        ttypes: list[int | None] = []
        last_progress = time.monotonic()
        while position < part.end:
            before = position
            # consume() returns when it has num_messages or at the timeout: ask for no
            # more than the range still holds (the end-of-partition event counts as one).
            msgs = consumer.consume(num_messages=min(per_poll, part.end - position), timeout=0.5)
            recs = msgs
            if msgs and any(m.error() is not None for m in msgs):
                recs = []
                for m in msgs:
                    err = m.error()
                    if err is None:
                        recs.append(m)
                    elif err.code() == KafkaError._PARTITION_EOF:
                        # Everything below the partition's end has been delivered: offsets
                        # up to it without a record (markers, compaction) are read.
                        position = max(position, int(m.offset()))
                        delivered = max(delivered or 0, int(m.offset()))
                    elif err.code() in out_of_range:
                        position = skip_to_log_start(opts, part, position, log_start())
                        if position < part.end:
                            consumer.assign([TopicPartition(part.topic, part.partition, position)])
                            delivered = position
                        else:
                            unsettled = True  # its fetch stopped at the out-of-range offset
                    elif err.fatal():
                        raise SourceError(
                            f"reading {where} from Kafka {opts.bootstrap}: {err.str()}"
                        )
                    else:  # librdkafka retries transient errors itself
                        log.info("Kafka %s while reading %s: %s", opts.bootstrap, where, err.str())
            if recs:
                delivered = max(delivered or 0, recs[-1].offset() + 1)
            if recs and (recs[0].offset() < position or recs[-1].offset() >= part.end):
                # Outside [position, end): records before a re-assignment, or past the end.
                recs = [m for m in recs if position <= m.offset() < part.end]
            if recs:
                # Column-wise comprehensions: this loop is the source's hot path.
                stamps = [m.timestamp() for m in recs]
                cols[0].extend([m.key() for m in recs])
                cols[1].extend([m.value() for m in recs])
                cols[2].extend([m.offset() for m in recs])
                # (type, ms): librdkafka's types are 1 create, 2 log-append, 0 none;
                # Spark's (and kafka-python's) are 0 and 1.
                cols[3].extend([s[1] * 1000 if s[0] else None for s in stamps])
                ttypes.extend([s[0] - 1 if s[0] else None for s in stamps])
                position = max(position, recs[-1].offset() + 1)
            if position > before:
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
        done = delivered is not None and not unsettled
    finally:
        if done and delivered is not None and _paused(consumer, this):
            POOL.give_back(lease, delivered)
        else:
            POOL.discard(lease)


def _paused(consumer: Any, tp: Any) -> bool:
    """Pause ``tp``'s fetching on a consumer going back to the pool; False (discard it)
    when librdkafka refuses."""
    try:
        consumer.pause([tp])
    except Exception as e:  # the consumer's state is unknown: it is not pooled
        log.info("pausing a Kafka consumer for the pool failed: %s", e)
        return False
    return True
