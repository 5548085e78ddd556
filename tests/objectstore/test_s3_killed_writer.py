"""A writer SIGKILLed while it writes to an ``s3://`` warehouse (moto's S3 server): every
txn it reported committed reads back whole, nothing of its open txn shows, and once its
txn is aborted (the housekeeper, as any writer, server or job runs it) ``fsck`` is clean."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import acidstream
from acidstream.txn.catalog import TableDef
from acidstream.txn.store import TxnState, open_store
from tests.objectstore.s3_helpers import clean_env, run_in_process
from tests.plugins.s3_fixture import S3Warehouse

pytestmark = pytest.mark.s3

ROWS_PER_TXN = 500

WRITER = """
import json, sys
from acidstream import StreamingConnection, StrictJsonWriter
metastore, warehouse, options, rows = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
with StreamingConnection("events", record_writer=StrictJsonWriter(), metastore=metastore,
                         warehouse=warehouse, storage_options=options) as conn:
    n = 0
    while True:
        txn = conn.begin_transaction()
        conn.write_block([b'{"id": %d, "msg": "m", "ds": "d%d"}' % (n * rows + i, i % 3)
                          for i in range(rows)])
        conn.commit_transaction()
        print(f"committed {n}", flush=True)
        n += 1
"""


def _table(store_url: str, wh: S3Warehouse) -> None:
    with open_store(store_url, warehouse=wh.url, storage_options=wh.storage_options) as s:
        s.create_table(
            TableDef(
                db="default",
                name="events",
                columns=(("id", "bigint"), ("msg", "string")),
                partition_keys=(("ds", "string"),),
                parameters={"transactional": "true"},
            )
        )
        s.set_setting("txn_timeout_s", 1)  # the dead writer's txn times out at once


def _writer(store_url: str, wh: S3Warehouse, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, store_url, wh.url, json.dumps(wh.storage_options),
         str(ROWS_PER_TXN)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def _check_after_the_kill(store_url: str, wh: S3Warehouse, acked: int) -> None:
    t = acidstream.table(
        "events", metastore=store_url, warehouse=wh.url, storage_options=wh.storage_options
    )
    ids = sorted(t.read(columns=["id"]).column("id").to_pylist())
    # Every acknowledged txn whole; at most one more (committed, its line not printed yet).
    assert len(ids) in (acked * ROWS_PER_TXN, (acked + 1) * ROWS_PER_TXN), (len(ids), acked)
    assert ids == list(range(len(ids)))
    store_args = ["--warehouse", wh.url, "--metastore", store_url, *wh.cli_options()]
    with open_store(store_url) as s:
        beats = [x.last_heartbeat_ms for x in s.show_txns() if x.state is TxnState.OPEN]
    # The dead writer's txn times out 1 s after its last heartbeat: wait exactly that long
    # (nothing else would say so), then the housekeeper aborts it.
    time.sleep(max(0.0, max(beats, default=0) / 1000 + 1.2 - time.time()))
    run_in_process(["housekeeping", *store_args]).ok()
    with open_store(store_url) as s:
        assert not [x for x in s.show_txns() if x.state is TxnState.OPEN]
    fsck = run_in_process(["fsck", "default.events", *store_args, "--format", "json"])
    if fsck.code != 0:  # the aborted txn's objects, if it uploaded any, wait for the Cleaner
        findings = json.loads(fsck.out)["findings"]
        assert {f["kind"] for f in findings} == {"aborted_dir"}, fsck.out
        run_in_process(["compactor", "--once", "--no-initiator", *store_args]).ok()
        fsck = run_in_process(["fsck", "default.events", *store_args])
    assert "clean" in fsck.ok().out, fsck.out
    assert sorted(t.read(columns=["id"]).column("id").to_pylist()) == ids


def test_a_writer_killed_mid_stream_leaves_committed_rows_and_a_clean_fsck(
    s3_warehouse: S3Warehouse, store_url: str
) -> None:
    """SIGKILL at whatever point the writer is (writing rows, uploading its object,
    committing) after it acknowledged three txns."""
    _table(store_url, s3_warehouse)
    p = _writer(store_url, s3_warehouse, clean_env())
    acked = 0
    try:
        assert p.stdout is not None
        for line in p.stdout:
            assert line.startswith("committed "), line
            acked += 1
            if acked == 3:
                break
        assert acked == 3, p.stderr.read() if p.stderr else ""
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.kill()
        p.wait(60)
    assert p.returncode == -signal.SIGKILL
    _check_after_the_kill(store_url, s3_warehouse, acked)


@pytest.mark.parametrize("step", ["batch.before_add_partitions", "batch.before_commit"])
def test_a_writer_killed_after_uploading_before_the_commit_leaves_nothing_visible(
    s3_warehouse: S3Warehouse, tmp_path: Path, step: str
) -> None:
    """The kill at ``batch.before_commit``: the txn's object is uploaded whole (one object
    per commit on S3) but the metastore never committed it: no row of it shows, fsck is
    clean once the txn is aborted (the object is an aborted write's, which readers skip
    and the Cleaner removes). At ``batch.before_add_partitions`` the txn has not named its
    partitions yet (its only component is the table-level placeholder; its upload may or
    may not have finished): the Cleaner finds its objects in the partitions all the same."""
    store_url = f"sqlite:///{tmp_path}/m.db"
    _table(store_url, s3_warehouse)
    env = clean_env({"ACIDSTREAM_FAULTS": step})
    p = _writer(store_url, s3_warehouse, env)
    out, err = p.communicate(timeout=300)
    assert p.returncode == -signal.SIGKILL, err[-2000:]
    assert out == ""
    _check_after_the_kill(store_url, s3_warehouse, 0)
