"""SQL of the lock manager: creating lock requests and Hive's ``checkLock``.

Functions here run inside a store call's DB transaction (a :class:`~txn.db.Tx`).
Both backends serialise them on the ``NEXT_LOCK_ID`` row (SQLite: the write
lock), so the FIFO check sees every earlier request.
"""

from __future__ import annotations

from acid.errors import TransactionError
from txn.db import Tx
from txn.locks import LockRequest, LockResponse, LockState, LockType, lock_blocks
from txn.txn_sql import marks, norm, require_open

__all__ = ["check_lock", "create_lock", "insert_txn_components"]


def create_lock(tx: Tx, req: LockRequest, *, now: int) -> LockResponse:
    # Taking the next lock id row-locks NEXT_LOCK_ID until commit: lock creation and
    # checking are serialised, which is what makes FIFO-by-ext-id sound.
    row = tx.one("UPDATE NEXT_LOCK_ID SET NL_NEXT = NL_NEXT + 1 RETURNING NL_NEXT")
    assert row is not None
    ext = int(row[0]) - 1
    if req.txn_id:
        require_open(tx, [req.txn_id])
    hb = 0 if req.txn_id else now  # txn locks are kept alive by the txn's heartbeat
    tx.xmany(
        "INSERT INTO HIVE_LOCKS (HL_LOCK_EXT_ID, HL_LOCK_INT_ID, HL_TXNID, HL_DB, HL_TABLE, "
        "HL_PARTITION, HL_LOCK_STATE, HL_LOCK_TYPE, HL_LAST_HEARTBEAT, HL_USER, HL_HOST, "
        "HL_HEARTBEAT_COUNT, HL_AGENT_INFO) VALUES (?, ?, ?, ?, ?, ?, 'w', ?, ?, ?, ?, 0, ?)",
        [
            (
                ext,
                i + 1,
                req.txn_id,
                norm(c.db),
                None if c.table is None else norm(c.table),
                c.partition,
                c.type.value,
                hb,
                req.user,
                req.host,
                req.agent_info,
            )
            for i, c in enumerate(req.components)
        ],
    )
    if req.txn_id:
        insert_txn_components(tx, req)
    return check_lock(tx, ext, zero_wait=req.zero_wait_read, now=now)


def insert_txn_components(tx: Tx, req: LockRequest) -> None:
    comps: dict[tuple[str, str, str | None], str] = {}
    for c in req.components:
        if not (c.operation.is_write and c.is_transactional and c.table is not None):
            continue
        key = (
            norm(c.db),
            norm(c.table),
            None if c.is_dynamic_partition_write else c.partition,
        )
        op = c.operation.value
        # A DP write is recorded once per table: 'u' if any DP component updates or deletes.
        if comps.get(key) in ("u", "d") and op == "i":
            continue
        comps[key] = op
    if not comps:
        return
    wids: dict[tuple[str, str], int | None] = {}
    for d, t, _ in comps:
        if (d, t) not in wids:
            r = tx.one(
                "SELECT T2W_WRITEID FROM TXN_TO_WRITE_ID WHERE T2W_TXNID = ? "
                "AND T2W_DATABASE = ? AND T2W_TABLE = ?",
                req.txn_id,
                d,
                t,
            )
            wids[(d, t)] = None if r is None else int(r[0])
    tx.xmany(
        "INSERT INTO TXN_COMPONENTS (TC_TXNID, TC_DATABASE, TC_TABLE, TC_PARTITION, "
        "TC_OPERATION_TYPE, TC_WRITEID) VALUES (?, ?, ?, ?, ?, ?)",
        [(req.txn_id, d, t, p, op, wids[(d, t)]) for (d, t, p), op in comps.items()],
    )


def check_lock(tx: Tx, ext: int, *, zero_wait: bool, now: int) -> LockResponse:
    """Hive's ``checkLock``: FIFO against every lock with a smaller ext id."""
    mine = tx.q(
        "SELECT HL_LOCK_INT_ID, HL_TXNID, HL_DB, HL_TABLE, HL_PARTITION, HL_LOCK_TYPE, "
        "HL_LOCK_STATE FROM HIVE_LOCKS WHERE HL_LOCK_EXT_ID = ? ORDER BY HL_LOCK_INT_ID",
        ext,
    )
    if not mine:
        raise TransactionError(f"No such lock: {ext}")
    if all(m[6] == LockState.ACQUIRED.value for m in mine):
        return LockResponse(ext, LockState.ACQUIRED)
    dbs = sorted({m[2] for m in mine})
    others = tx.q(
        "SELECT HL_LOCK_EXT_ID, HL_LOCK_INT_ID, HL_TXNID, HL_DB, HL_TABLE, HL_PARTITION, "
        f"HL_LOCK_TYPE FROM HIVE_LOCKS WHERE HL_LOCK_EXT_ID < ? AND HL_DB IN ({marks(len(dbs))}) "
        "ORDER BY HL_LOCK_EXT_ID, HL_LOCK_INT_ID",
        ext,
        *dbs,
    )
    for m in mine:
        req = (m[1], LockType(m[5]), m[2], m[3], m[4])
        for o in others:
            if lock_blocks(req, (o[2], LockType(o[6]), o[3], o[4], o[5])):
                if zero_wait:
                    tx.x("DELETE FROM HIVE_LOCKS WHERE HL_LOCK_EXT_ID = ?", ext)
                    return LockResponse(ext, LockState.NOT_ACQUIRED, blocked_by=o[0])
                tx.x(
                    "UPDATE HIVE_LOCKS SET HL_BLOCKEDBY_EXT_ID = ?, HL_BLOCKEDBY_INT_ID = ? "
                    "WHERE HL_LOCK_EXT_ID = ? AND HL_LOCK_INT_ID = ?",
                    o[0],
                    o[1],
                    ext,
                    m[0],
                )
                return LockResponse(ext, LockState.WAITING, blocked_by=o[0])
    tx.x(
        "UPDATE HIVE_LOCKS SET HL_LOCK_STATE = 'a', HL_ACQUIRED_AT = ?, "
        "HL_BLOCKEDBY_EXT_ID = NULL, HL_BLOCKEDBY_INT_ID = NULL WHERE HL_LOCK_EXT_ID = ?",
        now,
        ext,
    )
    return LockResponse(ext, LockState.ACQUIRED)
