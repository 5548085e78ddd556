"""Hive's lock compatibility matrix and its footnotes, as a pure function."""

from __future__ import annotations

import pytest

from acidstream.txn.locks import (
    LockLevel,
    LockType,
    lock_blocks,
    lock_types_conflict,
    locks_overlap,
)

R, W, X, E = LockType.SHARED_READ, LockType.SHARED_WRITE, LockType.EXCL_WRITE, LockType.EXCLUSIVE

# rows = requested, columns = existing (SHARED_READ, SHARED_WRITE, EXCL_WRITE, EXCLUSIVE)
MATRIX = {
    R: (False, False, False, True),
    W: (False, False, True, True),
    X: (False, True, True, True),
    E: (True, True, True, True),
}


@pytest.mark.parametrize("req", [R, W, X, E])
@pytest.mark.parametrize("ex_index", range(4))
def test_matrix_at_table_level(req: LockType, ex_index: int) -> None:
    ex = (R, W, X, E)[ex_index]
    assert lock_types_conflict(req, LockLevel.TABLE, ex, LockLevel.TABLE) is MATRIX[req][ex_index]


def test_footnote_1_db_shared_read_does_not_wait_for_table_exclusive() -> None:
    assert not lock_types_conflict(R, LockLevel.DB, E, LockLevel.TABLE)
    assert not lock_types_conflict(R, LockLevel.DB, E, LockLevel.PARTITION)
    assert lock_types_conflict(R, LockLevel.DB, E, LockLevel.DB)
    assert lock_types_conflict(R, LockLevel.TABLE, E, LockLevel.DB)


def test_footnote_2_table_exclusive_does_not_wait_for_db_shared_read() -> None:
    assert not lock_types_conflict(E, LockLevel.TABLE, R, LockLevel.DB)
    assert not lock_types_conflict(E, LockLevel.PARTITION, R, LockLevel.DB)
    assert lock_types_conflict(E, LockLevel.DB, R, LockLevel.DB)
    assert lock_types_conflict(E, LockLevel.TABLE, R, LockLevel.TABLE)


def test_overlap_rules() -> None:
    assert locks_overlap(("db", None, None), ("db", "t", "p=1"))
    assert locks_overlap(("db", "t", None), ("db", "t", "p=1"))
    assert locks_overlap(("db", "t", "p=1"), ("db", "t", "p=1"))
    assert not locks_overlap(("db", "t", "p=1"), ("db", "t", "p=2"))
    assert not locks_overlap(("db", "t", None), ("db", "u", None))
    assert not locks_overlap(("db", None, None), ("other", None, None))


def test_same_txn_never_conflicts_but_txn_zero_conflicts_with_everything() -> None:
    assert not lock_blocks((5, E, "db", "t", None), (5, E, "db", "t", None))
    assert lock_blocks((0, E, "db", "t", None), (0, E, "db", "t", None))
    assert lock_blocks((6, E, "db", "t", None), (5, R, "db", "t", None))
    assert not lock_blocks((6, E, "db", "t", "p=1"), (5, E, "db", "t", "p=2"))
