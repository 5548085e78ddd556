"""The compactor service: initiator, workers and cleaner over one metastore.

:class:`Compactor` runs them either as one synchronous pass (:meth:`Compactor.run_once`,
for tests, cron and the CLI's ``--once``) or as background threads
(:meth:`Compactor.start` / :meth:`Compactor.stop`) inside any process, e.g. next to a
streaming job. On start it first recovers requests left ``working`` by a worker that
died (Hive's ``revokeFromLocalWorkers`` / ``revokeTimedoutWorkers``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from acidstream.acid.errors import AcidStreamError
from acidstream.acid.storage import Storage
from acidstream.compaction.cleaner import Cleaner, CleanOutcome
from acidstream.compaction.config import CompactorConfig
from acidstream.compaction.initiator import Initiation, Initiator
from acidstream.compaction.worker import CompactionOutcome, Worker
from acidstream.txn.compaction_sql import CompactionQueue, CompactionRecord
from acidstream.txn.store import TxnState, TxnStore

__all__ = ["Compactor", "PassReport"]

log = logging.getLogger(__name__)


@dataclass
class PassReport:
    """What one pass did."""

    recovered: list[str] = field(default_factory=list)
    initiated: list[Initiation] = field(default_factory=list)
    compactions: list[CompactionOutcome] = field(default_factory=list)
    cleaned: list[CleanOutcome] = field(default_factory=list)

    def lines(self) -> list[str]:
        """One summary line per event (the daemon prints these); failed cleanings are
        warnings, not events (``Compactor``'s ``on_warning``)."""
        out = [f"recovered {r}" for r in self.recovered]
        out += [i.summary() for i in self.initiated if i.id is not None]
        out += [c.summary() for c in self.compactions]
        out += [c.summary() for c in self.cleaned if c.error is None]
        return out

    def failed(self) -> list[CompactionOutcome | CleanOutcome]:
        """The compactions and cleanings of this pass that failed (``error`` set)."""
        return [
            *(c for c in self.compactions if c.error is not None),
            *(c for c in self.cleaned if c.error is not None),
        ]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner(worker_id: str | None) -> tuple[str, int] | None:
    """``(host, pid)`` of a ``host-pid-role-thread`` worker id."""
    if not worker_id:
        return None
    parts = worker_id.rsplit("-", 3)
    if len(parts) != 4 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


class Compactor:
    """Initiator + workers + cleaner.

    Args:
        store: The metastore (shared by the loops; its calls are serialised).
        config: Thresholds, intervals, ORC options.
        storage: Filesystem of the tables; derived from each location when omitted.
        initiator: Run the initiator (queue compactions automatically).
        cleaner: Run the cleaner.
        workers: Worker threads in :meth:`start` (``run_once`` drains the queue in-line).
        clock: Seconds since the epoch (inject the store's clock in tests).
        on_event: Called with each summary line (default: logged at INFO).
        on_warning: Called with the line of each cleaning that failed (it is retried on
            the next pass); default: logged as a WARNING, as a daemon reports it. A
            command that reports in one error line passes its own.
        engine: ``local`` or ``spark`` (major compactions as Spark tasks, one per bucket).
        spark: The SparkSession for ``engine="spark"``.
    """

    def __init__(
        self,
        store: TxnStore,
        *,
        config: CompactorConfig | None = None,
        storage: Storage | None = None,
        initiator: bool = True,
        cleaner: bool = True,
        workers: int = 1,
        clock: Callable[[], float] = time.time,
        on_event: Callable[[str], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
        engine: str = "local",
        spark: Any = None,
    ) -> None:
        self.store = store
        self.config = config or CompactorConfig()
        self.queue = CompactionQueue(store, clock=clock)
        self._clock = clock
        self.initiator = (
            Initiator(store, queue=self.queue, config=self.config, storage=storage, clock=clock)
            if initiator
            else None
        )
        self.cleaner = (
            Cleaner(
                store,
                queue=self.queue,
                storage=storage,
                forget_after_s=self.config.forget_aborted_after_s,
                clock=clock,
            )
            if cleaner
            else None
        )
        self._workers = [
            Worker(
                store,
                queue=self.queue,
                config=self.config,
                storage=storage,
                engine=engine,
                spark=spark,
                clock=clock,
            )
            for _ in range(max(workers, 1))
        ]
        self._on_event = on_event or (lambda line: log.info("%s", line))
        self._on_warning = on_warning or (lambda line: log.warning("%s", line))
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # ---------------------------------------------------------------------------- recovery
    def recover(self) -> list[str]:
        """Fix requests left ``working`` by a dead worker: a committed compaction goes on to
        the cleaner, anything else goes back to ``initiated`` (its txn aborted)."""
        out: list[str] = []
        me = socket.gethostname()
        now_ms = self._clock() * 1000
        for rec in self.queue.working():
            owner = _owner(rec.worker_id)
            if owner is not None and owner[0] == me and owner[1] == os.getpid():
                continue  # one of our own threads is on it
            dead = owner is not None and owner[0] == me and not _pid_alive(owner[1])
            stale = rec.start_ms is not None and (
                now_ms - rec.start_ms > self.config.worker_timeout_s * 1000
            )
            state = self.store.txn_state(rec.txn_id) if rec.txn_id else None
            if state is TxnState.COMMITTED:
                self.queue.mark_compacted(rec.id)
                out.append(f"compaction {rec.id} {rec.target}: committed by a dead worker")
            elif state is TxnState.ABORTED or (rec.txn_id and state is None):
                self.queue.revoke(rec.id)
                out.append(f"compaction {rec.id} {rec.target}: txn aborted, re-queued")
            elif dead or stale:
                self._abandon(rec, state)
                why = "worker process is gone" if dead else "worker timed out"
                out.append(f"compaction {rec.id} {rec.target}: {why}, re-queued")
        return out

    def _abandon(self, rec: CompactionRecord, state: TxnState | None) -> None:
        if rec.txn_id and state is TxnState.OPEN:
            try:
                self.store.abort_txn(rec.txn_id, reason="compaction worker died")
            except AcidStreamError as e:
                log.warning("could not abort txn %s: %s", rec.txn_id, e)
                return
        self.queue.revoke(rec.id)

    # ---------------------------------------------------------------------------- one pass
    def run_once(self) -> PassReport:
        """Recover, initiate, run every queued compaction, clean; then return what happened."""
        report = PassReport(recovered=self.recover())
        if self.initiator is not None:
            report.initiated = self.initiator.run_once()
        while True:
            outcome = self._workers[0].run_once()
            if outcome is None:
                break
            report.compactions.append(outcome)
        if self.cleaner is not None:
            report.cleaned = self.cleaner.run_once()
        for line in report.lines():
            self._on_event(line)
        for c in report.cleaned:
            if c.error is not None:
                self._on_warning(c.summary())
        return report

    # ---------------------------------------------------------------------------- daemon
    def start(self) -> None:
        """Start the loops in daemon threads (recovering dead workers' requests first)."""
        if self._threads:
            raise RuntimeError("compactor already started")
        self._stop.clear()
        for line in self.recover():
            self._on_event(f"recovered {line}")
        loops: list[tuple[str, Callable[[], bool], float]] = []
        if self.initiator is not None:
            init = self.initiator
            loops.append(
                ("initiator", lambda: self._emit(init.run_once()), self.config.check_interval_s)
            )
        for i, w in enumerate(self._workers):
            loops.append((f"worker-{i}", self._work_fn(w), self.config.worker_poll_s))
        if self.cleaner is not None:
            cl = self.cleaner
            loops.append(
                ("cleaner", lambda: self._emit(cl.run_once()), self.config.cleaner_interval_s)
            )
        for name, fn, every in loops:
            t = threading.Thread(
                target=self._loop, args=(fn, every), name=f"compactor-{name}", daemon=True
            )
            self._threads.append(t)
            t.start()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the loops to stop and wait for them (a running compaction finishes first)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        self._threads = []

    def _emit(self, items: list[Initiation] | list[CleanOutcome]) -> bool:
        for it in items:
            if isinstance(it, Initiation) and it.id is None:
                continue
            if isinstance(it, CleanOutcome) and it.error is not None:
                self._on_warning(it.summary())
                continue
            self._on_event(it.summary())
        return False

    def _work_fn(self, w: Worker) -> Callable[[], bool]:
        def fn() -> bool:
            outcome = w.run_once()
            if outcome is None:
                return False
            self._on_event(outcome.summary())
            return True  # there may be more: look again at once

        return fn

    def _loop(self, fn: Callable[[], bool], every: float) -> None:
        while not self._stop.is_set():
            busy = False
            try:
                busy = fn()
            except Exception:  # a loop must survive a bad pass; the error is logged
                log.exception("compactor loop failed")
            if not busy:
                self._stop.wait(every)
