"""Locks and conflicts as Hive's (spec §6, notes §2): two real processes mutating one
partition, both with files written and txns open: the first committer wins, the other gets
``CommitConflictError`` with nothing of it visible (its files removed); with ``retries`` it
starts over on a new snapshot and applies on top of the winner (no stale delete events or
row versions replayed). A streaming insert concurrent with a mutation never conflicts, and
mutations of different partitions do not either. Both metastore backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from acidstream import Table
from acidstream.ingest.connection import StreamingConnection, StreamingOptions
from acidstream.ingest.record_writers import StrictJsonWriter
from acidstream.txn.store import TxnStore
from tests.ingest.conftest import MakeTable
from tests.mutation.conftest import Insert, rows_of

ROOT = Path(__file__).resolve().parents[2]


class Child:
    """One ``tests.mutation.mutate_child`` process, paused before its commit."""

    def __init__(self, tmp: Path, name: str, url: str, warehouse: str, kind: str, retries: int = 0):
        self.ready, self.go = tmp / f"{name}.ready", tmp / f"{name}.go"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.mutation.mutate_child", url, warehouse, kind,
             str(self.ready), str(self.go), str(retries)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while not self.ready.exists():
            if self.proc.poll() is not None:
                raise AssertionError(f"child ended early: {self.proc.communicate()}")
            assert time.monotonic() < deadline, "child never reached its commit"
            time.sleep(0.02)

    def finish(self) -> dict[str, Any]:
        self.go.touch()
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, err
        return dict(json.loads(out.strip().splitlines()[-1]))


@pytest.fixture
def c(make_table: MakeTable, insert: Insert, handle: Callable[[str], Table]) -> Table:
    """``default.c (id int, v string, n int)`` partitioned by ds: ids 0..9 in ds=a (n = id),
    10..14 in ds=b."""
    make_table("c", "id int, v string, n int", partitioned_by=[("ds", "string")])
    insert("c", [{"id": i, "v": f"v{i}", "n": i, "ds": "a"} for i in range(10)])
    insert("c", [{"id": i, "v": f"v{i}", "n": i, "ds": "b"} for i in range(10, 15)])
    return handle("c")


def _bucket_files(warehouse: str) -> list[str]:
    return sorted(
        str(p.relative_to(warehouse)) for p in Path(warehouse).rglob("bucket_*") if p.is_file()
    )


def test_two_processes_update_one_partition_first_committer_wins(
    c: Table, tmp_path: Path, store_url: str, warehouse: str
) -> None:
    before = _bucket_files(warehouse)
    a = Child(tmp_path, "a", store_url, warehouse, "set_a")
    b = Child(tmp_path, "b", store_url, warehouse, "inc_n")
    a.wait_ready()
    b.wait_ready()  # both have found their rows and written their files
    ra = a.finish()
    rb = b.finish()
    assert "ok" in ra and ra["ok"]["rows_updated"] == 5
    assert rb["error"] == "CommitConflictError", rb
    assert "ds=a" in rb["message"]
    got = rows_of(c.read(), ["id", "v", "n"])
    assert got[:5] == [(i, "A", i) for i in range(5)]  # nothing of b is visible
    assert got[5:] == [(i, f"v{i}", i) for i in range(5, 15)]
    # b's files are gone: only the initial files and a's are left
    written = {str(Path(f).relative_to(warehouse)) for f in ra["ok"]["files_written"]}
    assert set(_bucket_files(warehouse)) == set(before) | written
    assert written and not written & set(before)


def test_with_retries_the_loser_reruns_on_the_winner(
    c: Table, tmp_path: Path, store_url: str, warehouse: str
) -> None:
    a = Child(tmp_path, "a", store_url, warehouse, "set_a")
    b = Child(tmp_path, "b", store_url, warehouse, "inc_n", retries=2)
    a.wait_ready()
    b.wait_ready()
    ra = a.finish()
    rb = b.finish()
    assert "ok" in ra and "ok" in rb, (ra, rb)
    assert rb["ok"]["attempts"] == 2 and rb["ok"]["rows_updated"] == 5
    assert rb["ok"]["write_id"] > ra["ok"]["write_id"]
    # b ran again on a's rows: a's new values kept, n incremented once
    assert rows_of(c.read(), ["id", "v", "n"])[:5] == [(i, "A", i + 1) for i in range(5)]
    assert c.read().num_rows == 15


def test_mutations_of_different_partitions_do_not_conflict(
    c: Table, tmp_path: Path, store_url: str, warehouse: str
) -> None:
    a = Child(tmp_path, "a", store_url, warehouse, "set_a")  # ds=a (ids < 5)
    a.wait_ready()

    other = c.update({"v": pc.scalar("B")}, pc.field("ds") == "b")
    assert other.partitions == ("ds=b",)
    ra = a.finish()
    assert "ok" in ra, ra
    got = rows_of(c.read(), ["id", "v"])
    assert got == [(i, "A") for i in range(5)] + [(i, f"v{i}") for i in range(5, 10)] + [
        (i, "B") for i in range(10, 15)
    ]


def test_a_streaming_insert_never_conflicts_with_a_mutation(
    c: Table, tmp_path: Path, store_url: str, warehouse: str, store: TxnStore
) -> None:
    d = Child(tmp_path, "d", store_url, warehouse, "del_a")
    with StreamingConnection(
        "c", record_writer=StrictJsonWriter(), store=store,
        options=StreamingOptions(housekeeping_interval_s=None),
    ) as conn:  # fmt: skip
        conn.begin_transaction()
        d.wait_ready()  # the delete holds its lock and its files, the insert its txn
        conn.write_many(
            json.dumps({"id": i, "v": "new", "n": i, "ds": "a"}).encode() for i in (100, 101)
        )
        conn.commit_transaction()
    rd = d.finish()
    assert "ok" in rd and rd["ok"]["rows_deleted"] == 10, rd
    # the delete's snapshot did not hold the inserted rows: they stay
    assert rows_of(c.read(), ["id", "ds"]) == [(i, "b") for i in range(10, 15)] + [
        (100, "a"),
        (101, "a"),
    ]
