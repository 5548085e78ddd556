"""The heartbeat thread of a writer's transaction batches (Hive's ``HiveStreamingConnection-Heartbeat-Thread``)."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable

from acidstream.acid import faults
from acidstream.txn.settings import heartbeat_interval_s
from acidstream.txn.store import TxnStore

__all__ = ["Heartbeater"]

log = logging.getLogger(__name__)


class Heartbeater:
    """Heartbeats a txn range on its own store connection, every half of the metastore's
    txn timeout (:mod:`acidstream.txn.settings`).

    The timeout is read when the heartbeater is made and again at every beat, so an
    ``acidstream config set txn_timeout_s`` reaches running writers within one interval
    (a shorter timeout shortens the next wait; a failed read keeps the last value).
    ``interval_s`` can only make beats more frequent: the interval is the smaller of it
    and half the timeout, so no setting of a client lets the housekeeper take a healthy
    writer for a dead one.

    ``txn_range`` returns the ``(lo, hi)`` of the batch's txns not yet committed or
    aborted (``None`` when there is nothing to heartbeat). When the store reports any of
    them aborted or unknown, ``on_lost`` is called once with those ids; the connection then
    fails its next call with a typed error instead of writing for a dead txn.
    """

    def __init__(
        self,
        store: TxnStore,
        *,
        interval_s: float | None = None,
        txn_range: Callable[[], tuple[int, int] | None],
        on_lost: Callable[[frozenset[int]], None],
        count: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._max_interval = interval_s
        self._interval = self._read_interval(store.txn_timeout_s())
        self._range = txn_range
        self._on_lost = on_lost
        self._count = count
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="acidstream-heartbeat", daemon=True)
        self.beats = 0
        self.last_error: Exception | None = None

    @property
    def interval_s(self) -> float:
        """The current wait between two beats."""
        return self._interval

    def _read_interval(self, timeout_s: float) -> float:
        interval = heartbeat_interval_s(timeout_s)
        return interval if self._max_interval is None else min(interval, self._max_interval)

    def refresh_interval(self) -> None:
        """Re-read the metastore's txn timeout (the thread does it after every beat)."""
        try:
            self._interval = self._read_interval(self._store.txn_timeout_s())
        except Exception as e:  # keep the last value: the beat itself reports store trouble
            log.warning("reading the metastore's txn timeout failed (keeping %gs): %s",
                        self._interval, e)  # fmt: skip

    def start(self) -> None:
        self._thread.start()

    def follow(
        self,
        txn_range: Callable[[], tuple[int, int] | None],
        on_lost: Callable[[frozenset[int]], None],
    ) -> None:
        """Heartbeat another batch from now on (a writer keeps one thread and one store
        connection for all its batches)."""
        self._range, self._on_lost = txn_range, on_lost

    def beat_once(self) -> None:
        """One heartbeat now (the thread's tick; also used by tests)."""
        range_fn, on_lost = self._range, self._on_lost  # one batch, even if it changes now
        rng = range_fn()
        if rng is None:
            return
        faults.point("heartbeat.after_range")
        res = self._store.heartbeat_txn_range(*rng)
        self.beats += 1
        if self._count is not None:
            self._count()
        lost = res.aborted | res.nosuch
        if lost:
            on_lost(lost)

    def _run(self) -> None:
        # Like Hive: a random initial delay so many connections do not beat in step.
        if self._stop.wait(self._interval * 0.75 * random.random()):
            return
        while not self._stop.is_set():
            try:
                self.beat_once()
                self.last_error = None
                self.refresh_interval()
            except Exception as e:  # keep beating: a transient store error must not kill the thread
                self.last_error = e
                log.warning("heartbeat failed (will retry): %s", e)
            if self._stop.wait(self._interval):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._store.close()
