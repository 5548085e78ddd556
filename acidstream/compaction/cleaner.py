"""The compaction Cleaner: deletes what compaction made obsolete, once nobody can read it.

Hive's ``CompactionCleaner`` (spec §5.4), with two passes:

* **Compacted targets.** A request ``ready for cleaning`` waits until every txn that may
  have taken its snapshot before the compactor txn committed has ended (no open txn
  below ``CQ_NEXT_TXN_ID``). Then the directory is listed with a snapshot capped there
  (txns below ``CQ_NEXT_TXN_ID``, write ids up to the compaction's hwm), and the
  obsolete and aborted directories are deleted. A table with ``NO_CLEANUP=true`` gets
  the request ``refused`` instead.
* **Aborted txns.** Directories that hold only aborted data (a delta whose every write
  id aborted, the ``_v`` directory of a failed compaction) are deleted at once: no
  snapshot can see them.

Both passes then forget the aborted txns whose data is gone (their ``TXN_COMPONENTS``
rows, then their ``TXNS`` rows: Hive's ``markCleaned`` / ``cleanEmptyAbortedTxns``), so
snapshot strings stop listing them.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from acidstream.acid import faults
from acidstream.acid.directory import get_acid_state
from acidstream.acid.errors import AcidStreamError, ConfigError, TableNotFoundError
from acidstream.acid.layout import ParsedBase, ParsedDelta, parse_dir_name
from acidstream.acid.partitions import discover_partitions
from acidstream.acid.snapshot import LONG_MAX, ValidTxnList
from acidstream.acid.storage import Storage
from acidstream.compaction.worker import partition_dir, refuse_partition_dirs
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import (
    COMPACT_OP,
    CompactionQueue,
    CompactionRecord,
    check_target,
)
from acidstream.txn.store import TxnStore

__all__ = ["NO_CLEANUP", "CleanOutcome", "Cleaner"]

log = logging.getLogger(__name__)

NO_CLEANUP = "no_cleanup"
"""Table property (``hive_metastoreConstants.NO_CLEANUP``): the cleaner leaves it alone."""


@dataclass(frozen=True)
class CleanOutcome:
    """What one cleaning did: the request (None for the aborted-data pass) and the target.

    ``error``: the cleaning could not be done now (a storage or format error); nothing
    was marked, so the next pass tries again. The caller says so (the ``Compactor`` logs
    it as a warning, ``compact --wait`` reports it).
    """

    id: int | None
    target: str
    deleted: tuple[str, ...]
    forgotten_txns: int
    state: str
    error: BaseException | None = field(default=None, compare=False)

    def summary(self) -> str:
        what = f"compaction {self.id}" if self.id is not None else "aborted data"
        if self.error is not None:
            return (
                f"cleaner {what} {self.target}: cleaning failed ({_why(self.error)}); "
                "the next cleaner pass retries it"
            )
        return (
            f"cleaner {what} {self.target}: {self.state}, deleted {len(self.deleted)} dirs, "
            f"forgot {self.forgotten_txns} aborted txns"
        )


def _why(e: BaseException) -> str:
    """An error in a few words: an OSError by its errno's name (EROFS), else its message."""
    if isinstance(e, OSError) and e.errno is not None:
        return f"{os.strerror(e.errno)} ({errno.errorcode.get(e.errno, e.errno)}): {e.filename}"
    return f"{type(e).__name__}: {e}"


def _param(table: TableDef, key: str) -> str | None:
    for k, v in table.parameters.items():
        if k.lower() == key:
            return v
    return None


def _capped_txns(txns: ValidTxnList, next_txn_id: int | None) -> ValidTxnList:
    """The snapshot of a reader that began just before ``next_txn_id``."""
    if next_txn_id is None or next_txn_id - 1 >= txns.high_watermark:
        return txns
    cap = next_txn_id - 1
    opens = tuple(t for t in txns.open_txns if t <= cap)
    return ValidTxnList(
        cap, opens, tuple(t for t in txns.aborted_txns if t <= cap), opens[0] if opens else LONG_MAX
    )


def acid_dirs(storage: Storage, path: str) -> list[ParsedBase | ParsedDelta]:
    """The parsed base and delta directory names under ``path`` (none when it is gone)."""
    if not storage.exists(path):
        return []
    out = []
    for e in storage.list_dir(path):
        p = parse_dir_name(e.name) if e.is_dir else None
        if isinstance(p, (ParsedBase, ParsedDelta)):
            out.append(p)
    return out


def data_gone(
    dirs: Sequence[ParsedBase | ParsedDelta], txn_id: int, op: str, write_id: int | None
) -> bool:
    """Whether none of ``dirs`` (:func:`acid_dirs` of a target) can still hold an aborted
    txn's data."""
    for p in dirs:
        if op == COMPACT_OP:
            if p.visibility_txn_id == txn_id:
                return False
            continue
        if write_id is None:
            continue
        if isinstance(p, ParsedDelta) and p.visibility_txn_id == 0:
            if p.min_write_id <= write_id <= p.max_write_id:
                return False
        elif isinstance(p, ParsedBase) and p.visibility_txn_id == 0 and p.write_id == write_id:
            return False  # an aborted INSERT OVERWRITE base
    return True


class Cleaner:
    """Runs the cleaning passes over one metastore.

    Args:
        store: The metastore.
        queue: The compaction queue (one is made on ``store`` when omitted).
        storage: Filesystem of the tables; derived from each location when omitted.
        forget_after_s: Aborted txns are forgotten only this long after they aborted, and
            never sooner than the metastore's txn timeout (``txn_timeout_s``, read at each
            use; also the default): a writer whose txn the reaper aborted has noticed at
            its next heartbeat by then.
        clock: Seconds since the epoch (the store's, so abort times compare right).
    """

    def __init__(
        self,
        store: TxnStore,
        *,
        queue: CompactionQueue | None = None,
        storage: Storage | None = None,
        forget_after_s: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.queue = queue or CompactionQueue(store, clock=clock)
        self.storage = storage
        self.forget_after_s = forget_after_s

    def run_once(self) -> list[CleanOutcome]:
        """Clean every ready request, then every target with aborted data.

        A request (or aborted data) that cannot be cleaned now (a storage or format error)
        stays as it is and is retried on the next pass; it is returned as an outcome with
        its ``error``, for the caller to report (a warning in the daemon's log, a line of
        ``compact --wait``'s output): not logged here, so that a command's stderr keeps to
        its one error line.
        """
        out: list[CleanOutcome] = []
        for rec in self.queue.ready_to_clean():
            try:
                out.append(self.clean(rec))
            except (AcidStreamError, OSError) as e:
                out.append(CleanOutcome(rec.id, rec.target, (), 0, "failed", error=e))
        out.extend(self.clean_aborted())
        return out

    def _storage_for(self, path: str) -> tuple[Storage, str]:
        if self.storage is not None:
            return self.storage, path
        return self.store.storage(path)  # with the store's options (endpoint, credentials)

    def _delete(self, storage: Storage, paths: Sequence[str]) -> tuple[str, ...]:
        done = []
        for p in paths:
            faults.point("cleaner.before_delete")
            if storage.exists(p):
                storage.delete(p, recursive=storage.is_dir(p))
                done.append(p)
        return tuple(done)

    def _forget(
        self, storage: Storage, paths: str | Sequence[str], db: str, table: str, part: str | None
    ) -> int:
        """Forget the target's aborted txns whose data is gone from every one of ``paths``."""
        where = [paths] if isinstance(paths, str) else list(paths)
        comps = self.queue.aborted_components(db, table, part)
        if not comps:
            return 0
        listed = [acid_dirs(storage, p) for p in where]  # each directory listed once
        gone = [t for t, op, w in comps if all(data_gone(d, t, op, w) for d in listed)]
        min_age_s = max(self.forget_after_s or 0.0, self.store.txn_timeout_s())
        return self.queue.forget_aborted(db, table, part, gone, min_age_s=min_age_s)

    def clean(self, rec: CompactionRecord) -> CleanOutcome:
        """Clean one ``ready for cleaning`` request (its min-open-txn wait already passed)."""
        try:
            table = self.store.get_table(rec.db, rec.table)
        except TableNotFoundError:
            self.queue.mark_cleaned(rec.id)
            return CleanOutcome(rec.id, rec.target, (), 0, "succeeded (table gone)")
        try:
            # A partitioned table's root is no partition: what its listing calls obsolete
            # is every partition directory. Delete nothing; the request fails.
            check_target(table, rec.partition)
        except ConfigError as e:
            self.queue.mark_failed(rec.id, f"{type(e).__name__}: {e}")
            return CleanOutcome(rec.id, rec.target, (), 0, f"failed ({e})")
        if (_param(table, NO_CLEANUP) or "").strip().lower() == "true":
            self.queue.mark_refused(rec.id, f"{NO_CLEANUP}=true is set on {table.full_name}")
            return CleanOutcome(rec.id, rec.target, (), 0, "refused")
        storage, path = self._storage_for(partition_dir(self.store, table, rec.partition))
        deleted: tuple[str, ...] = ()
        if storage.exists(path):
            txns = _capped_txns(self.store.get_valid_txns(), rec.next_txn_id)
            wids = self.store.get_valid_write_ids(table.db, table.name, txns).capped(
                rec.highest_write_id
            )
            state = get_acid_state(path, write_ids=wids, txns=txns, storage=storage)
            doomed = [*state.obsolete, *state.aborted]
            try:
                refuse_partition_dirs(table, path, doomed, rec.target)
            except ConfigError as e:
                self.queue.mark_failed(rec.id, f"{type(e).__name__}: {e}")
                return CleanOutcome(rec.id, rec.target, (), 0, f"failed ({e})")
            deleted = self._delete(storage, doomed)
        forgotten = self._forget(storage, path, table.db, table.name, rec.partition)
        self.queue.mark_cleaned(rec.id)
        return CleanOutcome(rec.id, rec.target, deleted, forgotten, "succeeded")

    def _partition_paths(self, storage: Storage, table: TableDef, root: str) -> list[str]:
        """Every directory of rows of a partitioned table: the catalog's partitions (their
        locations may lie outside the table's) and the ``k=v/...`` directories on disk below
        the root (an aborted write's new partitions are in no catalog)."""
        keys = len(table.partition_keys)
        found = set()
        if storage.exists(root):
            found = {
                p.path.rstrip("/")
                for p in discover_partitions(storage, root)
                if len(p.values) == keys and p.path.rstrip("/") != root.rstrip("/")
            }
        for info in self.store.list_partitions(table.db, table.name):
            found.add(self._storage_for(info.location)[1].rstrip("/"))
        return sorted(found)

    def clean_aborted(self) -> list[CleanOutcome]:
        """Delete directories holding only aborted data, and forget those txns."""
        out: list[CleanOutcome] = []
        for db, name, part, _, _ in self.queue.aborted_targets():
            target = f"{db}.{name}" + (f"/{part}" if part else "")
            try:
                table = self.store.get_table(db, name)
            except TableNotFoundError:
                continue
            placeholder = part is None and table.is_partitioned
            if not placeholder:
                try:
                    check_target(table, part)
                except ConfigError:
                    continue  # not a directory of rows (a hand-made queue entry): touch nothing
            if (_param(table, NO_CLEANUP) or "").strip().lower() == "true":
                continue
            storage, path = self._storage_for(partition_dir(self.store, table, part))
            deleted: tuple[str, ...] = ()
            try:
                # A dynamic-partition write that died before it named its partitions left
                # only the table-level placeholder: its files may be in any partition, so
                # every partition directory is cleaned of aborted data (as Hive's Cleaner
                # does for a "dynamic partition abort"), never the table root itself.
                paths = self._partition_paths(storage, table, path) if placeholder else [path]
                txns = self.store.get_valid_txns()
                wids = self.store.get_valid_write_ids(table.db, table.name, txns)
                for p in paths:
                    if storage.exists(p):
                        state = get_acid_state(p, write_ids=wids, txns=txns, storage=storage)
                        deleted += self._delete(storage, state.aborted)
                forgotten = self._forget(storage, paths, db, name, part)
            except (AcidStreamError, OSError) as e:
                out.append(CleanOutcome(None, target, (), 0, "failed", error=e))
                continue
            if deleted or forgotten:
                out.append(CleanOutcome(None, target, deleted, forgotten, "cleaned"))
        return out
