"""SQL shared by the transaction operations: state codes, open checks, aborts, the write set.

Functions here run inside a store call's DB transaction (a :class:`~acidstream.txn.db.Tx`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

from acidstream.acid.errors import CommitConflictError, TransactionError, TxnAbortedError
from acidstream.txn.db import Tx

__all__ = [
    "ABORT_ROLLBACK",
    "ABORT_TIMEOUT",
    "ABORT_WRITE_CONFLICT",
    "TxnState",
    "abort_txns",
    "check_open",
    "chunks",
    "marks",
    "norm",
    "require_open",
    "txn_hwm",
    "write_set_check",
]

ABORT_ROLLBACK = "ABORT_ROLLBACK"
"""Abort reason of an explicit rollback (Hive's ``TxnErrorMsg.ABORT_ROLLBACK``)."""
ABORT_TIMEOUT = "ABORT_TIMEOUT"
"""Abort reason of the heartbeat reaper."""
ABORT_WRITE_CONFLICT = "ABORT_WRITE_CONFLICT"
"""Abort reason of a write-write conflict at commit."""
_READ_ONLY_TXN = 2  # TxnType.READ_ONLY
_IN_CHUNK = 500  # ids per IN (...) list; both backends accept far more, this keeps SQL small


class TxnState(enum.Enum):
    """``TXNS.TXN_STATE`` codes."""

    OPEN = "o"
    ABORTED = "a"
    COMMITTED = "c"


def marks(n: int) -> str:
    """``n`` comma-separated ``?`` placeholders."""
    return ",".join("?" * n)


def chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    """Split ids into IN-list sized pieces."""
    for i in range(0, len(ids), _IN_CHUNK):
        yield ids[i : i + _IN_CHUNK]


def norm(name: str) -> str:
    """Database and table names are stored lower-cased, as Hive does."""
    return name.strip().lower()


def txn_hwm(tx: Tx) -> int:
    """The highest txn id ever opened (0 before the first)."""
    row = tx.one("SELECT NTXN_NEXT FROM NEXT_TXN_ID")
    assert row is not None, "NEXT_TXN_ID is seeded by the schema"
    return int(row[0]) - 1


def require_open(tx: Tx, txn_ids: Sequence[int], *, for_write: bool = False) -> None:
    """Row-lock the txns (PostgreSQL) and check they are open; raise the typed error if not."""
    rows: list[tuple[int, str, int]] = []
    for chunk in chunks(txn_ids):
        rows += tx.q(
            f"SELECT TXN_ID, TXN_STATE, TXN_TYPE FROM TXNS WHERE TXN_ID IN ({marks(len(chunk))}) "
            f"ORDER BY TXN_ID{tx.for_update}",
            *chunk,
        )
    check_open({r[0]: (r[1], r[2]) for r in rows}, txn_ids, for_write=for_write)


def check_open(
    found: dict[int, tuple[str, int]], txn_ids: Sequence[int], *, for_write: bool = False
) -> None:
    """Raise the typed error for the first txn of ``txn_ids`` that is not open.

    ``found`` maps txn id -> (state, txn type) as read from ``TXNS``.
    """
    for t in txn_ids:
        state, ttype = found.get(t, (None, 0))
        if state is None or t <= 0:
            raise TransactionError(f"No such transaction txnid:{t}")
        if state == TxnState.ABORTED.value:
            raise TxnAbortedError(f"Transaction txnid:{t} already aborted")
        if state == TxnState.COMMITTED.value:
            raise TransactionError(f"Transaction txnid:{t} is already committed")
        if for_write and ttype == _READ_ONLY_TXN:
            raise TransactionError(f"Transaction txnid:{t} is read-only")


def abort_txns(tx: Tx, txn_ids: Sequence[int], reason: str, now: int) -> None:
    """Abort open txns inside the current DB transaction, recording why, and drop their locks."""
    for chunk in chunks(txn_ids):
        qs = marks(len(chunk))
        tx.x(
            "UPDATE TXNS SET TXN_STATE = 'a', TXN_ABORT_REASON = ?, TXN_FINISHED = ? "
            f"WHERE TXN_ID IN ({qs}) AND TXN_STATE = 'o'",
            reason,
            now,
            *chunk,
        )
        # TXN_COMPONENTS stay: the compactor and cleaner need to know where aborted data is.
        tx.x(f"DELETE FROM HIVE_LOCKS WHERE HL_TXNID IN ({qs})", *chunk)


def write_set_check(
    tx: Tx, txn_id: int, comps: list[tuple[str, str | None, str | None, str]], now: int
) -> CommitConflictError | None:
    """Hive's write-write conflict check; on a conflict the txn is aborted in this DB txn."""
    # The commit mutex: commits with update/delete components run one at a time, so each
    # sees the WRITE_SET rows of every commit before it.
    tx.q(f"SELECT TXN_LOCK FROM TXN_LOCK_TBL{tx.for_update}")
    row = tx.one("SELECT NTXN_NEXT FROM NEXT_TXN_ID")
    assert row is not None
    commit_id = int(row[0]) - 1
    hit = tx.one(
        "SELECT ws.WS_TXNID, ws.WS_COMMIT_ID, ws.WS_DATABASE, ws.WS_TABLE, ws.WS_PARTITION, "
        "cur.TC_OPERATION_TYPE, ws.WS_OPERATION_TYPE FROM WRITE_SET ws JOIN "
        "(SELECT DISTINCT TC_DATABASE, TC_TABLE, TC_PARTITION, TC_OPERATION_TYPE "
        " FROM TXN_COMPONENTS WHERE TC_TXNID = ? AND TC_OPERATION_TYPE IN ('u', 'd')) cur "
        "ON ws.WS_DATABASE = cur.TC_DATABASE AND ws.WS_TABLE = cur.TC_TABLE AND "
        "(ws.WS_PARTITION = cur.TC_PARTITION OR "
        " (ws.WS_PARTITION IS NULL AND cur.TC_PARTITION IS NULL)) "
        "WHERE ws.WS_COMMIT_ID >= ? AND ws.WS_TXNID <> ? "
        "AND ws.WS_OPERATION_TYPE IN ('u', 'd') "
        "ORDER BY ws.WS_COMMIT_ID LIMIT 1",
        txn_id,
        txn_id,
        txn_id,
    )
    if hit is not None:
        other, other_commit, wdb, wtable, wpart, cur_op, their_op = hit
        where = f"{wdb}/{wtable}" + (f"/{wpart}" if wpart is not None else "")
        msg = (
            f"Aborting [txnid:{txn_id},{commit_id}] due to a write conflict on {where} "
            f"committed by [txnid:{other},{other_commit}] {cur_op}/{their_op}"
        )
        abort_txns(tx, [txn_id], f"{ABORT_WRITE_CONFLICT}: {msg}", now)
        return CommitConflictError(msg)
    seen = sorted({(c[0], c[1], c[2], c[3]) for c in comps if c[3] in ("u", "d") and c[1]})
    tx.xmany(
        "INSERT INTO WRITE_SET (WS_DATABASE, WS_TABLE, WS_PARTITION, WS_TXNID, WS_COMMIT_ID, "
        "WS_OPERATION_TYPE) VALUES (?, ?, ?, ?, ?, ?)",
        [(d, t, p, txn_id, commit_id, op) for d, t, p, op in seen],
    )
    tx.crash_point("commit_txn.after_write_set")
    return None
