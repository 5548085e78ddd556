"""8 processes x 500 transactions with random commits and aborts, on each backend.

Checks: write ids dense per table, no txn lost, every txn ends in the state its
process saw, and no lock granted twice in conflict (an EXCL_WRITE critical section
guarded by an O_EXCL marker file that a second holder would find).
"""

from __future__ import annotations

import multiprocessing
import os
import random
from collections import defaultdict
from pathlib import Path

import pytest

from acidstream.txn import TableDef, TxnState, open_store
from acidstream.txn.locks import DataOperationType as Op
from acidstream.txn.locks import LockComponent, LockRequest, LockState, LockType

PROCS = 8
TXNS_PER_PROC = 500
TABLES = ("t0", "t1")


def _worker(url: str, wh: str, marker: str, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    committed: list[int] = []
    aborted: list[int] = []
    writes: list[tuple[str, int, int]] = []
    violations = 0
    exclusive_sections = 0
    with open_store(url, warehouse=wh) as store:
        for _ in range(TXNS_PER_PROC):
            (t,) = store.open_txns(1, user=f"w{seed}", host="localhost")
            table = rng.choice(TABLES)
            wid = store.allocate_write_ids([t], "default", table)[t]
            writes.append((table, wid, t))
            guarded = rng.random() < 0.15
            if guarded:
                comp = LockComponent(LockType.EXCL_WRITE, "default", "guarded", None, Op.INSERT)
                resp = store.lock(LockRequest((comp,), txn_id=t), wait_s=120)
            else:
                comp = LockComponent(LockType.SHARED_READ, "default", table, None, Op.INSERT)
                resp = store.lock(LockRequest((comp,), txn_id=t))
            assert resp.state is LockState.ACQUIRED
            if guarded:
                exclusive_sections += 1
                try:
                    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                    os.close(fd)
                    os.unlink(marker)  # leave the section before the lock goes
                except FileExistsError:
                    violations += 1
            if rng.random() < 0.7:
                store.commit_txn(t)
                committed.append(t)
            else:
                store.abort_txn(t)
                aborted.append(t)
    return {
        "committed": committed,
        "aborted": aborted,
        "writes": writes,
        "violations": violations,
        "exclusive": exclusive_sections,
    }


@pytest.mark.slow
def test_many_processes_many_txns(store_url: str, tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    with open_store(store_url, warehouse=wh) as store:
        for name in (*TABLES, "guarded"):
            store.create_table(
                TableDef("default", name, (("id", "int"),), parameters={"transactional": "true"})
            )
    marker = str(tmp_path / "critical-section")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(PROCS) as pool:
        results = pool.starmap(_worker, [(store_url, wh, marker, seed) for seed in range(PROCS)])

    committed = [t for r in results for t in r["committed"]]  # type: ignore[attr-defined]
    aborted = [t for r in results for t in r["aborted"]]  # type: ignore[attr-defined]
    assert sum(r["violations"] for r in results) == 0  # type: ignore[misc]
    assert sum(r["exclusive"] for r in results) > 100  # type: ignore[misc]
    assert len(committed) + len(aborted) == PROCS * TXNS_PER_PROC
    assert len(set(committed) | set(aborted)) == PROCS * TXNS_PER_PROC

    by_table: dict[str, list[int]] = defaultdict(list)
    for r in results:
        for table, wid, _ in r["writes"]:  # type: ignore[attr-defined]
            by_table[table].append(wid)
    with open_store(store_url, warehouse=wh) as store:
        for table, wids in by_table.items():
            assert sorted(wids) == list(range(1, len(wids) + 1)), f"{table} write ids not dense"
        for r in results:
            for table, wid, t in r["writes"]:  # type: ignore[attr-defined]
                assert store.txn_for_write_id("default", table, wid) == t
        states = {t.txn_id: t.state for t in store.show_txns()}
        assert len(states) == PROCS * TXNS_PER_PROC  # no txn lost, none invented
        assert all(states[t] is TxnState.COMMITTED for t in committed)
        assert all(states[t] is TxnState.ABORTED for t in aborted)
        assert store.show_locks() == []
        vt = store.get_valid_txns()
        assert vt.open_txns == () and set(vt.aborted_txns) == set(aborted)
