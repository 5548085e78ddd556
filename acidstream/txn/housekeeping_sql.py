"""The metastore's housekeeping: what Hive's ``AcidHouseKeeperService`` purges, done safely.

:class:`HousekeepingOps` is the housekeeping half of :class:`~acidstream.txn.store.TxnStore`; each
method is one database transaction and may run in any process, any number of times
(every step is idempotent). :class:`acidstream.txn.housekeeper.Housekeeper` runs them
periodically together with the heartbeat reaper (``reap_timed_out``).

What is purged, and why it is safe (Hive's rules, spec §6.3, tightened where noted):

* ``WRITE_SET`` rows with a commit id below every open txn (``performWriteSetGC``): the
  write-write check only looks at rows with ``WS_COMMIT_ID >= txnid`` of a committing
  txn, and every txn that can still commit is open, so it is at least that old.
* ``TXN_TO_WRITE_ID`` rows of txns below the lowest open or aborted txn
  (``cleanTxnToWriteIdTable``): every such txn is committed, so its write ids are valid
  in any snapshot, and a snapshot built without the rows says exactly that (step 3 of
  ``GetValidWriteIdsForTable``). **Tightened:** only txns committed more than
  ``retention_s`` ago, so a reader that took its txn snapshot a moment before the purge
  still finds the write ids of txns that were open in it.
* ``COMPLETED_TXN_COMPONENTS``: per table/partition, every row but the one with the
  highest write id and the latest update/delete one (``removeDuplicateCompletedTxnComponents``).
* ``COMPLETED_COMPACTIONS``: per table/partition, the newest 3 succeeded, 3 failed,
  2 did-not-initiate and 3 refused entries are kept (``purgeCompactionHistory``, Hive's
  ``metastore.compactor.history.retention.*`` defaults).
* ``TXNS`` rows of **committed** txns finished more than ``retention_s`` ago
  (``cleanEmptyAbortedAndCommittedTxns`` does this for committed txns). **Tightened:**
  the retention keeps a committed txn's row while a writer's heartbeat may still race
  its commit, so the heartbeat reports it committed, not unknown (``retention_s`` must be
  at least the txn timeout; the housekeeper checks it). Aborted txns are never removed
  here: a snapshot must keep excluding an aborted txn while its files may exist (the
  compaction cleaner removes them once it has deleted their data, as Hive's does).

Nothing here deletes ``TXN_COMPONENTS`` or anything else of an open or aborted txn.
"""

from __future__ import annotations

from collections.abc import Mapping

from acidstream.txn.db import Tx
from acidstream.txn.store_ops import StoreOps
from acidstream.txn.txn_sql import chunks, marks, txn_hwm

__all__ = [
    "COMPACTION_HISTORY_RETENTION",
    "DEFAULT_HISTORY_RETENTION_S",
    "HousekeepingOps",
]

DEFAULT_HISTORY_RETENTION_S = 300.0
"""How long committed txns' records (``TXNS`` rows, write-id mappings) are kept."""

COMPACTION_HISTORY_RETENTION: Mapping[str, int] = {"s": 3, "f": 3, "a": 2, "c": 3}
"""``COMPLETED_COMPACTIONS`` entries kept per table/partition by state: succeeded, failed,
did not initiate (attempted), refused (Hive's ``metastore.compactor.history.retention.*``)."""


def _min_open_txn(tx: Tx) -> int:
    """The lowest open txn, or the next txn id when none is open."""
    hwm = txn_hwm(tx)
    row = tx.one("SELECT MIN(TXN_ID) FROM TXNS WHERE TXN_STATE = 'o'")
    return int(row[0]) if row and row[0] is not None else hwm + 1


def _min_uncommitted_txn(tx: Tx) -> int:
    """Hive's ``min_uncommitted_txnid``: below it every txn is committed."""
    hwm = txn_hwm(tx)
    row = tx.one(
        "SELECT MIN(ID) FROM (SELECT MIN(TXN_ID) AS ID FROM TXNS WHERE TXN_STATE IN ('o', 'a') "
        "UNION ALL SELECT MIN(WS_COMMIT_ID) AS ID FROM WRITE_SET) m"
    )
    low = int(row[0]) if row and row[0] is not None else hwm + 1
    return min(low, hwm + 1)


def purge_write_set(tx: Tx) -> int:
    return tx.count("DELETE FROM WRITE_SET WHERE WS_COMMIT_ID < ?", _min_open_txn(tx))


def purge_txn_to_write_id(tx: Tx, cutoff_ms: int) -> int:
    # A txn without a TXNS row below the hwm was committed and purged long ago; one with a
    # row must be committed and finished before the cutoff.
    return tx.count(
        "DELETE FROM TXN_TO_WRITE_ID WHERE T2W_TXNID < ? AND NOT EXISTS ("
        "SELECT 1 FROM TXNS WHERE TXN_ID = T2W_TXNID AND "
        "(TXN_STATE <> 'c' OR TXN_FINISHED IS NULL OR TXN_FINISHED >= ?))",
        _min_uncommitted_txn(tx),
        cutoff_ms,
    )


def purge_completed_components(tx: Tx) -> int:
    same = (
        "c.CTC_DATABASE = tc.CTC_DATABASE AND "
        "(c.CTC_TABLE = tc.CTC_TABLE OR (c.CTC_TABLE IS NULL AND tc.CTC_TABLE IS NULL)) AND "
        "(c.CTC_PARTITION = tc.CTC_PARTITION OR "
        "(c.CTC_PARTITION IS NULL AND tc.CTC_PARTITION IS NULL))"
    )
    return tx.count(
        "DELETE FROM COMPLETED_TXN_COMPONENTS AS tc WHERE "
        f"EXISTS (SELECT 1 FROM COMPLETED_TXN_COMPONENTS c WHERE {same} "
        "AND c.CTC_WRITEID > tc.CTC_WRITEID) "
        "AND NOT (tc.CTC_UPDATE_DELETE = 'Y' AND NOT EXISTS ("
        f"SELECT 1 FROM COMPLETED_TXN_COMPONENTS c WHERE {same} "
        "AND c.CTC_UPDATE_DELETE = 'Y' AND c.CTC_WRITEID > tc.CTC_WRITEID))"
    )


def purge_compaction_history(tx: Tx, keep: Mapping[str, int]) -> int:
    rows = tx.q(
        "SELECT CC_ID, CC_DATABASE, CC_TABLE, CC_PARTITION, CC_STATE FROM COMPLETED_COMPACTIONS "
        "ORDER BY CC_DATABASE, CC_TABLE, CC_PARTITION, CC_ID DESC"
    )
    doomed: list[int] = []
    seen: dict[tuple[str, str, str | None, str], int] = {}
    for cc_id, db, table, part, state in rows:
        key = (db, table, part, state)
        seen[key] = seen.get(key, 0) + 1
        limit = keep.get(state)
        if limit is not None and seen[key] > limit:
            doomed.append(int(cc_id))
    for chunk in chunks(doomed):
        tx.x(f"DELETE FROM COMPLETED_COMPACTIONS WHERE CC_ID IN ({marks(len(chunk))})", *chunk)
    return len(doomed)


def purge_committed_txns(tx: Tx, cutoff_ms: int) -> int:
    # The only statement that deletes TXNS rows: committed ones only (see txn_states).
    return tx.count(
        "DELETE FROM TXNS WHERE TXN_STATE = 'c' AND TXN_ID > 0 AND TXN_FINISHED < ?", cutoff_ms
    )


class HousekeepingOps(StoreOps):
    """Purges of obsolete metastore records: the housekeeping half of the store."""

    def _cutoff_ms(self, retention_s: float) -> int:
        return self._now_ms() - int(retention_s * 1000)

    def purge_write_set(self) -> int:
        """Drop ``WRITE_SET`` rows no open txn can conflict with; returns how many."""
        return self._db.run("purge_write_set", purge_write_set, idempotent=True)

    def purge_txn_to_write_id(self, *, retention_s: float = DEFAULT_HISTORY_RETENTION_S) -> int:
        """Drop write-id mappings of txns below every open or aborted txn, committed more
        than ``retention_s`` ago; returns how many."""
        cutoff = self._cutoff_ms(retention_s)
        return self._db.run(
            "purge_txn_to_write_id",
            lambda tx: purge_txn_to_write_id(tx, cutoff),
            idempotent=True,
        )

    def purge_completed_components(self) -> int:
        """Keep one ``COMPLETED_TXN_COMPONENTS`` row per table/partition (the highest write
        id, plus the latest update/delete one); returns how many were dropped."""
        return self._db.run(
            "purge_completed_components", purge_completed_components, idempotent=True
        )

    def purge_compaction_history(
        self, *, keep: Mapping[str, int] = COMPACTION_HISTORY_RETENTION
    ) -> int:
        """Trim ``COMPLETED_COMPACTIONS`` per table/partition to ``keep[state]`` newest
        entries of each state; returns how many were dropped."""
        return self._db.run(
            "purge_compaction_history",
            lambda tx: purge_compaction_history(tx, keep),
            idempotent=True,
        )

    def purge_committed_txns(self, *, retention_s: float = DEFAULT_HISTORY_RETENTION_S) -> int:
        """Drop the ``TXNS`` rows of txns committed more than ``retention_s`` ago (they then
        no longer show in ``show_txns``, and ``txn_state`` says ``None``); returns how
        many."""
        cutoff = self._cutoff_ms(retention_s)
        return self._db.run(
            "purge_committed_txns",
            lambda tx: purge_committed_txns(tx, cutoff),
            idempotent=True,
        )
