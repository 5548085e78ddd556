"""The compaction Initiator: finds tables and partitions that need compacting, and queues them.

Hive's ``Initiator`` (spec §5.2). Candidates are the targets with committed writes
not yet compacted away (``COMPLETED_TXN_COMPONENTS``) and those with aborted txns.
A candidate is skipped when its table has ``no_auto_compaction=true``, when a
compaction of it is already initiated or working, or when its last
``failed_compacts_threshold`` compactions failed within ``failed_retry_time_s``
(recorded as ``did not initiate``). Otherwise the type is chosen as Hive's
``determineCompactionType`` does: too many aborts -> MAJOR, an old abort -> MINOR,
no base and more than ``delta_num_threshold`` deltas -> MAJOR, delta/base size
above ``delta_pct_threshold`` -> MAJOR, more than ``delta_num_threshold`` deltas ->
MINOR (MAJOR when minor is unsupported). Table properties
``compactorthreshold.<hive conf name>`` override the thresholds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from acidstream.acid.directory import AcidState, get_acid_state
from acidstream.acid.errors import AcidStreamError, TableNotFoundError
from acidstream.acid.storage import Storage
from acidstream.compaction.config import CompactorConfig, table_thresholds
from acidstream.compaction.rewrite import CompactorSnapshot
from acidstream.compaction.worker import partition_dir, worker_name
from acidstream.txn.catalog import TableDef
from acidstream.txn.compaction_sql import DID_NOT_INITIATE, FAILED, CompactionQueue
from acidstream.txn.store import TxnStore

__all__ = ["NO_AUTO_COMPACTION", "Initiation", "Initiator", "determine_compaction_type"]

log = logging.getLogger(__name__)

NO_AUTO_COMPACTION = "no_auto_compaction"
"""Table property: the initiator never queues this table (manual requests still run)."""


@dataclass(frozen=True)
class Initiation:
    """A decision about one candidate: queued (with the id), or why not."""

    target: str
    major: bool | None
    id: int | None
    reason: str

    def summary(self) -> str:
        if self.id is None:
            return f"initiator {self.target}: not queued ({self.reason})"
        kind = "major" if self.major else "minor"
        return f"initiator {self.target}: queued {kind} compaction {self.id} ({self.reason})"


def _dir_size(state: AcidState, *, base: bool) -> int:
    if base:
        size = sum(f.length for f in state.base.files) if state.base else 0
        return size + sum(o.length for o in state.original_files if o.dir_name is None)
    return sum(f.length for d in state.deltas for f in d.files)


def determine_compaction_type(state: AcidState, config: CompactorConfig) -> tuple[bool, str] | None:
    """Hive's ``determineCompactionType`` on a directory state: ``(major, why)`` or None."""
    base_size = _dir_size(state, base=True)
    delta_size = _dir_size(state, base=False)
    no_base = base_size == 0 and delta_size > 0
    if not no_base:
        big = base_size > 0 and delta_size / base_size > config.delta_pct_threshold
        multi_base = delta_size == 0 and any(
            p.rsplit("/", 1)[-1].startswith("base_") for p in state.obsolete
        )
        if big or multi_base:
            why = (
                f"delta/base size {delta_size}/{base_size} > {config.delta_pct_threshold}"
                if big
                else "several bases"
            )
            return True, why
    n = len(state.deltas)
    if n <= config.delta_num_threshold:
        return None
    minor_ok = not state.original_files and not any(d.is_raw for d in state.deltas)
    why = f"{n} deltas > {config.delta_num_threshold}"
    if no_base or not minor_ok:
        return True, why + (" and no base" if no_base else " and raw data")
    return False, why


class Initiator:
    """Queues compactions for the targets that need them.

    Args:
        store: The metastore.
        queue: The compaction queue (one is made on ``store`` when omitted).
        config: Thresholds (per-table overrides are applied on top).
        storage: Filesystem of the tables; derived from each location when omitted.
        clock: Seconds since the epoch (the store's, so abort ages compare right).
    """

    def __init__(
        self,
        store: TxnStore,
        *,
        queue: CompactionQueue | None = None,
        config: CompactorConfig | None = None,
        storage: Storage | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.queue = queue or CompactionQueue(store, clock=clock)
        self.config = config or CompactorConfig()
        self.storage = storage
        self._clock = clock
        self.name = worker_name("initiator")

    def run_once(self) -> list[Initiation]:
        """Look at every candidate once; returns a decision per candidate."""
        aborted = {
            (d, t, p): (n, oldest)
            for d, t, p, n, oldest in self.queue.aborted_targets(include_compactor=False)
        }
        targets = sorted(
            set(self.queue.written_targets()) | set(aborted), key=lambda x: (x[0], x[1], x[2] or "")
        )
        out: list[Initiation] = []
        for db, table, part in targets:
            target = f"{db}.{table}" + (f"/{part}" if part else "")
            try:
                out.append(self.check(db, table, part, aborts=aborted.get((db, table, part))))
            except AcidStreamError as e:
                log.warning("initiator: %s: %s", target, e)
                self.queue.did_not_initiate(
                    db, table, part, major=True, message=f"{type(e).__name__}: {e}",
                    initiator_id=self.name,
                )  # fmt: skip
                out.append(Initiation(target, None, None, f"did not initiate: {e}"))
        return out

    def _failed_too_often(self, db: str, table: str, part: str | None) -> bool:
        """Hive's ``checkFailedCompactions``: the last N attempts (within the retry time)
        all failed. Did-not-initiate rows do not count either way."""
        n = self.config.failed_compacts_threshold
        if n <= 0:
            return False
        states = [
            s
            for s in self.queue.recent_history_states(db, table, part, n * 4)
            if s[0] != DID_NOT_INITIATE
        ][:n]
        cutoff = (self._clock() - self.config.failed_retry_time_s) * 1000
        recent = [s for s, end in states if end is None or end >= cutoff]
        return len(recent) == n and all(s == FAILED for s in recent)

    def check(
        self,
        db: str,
        table: str,
        part: str | None,
        *,
        aborts: tuple[int, int] | None = None,
    ) -> Initiation:
        """Decide (and queue) one target; ``aborts`` is (aborted txn count, oldest start ms)."""
        target = f"{db}.{table}" + (f"/{part}" if part else "")
        try:
            t = self.store.get_table(db, table)
        except TableNotFoundError:
            return Initiation(target, None, None, "table is gone")
        if not t.is_full_acid:
            return Initiation(target, None, None, "not a full ACID table")
        if t.is_partitioned and part is None:
            return Initiation(target, None, None, "dynamic-partition write without a partition")
        if _flag(t, NO_AUTO_COMPACTION):
            return Initiation(target, None, None, f"{NO_AUTO_COMPACTION}=true")
        if self.queue.find_active(db, table, part) is not None:
            return Initiation(target, None, None, "a compaction is already queued or working")
        config = table_thresholds(self.config, t.parameters)
        if self._failed_too_often(db, table, part):
            msg = (
                f"Compaction is not initiated since last {config.failed_compacts_threshold} "
                "consecutive compactions for this table/partition failed."
            )
            self.queue.did_not_initiate(
                db, table, part, major=True, message=msg, initiator_id=self.name
            )
            return Initiation(target, None, None, "did not initiate: " + msg)
        decision = self._decide(t, part, config, aborts)
        if decision is None:
            return Initiation(target, None, None, "no threshold met")
        major, why = decision
        cq_id, accepted = self.queue.request(db, table, part, major=major, initiator_id=self.name)
        if not accepted:
            return Initiation(target, major, None, "a compaction is already queued or working")
        return Initiation(target, major, cq_id, why)

    def _decide(
        self, t: TableDef, part: str | None, config: CompactorConfig, aborts: tuple[int, int] | None
    ) -> tuple[bool, str] | None:
        if aborts is not None:
            count, oldest_ms = aborts
            if count >= config.aborted_txn_threshold:
                return True, f"{count} aborted txns >= {config.aborted_txn_threshold}"
            age = self._clock() - oldest_ms / 1000
            if age > config.aborted_txn_time_threshold_s:
                return False, f"an abort {age:.0f}s old > {config.aborted_txn_time_threshold_s:g}s"
        path = partition_dir(self.store, t, part)
        storage, path = (
            (self.storage, path) if self.storage is not None else self.store.storage(path)
        )
        if not storage.exists(path):
            return None
        txns = self.store.get_valid_txns()
        wids = self.store.get_valid_compactor_write_ids(t.db, t.name, txns)
        state = get_acid_state(
            path, write_ids=CompactorSnapshot.of(wids), txns=txns, storage=storage
        )
        return determine_compaction_type(state, config)


def _flag(t: TableDef, key: str) -> bool:
    return any(k.lower() == key and v.strip().lower() == "true" for k, v in t.parameters.items())
