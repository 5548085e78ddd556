"""Executor side: Kafka consumers kept across micro-batches in a Python worker.

Spark reuses its Python workers (``spark.python.worker.reuse``, on by default), and a
streaming query reads the same topic-partitions batch after batch. Opening a consumer
per task costs a bootstrap, a metadata round trip and an empty first fetch before the
first record (0.5-1.2 s a task, measured on the CDC benchmark); Spark's own Kafka
connector avoids it with its ``KafkaDataConsumer`` cache, and this module is the same
idea for both of the ``acidkafka`` source's clients (``kafka.py``, ``kafka_confluent.py``).

A read *leases* a consumer for its topic-partition (:meth:`ConsumerPool.lease`) and gives
it back when its range is done (:meth:`ConsumerPool.give_back`) together with the offset
the consumer delivers next. The next read of that partition, normally the next
micro-batch's range, which starts where the last one ended, finds the consumer there and
reads on without ``assign``/``seek``: what the client fetched ahead serves it.

Rules:

* One task at a time: a leased consumer is out of the pool; a task that finds none idle
  opens its own (two concurrent tasks on one partition, with ``minPartitions``).
* A read that failed, or that its task abandoned, closes its consumer
  (:meth:`ConsumerPool.discard`): its state is unknown.
* At most :data:`DEFAULT_CAPACITY` idle consumers per worker (the least recently used
  go first); an idle one is closed after :data:`DEFAULT_IDLE_TIMEOUT_S` by a daemon
  thread, and all are closed at interpreter exit.
* The key is everything that shapes a consumer: the client, the bootstrap servers, the
  ``kafka.*`` settings, the read's own settings, and the topic-partition.

Everything here runs in an executor's Python worker; nothing is pickled.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acidstream.sources.kafka_common import KafkaInputPartition
    from acidstream.sources.kafka_options import KafkaSourceOptions

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_IDLE_TIMEOUT_S",
    "POOL",
    "ConsumerPool",
    "Lease",
    "PoolStats",
    "consumer_key",
]

log = logging.getLogger(__name__)

DEFAULT_CAPACITY = 32
# Spark's spark.kafka.consumer.cache.timeout default (5 min).
DEFAULT_IDLE_TIMEOUT_S = 300.0


@dataclass
class Lease:
    """A consumer out of the pool, held by one read (executor side).

    Attributes:
        key: The pool key (see :meth:`ConsumerPool.lease`).
        consumer: The client's consumer, assigned to the key's topic-partition when
            ``position`` is not None.
        position: The offset it delivers next, or None for a new consumer (the read
            must ``assign``/``seek`` it).
        reused: Whether it came from the pool.
    """

    key: str
    consumer: Any
    position: int | None
    reused: bool
    close: Callable[[Any], None]


@dataclass
class PoolStats:
    """Counters of one pool (per Python worker): how often reads found a consumer."""

    created: int = 0
    reused: int = 0  # leases served from the pool
    at_position: int = 0  # of those, at the range's start (no seek)
    discarded: int = 0  # closed after an error or an abandoned read
    expired: int = 0  # closed idle (timeout, capacity, exit)


@dataclass
class _Idle:
    lease: Lease
    since: float = field(default_factory=time.monotonic)


class ConsumerPool:
    """Idle consumers of one Python worker, by key (executor side; thread-safe)."""

    def __init__(
        self, capacity: int = DEFAULT_CAPACITY, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    ) -> None:
        self.capacity = capacity
        self.idle_timeout_s = idle_timeout_s
        self.stats = PoolStats()
        self._idle: list[_Idle] = []  # oldest first
        self._cond = threading.Condition()
        self._reaper: threading.Thread | None = None
        self._closed = False

    def lease(
        self,
        key: str,
        start: int,
        create: Callable[[], Any],
        close: Callable[[Any], None],
    ) -> Lease:
        """An idle consumer for ``key`` (one at ``start`` if there is one), else a new one.

        ``create()`` opens a consumer (it may raise; nothing is leased then), ``close``
        closes one; both are the client's.
        """
        with self._cond:
            mine = [i for i in self._idle if i.lease.key == key]
            pick = next((i for i in mine if i.lease.position == start), None)
            if pick is None and mine:
                pick = mine[-1]  # the most recent: its connection is the freshest
            if pick is not None:
                self._idle.remove(pick)
                self.stats.reused += 1
                if pick.lease.position == start:
                    self.stats.at_position += 1
                pick.lease.reused = True
                return pick.lease
        consumer = create()
        with self._cond:
            self.stats.created += 1
        return Lease(key=key, consumer=consumer, position=None, reused=False, close=close)

    def give_back(self, lease: Lease, position: int) -> None:
        """Return a consumer whose read ended well; it delivers ``position`` next."""
        _trace(self, lease, "give_back")
        lease.position = position
        evicted: list[Lease] = []
        with self._cond:
            if self._closed:
                evicted.append(lease)
            else:
                self._idle.append(_Idle(lease))
                while len(self._idle) > self.capacity:
                    evicted.append(self._idle.pop(0).lease)
                self.stats.expired += len(evicted)
                self._ensure_reaper()
                self._cond.notify_all()
        for old in evicted:
            _close(old)

    def discard(self, lease: Lease) -> None:
        """Close a consumer whose read failed or was abandoned (never pooled again)."""
        with self._cond:
            self.stats.discarded += 1
        _trace(self, lease, "discard")
        _close(lease)

    def idle(self, key: str | None = None) -> int:
        """How many consumers wait in the pool (for ``key``, or in all)."""
        with self._cond:
            return sum(1 for i in self._idle if key is None or i.lease.key == key)

    def close_all(self) -> None:
        """Close every idle consumer (leased ones are closed by their reads)."""
        with self._cond:
            gone = [i.lease for i in self._idle]
            self._idle.clear()
            self.stats.expired += len(gone)
            self._cond.notify_all()
        for lease in gone:
            _close(lease)

    def shutdown(self) -> None:
        """At interpreter exit: close idle consumers; later give-backs close theirs."""
        with self._cond:
            self._closed = True
        self.close_all()

    def _ensure_reaper(self) -> None:
        # Caller holds the lock. The thread lives while consumers are idle.
        if self._reaper is None or not self._reaper.is_alive():
            self._reaper = threading.Thread(
                target=self._reap, name="acidstream-kafka-consumer-reaper", daemon=True
            )
            self._reaper.start()

    def _reap(self) -> None:
        while True:
            with self._cond:
                if not self._idle:
                    self._reaper = None
                    return
                now = time.monotonic()
                expired = [i for i in self._idle if now - i.since >= self.idle_timeout_s]
                for i in expired:
                    self._idle.remove(i)
                self.stats.expired += len(expired)
                if not expired:
                    oldest = min(i.since for i in self._idle)
                    # Woken early by give_back/close_all; else when the oldest expires.
                    self._cond.wait(max(oldest + self.idle_timeout_s - now, 0.01))
            for i in expired:
                _close(i.lease)

    def _after_fork_in_child(self) -> None:
        # A forked child shares the parent's sockets and has none of librdkafka's
        # threads: closing (or freeing) the parent's consumers here could hang or cut
        # the parent's connections. Keep them referenced, unused, and start empty.
        _FORK_ORPHANS.extend(i.lease for i in self._idle)
        self._idle = []
        self._cond = threading.Condition()
        self._reaper = None


def consumer_key(opts: KafkaSourceOptions, part: KafkaInputPartition, **own: Any) -> str:
    """The pool key of a read's consumer: what shapes the consumer (the client, the
    servers, ``kafka.*``, the read's own settings ``own``) and its topic-partition."""
    parts = (opts.client, opts.bootstrap, opts.consumer_config, sorted(own.items()))
    return repr((*parts, part.topic, part.partition))


def _trace(pool: ConsumerPool, lease: Lease, what: str) -> None:
    # Reuse inside Spark's Python workers, whose counters a driver cannot see: a DEBUG
    # line per read (the worker's log; no setting of its own, see acid/faults.py).
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "kafka consumer pool: pid %d, %s, lease reused %s, %s",
            os.getpid(), what, lease.reused, vars(pool.stats),
        )  # fmt: skip


def _close(lease: Lease) -> None:
    try:
        lease.close(lease.consumer)
    except Exception as e:  # closing is best effort
        log.debug("closing a Kafka consumer failed: %s", e)


_FORK_ORPHANS: list[Lease] = []

POOL = ConsumerPool()
"""The Python worker's pool, shared by both clients' reads."""

atexit.register(POOL.shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=POOL._after_fork_in_child)
