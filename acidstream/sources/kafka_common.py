"""What both Kafka clients of the ``acidkafka`` source share (``acidstream.sources.kafka``).

The source reads with confluent-kafka (``kafka_confluent.py``) or kafka-python
(``kafka.py``); each client's module holds only its calls. The rest is here, once: the
input partition (an offset range), retries of idempotent lookups and what counts as a
retriable error for either client, the data-loss decision of an executor whose range
starts below the log start, and the Arrow batch handed to Spark.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from pyspark.sql.datasource import InputPartition
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from acidstream.acid.errors import ConfigError
from acidstream.sources.errors import DataLossError, SourceError
from acidstream.sources.kafka_options import OPT_FAIL_ON_DATA_LOSS, KafkaSourceOptions

__all__ = [
    "KafkaInputPartition",
    "arrow_batch",
    "gc_paused",
    "is_retriable",
    "retrying",
    "skip_to_log_start",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

# librdkafka's local error codes (negative) for a broker that is down, unreachable or
# slow: a lookup may succeed when tried again. KafkaError.retriable() is false for them.
_RDKAFKA_TRANSIENT = ("_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_WAIT_COORD")


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """One topic-partition's offset range ``[start, end)`` (driver -> executor, picklable)."""

    topic: str
    partition: int
    start: int
    end: int


def is_retriable(e: BaseException) -> bool:
    """Whether a lookup that raised ``e`` may succeed when repeated (either client)."""
    if isinstance(e, ConnectionError | TimeoutError):
        return True
    import sys

    # Only a client this process imported can have raised its error type.
    if "confluent_kafka" in sys.modules:
        from confluent_kafka import KafkaError, KafkaException

        if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
            err = e.args[0]
            return bool(err.retriable()) or err.name() in _RDKAFKA_TRANSIENT
    if "kafka" in sys.modules:
        from kafka import errors

        # kafka-python 2 has NoBrokersAvailable; 3 raises KafkaTimeoutError instead.
        no_brokers = getattr(errors, "NoBrokersAvailable", None)
        if no_brokers is not None and isinstance(e, no_brokers):
            return True
        return isinstance(e, errors.KafkaError) and bool(getattr(e, "retriable", False))
    return False


def retrying(opts: KafkaSourceOptions, what: str, fn: Callable[[], T]) -> T:
    """Run an idempotent lookup ``fn()`` with capped exponential back-off + jitter.

    Only metadata and offset lookups (and building a consumer) go through here:
    repeating them has no effect on the broker. Errors become :class:`SourceError`.
    """
    attempts = Retrying(
        stop=stop_after_attempt(opts.num_retries),
        # Jitter proportional to the interval (tenacity's default is a flat 1 s).
        wait=wait_exponential_jitter(
            multiplier=opts.retry_interval_ms / 1000, jitter=opts.retry_interval_ms / 1000, max=2.0
        ),
        retry=retry_if_exception(is_retriable),
        reraise=True,
    )
    try:
        return attempts(fn)
    except (SourceError, ConfigError):
        raise
    except RetryError as e:  # pragma: no cover - reraise=True makes this rare
        raise SourceError(f"{what} failed on {opts.bootstrap}: {e}") from e
    except Exception as e:
        tried = f" after {opts.num_retries} attempt(s)" if is_retriable(e) else ""
        raise SourceError(
            f"{what} failed on Kafka {opts.bootstrap}{tried}: {type(e).__name__}: {e}"
        ) from e


def skip_to_log_start(
    opts: KafkaSourceOptions, part: KafkaInputPartition, position: int, log_start: int
) -> int:
    """Executor side: where to read from when the log of ``part`` starts at ``log_start``.

    Records below the log start are gone: :class:`DataLossError` with
    ``failOnDataLoss=true``, else a warning and ``log_start``.
    """
    if log_start <= position:
        return position
    where = f"{part.topic}/{part.partition} [{part.start}, {part.end})"
    msg = f"offsets [{position}, {min(log_start, part.end)}) of {where} are gone"
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"{msg} (log now starts at {log_start}). "
            f"Set {OPT_FAIL_ON_DATA_LOSS}=false to continue without them."
        )
    log.warning("%s; skipping to %d (%s=false)", msg, log_start, OPT_FAIL_ON_DATA_LOSS)
    return log_start


_END: Any = object()


def gc_paused(batches: Iterator[T]) -> Generator[T, None, None]:
    """Executor side: ``batches`` with Python's cyclic garbage collector paused while
    each batch is produced; between batches (while Spark sends one on) it is as the
    caller had it.

    Why: a read allocates a few tracked objects per record (the client's messages, their
    timestamp tuples, the column lists). Every 700 of them start a collection and every
    tenth of those an older one, up to a full pass over every object of the worker
    (pyspark, pyarrow, and in a reused worker the sink's modules): about half of a
    confluent-kafka read's CPU (83,334 records, paired runs: 3.7-4.5 us a record before,
    2.1-2.7 with the pause). The objects of a read are freed by their reference counts; a
    cycle made meanwhile (an exception's traceback) waits for the next collection."""
    while True:
        enabled = gc.isenabled()
        gc.disable()
        try:
            batch = next(batches, _END)
        finally:
            if enabled:
                gc.enable()
        if batch is _END:
            return
        try:
            yield batch
        except BaseException:
            close = getattr(batches, "close", None)
            if close is not None:
                close()  # a read its task stopped (or failed) closes its consumer now
            raise


def arrow_batch(
    schema: Any,
    part: KafkaInputPartition,
    cols: tuple[list[Any], ...],
    ttypes: list[int | None],
) -> Any:
    """Executor side: one Arrow record batch of Spark's Kafka schema.

    ``cols`` are the keys, values, offsets and timestamps (microseconds), ``ttypes`` the
    timestamp types (0 create time, 1 log-append time) of the records read.
    """
    import pyarrow as pa

    n = len(ttypes)
    keys = cols[0]
    arrays = [
        # Events without keys are the usual case: no list of n Nones converted.
        pa.nulls(n, pa.binary()) if keys.count(None) == n else pa.array(keys, pa.binary()),
        pa.array(cols[1], pa.binary()),
        pa.repeat(pa.scalar(part.topic, pa.string()), n),  # one range: one topic-partition
        pa.repeat(pa.scalar(part.partition, pa.int32()), n),
        pa.array(cols[2], pa.int64()),
        pa.array(cols[3], pa.timestamp("us", tz="UTC")),
        pa.array(ttypes, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
