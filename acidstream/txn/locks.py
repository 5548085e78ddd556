"""Lock types, lock requests and Hive's lock compatibility matrix.

The matrix is a pure function so it can be tested exhaustively and reused by
every backend. Source: ``CheckLockFunction`` / ``LockTypeUtil`` in Hive's
metastore (spec §6.2, §6.3).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from acidstream.acid.errors import ConfigError

__all__ = [
    "DataOperationType",
    "LockComponent",
    "LockInfo",
    "LockLevel",
    "LockRequest",
    "LockResponse",
    "LockState",
    "LockType",
    "lock_blocks",
    "lock_types_conflict",
    "locks_overlap",
]


class LockType(enum.Enum):
    """``HIVE_LOCKS.HL_LOCK_TYPE`` codes."""

    SHARED_READ = "r"
    SHARED_WRITE = "w"
    EXCL_WRITE = "x"
    EXCLUSIVE = "e"


class LockState(enum.Enum):
    """Lock states: ``a``/``w`` are stored in ``HL_LOCK_STATE``; the others are responses only."""

    ACQUIRED = "a"
    WAITING = "w"
    NOT_ACQUIRED = "n"
    ABORT = "x"


class LockLevel(enum.IntEnum):
    """What a lock covers: a whole database, a table, or one partition."""

    DB = 1
    TABLE = 2
    PARTITION = 3


class DataOperationType(enum.Enum):
    """``TC_OPERATION_TYPE`` codes, plus ``NO_TXN``/``UNSET`` which are never stored."""

    SELECT = "s"
    INSERT = "i"
    UPDATE = "u"
    DELETE = "d"
    COMPACT = "c"
    UNSET = "-"
    NO_TXN = "n"

    @property
    def is_write(self) -> bool:
        """Whether the operation writes data (and so is recorded in ``TXN_COMPONENTS``)."""
        return self in (
            DataOperationType.INSERT,
            DataOperationType.UPDATE,
            DataOperationType.DELETE,
        )


@dataclass(frozen=True)
class LockComponent:
    """One thing to lock: a database, a table or a partition, with the operation behind it.

    Attributes:
        type: The lock type.
        db: Database name.
        table: Table name, or ``None`` for a database-level lock.
        partition: Partition name (``k1=v1/k2=v2``), or ``None`` for a table-level lock.
        operation: The data operation; INSERT/UPDATE/DELETE on a transactional table inside a
            txn are recorded in ``TXN_COMPONENTS`` (that is what the compactor and the
            write-write conflict check read).
        is_transactional: Whether the table is an ACID table.
        is_dynamic_partition_write: A dynamic-partition write: recorded once per table with a
            NULL partition until ``add_dynamic_partitions`` names the real partitions.
    """

    type: LockType
    db: str
    table: str | None = None
    partition: str | None = None
    operation: DataOperationType = DataOperationType.NO_TXN
    is_transactional: bool = True
    is_dynamic_partition_write: bool = False

    def __post_init__(self) -> None:
        if self.table is None and self.partition is not None:
            raise ConfigError("a partition lock needs a table")

    @property
    def level(self) -> LockLevel:
        if self.table is None:
            return LockLevel.DB
        if self.partition is None:
            return LockLevel.TABLE
        return LockLevel.PARTITION


@dataclass(frozen=True)
class LockRequest:
    """Hive's ``LockRequest``: components locked together under one external lock id.

    Attributes:
        components: What to lock.
        txn_id: The owning transaction (0 for a lock outside any transaction).
        user: Who asks (shown by SHOW LOCKS).
        host: The client host.
        agent_info: Free text identifying the client.
        zero_wait_read: Hive's zero-wait read: a blocked request returns NOT_ACQUIRED at once
            and leaves nothing behind instead of waiting.
    """

    components: tuple[LockComponent, ...]
    txn_id: int = 0
    user: str = ""
    host: str = ""
    agent_info: str = ""
    zero_wait_read: bool = False

    def __post_init__(self) -> None:
        if not self.components:
            raise ConfigError("a lock request needs at least one component")


@dataclass(frozen=True)
class LockResponse:
    """Result of ``lock``/``check_lock``: the external lock id and its state.

    ``blocked_by`` is the external id of the first lock found in the way, when waiting.
    """

    lock_id: int
    state: LockState
    blocked_by: int | None = None


@dataclass(frozen=True)
class LockInfo:
    """One ``HIVE_LOCKS`` row, as SHOW LOCKS prints it."""

    lock_id: int
    lock_int_id: int
    database: str
    table: str | None
    partition: str | None
    state: LockState
    blocked_by: int | None
    type: LockType
    txn_id: int
    last_heartbeat_ms: int
    acquired_at_ms: int | None
    user: str
    host: str
    agent_info: str


def locks_overlap(
    a: tuple[str, str | None, str | None], b: tuple[str, str | None, str | None]
) -> bool:
    """Whether two ``(db, table, partition)`` lock targets cover common data.

    Same database, and either table is NULL or the tables match and (either partition is
    NULL or the partitions match).
    """
    if a[0] != b[0]:
        return False
    if a[1] is None or b[1] is None:
        return True
    if a[1] != b[1]:
        return False
    return a[2] is None or b[2] is None or a[2] == b[2]


_WAIT: dict[LockType, frozenset[LockType]] = {
    LockType.SHARED_READ: frozenset({LockType.EXCLUSIVE}),
    LockType.SHARED_WRITE: frozenset({LockType.EXCL_WRITE, LockType.EXCLUSIVE}),
    LockType.EXCL_WRITE: frozenset(
        {LockType.SHARED_WRITE, LockType.EXCL_WRITE, LockType.EXCLUSIVE}
    ),
    LockType.EXCLUSIVE: frozenset(LockType),
}


def lock_types_conflict(
    req_type: LockType, req_level: LockLevel, ex_type: LockType, ex_level: LockLevel
) -> bool:
    """Hive's conflict matrix (rows requested, columns existing) with its two footnotes.

    Footnote 1: a db-level SHARED_READ does not wait for a table/partition EXCLUSIVE.
    Footnote 2: a table/partition EXCLUSIVE does not wait for a db-level SHARED_READ.
    The caller has already established that the two targets overlap.
    """
    if ex_type not in _WAIT[req_type]:
        return False
    if (
        req_type is LockType.SHARED_READ
        and ex_type is LockType.EXCLUSIVE
        and req_level is LockLevel.DB
        and ex_level is not LockLevel.DB
    ):
        return False
    return not (
        req_type is LockType.EXCLUSIVE
        and ex_type is LockType.SHARED_READ
        and ex_level is LockLevel.DB
        and req_level is not LockLevel.DB
    )


def lock_blocks(
    req: tuple[int, LockType, str, str | None, str | None],
    ex: tuple[int, LockType, str, str | None, str | None],
) -> bool:
    """Whether an existing lock ``ex`` (with a smaller ext id) makes ``req`` wait.

    Both are ``(txn_id, type, db, table, partition)``. Locks of the same transaction never
    conflict; a request outside any transaction (txn 0) is checked against everything.
    """
    if req[0] != 0 and req[0] == ex[0]:
        return False
    if not locks_overlap(req[2:], ex[2:]):
        return False
    return lock_types_conflict(req[1], _level(req[3], req[4]), ex[1], _level(ex[3], ex[4]))


def _level(table: str | None, partition: str | None) -> LockLevel:
    if table is None:
        return LockLevel.DB
    return LockLevel.TABLE if partition is None else LockLevel.PARTITION
