"""A dynamic-partition writer killed after writing its files and before naming its
partitions (``batch.before_add_partitions``): its txn's only component is the table-level
placeholder, yet its delta directories lie in partition directories. Once the txn is
aborted, the Cleaner removes them from every partition (Hive's "dynamic partition abort"
cleaning) and forgets the txn; committed rows stay, and fsck is clean."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import acidstream
from acidstream.acid import faults
from acidstream.compaction import Cleaner
from acidstream.recovery.fsck import fsck_table
from acidstream.txn.catalog import TableDef
from acidstream.txn.housekeeper import Housekeeper
from acidstream.txn.store import TxnState, TxnStore
from tests.plugins.store_fixture import FakeClock

pytestmark = pytest.mark.slow

WRITER = """
import sys
from acidstream import StreamingConnection, StrictJsonWriter
metastore, warehouse, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with StreamingConnection("events", record_writer=StrictJsonWriter(), metastore=metastore,
                         warehouse=warehouse) as conn:
    conn.begin_transaction()
    conn.write_block([b'{"id": %d, "ds": "d%d"}' % (i, i % 3) for i in range(lo, hi)])
    conn.commit_transaction()
print("committed", flush=True)
"""


def _write(store_url: str, warehouse: str, lo: int, hi: int, fault: str | None) -> None:
    env = dict(os.environ)
    env.pop("ACIDSTREAM_FAULTS", None)
    if fault:
        env["ACIDSTREAM_FAULTS"] = fault
    p = subprocess.run(
        [sys.executable, "-c", WRITER, store_url, warehouse, str(lo), str(hi)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if fault:
        assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
        assert p.stdout == ""
    else:
        assert p.returncode == 0 and p.stdout == "committed\n", p.stderr[-2000:]


def _deltas(root: Path) -> list[str]:
    return sorted(str(d.relative_to(root)) for d in root.glob("ds=*/delta_*") if d.is_dir())


@dataclass(frozen=True)
class _Killed:
    root: Path
    committed: list[str]  # the committed txn's deltas
    dead: list[str]  # the killed txn's deltas
    txn: int


def _killed_writer_aborted(
    store: TxnStore, store_url: str, warehouse: str, clock: FakeClock
) -> _Killed:
    """A committed txn in d0..d2, then a writer killed before naming its partitions, its
    txn aborted by the housekeeper and old enough for the Cleaner to forget."""
    store.create_table(
        TableDef(
            db="default",
            name="events",
            columns=(("id", "bigint"),),
            partition_keys=(("ds", "string"),),
            parameters={"transactional": "true"},
        )
    )
    table = store.get_table("default", "events")
    assert table.location is not None
    root = Path(table.location)
    _write(store_url, warehouse, 0, 30, None)  # committed: d0, d1, d2
    committed = _deltas(root)
    assert len(committed) == 3
    _write(store_url, warehouse, 30, 60, "batch.before_add_partitions")
    dead = [d for d in _deltas(root) if d not in committed]
    assert len(dead) == 3, _deltas(root)  # the killed txn's files: one delta per partition
    (killed,) = [t for t in store.show_txns() if t.state is TxnState.OPEN]

    # (The fake clock started before the writer ran, in real time, a few seconds later.)
    clock.advance(time.time() - clock() + store.txn_timeout_s() + 1)
    Housekeeper(store_url, clock=clock).run_once()
    assert store.txn_state(killed.txn_id) is TxnState.ABORTED
    report = fsck_table(store, table, deep=False)
    assert {f.kind for f in report.findings} == {"aborted_dir"}, report.findings
    clock.advance(store.txn_timeout_s() + 1)  # forgotten only once its writer has noticed
    return _Killed(root, committed, dead, killed.txn_id)


def _check_clean(store: TxnStore, store_url: str, warehouse: str, k: _Killed) -> None:
    assert _deltas(k.root) == k.committed
    assert k.txn not in {t.txn_id for t in store.show_txns()}
    table = store.get_table("default", "events")
    assert not fsck_table(store, table, deep=False).findings
    t = acidstream.table("events", metastore=store_url, warehouse=warehouse)
    assert sorted(t.read(columns=["id"]).column("id").to_pylist()) == list(range(30))


def test_a_writer_killed_before_naming_its_partitions_is_cleaned_from_every_partition(
    store: TxnStore, store_url: str, warehouse: str, clock: FakeClock
) -> None:
    k = _killed_writer_aborted(store, store_url, warehouse, clock)
    out = Cleaner(store, clock=clock).clean_aborted()
    assert sorted(str(Path(p).relative_to(k.root)) for o in out for p in o.deleted) == k.dead
    assert sum(o.forgotten_txns for o in out) == 1
    _check_clean(store, store_url, warehouse, k)


def test_a_storage_error_in_the_partition_walk_forgets_nothing_until_a_pass_finishes(
    store: TxnStore, store_url: str, warehouse: str, clock: FakeClock
) -> None:
    """The disk fails after the first of the three dead deltas is deleted: the pass
    reports the failure and keeps the txn (its other deltas are still on disk, hidden
    only by its ABORTED record); the next pass deletes them and only then forgets it."""
    k = _killed_writer_aborted(store, store_url, warehouse, clock)
    hits: list[str] = []

    def disk_fails_on_the_second_delete(step: str) -> None:
        if step == "cleaner.before_delete":
            hits.append(step)
            if len(hits) == 2:
                raise OSError(5, "Input/output error (injected)")

    faults.set_hook(disk_fails_on_the_second_delete)
    try:
        out = Cleaner(store, clock=clock).clean_aborted()
    finally:
        faults.set_hook(None)
    assert [o.state for o in out] == ["failed"], out
    assert isinstance(out[0].error, OSError)
    left = [d for d in _deltas(k.root) if d in k.dead]
    assert len(left) == 2, left  # one deleted before the failure
    assert store.txn_state(k.txn) is TxnState.ABORTED  # not forgotten: it still hides them
    t = acidstream.table("events", metastore=store_url, warehouse=warehouse)
    assert sorted(t.read(columns=["id"]).column("id").to_pylist()) == list(range(30))

    out = Cleaner(store, clock=clock).clean_aborted()
    assert sorted(str(Path(p).relative_to(k.root)) for o in out for p in o.deleted) == left
    assert sum(o.forgotten_txns for o in out) == 1
    _check_clean(store, store_url, warehouse, k)
