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
from pathlib import Path

import pytest

import acidstream
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


def test_a_writer_killed_before_naming_its_partitions_is_cleaned_from_every_partition(
    store: TxnStore, store_url: str, warehouse: str, clock: FakeClock
) -> None:
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
    out = Cleaner(store, clock=clock).clean_aborted()
    assert sorted(str(Path(p).relative_to(root)) for o in out for p in o.deleted) == dead
    assert sum(o.forgotten_txns for o in out) == 1
    assert _deltas(root) == committed
    assert killed.txn_id not in {t.txn_id for t in store.show_txns()}
    assert not fsck_table(store, table, deep=False).findings
    t = acidstream.table("events", metastore=store_url, warehouse=warehouse)
    assert sorted(t.read(columns=["id"]).column("id").to_pylist()) == list(range(30))
