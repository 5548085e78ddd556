"""The lock manager: creating lock requests, Hive's ``checkLock``, and :class:`LockOps`.

Functions here run inside a store call's DB transaction (a :class:`~acidstream.txn.db.Tx`);
:class:`LockOps` is the lock half of :class:`~acidstream.txn.store.TxnStore`.
Both backends serialise them on the ``NEXT_LOCK_ID`` row (SQLite: the write
lock), so the FIFO check sees every earlier request.
"""

from __future__ import annotations

import time

from acidstream.acid.errors import LockTimeoutError, TransactionError
from acidstream.txn.db import Tx
from acidstream.txn.locks import (
    LockInfo,
    LockRequest,
    LockResponse,
    LockState,
    LockType,
    lock_blocks,
)
from acidstream.txn.store_ops import StoreOps
from acidstream.txn.txn_sql import marks, norm, require_open

__all__ = ["LockOps", "check_lock", "create_lock", "insert_txn_components"]


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


class LockOps(StoreOps):
    """Locks: the lock-manager half of :class:`~acidstream.txn.store.TxnStore`."""

    def lock(self, request: LockRequest, *, wait_s: float = 0.0) -> LockResponse:
        """Hive's ``lock``: record the request's components and try to acquire them all.

        Write operations of a txn are recorded in ``TXN_COMPONENTS`` (a dynamic-partition
        write once per table with a NULL partition). Without ``wait_s`` the call does not
        block: the response may be WAITING, and :meth:`check_lock` polls it.

        Raises:
            LockTimeoutError: ``wait_s`` > 0 and the lock was not acquired in time (the
                waiting request is withdrawn).
            TxnAbortedError: the owning txn is aborted.
        """
        resp = self._db.run("lock", lambda tx: create_lock(tx, request, now=self._now_ms()))
        if resp.state is LockState.WAITING and wait_s > 0:
            return self.wait_for_lock(resp.lock_id, timeout_s=wait_s)
        return resp

    def check_lock(self, lock_id: int) -> LockResponse:
        """Re-check a waiting lock (Hive's ``checkLock``); acquires it if nothing is in the way.

        Raises:
            TransactionError: no such lock (e.g. released when its txn was aborted).
        """

        def body(tx: Tx) -> LockResponse:
            tx.q(f"SELECT NL_NEXT FROM NEXT_LOCK_ID{tx.for_update}")  # the checkLock mutex
            return check_lock(tx, lock_id, zero_wait=False, now=self._now_ms())

        return self._db.run("check_lock", body, idempotent=True)

    def wait_for_lock(
        self, lock_id: int, *, timeout_s: float, max_poll_s: float = 0.1
    ) -> LockResponse:
        """Poll :meth:`check_lock` with backoff until acquired or ``timeout_s`` passes.

        Raises:
            LockTimeoutError: not acquired in time; the request is withdrawn.
        """
        deadline = time.monotonic() + timeout_s
        delay = 0.002
        while True:
            resp = self.check_lock(lock_id)
            if resp.state is LockState.ACQUIRED:
                return resp
            left = deadline - time.monotonic()
            if left <= 0:
                self._db.run(
                    "withdraw_lock",
                    lambda tx: tx.x("DELETE FROM HIVE_LOCKS WHERE HL_LOCK_EXT_ID = ?", lock_id),
                    idempotent=True,
                )
                raise LockTimeoutError(
                    f"lock {lock_id} not acquired within {timeout_s:g}s "
                    f"(blocked by lock {resp.blocked_by})"
                )
            time.sleep(min(delay, left))
            delay = min(delay * 2, max_poll_s)

    def unlock(self, lock_id: int) -> None:
        """Release a lock taken outside any txn (txn locks go with commit or abort, as in Hive).

        Raises:
            TransactionError: no such lock, or the lock belongs to a transaction.
        """

        def body(tx: Tx) -> None:
            rows = tx.q("SELECT HL_TXNID FROM HIVE_LOCKS WHERE HL_LOCK_EXT_ID = ?", lock_id)
            if not rows:
                raise TransactionError(f"No such lock: {lock_id}")
            if any(r[0] for r in rows):
                raise TransactionError(
                    f"Unlocking locks associated with transaction not permitted (lock {lock_id})"
                )
            tx.x("DELETE FROM HIVE_LOCKS WHERE HL_LOCK_EXT_ID = ?", lock_id)

        self._db.run("unlock", body)

    def heartbeat_lock(self, lock_id: int) -> None:
        """Keep a lock taken outside any txn alive (txn locks live as long as their txn)."""

        def body(tx: Tx) -> None:
            n = tx.count(
                "UPDATE HIVE_LOCKS SET HL_LAST_HEARTBEAT = ? WHERE HL_LOCK_EXT_ID = ? "
                "AND HL_TXNID = 0",
                self._now_ms(),
                lock_id,
            )
            if n == 0:
                raise TransactionError(f"No such lock: {lock_id}")

        self._db.run("heartbeat_lock", body, idempotent=True)

    def show_locks(self) -> list[LockInfo]:
        """Every lock (SHOW LOCKS), by ext id then int id."""
        rows = self._db.run(
            "show_locks",
            lambda tx: tx.q(
                "SELECT HL_LOCK_EXT_ID, HL_LOCK_INT_ID, HL_DB, HL_TABLE, HL_PARTITION, "
                "HL_LOCK_STATE, HL_BLOCKEDBY_EXT_ID, HL_LOCK_TYPE, HL_TXNID, HL_LAST_HEARTBEAT, "
                "HL_ACQUIRED_AT, HL_USER, HL_HOST, HL_AGENT_INFO FROM HIVE_LOCKS "
                "ORDER BY HL_LOCK_EXT_ID, HL_LOCK_INT_ID"
            ),
            write=False,
            idempotent=True,
        )
        return [
            LockInfo(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                LockState(r[5]),
                r[6],
                LockType(r[7]),
                r[8],
                r[9],
                r[10],
                r[11],
                r[12],
                r[13] or "",
            )
            for r in rows
        ]
