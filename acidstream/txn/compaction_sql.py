"""The compaction queue and history in the metastore (Hive's ``CompactionTxnHandler``).

Functions here run inside one store call's DB transaction (a :class:`~acidstream.txn.db.Tx`), on
SQLite and PostgreSQL alike; :class:`CompactionQueue` runs each as one call through
``store.database.run``. The tables are Hive's ``COMPACTION_QUEUE`` and
``COMPLETED_COMPACTIONS`` (created by :mod:`acidstream.txn.migrations`), with Hive's state codes
(spec §5.3): a request is ``i`` (initiated), a worker takes it (``w``), a finished
compaction waits for the cleaner (``r``), and the cleaner moves it to the history as
``s``. Failures go to the history as ``f``, initiator problems as ``a``, requests the
worker or cleaner turns down as ``c``.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from acidstream.acid.errors import ConfigError
from acidstream.acid.partition_name import parse_partition_name
from acidstream.txn import catalog_sql
from acidstream.txn.catalog import TableDef
from acidstream.txn.db import Tx
from acidstream.txn.store import TxnStore
from acidstream.txn.txn_sql import marks, norm

__all__ = [
    "MAJOR",
    "MINOR",
    "STATE_NAMES",
    "CompactionQueue",
    "CompactionRecord",
    "check_target",
]

MAJOR = "a"
"""``CQ_TYPE`` of a major compaction (``TxnStore.MAJOR_TYPE``)."""
MINOR = "i"
"""``CQ_TYPE`` of a minor compaction (``TxnStore.MINOR_TYPE``)."""
TYPE_NAMES = {MAJOR: "MAJOR", MINOR: "MINOR"}

INITIATED, WORKING, READY_FOR_CLEANING = "i", "w", "r"
FAILED, SUCCEEDED, DID_NOT_INITIATE, REFUSED = "f", "s", "a", "c"
STATE_NAMES = {
    INITIATED: "initiated",
    WORKING: "working",
    READY_FOR_CLEANING: "ready for cleaning",
    FAILED: "failed",
    SUCCEEDED: "succeeded",
    DID_NOT_INITIATE: "did not initiate",
    REFUSED: "refused",
    "x": "aborted",
}
"""Hive's ``CQ_STATE`` codes and the names SHOW COMPACTIONS prints."""

COMPACTION_TXN_TYPE = 3
"""``TXNS.TXN_TYPE`` of a compactor txn (``TxnType.COMPACTION``)."""
COMPACT_OP = "c"
"""``TC_OPERATION_TYPE`` of the compactor txn's component (``OperationType.COMPACT``)."""

# History kept per (db, table, partition) and state (Hive's metastore.compactor.history.retention.*).
HISTORY_RETENTION = {SUCCEEDED: 3, FAILED: 3, DID_NOT_INITIATE: 2, REFUSED: 3}

_COLS = (
    "ID, DATABASE, TABLE, PARTITION, STATE, TYPE, TBLPROPERTIES, WORKER_ID, ENQUEUE_TIME, "
    "START, RUN_AS, HIGHEST_WRITE_ID, META_INFO, HADOOP_JOB_ID, ERROR_MESSAGE, NEXT_TXN_ID, "
    "TXN_ID, COMMIT_TIME, INITIATOR_ID, INITIATOR_VERSION, WORKER_VERSION, CLEANER_START, "
    "RETRY_RETENTION, POOL_NAME, NUMBER_OF_BUCKETS, ORDER_BY"
).split(", ")


def _cols(prefix: str) -> str:
    return ", ".join(f"{prefix}_{c}" for c in _COLS)


@dataclass(frozen=True)
class CompactionRecord:
    """One compaction, queued or in the history (a ``COMPACTION_QUEUE`` /
    ``COMPLETED_COMPACTIONS`` row; SHOW COMPACTIONS prints these)."""

    id: int
    db: str
    table: str
    partition: str | None
    state: str
    type: str
    worker_id: str | None = None
    enqueue_time_ms: int | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    highest_write_id: int | None = None
    error_message: str | None = None
    next_txn_id: int | None = None
    txn_id: int | None = None
    commit_time_ms: int | None = None
    initiator_id: str | None = None
    pool_name: str | None = None

    @property
    def is_major(self) -> bool:
        return self.type == MAJOR

    @property
    def state_name(self) -> str:
        return STATE_NAMES.get(self.state, self.state)

    @property
    def type_name(self) -> str:
        return TYPE_NAMES.get(self.type, self.type)

    @property
    def target(self) -> str:
        """``db.table`` plus ``/partition`` when there is one."""
        t = f"{self.db}.{self.table}"
        return f"{t}/{self.partition}" if self.partition else t


def _record(row: Sequence[object], end: object = None) -> CompactionRecord:
    r = dict(zip(_COLS, row, strict=False))

    def num(v: object) -> int | None:
        return None if v is None else int(v)  # type: ignore[call-overload]

    return CompactionRecord(
        id=int(r["ID"]),  # type: ignore[call-overload]
        db=str(r["DATABASE"]),
        table=str(r["TABLE"]),
        partition=None if r["PARTITION"] is None else str(r["PARTITION"]),
        state=str(r["STATE"]),
        type=str(r["TYPE"]),
        worker_id=None if r["WORKER_ID"] is None else str(r["WORKER_ID"]),
        enqueue_time_ms=num(r["ENQUEUE_TIME"]),
        start_ms=num(r["START"]),
        end_ms=num(end),
        highest_write_id=num(r["HIGHEST_WRITE_ID"]),
        error_message=None if r["ERROR_MESSAGE"] is None else str(r["ERROR_MESSAGE"]),
        next_txn_id=num(r["NEXT_TXN_ID"]),
        txn_id=num(r["TXN_ID"]),
        commit_time_ms=num(r["COMMIT_TIME"]),
        initiator_id=None if r["INITIATOR_ID"] is None else str(r["INITIATOR_ID"]),
        pool_name=None if r["POOL_NAME"] is None else str(r["POOL_NAME"]),
    )


NEED_PARTITION = "You must specify a partition to compact for partitioned tables"
"""Hive's ``ErrorMsg.NO_COMPACTION_PARTITION``: a partitioned table is compacted partition by
partition, never at its root."""


def check_target(table: TableDef, partition: str | None) -> None:
    """Refuse a compaction target that is not one directory of rows: a partitioned table
    without a partition (its root holds partition directories, not deltas: compacting it
    would read every partition as raw files, write a base without the partition columns at
    the root, and the cleaner would then delete every partition), a partition of an
    unpartitioned table, or a partition that does not name every partition column in order
    (``ds=a`` of a table partitioned by ``ds, h`` is a directory of partitions too).

    The queue, the worker and the cleaner each call this (a request queued by an older
    version, or written into the queue by hand, must not reach the files either).

    Raises:
        ConfigError: the target is not a table's or a partition's directory of rows.
    """
    if partition is None:
        if table.is_partitioned:
            by = ", ".join(table.partition_names)
            raise ConfigError(f"{NEED_PARTITION} ({table.full_name} is partitioned by {by})")
        return
    if not table.is_partitioned:
        raise ConfigError(
            f"{table.full_name} is not partitioned: compact it without a partition, "
            f"not {partition!r}"
        )
    expected = "/".join(f"{k}=..." for k in table.partition_names)
    try:
        keys = [k.lower() for k, _ in parse_partition_name(partition)]
    except ConfigError as e:
        raise ConfigError(f"bad partition {partition!r} of {table.full_name}: {e}") from e
    if tuple(keys) != table.partition_names:
        raise ConfigError(
            f"bad partition {partition!r} of {table.full_name}: a compaction names one "
            f"partition, every partition column in order ({expected})"
        )


def _same_target(prefix: str) -> str:
    # NULL partitions compare equal (an unpartitioned table).
    return (
        f"{prefix}_DATABASE = ? AND {prefix}_TABLE = ? AND "
        f"({prefix}_PARTITION = ? OR ({prefix}_PARTITION IS NULL AND CAST(? AS TEXT) IS NULL))"
    )


def _next_id(tx: Tx) -> int:
    row = tx.one("UPDATE NEXT_COMPACTION_QUEUE_ID SET NCQ_NEXT = NCQ_NEXT + 1 RETURNING NCQ_NEXT")
    assert row is not None, "NEXT_COMPACTION_QUEUE_ID is seeded by the schema"
    return int(row[0]) - 1


def find_active(tx: Tx, db: str, table: str, partition: str | None) -> CompactionRecord | None:
    """The queued (initiated or working) compaction of a target, if any."""
    row = tx.one(
        f"SELECT {_cols('CQ')} FROM COMPACTION_QUEUE WHERE {_same_target('CQ')} "
        "AND CQ_STATE IN ('i', 'w') ORDER BY CQ_ID LIMIT 1",
        db,
        table,
        partition,
        partition,
    )
    return None if row is None else _record(row)


def request(
    tx: Tx,
    db: str,
    table: str,
    partition: str | None,
    ctype: str,
    *,
    now_ms: int,
    initiator_id: str,
    properties: str | None = None,
    pool_name: str | None = None,
) -> tuple[int, bool]:
    """Hive's ``compact``: queue a request unless one is already initiated or working.

    Returns:
        ``(compaction id, accepted)``; a duplicate returns the queued one's id and False.

    Raises:
        ConfigError: a bad type, or a target that is not one directory of rows
            (:func:`check_target`: e.g. a partitioned table without a partition).
        TableNotFoundError: no such table.
    """
    if ctype not in TYPE_NAMES:
        raise ConfigError("compaction type must be 'a' (major) or 'i' (minor)")
    db, table = norm(db), norm(table)
    check_target(catalog_sql.get_table(tx, db, table), partition)
    active = find_active(tx, db, table, partition)
    if active is not None:
        return active.id, False
    cq_id = _next_id(tx)
    tx.x(
        "INSERT INTO COMPACTION_QUEUE (CQ_ID, CQ_DATABASE, CQ_TABLE, CQ_PARTITION, CQ_STATE, "
        "CQ_TYPE, CQ_TBLPROPERTIES, CQ_ENQUEUE_TIME, CQ_INITIATOR_ID, CQ_POOL_NAME) "
        "VALUES (?, ?, ?, ?, 'i', ?, ?, ?, ?, ?)",
        cq_id,
        db,
        table,
        partition,
        ctype,
        properties,
        now_ms,
        initiator_id,
        pool_name,
    )
    return cq_id, True


def get(tx: Tx, cq_id: int) -> CompactionRecord | None:
    """A compaction by id, from the queue or (once finished) the history."""
    row = tx.one(f"SELECT {_cols('CQ')} FROM COMPACTION_QUEUE WHERE CQ_ID = ?", cq_id)
    if row is not None:
        return _record(row)
    row = tx.one(f"SELECT {_cols('CC')}, CC_END FROM COMPLETED_COMPACTIONS WHERE CC_ID = ?", cq_id)
    return None if row is None else _record(row[:-1], row[-1])


def claim_next(tx: Tx, worker_id: str, *, now_ms: int) -> CompactionRecord | None:
    """Hive's ``findNextToCompact``: the oldest initiated request becomes ``working``."""
    rows = tx.q(
        f"SELECT CQ_ID FROM COMPACTION_QUEUE WHERE CQ_STATE = 'i' ORDER BY CQ_ID LIMIT 5"
        f"{tx.for_update}"
    )
    for (cq_id,) in rows:
        n = tx.count(
            "UPDATE COMPACTION_QUEUE SET CQ_STATE = 'w', CQ_WORKER_ID = ?, CQ_START = ?, "
            "CQ_ERROR_MESSAGE = NULL WHERE CQ_ID = ? AND CQ_STATE = 'i'",
            worker_id,
            now_ms,
            cq_id,
        )
        if n == 1:
            return get(tx, int(cq_id))
    return None


def set_txn(tx: Tx, cq_id: int, txn_id: int, highest_write_id: int) -> None:
    """Hive's ``updateCompactorState``: record the compactor txn and its hwm, and give the
    txn a ``c`` component so that, should it abort, the cleaner finds its directory."""
    row = tx.one(
        "SELECT CQ_DATABASE, CQ_TABLE, CQ_PARTITION FROM COMPACTION_QUEUE WHERE CQ_ID = ?", cq_id
    )
    if row is None:
        raise ConfigError(f"no compaction {cq_id} in the queue")
    tx.x(
        "UPDATE COMPACTION_QUEUE SET CQ_TXN_ID = ?, CQ_HIGHEST_WRITE_ID = ? WHERE CQ_ID = ?",
        txn_id,
        highest_write_id,
        cq_id,
    )
    tx.x(
        "INSERT INTO TXN_COMPONENTS (TC_TXNID, TC_DATABASE, TC_TABLE, TC_PARTITION, "
        "TC_OPERATION_TYPE, TC_WRITEID) VALUES (?, ?, ?, ?, ?, ?)",
        txn_id,
        row[0],
        row[1],
        row[2],
        COMPACT_OP,
        highest_write_id,
    )


def next_txn_id(tx: Tx) -> int:
    """The id the next opened txn will get: every txn from here on sees a committed compaction."""
    row = tx.one("SELECT NTXN_NEXT FROM NEXT_TXN_ID")
    assert row is not None
    return int(row[0])


def mark_compacted(tx: Tx, cq_id: int, *, now_ms: int) -> None:
    """Hive's ``markCompacted``: ``ready for cleaning``, remembering the first txn id that
    surely sees the result (``CQ_NEXT_TXN_ID``), which gates the cleaner."""
    tx.x(
        "UPDATE COMPACTION_QUEUE SET CQ_STATE = 'r', CQ_NEXT_TXN_ID = ?, CQ_COMMIT_TIME = ? "
        "WHERE CQ_ID = ?",
        next_txn_id(tx),
        now_ms,
        cq_id,
    )


def _to_history(tx: Tx, cq_id: int, state: str, *, now_ms: int, message: str | None) -> None:
    cols = ", ".join(f"CC_{c}" for c in _COLS)
    src = ", ".join(
        "?"
        if c == "STATE"
        else ("COALESCE(?, CQ_ERROR_MESSAGE)" if c == "ERROR_MESSAGE" else f"CQ_{c}")
        for c in _COLS
    )
    # Parameters follow the placeholders' order in the SELECT list.
    params: list[object] = []
    for c in _COLS:
        if c == "STATE":
            params.append(state)
        elif c == "ERROR_MESSAGE":
            params.append(message)
    tx.x(
        f"INSERT INTO COMPLETED_COMPACTIONS ({cols}, CC_END) SELECT {src}, ? "
        "FROM COMPACTION_QUEUE WHERE CQ_ID = ?",
        *params,
        now_ms,
        cq_id,
    )
    row = tx.one(
        "SELECT CQ_DATABASE, CQ_TABLE, CQ_PARTITION FROM COMPACTION_QUEUE WHERE CQ_ID = ?", cq_id
    )
    tx.x("DELETE FROM COMPACTION_QUEUE WHERE CQ_ID = ?", cq_id)
    if row is not None:
        _purge_history(tx, str(row[0]), str(row[1]), row[2], state)


def _purge_history(tx: Tx, db: str, table: str, partition: str | None, state: str) -> None:
    keep = HISTORY_RETENTION.get(state)
    if keep is None:
        return
    rows = tx.q(
        f"SELECT CC_ID FROM COMPLETED_COMPACTIONS WHERE {_same_target('CC')} AND CC_STATE = ? "
        "ORDER BY CC_ID DESC",
        db,
        table,
        partition,
        partition,
        state,
    )
    old = [int(r[0]) for r in rows[keep:]]
    if old:
        tx.x(f"DELETE FROM COMPLETED_COMPACTIONS WHERE CC_ID IN ({marks(len(old))})", *old)


def mark_failed(tx: Tx, cq_id: int, message: str, *, now_ms: int) -> None:
    """Hive's ``markFailed``: the request leaves the queue as ``failed``."""
    _to_history(tx, cq_id, FAILED, now_ms=now_ms, message=message[:4000])


def mark_refused(tx: Tx, cq_id: int, message: str, *, now_ms: int) -> None:
    """Hive's ``markRefused``: the worker or cleaner turned the request down."""
    _to_history(tx, cq_id, REFUSED, now_ms=now_ms, message=message[:4000])


def mark_cleaned(tx: Tx, cq_id: int, *, now_ms: int) -> None:
    """Hive's ``markCleaned`` (queue part): ``succeeded``, and the target's completed write
    components up to the compaction's hwm are forgotten (the initiator's candidates)."""
    rec = get(tx, cq_id)
    if rec is None:
        return
    if rec.highest_write_id is not None:
        tx.x(
            f"DELETE FROM COMPLETED_TXN_COMPONENTS WHERE {_same_target('CTC')} "
            "AND CTC_WRITEID <= ?",
            rec.db,
            rec.table,
            rec.partition,
            rec.partition,
            rec.highest_write_id,
        )
    _to_history(tx, cq_id, SUCCEEDED, now_ms=now_ms, message=None)


def did_not_initiate(
    tx: Tx,
    db: str,
    table: str,
    partition: str | None,
    ctype: str,
    message: str,
    *,
    now_ms: int,
    initiator_id: str,
) -> int:
    """A history row in state ``did not initiate`` (Hive's ``markFailed`` of a request that
    never reached the queue)."""
    cq_id = _next_id(tx)
    tx.x(
        "INSERT INTO COMPLETED_COMPACTIONS (CC_ID, CC_DATABASE, CC_TABLE, CC_PARTITION, "
        "CC_STATE, CC_TYPE, CC_ENQUEUE_TIME, CC_START, CC_END, CC_ERROR_MESSAGE, "
        "CC_INITIATOR_ID) VALUES (?, ?, ?, ?, 'a', ?, ?, ?, ?, ?, ?)",
        cq_id,
        db,
        table,
        partition,
        ctype,
        now_ms,
        now_ms,
        now_ms,
        message[:4000],
        initiator_id,
    )
    _purge_history(tx, db, table, partition, DID_NOT_INITIATE)
    return cq_id


def show(tx: Tx) -> list[CompactionRecord]:
    """Queue and history, by id (SHOW COMPACTIONS)."""
    queued = [_record(r) for r in tx.q(f"SELECT {_cols('CQ')} FROM COMPACTION_QUEUE")]
    done = [
        _record(r[:-1], r[-1])
        for r in tx.q(f"SELECT {_cols('CC')}, CC_END FROM COMPLETED_COMPACTIONS")
    ]
    return sorted(queued + done, key=lambda c: c.id)


def recent_history_states(
    tx: Tx, db: str, table: str, partition: str | None, limit: int
) -> list[tuple[str, int | None]]:
    """The latest history states ``(state, end ms)`` of a target, newest first."""
    rows = tx.q(
        f"SELECT CC_STATE, CC_END FROM COMPLETED_COMPACTIONS WHERE {_same_target('CC')} "
        "ORDER BY CC_ID DESC LIMIT ?",
        db,
        table,
        partition,
        partition,
        limit,
    )
    return [(str(r[0]), None if r[1] is None else int(r[1])) for r in rows]


def working(tx: Tx) -> list[CompactionRecord]:
    """Requests in state ``working`` (for recovery of dead workers)."""
    return [
        _record(r) for r in tx.q(f"SELECT {_cols('CQ')} FROM COMPACTION_QUEUE WHERE CQ_STATE = 'w'")
    ]


def revoke(tx: Tx, cq_id: int) -> None:
    """Hive's ``revokeTimedoutWorkers``: a request whose worker died goes back to ``initiated``."""
    tx.x(
        "UPDATE COMPACTION_QUEUE SET CQ_STATE = 'i', CQ_WORKER_ID = NULL, CQ_START = NULL, "
        "CQ_TXN_ID = NULL, CQ_HIGHEST_WRITE_ID = NULL WHERE CQ_ID = ? AND CQ_STATE = 'w'",
        cq_id,
    )


def min_open_txn(tx: Tx) -> int | None:
    """The lowest open txn id, or ``None`` when nothing is open."""
    row = tx.one("SELECT MIN(TXN_ID) FROM TXNS WHERE TXN_STATE = 'o'")
    return None if row is None or row[0] is None else int(row[0])


def ready_to_clean(tx: Tx) -> list[CompactionRecord]:
    """Hive's ``findReadyToClean``: ``ready for cleaning`` entries no open txn can predate.

    An entry is ready when every txn below ``CQ_NEXT_TXN_ID`` (the txns that may have taken
    their snapshot before the compaction committed) has ended.
    """
    low = min_open_txn(tx)
    rows = tx.q(f"SELECT {_cols('CQ')} FROM COMPACTION_QUEUE WHERE CQ_STATE = 'r' ORDER BY CQ_ID")
    out = [_record(r) for r in rows]
    return [c for c in out if low is None or c.next_txn_id is None or c.next_txn_id <= low]


def written_targets(tx: Tx) -> list[tuple[str, str, str | None]]:
    """Targets with committed writes not yet compacted away (``COMPLETED_TXN_COMPONENTS``)."""
    rows = tx.q(
        "SELECT DISTINCT CTC_DATABASE, CTC_TABLE, CTC_PARTITION FROM COMPLETED_TXN_COMPONENTS "
        "WHERE CTC_TABLE IS NOT NULL"
    )
    return [(str(r[0]), str(r[1]), r[2]) for r in rows]


def aborted_targets(
    tx: Tx, *, include_compactor: bool
) -> list[tuple[str, str, str | None, int, int]]:
    """Targets with components of aborted txns: ``(db, table, partition, count, oldest ms)``.

    ``include_compactor``: count failed compactions' txns too (the cleaner removes their
    directories; the initiator's abort thresholds count only writers' aborts).
    """
    ops = "" if include_compactor else f"AND c.TC_OPERATION_TYPE <> '{COMPACT_OP}' "
    rows = tx.q(
        "SELECT c.TC_DATABASE, c.TC_TABLE, c.TC_PARTITION, COUNT(DISTINCT c.TC_TXNID), "
        "MIN(t.TXN_STARTED) FROM TXN_COMPONENTS c JOIN TXNS t ON t.TXN_ID = c.TC_TXNID "
        f"WHERE t.TXN_STATE = 'a' AND c.TC_TABLE IS NOT NULL {ops}"
        "GROUP BY c.TC_DATABASE, c.TC_TABLE, c.TC_PARTITION"
    )
    return [(str(r[0]), str(r[1]), r[2], int(r[3]), int(r[4])) for r in rows]


def aborted_components(
    tx: Tx, db: str, table: str, partition: str | None
) -> list[tuple[int, str, int | None]]:
    """``(txn id, op, write id)`` of aborted txns' components of one target."""
    rows = tx.q(
        "SELECT c.TC_TXNID, c.TC_OPERATION_TYPE, c.TC_WRITEID FROM TXN_COMPONENTS c "
        "JOIN TXNS t ON t.TXN_ID = c.TC_TXNID WHERE t.TXN_STATE = 'a' AND " + _same_target("c.TC"),
        db,
        table,
        partition,
        partition,
    )
    return [(int(r[0]), str(r[1]), None if r[2] is None else int(r[2])) for r in rows]


def forget_aborted(
    tx: Tx,
    db: str,
    table: str,
    partition: str | None,
    txn_ids: Sequence[int],
    *,
    finished_before_ms: int,
) -> int:
    """Hive's ``markCleaned`` / ``cleanEmptyAbortedTxns`` for aborted txns whose data is gone.

    Only txns aborted before ``finished_before_ms`` are touched: a writer whose txn was
    aborted under it (the heartbeat reaper) learns so at its next heartbeat, and must have
    stopped before its txn is forgotten (a forgotten txn reads as committed, see
    :func:`acidstream.txn.txn_sql.txn_states`). Removes those txns' components of the target; then
    every such aborted txn left with no component at all, which either had its
    components removed here or never got a write id, is deleted from ``TXNS`` (so
    snapshots stop listing it). An aborted txn with write ids but no components is kept:
    nothing proves its data is gone.

    Returns:
        The number of ``TXNS`` rows deleted.
    """
    wanted = sorted(set(txn_ids))
    ids: list[int] = []
    for i in range(0, len(wanted), 500):
        chunk = wanted[i : i + 500]
        ids += [
            int(r[0])
            for r in tx.q(
                f"SELECT TXN_ID FROM TXNS WHERE TXN_ID IN ({marks(len(chunk))}) "
                "AND TXN_STATE = 'a' AND COALESCE(TXN_FINISHED, 0) <= ?",
                *chunk,
                finished_before_ms,
            )
        ]
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        tx.x(
            f"DELETE FROM TXN_COMPONENTS WHERE TC_TXNID IN ({marks(len(chunk))}) AND "
            + _same_target("TC"),
            *chunk,
            db,
            table,
            partition,
            partition,
        )
    rows = tx.q(
        "SELECT t.TXN_ID FROM TXNS t WHERE t.TXN_STATE = 'a' "
        "AND COALESCE(t.TXN_FINISHED, 0) <= ? AND NOT EXISTS "
        "(SELECT 1 FROM TXN_COMPONENTS c WHERE c.TC_TXNID = t.TXN_ID)",
        finished_before_ms,
    )
    empty = {int(r[0]) for r in rows}
    if not empty:
        return 0
    with_wids = {
        int(r[0])
        for r in tx.q(
            "SELECT DISTINCT w.T2W_TXNID FROM TXN_TO_WRITE_ID w JOIN TXNS t "
            "ON t.TXN_ID = w.T2W_TXNID WHERE t.TXN_STATE = 'a'"
        )
    }
    cleaned = set(ids)
    gone = sorted(t for t in empty if t in cleaned or t not in with_wids)
    for i in range(0, len(gone), 500):
        chunk = gone[i : i + 500]
        tx.x(f"DELETE FROM TXNS WHERE TXN_ID IN ({marks(len(chunk))})", *chunk)
    return len(gone)


def _default_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class CompactionQueue:
    """The compaction queue of one metastore: each method is one store call.

    Args:
        store: The metastore.
        clock: Seconds since the epoch (tests inject the store's fake clock).
    """

    def __init__(self, store: TxnStore, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._db = store.database
        self._clock = clock

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def request(
        self,
        db: str,
        table: str,
        partition: str | None = None,
        *,
        major: bool,
        initiator_id: str | None = None,
        properties: str | None = None,
    ) -> tuple[int, bool]:
        """Queue a compaction (ALTER TABLE ... COMPACT); see :func:`request`."""
        return self._db.run(
            "compaction_request",
            lambda tx: request(
                tx,
                db,
                table,
                partition,
                MAJOR if major else MINOR,
                now_ms=self.now_ms(),
                initiator_id=initiator_id or _default_id(),
                properties=properties,
            ),
        )

    def get(self, cq_id: int) -> CompactionRecord | None:
        return self._db.run(
            "compaction_get", lambda tx: get(tx, cq_id), write=False, idempotent=True
        )

    def show(self) -> list[CompactionRecord]:
        return self._db.run("show_compactions", show, write=False, idempotent=True)

    def claim_next(self, worker_id: str) -> CompactionRecord | None:
        return self._db.run(
            "compaction_claim", lambda tx: claim_next(tx, worker_id, now_ms=self.now_ms())
        )

    def set_txn(self, cq_id: int, txn_id: int, highest_write_id: int) -> None:
        self._db.run("compaction_set_txn", lambda tx: set_txn(tx, cq_id, txn_id, highest_write_id))

    def mark_compacted(self, cq_id: int) -> None:
        self._db.run(
            "compaction_mark_compacted",
            lambda tx: mark_compacted(tx, cq_id, now_ms=self.now_ms()),
            idempotent=True,
        )

    def mark_failed(self, cq_id: int, message: str) -> None:
        self._db.run(
            "compaction_mark_failed",
            lambda tx: mark_failed(tx, cq_id, message, now_ms=self.now_ms()),
            idempotent=True,
        )

    def mark_refused(self, cq_id: int, message: str) -> None:
        self._db.run(
            "compaction_mark_refused",
            lambda tx: mark_refused(tx, cq_id, message, now_ms=self.now_ms()),
            idempotent=True,
        )

    def mark_cleaned(self, cq_id: int) -> None:
        self._db.run(
            "compaction_mark_cleaned",
            lambda tx: mark_cleaned(tx, cq_id, now_ms=self.now_ms()),
            idempotent=True,
        )

    def did_not_initiate(
        self,
        db: str,
        table: str,
        partition: str | None,
        *,
        major: bool,
        message: str,
        initiator_id: str | None = None,
    ) -> int:
        return self._db.run(
            "compaction_did_not_initiate",
            lambda tx: did_not_initiate(
                tx,
                db,
                table,
                partition,
                MAJOR if major else MINOR,
                message,
                now_ms=self.now_ms(),
                initiator_id=initiator_id or _default_id(),
            ),
        )

    def find_active(self, db: str, table: str, partition: str | None) -> CompactionRecord | None:
        return self._db.run(
            "compaction_find_active",
            lambda tx: find_active(tx, db, table, partition),
            write=False,
            idempotent=True,
        )

    def recent_history_states(
        self, db: str, table: str, partition: str | None, limit: int
    ) -> list[tuple[str, int | None]]:
        return self._db.run(
            "compaction_history",
            lambda tx: recent_history_states(tx, db, table, partition, limit),
            write=False,
            idempotent=True,
        )

    def working(self) -> list[CompactionRecord]:
        return self._db.run("compaction_working", working, write=False, idempotent=True)

    def revoke(self, cq_id: int) -> None:
        self._db.run("compaction_revoke", lambda tx: revoke(tx, cq_id), idempotent=True)

    def ready_to_clean(self) -> list[CompactionRecord]:
        return self._db.run("compaction_ready", ready_to_clean, write=False, idempotent=True)

    def written_targets(self) -> list[tuple[str, str, str | None]]:
        return self._db.run("compaction_written", written_targets, write=False, idempotent=True)

    def aborted_targets(
        self, *, include_compactor: bool = True
    ) -> list[tuple[str, str, str | None, int, int]]:
        return self._db.run(
            "compaction_aborted",
            lambda tx: aborted_targets(tx, include_compactor=include_compactor),
            write=False,
            idempotent=True,
        )

    def aborted_components(
        self, db: str, table: str, partition: str | None
    ) -> list[tuple[int, str, int | None]]:
        return self._db.run(
            "compaction_aborted_components",
            lambda tx: aborted_components(tx, db, table, partition),
            write=False,
            idempotent=True,
        )

    def forget_aborted(
        self,
        db: str,
        table: str,
        partition: str | None,
        txn_ids: Sequence[int],
        *,
        min_age_s: float,
    ) -> int:
        """See :func:`forget_aborted`; only txns aborted at least ``min_age_s`` ago."""
        cutoff = self.now_ms() - int(min_age_s * 1000)
        return self._db.run(
            "compaction_forget_aborted",
            lambda tx: forget_aborted(tx, db, table, partition, txn_ids, finished_before_ms=cutoff),
            idempotent=True,
        )
