"""Streaming writers and snapshot readers running while the compactor loops (threads, each
with its own metastore client, both backends).

* every snapshot read returns exactly the rows of the txns that snapshot sees committed
  (no row lost, doubled, or taken from an aborted or open txn);
* no writer waits on a compaction: the compactor takes no lock, and no lock is ever left
  waiting while a compaction is writing;
* no compaction conflicts with an insert: every compaction reaches ``ready for cleaning``
  and every writer's commit succeeds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

import pytest

from acidstream.acid import faults
from acidstream.acid.reader import read_path
from acidstream.compaction import Compactor, CompactorConfig
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictDelimitedInputWriter
from acidstream.txn.compaction_sql import CompactionQueue
from acidstream.txn.locks import LockState
from acidstream.txn.store import TxnStore
from tests.compaction.conftest import MakeTbl
from tests.plugins.store_fixture import FakeClock

WRITERS = 2
TXNS_PER_WRITER = 30
ROWS_PER_TXN = 20


@pytest.fixture(autouse=True)
def _no_hook_left() -> Iterator[None]:
    yield
    faults.set_hook(None)


def test_writers_and_readers_while_the_compactor_loops(
    store: TxnStore,
    store_factory: Callable[[], TxnStore],
    make_tbl: MakeTbl,
    clock: FakeClock,
) -> None:
    t = make_tbl("t")
    location = t.dir()
    intents: dict[int, list[int]] = {}  # txn id -> ids it writes, recorded before commit
    intents_lock = threading.Lock()
    writers_done = threading.Event()
    errors: list[str] = []
    lock_problems: list[str] = []
    compactions_mid_write: list[str] = []
    reads: list[int] = []

    def writer(w: int) -> None:
        s = store_factory()
        try:
            with StreamingConnection(
                "t",
                record_writer=StrictDelimitedInputWriter(field_delimiter=","),
                store=s,
                options=StreamingOptions(txns_per_batch=5, housekeeping_interval_s=None),
            ) as conn:
                for k in range(TXNS_PER_WRITER):
                    txn = conn.begin_transaction()
                    ids = [w * 1_000_000 + k * 1000 + i for i in range(ROWS_PER_TXN)]
                    with intents_lock:
                        intents[txn] = ids
                    conn.write_rows([(i, f"n{i}", i % 97) for i in ids])
                    if k % 7 == 3:
                        conn.abort_transaction()  # its rows must never be read
                    else:
                        conn.commit_transaction()
        except Exception as e:
            errors.append(f"writer {w}: {type(e).__name__}: {e}")

    def reader() -> None:
        s = store_factory()
        try:
            while not writers_done.is_set() or len(reads) < 3:
                txn = s.open_txns(1, user="reader", host="h")[0]
                txns = s.get_valid_txns(txn)
                wids = s.get_valid_write_ids("default", "t", txns)
                with intents_lock:
                    known = dict(intents)
                want = sorted(i for x, ids in known.items() if txns.is_txn_valid(x) for i in ids)
                ids: list[int] = []
                if os.path.isdir(location):  # made by the first write
                    got = read_path(
                        location, write_ids=wids, txns=txns, columns=["id"], schema=t.schema
                    )
                    ids = sorted(got.column("id").to_pylist())
                s.commit_txn(txn)
                if ids != want:
                    errors.append(
                        f"snapshot {txns}: read {len(ids)} rows, {len(set(ids))} distinct; "
                        f"committed {len(want)}"
                    )
                    return
                reads.append(len(ids))
        except Exception as e:
            errors.append(f"reader: {type(e).__name__}: {e}")

    watcher = store_factory()

    def during_compaction(step: str) -> None:
        # The compactor's txn is open and its files are written: nobody may be waiting.
        if step != "compaction.after_files":
            return
        if not writers_done.is_set():
            compactions_mid_write.append(step)
        mine = {x.txn_id for x in watcher.show_txns() if x.user == "compactor"}
        if not mine:
            lock_problems.append("no compactor txn is open during the compaction")
        for lock in watcher.show_locks():
            if lock.state is LockState.WAITING:
                lock_problems.append(f"lock {lock.lock_id} of txn {lock.txn_id} is waiting")
            if lock.txn_id in mine:
                lock_problems.append(f"the compactor's txn holds lock {lock.lock_id}")

    faults.set_hook(during_compaction)
    cstore = store_factory()
    compactor = Compactor(cstore, config=CompactorConfig(delta_num_threshold=2), clock=clock)
    queue = CompactionQueue(cstore, clock=clock)
    outcomes: list[str] = []

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for th in threads:
        th.start()
    passes = 0
    while any(th.is_alive() for th in threads[:WRITERS]) or passes < 2:
        if passes % 3 == 2:
            queue.request("default", "t", major=True)  # majors too, not only what's due
        report = compactor.run_once()
        outcomes += [f"{c.id}:{c.state}:{c.message}" for c in report.compactions]
        passes += 1
        if not any(th.is_alive() for th in threads[:WRITERS]):
            writers_done.set()
    writers_done.set()
    for th in threads:
        th.join(timeout=300)
    assert not any(th.is_alive() for th in threads)
    faults.set_hook(None)
    # A last major compaction and cleaning pass, then everything committed is there once.
    queue.request("default", "t", major=True)
    clock.advance(301)
    outcomes += [f"{c.id}:{c.state}:{c.message}" for c in compactor.run_once().compactions]

    assert errors == [], "\n".join(errors)
    assert lock_problems == []
    assert compactions_mid_write, "no compaction ran while the writers were writing"
    assert reads, "no snapshot was read"
    assert not [o for o in outcomes if ":f:" in o], outcomes  # no compaction failed
    assert len([o for o in outcomes if ":r:" in o]) >= 2, outcomes
    txns = store.get_valid_txns()
    wids = store.get_valid_write_ids("default", "t", txns)
    final = sorted(read_path(location, write_ids=wids, txns=txns).column("id").to_pylist())
    expected = sorted(
        w * 1_000_000 + k * 1000 + i
        for w in range(WRITERS)
        for k in range(TXNS_PER_WRITER)
        if k % 7 != 3
        for i in range(ROWS_PER_TXN)
    )
    # (The aborted txns are forgotten by now, so they read as committed: their rows must be
    # gone from the files, not merely hidden.)
    assert final == expected
