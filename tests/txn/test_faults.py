"""A database that goes away mid-commit leaves no half-committed transaction.

PostgreSQL: the store's server connection is killed (``pg_terminate_backend``) at a named
step inside commit_txn's DB transaction. Both backends: the committing process is
SIGKILLed at a named step (``ACIDSTREAM_FAULTS``, see ``acidstream.acid.faults``). Afterwards the txn is either fully
committed or fully open, never half, and can then be committed normally.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from acidstream.acid import faults
from acidstream.acid.errors import CommitStateUnknownError
from acidstream.acid.faults import ENV as CRASH_ENV
from acidstream.txn import TxnState, TxnStore
from acidstream.txn.locks import DataOperationType as Op
from tests.plugins.store_fixture import PG_URL
from tests.txn.conftest import make_table, write_lock

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_hook_left() -> Iterator[None]:
    yield
    faults.set_hook(None)


def _count(store: TxnStore, table: str, where: str, txn: int) -> int:
    row = store.database.run(
        "test_count",
        lambda tx: tx.one(f"SELECT COUNT(*) FROM {table} WHERE {where} = ?", txn),
        write=False,
    )
    assert row is not None
    return int(row[0])


def _footprint(store: TxnStore, txn: int) -> tuple[int, int, int, int]:
    """(TXN_COMPONENTS, COMPLETED_TXN_COMPONENTS, WRITE_SET, HIVE_LOCKS) rows of the txn."""
    return (
        _count(store, "TXN_COMPONENTS", "TC_TXNID", txn),
        _count(store, "COMPLETED_TXN_COMPONENTS", "CTC_TXNID", txn),
        _count(store, "WRITE_SET", "WS_TXNID", txn),
        _count(store, "HIVE_LOCKS", "HL_TXNID", txn),
    )


OPEN_FOOTPRINT = (1, 0, 0, 1)
COMMITTED_FOOTPRINT = (0, 1, 1, 0)


def _update_txn(store: TxnStore) -> int:
    make_table(store)
    (t,) = store.open_txns(1, user="u", host="h")
    store.allocate_write_ids([t], "default", "t")
    write_lock(store, t, Op.UPDATE)
    assert _footprint(store, t) == OPEN_FOOTPRINT
    return t


def _assert_whole(store: TxnStore, txn: int) -> TxnState | None:
    state = store.txn_state(txn)
    if state is TxnState.COMMITTED:
        assert _footprint(store, txn) == COMMITTED_FOOTPRINT
        assert store.get_table_param("default", "t", "_meta.k") == "v"
    else:
        assert state is TxnState.OPEN
        assert _footprint(store, txn) == OPEN_FOOTPRINT
        assert store.get_table_param("default", "t", "_meta.k") is None
    return state


def _terminate_at(store: TxnStore, point: str) -> list[str]:
    import psycopg

    pid = store.database.backend_pid  # type: ignore[attr-defined]
    fired: list[str] = []

    def hook(name: str) -> None:
        if name == point and not fired:
            fired.append(name)
            with psycopg.connect(PG_URL, autocommit=True) as admin:
                # the timeout form waits until the backend is really gone
                (ok,) = admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,)).fetchone()  # type: ignore[misc]
                assert ok

    faults.set_hook(hook)
    return fired


@pytest.mark.postgres
@pytest.mark.parametrize(
    "point",
    [
        "commit_txn.after_write_set",
        "commit_txn.after_completed_components",
        "commit_txn.after_key_value",
    ],
)
def test_pg_connection_killed_mid_commit_is_retried_whole(
    store: TxnStore, store_url: str, point: str
) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("pg_terminate_backend needs the PostgreSQL backend")
    t = _update_txn(store)
    fired = _terminate_at(store, point)
    # the statement after the kill fails before COMMIT: the server rolled everything
    # back, so the store reconnects and runs the whole commit again
    store.commit_txn(t, key="_meta.k", value="v", db="default", table="t")
    assert fired == [point]
    assert _assert_whole(store, t) is TxnState.COMMITTED


@pytest.mark.postgres
def test_pg_connection_killed_at_commit_reports_unknown_state(
    store: TxnStore, store_url: str
) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("pg_terminate_backend needs the PostgreSQL backend")
    t = _update_txn(store)
    fired = _terminate_at(store, "commit_txn.before_commit")
    with pytest.raises(CommitStateUnknownError, match="outcome is unknown"):
        store.commit_txn(t, key="_meta.k", value="v", db="default", table="t")
    assert fired == ["commit_txn.before_commit"]
    faults.set_hook(None)
    # the caller asks the store: here the COMMIT never ran, so the txn is whole and open
    assert _assert_whole(store, t) is TxnState.OPEN
    store.commit_txn(t, key="_meta.k", value="v", db="default", table="t")
    assert _assert_whole(store, t) is TxnState.COMMITTED


_CHILD = (
    "import sys; from acidstream.txn import open_store; "
    "s = open_store(sys.argv[1]); "
    "s.commit_txn(int(sys.argv[2]), key='_meta.k', value='v', db='default', table='t')"
)


@pytest.mark.parametrize(
    ("point", "expected"),
    [
        ("commit_txn.after_write_set", TxnState.OPEN),
        ("commit_txn.after_completed_components", TxnState.OPEN),
        ("commit_txn.after_key_value", TxnState.OPEN),
        ("commit_txn.before_commit", TxnState.OPEN),
        ("commit_txn.after_commit", TxnState.COMMITTED),
    ],
)
def test_process_killed_mid_commit_leaves_no_half_commit(
    store: TxnStore, store_url: str, point: str, expected: TxnState
) -> None:
    t = _update_txn(store)
    env = {**os.environ, CRASH_ENV: point, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, store_url, str(t)], env=env, cwd=ROOT, capture_output=True
    )
    assert proc.returncode == -9, proc.stderr.decode()
    assert _assert_whole(store, t) is expected
    store.commit_txn(t, key="_meta.k", value="v", db="default", table="t")  # idempotent if done
    assert _assert_whole(store, t) is TxnState.COMMITTED


_BATCH_CHILD = (
    "import sys; from acidstream.txn import open_store; "
    "s = open_store(sys.argv[1]); "
    "s.commit_txns([int(t) for t in sys.argv[2:]], key='_meta.k', value='v', db='default', table='t')"
)


@pytest.mark.parametrize(
    ("point", "expected"),
    [
        ("commit_txns.after_completed_components", TxnState.OPEN),
        ("commit_txns.before_state", TxnState.OPEN),
        ("commit_txns.before_commit", TxnState.OPEN),
        ("commit_txns.after_commit", TxnState.COMMITTED),
    ],
)
def test_process_killed_mid_batch_commit_commits_all_or_none(
    store: TxnStore, store_url: str, point: str, expected: TxnState
) -> None:
    make_table(store)
    ids = store.open_txns(3, user="u", host="h")
    store.allocate_write_ids(ids, "default", "t")
    for t in ids:
        write_lock(store, t, Op.INSERT)
    env = {**os.environ, CRASH_ENV: point, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _BATCH_CHILD, store_url, *map(str, ids)],
        env=env, cwd=ROOT, capture_output=True,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr.decode()
    assert [store.txn_state(t) for t in ids] == [expected] * 3
    meta = store.get_table_param("default", "t", "_meta.k")
    assert meta == ("v" if expected is TxnState.COMMITTED else None)
    store.commit_txns(ids, key="_meta.k", value="v", db="default", table="t")
    assert [store.txn_state(t) for t in ids] == [TxnState.COMMITTED] * 3
