"""The transaction and lock manager plus catalog: :class:`TxnStore` and :func:`open_store`.

This is Hive's metastore ``TxnHandler`` (spec §6) re-done over one small SQL
schema (:mod:`txn.migrations`) shared by two backends, chosen by URL:

* ``sqlite:///path/metastore.db`` -- embedded, one file, several processes on one host;
* ``postgresql://user@host:port/db[?schema=name]`` -- a server, many processes and hosts.

Every public method is one database transaction (:meth:`txn.db.Database.run`),
so a crash or a lost connection never leaves half an operation behind. Times
are milliseconds since the epoch, as in Hive.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

from acid.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    ConfigError,
    LockTimeoutError,
    TransactionError,
    TxnAbortedError,
)
from acid.snapshot import ValidCompactorWriteIdList, ValidTxnList, ValidWriteIdList
from txn import catalog_sql, lock_sql, snapshot_sql
from txn.catalog import PartitionInfo
from txn.catalog_sql import CatalogOps
from txn.db import Database, Tx
from txn.locks import (
    DataOperationType,
    LockInfo,
    LockRequest,
    LockResponse,
    LockState,
    LockType,
)
from txn.migrations import MIGRATIONS, SCHEMA_VERSION
from txn.txn_sql import (
    ABORT_ROLLBACK,
    ABORT_TIMEOUT,
    TxnState,
    abort_txns,
    check_open,
    chunks,
    marks,
    norm,
    require_open,
    write_set_check,
)

__all__ = [
    "DEFAULT_TXN_TIMEOUT_S",
    "MAX_OPEN_BATCH",
    "TXN_KEY_START",
    "HeartbeatResult",
    "TxnInfo",
    "TxnState",
    "TxnStore",
    "open_store",
]

MAX_OPEN_BATCH = 1000
"""``hive.txn.max.open.batch``: ``open_txns`` silently caps its count here."""
DEFAULT_TXN_TIMEOUT_S = 300.0
"""``hive.txn.timeout``: open txns without a heartbeat for this long are aborted by the reaper."""
TXN_KEY_START = "_meta"
"""``TxnStore.TXN_KEY_START``: commit key/value keys must start with it."""


@dataclass(frozen=True)
class HeartbeatResult:
    """Hive's ``HeartbeatTxnRangeResponse``: txns of the range that were not heartbeaten.

    ``nosuch`` holds ids that do not exist or are already committed.
    """

    aborted: frozenset[int]
    nosuch: frozenset[int]


@dataclass(frozen=True)
class TxnInfo:
    """One ``TXNS`` row, as SHOW TRANSACTIONS prints it (plus agent and abort reason)."""

    txn_id: int
    state: TxnState
    started_ms: int
    last_heartbeat_ms: int
    user: str
    host: str
    agent_info: str
    abort_reason: str | None


def _check_commit_key(
    key: str | None, value: str | None, db: str | None, table: str | None
) -> None:
    if (key is None) != (value is None):
        raise ValueError("key and value must be given together")
    if key is not None:
        if not key.startswith(TXN_KEY_START):
            raise ValueError(f"commit key must start with {TXN_KEY_START!r}: {key!r}")
        if db is None or table is None:
            raise ValueError("a commit key/value needs db and table")


def _in(ids: Sequence[int]) -> str:
    return "(" + ",".join("?" * len(ids)) + ")"


def _complete_components(tx: Tx, ids: Sequence[int], now: int, *, op: str) -> None:
    """Move committing txns' components to COMPLETED_TXN_COMPONENTS (Hive's commitTxn)."""
    tx.x(
        "INSERT INTO COMPLETED_TXN_COMPONENTS (CTC_TXNID, CTC_DATABASE, CTC_TABLE, "
        "CTC_PARTITION, CTC_TIMESTAMP, CTC_WRITEID, CTC_UPDATE_DELETE) "
        "SELECT TC_TXNID, TC_DATABASE, TC_TABLE, TC_PARTITION, ?, TC_WRITEID, "
        "CASE WHEN TC_OPERATION_TYPE IN ('u', 'd') THEN 'Y' ELSE 'N' END "
        f"FROM TXN_COMPONENTS WHERE TC_TXNID IN {_in(ids)} AND TC_OPERATION_TYPE <> 'c'",
        now,
        *ids,
    )
    tx.crash_point(f"{op}.after_completed_components")
    tx.x(f"DELETE FROM TXN_COMPONENTS WHERE TC_TXNID IN {_in(ids)}", *ids)


def _mark_committed(tx: Tx, ids: Sequence[int], now: int) -> None:
    tx.x(f"DELETE FROM HIVE_LOCKS WHERE HL_TXNID IN {_in(ids)}", *ids)
    tx.x(f"UPDATE TXNS SET TXN_STATE = 'c', TXN_FINISHED = ? WHERE TXN_ID IN {_in(ids)}", now, *ids)


class TxnStore(CatalogOps):
    """Transactions, write ids, locks, read snapshots and the table catalog in one database.

    Open one with :func:`open_store`. A store holds one connection; it may be
    shared by threads of a process (calls are serialised) but each process
    should open its own. Use it as a context manager or call :meth:`close`.

    Args:
        db: The backend connection.
        warehouse: Root directory under which table locations default.
        clock: Seconds since the epoch; injectable so heartbeat and timeout
            behaviour can be tested without waiting.
    """

    def __init__(
        self,
        db: Database,
        *,
        warehouse: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = db
        self.warehouse = warehouse.rstrip("/") if warehouse else None
        self._clock = clock
        self.schema_version = self._db.run("migrate", self._migrate)

    # -- plumbing ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The URL this store was opened with (another process can open the same store)."""
        return self._db.url

    @property
    def database(self) -> Database:
        """The backend connection (tests use its crash hook and backend pid)."""
        return self._db

    def close(self) -> None:
        """Close the connection; the store may not be used afterwards."""
        self._db.close()

    def __enter__(self) -> TxnStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _migrate(self, tx: Tx) -> int:
        self._db._lock_for_migration(tx)
        tx.x("CREATE TABLE IF NOT EXISTS SCHEMA_VERSION (VERSION INTEGER NOT NULL)")
        row = tx.one("SELECT MAX(VERSION) FROM SCHEMA_VERSION")
        current = int(row[0]) if row and row[0] is not None else 0
        if current > SCHEMA_VERSION:
            raise ConfigError(
                f"metastore schema version {current} is newer than this acidstream "
                f"({SCHEMA_VERSION}); upgrade acidstream"
            )
        for version, statements in MIGRATIONS:
            if version > current:
                for sql in statements:
                    tx.x(sql)
                tx.x("INSERT INTO SCHEMA_VERSION (VERSION) VALUES (?)", version)
        return SCHEMA_VERSION

    # -- transactions -----------------------------------------------------------------------
    def open_txns(self, n: int, *, user: str, host: str, agent_info: str = "") -> list[int]:
        """Open ``n`` transactions in one round trip (Hive's ``openTxns``).

        ``n`` is silently capped at 1000 (``hive.txn.max.open.batch``). Returns consecutive
        ascending txn ids.
        """
        if n <= 0:
            raise ValueError("open_txns needs n >= 1")
        n = min(n, MAX_OPEN_BATCH)

        def body(tx: Tx) -> list[int]:
            now = self._now_ms()
            row = tx.one("UPDATE NEXT_TXN_ID SET NTXN_NEXT = NTXN_NEXT + ? RETURNING NTXN_NEXT", n)
            assert row is not None, "NEXT_TXN_ID is seeded by the schema"
            first = int(row[0]) - n
            ids = list(range(first, first + n))
            sql = (
                "INSERT INTO TXNS (TXN_ID, TXN_STATE, TXN_STARTED, TXN_LAST_HEARTBEAT, TXN_USER, "
                "TXN_HOST, TXN_AGENT_INFO) VALUES (?, 'o', ?, ?, ?, ?, ?)"
            )
            if n == 1:
                tx.x(sql, first, now, now, user, host, agent_info)
            else:
                tx.xmany(sql, [(t, now, now, user, host, agent_info) for t in ids])
            return ids

        return self._db.run("open_txns", body)

    def txn_state(self, txn_id: int) -> TxnState | None:
        """The state of a transaction, or ``None`` if it does not exist."""
        if txn_id <= 0:
            return None
        row = self._db.run(
            "txn_state",
            lambda tx: tx.one("SELECT TXN_STATE FROM TXNS WHERE TXN_ID = ?", txn_id),
            write=False,
            idempotent=True,
        )
        return None if row is None else TxnState(row[0])

    def allocate_write_ids(self, txn_ids: Sequence[int], db: str, table: str) -> dict[int, int]:
        """Hive's ``allocateTableWriteIds``: per-table write ids for txns, in txn order.

        A txn that already has a write id for the table keeps it (idempotent). Write ids are
        dense per table and start at 1. Every txn must be open.

        Returns:
            txn id -> write id.
        """
        ids = sorted(set(txn_ids))
        if not ids:
            return {}
        db, table = norm(db), norm(table)

        def body(tx: Tx) -> dict[int, int]:
            # One query checks the txns (row-locking them against a concurrent abort) and
            # finds the write ids they already have for this table.
            have: dict[int, int] = {}
            found: dict[int, tuple[str, int]] = {}
            for chunk in chunks(ids):
                rows = tx.q(
                    "SELECT t.TXN_ID, t.TXN_STATE, t.TXN_TYPE, w.T2W_WRITEID FROM TXNS t "
                    "LEFT JOIN TXN_TO_WRITE_ID w ON w.T2W_TXNID = t.TXN_ID "
                    "AND w.T2W_DATABASE = ? AND w.T2W_TABLE = ? "
                    f"WHERE t.TXN_ID IN ({marks(len(chunk))}) ORDER BY t.TXN_ID"
                    + tx.for_update_of("t"),
                    db,
                    table,
                    *chunk,
                )
                for t, state, ttype, wid in rows:
                    found[t] = (state, ttype)
                    if wid is not None:
                        have[t] = int(wid)
            check_open(found, ids, for_write=True)
            new = [t for t in ids if t not in have]
            if new:
                bump = (
                    "UPDATE NEXT_WRITE_ID SET NWI_NEXT = NWI_NEXT + ? "
                    "WHERE NWI_DATABASE = ? AND NWI_TABLE = ? RETURNING NWI_NEXT"
                )
                row = tx.one(bump, len(new), db, table)
                if row is None:
                    # First write to this table: the first write id is 1. ON CONFLICT covers a
                    # concurrent first allocation (PostgreSQL; SQLite writers are serialised).
                    tx.x(
                        "INSERT INTO NEXT_WRITE_ID (NWI_DATABASE, NWI_TABLE, NWI_NEXT) "
                        "VALUES (?, ?, 1) ON CONFLICT (NWI_DATABASE, NWI_TABLE) DO NOTHING",
                        db,
                        table,
                    )
                    row = tx.one(bump, len(new), db, table)
                assert row is not None
                first = int(row[0]) - len(new)
                fresh = {t: first + i for i, t in enumerate(new)}
                sql = (
                    "INSERT INTO TXN_TO_WRITE_ID (T2W_TXNID, T2W_DATABASE, T2W_TABLE, T2W_WRITEID) "
                    "VALUES (?, ?, ?, ?)"
                )
                if len(new) == 1:
                    tx.x(sql, new[0], db, table, first)
                else:
                    tx.xmany(sql, [(t, db, table, w) for t, w in fresh.items()])
                have.update(fresh)
            return {t: have[t] for t in ids}

        return self._db.run("allocate_write_ids", body)

    def write_id_for_txn(self, txn_id: int, db: str, table: str) -> int | None:
        """The write id a txn got for a table, or ``None``."""
        row = self._db.run(
            "write_id_for_txn",
            lambda tx: tx.one(
                "SELECT T2W_WRITEID FROM TXN_TO_WRITE_ID WHERE T2W_TXNID = ? AND T2W_DATABASE = ? "
                "AND T2W_TABLE = ?",
                txn_id,
                norm(db),
                norm(table),
            ),
            write=False,
            idempotent=True,
        )
        return None if row is None else int(row[0])

    def txn_for_write_id(self, db: str, table: str, write_id: int) -> int | None:
        """The txn that holds a table's write id, or ``None``."""
        row = self._db.run(
            "txn_for_write_id",
            lambda tx: tx.one(
                "SELECT T2W_TXNID FROM TXN_TO_WRITE_ID WHERE T2W_DATABASE = ? AND T2W_TABLE = ? "
                "AND T2W_WRITEID = ?",
                norm(db),
                norm(table),
                write_id,
            ),
            write=False,
            idempotent=True,
        )
        return None if row is None else int(row[0])

    def commit_txn(
        self,
        txn_id: int,
        *,
        key: str | None = None,
        value: str | None = None,
        db: str | None = None,
        table: str | None = None,
    ) -> None:
        """Commit a transaction (Hive's ``commitTxn`` / ``commitTxnWithKeyValue``).

        With ``key``/``value``, the pair is stored in the table's parameters in the same
        database transaction as the commit, so it is visible if and only if the commit
        landed; this is what exactly-once sinks build on. ``key`` must start with ``_meta``.

        Committing an already committed txn does nothing (Hive is idempotent here).

        Raises:
            TxnAbortedError: the txn was aborted (by a caller or the reaper).
            CommitConflictError: a write-write conflict; the txn is now aborted.
            CommitStateUnknownError: the connection was lost during COMMIT; ask
                :meth:`txn_state` later, and do not delete the txn's files.
            TransactionError: no such txn, or the store failed before committing.
        """
        _check_commit_key(key, value, db, table)

        def body(tx: Tx) -> CommitConflictError | None:
            now = self._now_ms()
            row = tx.one(
                "SELECT t.TXN_STATE, (SELECT COUNT(*) FROM TXN_COMPONENTS c "
                "WHERE c.TC_TXNID = t.TXN_ID) FROM TXNS t WHERE t.TXN_ID = ?"
                + tx.for_update_of("t"),
                txn_id,
            )
            if row is None or txn_id <= 0:
                raise TransactionError(f"No such transaction txnid:{txn_id}")
            if row[0] == TxnState.COMMITTED.value:
                return None
            if row[0] == TxnState.ABORTED.value:
                raise TxnAbortedError(f"Transaction txnid:{txn_id} already aborted")
            comps: list[tuple[str, str | None, str | None, str]] = []
            if row[1]:
                comps = tx.q(
                    "SELECT TC_DATABASE, TC_TABLE, TC_PARTITION, TC_OPERATION_TYPE "
                    "FROM TXN_COMPONENTS WHERE TC_TXNID = ?",
                    txn_id,
                )
            if any(c[3] in ("u", "d") for c in comps):
                conflict = write_set_check(tx, txn_id, comps, now)
                if conflict is not None:
                    return conflict
            if comps:
                _complete_components(tx, [txn_id], now, op="commit_txn")
            if key is not None and value is not None and db is not None and table is not None:
                catalog_sql.set_table_param(tx, db, table, key, value)
                tx.crash_point("commit_txn.after_key_value")
            _mark_committed(tx, [txn_id], now)
            return None

        conflict = self._db.run("commit_txn", body, unknown=CommitStateUnknownError)
        if conflict is not None:
            raise conflict

    def commit_txns(
        self,
        txn_ids: Sequence[int],
        *,
        key: str | None = None,
        value: str | None = None,
        db: str | None = None,
        table: str | None = None,
    ) -> None:
        """Commit several insert-only txns, and optionally one key/value, atomically.

        A streaming transaction batch whose txns must become visible together (an
        exactly-once sink's micro-batch: committing them one by one would let a crash
        between two commits duplicate the first ones on replay). Either every txn
        commits, with the key/value, or none does. Committing a batch that is already
        wholly committed does nothing.

        Raises:
            TxnAbortedError: one of the txns was aborted (none is committed).
            CommitStateUnknownError: the connection was lost during COMMIT.
            TransactionError: no such txn; a txn with update/delete components (those
                commit one by one, with their write-set check); the batch is partly
                committed already; or the store failed before committing.
        """
        _check_commit_key(key, value, db, table)
        ids = sorted(set(txn_ids))
        if not ids:
            raise ValueError("no txns to commit")

        def body(tx: Tx) -> None:
            now = self._now_ms()
            rows = tx.q(
                "SELECT t.TXN_ID, t.TXN_STATE, (SELECT COUNT(*) FROM TXN_COMPONENTS c "
                "WHERE c.TC_TXNID = t.TXN_ID AND c.TC_OPERATION_TYPE IN ('u', 'd')) "
                f"FROM TXNS t WHERE t.TXN_ID IN {_in(ids)} ORDER BY t.TXN_ID"
                + tx.for_update_of("t"),
                *ids,
            )
            found = {int(r[0]): (str(r[1]), int(r[2])) for r in rows}
            missing = [t for t in ids if t not in found]
            if missing or ids[0] <= 0:
                raise TransactionError(
                    f"No such transaction txnid:{missing[0] if missing else ids[0]}"
                )
            states = {st for st, _ in found.values()}
            if states == {TxnState.COMMITTED.value}:
                return
            aborted = [t for t, (st, _) in found.items() if st == TxnState.ABORTED.value]
            if aborted:
                raise TxnAbortedError(f"Transaction txnid:{aborted[0]} already aborted")
            if states != {TxnState.OPEN.value}:
                raise TransactionError(f"txns {ids} are partly committed already")
            upd = [t for t, (_, n) in found.items() if n]
            if upd:
                raise TransactionError(
                    f"txn {upd[0]} has update/delete components: commit it on its own"
                )
            _complete_components(tx, ids, now, op="commit_txns")
            if key is not None and value is not None and db is not None and table is not None:
                catalog_sql.set_table_param(tx, db, table, key, value)
            tx.crash_point("commit_txns.before_state")
            _mark_committed(tx, ids, now)

        self._db.run("commit_txns", body, unknown=CommitStateUnknownError)

    def abort_txn(self, txn_id: int, *, reason: str = ABORT_ROLLBACK) -> None:
        """Abort (roll back) a transaction and release its locks, recording why.

        Aborting an aborted txn does nothing.

        Raises:
            TransactionError: no such txn, or it is already committed.
        """

        def body(tx: Tx) -> None:
            row = tx.one(f"SELECT TXN_STATE FROM TXNS WHERE TXN_ID = ?{tx.for_update}", txn_id)
            if row is None or txn_id <= 0:
                raise TransactionError(f"No such transaction txnid:{txn_id}")
            if row[0] == TxnState.COMMITTED.value:
                raise TransactionError(f"Transaction txnid:{txn_id} is already committed")
            if row[0] == TxnState.OPEN.value:
                abort_txns(tx, [txn_id], reason, self._now_ms())

        self._db.run("abort_txn", body, idempotent=True)

    def heartbeat_txn_range(self, lo: int, hi: int) -> HeartbeatResult:
        """Hive's ``heartbeatTxnRange``: refresh the heartbeat of the open txns in ``[lo, hi]``.

        Returns:
            The txns of the range that are aborted, and those that do not exist (or are
            committed). A streaming batch treats either as fatal.
        """
        lo = max(lo, 1)

        def body(tx: Tx) -> HeartbeatResult:
            tx.x(
                "UPDATE TXNS SET TXN_LAST_HEARTBEAT = ?, "
                "TXN_HEARTBEAT_COUNT = TXN_HEARTBEAT_COUNT + 1 "
                "WHERE TXN_ID >= ? AND TXN_ID <= ? AND TXN_STATE = 'o'",
                self._now_ms(),
                lo,
                hi,
            )
            rows = tx.q(
                "SELECT TXN_ID, TXN_STATE FROM TXNS WHERE TXN_ID >= ? AND TXN_ID <= ?", lo, hi
            )
            states: dict[int, str] = {int(r[0]): str(r[1]) for r in rows}
            aborted = frozenset(t for t, s in states.items() if s == TxnState.ABORTED.value)
            nosuch = frozenset(t for t in range(lo, hi + 1) if states.get(t) not in ("o", "a"))
            return HeartbeatResult(aborted=aborted, nosuch=nosuch)

        return self._db.run("heartbeat_txn_range", body, idempotent=True)

    def reap_timed_out(
        self, *, timeout_s: float = DEFAULT_TXN_TIMEOUT_S, now: float | None = None
    ) -> list[int]:
        """Abort open txns whose last heartbeat is older than ``timeout_s`` (Hive's
        ``performTimeOuts``), releasing their locks; also drop stale non-txn locks.

        Args:
            timeout_s: ``hive.txn.timeout``.
            now: Seconds since the epoch to judge against (default: the store clock).

        Returns:
            The aborted txn ids.
        """
        now_ms = int((self._clock() if now is None else now) * 1000)
        cutoff = now_ms - int(timeout_s * 1000)
        reason = f"{ABORT_TIMEOUT}: no heartbeat for more than {timeout_s:g}s"

        def body(tx: Tx) -> list[int]:
            rows = tx.q(
                "SELECT TXN_ID FROM TXNS WHERE TXN_STATE = 'o' AND TXN_LAST_HEARTBEAT < ? "
                f"ORDER BY TXN_ID{tx.for_update}",
                cutoff,
            )
            ids = [int(r[0]) for r in rows]
            abort_txns(tx, ids, reason, now_ms)
            tx.x("DELETE FROM HIVE_LOCKS WHERE HL_TXNID = 0 AND HL_LAST_HEARTBEAT < ?", cutoff)
            return ids

        return self._db.run("reap_timed_out", body, idempotent=True)

    def show_txns(self) -> list[TxnInfo]:
        """Every transaction (SHOW TRANSACTIONS), ascending."""
        rows = self._db.run(
            "show_txns",
            lambda tx: tx.q(
                "SELECT TXN_ID, TXN_STATE, TXN_STARTED, TXN_LAST_HEARTBEAT, TXN_USER, TXN_HOST, "
                "TXN_AGENT_INFO, TXN_ABORT_REASON FROM TXNS WHERE TXN_ID > 0 ORDER BY TXN_ID"
            ),
            write=False,
            idempotent=True,
        )
        return [
            TxnInfo(r[0], TxnState(r[1]), r[2], r[3], r[4], r[5], r[6] or "", r[7]) for r in rows
        ]

    # -- read snapshots ---------------------------------------------------------------------
    def get_valid_txns(self, current_txn: int = 0) -> ValidTxnList:
        """Hive's ``getOpenTxns`` + ``createValidReadTxnList(resp, currentTxn)``.

        The hwm is the highest txn id; open and aborted txns below it are exceptions. With a
        current txn, the hwm is capped at it and only txns below it are exceptions, so a txn
        sees its own writes.
        """
        hwm, rows = self._db.run(
            "get_valid_txns", snapshot_sql.read_txn_snapshot, write=False, idempotent=True
        )
        return snapshot_sql.valid_read_txn_list(hwm, rows, current_txn)

    def _table_write_state(
        self, db: str, table: str, valid_txns: ValidTxnList
    ) -> tuple[int, list[int], list[int], int]:
        write_hwm, rows, found_valid = self._db.run(
            "get_valid_write_ids",
            lambda tx: snapshot_sql.read_table_writes(tx, norm(db), norm(table), valid_txns),
            write=False,
            idempotent=True,
        )
        return snapshot_sql.table_write_state(valid_txns, write_hwm, rows, found_valid)

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

    # -- locks ------------------------------------------------------------------------------
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
        resp = self._db.run(
            "lock", lambda tx: lock_sql.create_lock(tx, request, now=self._now_ms())
        )
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
            return lock_sql.check_lock(tx, lock_id, zero_wait=False, now=self._now_ms())

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

    def add_dynamic_partitions(
        self,
        txn_id: int,
        write_id: int,
        db: str,
        table: str,
        part_names: Sequence[str],
        op: DataOperationType = DataOperationType.UNSET,
    ) -> list[PartitionInfo]:
        """Hive's ``addDynamicPartitions``: name the partitions a dynamic-partition write
        touched.

        Replaces the txn's NULL-partition placeholder component of the table with one
        component per partition (op defaults to UPDATE when UNSET, as in Hive) and
        registers missing partitions in the catalog.
        """
        code = "u" if op is DataOperationType.UNSET else op.value
        if code not in ("i", "u", "d"):
            raise ValueError(f"dynamic partitions need an INSERT/UPDATE/DELETE op, not {op}")
        db, table = norm(db), norm(table)

        def body(tx: Tx) -> list[PartitionInfo]:
            require_open(tx, [txn_id])
            infos = catalog_sql.ensure_partitions_by_name(
                tx, db, table, part_names, now_ms=self._now_ms()
            )
            tx.x(
                "DELETE FROM TXN_COMPONENTS WHERE TC_TXNID = ? AND TC_DATABASE = ? "
                "AND TC_TABLE = ? AND TC_PARTITION IS NULL",
                txn_id,
                db,
                table,
            )
            tx.xmany(
                "INSERT INTO TXN_COMPONENTS (TC_TXNID, TC_DATABASE, TC_TABLE, TC_PARTITION, "
                "TC_OPERATION_TYPE, TC_WRITEID) VALUES (?, ?, ?, ?, ?, ?)",
                [(txn_id, db, table, p.name, code, write_id) for p in infos],
            )
            return infos

        return self._db.run("add_dynamic_partitions", body)

    def txn_components(
        self, txn_id: int
    ) -> list[tuple[str, str | None, str | None, str, int | None]]:
        """The txn's ``TXN_COMPONENTS`` rows ``(db, table, partition, op, write id)``."""
        return self._db.run(
            "txn_components",
            lambda tx: tx.q(
                "SELECT TC_DATABASE, TC_TABLE, TC_PARTITION, TC_OPERATION_TYPE, TC_WRITEID "
                "FROM TXN_COMPONENTS WHERE TC_TXNID = ? ORDER BY TC_DATABASE, TC_TABLE, "
                "TC_PARTITION",
                txn_id,
            ),
            write=False,
            idempotent=True,
        )


def open_store(
    url: str, *, warehouse: str | None = None, clock: Callable[[], float] = time.time
) -> TxnStore:
    """Open (and create or migrate) the store at ``url``.

    Args:
        url: ``sqlite:///path/to/metastore.db`` or ``postgresql://user@host:port/db``
            (optionally ``?schema=name``).
        warehouse: Root directory under which table locations default.
        clock: Seconds since the epoch (tests inject one).

    Raises:
        ConfigError: unknown URL scheme.
    """
    db: Database
    if url.startswith("sqlite:"):
        from txn.store_sqlite import SqliteDatabase

        try:
            db = SqliteDatabase(url)
        except ValueError as e:
            raise ConfigError(str(e)) from e
    elif url.startswith(("postgresql:", "postgres:")):
        from txn.store_postgres import PostgresDatabase

        try:
            db = PostgresDatabase(url)
        except ValueError as e:
            raise ConfigError(str(e)) from e
    else:
        raise ConfigError(
            f"metastore URL must start with sqlite:/// or postgresql://, not {url.split(':')[0]!r}"
        )
    return TxnStore(db, warehouse=warehouse, clock=clock)
