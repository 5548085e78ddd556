"""The compaction Worker: takes a queued request and compacts one table or partition.

Hive's ``Worker`` (spec §5.1): the compaction runs in its own txn (the compactor txn,
whose id becomes the ``_v`` suffix), sees the table through the compactor's write-id
list (hwm below the lowest open write id, aborted ids invalid), writes the new base or
deltas (:mod:`acidstream.compaction.rewrite`), commits the txn and marks the request ``ready for
cleaning``. Until that commit the new directory is invisible to every reader; if the
worker fails, its txn is aborted, the request is marked ``failed``, and the directory
(invisible for good, its visibility txn being aborted) is removed by the cleaner.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from acidstream.acid import faults
from acidstream.acid.directory import AcidState, get_acid_state
from acidstream.acid.errors import AcidStreamError, ConfigError, TableNotFoundError
from acidstream.acid.layout import ParsedDelta
from acidstream.acid.list_bucketing import SkewedInfo
from acidstream.acid.partition_name import parse_partition_component
from acidstream.acid.snapshot import ValidCompactorWriteIdList, ValidTxnList
from acidstream.acid.storage import Storage
from acidstream.compaction.config import CompactorConfig
from acidstream.compaction.rewrite import (
    CompactorSnapshot,
    RewriteResult,
    major,
    minor,
    whole_delta_hwm,
)
from acidstream.compaction.spark_engine import major_on_spark
from acidstream.txn.catalog import PartitionInfo, TableDef
from acidstream.txn.compaction_sql import (
    COMPACTION_TXN_TYPE,
    FAILED,
    READY_FOR_CLEANING,
    REFUSED,
    CompactionQueue,
    CompactionRecord,
    check_target,
)
from acidstream.txn.store import TxnState, TxnStore

__all__ = [
    "CompactionOutcome",
    "Worker",
    "partition_dir",
    "refuse_partition_dirs",
    "worker_name",
]

log = logging.getLogger(__name__)

MINOR_WITH_ORIGINALS = (
    "Query based Minor compaction is not possible for full acid tables having raw format "
    "(non-acid) data in them."
)
NOT_ENOUGH = "None of the compaction thresholds met, compaction request is refused!"


def worker_name(role: str = "worker") -> str:
    """``host-pid-thread`` (Hive's worker id is host plus thread): who holds a request."""
    return f"{socket.gethostname()}-{os.getpid()}-{role}-{threading.get_ident()}"


def _partition(store: TxnStore, table: TableDef, name: str) -> PartitionInfo | None:
    """One partition, read by name: the initiator and the cleaner ask per candidate, and
    listing every partition there made a housekeeping pass quadratic in partitions."""
    return store.get_partitions(table.db, table.name, [name]).get(name)


def partition_dir(store: TxnStore, table: TableDef, partition: str | None) -> str:
    """The directory of a table (``partition`` None) or of one of its partitions."""
    assert table.location is not None
    if partition is None:
        return table.location
    p = _partition(store, table, partition)
    return p.location if p is not None else f"{table.location.rstrip('/')}/{partition}"


def refuse_partition_dirs(table: TableDef, root: str, paths: Iterable[str], target: str) -> None:
    """Refuse to read or delete anything that is, or lies in, a directory below ``root``
    named like one of ``table``'s partitions (``ds=...`` for a table partitioned by
    ``ds``).

    Listing a directory reads every subdirectory that is not a base or delta as original
    files, and calls it obsolete once a base exists: a partition directory in there (a
    partitioned table's root, or a partition copied into another) would have its rows
    compacted into the wrong place and then be deleted.

    Raises:
        ConfigError: naming the first such path.
    """
    keys = set(table.partition_names)
    if not keys:
        return
    prefix = root.rstrip("/") + "/"
    for p in paths:
        rel = p[len(prefix) :] if p.startswith(prefix) else p
        for name in rel.split("/"):
            kv = parse_partition_component(name)
            if kv is not None and kv[0] in keys:
                raise ConfigError(
                    f"{target}: {p} is in a directory named like a partition of "
                    f"{table.full_name} ({name}): compaction never reads or deletes a "
                    f"partition's directory from {root}; move it out"
                )


def partition_skew(store: TxnStore, table: TableDef, partition: str | None) -> SkewedInfo | None:
    """The list bucketing of a table or partition (the partition's own copy), or ``None``
    when it is not stored as directories."""
    skew = table.skewed
    if partition is not None:
        p = _partition(store, table, partition)
        skew = None if p is None else p.skewed
    return skew if skew is not None and skew.is_list_bucketed else None


@dataclass(frozen=True)
class CompactionOutcome:
    """What happened to one request: its new state and what was written."""

    id: int
    target: str
    type: str
    state: str
    txn_id: int | None = None
    highest_write_id: int | None = None
    inserts: int = 0
    deletes: int = 0
    buckets: int = 0
    output_dirs: tuple[str, ...] = ()
    seconds: float = 0.0
    message: str | None = None
    error: BaseException | None = field(default=None, compare=False, repr=False)
    """The exception of a ``failed`` compaction (the CLI turns it into its exit code)."""

    def summary(self) -> str:
        """One line for the daemon's log."""
        kind = "major" if self.type == "a" else "minor"
        base = f"compaction {self.id} {kind} {self.target}: "
        if self.state == READY_FOR_CLEANING:
            dirs = ",".join(d.rsplit("/", 1)[-1] for d in self.output_dirs) or "-"
            return (
                base + f"ready for cleaning in {self.seconds:.2f}s, txn {self.txn_id}, "
                f"hwm {self.highest_write_id}, {self.inserts} rows, {self.deletes} deletes, "
                f"{self.buckets} buckets -> {dirs}"
            )
        name = {FAILED: "failed", REFUSED: "refused"}.get(self.state, self.state)
        return base + f"{name}: {self.message}"


class _Heartbeat:
    """Keeps the compactor txn alive while files are written (Hive heartbeats at timeout/2)."""

    def __init__(self, store: TxnStore, txn_id: int, every_s: float) -> None:
        self._store, self._txn, self._every = store, txn_id, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"compactor-hb-{txn_id}", daemon=True
        )

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._store.heartbeat_txn_range(self._txn, self._txn)
            except AcidStreamError as e:  # the commit will tell; keep trying meanwhile
                log.warning("heartbeat of compactor txn %s failed: %s", self._txn, e)


class Worker:
    """Runs queued compactions, one at a time.

    Args:
        store: The metastore.
        queue: The compaction queue (one is made on ``store`` when omitted).
        config: Compactor settings (ORC options, heartbeat interval).
        storage: Filesystem of the tables; derived from each location when omitted.
        name: The worker id recorded in the queue (default :func:`worker_name`).
        engine: ``local`` (this process) or ``spark``: major compactions run as one Spark
            task per bucket (:mod:`acidstream.compaction.spark_engine`; minor ones stay local).
        spark: The SparkSession for ``engine="spark"`` (this process is the driver).
    """

    def __init__(
        self,
        store: TxnStore,
        *,
        queue: CompactionQueue | None = None,
        config: CompactorConfig | None = None,
        storage: Storage | None = None,
        name: str | None = None,
        engine: str = "local",
        spark: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if engine not in ("local", "spark"):
            raise ConfigError(f"compaction engine must be 'local' or 'spark', not {engine!r}")
        if engine == "spark" and spark is None:
            raise ConfigError("the spark compaction engine needs a SparkSession")
        self.engine = engine
        self.spark = spark
        self.store = store
        self.queue = queue or CompactionQueue(store, clock=clock)
        self.config = config or CompactorConfig()
        self.storage = storage
        self.name = name or worker_name()

    def run_once(self) -> CompactionOutcome | None:
        """Take the oldest initiated request and run it; ``None`` when the queue is empty."""
        rec = self.queue.claim_next(self.name)
        if rec is None:
            return None
        return self.compact(rec)

    def compact(self, rec: CompactionRecord) -> CompactionOutcome:
        """Run one claimed (``working``) request to ``ready for cleaning``, ``failed`` or
        ``refused``; never raises for a compaction problem (it is recorded instead)."""
        started = time.monotonic()
        txn_id: int | None = None
        hwm: int | None = None
        try:
            try:
                table = self.store.get_table(rec.db, rec.table)
            except TableNotFoundError as e:
                return self._refuse(rec, f"table is gone: {e}", started)
            if not table.is_full_acid:
                return self._refuse(rec, f"{table.full_name} is not a full ACID table", started)
            # Before any txn or listing: the root of a partitioned table read as a
            # partition is every partition's files as raw data, and its "compacted" base
            # would make the cleaner delete every partition directory.
            check_target(table, rec.partition)
            path = partition_dir(self.store, table, rec.partition)
            storage, path = self._storage_for(path)
            txn_id = self.store.open_txns(
                1,
                user="compactor",
                host=socket.gethostname(),
                agent_info=self.name,
                txn_type=COMPACTION_TXN_TYPE,
            )[0]
            txns = self.store.get_valid_txns(txn_id)
            wids = self.store.get_valid_compactor_write_ids(table.db, table.name, txns)
            exists = storage.exists(path)
            names: list[str] = []
            if exists:
                names = [e.name for e in storage.list_dir(path) if e.is_dir]
                wids = whole_delta_hwm(wids, names)
            hwm = wids.high_watermark
            self.queue.set_txn(rec.id, txn_id, hwm)
            if not exists:
                self.store.abort_txn(txn_id, reason="compaction refused")
                return self._refuse(rec, f"{NOT_ENOUGH} (no directory {path})", started)
            snapshot = CompactorSnapshot.of(wids)
            skew = partition_skew(self.store, table, rec.partition)
            # Directories named by the location map are read (and kept) too.
            state = get_acid_state(
                path, write_ids=snapshot, txns=txns, storage=storage,
                lb_location_dirs=skew.all_dirs() if skew is not None else (),
            )  # fmt: skip
            refuse_partition_dirs(
                table, path, [*(o.path for o in state.original_files), *state.obsolete],
                rec.target,
            )  # fmt: skip
            problem = self._check(rec, state)
            if problem is not None:
                if state.obsolete or state.aborted:
                    # Nothing to rewrite, but there is something for the cleaner.
                    return self._finish_empty(rec, txn_id, hwm, problem, started)
                self.store.abort_txn(txn_id, reason="compaction refused")
                return self._refuse(rec, problem, started, txn_id=txn_id)
            with _Heartbeat(self.store, txn_id, self.config.heartbeat_s):
                result = self._rewrite(rec, table, path, state, storage, wids, txns, txn_id, skew)
                faults.point("compaction.after_files")
                self.store.commit_txn(txn_id)
            faults.point("compaction.after_commit")
            self.queue.mark_compacted(rec.id)
            return CompactionOutcome(
                rec.id, rec.target, rec.type, READY_FOR_CLEANING, txn_id, hwm,
                result.inserts, result.deletes, result.buckets, result.output_dirs,
                time.monotonic() - started,
            )  # fmt: skip
        except Exception as e:  # recorded in the queue as Hive's markFailed does
            # The failure is in the queue (SHOW COMPACTIONS) and in the outcome the caller
            # prints; the traceback only for whoever turns logging up (a warning with it
            # would reach the CLI's stderr through logging's last-resort handler).
            log.info("compaction %s of %s failed", rec.id, rec.target, exc_info=True)
            return self._fail(rec, e, started, txn_id, hwm)

    # -------------------------------------------------------------------------------------
    def _storage_for(self, path: str) -> tuple[Storage, str]:
        if self.storage is not None:
            return self.storage, path
        return self.store.storage(path)  # with the store's options (endpoint, credentials)

    def _check(self, rec: CompactionRecord, state: AcidState) -> str | None:
        """Hive's ``isEnoughToCompact`` and ``isMinorCompactionSupported``; a reason or None."""
        if rec.is_major:
            raw_base = state.base is not None and state.base.is_raw
            if state.deltas or state.original_files or raw_base:
                return None
            return NOT_ENOUGH
        if state.original_files or any(d.is_raw for d in state.deltas):
            return MINOR_WITH_ORIGINALS
        ranges = {(d.parsed.min_write_id, d.parsed.max_write_id, d.parsed.statement_id)
                  for d in state.deltas if isinstance(d.parsed, ParsedDelta)}  # fmt: skip
        if len(ranges) == 1 and next(iter(ranges))[2] == -1:
            # Only the delta_x_y / delete_delta_x_y pair an earlier minor compaction wrote:
            # nothing to merge. Rewritten, its copy would have the same range and no
            # statement id, and readers take every such pair (findBestWorkingDeltas'
            # same-range rule): every row twice until the Cleaner removed the old pair.
            # (Hive's isEnoughToCompact refuses any lone delta + delete delta.)
            return NOT_ENOUGH
        if len(state.deltas) > 1:
            return None
        return NOT_ENOUGH

    def _rewrite(
        self,
        rec: CompactionRecord,
        table: TableDef,
        path: str,
        state: AcidState,
        storage: Storage,
        wids: ValidCompactorWriteIdList,
        txns: ValidTxnList,
        txn_id: int,
        skew: SkewedInfo | None,
    ) -> RewriteResult:
        # The table's ORC properties (orc.compress...) win over the worker's, as in Hive.
        orc = self.config.orc.for_table(table.parameters)
        if rec.is_major and self.engine == "spark":
            result = major_on_spark(
                self.spark,
                path,
                state,
                schema=table.schema,
                write_ids=wids,
                compactor_txn_id=txn_id,
                options=orc,
                storage_options=self.store.storage_options,
            )
            if result is not None:
                return result
            log.info("compaction %s: partition not splittable by bucket, run locally", rec.id)
        if rec.is_major:
            return major(
                path,
                state,
                schema=table.schema,
                write_ids=wids,
                txns=txns,
                compactor_txn_id=txn_id,
                storage=storage,
                options=orc,
                skewed=skew,
            )
        return minor(
            path,
            state,
            schema=table.schema,
            write_ids=wids,
            compactor_txn_id=txn_id,
            storage=storage,
            options=orc,
        )

    def _finish_empty(
        self, rec: CompactionRecord, txn_id: int, hwm: int, why: str, started: float
    ) -> CompactionOutcome:
        self.store.commit_txn(txn_id)
        self.queue.mark_compacted(rec.id)
        return CompactionOutcome(
            rec.id, rec.target, rec.type, READY_FOR_CLEANING, txn_id, hwm,
            seconds=time.monotonic() - started, message=why,
        )  # fmt: skip

    def _refuse(
        self, rec: CompactionRecord, why: str, started: float, *, txn_id: int | None = None
    ) -> CompactionOutcome:
        self.queue.mark_refused(rec.id, why)
        return CompactionOutcome(
            rec.id, rec.target, rec.type, REFUSED, txn_id,
            seconds=time.monotonic() - started, message=why,
        )  # fmt: skip

    def _fail(
        self,
        rec: CompactionRecord,
        err: Exception,
        started: float,
        txn_id: int | None,
        hwm: int | None,
    ) -> CompactionOutcome:
        msg = f"{type(err).__name__}: {err}"
        if txn_id is not None:
            try:
                if self.store.txn_state(txn_id) is TxnState.OPEN:
                    self.store.abort_txn(txn_id, reason=f"compaction failed: {msg}"[:1000])
            except AcidStreamError as e:  # the reaper aborts it after the txn timeout
                log.warning("could not abort compactor txn %s: %s", txn_id, e)
        try:
            self.queue.mark_failed(rec.id, msg)
        except AcidStreamError as e:
            log.warning("could not mark compaction %s failed: %s", rec.id, e)
        return CompactionOutcome(
            rec.id, rec.target, rec.type, FAILED, txn_id, hwm,
            seconds=time.monotonic() - started, message=msg, error=err,
        )  # fmt: skip
