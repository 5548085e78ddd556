"""Read snapshots from the store: Hive's ``getOpenTxns`` / ``createValidReadTxnList`` and
``GetValidWriteIdsForTableFunction`` (spec §6.4).

The ``read_*`` functions run inside a read-only DB transaction (PostgreSQL:
REPEATABLE READ, so their queries see one state); the others are pure.
:class:`SnapshotOps` is the snapshot half of :class:`~acidstream.txn.store.TxnStore`.
"""

from __future__ import annotations

from acidstream.acid.snapshot import (
    LONG_MAX,
    ValidCompactorWriteIdList,
    ValidTxnList,
    ValidWriteIdList,
)
from acidstream.txn.db import Tx
from acidstream.txn.store_ops import StoreOps
from acidstream.txn.txn_sql import TxnState, norm

__all__ = [
    "SnapshotOps",
    "read_table_writes",
    "read_txn_snapshot",
    "table_write_state",
    "valid_read_txn_list",
]


def read_txn_snapshot(tx: Tx) -> tuple[int, list[tuple[int, str]]]:
    """``getOpenTxns``: the txn hwm and every open or aborted txn at or below it, ascending."""
    row = tx.one("SELECT NTXN_NEXT FROM NEXT_TXN_ID")
    assert row is not None, "NEXT_TXN_ID is seeded by the schema"
    hwm = int(row[0]) - 1
    rows = tx.q(
        "SELECT TXN_ID, TXN_STATE FROM TXNS WHERE TXN_STATE IN ('o', 'a') AND TXN_ID <= ? "
        "ORDER BY TXN_ID",
        hwm,
    )
    return hwm, [(int(r[0]), str(r[1])) for r in rows]


def valid_read_txn_list(hwm: int, rows: list[tuple[int, str]], current_txn: int) -> ValidTxnList:
    """``createValidReadTxnList``: with a current txn, cap the hwm at it and keep only the
    exceptions below it (a txn sees its own writes); ``minOpenTxn`` is the first open one."""
    if current_txn > 0:
        hwm = min(current_txn, hwm)
        rows = [r for r in rows if r[0] < current_txn]
    opens = [t for t, s in rows if s == TxnState.OPEN.value]
    aborted = [t for t, s in rows if s == TxnState.ABORTED.value]
    return ValidTxnList(hwm, tuple(opens), tuple(aborted), opens[0] if opens else LONG_MAX)


def read_table_writes(
    tx: Tx, db: str, table: str, valid_txns: ValidTxnList
) -> tuple[int, list[tuple[int, int]], bool]:
    """Steps 1-2 of ``GetValidWriteIdsForTable``, the database part.

    Returns:
        ``(write hwm, (txn, write id) rows that may be invalid, whether an older valid
        write exists)``. Rows whose txn is below every exception of the snapshot are valid
        without a look, which keeps snapshots cheap on long histories.
    """
    invalid = valid_txns.invalid_txns
    txn_hwm = valid_txns.high_watermark
    lowest_invalid = invalid[0] if invalid else LONG_MAX
    if txn_hwm < lowest_invalid:
        lowest_invalid = txn_hwm + 1  # txns above the snapshot's hwm are invalid too
    row = tx.one(
        "SELECT MAX(T2W_WRITEID) FROM TXN_TO_WRITE_ID WHERE T2W_DATABASE = ? "
        "AND T2W_TABLE = ? AND T2W_TXNID <= ?",
        db,
        table,
        txn_hwm,
    )
    write_hwm = int(row[0]) if row and row[0] is not None else 0
    if write_hwm <= 0:
        nwi = tx.one(
            "SELECT NWI_NEXT FROM NEXT_WRITE_ID WHERE NWI_DATABASE = ? AND NWI_TABLE = ?",
            db,
            table,
        )
        write_hwm = int(nwi[0]) - 1 if nwi else 0
    rows = tx.q(
        "SELECT T2W_TXNID, T2W_WRITEID FROM TXN_TO_WRITE_ID WHERE T2W_DATABASE = ? "
        "AND T2W_TABLE = ? AND T2W_WRITEID <= ? AND T2W_TXNID >= ? ORDER BY T2W_WRITEID",
        db,
        table,
        write_hwm,
        lowest_invalid,
    )
    older = tx.one(
        "SELECT 1 FROM TXN_TO_WRITE_ID WHERE T2W_DATABASE = ? AND T2W_TABLE = ? "
        "AND T2W_WRITEID <= ? AND T2W_TXNID < ? LIMIT 1",
        db,
        table,
        write_hwm,
        lowest_invalid,
    )
    return write_hwm, [(int(t), int(w)) for t, w in rows], older is not None


def table_write_state(
    valid_txns: ValidTxnList, write_hwm: int, rows: list[tuple[int, int]], found_valid: bool
) -> tuple[int, list[int], list[int], int]:
    """Steps 2-3: ``(write hwm, open write ids, aborted write ids, min open write id)``.

    A write id is invalid when its txn is invalid in ``valid_txns``; aborted if the txn is.
    Step 3: when no valid write was found, only the lowest invalid write id is kept, it
    becomes the hwm, and it is aborted unless it is the lowest open write id.
    """
    invalid_ids: list[tuple[int, bool]] = []
    for txn, wid in rows:
        if valid_txns.is_txn_valid(txn):
            found_valid = True
            continue
        invalid_ids.append((wid, valid_txns.is_txn_aborted(txn)))
    opens = [w for w, ab in invalid_ids if not ab]
    min_open = min(opens) if opens else LONG_MAX
    if not found_valid and invalid_ids:
        wid = invalid_ids[0][0]
        return (wid, [wid], [], min_open) if wid == min_open else (wid, [], [wid], min_open)
    return write_hwm, opens, [w for w, ab in invalid_ids if ab], min_open


class SnapshotOps(StoreOps):
    """Read snapshots: the ``getOpenTxns`` / ``getValidWriteIds`` half of the store."""

    def get_valid_txns(self, current_txn: int = 0) -> ValidTxnList:
        """Hive's ``getOpenTxns`` + ``createValidReadTxnList(resp, currentTxn)``.

        The hwm is the highest txn id; open and aborted txns below it are exceptions. With a
        current txn, the hwm is capped at it and only txns below it are exceptions, so a txn
        sees its own writes.
        """
        hwm, rows = self._db.run("get_valid_txns", read_txn_snapshot, write=False, idempotent=True)
        return valid_read_txn_list(hwm, rows, current_txn)

    def _table_write_state(
        self, db: str, table: str, valid_txns: ValidTxnList
    ) -> tuple[int, list[int], list[int], int]:
        write_hwm, rows, found_valid = self._db.run(
            "get_valid_write_ids",
            lambda tx: read_table_writes(tx, norm(db), norm(table), valid_txns),
            write=False,
            idempotent=True,
        )
        return table_write_state(valid_txns, write_hwm, rows, found_valid)

    def get_valid_write_ids(
        self, db: str, table: str, valid_txns: ValidTxnList
    ) -> ValidWriteIdList:
        """The reader's ``ValidWriteIdList`` of one table for a txn snapshot (spec §6.4)."""
        hwm, opens, aborted, min_open = self._table_write_state(db, table, valid_txns)
        return ValidWriteIdList(
            f"{norm(db)}.{norm(table)}", hwm, tuple(opens), tuple(aborted), min_open
        )

    def get_valid_compactor_write_ids(
        self, db: str, table: str, valid_txns: ValidTxnList
    ) -> ValidCompactorWriteIdList:
        """The compactor's view of a table (``TxnUtils.createValidCompactWriteIdList``)."""
        hwm, opens, aborted, _ = self._table_write_state(db, table, valid_txns)
        return ValidCompactorWriteIdList.from_table_state(
            f"{norm(db)}.{norm(table)}", hwm, opens, aborted
        )
