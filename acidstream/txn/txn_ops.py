"""The transaction half of the store: open, write ids, commit, abort, heartbeat, time-outs.

Hive's ``TxnHandler`` transaction calls (spec §6.3) as the :class:`TxnOps` mixin of
:class:`~acidstream.txn.store.TxnStore`; every method is one database transaction. The SQL shared
with the other mixins (state codes, aborts, the write-set check) is in :mod:`acidstream.txn.txn_sql`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from acidstream.acid.errors import (
    CommitConflictError,
    CommitKeyExistsError,
    CommitStateUnknownError,
    ConfigError,
    TransactionError,
    TxnAbortedError,
)
from acidstream.txn import catalog_sql
from acidstream.txn.catalog import PartitionInfo
from acidstream.txn.db import Tx
from acidstream.txn.lock_sql import create_lock
from acidstream.txn.locks import DataOperationType, LockRequest, LockResponse, LockState
from acidstream.txn.settings import TXN_TIMEOUT_S, setting_value
from acidstream.txn.store_ops import StoreOps
from acidstream.txn.txn_sql import (
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
    "MAX_OPEN_BATCH",
    "TXN_KEY_START",
    "HeartbeatResult",
    "OpenedBatch",
    "TxnInfo",
    "TxnOps",
]

MAX_OPEN_BATCH = 1000
"""``hive.txn.max.open.batch``: ``open_txns`` silently caps its count here."""
TXN_KEY_START = "_meta"
"""``TxnStore.TXN_KEY_START``: commit key/value keys must start with it."""


@dataclass(frozen=True)
class HeartbeatResult:
    """Hive's ``HeartbeatTxnRangeResponse``, plus the committed txns of the range.

    Every txn of the range is in at most one set; the open ones (heartbeaten) are in none.

    Attributes:
        aborted: Txns the metastore aborted (by a caller, the reaper or a conflict).
        nosuch: Txns without a record: never opened, or purged long after they ended
            (Hive's name; "unknown").
        committed: Txns already committed. A heartbeat racing its own batch's commit
            sees these; they are not lost.
    """

    aborted: frozenset[int]
    nosuch: frozenset[int]
    committed: frozenset[int] = frozenset()

    @property
    def lost(self) -> frozenset[int]:
        """The txns a writer holding the range has lost: aborted or unknown."""
        return self.aborted | self.nosuch


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


@dataclass(frozen=True)
class OpenedBatch:
    """What :meth:`TxnOps.open_batch` opened.

    Attributes:
        txn_ids: The txns, consecutive and ascending.
        write_ids: Their write ids of the table, in the same order (consecutive).
        lock: The first txn's lock, ACQUIRED or NOT_ACQUIRED (nothing of it left);
            ``None`` when none was asked for.
    """

    txn_ids: tuple[int, ...]
    write_ids: tuple[int, ...]
    lock: LockResponse | None


def _check_commit_key(
    key: str | None, value: str | None, db: str | None, table: str | None
) -> None:
    if (key is None) != (value is None):
        raise ConfigError("key and value must be given together")
    if key is not None:
        if not key.startswith(TXN_KEY_START):
            raise ConfigError(f"commit key must start with {TXN_KEY_START!r}: {key!r}")
        if db is None or table is None:
            raise ConfigError("a commit key/value needs db and table")


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


def _lock_next(tx: Tx, req: LockRequest | None, now: int) -> LockResponse | None:
    """Request ``req`` (a txn's lock) without waiting; a request not acquired leaves
    nothing behind (its lock rows and its txn's components are removed)."""
    if req is None:
        return None
    resp = create_lock(tx, dataclasses.replace(req, zero_wait_read=True), now=now)
    if resp.state is not LockState.ACQUIRED:
        # The zero-wait check removed the lock rows; the components went in with them.
        tx.x("DELETE FROM TXN_COMPONENTS WHERE TC_TXNID = ?", req.txn_id)
    return resp


def _open(
    tx: Tx, n: int, now: int, user: str, host: str, agent_info: str, txn_type: int
) -> list[int]:
    """Open ``n`` txns (Hive's ``openTxns``): their consecutive ids, ascending."""
    row = tx.one("UPDATE NEXT_TXN_ID SET NTXN_NEXT = NTXN_NEXT + ? RETURNING NTXN_NEXT", n)
    assert row is not None, "NEXT_TXN_ID is seeded by the schema"
    first = int(row[0]) - n
    ids = list(range(first, first + n))
    sql = (
        "INSERT INTO TXNS (TXN_ID, TXN_STATE, TXN_STARTED, TXN_LAST_HEARTBEAT, TXN_USER, "
        "TXN_HOST, TXN_AGENT_INFO, TXN_TYPE) VALUES (?, 'o', ?, ?, ?, ?, ?, ?)"
    )
    if n == 1:
        tx.x(sql, first, now, now, user, host, agent_info, txn_type)
    else:
        tx.xmany(sql, [(t, now, now, user, host, agent_info, txn_type) for t in ids])
    return ids


def _new_write_ids(tx: Tx, new: Sequence[int], db: str, table: str) -> dict[int, int]:
    """Give open txns that have none a write id of ``db.table`` (normalised names), the
    next ones of the table in txn order."""
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
    return fresh


class TxnOps(StoreOps):
    """Transactions and write ids: the ``TxnHandler`` half of :class:`~acidstream.txn.store.TxnStore`."""

    def open_txns(
        self, n: int, *, user: str, host: str, agent_info: str = "", txn_type: int = 0
    ) -> list[int]:
        """Open ``n`` transactions in one round trip (Hive's ``openTxns``).

        ``n`` is silently capped at 1000 (``hive.txn.max.open.batch``). Returns consecutive
        ascending txn ids. ``txn_type`` is Hive's ``TxnType`` stored in ``TXNS.TXN_TYPE``
        (0 DEFAULT; the compactor opens its txn with 3, COMPACTION).
        """
        if n <= 0:
            raise ConfigError("open_txns needs n >= 1")
        n = min(n, MAX_OPEN_BATCH)

        def body(tx: Tx) -> list[int]:
            return _open(tx, n, self._now_ms(), user, host, agent_info, txn_type)

        return self._db.run("open_txns", body)

    def write_conflict_since(self, txn_id: int, db: str, table: str) -> int | None:
        """The latest txn that committed an update or delete of ``db.table`` after txn
        ``txn_id`` opened, or ``None`` (Hive 4's ``getLatestTxnIdInConflict``): a txn that
        waited for its EXCL_WRITE lock asks once it holds it; a txn named here would fail
        its commit's write-set check, so the writer restarts in a new txn before writing."""
        row = self._db.run(
            "write_conflict_since",
            lambda tx: tx.one(
                "SELECT MAX(WS_TXNID) FROM WRITE_SET WHERE WS_DATABASE = ? AND WS_TABLE = ? "
                "AND WS_COMMIT_ID >= ? AND WS_OPERATION_TYPE IN ('u', 'd')",
                norm(db),
                norm(table),
                txn_id,
            ),
            write=False,
            idempotent=True,
        )
        return None if row is None or row[0] is None else int(row[0])

    def txn_state(self, txn_id: int) -> TxnState | None:
        """The state of a transaction, or ``None`` if it does not exist.

        ``None`` also for a txn whose record the housekeeper purged: a committed txn's
        record is kept ``history_retention_s`` (default 300 s) after its commit, so ask
        within that time (after a ``CommitStateUnknownError``, for example).
        """
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
                have.update(_new_write_ids(tx, new, db, table))
            return {t: have[t] for t in ids}

        return self._db.run("allocate_write_ids", body)

    def open_batch(
        self,
        n: int,
        db: str,
        table: str,
        *,
        user: str,
        host: str,
        agent_info: str = "",
        first_lock: LockRequest | None = None,
    ) -> OpenedBatch:
        """A writer's transaction batch opened in ONE database transaction: Hive's
        ``openTxns`` of ``n`` txns, ``allocateTableWriteIds`` for ``db.table``, and, with
        ``first_lock`` (its ``txn_id`` is replaced by the first txn's), that txn's lock
        requested without waiting (as ``commit_txn``'s ``next_lock``: ACQUIRED, or
        NOT_ACQUIRED with nothing of it left, and the writer takes it as usual).

        The same rows as the three calls one after the other, in one round trip of the
        store instead of three: a crash or an error anywhere leaves nothing (no txn to
        abort), where the separate calls could leave open txns behind.
        """
        if not 1 <= n <= MAX_OPEN_BATCH:
            raise ConfigError(f"open_batch opens 1..{MAX_OPEN_BATCH} txns, not {n}")
        db, table = norm(db), norm(table)

        def body(tx: Tx) -> OpenedBatch:
            now = self._now_ms()
            ids = _open(tx, n, now, user, host, agent_info, 0)
            # Txns opened by this DB transaction are open and have no write id yet.
            wids = _new_write_ids(tx, ids, db, table)
            req = None if first_lock is None else dataclasses.replace(first_lock, txn_id=ids[0])
            lock = _lock_next(tx, req, now)
            return OpenedBatch(tuple(ids), tuple(wids[t] for t in ids), lock)

        return self._db.run("open_batch", body)

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
        before_commit: Callable[[], None] | None = None,
        next_lock: LockRequest | None = None,
        key_once: bool = False,
    ) -> LockResponse | None:
        """Commit a transaction (Hive's ``commitTxn`` / ``commitTxnWithKeyValue``).

        With ``key``/``value``, the pair is stored in the table's parameters in the same
        database transaction as the commit, so it is visible if and only if the commit
        landed; this is what exactly-once sinks build on. ``key`` must start with ``_meta``.

        Committing an already committed txn does nothing (Hive is idempotent here).

        ``key_once``: the key is stored once only. If another commit stored it already, this
        txn is aborted instead (``CommitKeyExistsError``); two commits racing with one key
        are settled by the table's primary key (one waits for the other), so at most one
        lands (idempotent mutations).

        Two additions for a streaming writer, both inside the commit's DB transaction:

        - ``before_commit`` runs after the commit's statements and before ``COMMIT``: a
          writer waits there for its files to be durable, so the statements run while the
          ``fdatasync``s do and nothing commits before its data is on disk (an
          ``AcidStreamError`` it raises rolls the commit back).
        - ``next_lock`` (the next txn of the writer's batch) is requested without waiting
          (Hive's lock and ``checkLock``): returned ACQUIRED, or NOT_ACQUIRED with nothing
          of the request left (the writer then takes it as usual). ``None`` is returned
          when the txn was already committed or no lock was asked for.

        Raises:
            TxnAbortedError: the txn was aborted (by a caller or the reaper).
            CommitConflictError: a write-write conflict; the txn is now aborted.
            CommitKeyExistsError: ``key_once`` and the key is stored already; the txn is
                now aborted.
            CommitStateUnknownError: the connection was lost during COMMIT; ask
                :meth:`txn_state` later, and do not delete the txn's files.
            TransactionError: no such txn, or the store failed before committing.
        """
        _check_commit_key(key, value, db, table)

        if key_once and key is None:
            raise ConfigError("key_once needs a key")

        def body(tx: Tx) -> CommitConflictError | CommitKeyExistsError | LockResponse | None:
            now = self._now_ms()
            # The state, the txn's components and how many of them update or delete: an
            # insert's commit needs no more (its components move in one statement).
            row = tx.one(
                "SELECT t.TXN_STATE, (SELECT COUNT(*) FROM TXN_COMPONENTS c "
                "WHERE c.TC_TXNID = t.TXN_ID), (SELECT COUNT(*) FROM TXN_COMPONENTS c "
                "WHERE c.TC_TXNID = t.TXN_ID AND c.TC_OPERATION_TYPE IN ('u', 'd')) "
                "FROM TXNS t WHERE t.TXN_ID = ?" + tx.for_update_of("t"),
                txn_id,
            )
            if row is None or txn_id <= 0:
                raise TransactionError(f"No such transaction txnid:{txn_id}")
            if row[0] == TxnState.COMMITTED.value:
                return None
            if row[0] == TxnState.ABORTED.value:
                raise TxnAbortedError(f"Transaction txnid:{txn_id} already aborted")
            comps: list[tuple[str, str | None, str | None, str]] = []
            if row[2]:
                comps = tx.q(
                    "SELECT TC_DATABASE, TC_TABLE, TC_PARTITION, TC_OPERATION_TYPE "
                    "FROM TXN_COMPONENTS WHERE TC_TXNID = ?",
                    txn_id,
                )
            if key_once and key is not None and db is not None and table is not None:
                if not catalog_sql.add_table_param(tx, db, table, key, value or ""):
                    msg = f"txn {txn_id}: commit key {key!r} of {db}.{table} is stored already"
                    abort_txns(tx, [txn_id], f"{msg} (stored once only)", now)
                    return CommitKeyExistsError(msg)
            if any(c[3] in ("u", "d") for c in comps):
                conflict = write_set_check(tx, txn_id, comps, now)
                if conflict is not None:
                    if key_once and key is not None and db is not None and table is not None:
                        catalog_sql.delete_table_param(tx, db, table, key)
                    return conflict
            if row[1]:
                _complete_components(tx, [txn_id], now, op="commit_txn")
            if key is not None and value is not None and db is not None and table is not None:
                catalog_sql.set_table_param(tx, db, table, key, value)
                tx.crash_point("commit_txn.after_key_value")
            _mark_committed(tx, [txn_id], now)
            if next_lock is None or self._db.serialises_writers:
                # SQLite: every write holds the one write lock, so the next lock's
                # statements run before the wait, alongside the fdatasyncs.
                lock = _lock_next(tx, next_lock, now)
                if before_commit is not None:
                    tx.flush()
                    before_commit()
                return lock
            # PostgreSQL: the wait first, so NEXT_LOCK_ID (which serialises every
            # writer's lock requests) is not held across the fdatasyncs.
            if before_commit is not None:
                tx.flush()  # the server runs the statements while we wait
                before_commit()
            return _lock_next(tx, next_lock, now)

        result = self._db.run("commit_txn", body, unknown=CommitStateUnknownError)
        if isinstance(result, CommitConflictError | CommitKeyExistsError):
            raise result
        return result

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
            raise ConfigError("no txns to commit")

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

        Each txn of the range is classified from its ``TXNS`` row, read in one statement
        of the heartbeat's DB transaction: open (heartbeaten), ``aborted``, ``committed``,
        or ``nosuch`` (no row: never opened, or purged). Only ``aborted`` and ``nosuch``
        mean a writer has lost its txns (:attr:`HeartbeatResult.lost`).

        Committed txns keep their row while a heartbeat may still race their commit: the
        housekeeper purges a committed txn's row only ``history_retention_s`` after the
        commit, and that is at least the txn timeout, while a writer heartbeats its
        uncommitted txns within a fraction of it.
        """
        lo = max(lo, 1)
        if hi < lo:
            return HeartbeatResult(aborted=frozenset(), nosuch=frozenset())

        def body(tx: Tx) -> HeartbeatResult:
            tx.x(
                "UPDATE TXNS SET TXN_LAST_HEARTBEAT = ?, "
                "TXN_HEARTBEAT_COUNT = TXN_HEARTBEAT_COUNT + 1 "
                "WHERE TXN_ID >= ? AND TXN_ID <= ? AND TXN_STATE = 'o'",
                self._now_ms(),
                lo,
                hi,
            )
            # One statement reads the whole range: one consistent view of every row (a
            # txn that commits or aborts meanwhile is seen either before or after).
            rows = tx.q(
                "SELECT TXN_ID, TXN_STATE FROM TXNS WHERE TXN_ID >= ? AND TXN_ID <= ?", lo, hi
            )
            states: dict[int, str] = {int(r[0]): str(r[1]) for r in rows}
            by_state: dict[str | None, set[int]] = {}
            for t in range(lo, hi + 1):
                by_state.setdefault(states.get(t), set()).add(t)
            return HeartbeatResult(
                aborted=frozenset(by_state.get(TxnState.ABORTED.value, ())),
                nosuch=frozenset(by_state.get(None, ())),
                committed=frozenset(by_state.get(TxnState.COMMITTED.value, ())),
            )

        return self._db.run("heartbeat_txn_range", body, idempotent=True)

    def reap_timed_out(
        self, *, timeout_s: float | None = None, now: float | None = None
    ) -> list[int]:
        """Abort open txns whose last heartbeat is older than ``timeout_s`` (Hive's
        ``performTimeOuts``), releasing their locks; also drop stale non-txn locks.

        Args:
            timeout_s: ``hive.txn.timeout``; default (and normally): the metastore's
                ``txn_timeout_s`` setting, read in the same DB transaction, which is what
                writers heartbeat from. An explicit value is for tests and operators.
            now: Seconds since the epoch to judge against (default: the store clock).

        Returns:
            The aborted txn ids.
        """
        now_ms = int((self._clock() if now is None else now) * 1000)

        def body(tx: Tx) -> list[int]:
            timeout = setting_value(tx, TXN_TIMEOUT_S).value if timeout_s is None else timeout_s
            cutoff = now_ms - int(timeout * 1000)
            reason = f"{ABORT_TIMEOUT}: no heartbeat for more than {timeout:g}s"
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
            raise ConfigError(f"dynamic partitions need an INSERT/UPDATE/DELETE op, not {op}")
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
