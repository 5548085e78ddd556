"""The housekeeper: Hive's ``AcidHouseKeeperService`` for an acidstream metastore.

Hive runs it inside the metastore server; acidstream has no server, so every long-running
process (an ingest service, a streaming job's driver) can run a :class:`Housekeeper`
thread, and ``acidstream housekeeping`` runs one pass by hand. Passes in several processes
at once are safe: every step is one idempotent store call.

One pass, in Hive's order (see :mod:`acidstream.txn.housekeeping_sql` for what each purge keeps
and why it is safe):

1. abort the open txns whose last heartbeat is older than the metastore's txn timeout
   (the ``txn_timeout_s`` setting, :mod:`acidstream.txn.settings`, read at every pass) (reason
   ``ABORT_TIMEOUT``), releasing their locks, and drop non-txn locks not heartbeaten for
   as long (``performTimeOuts``, :meth:`~acidstream.txn.txn_ops.TxnOps.reap_timed_out`);
2. ``WRITE_SET`` rows no open txn can conflict with (``performWriteSetGC``);
3. write-id mappings of long-committed txns below every open or aborted txn
   (``cleanTxnToWriteIdTable``);
4. duplicate ``COMPLETED_TXN_COMPONENTS`` rows (``removeDuplicateCompletedTxnComponents``);
5. compaction history beyond the retention counts (``purgeCompactionHistory``);
6. records of long-committed txns (``cleanEmptyAbortedAndCommittedTxns``, committed only:
   aborted txns are never removed here, their files may still exist).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from acidstream.acid.errors import ConfigError
from acidstream.txn.housekeeping_sql import DEFAULT_HISTORY_RETENTION_S
from acidstream.txn.settings import SETTINGS, TXN_TIMEOUT_S
from acidstream.txn.store import TxnStore, open_store

__all__ = ["DEFAULT_INTERVAL_S", "Housekeeper", "HousekeepingReport"]

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_INTERVAL_S = 60.0
"""``metastore.acid.housekeeper.interval``: time between two passes."""


@dataclass(frozen=True)
class HousekeepingReport:
    """What one pass did.

    Attributes:
        timed_out_txns: Txns aborted because their heartbeat was older than the timeout.
        txn_timeout_s: The metastore's txn timeout this pass judged by (``None``: it
            could not be read; see ``errors``).
        write_set_rows: ``WRITE_SET`` rows removed.
        txn_to_write_id_rows: ``TXN_TO_WRITE_ID`` rows removed.
        completed_component_rows: ``COMPLETED_TXN_COMPONENTS`` rows removed.
        compaction_history_rows: ``COMPLETED_COMPACTIONS`` rows removed.
        committed_txn_rows: ``TXNS`` rows of committed txns removed.
        errors: ``step: message`` of each step that failed (the others still ran).
        duration_s: Wall time of the pass.
    """

    timed_out_txns: tuple[int, ...] = ()
    txn_timeout_s: float | None = None
    write_set_rows: int = 0
    txn_to_write_id_rows: int = 0
    completed_component_rows: int = 0
    compaction_history_rows: int = 0
    committed_txn_rows: int = 0
    errors: tuple[str, ...] = ()
    duration_s: float = 0.0

    def rows(self) -> list[tuple[str, str]]:
        """``(step, result)`` pairs in pass order, for a summary table."""
        txns = ", ".join(str(t) for t in self.timed_out_txns)
        return [
            (
                "timed-out txns aborted",
                f"{len(self.timed_out_txns)}" + (f" (txnid {txns})" if txns else ""),
            ),
            ("WRITE_SET rows purged", str(self.write_set_rows)),
            ("TXN_TO_WRITE_ID rows purged", str(self.txn_to_write_id_rows)),
            ("COMPLETED_TXN_COMPONENTS rows purged", str(self.completed_component_rows)),
            ("COMPLETED_COMPACTIONS rows purged", str(self.compaction_history_rows)),
            ("committed TXNS rows purged", str(self.committed_txn_rows)),
        ]


class Housekeeper:
    """Runs housekeeping passes over one metastore, once or on a daemon thread.

    Args:
        store_url: The metastore (``sqlite:///...`` or ``postgresql://...``).
        interval_s: Time between two passes of the thread.
        history_retention_s: Committed txns' records are kept this long (default: 300 s);
            each pass keeps them at least the metastore's txn timeout, so a heartbeat
            racing a commit always finds the txn's record (and reports it committed, not
            unknown).
        clock: Seconds since the epoch (tests inject one; the thread waits in real time).
        on_report: Called with each pass's report, on the thread that ran the pass.

    The abort threshold is not an option: it is the metastore's ``txn_timeout_s``
    setting, read at every pass, the same value every writer heartbeats from
    (``acidstream config set txn_timeout_s S``).

    Raises:
        ConfigError: a non-positive interval or retention.
    """

    def __init__(
        self,
        store_url: str,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        history_retention_s: float | None = None,
        clock: Callable[[], float] = time.time,
        on_report: Callable[[HousekeepingReport], None] | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ConfigError(f"housekeeping interval_s must be > 0, got {interval_s}")
        if history_retention_s is None:
            history_retention_s = DEFAULT_HISTORY_RETENTION_S
        if history_retention_s <= 0:
            raise ConfigError(
                f"housekeeping history_retention_s must be > 0, got {history_retention_s}"
            )
        self.store_url = store_url
        self.interval_s = interval_s
        self.history_retention_s = history_retention_s
        self._clock = clock
        self._on_report = on_report
        self._store: TxnStore | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0
        self.last_error: Exception | None = None

    def _open(self) -> TxnStore:
        if self._store is None:
            self._store = open_store(self.store_url, clock=self._clock)
        return self._store

    def run_once(self) -> HousekeepingReport:
        """One pass over the metastore; a failing step is reported and the others still run.

        Raises:
            AcidStreamError: the metastore cannot be opened.
        """
        with self._lock:  # one pass at a time per housekeeper (the thread and a caller)
            store = self._open()
            start = time.monotonic()
            errors: list[str] = []
            none: tuple[int, ...] = ()
            timeout: float | None = _step(errors, "read txn_timeout_s", store.txn_timeout_s, None)
            # Unknown timeout: the reap reads it itself (or fails), and the purges keep
            # records as long as the longest timeout could ask.
            longest = SETTINGS[TXN_TIMEOUT_S].maximum if timeout is None else timeout
            retention = max(self.history_retention_s, longest)
            timed_out = _step(
                errors,
                "abort timed-out txns",
                lambda: tuple(store.reap_timed_out(timeout_s=timeout)),
                none,
            )
            report = HousekeepingReport(
                timed_out_txns=timed_out,
                txn_timeout_s=timeout,
                write_set_rows=_step(errors, "WRITE_SET", store.purge_write_set, 0),
                txn_to_write_id_rows=_step(
                    errors,
                    "TXN_TO_WRITE_ID",
                    lambda: store.purge_txn_to_write_id(retention_s=retention),
                    0,
                ),
                completed_component_rows=_step(
                    errors, "COMPLETED_TXN_COMPONENTS", store.purge_completed_components, 0
                ),
                compaction_history_rows=_step(
                    errors, "COMPLETED_COMPACTIONS", store.purge_compaction_history, 0
                ),
                committed_txn_rows=_step(
                    errors,
                    "committed TXNS",
                    lambda: store.purge_committed_txns(retention_s=retention),
                    0,
                ),
                errors=tuple(errors),
                duration_s=time.monotonic() - start,
            )
            self.passes += 1
        if report.timed_out_txns:
            log.info("housekeeping aborted timed-out txns %s", list(report.timed_out_txns))
        for e in report.errors:
            log.warning("housekeeping step failed: %s", e)
        if self._on_report is not None:
            self._on_report(report)
        return report

    # -- the thread -------------------------------------------------------------------------
    def start(self) -> None:
        """Run a pass now and then every ``interval_s`` on a daemon thread, on this
        housekeeper's own store connection, until :meth:`stop`."""
        if self._thread is not None:
            raise ConfigError("this housekeeper is already started")
        self._thread = threading.Thread(
            target=self._run, name="acidstream-housekeeper", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
                self.last_error = None
            except Exception as e:  # e.g. the metastore is down: try again next interval
                self.last_error = e
                log.warning("housekeeping pass failed (will retry): %s", e)
            if self._stop.wait(self.interval_s):
                return

    def stop(self, *, timeout_s: float = 30.0) -> None:
        """Stop the thread (waiting for a running pass) and close the store connection."""
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=timeout_s)
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def __enter__(self) -> Housekeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _step(errors: list[str], name: str, fn: Callable[[], T], default: T) -> T:
    """Run one step of a pass; a failure is recorded and the pass goes on."""
    try:
        return fn()
    except Exception as e:  # one broken step must not stop the others or the thread
        errors.append(f"{name}: {type(e).__name__}: {e}")
        return default
